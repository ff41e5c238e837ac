// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// syncblob's custom CUDA kernels: fill and conversion (by the one rule of core/convert.hpp)
/// for every element type, and the math operations (any floating element type; `cuda::Device`'s
/// device math uses them wherever cuBLAS has no call: half and bfloat16). Needs nvcc: include it from
/// a .cu file. Operations are issued on `stream`;
/// reductions wait for their result, element-wise operations do not.

#if !defined(__CUDACC__)
#error \
    "syncblob/cuda/kernels.cuh holds CUDA kernels and needs nvcc: include it from a .cu file. Host code includes syncblob/cuda/math.hpp (float and double device math through cuBLAS)."
#else  // the rest of the file: only nvcc sees it, so the error above is the only one

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "../core/element.hpp"
#include "../math/operations.hpp"
#include "launch.cuh"

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
    audit::note(audit::Wait::host_result);
    SYNCBLOB_CUDA_CHECK(cudaEventSynchronize(scratch.copied()), context());
    return *result < static_cast<unsigned long long>(n) ? static_cast<std::int64_t>(*result) : n;
}

namespace detail {

/// "cuda::kernels::<operation>": the label of a custom math kernel in its errors.
template <class Op>
inline constexpr auto kernel_label = [] {
    constexpr std::string_view prefix = "cuda::kernels::";
    constexpr std::string_view name = Op::name;
    std::array<char, prefix.size() + name.size()> label{};
    std::copy(prefix.begin(), prefix.end(), label.begin());
    std::copy(name.begin(), name.end(), label.begin() + static_cast<std::ptrdiff_t>(prefix.size()));
    return label;
}();

template <class Op>
[[nodiscard]] constexpr std::string_view label_of() noexcept {
    return {kernel_label<Op>.data(), kernel_label<Op>.size()};
}

}  // namespace detail

/// Device math by custom kernels, for every floating element type (accumulating in `accumulator_t<T>`)
/// and every operation of syncblob/math/operations.hpp: the same functors as the host kernels.
namespace kernels {

/// Σ op over x and the inputs (deterministic: the grid depends on n only; the host replays it,
/// `detail::emulate_reduce`).
template <class Op, FloatingElement T, std::same_as<T>... In>
[[nodiscard]] accumulator_t<T> reduce(Op op, std::int64_t n, cudaStream_t stream, const T* x, const In*... in) {
    return detail::launch_reduce(detail::reduce_at(op, x, in...), n, stream, detail::label_of<Op>(), element_name<T>());
}

/// Σ op over x and the inputs, left in device memory (`out`): queued on `stream`, no host wait.
template <class Op, FloatingElement T, std::same_as<T>... In>
void reduce_into(Op op, std::int64_t n, cudaStream_t stream, accumulator_t<T>* out, const T* x, const In*... in) {
    detail::launch_reduce_into(detail::reduce_at(op, x, in...), n, stream, out, detail::label_of<Op>(),
                               element_name<T>());
}

/// y = op(y, inputs), issued on `stream`.
template <class Op, FloatingElement T, std::same_as<T>... In>
void transform(Op op, std::int64_t n, cudaStream_t stream, T* y, const In*... in) {
    detail::launch_for_each(detail::transform_at(op, y, in...), n, stream, detail::label_of<Op>(), element_name<T>());
}

/// Σ|x|.
template <FloatingElement T>
[[nodiscard]] accumulator_t<T> asum(const T* x, std::int64_t n, cudaStream_t stream) {
    return reduce(math::detail::Asum{}, n, stream, x);
}

/// Σx².
template <FloatingElement T>
[[nodiscard]] accumulator_t<T> sumsq(const T* x, std::int64_t n, cudaStream_t stream) {
    return reduce(math::detail::Sumsq{}, n, stream, x);
}

/// Σx·y.
template <FloatingElement T>
[[nodiscard]] accumulator_t<T> dot(const T* x, const T* y, std::int64_t n, cudaStream_t stream) {
    return reduce(math::detail::Dot{}, n, stream, x, y);
}

/// y -= x.
template <FloatingElement T>
void sub(T* y, const T* x, std::int64_t n, cudaStream_t stream) {
    transform(math::detail::Sub{}, n, stream, y, x);
}

/// x *= alpha.
template <FloatingElement T>
void scale(T* x, accumulator_t<T> alpha, std::int64_t n, cudaStream_t stream) {
    transform(math::detail::Scale<accumulator_t<T>>{alpha}, n, stream, x);
}

}  // namespace kernels

namespace detail {

/// The custom-kernel path of `DeviceKernels<cuda::Device>` (see syncblob/cuda/math.hpp).
template <class T>
struct CustomKernels {
    template <class Op, class... In>
    static accumulator_t<T> reduce(Op op, std::int64_t n, cudaStream_t s, const T* x, const In*... in) {
        return kernels::reduce(op, n, s, x, in...);
    }
    template <class Op, class... In>
    static void transform(Op op, std::int64_t n, cudaStream_t s, T* y, const In*... in) {
        kernels::transform(op, n, s, y, in...);
    }
    template <class Op, class... In>
    static void reduce_into(Op op, std::int64_t n, cudaStream_t s, accumulator_t<T>* out, const T* x, const In*... in) {
        kernels::reduce_into(op, n, s, out, x, in...);
    }
};

}  // namespace detail

}  // namespace cuda

SYNCBLOB_END_NAMESPACE

#endif  // defined(__CUDACC__)
