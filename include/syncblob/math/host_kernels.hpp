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
/// therefore depends on the path but not on the number of threads. Inputs of at least
/// `parallel_threshold()` elements are split over up to `max_threads()` threads (whole blocks each).

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "../core/element.hpp"
#include "../core/error.hpp"
#include "detail/portable_kernels.hpp"
#include "detail/x86_kernels.hpp"
#include "device_kernels.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace math {

/// Which implementation the host kernels use.
enum class KernelPath : std::uint8_t {
    automatic,  ///< the widest this processor supports (the default)
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
    static std::atomic<std::int64_t> value{std::int64_t{1} << 26};
    return value;
}
inline std::atomic<unsigned>& max_threads_value() noexcept {
    static std::atomic<unsigned> value{std::clamp(std::thread::hardware_concurrency(), 1u, 2u)};
    return value;
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

/// Elements per reduction block (the fixed chunking that makes reductions deterministic).
inline constexpr std::int64_t reduction_block = std::int64_t{1} << 16;

/// Inputs of at least this many elements are split over `max_threads()` threads. Default 2^26:
/// on the project's shared two-core machines a second thread only broke even from there
/// (docs/benchmarks.md); on an idle machine measure with the benchmark's "syncblob-forced" rows.
[[nodiscard]] inline std::int64_t parallel_threshold() noexcept {
    return detail::parallel_threshold_value().load(std::memory_order_relaxed);
}
/// Sets the element count from which kernels use several threads. \throws StateError when `n` < 1
inline void set_parallel_threshold(std::int64_t n) {
    if (n < 1) {
        throw StateError("math::set_parallel_threshold: threshold " + std::to_string(n) + " must be at least 1");
    }
    detail::parallel_threshold_value().store(n, std::memory_order_relaxed);
}
/// Threads a large kernel may use (default: min(2, hardware threads)); 1 turns threading off.
[[nodiscard]] inline unsigned max_threads() noexcept {
    return detail::max_threads_value().load(std::memory_order_relaxed);
}
/// \throws StateError when `n` is 0 or above 64
inline void set_max_threads(unsigned n) {
    if (n < 1 || n > 64) {
        throw StateError("math::set_max_threads: " + std::to_string(n) + " threads, expected 1 to 64");
    }
    detail::max_threads_value().store(n, std::memory_order_relaxed);
}

namespace detail {

// Number of threads for `n` elements cut into `blocks` pieces of work.
inline unsigned threads_for(std::int64_t n, std::int64_t blocks) noexcept {
    if (n < parallel_threshold() || blocks < 2) {
        return 1;
    }
    return static_cast<unsigned>(std::min<std::int64_t>(max_threads(), blocks));
}

// Runs body(first_block, last_block) over [0, blocks) split into `threads` contiguous ranges, the
// first on the calling thread. If a thread cannot be started its range runs on the calling thread.
template <class Body>
void run_blocks(std::int64_t blocks, unsigned threads, const Body& body) {
    std::vector<std::thread> workers;
    std::vector<std::exception_ptr> errors(threads);
    const auto range = [&](unsigned t) { return blocks * static_cast<std::int64_t>(t) / threads; };
    for (unsigned t = 1; t < threads; ++t) {
        try {
            workers.emplace_back([&, t] {
                try {
                    body(range(t), range(t + 1));
                } catch (...) {
                    errors[t] = std::current_exception();
                }
            });
        } catch (...) {  // no thread: do this range here
            body(range(t), range(t + 1));
        }
    }
    try {
        body(range(0), range(1));
    } catch (...) {
        errors[0] = std::current_exception();
    }
    for (auto& w : workers) {
        w.join();
    }
    for (auto& e : errors) {
        if (e) {
            std::rethrow_exception(e);
        }
    }
}

// reduce_blocks for more than one block: out of line (as for_many_blocks), since it runs only where
// a call costs microseconds, and inlined it would give every small call a stack frame. `block` is
// taken by value: a kernel's lambda (two pointers, or a pointer and a scalar) then travels in
// registers, and the caller stores nothing on the way to a one-block call.
template <class Acc, class Block>
SYNCBLOB_NOINLINE Acc reduce_many_blocks(std::int64_t n, Block block) {
    const std::int64_t blocks = (n + reduction_block - 1) / reduction_block;
    const auto one = [&](std::int64_t b) {
        const std::int64_t first = b * reduction_block;
        return block(first, std::min(reduction_block, n - first));
    };
    const unsigned threads = threads_for(n, blocks);
    Acc total = 0;
    if (threads <= 1) {
        for (std::int64_t b = 0; b < blocks; ++b) {
            total += one(b);
        }
        return total;
    }
    std::vector<Acc> partial(static_cast<std::size_t>(blocks));
    run_blocks(blocks, threads, [&](std::int64_t first, std::int64_t last) {
        for (std::int64_t b = first; b < last; ++b) {
            partial[static_cast<std::size_t>(b)] = one(b);
        }
    });
    for (const Acc p : partial) {
        total += p;
    }
    return total;
}

// Reduces [0, n) block by block: block(first, count) returns the block's sum; block sums are added
// in order whatever the thread count. One block goes straight to `block`.
template <class Acc, class Block>
Acc reduce_blocks(std::int64_t n, const Block& block) {
    return n <= reduction_block ? block(std::int64_t{0}, n) : reduce_many_blocks<Acc>(n, block);
}

// for_blocks for more than one block (out of line and by value, as reduce_many_blocks).
template <class Body>
SYNCBLOB_NOINLINE void for_many_blocks(std::int64_t n, Body body) {
    const std::int64_t blocks = (n + reduction_block - 1) / reduction_block;
    const unsigned threads = threads_for(n, blocks);
    if (threads <= 1) {
        body(std::int64_t{0}, n);
        return;
    }
    run_blocks(blocks, threads, [&](std::int64_t first, std::int64_t last) {
        const std::int64_t begin = first * reduction_block;
        body(begin, std::min(n, last * reduction_block) - begin);
    });
}

// Applies body(first, count) to [0, n), split over threads for large n. One block goes straight to
// `body`.
template <class Body>
void for_blocks(std::int64_t n, const Body& body) {
    if (n <= reduction_block) {
        body(std::int64_t{0}, n);
        return;
    }
    for_many_blocks(n, body);
}

// The first kernel call of a process (or one racing with it): resolves the path, then dispatches
// again. Out of line, so the dispatcher itself makes only tail calls and needs no stack frame.
template <auto Block, class... Args>
SYNCBLOB_NOINLINE auto resolve_then(Args... args) {
    resolve_path();
    return Block(args...);
}
}  // namespace detail

// The dispatch: one relaxed load, a switch and a jump into the kernel (the portable kernels are
// reached through detail::fallback, out of line, for the same reason as resolve_then).
#define SYNCBLOB_MATH_DISPATCH(name, ...)                              \
    switch (detail::resolved_path().load(std::memory_order_relaxed)) { \
        case KernelPath::avx512:                                       \
            return detail::avx512::name(__VA_ARGS__);                  \
        case KernelPath::avx2:                                         \
            return detail::avx2::name(__VA_ARGS__);                    \
        case KernelPath::portable:                                     \
            return detail::fallback::name(__VA_ARGS__);                \
        case KernelPath::automatic:                                    \
            break;                                                     \
    }                                                                  \
    return detail::resolve_then<&name##_block<T>>(__VA_ARGS__);

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

/// Σ|x[i]| over host memory (any alignment), in `accumulator_t<T>`.
template <FloatingElement T>
[[nodiscard]] accumulator_t<T> asum(const T* x, std::int64_t n) {
    return detail::reduce_blocks<accumulator_t<T>>(
        n, [x](std::int64_t first, std::int64_t count) { return detail::asum_block(x + first, count); });
}

/// Σx[i]² over host memory.
template <FloatingElement T>
[[nodiscard]] accumulator_t<T> sumsq(const T* x, std::int64_t n) {
    return detail::reduce_blocks<accumulator_t<T>>(
        n, [x](std::int64_t first, std::int64_t count) { return detail::sumsq_block(x + first, count); });
}

/// Σx[i]·y[i] over host memory.
template <FloatingElement T>
[[nodiscard]] accumulator_t<T> dot(const T* x, const T* y, std::int64_t n) {
    return detail::reduce_blocks<accumulator_t<T>>(
        n, [x, y](std::int64_t first, std::int64_t count) { return detail::dot_block(x + first, y + first, count); });
}

/// y[i] -= x[i] over host memory (computed in `accumulator_t<T>`, rounded once to T).
template <FloatingElement T>
void sub(T* y, const T* x, std::int64_t n) {
    detail::for_blocks(
        n, [y, x](std::int64_t first, std::int64_t count) { detail::sub_block(y + first, x + first, count); });
}

/// x[i] *= alpha over host memory (computed in `accumulator_t<T>`, rounded once to T).
template <FloatingElement T>
void scale(T* x, accumulator_t<T> alpha, std::int64_t n) {
    detail::for_blocks(
        n, [x, alpha](std::int64_t first, std::int64_t count) { detail::scale_block(x + first, alpha, count); });
}

}  // namespace math

SYNCBLOB_END_NAMESPACE
