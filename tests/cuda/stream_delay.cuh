// SPDX-License-Identifier: BSD-2-Clause
#pragma once
// A kernel that holds a stream back, for GPU tests of ordering: work issued on another stream
// without the wait syncblob owes it runs first, and a free that the host should not wait for
// leaves the stream still busy. For CUDA translation units (nvcc) only.

#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>

namespace syncblob_cuda_test {

__global__ void spin_kernel(long long cycles) {
    const long long start = clock64();
    while (clock64() - start < cycles) {
    }
}

/// Holds `stream` back for roughly `milliseconds` (at the device's clock rate).
inline void delay(cudaStream_t stream, int milliseconds) {
    int device = 0;
    int khz = 0;
    REQUIRE(cudaGetDevice(&device) == cudaSuccess);
    REQUIRE(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device) == cudaSuccess);
    spin_kernel<<<1, 1, 0, stream>>>(static_cast<long long>(khz) * milliseconds);
    REQUIRE(cudaGetLastError() == cudaSuccess);
}

}  // namespace syncblob_cuda_test
