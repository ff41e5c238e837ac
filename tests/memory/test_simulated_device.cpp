// SPDX-License-Identifier: BSD-2-Clause
// SyncedBuffer on SimulatedDevice, beyond the generic suite: fault injection at every allocation,
// checking mode, late asynchronous copies (each test fails if SyncedBuffer forgets a wait), device
// blocks freed once, and absurd sizes.

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <syncblob/memory/synced_buffer.hpp>
#include <syncblob/sim/device.hpp>

#include "counting_allocator.hpp"
#include "device_guard.hpp"

namespace {

using syncblob::Head;
using syncblob::SimulatedDevice;
using Stats = syncblob::TransferStats;
using Bytes = std::vector<unsigned char>;
using Host = syncblob_test::CountingHost<syncblob::AlignedAllocator>;
using Buffer = syncblob::SyncedBuffer<Host, SimulatedDevice>;

constexpr std::size_t n = 100;

Bytes pattern(unsigned seed, std::size_t bytes = n) {
    Bytes out(bytes);
    for (std::size_t i = 0; i < bytes; ++i) {
        out[i] = static_cast<unsigned char>(seed * 31u + i * 7u + 1u);
    }
    return out;
}

Bytes bytes_at(const void* p, std::size_t bytes = n) {
    Bytes out(bytes);
    std::memcpy(out.data(), p, bytes);
    return out;
}

Bytes device_bytes(const void* p, std::size_t bytes = n) {
    return syncblob_test::read_device<SimulatedDevice>(p, bytes);
}

void write_host(Buffer& b, const Bytes& bytes) {
    std::memcpy(b.mutable_host_data(), bytes.data(), bytes.size());
}

void write_device(Buffer& b, const Bytes& bytes) {
    syncblob_test::write_device<SimulatedDevice>(b.mutable_device_data(), bytes.data(), bytes.size());
}

/// The fresh bytes of a buffer, read through an accessor that cannot allocate or copy.
Bytes fresh_bytes(const Buffer& b) {
    switch (b.head()) {
        case Head::at_host:
        case Head::synced:
            return bytes_at(b.host_data());
        case Head::at_device:
            return device_bytes(b.device_data());
        case Head::uninitialized:
            break;
    }
    return {};
}

}  // namespace

// ---- fault injection --------------------------------------------------------------------------------

namespace {

struct Step {
    std::string name;
    std::function<void(Buffer&)> run;
};

/// What one run of the script saw.
struct ScriptResult {
    int failures = 0;            // bad_alloc thrown (each step is retried once after one)
    int unchanged_failures = 0;  // of those, how many left head, stats and contents as they were
    std::uint64_t host_calls = 0;
    std::uint64_t device_allocations = 0;
    Bytes final_host;
    Bytes final_device;
};

/// Runs a script of calls that allocates three times on each side (zero-fill, an async push and an
/// async pull, copies on write of read-only borrows, copy_from), with `settings` in force.
ScriptResult run_script(std::uint64_t fail_host, SimulatedDevice::Settings settings) {
    const Bytes readonly_host = pattern(80);
    void* readonly_device = SimulatedDevice::allocate(n);
    syncblob_test::write_device<SimulatedDevice>(readonly_device, pattern(81).data(), n);
    Buffer source(n);
    write_device(source, pattern(82));

    const std::vector<Step> steps = {
        {"host_data (zero-fill)", [](Buffer& b) { (void)b.host_data(); }},
        {"write host", [](Buffer& b) { write_host(b, pattern(1)); }},
        {"push_to_device_async", [](Buffer& b) { b.push_to_device_async(); }},
        {"write host after the push", [](Buffer& b) { write_host(b, pattern(2)); }},
        {"borrow read-only host",
         [&](Buffer& b) { b.set_host_data(static_cast<const void*>(readonly_host.data()), n); }},
        {"device_data", [](Buffer& b) { (void)b.device_data(); }},
        {"write host (copy on write)", [](Buffer& b) { write_host(b, pattern(3)); }},
        {"borrow read-only device",
         [&](Buffer& b) {
             b.set_device_data(readonly_device, n, syncblob::Borrow{{}, true});
         }},
        {"write device (copy on write)", [](Buffer& b) { write_device(b, pattern(4)); }},
        {"borrow read-only host again",
         [&](Buffer& b) { b.set_host_data(static_cast<const void*>(readonly_host.data()), n); }},
        {"write device", [](Buffer& b) { write_device(b, pattern(5)); }},
        {"pull_to_host_async (into a new host block)", [](Buffer& b) { b.pull_to_host_async(); }},
        {"host_data after the pull", [](Buffer& b) { (void)b.host_data(); }},
        {"borrow read-only device again",
         [&](Buffer& b) {
             b.set_device_data(readonly_device, n, syncblob::Borrow{{}, true});
         }},
        {"copy_from a device-fresh source", [&](Buffer& b) { b.copy_from(source); }},
        {"host_data at the end", [](Buffer& b) { (void)b.host_data(); }},
    };

    ScriptResult result;
    const auto host_calls_before = Host::counters().calls.load();
    {
        const SimulatedDevice::Scope scope(settings);
        const syncblob_test::FailHostAllocation<Host> fail(fail_host);
        Buffer b(n);
        for (const Step& step : steps) {
            const Head head = b.head();
            const Stats stats = b.stats();
            const Bytes before = fresh_bytes(b);
            try {
                step.run(b);
            } catch (const std::bad_alloc&) {
                ++result.failures;
                if (b.head() == head && b.stats() == stats && fresh_bytes(b) == before) {
                    ++result.unchanged_failures;
                }
                step.run(b);  // the injected failure has passed: the buffer is usable
            }
        }
        result.host_calls = Host::counters().calls.load() - host_calls_before;
        result.device_allocations = b.stats().device_allocations;
        result.final_host = bytes_at(b.host_data());
        result.final_device = device_bytes(b.device_data());
    }
    SimulatedDevice::deallocate(readonly_device, n);
    return result;
}

}  // namespace

