// SPDX-License-Identifier: BSD-2-Clause
// The simulator's and the buffer's waits as the sync audit sees them: each call of SimulatedDevice
// that blocks the host, the whole device or allocates from the system is counted by kind; a fill is
// queued in stream order (no wait); a buffer's host read of device-fresh data asks for its copy's wait,
// and a first touch of the device side waits for nothing.

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include <syncblob/core/sync_audit.hpp>
#include <syncblob/memory/synced_buffer.hpp>
#include <syncblob/sim/async_device.hpp>
#include <syncblob/sim/device.hpp>

#include "audit_counts.hpp"

namespace audit = syncblob::audit;
using audit::Wait;
using syncblob::SimulatedDevice;
using test::audit_calls;

namespace {

struct Counting {
    Counting() : mode(audit::Mode::count) { audit::reset(); }
    ~Counting() { audit::reset(); }
    audit::ModeScope mode;
    SimulatedDevice::Scope scope{SimulatedDevice::Settings{}};
};

}  // namespace

TEST_CASE("SimulatedDevice reports each wait and system allocation to the sync audit", "[memory][simulated][audit]") {
    const Counting counting;
    const auto s = SimulatedDevice::create_stream();
    constexpr std::size_t n = 64;
    std::vector<unsigned char> host(n, 7);
    void* block = SimulatedDevice::allocate(n);
    CHECK(audit::total(Wait::system_allocation) == 1);
    SimulatedDevice::copy_async(block, host.data(), n, syncblob::CopyKind::host_to_device, s);
    SimulatedDevice::fill(block, 0, n, s);
    auto e = SimulatedDevice::record(s);
    SimulatedDevice::stream_wait(SimulatedDevice::default_stream(), e);
    CHECK(audit::counts().size() == 1);  // none of these waits
    SimulatedDevice::wait(e);
    SimulatedDevice::copy(host.data(), block, n, syncblob::CopyKind::device_to_host, s);
    SimulatedDevice::synchronize();
    SimulatedDevice::deallocate(block, n);
    for (const Wait w : {Wait::system_allocation, Wait::event_synchronize, Wait::synchronous_copy,
                         Wait::device_synchronize, Wait::blocking_free}) {
        CAPTURE(audit::wait_name(w));
        CHECK(audit_calls("caller", w, true) == 1);  // called by the test itself: its own waits
    }
    CHECK(host[0] == 0);
}

TEST_CASE("A fill is queued in stream order: the host does not wait for it", "[memory][simulated][audit]") {
    const Counting counting;
    const auto s = SimulatedDevice::create_stream();
    constexpr std::size_t n = 256;
    auto* block = static_cast<unsigned char*>(SimulatedDevice::allocate(n));
    audit::reset();
    SimulatedDevice::fill(block, 0, n, s);
    // Nothing ran yet: the block still holds what fresh device memory holds, and nothing waited.
    CHECK(block[0] == SimulatedDevice::uninitialized_byte);
    CHECK(audit::counts().empty());
    auto done = SimulatedDevice::record(s);
    SimulatedDevice::wait(done);
    CHECK(block[0] == 0);
    CHECK(block[n - 1] == 0);
    SimulatedDevice::deallocate(block, n);
}

TEST_CASE("A buffer's first device touch waits for nothing; a host read of device-fresh data asks for its copy",
          "[memory][simulated][audit]") {
    using Buffer = syncblob::SyncedBuffer<syncblob::AlignedAllocator, syncblob::SimulatedAsyncDevice>;
    const Counting counting;
    const auto s = SimulatedDevice::create_stream();
    const auto touch = [s] {
        Buffer b(1024);
        b.set_stream(s);
        (void)b.mutable_device_data();  // a stream-ordered block, zero-filled on the stream: no wait
        const auto* host = static_cast<const unsigned char*>(b.host_data());  // D->H: waits, as asked
        return host[0] == 0 && host[1023] == 0;
    };
    CHECK(touch());  // warm-up: the pool takes its first block from the system
    CHECK(audit_calls("SyncedBuffer::mutable_device_data", Wait::system_allocation, false) == 1);
    audit::reset();
    {
        const audit::ModeScope strict(audit::Mode::error);  // any wait nobody asked for throws now
        CHECK(touch());
    }
    CHECK(audit_calls("SyncedBuffer::host_data", Wait::synchronous_copy, true) == 1);
    CHECK(audit::unasked() == 0);
    CHECK(audit::total(Wait::system_allocation) == 0);  // the block came back from the pool's cache
    syncblob::SimulatedAsyncDevice::empty_cache();
}
