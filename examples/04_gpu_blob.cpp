// SPDX-License-Identifier: BSD-2-Clause
// needs: eigen cuda
//
// Tutorial 4: a blob on the GPU.
//
// Blob<float, cuda::Allocator> keeps its host side in pinned memory and its device side in CUDA
// device memory, and syncblob's math runs where the data is fresh: on the GPU once the data has
// been moved there, on the host otherwise. This program compiles with any C++ compiler (float math
// on the device is a cuBLAS call; only half and bfloat16 device math needs nvcc) and prints the same
// output on a machine with a GPU and on one without: there, the first device access throws
// NoDeviceError carrying the driver's message, and the math simply stays on the host.
#include <iostream>

#include <syncblob/cuda/allocator.hpp>
#include <syncblob/cuda/math.hpp>
#include <syncblob/math.hpp>
#include <syncblob/syncblob.hpp>

int main() {
    using GpuBlob = syncblob::Blob<float, syncblob::cuda::Allocator>;

    GpuBlob weights({2, 3});
    auto data = weights.mutable_host_data();
    auto diff = weights.mutable_host_diff();
    for (std::size_t i = 0; i < data.size(); ++i) {
        data[i] = static_cast<float>(i + 1);  // 1 2 3 4 5 6
        diff[i] = 0.5f;
    }
    std::cout << "weights: " << weights.shape_string() << '\n';

    // [to-the-gpu]
    // Move data and diff to the GPU, where there is one. The device accessors copy host to device
    // and leave both sides synced, so the math below runs on the device.
    try {
        (void)weights.device_data();
        (void)weights.device_diff();
        std::clog << "math runs on the GPU\n";
    } catch (const syncblob::NoDeviceError& e) {
        std::clog << "math stays on the host: " << e.what() << '\n';
    }
    // [to-the-gpu]

    syncblob::update(weights);         // data -= diff: 0.5 1.5 ... 5.5
    syncblob::scale_data(weights, 2);  // 1 3 5 7 9 11
    std::cout << "asum:  " << syncblob::asum_data(weights) << '\n';
    std::cout << "sumsq: " << syncblob::sumsq_data(weights) << '\n';

    // Reading on the host copies back from the device if the math ran there.
    std::cout << "data:";
    for (const float v : weights.host_data()) {
        std::cout << ' ' << v;
    }
    std::cout << '\n';
}
