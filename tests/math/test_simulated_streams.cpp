// SPDX-License-Identifier: BSD-2-Clause
// Device math on the asynchronous simulator: kernels are queued on the blob's stream, later copies
// on other streams are ordered after them, and math runs on the blob's own device whatever device
// the caller has current. Each test fails (stale values or a simulator fault) without the ordering
// or the device guard.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include <syncblob/core/sync_audit.hpp>
#include <syncblob/math.hpp>
#include <syncblob/sim/async_device.hpp>
#include <syncblob/sim/device.hpp>

using syncblob::Blob;
using syncblob::Head;
using syncblob::Simulated;
using syncblob::SimulatedDevice;

TEST_CASE("scale_data on the device is queued, and a pull on another stream sees its result", "[math][simulated]") {
    for (std::uint64_t seed = 0; seed < 8; ++seed) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{SimulatedDevice::Settings{.seed = seed}};
        Blob<float, Simulated> b{1024};
        b.fill(1.5f);
        (void)b.mutable_device_data();  // fresh on the device only
        syncblob::scale_data(b, 2.0f);
        CHECK(SimulatedDevice::pending_copies() == 1);  // the kernel has not run
        b.data_buffer()->pull_to_host_async(SimulatedDevice::create_stream());
        CHECK(b.host_data()[1023] == 3.0f);
        CHECK(SimulatedDevice::faults().empty());
    }
}

TEST_CASE("Device math runs on the blob's device whatever device is current", "[math][simulated][devices]") {
    const SimulatedDevice::Scope scope{SimulatedDevice::Settings{.device_count = 2}};
    Blob<double, Simulated> b{256};
    b.fill(2.0);
    b.fill_diff(0.5);
    (void)b.mutable_device_data();  // the blocks live on device 0
    (void)b.mutable_device_diff();
    SimulatedDevice::set_device(1);
    syncblob::scale_data(b, 3.0);
    CHECK(syncblob::asum_data(b) == 256 * 6.0);
    syncblob::update(b);
    CHECK(syncblob::dot(b, b) == 256 * 5.5 * 5.5);
    CHECK(SimulatedDevice::current_device() == 1);  // the caller's device is restored
    CHECK(b.data_stats().device_kernels == 4);
    CHECK(SimulatedDevice::faults().empty());
    SimulatedDevice::set_device(0);
    CHECK(b.host_data()[7] == 5.5);
}

// ---- stream-ordered device memory (SimulatedAsyncDevice) --------------------------------------------

namespace {

using syncblob::SimulatedAsync;
using syncblob::SimulatedAsyncDevice;

// Each test starts and ends with an empty pool.
struct EmptyPool {
    EmptyPool() { SimulatedAsyncDevice::empty_cache(); }
    ~EmptyPool() { SimulatedAsyncDevice::empty_cache(); }
    EmptyPool(const EmptyPool&) = delete;
    EmptyPool& operator=(const EmptyPool&) = delete;
};

}  // namespace

TEST_CASE("A stream-ordered blob: exact transfers, its block freed on its stream and reused there",
          "[math][simulated][pool]") {
    const SimulatedDevice::Scope scope{SimulatedDevice::Settings{}};
    const EmptyPool pool;
    const auto before = SimulatedAsyncDevice::stats();
    const auto s = SimulatedDevice::create_stream();
    const void* block = nullptr;
    {
        Blob<float, SimulatedAsync> b{1024};
        b.set_stream(s);
        b.fill(1.5f);
        block = b.mutable_device_data();  // H->D
        syncblob::scale_data(b, 2.0f);    // queued on s
        CHECK(b.host_data()[1023] == 3.0f);
        syncblob::scale_data(b, 2.0f);  // the device side is fresh again (synced): runs there
        const auto st = b.data_stats();
        CHECK(st.host_allocations == 1);
        CHECK(st.device_allocations == 1);
        CHECK(st.host_to_device == 1);
        CHECK(st.host_to_device_bytes == 4096);
        CHECK(st.device_to_host == 1);
        CHECK(st.device_to_device == 0);
        CHECK(st.device_kernels == 2);
        CHECK(b.diff_stats().device_allocations == 0);
    }
    CHECK(SimulatedDevice::pending_copies() == 2);  // the second scale and the free, not waited for
    Blob<float, SimulatedAsync> c{1024};
    c.set_stream(s);
    CHECK(c.mutable_device_data() == block);  // the same stream takes the block back at once
    CHECK(syncblob::asum_data(c) == 0.0f);    // zero-filled after the queued scale of the old blob
    const auto st = SimulatedAsyncDevice::stats();
    CHECK(st.requests - before.requests == 2);
    CHECK(st.cache_hits - before.cache_hits == 1);
    CHECK(st.in_use_bytes == 4096);
    CHECK(SimulatedDevice::faults().empty());
}

