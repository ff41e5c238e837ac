// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The device-kernel customisation point: `DeviceKernels<Backend>` is specialised once per device
/// backend. The math functions call it when a blob's data is fresh on the device.

#include <cstdint>
#include <type_traits>

#include "../core/element.hpp"
#include "../memory/device_backend.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace detail {
template <class>
inline constexpr bool always_false = false;
}  // namespace detail

/// Device math for backend `Backend`. Not defined for a backend whose header was not included:
/// a specialisation provides, for every `FloatingElement T` (pointers are device pointers, `n` ≥ 0,
/// `stream` is the buffer's stream):
///
///     static accumulator_t<T> asum(const T* x, std::int64_t n, stream_type stream);          // Σ|x|
///     static accumulator_t<T> sumsq(const T* x, std::int64_t n, stream_type stream);         // Σx²
///     static accumulator_t<T> dot(const T* x, const T* y, std::int64_t n, stream_type stream);
///     static void sub(T* y, const T* x, std::int64_t n, stream_type stream);                 // y -= x
///     static void scale(T* x, accumulator_t<T> alpha, std::int64_t n, stream_type stream);   // x *= alpha
template <DeviceBackend Backend>
struct DeviceKernels {
    static_assert(detail::always_false<Backend>,
                  "syncblob: no device kernels for this backend. For cuda::Device, "
                  "#include <syncblob/cuda/math.hpp> (target syncblob::cuda); for SimulatedDevice, "
                  "#include <syncblob/math.hpp>.");
};

SYNCBLOB_END_NAMESPACE
