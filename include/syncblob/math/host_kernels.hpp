// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Host math kernels on raw pointers, and the switches that choose how they run.
///
/// Every kernel has a portable path (Eigen maps, compiled with the consumer's flags) and, on x86-64
/// with g++ or clang (not under nvcc, not on MSVC), AVX2+FMA and AVX-512F variants compiled through
/// `[[gnu::target]]` attributes and chosen at run time with `__builtin_cpu_supports`, so a default
/// Release build (`-O3`, no `-march`) still runs at the width of the machine. `set_kernel_path`
/// forces one path (tests cover each).
///
/// Reductions are deterministic: the input is cut into fixed blocks of `reduction_block` elements,
/// each block is reduced by the path's kernel, and the block sums are added in order. The result
/// therefore depends on the path but not on the number of threads. On the automatic path a call's
/// path can depend on its size (`kernel_path_for`); the same input still gives the same result.
/// Large inputs are split over the threads of syncblob's pool (core/thread_pool.hpp): reductions in
/// whole blocks, element-wise operations in equal cache-line-aligned parts, from a size that follows
/// this machine's caches (`split_bytes`).

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "../core/element.hpp"
#include "../core/error.hpp"
#include "../core/thread_pool.hpp"
#include "detail/portable_kernels.hpp"
#include "detail/x86_kernels.hpp"
#include "device_kernels.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace math {

/// Which implementation the host kernels use.
enum class KernelPath : std::uint8_t {
    automatic,  ///< the widest this processor supports (the default; see `wide_stream_bytes`)
    portable,   ///< Eigen maps, vectorised as the consumer's flags allow
    avx2,       ///< AVX2 + FMA (+ F16C for half), chosen at run time
    avx512,     ///< AVX-512F, chosen at run time
};

/// "automatic", "portable", "avx2" or "avx512".
[[nodiscard]] constexpr std::string_view kernel_path_name(KernelPath p) noexcept {
    switch (p) {
        case KernelPath::automatic:
            return "automatic";
        case KernelPath::portable:
            return "portable";
        case KernelPath::avx2:
            return "avx2";
        case KernelPath::avx512:
            return "avx512";
    }
    return "?";
}

/// True when this build and this processor can run `p` (automatic and portable always can).
[[nodiscard]] inline bool kernel_path_supported(KernelPath p) noexcept {
    switch (p) {
        case KernelPath::automatic:
        case KernelPath::portable:
            return true;
        case KernelPath::avx2:
            return detail::x86::cpu_has_avx2();
        case KernelPath::avx512:
            return detail::x86::cpu_has_avx512();
    }
    return false;
}

/// The concrete paths this build and processor support, narrowest first (portable always).
[[nodiscard]] inline std::vector<KernelPath> supported_kernel_paths() {
    std::vector<KernelPath> paths{KernelPath::portable};
    for (const auto p : {KernelPath::avx2, KernelPath::avx512}) {
        if (kernel_path_supported(p)) {
            paths.push_back(p);
        }
    }
    return paths;
}

namespace detail {
inline std::atomic<KernelPath>& requested_path() noexcept {
    static std::atomic<KernelPath> path{KernelPath::automatic};
    return path;
}
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
inline KernelPath best_path() noexcept {
    static const KernelPath best = kernel_path_supported(KernelPath::avx512) ? KernelPath::avx512
                                   : kernel_path_supported(KernelPath::avx2) ? KernelPath::avx2
                                                                             : KernelPath::portable;
    return best;
}
inline KernelPath resolve(KernelPath p) noexcept {
    return p == KernelPath::automatic ? best_path() : p;
}
// The path the kernels run on, `automatic` resolved: what a kernel call reads (one relaxed load).
// It holds `automatic` only until the first kernel call or set_kernel_path resolves it.
inline std::atomic<KernelPath>& resolved_path() noexcept {
    static std::atomic<KernelPath> path{KernelPath::automatic};
    return path;
}
inline void request_path(KernelPath p) noexcept {
    requested_path().store(p, std::memory_order_relaxed);
    resolved_path().store(resolve(p), std::memory_order_relaxed);
}
// First kernel call: resolves the requested path, unless a concurrent set_kernel_path already did.
SYNCBLOB_NOINLINE inline KernelPath resolve_path() noexcept {
    KernelPath unresolved = KernelPath::automatic;
    resolved_path().compare_exchange_strong(unresolved, resolve(requested_path().load(std::memory_order_relaxed)),
                                            std::memory_order_relaxed);
    return resolved_path().load(std::memory_order_relaxed);
}
}  // namespace detail

