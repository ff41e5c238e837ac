// SPDX-License-Identifier: BSD-2-Clause
// SyncedBuffer with NoDevice: a host-only buffer. Every device access throws NoDeviceError saying
// so and changes nothing; the host side works as usual.

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <syncblob/memory/no_device.hpp>
#include <syncblob/memory/synced_buffer.hpp>
#include <syncblob/sim/device.hpp>

namespace {

using syncblob::Head;
using Stats = syncblob::TransferStats;
using Bytes = std::vector<unsigned char>;
using HostBuffer = syncblob::SyncedBuffer<syncblob::AlignedAllocator, syncblob::NoDevice>;

constexpr std::size_t n = 48;

Bytes pattern(unsigned seed, std::size_t bytes = n) {
    Bytes out(bytes);
    for (std::size_t i = 0; i < bytes; ++i) {
        out[i] = static_cast<unsigned char>(seed * 13u + i * 5u + 3u);
    }
    return out;
}

Bytes bytes_at(const void* p, std::size_t bytes = n) {
    Bytes out(bytes);
    std::memcpy(out.data(), p, bytes);
    return out;
}

}  // namespace

TEST_CASE("A NoDevice buffer throws NoDeviceError on every device access", "[memory][nodevice]") {
    struct Call {
        const char* operation;
        std::function<void(HostBuffer&)> run;
    };
    Bytes device_memory(n);
    const Call calls[] = {
        {"SyncedBuffer::device_data", [](HostBuffer& b) { (void)b.device_data(); }},
        {"SyncedBuffer::mutable_device_data", [](HostBuffer& b) { (void)b.mutable_device_data(); }},
        {"SyncedBuffer::mutable_device_data_for_overwrite",
         [](HostBuffer& b) { (void)b.mutable_device_data_for_overwrite(); }},
        {"SyncedBuffer::set_device_data", [&](HostBuffer& b) { b.set_device_data(device_memory.data(), n); }},
        {"SyncedBuffer::push_to_device_async", [](HostBuffer& b) { b.push_to_device_async(); }},
        {"SyncedBuffer::pull_to_host_async", [](HostBuffer& b) { b.pull_to_host_async(); }},
    };
    for (const bool initialized : {false, true}) {
        for (const Call& call : calls) {
            INFO(call.operation << (initialized ? " on a buffer with host data" : " on a new buffer"));
            HostBuffer b(n);
            if (initialized) {
                std::memcpy(b.mutable_host_data(), pattern(1).data(), n);
            }
            const Head head = b.head();
            const Stats stats = b.stats();
            CHECK_THROWS_AS(call.run(b), syncblob::NoDeviceError);
            CHECK_THROWS_AS(call.run(b), syncblob::DeviceError);  // NoDeviceError is a DeviceError
            CHECK_THROWS_WITH(call.run(b), Catch::Contains(call.operation) && Catch::Contains("host-only"));
            CHECK(b.head() == head);
            CHECK(b.stats() == stats);
            CHECK(b.device_id() == -1);
            if (initialized) {
                CHECK(bytes_at(b.host_data()) == pattern(1));
            }
        }
    }
}

TEST_CASE("A NoDevice buffer works on the host", "[memory][nodevice]") {
    HostBuffer b(n);
    CHECK(bytes_at(b.host_data()) == Bytes(n, 0));
    CHECK(b.head() == Head::at_host);
    std::memcpy(b.mutable_host_data(), pattern(2).data(), n);
    CHECK(bytes_at(b.host_data()) == pattern(2));
    CHECK(b.stats() == Stats{.host_allocations = 1});
    HostBuffer copy(n);
    copy.copy_from(b);
    CHECK(bytes_at(copy.host_data()) == pattern(2));
    CHECK(copy.stats() == Stats{.host_allocations = 1, .host_to_host = 1, .host_to_host_bytes = n});
}

TEST_CASE("A NoDevice buffer copies from a device-fresh buffer of another backend on the host",
          "[memory][nodevice][copy]") {
    syncblob::BufferFor<syncblob::Simulated> source(n);
    syncblob::SimulatedDevice::copy(source.mutable_device_data(), pattern(3).data(), n,
                                    syncblob::CopyKind::host_to_device, {});
    source.reset_stats();
    HostBuffer target(n);
    target.copy_from(source);
    CHECK(bytes_at(target.host_data()) == pattern(3));
    CHECK(source.stats() == Stats{.host_allocations = 1, .device_to_host = 1, .device_to_host_bytes = n});
    CHECK(target.stats() == Stats{.host_allocations = 1, .host_to_host = 1, .host_to_host_bytes = n});
}

TEST_CASE("A NoDevice buffer keeps no device state and takes at most 232 bytes", "[memory][nodevice]") {
    // An arena makes two buffers a blob, by the million: a `std::mutex` (40 bytes with glibc), a
    // device holding with keep-alive handles for a backend that has no device, and the kernel counts
    // kept twice made a host-only buffer 328 bytes.
    CHECK(sizeof(HostBuffer) <= 232);
    CHECK(sizeof(syncblob::detail::DeviceHolding<syncblob::NoDevice>) <= 12);
    HostBuffer buffer(n);
    std::memset(buffer.mutable_host_data(), 7, n);
    CHECK(buffer.hold_device() == nullptr);  // no device memory to keep alive
    CHECK(buffer.device_id() == -1);
    CHECK_FALSE(buffer.refuses_writes());
    CHECK_FALSE(buffer.owns(static_cast<const unsigned char*>(buffer.host_data()) + n));
    CHECK(buffer.owns(buffer.host_data()));
}