TEST_CASE("SyncedBuffer survives an allocation failure at each allocation in turn", "[memory][simulated][faults]") {
    const auto live_host = Host::live();
    const auto live_device = SimulatedDevice::live_blocks();
    const ScriptResult reference = run_script(0, {});
    REQUIRE(reference.failures == 0);
    REQUIRE(reference.host_calls == 3);
    REQUIRE(reference.device_allocations == 3);
    CHECK(reference.final_host == pattern(82));
    CHECK(reference.final_device == pattern(82));
    CHECK(Host::live() == live_host);
    CHECK(SimulatedDevice::live_blocks() == live_device);

    for (std::uint64_t k = 1; k <= reference.host_calls; ++k) {
        INFO("host allocation " << k << " fails");
        const ScriptResult r = run_script(k, {});
        CHECK(r.failures == 1);
        CHECK(r.unchanged_failures == 1);
        CHECK(r.final_host == reference.final_host);
        CHECK(r.final_device == reference.final_device);
        CHECK(Host::live() == live_host);
        CHECK(SimulatedDevice::live_blocks() == live_device);
    }
    for (std::uint64_t k = 1; k <= reference.device_allocations; ++k) {
        INFO("device allocation " << k << " fails");
        // the script allocates one device block itself (the read-only borrow) and its source one
        // more, both before the scope: counting starts inside the scope
        const ScriptResult r = run_script(0, {.fail_allocation = k});
        CHECK(r.failures == 1);
        CHECK(r.unchanged_failures == 1);
        CHECK(r.final_host == reference.final_host);
        CHECK(r.final_device == reference.final_device);
        CHECK(Host::live() == live_host);
        CHECK(SimulatedDevice::live_blocks() == live_device);
    }
}

TEST_CASE("SyncedBuffer frees an owned device block once and never a borrowed one", "[memory][simulated][borrow]") {
    const auto live = SimulatedDevice::live_blocks();
    void* borrowed = SimulatedDevice::allocate(n);
    {
        Buffer b(n);
        (void)b.device_data();
        CHECK(SimulatedDevice::live_blocks() == live + 2);
        b.set_device_data(borrowed, n);
        CHECK(SimulatedDevice::live_blocks() == live + 1);  // the owned block went
        void* other = SimulatedDevice::allocate(n);
        b.set_device_data(other, n);
        CHECK(SimulatedDevice::live_blocks() == live + 2);  // the borrow stays
        b.set_device_data(borrowed, n);
        SimulatedDevice::deallocate(other, n);
    }
    CHECK(SimulatedDevice::live_blocks() == live + 1);
    SimulatedDevice::deallocate(borrowed, n);
    CHECK(SimulatedDevice::live_blocks() == live);
}

