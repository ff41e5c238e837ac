// SPDX-License-Identifier: BSD-2-Clause
// Must not compile: half device math on cuda::Device needs the custom kernels, so nvcc.
// (float and double compile here: the same call for float is below and must raise no error.)
#include <syncblob/cuda/math.hpp>

float device_asum_float(const float* x) {
    return syncblob::DeviceKernels<syncblob::cuda::Device>::reduce(syncblob::math::detail::Asum{}, 1, nullptr, x);
}
float device_asum_half(const syncblob::half* x) {
    return syncblob::DeviceKernels<syncblob::cuda::Device>::reduce(syncblob::math::detail::Asum{}, 1, nullptr, x);
}
