// SPDX-License-Identifier: BSD-2-Clause
#pragma once
// The benchmark's own memory-bandwidth probes, one per access pattern of the math kernels. They are
// compiled with -march=native in every build (bandwidth.cpp), so they measure the machine, not the
// consumer's flags: integer streams (exactly vectorisable at any width, no floating-point ordering
// to respect) over words of the same size as the kernel's element.

#include <cstddef>
#include <cstdint>

namespace syncblob_bench {

/// Access patterns: one read stream (asum, sumsq), two read streams (dot), read-modify-write of one
/// array (scale), read-modify-write of one array with a second read stream (update), STREAM triad.
/// And one that is not only memory: `read1_abs`, one read stream with asum's own arithmetic (each
/// element's magnitude added in floating point: clear the sign, add), the best an ordinary loop
/// compiled for this machine makes of asum's work, for the sizes where that arithmetic and not the
/// memory is what limits it.
enum class Pattern { read1, read2, rmw1, rmw2, triad, read1_abs };

/// Runs `pattern` over words of `word_bytes` (4 or 8) at a, b, c, elements [first, last). Returns a
/// value that depends on what was read (so nothing is optimised away).
std::uint64_t bandwidth_probe(Pattern pattern, std::size_t word_bytes, void* a, const void* b, const void* c,
                              std::size_t first, std::size_t last);

}  // namespace syncblob_bench