/// Forces the host kernels onto one path (process-wide), or back to `automatic`.
/// \throws StateError when this build or processor cannot run `p`; the path is then unchanged.
inline void set_kernel_path(KernelPath p) {
    if (!kernel_path_supported(p)) {
        throw StateError("math::set_kernel_path: path " + std::string(kernel_path_name(p)) +
                         " is not supported by this build or processor (supported: portable" +
                         (kernel_path_supported(KernelPath::avx2) ? ", avx2" : "") +
                         (kernel_path_supported(KernelPath::avx512) ? ", avx512" : "") + ")");
    }
    detail::request_path(p);
}

/// The path set with `set_kernel_path` (`automatic` unless forced).
[[nodiscard]] inline KernelPath kernel_path() noexcept {
    return detail::requested_path().load(std::memory_order_relaxed);
}

/// The concrete path the kernels run on now (`automatic` resolved).
[[nodiscard]] inline KernelPath active_kernel_path() noexcept {
    const KernelPath p = detail::resolved_path().load(std::memory_order_relaxed);
    return p != KernelPath::automatic ? p : detail::resolve_path();
}

/// Restores the previous kernel path when it goes out of scope.
class ScopedKernelPath {
public:
    /// \throws StateError when `p` is not supported.
    explicit ScopedKernelPath(KernelPath p) : previous_(kernel_path()) { set_kernel_path(p); }
    ~ScopedKernelPath() { detail::request_path(previous_); }
    ScopedKernelPath(const ScopedKernelPath&) = delete;
    ScopedKernelPath& operator=(const ScopedKernelPath&) = delete;

private:
    KernelPath previous_;
};

/// Bytes a reduction block reads (the fixed chunking that makes reductions deterministic): a
/// multiple of every kernel's vector width, small enough that a reduction of 64 KiB can be split
/// over two cores. Each block restarts the kernel's accumulators and sums their lanes, which costs a
/// one-thread reduction 2-5 % against one pass over the whole array (docs/benchmarks.md, "What the
/// blocks cost on one thread").
inline constexpr std::int64_t reduction_block_bytes = std::int64_t{32} << 10;
/// Elements of T per reduction block of a reduction that reads `arrays` arrays (2 for dot).
template <class T, int arrays = 1>
inline constexpr std::int64_t reduction_block = reduction_block_bytes / std::int64_t{sizeof(T)} / arrays;

/// How an operation uses memory, which decides from what size a second thread pays for itself.
enum class SplitKind : std::uint8_t {
    reduction,  ///< reads and sums: asum, sumsq, dot
    update,     ///< reads two arrays and writes one of them: update (y -= x)
    scale,      ///< reads and writes one array: scale
};

/// Bytes (all arrays of a call together) from which a reduction or an update on the automatic path
/// runs the AVX2 kernels instead of the AVX-512 ones, on a processor that executes 512-bit
/// operations in two 256-bit halves (AMD Zen 4). Measured there on one thread, the 256-bit kernels
/// of `asum`, `sumsq`, `dot` and `update` ran at 0.99-1.22 times the speed of the 512-bit ones
/// (median 1.11) from 32 MiB of data, 0.96-1.11 (median 1.06) at 16 MiB and 0.93-1.11 (median 0.99)
/// below; `scale`'s at 0.94-1.04 at every size, so it stays on 512 bits (docs/benchmarks.md,
/// "Vector width for long streams"). A path forced with `set_kernel_path` is used at every size.
inline constexpr std::int64_t wide_stream_bytes = std::int64_t{16} << 20;

