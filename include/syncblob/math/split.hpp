// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// One core or several: from what size a host kernel call is split over the threads of syncblob's
/// pool (core/thread_pool.hpp), and how. Reductions are cut into fixed blocks of
/// `reduction_block` elements whose sums are added in order, so the result depends on the kernel
/// path but not on the number of threads; a split reduction runs whole blocks per thread.
/// Element-wise operations are split in equal cache-line-aligned parts. The size follows this
/// machine's caches (`split_bytes`) unless `set_parallel_threshold` forces an element count.

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "../core/config.hpp"
#include "../core/error.hpp"
#include "../core/thread_pool.hpp"
#include "kernel_path.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace math {

namespace detail {
inline std::atomic<std::int64_t>& parallel_threshold_value() noexcept {
    static std::atomic<std::int64_t> value{0};  // 0: automatic
    return value;
}
// One core's L1 data cache in bytes, 0 until first read: a constant-initialized value, so that the
// split rule inlined into every kernel call costs one load and no guarded static (whose
// initialization, inlined too, gave every call the stack frame of the sysfs reads).
inline std::atomic<std::int64_t>& l1_bytes_value() noexcept {
    static std::atomic<std::int64_t> value{0};
    return value;
}
SYNCBLOB_NOINLINE inline std::int64_t read_l1_bytes() noexcept {
    const auto bytes = static_cast<std::int64_t>(parallel::cache_bytes(1, std::size_t{32} << 10));
    l1_bytes_value().store(bytes, std::memory_order_relaxed);
    return bytes;
}
inline std::int64_t l1_bytes() noexcept {
    const std::int64_t bytes = l1_bytes_value().load(std::memory_order_relaxed);
    return bytes != 0 ? bytes : read_l1_bytes();
}
}  // namespace detail

/// Bytes a reduction block reads (the fixed chunking that makes reductions deterministic): a
/// multiple of every kernel's vector width, small enough that a reduction of 64 KiB can be split
/// over two cores. Each block restarts the kernel's accumulators and sums their lanes, which costs a
/// one-thread reduction 2-5 % against one pass over the whole array (docs/benchmarks.md, "What the
/// blocks cost on one thread").
inline constexpr std::int64_t reduction_block_bytes = std::int64_t{32} << 10;
/// Elements of T per reduction block of a reduction that reads `arrays` arrays (2 for dot).
template <class T, int arrays = 1>
inline constexpr std::int64_t reduction_block = reduction_block_bytes / std::int64_t{sizeof(T)} / arrays;

namespace detail {
// split_bytes(kind) in units of one core's L1 data cache.
constexpr std::int64_t split_multiple(SplitKind kind) noexcept {
    switch (kind) {
        case SplitKind::reduction:
            return 2;
        case SplitKind::update:
            return 3;
        case SplitKind::scale:
            return 6;
    }
    return 2;
}
}  // namespace detail

/// The bytes an operation of `kind` touches (all its arrays together) from which it is split over
/// threads, unless `set_parallel_threshold` forces an element count: 2, 3 and 6 times one core's
/// L1 data cache for a reduction, an update and a scale. Past about twice its L1 a core streams
/// from L2, while two cores each keep their half in L1 (or stream from two L2s); the wake-up of a
/// second thread (a few hundred ns) is repaid from there, later for scale, whose one core streams
/// a single array fastest. Measured with the benchmark's "syncblob-forced" rows (docs/benchmarks.md,
/// "Threads"); a reduction also needs two blocks (`reduction_block`) to split.
[[nodiscard]] inline std::int64_t split_bytes(SplitKind kind) noexcept {
    return detail::split_multiple(kind) * detail::l1_bytes();
}