// ---- checking mode ------------------------------------------------------------------------------------

TEST_CASE("Checking mode poisons the side a mutable access made stale", "[memory][simulated][checking]") {
    const SimulatedDevice::Scope scope({.checking = true});
    Buffer b(n);
    write_host(b, pattern(90));
    const void* device = b.device_data();
    const void* host = b.host_data();
    SECTION("0xFF by default") {
        (void)b.mutable_host_data();
        CHECK(device_bytes(device) == Bytes(n, 0xFF));
        CHECK(bytes_at(host) == pattern(90));
        CHECK(device_bytes(b.device_data()) == pattern(90));  // a real copy repairs it
        (void)b.mutable_device_data();
        CHECK(bytes_at(host) == Bytes(n, 0xFF));
    }
    SECTION("a chosen byte (a valid bool, say)") {
        b.set_poison_byte(0x01);
        (void)b.mutable_device_data();
        CHECK(bytes_at(host) == Bytes(n, 0x01));
        CHECK(bytes_at(b.host_data()) == pattern(90));
        (void)b.mutable_host_data();
        CHECK(device_bytes(device) == Bytes(n, 0x01));
    }
    SECTION("borrowed memory is not poisoned") {
        Bytes borrowed = pattern(91);
        b.set_host_data(borrowed.data(), n);
        (void)b.mutable_device_data();
        CHECK(borrowed == pattern(91));
    }
    SECTION("outside checking mode the stale side keeps its bytes") {
        const SimulatedDevice::Scope quiet({.checking = false});
        (void)b.mutable_host_data();
        CHECK(device_bytes(device) == pattern(90));
    }
}

// ---- late asynchronous copies -----------------------------------------------------------------------
// SimulatedDevice runs an async copy only when its event is waited on or its stream is used again.
// The pushes and pulls below go to a stream of their own, so only SyncedBuffer's wait makes them
// run on time; each test fails when that wait is missing.

TEST_CASE("A host write after an async push does not leak into the copy", "[memory][simulated][async][late]") {
    const auto stream = SimulatedDevice::create_stream();
    void* device = SimulatedDevice::allocate(n);  // borrowed, so the test can look at it later
    {
        Buffer b(n);
        b.set_device_data(device, n);
        write_host(b, pattern(100));
        b.push_to_device_async(stream);
        write_host(b, pattern(101));  // must wait for the push first
        SimulatedDevice::synchronize();
        CHECK(device_bytes(device) == pattern(100));
        CHECK(bytes_at(b.host_data()) == pattern(101));
    }
    SimulatedDevice::deallocate(device, n);
}

TEST_CASE("A device read after an async push sees the pushed bytes", "[memory][simulated][async][late]") {
    const auto stream = SimulatedDevice::create_stream();
    Buffer b(n);
    write_device(b, pattern(102));  // the device block holds other bytes first
    write_host(b, pattern(103));
    b.push_to_device_async(stream);
    CHECK(device_bytes(b.device_data()) == pattern(103));
    CHECK(SimulatedDevice::pending_copies() == 0);
}

TEST_CASE("A device write after an async push is not overwritten by it", "[memory][simulated][async][late]") {
    const auto stream = SimulatedDevice::create_stream();
    Buffer b(n);
    write_device(b, pattern(104));
    write_host(b, pattern(105));
    b.push_to_device_async(stream);
    write_device(b, pattern(106));  // must wait for the push first
    SimulatedDevice::synchronize();
    CHECK(device_bytes(b.device_data()) == pattern(106));
    CHECK(bytes_at(b.host_data()) == pattern(106));
}

TEST_CASE("A host read after an async pull sees the pulled bytes", "[memory][simulated][async][late]") {
    const auto stream = SimulatedDevice::create_stream();
    Buffer b(n);
    write_host(b, pattern(107));  // the host block holds other bytes first
    write_device(b, pattern(108));
    b.pull_to_host_async(stream);
    CHECK(bytes_at(b.host_data()) == pattern(108));
    CHECK(SimulatedDevice::pending_copies() == 0);
}

