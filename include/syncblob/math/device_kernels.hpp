// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The device-kernel customisation point: `DeviceKernels<Backend>` is specialised once per device
/// backend. The math functions call it when a blob's data is fresh on the device.

#include <cstdint>

#include "../core/element.hpp"
#include "../memory/device_backend.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace detail {
template <class>
inline constexpr bool always_false = false;
}  // namespace detail

/// Device math for backend `Backend`. Not defined for a backend whose header was not included:
/// a specialisation provides, for every operation `Op` of syncblob/math/operations.hpp (a
/// functor whose `step` or `apply` is the arithmetic of one element) and every `FloatingElement T`
/// (pointers are device pointers, `n` ≥ 0, `stream` is the buffer's stream; the `in` pointers are
/// `const T*` too):
///
///     template <class Op, FloatingElement T, class... In>   // Σ op.step over x and the inputs
///     static accumulator_t<T> reduce(Op op, std::int64_t n, stream_type stream, const T* x, const In*... in);
///     template <class Op, FloatingElement T, class... In>   // the same sum, into device memory
///     static void reduce_into(Op op, std::int64_t n, stream_type stream, accumulator_t<T>* out,
///                             const T* x, const In*... in);
///     template <class Op, FloatingElement T, class... In>   // y = op.apply(y, inputs)
///     static void transform(Op op, std::int64_t n, stream_type stream, T* y, const In*... in);
///
/// `reduce` returns to the host (so it waits for its result); `reduce_into` and an element-wise
/// operation are issued on `stream`.
template <DeviceBackend Backend>
struct DeviceKernels {
    static_assert(detail::always_false<Backend>,
                  "syncblob: no device kernels for this backend. For cuda::Device, "
                  "#include <syncblob/cuda/math.hpp> (target syncblob::cuda); for SimulatedDevice, "
                  "#include <syncblob/math.hpp>.");
};

SYNCBLOB_END_NAMESPACE
