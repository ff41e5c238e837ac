// SPDX-License-Identifier: BSD-2-Clause
// SimulatedDevice as asynchronous as a GPU: queued operations run in stream order and only when
// waited for; stream_wait orders streams without running anything; synchronize interleaves streams
// by seed; and each kind of misuse it can see (a missing wait, a free before the work that uses the
// block, work on another device's block) gives stale values or a fault under every seed tried.
// Then the SyncedBuffer bugs that only such a simulator can show.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <syncblob/memory/synced_buffer.hpp>
#include <syncblob/sim/device.hpp>

#include "simulated_test_kernels.hpp"

namespace {

using syncblob::CopyKind;
using syncblob::Head;
using syncblob::SimulatedDevice;
using Buffer = syncblob::SyncedBuffer<syncblob::AlignedAllocator, SimulatedDevice>;
using Range = SimulatedDevice::Range;

using syncblob_test::add;
using syncblob_test::take_faults;

constexpr std::size_t n = syncblob_test::kernel_bytes;
constexpr std::uint64_t seeds = 8;

bool any_contains(const std::vector<std::string>& faults, const std::string& text) {
    for (const auto& f : faults) {
        if (f.find(text) != std::string::npos) {
            return true;
        }
    }
    return false;
}

}  // namespace

TEST_CASE("Kernels and async copies are queued and run in stream order, only when waited for",
          "[memory][simulated][async]") {
    const SimulatedDevice::Scope scope{SimulatedDevice::Settings{}};
    const auto s = SimulatedDevice::create_stream();
    auto* d = static_cast<unsigned char*>(SimulatedDevice::allocate(n));
    std::vector<unsigned char> h(n, 1);
    SimulatedDevice::copy_async(d, h.data(), n, CopyKind::host_to_device, s);
    add(s, d, 2);
    CHECK(SimulatedDevice::pending_copies() == 2);
    CHECK(d[0] == SimulatedDevice::uninitialized_byte);  // nothing ran yet
    auto done = SimulatedDevice::record(s);
    SimulatedDevice::wait(done);
    CHECK(SimulatedDevice::pending_copies() == 0);
    CHECK(d[5] == 3);  // the copy, then the kernel
    SimulatedDevice::deallocate(d, n);
    CHECK(SimulatedDevice::faults().empty());
}

TEST_CASE("query reports whether an event is reached and runs nothing", "[memory][simulated][async]") {
    const SimulatedDevice::Scope scope{SimulatedDevice::Settings{}};
    const auto s = SimulatedDevice::create_stream();
    auto* d = static_cast<unsigned char*>(SimulatedDevice::allocate(n));
    auto before = SimulatedDevice::record(s);
    CHECK(SimulatedDevice::query(before));  // nothing was issued before it
    add(s, d, 1);
    auto after = SimulatedDevice::record(s);
    CHECK_FALSE(SimulatedDevice::query(after));
    CHECK(SimulatedDevice::pending_copies() == 1);            // the query ran nothing
    CHECK(SimulatedDevice::query(SimulatedDevice::Event{}));  // an empty event is always reached
    SimulatedDevice::synchronize();
    CHECK(SimulatedDevice::query(after));
    SimulatedDevice::deallocate(d, n);
    CHECK(SimulatedDevice::faults().empty());
}

TEST_CASE("stream_wait orders two streams without running anything", "[memory][simulated][async]") {
    for (std::uint64_t seed = 0; seed < seeds; ++seed) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{SimulatedDevice::Settings{.seed = seed}};
        const auto a = SimulatedDevice::create_stream();
        const auto b = SimulatedDevice::create_stream();
        auto* d = static_cast<unsigned char*>(SimulatedDevice::allocate(n));
        std::vector<unsigned char> h(n, 10);
        SimulatedDevice::copy_async(d, h.data(), n, CopyKind::host_to_device, a);
        auto copied = SimulatedDevice::record(a);
        SimulatedDevice::stream_wait(b, copied);
        CHECK(SimulatedDevice::pending_copies() == 1);  // stream_wait ran nothing
        add(b, d, 5);
        auto added = SimulatedDevice::record(b);
        SimulatedDevice::wait(added);  // runs a's copy first, through the dependency
        CHECK(d[0] == 15);
        SimulatedDevice::deallocate(d, n);
        CHECK(SimulatedDevice::faults().empty());
    }
}

