// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Device math for `cuda::Device` (and `cuda::AsyncPool`): the specialisation of `DeviceKernels` that syncblob's math
/// functions call when a blob's data is fresh on a CUDA device. An operation cuBLAS has (every one of
/// float and double) runs through its 64-bit entry points and works from any compiler; the others
/// (half and bfloat16) run the custom kernels (syncblob/cuda/kernels.cuh) on the same operation
/// functors as the host kernels, so a translation unit that needs them must be compiled by nvcc —
/// from a host compiler it is a compile error that says so.

#include <cstdint>

#include "../core/element.hpp"
#include "../math/device_kernels.hpp"
#include "../math/operations.hpp"
#include "async_pool.hpp"
#include "cublas.hpp"
#include "device.hpp"

#if SYNCBLOB_NVCC
#include "kernels.cuh"
#else
SYNCBLOB_BEGIN_NAMESPACE
namespace cuda::detail {
template <class T>
struct CustomKernels {
    static_assert(syncblob::detail::always_false<T>,
                  "syncblob: half and bfloat16 device math on cuda::Device (and any operation cuBLAS does not "
                  "have) runs custom CUDA kernels, so this translation unit must be compiled by nvcc (a .cu file "
                  "linked to syncblob::cuda). float and double device math needs only cuBLAS and compiles with "
                  "any C++ compiler.");
    // Declared only, so that the assertion above is the one error a host compiler reports.
    template <class Op, class... In>
    static accumulator_t<T> reduce(Op op, std::int64_t n, cudaStream_t stream, const T* x, const In*... in);
    template <class Op, class... In>
    static void transform(Op op, std::int64_t n, cudaStream_t stream, T* y, const In*... in);
    template <class Op, class... In>
    static void reduce_into(Op op, std::int64_t n, cudaStream_t stream, accumulator_t<T>* out, const T* x,
                            const In*... in);
};
}  // namespace cuda::detail
SYNCBLOB_END_NAMESPACE
#endif

SYNCBLOB_BEGIN_NAMESPACE

namespace cuda::detail {
// The operations cuBLAS has, as its calls (float and double: the overloads of cuda::blas). An
// operation or element type without one here runs the custom kernels.
template <class T>
auto blas_call(math::detail::Asum, std::int64_t n, cudaStream_t s, const T* x) -> decltype(blas::asum(x, n, s)) {
    return blas::asum(x, n, s);
}
// Σx² as the dot product of x with itself: the sum the host computes, not nrm2's scaled one.
template <class T>
auto blas_call(math::detail::Sumsq, std::int64_t n, cudaStream_t s, const T* x) -> decltype(blas::dot(x, x, n, s)) {
    return blas::dot(x, x, n, s);
}
template <class T>
auto blas_call(math::detail::Dot, std::int64_t n, cudaStream_t s, const T* x, const T* y)
    -> decltype(blas::dot(x, y, n, s)) {
    return blas::dot(x, y, n, s);
}
template <class T>
auto blas_call(math::detail::Sub, std::int64_t n, cudaStream_t s, T* y, const T* x)
    -> decltype(blas::axpy(T{-1}, x, y, n, s)) {
    blas::axpy(T{-1}, x, y, n, s);
}
template <class T, class A>
auto blas_call(math::detail::Scale<A> op, std::int64_t n, cudaStream_t s, T* x)
    -> decltype(blas::scal(op.alpha, x, n, s)) {
    blas::scal(op.alpha, x, n, s);
}

/// True when cuBLAS has `op` for these pointers.
template <class Op, class... P>
inline constexpr bool has_blas_call = requires(Op op, std::int64_t n, cudaStream_t s, P... p) {
    blas_call(op, n, s, p...);
};

template <class T>
auto blas_into(math::detail::Asum, std::int64_t n, cudaStream_t s, T* out, const T* x)
    -> decltype(blas::asum_into(x, n, s, out)) {
    blas::asum_into(x, n, s, out);
}
template <class T>
auto blas_into(math::detail::Sumsq, std::int64_t n, cudaStream_t s, T* out, const T* x)
    -> decltype(blas::dot_into(x, x, n, s, out)) {
    blas::dot_into(x, x, n, s, out);
}
template <class T>
auto blas_into(math::detail::Dot, std::int64_t n, cudaStream_t s, T* out, const T* x, const T* y)
    -> decltype(blas::dot_into(x, y, n, s, out)) {
    blas::dot_into(x, y, n, s, out);
}

template <class Op, class... P>
inline constexpr bool has_blas_into = requires(Op op, std::int64_t n, cudaStream_t s, P... p) {
    blas_into(op, n, s, p...);
};
}  // namespace cuda::detail

/// `cuda::Device`'s device math. Pointers are device pointers on the current device; work runs on
/// `stream`; reductions return to the host (and so wait), element-wise operations are only issued.
template <>
struct DeviceKernels<cuda::Device> {
    using stream_type = cuda::Device::stream_type;

    /// Σ op over x and the inputs.
    template <class Op, FloatingElement T, std::same_as<T>... In>
    [[nodiscard]] static accumulator_t<T> reduce(Op op, std::int64_t n, stream_type stream, const T* x,
                                                 const In*... in) {
        if constexpr (cuda::detail::has_blas_call<Op, const T*, const In*...>) {
            return cuda::detail::blas_call(op, n, stream, x, in...);
        } else {
            return cuda::detail::CustomKernels<T>::reduce(op, n, stream, x, in...);
        }
    }

    /// y = op(y, inputs).
    /// The reduction with its result left in device memory (`out`), queued on `stream`: no host wait.
    template <class Op, FloatingElement T, std::same_as<T>... In>
    static void reduce_into(Op op, std::int64_t n, stream_type stream, accumulator_t<T>* out, const T* x,
                            const In*... in) {
        if constexpr (cuda::detail::has_blas_into<Op, accumulator_t<T>*, const T*, const In*...>) {
            cuda::detail::blas_into(op, n, stream, out, x, in...);
        } else {
            cuda::detail::CustomKernels<T>::reduce_into(op, n, stream, out, x, in...);
        }
    }

    template <class Op, FloatingElement T, std::same_as<T>... In>
    static void transform(Op op, std::int64_t n, stream_type stream, T* y, const In*... in) {
        if constexpr (cuda::detail::has_blas_call<Op, T*, const In*...>) {
            cuda::detail::blas_call(op, n, stream, y, in...);
        } else {
            cuda::detail::CustomKernels<T>::transform(op, n, stream, y, in...);
        }
    }
};

/// `cuda::AsyncPool` runs the same kernels (it differs only in how it allocates).
template <>
struct DeviceKernels<cuda::AsyncPool> : DeviceKernels<cuda::Device> {};

SYNCBLOB_END_NAMESPACE
