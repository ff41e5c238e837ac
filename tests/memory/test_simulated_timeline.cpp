// SPDX-License-Identifier: BSD-2-Clause
// SimulatedTimeline: the virtual clock of the simulated device. Work on one stream runs one after
// the other, on two streams at once unless a wait orders it, host work advances the host, and a
// host wait moves the host to the end of what it waited for.

#include <catch2/catch.hpp>

#include <syncblob/sim/timeline.hpp>
#include <thread>
#include <vector>

using namespace syncblob;
using Device = SimulatedDevice;
using Kind = sim::detail::OpKind;

namespace {

constexpr std::size_t mib = std::size_t{1} << 20;

// 1 MiB a millisecond (about) for copies and host work alike.
SimulatedTimeline::Settings per_ms() {
    SimulatedTimeline::Settings s;
    s.copy_bytes_per_second = 1000.0 * mib;
    s.host_bytes_per_second = 1000.0 * mib;
    return s;
}

struct Buffers {
    std::vector<unsigned char> host = std::vector<unsigned char>(2 * mib, 1);
    void* device = Device::allocate(2 * mib);
    ~Buffers() { Device::deallocate(device, 2 * mib); }
    void copy(std::size_t half, Device::Stream s) {
        Device::copy_async(static_cast<unsigned char*>(device) + half * mib, host.data() + half * mib, mib,
                           CopyKind::host_to_device, s);
    }
};

}  // namespace

TEST_CASE("SimulatedTimeline: copies on one stream run one after another, on two at once", "[memory][timeline]") {
    const Device::Scope scope{Device::Settings{}};
    Buffers b;
    const auto s1 = Device::create_stream();
    const auto s2 = Device::create_stream();
    SECTION("one stream") {
        const SimulatedTimeline timeline(per_ms());
        b.copy(0, s1);
        b.copy(1, s1);
        Device::synchronize();
        CHECK(timeline.count(Kind::copy) == 2);
        CHECK(timeline.busy(false, Kind::copy) == Approx(0.002));
        CHECK(timeline.makespan() == Approx(0.002));
    }
    SECTION("two streams") {
        const SimulatedTimeline timeline(per_ms());
        b.copy(0, s1);
        b.copy(1, s2);
        Device::synchronize();
        CHECK(timeline.makespan() == Approx(0.001));
    }
    SECTION("two streams, the second waiting for the first") {
        const SimulatedTimeline timeline(per_ms());
        b.copy(0, s1);
        auto done = Device::record(s1);
        Device::stream_wait(s2, done);
        b.copy(1, s2);
        Device::synchronize();
        CHECK(timeline.makespan() == Approx(0.002));
    }
    CHECK(Device::faults().empty());
}

TEST_CASE("SimulatedTimeline: host work delays what the host issues after it; a wait moves the host on",
          "[memory][timeline]") {
    const Device::Scope scope{Device::Settings{}};
    Buffers b;
    const auto s = Device::create_stream();
    const SimulatedTimeline timeline(per_ms());
    SimulatedTimeline::host_work("read", mib, 0);  // 1 ms of host work
    CHECK(SimulatedTimeline::now() == Approx(0.001));
    b.copy(0, s);  // issued at 1 ms: runs from 1 to 2 ms
    auto done = Device::record(s);
    SimulatedTimeline::host_work("read", 2 * mib, 0);  // meanwhile the host works until 3 ms
    b.copy(1, s);                                      // issued at 3 ms
    CHECK(SimulatedTimeline::now() == Approx(0.003));
    Device::wait(done);  // already reached at 2 ms: the host stays at 3 ms
    CHECK(SimulatedTimeline::now() == Approx(0.003));
    auto last = Device::record(s);
    Device::wait(last);  // the second copy ends at 4 ms
    CHECK(SimulatedTimeline::now() == Approx(0.004));
    const auto records = timeline.records();
    REQUIRE(records.size() == 4);
    CHECK(records[1].start == Approx(0.001));
    CHECK(records[3].start == Approx(0.003));
    CHECK(timeline.busy(true) == Approx(0.003));

    double other = -1;  // a thread new to the timeline starts at its beginning
    std::thread([&] { other = SimulatedTimeline::now(); }).join();
    CHECK(other == 0);
    CHECK(Device::faults().empty());
}

TEST_CASE("SimulatedTimeline: measured host time when no host bandwidth is set; none outside a timeline",
          "[memory][timeline]") {
    SimulatedTimeline::host_work("ignored", mib, 5.0);
    CHECK(SimulatedTimeline::now() == 0);
    SimulatedTimeline::Settings s;
    s.host_bytes_per_second = 0;
    const SimulatedTimeline timeline(s);
    SimulatedTimeline::host_work("read", mib, 0.25);
    CHECK(SimulatedTimeline::now() == Approx(0.25));
    {
        const SimulatedTimeline inner(per_ms());  // replaces the outer one while it lives
        CHECK(SimulatedTimeline::now() == 0);
    }
    CHECK(SimulatedTimeline::now() == Approx(0.25));
}
