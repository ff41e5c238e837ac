// SPDX-License-Identifier: BSD-2-Clause
#pragma once
// What the CUDA stand-in (standin.cpp) counts: each runtime, cuBLAS and NCCL call a program linked
// with it made, by name ("cudaStreamSynchronize", "cudaMalloc", "cudaMemcpyAsync D->H", ...).

#include <cstdint>
#include <map>
#include <string>

namespace syncblob_standin {

/// How many times the call `name` was made since the last `reset`.
std::uint64_t calls(const std::string& name);
/// Every call counted since the last `reset`, by name.
std::map<std::string, std::uint64_t> all_calls();
/// How many `cudaFreeAsync` calls named `stream` since the last `reset`.
std::uint64_t frees_on(const void* stream);
/// Forgets the counts.
void reset();
/// Makes the memory pools fail an allocation (`cudaErrorMemoryAllocation`) that would take what all
/// of them hold past `bytes`, unless a cached block serves it; 0: no limit.
void set_device_capacity(std::uint64_t bytes);
/// How many devices the stand-in has (1 until set; at least 1). Device memory is host memory whatever
/// the device; what differs is the device of each stream, event and block.
void set_device_count(int devices);

}  // namespace syncblob_standin
