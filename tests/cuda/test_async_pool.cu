// SPDX-License-Identifier: BSD-2-Clause
// cuda::AsyncPool on a GPU, one CUDA translation unit built by nvcc: allocation, stream-ordered free
// and reuse with its statistics, the cap, empty_cache, and Blob<float, cuda::AsyncAllocator> through
// device math, including a blob freed while a kernel on its stream is still running. Without a
// usable device, or on a device without memory pools, each test prints "skipped: ..." (ctest counts
// it as skipped).
#if !defined(__CUDACC__)
#error "test_async_pool.cu is a CUDA translation unit: build it with nvcc (SYNCBLOB_ENABLE_CUDA=ON)"
#endif

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iostream>
#include <new>

#include <syncblob/cuda/async_pool.hpp>
#include <syncblob/cuda/math.hpp>
#include <syncblob/math.hpp>

#include "cuda_test_device.hpp"
#include "stream_delay.cuh"

namespace {

using syncblob::cuda::AsyncPool;
using syncblob_cuda_test::delay;
using syncblob_cuda_test::warm_up;
using GpuBlob = syncblob::Blob<float, syncblob::cuda::AsyncAllocator>;

constexpr std::size_t mib = std::size_t{1} << 20;

/// True when the current device has memory pools, else prints why the test is skipped.
bool pools_supported() {
    int device = 0;
    int supported = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, device) != cudaSuccess || supported == 0) {
        (void)cudaGetLastError();
        std::cout << "skipped: the CUDA device has no memory pools (cudaDevAttrMemoryPoolsSupported is 0)" << std::endl;
        return false;
    }
    return true;
}

/// An empty pool on the current device for the test, emptied again after it.
class FreshPool {
public:
    FreshPool() {
        AsyncPool::set_cap(0);
        AsyncPool::empty_cache();
        AsyncPool::reset_peaks();
        before_ = AsyncPool::stats();
    }
    ~FreshPool() {
        try {
            AsyncPool::set_cap(0);
            AsyncPool::empty_cache();
        } catch (...) {  // a failing device: the test has reported it already
        }
    }
    FreshPool(const FreshPool&) = delete;
    FreshPool& operator=(const FreshPool&) = delete;

    [[nodiscard]] const syncblob::PoolStats& before() const noexcept { return before_; }

private:
    syncblob::PoolStats before_;
};

}  // namespace

TEST_CASE("AsyncPool: a freed block is reused on its stream without growing the pool", "[cuda][pool]") {
    SYNCBLOB_REQUIRE_DEVICE(syncblob::cuda::Device);
    if (!pools_supported()) {
        return;
    }
    const FreshPool pool;
    const syncblob::cuda::Stream stream;
    void* p = AsyncPool::allocate_async(4 * mib, stream);
    auto s = AsyncPool::stats();
    CHECK(s.requests == pool.before().requests + 1);
    CHECK(s.system_allocations == pool.before().system_allocations + 1);
    CHECK(s.requested_bytes == 4 * mib);
    CHECK(s.in_use_bytes >= 4 * mib);
    CHECK(s.reserved_bytes >= s.in_use_bytes);
    const std::size_t reserved = s.reserved_bytes;
    AsyncPool::deallocate_async(p, 4 * mib, stream);
    void* q = AsyncPool::allocate_async(4 * mib, stream);  // the same stream: the freed block serves it
    s = AsyncPool::stats();
    CHECK(s.cache_hits == pool.before().cache_hits + 1);
    CHECK(s.reserved_bytes == reserved);
    CHECK(s.peak_requested_bytes == 4 * mib);
    AsyncPool::deallocate_async(q, 4 * mib, stream);
    stream.synchronize();
    s = AsyncPool::stats();
    CHECK(s.requested_bytes == 0);
    CHECK(s.cached_bytes == s.reserved_bytes);  // kept for reuse: the release threshold keeps everything
    CHECK(s.reserved_bytes == reserved);
}

TEST_CASE("AsyncPool: a request past the cap is a bad_alloc and changes nothing", "[cuda][pool]") {
    SYNCBLOB_REQUIRE_DEVICE(syncblob::cuda::Device);
    if (!pools_supported()) {
        return;
    }
    const FreshPool pool;
    AsyncPool::set_cap(2 * mib);
    void* p = AsyncPool::allocate(2 * mib);
    const auto before = AsyncPool::stats();
    CHECK_THROWS_AS(AsyncPool::allocate(1), std::bad_alloc);
    CHECK_THROWS_WITH(AsyncPool::allocate_async(1, AsyncPool::default_stream()),
                      Catch::Contains("the cap of 2097152 bytes"));
    const auto after = AsyncPool::stats();
    CHECK(after.requests == before.requests);
    CHECK(after.requested_bytes == before.requested_bytes);
    CHECK(after.reserved_bytes == before.reserved_bytes);
    AsyncPool::deallocate(p, 2 * mib);
    CHECK_NOTHROW(AsyncPool::deallocate(AsyncPool::allocate(mib), mib));
}

