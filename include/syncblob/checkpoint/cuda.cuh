// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// `cuda::Device`'s conversion for checkpoint loads (`checkpoint::DeviceConvert<cuda::Device>`): one
/// kernel per piece, queued on the copy stream, that reads the piece's raw little-endian elements from
/// device staging and writes the arena's type by the one element conversion of the IO layer
/// (`syncblob::detail::convert_checked`, callable on the host and on the device), so a GPU gives what the host
/// conversion gives. The loader calls it only for conversions that can never refuse a value
/// (`checkpoint::always_exact`). Include it from a .cu file (nvcc) that loads into a `cuda::Device`
/// arena; targets `syncblob::cuda` and `syncblob::json`.

#if !defined(__CUDACC__)
#error "syncblob/checkpoint/cuda.cuh holds CUDA kernels and needs nvcc: include it from a .cu file"
#endif

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "../cuda/async_pool.hpp"
#include "../cuda/device.hpp"
#include "../cuda/launch.cuh"
#include "../io/convert.hpp"
#include "device_convert.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace checkpoint::detail {

/// dst[i] = src[i] converted to `To` by the one element conversion (exact for the pairs the loader
/// converts on the device, so its `value` is the converted element).
template <Element To, Element From>
struct ConvertPiece {
    To* dst;
    const From* src;
    SYNCBLOB_HOST_DEVICE void operator()(std::int64_t i) const noexcept {
        dst[i] = syncblob::detail::convert_checked<To>(src[i]).value;
    }
};

}  // namespace checkpoint::detail

namespace checkpoint {

template <>
struct DeviceConvert<cuda::Device> {
    /// Queues on `stream` the conversion of `n` elements of dtype `from` at `src` (device staging,
    /// 256-byte aligned) into `dst`. \throws DeviceError when the launch fails.
    template <Element T>
    static void convert(T* dst, Dtype from, const void* src, std::size_t n, cuda::Device::stream_type stream) {
        syncblob::detail::visit_dtype(from, [&]<class S>(std::type_identity<S>) {
            cuda::detail::launch_for_each(detail::ConvertPiece<T, S>{dst, static_cast<const S*>(src)},
                                          static_cast<std::int64_t>(n), stream, "checkpoint::load conversion",
                                          dtype_name(from), element_name<T>());
        });
    }
};

/// The same kernels for arenas on `cuda::AsyncAllocator`: pool memory is device memory.
template <>
struct DeviceConvert<cuda::AsyncPool> : DeviceConvert<cuda::Device> {};

}  // namespace checkpoint

SYNCBLOB_END_NAMESPACE
