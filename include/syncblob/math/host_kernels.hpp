// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Host math on raw pointers: `asum`, `sumsq`, `dot`, `sub` and `scale`, each an operation of
/// math/operations.hpp registered with the host dispatch below. The dispatch splits a call
/// over threads from the sizes of math/split.hpp and runs each part on the instruction set of
/// math/kernel_path.hpp: the portable kernels (Eigen's packets, the consumer's flags) or the AVX2
/// and AVX-512 ones, all the same loops (math/detail/lane_loops.hpp) over the same operations.
///
/// Reductions are deterministic: the input is cut into fixed blocks of `reduction_block` elements,
/// each block is reduced by the path's kernel, and the block sums are added in order. The result
/// therefore depends on the path but not on the number of threads. On the automatic path a call's
/// path can depend on its size (`kernel_path_for`); the same input still gives the same result.

#include <atomic>
#include <concepts>
#include <cstdint>

#include "../core/config.hpp"
#include "../core/element.hpp"
#include "detail/portable_kernels.hpp"
#include "detail/x86_kernels.hpp"
#include "kernel_path.hpp"
#include "operations.hpp"
#include "split.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace math {

namespace detail {

template <class Op, FloatingElement T, std::same_as<T>... In>
accumulator_t<T> reduce_block(Op op, std::int64_t n, const T* x, const In*... in);
template <class Op, FloatingElement T, std::same_as<T>... In>
void transform_block(Op op, std::int64_t n, T* y, const In*... in);

// The first kernel call of a process (or one racing with it): resolves the path, then dispatches
// again. Out of line, so the dispatchers themselves make only tail calls and need no stack frame.
template <class Op, FloatingElement T, std::same_as<T>... In>
SYNCBLOB_NOINLINE accumulator_t<T> resolve_then_reduce(Op op, std::int64_t n, const T* x, const In*... in) {
    resolve_path();
    return reduce_block(op, n, x, in...);
}
template <class Op, FloatingElement T, std::same_as<T>... In>
SYNCBLOB_NOINLINE void resolve_then_transform(Op op, std::int64_t n, T* y, const In*... in) {
    resolve_path();
    transform_block(op, n, y, in...);
}

// The kernel of `path`: a switch and a jump. The automatic path, which only the first call of a
// process sees (kernel_path_for returns a concrete one), resolves the path first.
template <class Op, FloatingElement T, std::same_as<T>... In>
accumulator_t<T> reduce_on(KernelPath path, Op op, std::int64_t n, const T* x, const In*... in) {
    switch (path) {
        case KernelPath::avx512:
            return avx512::reduce(op, n, x, in...);
        case KernelPath::avx2:
            return avx2::reduce(op, n, x, in...);
        case KernelPath::portable:
            return portable::reduce(op, n, x, in...);
        case KernelPath::automatic:
            break;
    }
    return resolve_then_reduce(op, n, x, in...);
}
template <class Op, FloatingElement T, std::same_as<T>... In>
void transform_on(KernelPath path, Op op, std::int64_t n, T* y, const In*... in) {
    switch (path) {
        case KernelPath::avx512:
            return avx512::transform(op, n, y, in...);
        case KernelPath::avx2:
            return avx2::transform(op, n, y, in...);
        case KernelPath::portable:
            return portable::transform(op, n, y, in...);
        case KernelPath::automatic:
            break;
    }
    resolve_then_transform(op, n, y, in...);
}

// One kernel call on the resolved path: one relaxed load, a switch and a jump into the kernel.
template <class Op, FloatingElement T, std::same_as<T>... In>
accumulator_t<T> reduce_block(Op op, std::int64_t n, const T* x, const In*... in) {
    return reduce_on(resolved_path().load(std::memory_order_relaxed), op, n, x, in...);
}
template <class Op, FloatingElement T, std::same_as<T>... In>
void transform_block(Op op, std::int64_t n, T* y, const In*... in) {
    transform_on(resolved_path().load(std::memory_order_relaxed), op, n, y, in...);
}

/// The host dispatch of a reduction over x and the inputs: block by block, over threads from its
/// split size, each block on its path.
template <class Op, FloatingElement T, std::same_as<T>... In>
[[nodiscard]] SYNCBLOB_ALWAYS_INLINE accumulator_t<T> reduce(Op op, std::int64_t n, const T* x, const In*... in) {
    constexpr std::int64_t arrays = 1 + sizeof...(In);
    return reduce_blocks<accumulator_t<T>>(
        n, reduction_block<T, arrays>, arrays * n * std::int64_t{sizeof(T)},
        [op, x, in...](std::int64_t first, std::int64_t count) {
            return reduce_block(op, count, x + first, (in + first)...);
        },
        [op, x, in...](KernelPath path, std::int64_t first, std::int64_t count) {
            return reduce_on(path, op, count, x + first, (in + first)...);
        });
}

/// The host dispatch of an element-wise operation on y (read and written) and the inputs (read).
template <class Op, FloatingElement T, std::same_as<T>... In>
SYNCBLOB_ALWAYS_INLINE void transform(Op op, std::int64_t n, T* y, const In*... in) {
    constexpr std::int64_t arrays = 2 + sizeof...(In);  // y read and written, each input read
    for_elements(
        sizeof...(In) == 0 ? SplitKind::scale : SplitKind::update, n, arrays * n * std::int64_t{sizeof(T)},
        [op, y, in...](std::int64_t first, std::int64_t count) {
            transform_block(op, count, y + first, (in + first)...);
        },
        [op, y, in...](KernelPath path, std::int64_t first, std::int64_t count) {
            transform_on(path, op, count, y + first, (in + first)...);
        });
}

}  // namespace detail

/// Σ|x[i]| over host memory (any alignment), in `accumulator_t<T>`.
template <FloatingElement T>
[[nodiscard]] accumulator_t<T> asum(const T* x, std::int64_t n) {
    return detail::reduce(detail::Asum{}, n, x);
}

/// Σx[i]² over host memory.
template <FloatingElement T>
[[nodiscard]] accumulator_t<T> sumsq(const T* x, std::int64_t n) {
    return detail::reduce(detail::Sumsq{}, n, x);
}

/// Σx[i]·y[i] over host memory.
template <FloatingElement T>
[[nodiscard]] accumulator_t<T> dot(const T* x, const T* y, std::int64_t n) {
    return detail::reduce(detail::Dot{}, n, x, y);
}

/// y[i] -= x[i] over host memory (computed in `accumulator_t<T>`, rounded once to T).
template <FloatingElement T>
void sub(T* y, const T* x, std::int64_t n) {
    detail::transform(detail::Sub{}, n, y, x);
}

/// x[i] *= alpha over host memory (computed in `accumulator_t<T>`, rounded once to T).
template <FloatingElement T>
void scale(T* x, accumulator_t<T> alpha, std::int64_t n) {
    detail::transform(detail::Scale<accumulator_t<T>>{alpha}, n, x);
}

}  // namespace math

SYNCBLOB_END_NAMESPACE
