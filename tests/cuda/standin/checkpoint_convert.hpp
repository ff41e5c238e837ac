// SPDX-License-Identifier: BSD-2-Clause
#pragma once
// cuda::Device's conversion for checkpoint loads in a program linked with the stand-in (standin.cpp),
// in place of the kernels of <syncblob/checkpoint/cuda.cuh>, which need nvcc: the stand-in's device
// memory is host memory and its work runs when issued, so the conversion runs at once, on the host,
// by the one element conversion those kernels run.

#include <cstddef>
#include <type_traits>

#include <syncblob/checkpoint/device_convert.hpp>
#include <syncblob/cuda/async_pool.hpp>
#include <syncblob/cuda/device.hpp>
#include <syncblob/io/convert.hpp>

SYNCBLOB_BEGIN_NAMESPACE

namespace checkpoint {

template <>
struct DeviceConvert<cuda::Device> {
    template <Element T>
    static void convert(T* dst, Dtype from, const void* src, std::size_t n, cuda::Device::stream_type) {
        syncblob::detail::visit_dtype(from, [&]<class S>(std::type_identity<S>) {
            const auto* in = static_cast<const S*>(src);
            for (std::size_t i = 0; i < n; ++i) {
                dst[i] = syncblob::detail::convert_checked<T>(in[i]).value;
            }
        });
    }
};

template <>
struct DeviceConvert<cuda::AsyncPool> : DeviceConvert<cuda::Device> {};

}  // namespace checkpoint

SYNCBLOB_END_NAMESPACE
