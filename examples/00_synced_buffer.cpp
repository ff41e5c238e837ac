// SPDX-License-Identifier: BSD-2-Clause
// Tutorial 0: a SyncedBuffer, the heart of syncblob.
//
// A SyncedBuffer owns `size` bytes that may live in host memory, in device memory, or in both.
// It copies only when you ask for a side whose bytes are stale, and it remembers where the fresh
// copy is in its *head*: uninitialized, at_host, at_device or synced. Asking for a side read-only
// (host_data / device_data) copies if needed and leaves both sides fresh (synced); asking for it
// mutable (mutable_host_data / mutable_device_data) also marks the other side stale.
//
// This program walks a buffer through the copy sequence from Caffe's SyncedMemory documentation
// and prints, after each call, the head and the buffer's stats(): every allocation and copy.
//
// The device here is SimulatedDevice: "device memory" is separate host memory, and copies really
// happen and are counted, so this runs on any machine. With a GPU, use syncblob::cuda::Allocator's
// types instead; the state machine is the same.

#include <cstring>
#include <iostream>
#include <string>
#include <string_view>

#include <syncblob/syncblob.hpp>

namespace {

using Buffer = syncblob::SyncedBuffer<syncblob::AlignedAllocator, syncblob::SimulatedDevice>;

// One line per step: the call, the head after it, the copies so far in each direction, and what
// this call copied (compared with `before`, the stats before the call).
void show(std::string_view call, const Buffer& buffer, syncblob::TransferStats& before) {
    const syncblob::TransferStats now = buffer.stats();
    const std::string_view head = syncblob::head_name(buffer.head());
    std::cout << call << std::string(26 - call.size(), ' ') << "head " << head << std::string(11 - head.size(), ' ')
              << "H->D " << now.host_to_device << "  D->H " << now.device_to_host;
    if (now.host_to_device > before.host_to_device) {
        std::cout << "  <- copied host to device";
    }
    if (now.device_to_host > before.device_to_host) {
        std::cout << "  <- copied device to host";
    }
    std::cout << '\n';
    before = now;
}

}  // namespace

int main() {
    // 16 floats' worth of bytes. Nothing is allocated yet: the head is "uninitialized".
    Buffer buffer(16 * sizeof(float));
    std::cout << "a new buffer of " << buffer.size() << " bytes: head " << syncblob::head_name(buffer.head()) << "\n\n";

    // Start, as Caffe's documentation does, with fresh data on the host. The first access
    // allocates the host block (zero-filled); writing through the mutable pointer makes the host
    // copy the fresh one.
    auto* values = static_cast<float*>(buffer.mutable_host_data());
    for (int i = 0; i < 16; ++i) {
        values[i] = static_cast<float>(i);
    }
    buffer.reset_stats();  // count only the nine calls below
    syncblob::TransferStats before{};
    show("(fresh data on the host)", buffer, before);

    // [first-calls]
    // 1. The device side is stale, so reading it copies host to device. Both are fresh now.
    (void)buffer.device_data();
    show("1. device_data()", buffer, before);
    // 2. The host side is fresh too: no copy.
    (void)buffer.host_data();
    show("2. host_data()", buffer, before);
    // 3. Writing on the device needs no copy (the device is fresh), but the host becomes stale.
    (void)buffer.mutable_device_data();
    show("3. mutable_device_data()", buffer, before);
    // [first-calls]
    // 4. Still at_device: no copy.
    (void)buffer.mutable_device_data();
    show("4. mutable_device_data()", buffer, before);
    // 5. The host is stale: reading it copies device to host.
    (void)buffer.host_data();
    show("5. host_data()", buffer, before);
    // 6. synced: no copy.
    (void)buffer.device_data();
    show("6. device_data()", buffer, before);
    // 7. Writing on the host needs no copy, and makes the device stale.
    (void)buffer.mutable_host_data();
    show("7. mutable_host_data()", buffer, before);
    // 8. The device is stale: host to device.
    (void)buffer.mutable_device_data();
    show("8. mutable_device_data()", buffer, before);
    // 9. And back: device to host.
    (void)buffer.mutable_host_data();
    show("9. mutable_host_data()", buffer, before);

    // Two copies each way in nine calls, each one necessary. The full stats line also counts
    // allocations (here the device block, made by call 1; the host block came before reset_stats),
    // device-to-device and host-to-host copies, and math kernels.
    std::cout << "\nstats: " << buffer.stats() << '\n';

    // The bytes survived the round trips.
    const auto* back = static_cast<const float*>(buffer.host_data());
    std::cout << "values[15] = " << back[15] << '\n';
}