namespace detail {
// kernel_path_for with the processor's answers as arguments (tested on their own).
constexpr KernelPath path_for(KernelPath active, KernelPath requested, SplitKind kind, std::int64_t bytes,
                              bool halves) noexcept {
    return active == KernelPath::avx512 && requested == KernelPath::automatic && halves && kind != SplitKind::scale &&
                   bytes >= wide_stream_bytes
               ? KernelPath::avx2
               : active;
}
}  // namespace detail

/// The concrete path an operation of `kind` that touches `bytes` bytes runs on:
/// `active_kernel_path()`, except that on the automatic path a long reduction or update on a
/// processor that runs 512-bit operations in halves takes AVX2 (`wide_stream_bytes`).
[[nodiscard]] inline KernelPath kernel_path_for(SplitKind kind, std::int64_t bytes) noexcept {
    const KernelPath active = active_kernel_path();
    if (bytes < wide_stream_bytes || active != KernelPath::avx512) {  // most calls: nothing more to ask
        return active;
    }
    return detail::path_for(active, kernel_path(), kind, bytes,
                            detail::x86::cpu_runs_512_bits_in_halves() && kernel_path_supported(KernelPath::avx2));
}

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
// whatever the thread count. One block goes straight to `one`.
template <class Acc, class One, class Block>
Acc reduce_blocks(std::int64_t n, std::int64_t block_elements, std::int64_t bytes_touched, const One& one,
                  const Block& block) {
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

// The first kernel call of a process (or one racing with it): resolves the path, then dispatches
// again. Out of line, so the dispatcher itself makes only tail calls and needs no stack frame.
template <auto Block, class... Args>
SYNCBLOB_NOINLINE auto resolve_then(Args... args) {
    resolve_path();
    return Block(args...);
}
}  // namespace detail

// The switch from a path to a kernel; `unresolved` is what runs for `automatic`.
#define SYNCBLOB_MATH_SWITCH(path, unresolved, name, ...) \
    switch (path) {                                       \
        case KernelPath::avx512:                          \
            return detail::avx512::name(__VA_ARGS__);     \
        case KernelPath::avx2:                            \
            return detail::avx2::name(__VA_ARGS__);       \
        case KernelPath::portable:                        \
            return detail::fallback::name(__VA_ARGS__);   \
        case KernelPath::automatic:                       \
            break;                                        \
    }                                                     \
    return unresolved;

