// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Device math for `cuda::Device` (and `cuda::AsyncPool`): the specialisation of `DeviceKernels` that syncblob's math
/// functions call when a blob's data is fresh on a CUDA device. float and double run through the
/// 64-bit cuBLAS entry points and work from any compiler; half and bfloat16 run custom kernels
/// (syncblob/cuda/kernels.cuh), so a translation unit that does half or bfloat16 device math must
/// be compiled by nvcc — from a host compiler it is a compile error that says so.

#include <concepts>
#include <cstdint>

#include "../math/device_kernels.hpp"
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
                  "syncblob: half and bfloat16 device math on cuda::Device runs custom CUDA kernels, so this "
                  "translation unit must be compiled by nvcc (a .cu file linked to syncblob::cuda). float and "
                  "double device math needs only cuBLAS and compiles with any C++ compiler.");
    // Declared only, so that the assertion above is the one error a host compiler reports.
    using A = accumulator_t<T>;
    static A asum(const T* x, std::int64_t n, cudaStream_t stream);
    static A sumsq(const T* x, std::int64_t n, cudaStream_t stream);
    static A dot(const T* x, const T* y, std::int64_t n, cudaStream_t stream);
    static void sub(T* y, const T* x, std::int64_t n, cudaStream_t stream);
    static void scale(T* x, A alpha, std::int64_t n, cudaStream_t stream);
};
}  // namespace cuda::detail
SYNCBLOB_END_NAMESPACE
#endif

SYNCBLOB_BEGIN_NAMESPACE

namespace cuda::detail {
/// Element types whose device math is a cuBLAS call.
template <class T>
inline constexpr bool has_cublas_path = std::same_as<T, float> || std::same_as<T, double>;
}  // namespace cuda::detail

/// `cuda::Device`'s device math. Pointers are device pointers on the current device; work runs on
/// `stream`; reductions return to the host (and so wait), `sub` and `scale` are only issued.
template <>
struct DeviceKernels<cuda::Device> {
    using stream_type = cuda::Device::stream_type;

    /// Σ|x|.
    template <FloatingElement T>
    [[nodiscard]] static accumulator_t<T> asum(const T* x, std::int64_t n, stream_type stream) {
        if constexpr (cuda::detail::has_cublas_path<T>) {
            return cuda::blas::asum(x, n, stream);
        } else {
            return cuda::detail::CustomKernels<T>::asum(x, n, stream);
        }
    }

    /// Σx² (a dot product of x with itself: the sum the host computes, not nrm2's scaled one).
    template <FloatingElement T>
    [[nodiscard]] static accumulator_t<T> sumsq(const T* x, std::int64_t n, stream_type stream) {
        if constexpr (cuda::detail::has_cublas_path<T>) {
            return cuda::blas::dot(x, x, n, stream);
        } else {
            return cuda::detail::CustomKernels<T>::sumsq(x, n, stream);
        }
    }

    /// Σx·y.
    template <FloatingElement T>
    [[nodiscard]] static accumulator_t<T> dot(const T* x, const T* y, std::int64_t n, stream_type stream) {
        if constexpr (cuda::detail::has_cublas_path<T>) {
            return cuda::blas::dot(x, y, n, stream);
        } else {
            return cuda::detail::CustomKernels<T>::dot(x, y, n, stream);
        }
    }

    /// y -= x.
    template <FloatingElement T>
    static void sub(T* y, const T* x, std::int64_t n, stream_type stream) {
        if constexpr (cuda::detail::has_cublas_path<T>) {
            cuda::blas::axpy(T{-1}, x, y, n, stream);
        } else {
            cuda::detail::CustomKernels<T>::sub(y, x, n, stream);
        }
    }

    /// x *= alpha.
    template <FloatingElement T>
    static void scale(T* x, accumulator_t<T> alpha, std::int64_t n, stream_type stream) {
        if constexpr (cuda::detail::has_cublas_path<T>) {
            cuda::blas::scal(alpha, x, n, stream);
        } else {
            cuda::detail::CustomKernels<T>::scale(x, alpha, n, stream);
        }
    }
};

/// `cuda::AsyncPool` runs the same kernels (it differs only in how it allocates).
template <>
struct DeviceKernels<cuda::AsyncPool> : DeviceKernels<cuda::Device> {};

SYNCBLOB_END_NAMESPACE
