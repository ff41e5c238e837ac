// SPDX-License-Identifier: BSD-2-Clause
// The simulator moved to syncblob/sim/; its old include paths keep giving its classes through the
// 0.2 releases (CHANGELOG, "What to change"): a program written against them still builds and runs.

#include <catch2/catch.hpp>

#include <syncblob/blob.hpp>
#include <syncblob/math.hpp>
#include <syncblob/math/simulated_kernels.hpp>
#include <syncblob/memory/simulated_async_device.hpp>
#include <syncblob/memory/simulated_context.hpp>
#include <syncblob/memory/simulated_device.hpp>
#include <syncblob/memory/simulated_timeline.hpp>

#include <type_traits>

using namespace syncblob;

TEST_CASE("the simulator's old include paths give its classes", "[memory][sim]") {
    STATIC_REQUIRE(std::is_base_of_v<SimulatedContext, SimulatedDevice>);
    SimulatedDevice::Scope scope({.checking = true});
    SimulatedTimeline timeline;
    Blob<float, SimulatedAsync> blob({4});
    blob.fill(2.0f);
    (void)blob.mutable_device_data();  // a copy to the device, on the timeline's clock; the host is stale
    CHECK(timeline.count(sim::detail::OpKind::copy) == 1);
    CHECK(asum_data(blob) == 8.0f);  // so the sum is the simulated device's kernel
    CHECK(blob.data_head() == Head::at_device);
    CHECK(SimulatedDevice::footprint().blocks > 0);
}
