// SPDX-License-Identifier: BSD-2-Clause
// The state machine's table (detail::transition) against the two things that must agree with it:
// what SyncedBuffer does for every access from every head, and the table users read in docs/guide.md.

#include <catch2/catch.hpp>

#include <array>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <syncblob/memory/simulated_device.hpp>
#include <syncblob/memory/synced_buffer.hpp>

namespace {

using syncblob::Head;
using syncblob::detail::Access;
using syncblob::detail::Step;
using syncblob::detail::transition;
using Buffer = syncblob::SyncedBuffer<syncblob::AlignedAllocator, syncblob::SimulatedDevice>;

constexpr std::array heads{Head::uninitialized, Head::at_host, Head::at_device, Head::synced};
constexpr std::array accesses{Access::host_read,   Access::host_write,   Access::host_overwrite,
                              Access::device_read, Access::device_write, Access::device_overwrite};

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
    switch (a) {
        case Access::host_read:
            (void)b.host_data();
            break;
        case Access::host_write:
            (void)b.mutable_host_data();
            break;
        case Access::host_overwrite:
            (void)b.mutable_host_data_for_overwrite();
            break;
        case Access::device_read:
            (void)b.device_data();
            break;
        case Access::device_write:
            (void)b.mutable_device_data();
            break;
        case Access::device_overwrite:
            (void)b.mutable_device_data_for_overwrite();
            break;
    }
}

std::string file_text(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
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
            CAPTURE(static_cast<int>(a), syncblob::head_name(h));
            Buffer b(64);
            bring_to(b, h);
            b.reset_stats();
            run(b, a);
            CHECK(b.head() == t.next);
            const auto s = b.stats();
            const auto copies = s.host_to_device + s.device_to_host + s.host_to_host + s.device_to_device;
            const auto allocations = s.host_allocations + s.device_allocations;
            CHECK(copies == (t.step == Step::copy_from_other_side ? 1u : 0u));
            const bool side_exists =
                h == Head::synced || (syncblob::detail::on_host(a) ? h == Head::at_host : h == Head::at_device);
            CHECK(allocations == (side_exists ? 0u : 1u));
        }
    }
}

TEST_CASE("the table in docs/guide.md is the table SyncedBuffer follows", "[memory][transitions]") {
    const std::string guide = file_text(SYNCBLOB_GUIDE);
    REQUIRE_FALSE(guide.empty());

    const std::array<std::pair<const char*, Access>, 4> rows{{{"`host_data()`", Access::host_read},
                                                              {"`mutable_host_data()`", Access::host_write},
                                                              {"`device_data()`", Access::device_read},
                                                              {"`mutable_device_data()`", Access::device_write}}};
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
            const std::string next = arrow == std::string::npos ? std::string(syncblob::head_name(h))
                                                                : cell.substr(arrow + std::string("→ ").size());
            CHECK(next == syncblob::head_name(t.next));
            CHECK((cell.find("copy") != std::string::npos) == (t.step == Step::copy_from_other_side));
            CHECK((cell.find("zero") != std::string::npos) == (t.step == Step::allocate_zeroed));
        }
    }
}
