// SPDX-License-Identifier: BSD-2-Clause
// The state machine's table (detail::transition) against the two things that must agree with it:
// what SyncedBuffer does for every access from every head (the asynchronous copies included), and
// the table users read in docs/guide.md.

#include <catch2/catch.hpp>

#include <array>
#include <sstream>
#include <string>
#include <vector>

#include <syncblob/memory/synced_buffer.hpp>
#include <syncblob/sim/device.hpp>

#include "files.hpp"

namespace {

using syncblob::Head;
using syncblob::Side;
using syncblob::detail::Access;
using syncblob::detail::Step;
using syncblob::detail::transition;
using syncblob::detail::Want;
using Buffer = syncblob::SyncedBuffer<syncblob::AlignedAllocator, syncblob::SimulatedDevice>;

constexpr std::array heads{Head::uninitialized, Head::at_host, Head::at_device, Head::synced};
constexpr std::array accesses{Access{Side::host, Want::read},        Access{Side::host, Want::write},
                              Access{Side::host, Want::overwrite},   Access{Side::host, Want::prefetch},
                              Access{Side::device, Want::read},      Access{Side::device, Want::write},
                              Access{Side::device, Want::overwrite}, Access{Side::device, Want::prefetch}};

std::string name_of(Access a) {
    constexpr std::array wants{"read", "write", "overwrite", "prefetch"};
    return std::string(a.side == Side::host ? "host " : "device ") + wants[static_cast<std::size_t>(a.want)];
}

void bring_to(Buffer& b, Head h) {
    switch (h) {
        case Head::uninitialized:
            break;
        case Head::at_host:
            (void)b.mutable_host_data();
            break;
        case Head::at_device:
            (void)b.mutable_device_data();
            break;
        case Head::synced:
            (void)b.mutable_host_data();
            (void)b.device_data();
            break;
    }
    REQUIRE(b.head() == h);
}

void run(Buffer& b, Access a) {
    const bool host = a.side == Side::host;
    switch (a.want) {
        case Want::read:
            (void)(host ? b.host_data() : b.device_data());
            break;
        case Want::write:
            (void)(host ? b.mutable_host_data() : b.mutable_device_data());
            break;
        case Want::overwrite:
            (void)(host ? b.mutable_host_data_for_overwrite() : b.mutable_device_data_for_overwrite());
            break;
        case Want::prefetch:
            host ? b.pull_to_host_async() : b.push_to_device_async();
            break;
    }
}

std::vector<std::string> cells_of(const std::string& row) {
    std::vector<std::string> cells;
    std::stringstream ss(row);
    std::string cell;
    std::getline(ss, cell, '|');  // before the first bar
    while (std::getline(ss, cell, '|')) {
        const auto b = cell.find_first_not_of(' ');
        const auto e = cell.find_last_not_of(' ');
        cells.push_back(b == std::string::npos ? std::string() : cell.substr(b, e - b + 1));
    }
    return cells;
}

}  // namespace

TEST_CASE("every access from every head does what the transition table says", "[memory][transitions]") {
    syncblob::SimulatedDevice::Scope scope({});
    for (const Access a : accesses) {
        for (const Head h : heads) {
            const auto t = transition(a, h);
            CAPTURE(name_of(a), syncblob::head_name(h));
            Buffer b(64);
            bring_to(b, h);
            b.reset_stats();
            if (t.step == Step::refuse) {
                CHECK_THROWS_AS(run(b, a), syncblob::StateError);
                CHECK(b.head() == h);
                CHECK(b.stats() == syncblob::TransferStats{});
                continue;
            }
            run(b, a);
            CHECK(b.head() == t.next);
            CHECK(b.async_pending() == (t.step == Step::copy_async));
            const auto s = b.stats();
            const auto copies = s.host_to_device + s.device_to_host + s.host_to_host + s.device_to_device;
            const auto allocations = s.host_allocations + s.device_allocations;
            const bool copy = t.step == Step::copy_from_other_side || t.step == Step::copy_async;
            CHECK(copies == (copy ? 1u : 0u));
            const bool side_exists =
                h == Head::synced || (a.side == Side::host ? h == Head::at_host : h == Head::at_device);
            CHECK(allocations == (side_exists || t.step == Step::none ? 0u : 1u));
        }
    }
}

TEST_CASE("the table in docs/guide.md is the table SyncedBuffer follows", "[memory][transitions]") {
    const std::string guide = test::slurp(SYNCBLOB_GUIDE);
    REQUIRE_FALSE(guide.empty());

    const std::array<std::pair<const char*, Access>, 6> rows{
        {{"`host_data()`", {Side::host, Want::read}},
         {"`mutable_host_data()`", {Side::host, Want::write}},
         {"`device_data()`", {Side::device, Want::read}},
         {"`mutable_device_data()`", {Side::device, Want::write}},
         {"`push_to_device_async()`", {Side::device, Want::prefetch}},
         {"`pull_to_host_async()`", {Side::host, Want::prefetch}}}};
    for (const auto& [call, a] : rows) {
        const auto at = guide.find("| " + std::string(call) + " |");
        REQUIRE(at != std::string::npos);
        const auto cells = cells_of(guide.substr(at, guide.find('\n', at) - at));
        REQUIRE(cells.size() >= 5);
        for (std::size_t i = 0; i < heads.size(); ++i) {
            const Head h = heads[i];
            const std::string& cell = cells[i + 1];
            const auto t = transition(a, h);
            CAPTURE(call, syncblob::head_name(h), cell);
            const auto arrow = cell.rfind("→ ");
            const auto arrow_end = arrow == std::string::npos ? arrow : arrow + std::string("→ ").size();
            const std::string next = arrow == std::string::npos
                                         ? std::string(syncblob::head_name(h))
                                         : cell.substr(arrow_end, cell.find_first_of(" ,", arrow_end) - arrow_end);
            CHECK(next == syncblob::head_name(t.next));
            CHECK((cell.find("copy") != std::string::npos) ==
                  (t.step == Step::copy_from_other_side || t.step == Step::copy_async));
            CHECK((cell.find("async") != std::string::npos) == (t.step == Step::copy_async));
            CHECK((cell.find("zero") != std::string::npos) == (t.step == Step::allocate_zeroed));
            CHECK((cell.find("StateError") != std::string::npos) == (t.step == Step::refuse));
        }
    }
}
