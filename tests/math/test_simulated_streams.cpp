// SPDX-License-Identifier: BSD-2-Clause
// Device math on the asynchronous simulator: kernels are queued on the blob's stream, later copies
// on other streams are ordered after them, and math runs on the blob's own device whatever device
// the caller has current. Each test fails (stale values or a simulator fault) without the ordering
// or the device guard.
#include <catch2/catch.hpp>

#include <cstdint>

#include <syncblob/math.hpp>
#include <syncblob/memory/simulated_device.hpp>

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
