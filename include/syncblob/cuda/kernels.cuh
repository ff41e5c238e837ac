// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// syncblob's custom CUDA kernels: fill and conversion (by the one rule of core/detail/convert.hpp)
/// for every element type, and the math that cuBLAS does not cover (any floating element type; `cuda::Device`'s device
/// math uses them for half and bfloat16). Needs nvcc: include it from a .cu file. Operations are issued on `stream`;
/// reductions wait for their result, element-wise operations do not.

#if !defined(__CUDACC__)
#error \
    "syncblob/cuda/kernels.cuh holds CUDA kernels and needs nvcc: include it from a .cu file. Host code includes syncblob/cuda/math.hpp (float and double device math through cuBLAS)."
#else  // the rest of the file: only nvcc sees it, so the error above is the only one

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string_view>

#include "../core/element.hpp"
#include "../math/device_kernels.hpp"
#include "detail/launch.cuh"

SYNCBLOB_BEGIN_NAMESPACE

namespace cuda {

/// dst[i] = value for i in [0, n).
template <Element T>
void fill(T* dst, T value, std::int64_t n, cudaStream_t stream = nullptr) {
    detail::launch_for_each(detail::FillAt<T>{dst, value}, n, stream, "cuda::fill", element_name<T>());
}

/// dst[i] = src[i] converted to `To`, for i in [0, n), by the one conversion rule every converting
/// load applies (the table of docs/file-safety.md): a value `To` holds exactly converts to it
/// (floating targets round to nearest, ties to even). A kernel cannot throw, so any other value
/// takes the saturated value, as `LoadOptions::saturate` loads it: beyond an integer type's range
/// its min or max, NaN into an integer 0, a fraction truncated toward zero, a finite value beyond a
/// floating type's range its largest finite value, a nonzero value into BOOL true. Issued on
/// `stream`, not waited for; `convert_checked` also says whether every value was exact.
template <Element To, Element From>
void convert(To* dst, const From* src, std::int64_t n, cudaStream_t stream = nullptr) {
    detail::launch_for_each(detail::ConvertAt<To, From>{dst, src}, n, stream, "cuda::convert", element_name<From>(),
                            element_name<To>());
}

/// `convert`, and in the same pass the check a load without `LoadOptions::saturate` makes: returns
/// the index of the first element that did not convert exactly (`n` when every one did), after
/// which the caller can refuse the result. `dst` is written in full either way. Waits for the
/// index (not for other work on `stream`).
template <Element To, Element From>
[[nodiscard]] std::int64_t convert_checked(To* dst, const From* src, std::int64_t n, cudaStream_t stream = nullptr) {
    if (n <= 0) {
        return 0;
    }
    const std::string_view op = "cuda::convert_checked";
    const auto context = [&] { return detail::launch_context(op, element_name<From>(), n, element_name<To>()); };
    int device = 0;
    SYNCBLOB_CUDA_CHECK(cudaGetDevice(&device), context());
    const detail::ReductionScratch& scratch = detail::ReductionScratch::of_thread(device);
    auto* first = scratch.device<unsigned long long>();
    auto* result = scratch.host<unsigned long long>();
    SYNCBLOB_CUDA_CHECK(cudaMemsetAsync(first, 0xFF, sizeof *first, stream), context());  // no index yet
    detail::launch_for_each(detail::ConvertAt<To, From>{dst, src, first}, n, stream, op, element_name<From>(),
                            element_name<To>());
    SYNCBLOB_CUDA_CHECK(cudaMemcpyAsync(result, first, sizeof *result, cudaMemcpyDeviceToHost, stream), context());
    SYNCBLOB_CUDA_CHECK(cudaEventRecord(scratch.copied(), stream), context());
    SYNCBLOB_CUDA_CHECK(cudaEventSynchronize(scratch.copied()), context());
    return *result < static_cast<unsigned long long>(n) ? static_cast<std::int64_t>(*result) : n;
}

/// Device math by custom kernels, for every floating element type (accumulating in `accumulator_t<T>`).
namespace kernels {

template <FloatingElement T>
[[nodiscard]] accumulator_t<T> asum(const T* x, std::int64_t n, cudaStream_t stream) {
    return detail::launch_reduce(detail::AbsTerm<T>{x}, n, stream, "cuda::kernels::asum", element_name<T>());
}

template <FloatingElement T>
[[nodiscard]] accumulator_t<T> sumsq(const T* x, std::int64_t n, cudaStream_t stream) {
    return detail::launch_reduce(detail::SquareTerm<T>{x}, n, stream, "cuda::kernels::sumsq", element_name<T>());
}

template <FloatingElement T>
[[nodiscard]] accumulator_t<T> dot(const T* x, const T* y, std::int64_t n, cudaStream_t stream) {
    return detail::launch_reduce(detail::ProductTerm<T>{x, y}, n, stream, "cuda::kernels::dot", element_name<T>());
}

/// y -= x.
template <FloatingElement T>
void sub(T* y, const T* x, std::int64_t n, cudaStream_t stream) {
    detail::launch_for_each(detail::SubtractAt<T>{y, x}, n, stream, "cuda::kernels::sub", element_name<T>());
}

/// x *= alpha.
template <FloatingElement T>
void scale(T* x, accumulator_t<T> alpha, std::int64_t n, cudaStream_t stream) {
    detail::launch_for_each(detail::ScaleAt<T>{x, alpha}, n, stream, "cuda::kernels::scale", element_name<T>());
}

}  // namespace kernels

namespace detail {

/// The custom-kernel path of `DeviceKernels<cuda::Device>` (see syncblob/cuda/math.hpp).
template <class T>
struct CustomKernels {
    using A = accumulator_t<T>;
    static A asum(const T* x, std::int64_t n, cudaStream_t s) { return kernels::asum(x, n, s); }
    static A sumsq(const T* x, std::int64_t n, cudaStream_t s) { return kernels::sumsq(x, n, s); }
    static A dot(const T* x, const T* y, std::int64_t n, cudaStream_t s) { return kernels::dot(x, y, n, s); }
    static void sub(T* y, const T* x, std::int64_t n, cudaStream_t s) { kernels::sub(y, x, n, s); }
    static void scale(T* x, A alpha, std::int64_t n, cudaStream_t s) { kernels::scale(x, alpha, n, s); }
};

}  // namespace detail

}  // namespace cuda

SYNCBLOB_END_NAMESPACE

#endif  // defined(__CUDACC__)
