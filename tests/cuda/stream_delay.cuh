// SPDX-License-Identifier: BSD-2-Clause
#pragma once
// A kernel that holds a stream back, for GPU tests of ordering: work issued on another stream
// without the wait syncblob owes it runs first, and a free that the host should not wait for
// leaves the stream still busy. For CUDA translation units (nvcc) only.

#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>

#include <syncblob/cuda/allocator.hpp>
#include <syncblob/cuda/math.hpp>
#include <syncblob/math.hpp>

namespace syncblob_cuda_test {

__global__ void spin_kernel(long long cycles) {
    const long long start = clock64();
    while (clock64() - start < cycles) {
    }
}

/// Holds `stream` back for roughly `milliseconds` (at the device's clock rate), without Catch's
/// assertions (for threads other than the test's): the launch's error, cudaSuccess when it started.
inline cudaError_t try_delay(cudaStream_t stream, int milliseconds) {
    int device = 0;
    int khz = 0;
    if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) {
        return e;
    }
    if (const cudaError_t e = cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device); e != cudaSuccess) {
        return e;
    }
    spin_kernel<<<1, 1, 0, stream>>>(static_cast<long long>(khz) * milliseconds);
    return cudaGetLastError();
}

/// Holds `stream` back for roughly `milliseconds`.
inline void delay(cudaStream_t stream, int milliseconds) {
    REQUIRE(try_delay(stream, milliseconds) == cudaSuccess);
}

/// Does, before a test delays a stream, the first uses that synchronise the whole device when they
/// come later: device math on `stream` (the first creates cuBLAS's handle and its workspace, whose
/// allocations wait for the device), and an allocation and a free of device and pinned host memory.
/// A device-wide wait between the delay and the check would finish the delayed work early, and a
/// missing wait in syncblob would go unseen.
inline void warm_up(cudaStream_t stream) {
    syncblob::Blob<float, syncblob::cuda::Allocator> blob({1024});
    blob.set_stream(stream);
    blob.fill(1.0f);
    (void)blob.mutable_device_data();
    syncblob::scale_data(blob, 2.0f);  // cuBLAS, on `stream`
    REQUIRE(syncblob::asum_data(blob) == 2048.0f);
    REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
}

}  // namespace syncblob_cuda_test
