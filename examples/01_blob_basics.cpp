// SPDX-License-Identifier: BSD-2-Clause
// Tutorial 1: the life of a Blob.
//
// A Blob is an N-d array that holds two buffers of the same shape: `data` (the values) and `diff`
// (their gradient, as in Caffe). Each buffer can live on the host, on a device, or on both, and is
// copied lazily: only when you ask for a side that is stale. This program walks through a blob's
// life and prints what happens at every step; its output is checked by ctest.

#include <iostream>
#include <syncblob/syncblob.hpp>

namespace sb = syncblob;

int main() {
    // ---- 1. Shape -------------------------------------------------------------------------------
    // A blob is created from its extents. Nothing is allocated yet: memory appears on first access.
    // [shape]
    sb::Blob<float> images{2, 3, 4, 5};
    std::cout << "shape: " << images.shape_string() << '\n';  // Caffe's format: extents, then (count)
    std::cout << "num_axes " << images.num_axes() << ", count " << images.count() << ", count(1) " << images.count(1)
              << ", count(1, 3) " << images.count(1, 3) << '\n';
    // Negative axes count from the end, as in NumPy.
    std::cout << "shape(-1) " << images.shape(-1) << ", shape(0) " << images.shape(0) << '\n';
    // [shape]

    // Caffe's legacy 4-D accessors still work. Below 4 axes the missing ones read as 1...
    std::cout << "legacy n c h w: " << images.num() << ' ' << images.channels() << ' ' << images.height() << ' '
              << images.width() << '\n';
    const sb::Blob<float> vector{10};
    std::cout << "a 1-axis blob: n c h w = " << vector.num() << ' ' << vector.channels() << ' ' << vector.height()
              << ' ' << vector.width() << '\n';

    // ...and offsets are row-major, with every index checked against its axis.
    std::cout << "offset(1, 2, 3, 4) = " << images.offset(1, 2, 3, 4) << ", offset({1, 2}) = " << images.offset({1, 2})
              << '\n';
    try {
        (void)images.offset(0, 3, 0, 0);
    } catch (const sb::IndexError& e) {
        std::cout << "IndexError: " << e.what() << '\n';
    }

    // ---- 2. Reshape and capacity ------------------------------------------------------------------
    // reshape reallocates only when the new count exceeds the capacity, and never shrinks. The
    // contents are kept when it does not reallocate, dropped when it does (Caffe's rule).
    images.reshape({2, 3});
    std::cout << "\nreshape to " << images.shape_string() << ": capacity " << images.capacity() << '\n';
    images.reshape({4, 5, 6, 7});
    std::cout << "reshape to " << images.shape_string() << ": capacity " << images.capacity() << '\n';
    images.reshape({6});
    images.shrink_to_fit();  // give the spare room back
    std::cout << "after shrink_to_fit: " << images.shape_string() << ", capacity " << images.capacity() << '\n';
    // [errors]
    // A bad shape throws ShapeError and leaves the blob as it was.
    try {
        images.reshape({3, -1});
    } catch (const sb::ShapeError& e) {
        std::cout << "ShapeError: " << e.what() << "; still " << images.shape_string() << '\n';
    }
    // [errors]

    // ---- 3. Data and diff ---------------------------------------------------------------------------
    // Host accessors return std::span: mutable_host_data() to write, host_data() to read.
    images.reshape({2, 3});
    auto values = images.mutable_host_data();
    for (std::size_t i = 0; i < values.size(); ++i) {
        values[i] = static_cast<float>(i) * 0.5f;
    }
    std::cout << '\n' << images << '\n';  // small blobs print their values
    images.fill_diff(0.25f);              // the gradient is a second buffer of the same shape
    std::cout << "data_at({1, 2}) = " << images.data_at({1, 2}) << ", diff_at({1, 2}) = " << images.diff_at({1, 2})
              << '\n';

    // ---- 4. Host and device: the copy sequence -------------------------------------------------------
    // Blob<float, Simulated> has a device made of host memory: everything a GPU blob does, copies
    // and all, runs here and is counted in data_stats(). (With the CUDA allocator the same code
    // moves real device memory.)
    // [copies]
    sb::Blob<float, sb::Simulated> blob{4};
    auto step = [&blob](const char* what) {
        std::cout << what << "\n    head " << sb::head_name(blob.data_head()) << " | " << blob.data_stats() << '\n';
    };
    std::cout << '\n';
    step("constructed (nothing allocated yet)");
    blob.fill(1.0f);
    step("fill(1) on the host: the host block is allocated");
    (void)blob.device_data();
    step("device_data(): host -> device copy, both sides fresh");
    (void)blob.device_data();
    step("device_data() again: nothing to copy");
    float* device = blob.mutable_device_data();
    device[0] = 7.0f;  // a kernel would write here; SimulatedDevice memory happens to be host-addressable
    step("mutable_device_data(): the host copy is now stale");
    std::cout << "    first value read on the host: " << blob.host_data()[0] << '\n';
    step("host_data(): device -> host copy, both sides fresh");
    // [copies]

    // ---- 5. copy_from and share_data ---------------------------------------------------------------
    // copy_from copies on the side where the source is fresh: here the source is fresh on both, so
    // the copy stays on the device and nothing crosses to the host.
    sb::Blob<float, sb::Simulated> target{4};
    target.copy_from(blob);
    std::cout << "\ncopy_from a device-fresh blob: head " << sb::head_name(target.data_head()) << " | "
              << target.data_stats() << '\n';
    // Shapes must match, unless you ask copy_from to reshape the target.
    sb::Blob<float, sb::Simulated> other{2, 2};
    try {
        other.copy_from(blob);
    } catch (const sb::ShapeError& e) {
        std::cout << "ShapeError: " << e.what() << '\n';
    }
    other.copy_from(blob, sb::Reshape::allowed);
    std::cout << "with Reshape::allowed: " << other << '\n';

    // share_data makes two blobs of the same count use one data buffer: no copy, and writes through
    // one are seen through the other. The buffer lives as long as either blob holds it.
    sb::Blob<float> weights{2, 2};
    sb::Blob<float> flat{4};
    flat.share_data(weights);
    weights.fill(3.0f);
    std::cout << "\nshared: " << flat << '\n';

    // Blobs are move-only: a deep copy is always explicit.
    sb::Blob<float> copy = weights.clone();
    copy.fill(9.0f);
    std::cout << "clone is independent: " << copy << " vs " << weights << '\n';
    sb::Blob<float> moved = std::move(copy);
    std::cout << "moved: " << moved << ", the source is left empty: " << copy.shape_string() << '\n';
    return 0;
}