TEST_CASE("AsyncPool: empty_cache returns the cached memory to the system", "[cuda][pool]") {
    SYNCBLOB_REQUIRE_DEVICE(syncblob::cuda::Device);
    if (!pools_supported()) {
        return;
    }
    const FreshPool pool;
    const syncblob::cuda::Stream stream;
    void* p = AsyncPool::allocate_async(16 * mib, stream);
    AsyncPool::deallocate_async(p, 16 * mib, stream);
    stream.synchronize();
    CHECK(AsyncPool::stats().reserved_bytes >= 16 * mib);
    AsyncPool::empty_cache();
    const auto s = AsyncPool::stats();
    CHECK(s.reserved_bytes == 0);
    CHECK(s.cached_bytes == 0);
    CHECK(s.system_frees == pool.before().system_frees + 1);
    CHECK(s.peak_reserved_bytes >= 16 * mib);

    // A free still queued behind other work: empty_cache waits for it, then gives the memory back.
    void* q = AsyncPool::allocate_async(16 * mib, stream);
    delay(stream, 50);
    AsyncPool::deallocate_async(q, 16 * mib, stream);
    AsyncPool::empty_cache();
    CHECK(AsyncPool::stats().reserved_bytes == 0);
    CHECK(AsyncPool::stats().system_frees == pool.before().system_frees + 2);
}

TEST_CASE("AsyncPool: Blob<float, cuda::AsyncAllocator> goes to the device, through math, and back",
          "[cuda][pool][blob]") {
    SYNCBLOB_REQUIRE_DEVICE(syncblob::cuda::Device);
    if (!pools_supported()) {
        return;
    }
    const FreshPool pool;
    // [async-blob]
    {
        GpuBlob blob({1000});  // Blob<float, cuda::AsyncAllocator>
        blob.fill(2.0f);
        (void)blob.mutable_device_data();
        syncblob::scale_data(blob, 1.5f);
        CHECK(syncblob::asum_data(blob) == 3000.0f);
        const auto host = blob.host_data();
        CHECK(std::count(host.begin(), host.end(), 3.0f) == 1000);
        const auto st = blob.data_stats();
        CHECK(st.device_allocations == 1);
        CHECK(st.host_to_device == 1);
        CHECK(st.device_to_host == 1);
        CHECK(st.device_kernels == 2);
        CHECK(AsyncPool::stats().requested_bytes == 4000);
    }  // the block goes back to the pool on the blob's stream; the host does not wait
    CHECK(AsyncPool::stats().requested_bytes == 0);
    // [async-blob]
}

TEST_CASE("AsyncPool: allocate and deallocate, for users whose streams are unknown, wait for the device",
          "[cuda][pool][streams]") {
    SYNCBLOB_REQUIRE_DEVICE(syncblob::cuda::Device);
    if (!pools_supported()) {
        return;
    }
    const FreshPool pool;
    const syncblob::cuda::Stream stream;
    // allocate: on the default stream, then waited for, so the block is usable from any stream
    delay(AsyncPool::default_stream(), 50);
    void* p = AsyncPool::allocate(mib);
    CHECK(cudaStreamQuery(AsyncPool::default_stream()) == cudaSuccess);
    // deallocate (a DLPack holder's free): after all work on the device, whichever stream it is on
    delay(stream, 50);
    AsyncPool::deallocate(p, mib);
    CHECK(cudaStreamQuery(stream) == cudaSuccess);
}

TEST_CASE("AsyncPool: a blob's block is freed on its stream while its kernels still run, and reused there",
          "[cuda][pool][streams]") {
    SYNCBLOB_REQUIRE_DEVICE(syncblob::cuda::Device);
    if (!pools_supported()) {
        return;
    }
    const FreshPool pool;
    const syncblob::cuda::Stream stream;
    constexpr std::int64_t n = std::int64_t{8} << 20;  // 32 MiB of floats
    constexpr std::size_t bytes = static_cast<std::size_t>(n) * sizeof(float);
    const syncblob::HostBlock out = syncblob::cuda::PinnedAllocator::allocate(bytes);
    warm_up(stream);
    // Both sides pooled: a cuda::AsyncAllocator blob's host block is freed by cudaFreeHost, which
    // waits for the whole device (docs/allocators.md), and would hide the free's stream order.
    using PooledBlob = syncblob::Blob<float, syncblob::cuda::PooledAllocator>;
    const void* freed = nullptr;
    {
        PooledBlob blob({n});
        blob.set_stream(stream);
        blob.fill(1.0f);
        freed = blob.mutable_device_data();
        delay(stream, 50);
        syncblob::scale_data(blob, 3.0f);  // queued behind the delay
        REQUIRE(cudaMemcpyAsync(out.data, blob.device_data(), bytes, cudaMemcpyDeviceToHost, stream) == cudaSuccess);
    }  // the block is freed on `stream`: the host does not wait for the delay
    CHECK(cudaStreamQuery(stream) == cudaErrorNotReady);
    (void)cudaGetLastError();
    PooledBlob next({n});
    next.set_stream(stream);
    // the same stream takes the block back (zero-filled after the copy): the free was stream-ordered
    CHECK(next.mutable_device_data() == freed);
    stream.synchronize();
    const auto* values = static_cast<const float*>(out.data);
    CHECK(std::count(values, values + n, 3.0f) == n);
    CHECK(syncblob::asum_data(next) == 0.0f);
    syncblob::cuda::PinnedAllocator::deallocate(out);
}
