// SPDX-License-Identifier: BSD-2-Clause
// The arena's buffers see the union of its blobs' state machines: exactly the stale slices are
// copied, counted in those blobs' stats, on SimulatedDevice in checking mode.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

#include <syncblob/arena.hpp>

#include "device_guard.hpp"

using syncblob::Head;
using syncblob::ParameterArena;
using syncblob::Simulated;
using syncblob::SimulatedDevice;

namespace {

ParameterArena<float, Simulated> make_arena() {
    ParameterArena<float, Simulated> arena;
    arena.add({8});
    arena.add({0});
    arena.add({5});
    arena.add({16});
    arena.seal();
    return arena;
}

void write_on_device(float* device, std::size_t n, float value) {
    const std::vector<float> values(n, value);
    syncblob_test::write_device<SimulatedDevice>(device, values.data(), n * sizeof(float));
}

}  // namespace

TEST_CASE("ArenaBuffer: a blob made stale on the host makes the arena's host side the one to copy", "[arena]") {
    SimulatedDevice::Scope scope({.checking = true});
    auto arena = make_arena();
    for (auto& b : arena.blobs()) {
        b.fill_diff(1.0f);
    }
    auto diff = arena.flat_diff();
    CHECK(diff.fresh_on_host());
    CHECK_FALSE(diff.fresh_on_device());

    write_on_device(arena[2].mutable_device_diff(), 5, 3.0f);  // blob 2's diff is fresh on the device only
    CHECK_FALSE(diff.fresh_on_host());
    arena[0].reset_stats();
    arena[2].reset_stats();
    arena[3].reset_stats();

    const auto host = diff.host_data();
    CHECK(diff.fresh_on_host());
    CHECK(arena[2].diff_head() == Head::synced);
    CHECK(arena[2].diff_stats().device_to_host == 1);
    CHECK(arena[2].diff_stats().device_to_host_bytes == 5 * sizeof(float));
    CHECK(arena[0].diff_stats().transfers() == 0);
    CHECK(arena[3].diff_stats().transfers() == 0);
    CHECK(diff.stats().device_to_host == 1);
    CHECK(std::count(host.begin(), host.end(), 3.0f) == 5);
    CHECK(std::count(host.begin(), host.end(), 1.0f) == 8 + 16);
    CHECK(std::count(host.begin(), host.end(), 0.0f) == static_cast<std::ptrdiff_t>(host.size()) - 29);  // padding
}

TEST_CASE("ArenaBuffer: device access copies only the slices fresh on the host", "[arena]") {
    SimulatedDevice::Scope scope({.checking = true});
    auto arena = make_arena();
    auto data = arena.flat_data();
    (void)arena[3].mutable_device_data();  // at_device: nothing to copy for it
    arena[0].reset_stats();
    arena[3].reset_stats();

    float* device = data.mutable_device_data();
    CHECK(data.fresh_on_device());
    CHECK_FALSE(data.fresh_on_host());
    CHECK(arena[0].data_stats().host_to_device == 1);
    CHECK(arena[2].data_stats().host_to_device == 1);
    CHECK(arena[3].data_stats().transfers() == 0);
    CHECK(data.stats().host_to_device == 2);
    CHECK(device == arena[0].mutable_device_data());
    CHECK(arena[2].device_data() == device + arena.slice(2).offset / sizeof(float));
    for (const auto& b : arena.blobs()) {
        CHECK((b.count() == 0 || b.data_head() == Head::at_device));
    }

    // Overwriting whole copies nothing.
    for (auto& b : arena.blobs()) {
        b.reset_stats();
    }
    auto host = data.mutable_host_data_for_overwrite();
    CHECK(data.stats().transfers() == 0);
    CHECK(arena[0].data_head() == Head::at_host);
    std::fill(host.begin(), host.end(), 0.5f);
    CHECK(std::ranges::all_of(arena[2].host_data(), [](float x) { return x == 0.5f; }));
}

TEST_CASE("ArenaBuffer: a range of blobs, and asynchronous pushes ordered before device reads", "[arena]") {
    SimulatedDevice::Scope scope({.checking = true, .seed = 7});
    auto arena = make_arena();
    auto diff = arena.flat_diff();
    for (auto& b : arena.blobs()) {
        b.fill_diff(2.0f);
    }
    diff.push_to_device_async(2, 4);
    CHECK(arena[2].diff_head() == Head::synced);
    CHECK(arena[3].diff_head() == Head::synced);
    CHECK(arena[0].diff_head() == Head::at_host);
    CHECK(diff.fresh_on_device(2, 4));
    CHECK_FALSE(diff.fresh_on_device());
    const auto bytes = syncblob_test::read_device<SimulatedDevice>(arena[3].device_diff(), 16 * sizeof(float));
    std::vector<float> values(16);
    std::memcpy(values.data(), bytes.data(), bytes.size());
    CHECK(std::ranges::all_of(values, [](float x) { return x == 2.0f; }));
    CHECK(SimulatedDevice::faults().empty());
}

TEST_CASE("ArenaBuffer of a host-only arena has no device side", "[arena]") {
    syncblob::ParameterArena<double> arena;
    arena.add({3});
    arena.seal();
    auto diff = arena.flat_diff();
    CHECK(diff.fresh_on_host());
    CHECK_THROWS_AS(diff.device_data(), syncblob::NoDeviceError);
    CHECK(diff.elements() == 256 / sizeof(double));
}