TEST_CASE("A missing stream_wait is a fault and gives stale values, whatever the seed",
          "[memory][simulated][async][faults]") {
    for (std::uint64_t seed = 0; seed < seeds; ++seed) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{SimulatedDevice::Settings{.seed = seed}};
        const auto a = SimulatedDevice::create_stream();
        const auto b = SimulatedDevice::create_stream();
        auto* d = static_cast<unsigned char*>(SimulatedDevice::allocate(n));
        std::vector<unsigned char> h(n, 10);
        std::vector<unsigned char> out(n, 0);
        SimulatedDevice::copy_async(d, h.data(), n, CopyKind::host_to_device, a);
        add(b, d, 5);  // forgot: stream_wait(b, record(a))
        SimulatedDevice::copy_async(out.data(), d, n, CopyKind::device_to_host, b);
        auto read = SimulatedDevice::record(b);
        SimulatedDevice::wait(read);  // waits for b only: a's copy has not run
        CHECK(out[0] == static_cast<unsigned char>(SimulatedDevice::uninitialized_byte + 5));
        const auto faults = take_faults();
        CHECK(any_contains(faults, "are unordered"));
        SimulatedDevice::synchronize();
        SimulatedDevice::deallocate(d, n);
    }
}

TEST_CASE("synchronize interleaves unordered streams as the seed chooses", "[memory][simulated][async][faults]") {
    // Two streams write the same byte without ordering: which write lands last depends on the seed.
    const auto last_writers = [] {
        std::vector<int> last;
        for (std::uint64_t seed = 0; seed < 16; ++seed) {
            const SimulatedDevice::Scope scope{SimulatedDevice::Settings{.seed = seed}};
            const auto a = SimulatedDevice::create_stream();
            const auto b = SimulatedDevice::create_stream();
            auto* d = static_cast<unsigned char*>(SimulatedDevice::allocate(1));
            SimulatedDevice::launch(a, "write 1", {}, {Range{d, 1}}, [d] { *d = 1; });
            SimulatedDevice::launch(b, "write 2", {}, {Range{d, 1}}, [d] { *d = 2; });
            SimulatedDevice::synchronize();
            last.push_back(*d);
            CHECK(any_contains(take_faults(), "both write"));
            SimulatedDevice::deallocate(d, 1);
        }
        return last;
    };
    const std::vector<int> first = last_writers();
    CHECK(std::count(first.begin(), first.end(), 1) > 0);
    CHECK(std::count(first.begin(), first.end(), 2) > 0);
    CHECK(last_writers() == first);  // the same seeds give the same orders
}

TEST_CASE("Freeing a block before the work that uses it is a fault, and the work is cancelled",
          "[memory][simulated][async][faults]") {
    for (std::uint64_t seed = 0; seed < seeds; ++seed) {
        const SimulatedDevice::Scope scope{SimulatedDevice::Settings{.seed = seed}};
        const auto s = SimulatedDevice::create_stream();
        auto* d = static_cast<unsigned char*>(SimulatedDevice::allocate(n));
        add(s, d, 1);
        SimulatedDevice::deallocate(d, n);  // forgot: wait for s first
        const auto faults = take_faults();
        REQUIRE(faults.size() == 1);
        CHECK_THAT(faults[0], Catch::Contains("freed while kernel add queued on stream"));
        SimulatedDevice::synchronize();  // the cancelled kernel does not touch freed memory (ASan would see it)
        CHECK(SimulatedDevice::pending_copies() == 0);
    }
}

TEST_CASE("Work issued while another device is current on a block is a fault", "[memory][simulated][faults]") {
    const SimulatedDevice::Scope scope{SimulatedDevice::Settings{.device_count = 2}};
    auto* d = static_cast<unsigned char*>(SimulatedDevice::allocate(n));  // on device 0
    CHECK(SimulatedDevice::device_of(d) == 0);
    SimulatedDevice::set_device(1);
    add(SimulatedDevice::Stream{}, d, 1);
    SimulatedDevice::set_device(0);
    const auto faults = take_faults();
    REQUIRE(faults.size() == 1);
    CHECK_THAT(faults[0], Catch::Contains("touches a block of device 0") && Catch::Contains("device 1 is current"));
    SimulatedDevice::synchronize();
    SimulatedDevice::deallocate(d, n);
}