// The dispatch: one relaxed load, a switch and a jump into the kernel (the portable kernels are
// reached through detail::fallback, out of line, for the same reason as resolve_then).
#define SYNCBLOB_MATH_DISPATCH(name, ...)                                         \
    SYNCBLOB_MATH_SWITCH(detail::resolved_path().load(std::memory_order_relaxed), \
                         detail::resolve_then<&name##_block<T>>(__VA_ARGS__), name, __VA_ARGS__)

namespace detail {
template <FloatingElement T>
accumulator_t<T> asum_block(const T* x, std::int64_t n) {
    SYNCBLOB_MATH_DISPATCH(asum, x, n)
}
template <FloatingElement T>
accumulator_t<T> sumsq_block(const T* x, std::int64_t n) {
    SYNCBLOB_MATH_DISPATCH(sumsq, x, n)
}
template <FloatingElement T>
accumulator_t<T> dot_block(const T* x, const T* y, std::int64_t n) {
    SYNCBLOB_MATH_DISPATCH(dot, x, y, n)
}
template <FloatingElement T>
void sub_block(T* y, const T* x, std::int64_t n) {
    SYNCBLOB_MATH_DISPATCH(sub, y, x, n)
}
template <FloatingElement T>
void scale_block(T* x, accumulator_t<T> alpha, std::int64_t n) {
    SYNCBLOB_MATH_DISPATCH(scale, x, alpha, n)
}
}  // namespace detail

#undef SYNCBLOB_MATH_DISPATCH

// The dispatch of a call whose path was chosen for its size (kernel_path_for; always concrete).
#define SYNCBLOB_MATH_ON(name, ...) SYNCBLOB_MATH_SWITCH(path, detail::fallback::name(__VA_ARGS__), name, __VA_ARGS__)

namespace detail {
template <FloatingElement T>
accumulator_t<T> asum_on(KernelPath path, const T* x, std::int64_t n) {
    SYNCBLOB_MATH_ON(asum, x, n)
}
template <FloatingElement T>
accumulator_t<T> sumsq_on(KernelPath path, const T* x, std::int64_t n) {
    SYNCBLOB_MATH_ON(sumsq, x, n)
}
template <FloatingElement T>
accumulator_t<T> dot_on(KernelPath path, const T* x, const T* y, std::int64_t n) {
    SYNCBLOB_MATH_ON(dot, x, y, n)
}
template <FloatingElement T>
void sub_on(KernelPath path, T* y, const T* x, std::int64_t n) {
    SYNCBLOB_MATH_ON(sub, y, x, n)
}
template <FloatingElement T>
void scale_on(KernelPath path, T* x, accumulator_t<T> alpha, std::int64_t n) {
    SYNCBLOB_MATH_ON(scale, x, alpha, n)
}
}  // namespace detail

#undef SYNCBLOB_MATH_ON
#undef SYNCBLOB_MATH_SWITCH

/// Σ|x[i]| over host memory (any alignment), in `accumulator_t<T>`.
template <FloatingElement T>
[[nodiscard]] accumulator_t<T> asum(const T* x, std::int64_t n) {
    return detail::reduce_blocks<accumulator_t<T>>(
        n, reduction_block<T>, n * std::int64_t{sizeof(T)},
        [x](std::int64_t first, std::int64_t count) { return detail::asum_block(x + first, count); },
        [x](KernelPath path, std::int64_t first, std::int64_t count) {
            return detail::asum_on(path, x + first, count);
        });
}

/// Σx[i]² over host memory.
template <FloatingElement T>
[[nodiscard]] accumulator_t<T> sumsq(const T* x, std::int64_t n) {
    return detail::reduce_blocks<accumulator_t<T>>(
        n, reduction_block<T>, n * std::int64_t{sizeof(T)},
        [x](std::int64_t first, std::int64_t count) { return detail::sumsq_block(x + first, count); },
        [x](KernelPath path, std::int64_t first, std::int64_t count) {
            return detail::sumsq_on(path, x + first, count);
        });
}

/// Σx[i]·y[i] over host memory.
template <FloatingElement T>
[[nodiscard]] accumulator_t<T> dot(const T* x, const T* y, std::int64_t n) {
    return detail::reduce_blocks<accumulator_t<T>>(
        n, reduction_block<T, 2>, 2 * n * std::int64_t{sizeof(T)},
        [x, y](std::int64_t first, std::int64_t count) { return detail::dot_block(x + first, y + first, count); },
        [x, y](KernelPath path, std::int64_t first, std::int64_t count) {
            return detail::dot_on(path, x + first, y + first, count);
        });
}

/// y[i] -= x[i] over host memory (computed in `accumulator_t<T>`, rounded once to T).
template <FloatingElement T>
void sub(T* y, const T* x, std::int64_t n) {
    detail::for_elements(
        SplitKind::update, n, 3 * n * std::int64_t{sizeof(T)},
        [y, x](std::int64_t first, std::int64_t count) { detail::sub_block(y + first, x + first, count); },
        [y, x](KernelPath path, std::int64_t first, std::int64_t count) {
            detail::sub_on(path, y + first, x + first, count);
        });
}

/// x[i] *= alpha over host memory (computed in `accumulator_t<T>`, rounded once to T).
template <FloatingElement T>
void scale(T* x, accumulator_t<T> alpha, std::int64_t n) {
    detail::for_elements(
        SplitKind::scale, n, 2 * n * std::int64_t{sizeof(T)},
        [x, alpha](std::int64_t first, std::int64_t count) { detail::scale_block(x + first, alpha, count); },
        [x, alpha](KernelPath path, std::int64_t first, std::int64_t count) {
            detail::scale_on(path, x + first, alpha, count);
        });
}

}  // namespace math

SYNCBLOB_END_NAMESPACE