TEST_CASE("A device write after an async pull does not leak into the copy", "[memory][simulated][async][late]") {
    const auto stream = SimulatedDevice::create_stream();
    Bytes host = pattern(109);  // borrowed, so the test can look at it later
    Buffer b(n);
    b.set_host_data(host.data(), n);
    write_device(b, pattern(110));
    b.pull_to_host_async(stream);
    write_device(b, pattern(111));  // must wait for the pull first
    SimulatedDevice::synchronize();
    CHECK(host == pattern(110));
    CHECK(device_bytes(b.device_data()) == pattern(111));
}

TEST_CASE("A host write after an async pull is not overwritten by it", "[memory][simulated][async][late]") {
    const auto stream = SimulatedDevice::create_stream();
    Buffer b(n);
    write_device(b, pattern(112));
    b.pull_to_host_async(stream);
    write_host(b, pattern(113));  // must wait for the pull first
    SimulatedDevice::synchronize();
    CHECK(bytes_at(b.host_data()) == pattern(113));
    CHECK(device_bytes(b.device_data()) == pattern(113));
}

TEST_CASE("A buffer destroyed with an async copy pending waits for it", "[memory][simulated][async][late]") {
    const auto stream = SimulatedDevice::create_stream();
    Bytes host = pattern(114);
    {
        Buffer b(n);
        b.set_host_data(host.data(), n);
        write_device(b, pattern(115));
        b.pull_to_host_async(stream);
    }
    CHECK(SimulatedDevice::pending_copies() == 0);
    CHECK(host == pattern(115));
}

// ---- absurd sizes ----------------------------------------------------------------------------------------

TEST_CASE("SyncedBuffer of an absurd size throws bad_alloc on first access and stays usable",
          "[memory][simulated][misuse]") {
    const auto live_host = Host::live();
    const auto live_device = SimulatedDevice::live_blocks();
    for (const std::size_t size : {std::numeric_limits<std::size_t>::max(),
                                   static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max())}) {
        INFO(size << " bytes");
        Buffer b(size);
        CHECK(b.size() == size);
        CHECK_THROWS_AS(b.host_data(), std::bad_alloc);
        CHECK_THROWS_AS(b.mutable_host_data(), std::bad_alloc);
        CHECK_THROWS_AS(b.mutable_host_data_for_overwrite(), std::bad_alloc);
        CHECK_THROWS_AS(b.device_data(), std::bad_alloc);
        CHECK_THROWS_AS(b.mutable_device_data(), std::bad_alloc);
        CHECK_THROWS_AS(b.mutable_device_data_for_overwrite(), std::bad_alloc);
        CHECK_THROWS_AS(b.push_to_device_async(), syncblob::StateError);
        CHECK_THROWS_AS(b.pull_to_host_async(), syncblob::StateError);
        Bytes small(16);
        CHECK_THROWS_AS(b.set_host_data(small.data(), small.size()), syncblob::ShapeError);
        CHECK(b.head() == Head::uninitialized);
        CHECK(b.stats() == Stats{});
        CHECK(b.device_id() == -1);
        CHECK_FALSE(b.host_borrowed());
        // the plain aligned allocator refuses it too, without reaching operator new
        CHECK_THROWS_AS(syncblob::AlignedAllocator::allocate(size), std::bad_alloc);
    }
    CHECK(Host::live() == live_host);
    CHECK(SimulatedDevice::live_blocks() == live_device);
}

TEST_CASE("SimulatedDevice hands out garbage, not zeros", "[memory][simulated]") {
    void* p = SimulatedDevice::allocate(n);
    CHECK(device_bytes(p) == Bytes(n, SimulatedDevice::uninitialized_byte));
    SimulatedDevice::deallocate(p, n);
}