TEST_CASE("Faults are reported since the innermost scope began", "[memory][simulated][faults]") {
    const SimulatedDevice::Scope outer{SimulatedDevice::Settings{.device_count = 2}};
    auto* d = static_cast<unsigned char*>(SimulatedDevice::allocate(1));
    SimulatedDevice::set_device(1);
    SimulatedDevice::launch(SimulatedDevice::Stream{}, "touch", {Range{d, 1}}, {}, [] {});
    SimulatedDevice::set_device(0);
    CHECK(SimulatedDevice::faults().size() == 1);
    {
        const SimulatedDevice::Scope inner{SimulatedDevice::Settings{}};
        CHECK(SimulatedDevice::faults().empty());
    }
    CHECK(SimulatedDevice::faults().size() == 1);
    SimulatedDevice::clear_faults();
    SimulatedDevice::synchronize();
    SimulatedDevice::deallocate(d, 1);
}

// ---- SyncedBuffer on the asynchronous simulator ----------------------------------------------------

TEST_CASE("A pull on another stream runs after the kernels on the buffer's stream", "[memory][simulated][async]") {
    for (std::uint64_t seed = 0; seed < seeds; ++seed) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{SimulatedDevice::Settings{.seed = seed}};
        const auto copies = SimulatedDevice::create_stream();
        Buffer b(n);
        std::memset(b.mutable_host_data(), 1, n);
        auto* d = static_cast<unsigned char*>(b.mutable_device_data());  // H->D on the buffer's stream
        add(b.stream(), d, 4);  // a kernel on the buffer's stream, still queued
        b.pull_to_host_async(copies);
        CHECK(static_cast<const unsigned char*>(b.host_data())[0] == 5);
        CHECK(SimulatedDevice::faults().empty());
    }
}

TEST_CASE("A pull waits for an earlier async copy of the host block", "[memory][simulated][async]") {
    const SimulatedDevice::Scope scope{SimulatedDevice::Settings{}};
    const auto first = SimulatedDevice::create_stream();
    const auto second = SimulatedDevice::create_stream();
    Buffer b(n);
    std::memset(b.mutable_host_data(), 7, n);
    b.push_to_device_async(first);  // reads the host block, later
    auto* d = static_cast<unsigned char*>(b.mutable_device_data());
    add(b.stream(), d, 1);
    b.pull_to_host_async(second);  // writes the host block the push reads
    CHECK(static_cast<const unsigned char*>(b.host_data())[n - 1] == 8);
    CHECK(SimulatedDevice::faults().empty());
}

TEST_CASE("A buffer frees its device block only after the kernels that use it", "[memory][simulated][async]") {
    const SimulatedDevice::Scope scope{SimulatedDevice::Settings{}};
    const auto blocks = SimulatedDevice::live_blocks();
    {
        Buffer b(n);
        auto* d = static_cast<unsigned char*>(b.mutable_device_data());
        add(b.stream(), d, 1);  // still queued when the buffer goes
    }
    CHECK(SimulatedDevice::live_blocks() == blocks);
    CHECK(SimulatedDevice::pending_copies() == 0);
    CHECK(SimulatedDevice::faults().empty());
}

TEST_CASE("set_device_data records the device the memory belongs to, not the current one",
          "[memory][simulated][devices]") {
    const SimulatedDevice::Scope scope{SimulatedDevice::Settings{.device_count = 2}};
    void* on_zero = SimulatedDevice::allocate(n);  // device 0's memory
    {
        SimulatedDevice::set_device(1);
        Buffer b(n);
        b.set_device_data(on_zero, n);
        SimulatedDevice::set_device(0);
        CHECK(b.device_id() == 0);
        CHECK_NOTHROW(b.host_data());  // device 0 is current: the D->H copy is allowed
    }
    SimulatedDevice::deallocate(on_zero, n);
    CHECK(SimulatedDevice::faults().empty());
}