TEST_CASE("update with a diff on another stream: the diff is freed only after the kernel that reads it",
          "[math][simulated][pool]") {
    const SimulatedDevice::Scope scope{SimulatedDevice::Settings{}};
    const EmptyPool pool;
    const auto a = SimulatedDevice::create_stream();
    const auto b = SimulatedDevice::create_stream();
    std::vector<float> out(256, 0.0f);
    {
        Blob<float, SimulatedAsync> x{256};
        Blob<float, SimulatedAsync> g{256};
        x.set_stream(a);
        g.set_stream(b);
        x.fill(1.0f);
        g.fill_diff(0.25f);
        (void)g.mutable_device_diff();
        x.share_diff(g);  // x's diff is g's buffer, on stream b
        (void)x.mutable_device_data();
        syncblob::update(x);  // the sub kernel, on a, reads the diff
        SimulatedDevice::copy_async(out.data(), x.device_data(), out.size() * sizeof(float),
                                    syncblob::CopyKind::device_to_host, a);
    }  // both blobs go: the diff's block is freed on b, the data's on a, with the sub still queued
    CHECK(SimulatedDevice::pending_copies() > 0);
    SimulatedDevice::synchronize();
    CHECK(out[0] == 0.75f);
    CHECK(out[255] == 0.75f);
    CHECK(SimulatedDevice::faults().empty());
}

TEST_CASE("A reduction into a device scalar waits for nothing; reading the scalar waits, on any stream",
          "[math][simulated][audit]") {
    namespace audit = syncblob::audit;
    using A = syncblob::SimulatedAsync;
    for (std::uint64_t seed = 0; seed < 8; ++seed) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{SimulatedDevice::Settings{.seed = seed}};
        {
            Blob<float, A> x{1000};
            Blob<float, A> y{1000};
            x.fill(-0.5f);
            y.fill(2.0f);
            (void)x.mutable_device_data();  // fresh on the device only
            (void)y.mutable_device_data();
            Blob<float, A> sum{syncblob::Shape{}};  // a scalar, on a stream of its own
            Blob<float, A> product{1};
            sum.set_stream(SimulatedDevice::create_stream());
            (void)sum.mutable_device_data();  // their blocks exist: what follows allocates nothing
            (void)product.mutable_device_data();
            audit::reset();
            {
                const audit::ModeScope strict(audit::Mode::error);  // a wait here would throw
                syncblob::asum_data(x, sum);
                syncblob::dot(x, y, product);
            }
            CHECK(audit::total(audit::Wait::host_result) == 0);
            CHECK(sum.data_head() == Head::at_device);
            CHECK(sum.host_data()[0] == 500.0f);        // the read waits, ordered after the kernel
            CHECK(product.host_data()[0] == -1000.0f);  // on x's stream
            Blob<float, A> host_fresh{4};
            host_fresh.fill(3.0f);
            syncblob::sumsq_data(host_fresh, product);  // fresh on the host: computed there
            CHECK(product.data_head() == Head::at_host);
            CHECK(product.host_data()[0] == 36.0f);
            Blob<float, A> two{2};
            CHECK_THROWS_WITH(syncblob::asum_data(x, two),
                              "asum_data: the result blob must hold one element, it is 2 (2)");
        }
        SimulatedDevice::synchronize();
        syncblob::SimulatedAsyncDevice::empty_cache();
        CHECK(SimulatedDevice::faults().empty());
    }
}
