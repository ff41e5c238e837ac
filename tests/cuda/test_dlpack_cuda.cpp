// SPDX-License-Identifier: BSD-2-Clause
// DLPack with cuda::Device blobs (host compiler): the device side is kDLCUDA memory on the blob's
// device, the host side (pinned, or pageable without a driver) is CPU memory. The device tests
// print "skipped: no CUDA device (...)" where there is none (and fail under SYNCBLOB_REQUIRE_GPU=1);
// the rest runs everywhere.

#include <catch2/catch.hpp>

#include <iostream>
#include <syncblob/cuda/allocator.hpp>
#include <syncblob/cuda/runtime.hpp>
#include <syncblob/interop/dlpack.hpp>

#include "cuda_test_device.hpp"

using namespace syncblob;
namespace dl = syncblob::dlpack;

static_assert(dl::DeviceTypeOf<cuda::Device>::value == dl::DeviceType::cuda);

TEST_CASE("dlpack cuda: the host side of a cuda::Allocator blob is CPU memory", "[cuda][dlpack]") {
    Blob<float, cuda::Allocator> blob{3};
    blob.fill(2.0f);
    dl::UniqueTensor<dl::DLManagedTensorVersioned> t(dl::to_dlpack(blob, dl::Side::host));
    CHECK(t->dl_tensor.device.device_type == dl::DeviceType::cpu);
    CHECK(t->dl_tensor.data == blob.host_data().data());
    Blob<float, cuda::Allocator> back = dl::from_dlpack<float, cuda::Allocator>(dl::to_dlpack(blob));
    CHECK(back.host_data()[2] == 2.0f);
}

TEST_CASE("dlpack cuda: device memory without a usable device is refused, and released", "[cuda][dlpack]") {
    if (!cuda::no_device_reason()) {
        std::cout << "skipped: a CUDA device is present (this checks the behaviour without one)\n";
        return;
    }
    static float fake[4];
    static int deletions = 0;
    static std::int64_t shape[1] = {4};
    auto* tensor = new dl::DLManagedTensor{};
    tensor->dl_tensor.data = fake;
    tensor->dl_tensor.device = {dl::DeviceType::cuda, 0};
    tensor->dl_tensor.ndim = 1;
    tensor->dl_tensor.dtype = dl::dl_data_type<float>;
    tensor->dl_tensor.shape = shape;
    tensor->deleter = [](dl::DLManagedTensor* self) {
        ++deletions;
        delete self;
    };
    CHECK_THROWS_AS((dl::from_dlpack<float, cuda::Allocator>(tensor)), NoDeviceError);
    CHECK(deletions == 1);
}

TEST_CASE("dlpack cuda: the device side is CUDA memory on the blob's device, both ways", "[cuda][dlpack]") {
    SYNCBLOB_REQUIRE_DEVICE(cuda::Device);
    Blob<float, cuda::Allocator> blob{5};
    blob.fill(3.0f);
    dl::DLManagedTensorVersioned* t = dl::to_dlpack(blob, dl::Side::device);
    CHECK(t->dl_tensor.device.device_type == dl::DeviceType::cuda);
    CHECK(t->dl_tensor.device.device_id == cuda::current_device());
    CHECK(blob.data_head() == Head::at_device);
    const void* device = t->dl_tensor.data;
    Blob<float, cuda::Allocator> back = dl::from_dlpack<float, cuda::Allocator>(t);
    CHECK(back.data_head() == Head::at_device);
    CHECK(static_cast<const void*>(back.device_data()) == device);
    CHECK(back.host_data()[4] == 3.0f);
}
