// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The simulated device's conversion for checkpoint loads (`checkpoint::DeviceConvert<SimulatedDevice>`
/// and `<SimulatedAsyncDevice>`), as `checkpoint/cuda.cuh` is `cuda::Device`'s: the specialisation sits
/// with the customisation point (`checkpoint/device_convert.hpp`), above the backend it specialises
/// for. The loader includes it, so a load into a simulated arena needs nothing more.

#include <cstddef>
#include <string>

#include "../core/element.hpp"
#include "../io/convert.hpp"
#include "../sim/async_device.hpp"
#include "../sim/device.hpp"
#include "device_convert.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace checkpoint {

/// SimulatedDevice's conversion: a kernel queued on the stream, reading the raw bytes and writing
/// the elements, that runs the host's element conversion when the stream reaches it.
template <>
struct DeviceConvert<SimulatedDevice> {
    template <Element T>
    static void convert(T* dst, Dtype from, const void* src, std::size_t n, SimulatedDevice::stream_type stream) {
        SimulatedDevice::launch(
            stream, "convert " + std::string(dtype_name(from)) + " to " + std::string(element_name<T>()),
            {SimulatedDevice::Range{src, n * dtype_size(from)}}, {SimulatedDevice::Range{dst, n * sizeof(T)}},
            [dst, from, src, n] {
                (void)io::detail::convert_elements(from, src, n, dst, io::detail::ConvertRule::saturate);
            });
    }
};

/// `SimulatedAsyncDevice` runs the same kernels (it differs only in how it allocates).
template <>
struct DeviceConvert<SimulatedAsyncDevice> : DeviceConvert<SimulatedDevice> {};

}  // namespace checkpoint

SYNCBLOB_END_NAMESPACE