/// The element count forced with `set_parallel_threshold`, or 0 when the split follows the caches
/// (`split_bytes`, the default).
[[nodiscard]] inline std::int64_t parallel_threshold() noexcept {
    return detail::parallel_threshold_value().load(std::memory_order_relaxed);
}
/// Forces the element count from which every kernel splits over threads; 0 returns to the rule of
/// `split_bytes`. \throws StateError when `n` < 0
inline void set_parallel_threshold(std::int64_t n) {
    if (n < 0) {
        throw StateError("math::set_parallel_threshold: threshold " + std::to_string(n) +
                         " must be at least 1 (or 0 for the automatic rule)");
    }
    detail::parallel_threshold_value().store(n, std::memory_order_relaxed);
}
/// Threads a large kernel may use: `parallel::max_threads()` (the same setting).
[[nodiscard]] inline unsigned max_threads() noexcept {
    return parallel::max_threads();
}
/// `parallel::set_max_threads`. \throws StateError when `n` is 0 or above 64
inline void set_max_threads(unsigned n) {
    parallel::set_max_threads(n);
}

namespace detail {

// Threads for an operation of `kind` over `n` elements touching `bytes_touched` bytes, cut into at
// most `parts` pieces.
inline unsigned threads_for(SplitKind kind, std::int64_t n, std::int64_t bytes_touched, std::int64_t parts) noexcept {
    const std::int64_t forced = parallel_threshold();
    const bool split = forced > 0 ? n >= forced : bytes_touched >= split_bytes(kind);
    return split ? parallel::threads_for(parts) : 1u;
}

// What a part of a split call needs, in one cache line that the part's closure holds by value. A
// worker reaches the closure through one pointer and finds everything there; with the captures by
// reference it followed pointers into several lines of the caller's frame, written just before the
// call, each a transfer from the other core (measured: split reductions of 64-128 KiB 10-20 %
// slower than one kernel call per half, docs/benchmarks.md).
template <class Body, class Out = void>
struct alignas(64) SplitJob {
    Body body;           // the kernel's lambda: body(first, count)
    std::int64_t n;      // elements in all
    std::int64_t step;   // elements per block (reductions) or per granule (element-wise)
    std::int64_t count;  // blocks or granules
    Out* out;            // where a reduction's parts write their block sums
    unsigned threads;    // parts
    KernelPath path;     // the path of the whole call (kernel_path_for)
};

// reduce_blocks for more than one block: out of line (as for_many_elements), since it runs only
// where a call costs microseconds, and inlined it would give every small call a stack frame. `block`
// is taken by value: a kernel's lambda (two pointers, or a pointer and a scalar) then travels in
// registers, and the caller stores nothing on the way to a one-block call. block(path, first, count)
// returns the sum of one block on the path chosen once for the whole call.
template <class Acc, class Block>
SYNCBLOB_NOINLINE Acc reduce_many_blocks(std::int64_t n, std::int64_t block_elements, std::int64_t bytes_touched,
                                         Block block) {
    const std::int64_t blocks = (n + block_elements - 1) / block_elements;
    const KernelPath path = kernel_path_for(SplitKind::reduction, bytes_touched);
    const auto one = [&](std::int64_t b) {
        const std::int64_t first = b * block_elements;
        return block(path, first, std::min(block_elements, n - first));
    };
    const unsigned threads = threads_for(SplitKind::reduction, n, bytes_touched, blocks);
    Acc total = 0;
    if (threads <= 1) {
        for (std::int64_t b = 0; b < blocks; ++b) {
            total += one(b);
        }
        return total;
    }
    // The block sums, added in block order below (on the stack up to 512 blocks).
    std::array<Acc, 512> few;
    std::vector<Acc> many(blocks > 512 ? static_cast<std::size_t>(blocks) : 0);
    Acc* const partial = blocks > 512 ? many.data() : few.data();
    // Everything a part needs, by value in one cache line of the closure (see SplitJob).
    const SplitJob<Block, Acc> job{block, n, block_elements, blocks, partial, threads, path};
    static_assert(sizeof(job) == 64, "a part's job is one cache line");
    parallel::run(threads, [job](unsigned t) {  // part t: a contiguous run of whole blocks
        const std::int64_t last = job.count * (t + 1) / job.threads;
        for (std::int64_t b = job.count * t / job.threads; b < last; ++b) {
            const std::int64_t first = b * job.step;
            job.out[b] = job.body(job.path, first, std::min(job.step, job.n - first));
        }
    });
    for (std::int64_t b = 0; b < blocks; ++b) {
        total += partial[b];
    }
    return total;
}

// Reduces [0, n) block by block: one(first, count) and block(path, first, count) return a block's
// sum (one on the path of small calls, block on the path given); block sums are added in order
// whatever the thread count. One block goes straight to `one`. Always inlined, as for_elements: a
// one-block call then jumps from the caller into the kernel's dispatch without a frame of its own.
template <class Acc, class One, class Block>
SYNCBLOB_ALWAYS_INLINE Acc reduce_blocks(std::int64_t n, std::int64_t block_elements, std::int64_t bytes_touched,
                                         const One& one, const Block& block) {
    return n <= block_elements ? one(std::int64_t{0}, n)
                               : reduce_many_blocks<Acc>(n, block_elements, bytes_touched, block);
}

// Elements per part of a split element-wise operation are a multiple of this (a 64-byte line of
// the narrowest element type), so no two threads write one cache line.
inline constexpr std::int64_t split_granule = 64;

// for_elements for a call that splits (or might, under a forced threshold): out of line and by
// value, as reduce_many_blocks; body(path, first, count) runs on the path chosen for the call.
template <class Body>
SYNCBLOB_NOINLINE void for_many_elements(SplitKind kind, std::int64_t n, std::int64_t bytes_touched, Body body) {
    const std::int64_t granules = (n + split_granule - 1) / split_granule;
    const unsigned threads = n > split_granule ? threads_for(kind, n, bytes_touched, granules) : 1u;
    const KernelPath path = kernel_path_for(kind, bytes_touched);
    if (threads <= 1) {
        body(path, std::int64_t{0}, n);
        return;
    }
    const SplitJob<Body> job{body, n, split_granule, granules, nullptr, threads, path};
    static_assert(sizeof(job) == 64, "a part's job is one cache line");
    parallel::run(threads, [job](unsigned t) {
        const std::int64_t first = std::min(job.n, job.count * t / job.threads * job.step);
        const std::int64_t last = std::min(job.n, job.count * (t + 1) / job.threads * job.step);
        job.body(job.path, first, last - first);
    });
}

// Applies small(first, count), or body(path, first, count) on the path chosen for the call, to
// [0, n), split over threads when the operation touches enough bytes (each element is independent,
// so the split changes nothing in the result). Always inlined, so a small call goes from the caller
// straight into the kernel's dispatch; anything more is out of line (with the rule inlined here too,
// compilers kept the whole of it out of line: a call, a stack frame and the kernel's pointers
// spilled to memory on every small call).
template <class Small, class Body>
SYNCBLOB_ALWAYS_INLINE void for_elements(SplitKind kind, std::int64_t n, std::int64_t bytes_touched, const Small& small,
                                         const Body& body) {
    // No split below split_bytes. Below 32 KiB no rule splits (no L1 is smaller than 16 KiB), so the
    // common small call does not even load the L1 size; that reads as 0 until the first call past
    // 32 KiB has looked it up (out of line), so this path never calls anything but the kernel.
    if (parallel_threshold() == 0 &&
        (bytes_touched < (std::int64_t{32} << 10) ||
         bytes_touched < split_multiple(kind) * l1_bytes_value().load(std::memory_order_relaxed))) {
        small(std::int64_t{0}, n);
        return;
    }
    for_many_elements(kind, n, bytes_touched, body);
}
}  // namespace detail

}  // namespace math

SYNCBLOB_END_NAMESPACE
