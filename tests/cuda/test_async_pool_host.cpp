// SPDX-License-Identifier: BSD-2-Clause
// cuda::AsyncPool from a host compiler: it is a stream-ordered DeviceBackend, and where the runtime
// finds no usable driver (this machine) every pool call throws NoDeviceError with the driver's
// message while a cuda::AsyncAllocator blob still works on the host. Where a device is present the
// no-driver checks print "skipped: ..." (the GPU tests are in test_async_pool.cu).
#include <catch2/catch.hpp>

#include <iostream>

#include <syncblob/blob.hpp>
#include <syncblob/cuda/async_pool.hpp>
#include <syncblob/cuda/runtime.hpp>
#include <syncblob/interop/dlpack.hpp>

namespace {

using syncblob::cuda::AsyncPool;

}  // namespace

// A GPU blob of the pool exports its device side as DLPack `cuda` memory, as cuda::Device's does.
static_assert(syncblob::dlpack::DeviceTypeOf<syncblob::cuda::AsyncPool>::value == syncblob::dlpack::DeviceType::cuda);

TEST_CASE("cuda::AsyncPool is a stream-ordered device backend, cuda::Device is not", "[cuda][pool]") {
    STATIC_REQUIRE(syncblob::StreamOrderedBackend<AsyncPool>);
    STATIC_REQUIRE_FALSE(syncblob::StreamOrderedBackend<syncblob::cuda::Device>);
    STATIC_REQUIRE(syncblob::SyncedAllocator<syncblob::cuda::AsyncAllocator>);
    CHECK(AsyncPool::name == "cuda::AsyncPool");
    CHECK(AsyncPool::default_stream() == cudaStreamLegacy);
    CHECK(AsyncPool::keep_everything == UINT64_MAX);
}

TEST_CASE("without a usable driver every cuda::AsyncPool call throws NoDeviceError with the driver's message",
          "[cuda][pool][no-device]") {
    const auto reason = syncblob::cuda::no_device_reason();
    if (!reason) {
        std::cout << "skipped: a CUDA device is present; this test checks machines without one" << std::endl;
        return;
    }
    const auto says_why = Catch::Contains(*reason);
    CHECK_THROWS_AS(AsyncPool::allocate_async(64, AsyncPool::default_stream()), syncblob::NoDeviceError);
    CHECK_THROWS_WITH(AsyncPool::allocate(64), says_why && Catch::Contains("cuda::AsyncPool::allocate(64 bytes)"));
    CHECK_THROWS_AS(AsyncPool::stats(), syncblob::NoDeviceError);
    CHECK_THROWS_AS(AsyncPool::empty_cache(), syncblob::NoDeviceError);
    CHECK_THROWS_AS(AsyncPool::set_cap(1024), syncblob::NoDeviceError);
    CHECK_THROWS_AS(AsyncPool::set_release_threshold(0), syncblob::NoDeviceError);
    CHECK_THROWS_WITH(AsyncPool::pool(0), says_why && Catch::Contains("cuda::AsyncPool on device 0"));
    CHECK(AsyncPool::allocate_async(0, AsyncPool::default_stream()) == nullptr);  // nothing to allocate
    AsyncPool::deallocate_async(nullptr, 0, AsyncPool::default_stream());         // nothing to free
    AsyncPool::deallocate(nullptr, 0);
}

TEST_CASE("AsyncPool: a cuda::AsyncAllocator blob works on the host and its first device access throws NoDeviceError",
          "[cuda][pool][blob][no-device]") {
    syncblob::Blob<float, syncblob::cuda::AsyncAllocator> blob({4});
    blob.fill(2.5f);
    CHECK(blob.host_data()[3] == 2.5f);
    const auto reason = syncblob::cuda::no_device_reason();
    if (!reason) {
        std::cout << "skipped: a CUDA device is present; this test checks machines without one" << std::endl;
        return;
    }
    CHECK_THROWS_WITH(blob.mutable_device_data(),
                      Catch::Contains(*reason) && Catch::Contains("cuda::AsyncPool::allocate(16 bytes)"));
    CHECK(blob.data_stats().device_allocations == 0);  // the failed access changed nothing
    CHECK(blob.host_data()[0] == 2.5f);
}

TEST_CASE("AsyncPool: a cuda::PooledAllocator blob takes its host block from cuda::PinnedPool",
          "[cuda][pool][blob][no-device]") {
    using Pool = syncblob::cuda::PinnedPool;
    const auto before = Pool::stats();
    {
        syncblob::Blob<float, syncblob::cuda::PooledAllocator> blob({300});
        blob.fill(1.5f);
        CHECK(blob.host_data()[299] == 1.5f);
        CHECK(Pool::stats().requests == before.requests + 1);
        CHECK(Pool::stats().in_use_bytes == before.in_use_bytes + 1536);  // 1200 bytes: the 1536-byte class
        const auto reason = syncblob::cuda::no_device_reason();
        if (!reason) {
            std::cout << "skipped: a CUDA device is present; this test checks machines without one" << std::endl;
            return;
        }
        CHECK_THROWS_WITH(blob.mutable_device_data(), Catch::Contains("cuda::AsyncPool::allocate(1200 bytes)"));
        CHECK(blob.host_data()[0] == 1.5f);
    }
    CHECK(Pool::stats().in_use_bytes == before.in_use_bytes);  // back in the pool, not leaked
}