TEST_CASE("borrowed host memory can be registered with the device, and is unregistered on release",
          "[memory][simulated][register]") {
    SimulatedDevice::Scope scope({});
    Bytes user = pattern(7);
    Bytes other = pattern(8);
    {
        Buffer b(n);
        syncblob::Borrow borrow;
        borrow.register_memory = true;
        b.set_host_data(user.data(), user.size(), borrow);
        CHECK(SimulatedDevice::registered(user.data()));
        CHECK(SimulatedDevice::registered(user.data() + n - 1));
        b.push_to_device_async();  // a copy from registered memory
        CHECK(device_bytes(b.device_data()) == user);
        b.set_host_data(other.data(), other.size());  // lets go of `user`: unregistered
        CHECK_FALSE(SimulatedDevice::registered(user.data()));
        CHECK_FALSE(SimulatedDevice::registered(other.data()));  // not asked for
        b.set_host_data(user.data(), user.size(), borrow);
        CHECK(SimulatedDevice::registered(user.data()));
    }
    CHECK_FALSE(SimulatedDevice::registered(user.data()));  // the destructor unregistered it
    CHECK(SimulatedDevice::faults().empty());
}

TEST_CASE("memory registered by its owner stays registered after a buffer that borrowed it lets go",
          "[memory][simulated][register]") {
    SimulatedDevice::Scope scope({});
    Bytes user = pattern(9);
    REQUIRE(SimulatedDevice::register_host(user.data(), user.size()));
    {
        Buffer b(n);
        syncblob::Borrow borrow;
        borrow.register_memory = true;
        b.set_host_data(user.data(), user.size(), borrow);
        CHECK(SimulatedDevice::registered(user.data()));
    }
    CHECK(SimulatedDevice::registered(user.data()));  // the owner's registration is the owner's
    SimulatedDevice::unregister_host(user.data());
    CHECK_FALSE(SimulatedDevice::registered(user.data()));
    CHECK(SimulatedDevice::faults().empty());
}

TEST_CASE("a registration that fails leaves the buffer as it was", "[memory][simulated][register]") {
    SimulatedDevice::Settings settings;
    settings.fail_registration = true;
    SimulatedDevice::Scope scope(settings);
    Buffer b(n);
    write_host(b, pattern(3));
    Bytes user = pattern(4);
    syncblob::Borrow borrow;
    borrow.register_memory = true;
    CHECK_THROWS_AS(b.set_host_data(user.data(), user.size(), borrow), syncblob::DeviceError);
    CHECK(b.head() == Head::at_host);
    CHECK(bytes_at(b.host_data()) == pattern(3));
    CHECK_FALSE(b.host_borrowed());
    CHECK_FALSE(SimulatedDevice::registered(user.data()));
}

TEST_CASE("queued_work_touches sees the ranges queued work reads or writes until it has run",
          "[memory][simulated][async]") {
    SimulatedDevice::Scope scope({});
    const auto stream = SimulatedDevice::create_stream();
    Bytes host = pattern(5);
    void* device = SimulatedDevice::allocate(n);
    auto* d = static_cast<unsigned char*>(device);
    SimulatedDevice::copy_async(device, host.data(), n / 2, syncblob::CopyKind::host_to_device, stream);
    CHECK(SimulatedDevice::queued_work_touches(host.data(), 1));                    // read by the copy
    CHECK(SimulatedDevice::queued_work_touches(d + n / 2 - 1, 1));                  // written by it
    CHECK_FALSE(SimulatedDevice::queued_work_touches(host.data() + n / 2, n / 2));  // past its end
    CHECK_FALSE(SimulatedDevice::queued_work_touches(d + n / 2, n / 2));
    CHECK_FALSE(SimulatedDevice::queued_work_touches(host.data(), 0));
    SimulatedDevice::synchronize();
    CHECK_FALSE(SimulatedDevice::queued_work_touches(host.data(), n));
    CHECK_FALSE(SimulatedDevice::queued_work_touches(device, n));
    SimulatedDevice::deallocate(device, n);
    CHECK(SimulatedDevice::faults().empty());
}

TEST_CASE("A scope of no simulated device is refused, naming the setting", "[memory][simulated][options]") {
    for (const int count : {0, -1}) {
        SimulatedDevice::Settings s;
        s.device_count = count;
        CHECK_THROWS_WITH(SimulatedDevice::Scope{s}, "SimulatedDevice::Scope: Settings::device_count " +
                                                         std::to_string(count) + ": a scope needs at least one device");
    }
    CHECK(SimulatedDevice::settings().device_count >= 1);  // nothing was installed
}
