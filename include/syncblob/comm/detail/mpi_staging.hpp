// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Where the MPI calls of `syncblob/comm/mpi.hpp` find the bytes: device memory for a device-aware
/// MPI (after the work queued on the arena's stream), or the arena's host memory, with the blobs
/// fresh on the device only staged through it and copied back after.

#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <string_view>
#include <vector>

#include "../../memory/head.hpp"
#include "../mpi_options.hpp"
#include "mpi_call.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace mpi::detail {

inline bool use_device(const Options& options) {
    return options.device_aware.value_or(mpi::device_aware());
}

// Waits until the work queued on `stream` is done: MPI reads and writes device memory outside it.
template <class Device>
void wait_stream(typename Device::stream_type stream) {
    auto done = Device::record(stream);
    Device::wait(done);
}

// The blobs in [first, end) whose `part` is fresh on the device only: their result goes back there.
template <class Buffers>
std::vector<std::size_t> device_only(const Buffers& buffers, std::size_t first, std::size_t end) {
    std::vector<std::size_t> out;
    for (std::size_t i = first; i < end; ++i) {
        if (buffers[i]->size() != 0 && buffers[i]->head() == Head::at_device) {
            out.push_back(i);
        }
    }
    return out;
}

template <class Buffers>
void push_back_to_device(const Buffers& buffers, const std::vector<std::size_t>& blobs) {
    for (const std::size_t i : blobs) {
        buffers[i]->push_to_device_async();
    }
}

inline int comm_size(MPI_Comm comm, std::string_view op) {
    int size = 0;
    check(MPI_Comm_size(comm, &size), op, "MPI_Comm_size");
    return size;
}

// Elements per piece for Options::piece_bytes (0: no limit but MPI's count).
template <class T>
std::size_t piece_elements(std::size_t piece_bytes) {
    return piece_bytes == 0 ? max_count : std::max<std::size_t>(piece_bytes / sizeof(T), 1);
}

}  // namespace mpi::detail

SYNCBLOB_END_NAMESPACE
