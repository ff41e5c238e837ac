// SPDX-License-Identifier: BSD-2-Clause
// Tutorial 9: the pinned host pool. Blobs that take their host memory from PinnedPool, what its
// statistics say, and how it keeps a block that an issued copy still reads from a new owner.
//
// The device is SimulatedDevice (copies run late, as on a GPU), so this runs on any machine. With a
// GPU, the same code uses syncblob::cuda::PooledHostAllocator and syncblob::cuda::PinnedPool.

#include <cstddef>
#include <cstring>
#include <iostream>

#include <syncblob/blob.hpp>
#include <syncblob/memory/pinned_pool.hpp>
#include <syncblob/sim/device.hpp>

namespace sb = syncblob;
using Device = sb::SimulatedDevice;

namespace {

void print(const char* when, const sb::PoolStats& s) {
    std::cout << when << ": in use " << s.in_use_bytes << " B (asked " << s.requested_bytes << "), cached "
              << s.cached_bytes << ", reserved " << s.reserved_bytes << ", " << s.requests << " requests, "
              << s.cache_hits << " from the cache, " << s.system_allocations << " from the system\n";
}

}  // namespace

int main() {
    const Device::Scope scope{Device::Settings{}};

    // [blob]
    // Blobs on SimulatedPooled take their host blocks from PinnedPool<AlignedAllocator, SimulatedDevice>.
    using Pool = sb::SimulatedPooled::host_allocator;
    {
        sb::Blob<float, sb::SimulatedPooled> activations{1000};  // 4000 bytes: the 4096-byte class
        activations.fill(1.0f);
        print("one blob", Pool::stats());
    }  // its host block goes back to the pool, not to the system
    print("destroyed", Pool::stats());
    sb::Blob<float, sb::SimulatedPooled> next{900};  // 3600 bytes: the same class, served from the cache
    next.fill(2.0f);
    print("another", Pool::stats());
    // [blob]

    // [segments]
    // One segment serves every size up to its own: a block given back is carved for smaller requests,
    // and the pieces merge again when they come back.
    const void* segment = nullptr;
    {
        sb::Blob<float, sb::SimulatedPooled> batch64{64, 65536};  // 16 MiB: a new segment
        batch64.fill(0.5f);
        segment = batch64.host_data().data();
    }
    {
        sb::Blob<float, sb::SimulatedPooled> batch24{24, 65536};  // 6 MiB, carved from it
        sb::Blob<float, sb::SimulatedPooled> batch36{36, 65536};  // 9 MiB (class 10 MiB), from the rest
        batch24.fill(1.0f);
        batch36.fill(1.0f);
        std::cout << "carved from the 16 MiB segment: " << (batch24.host_data().data() == segment ? "yes" : "no")
                  << ", "
                  << (batch36.host_data().data() == batch24.host_data().data() + std::ptrdiff_t{24} * 65536 ? "yes"
                                                                                                            : "no")
                  << '\n';
        print("two smaller batches", Pool::stats());
    }
    print("both destroyed", Pool::stats());
    // [segments]

    // [gating]
    // A block handed back on a stream is not handed out again until the work issued there is done.
    const auto stream = Device::create_stream();
    void* device = Device::allocate(4096);
    const sb::HostBlock staging = Pool::allocate(4096);
    std::memset(staging.data, 7, 4096);
    Device::copy_async(device, staging.data, 4096, sb::CopyKind::host_to_device, stream);
    Pool::deallocate(staging, stream);  // the copy has not run yet: the pool waits for it, we do not

    const sb::HostBlock other = Pool::allocate(4096);
    std::cout << "busy block handed out again: " << (other.data == staging.data ? "yes" : "no") << '\n';
    std::memset(other.data, 9, 4096);  // cannot reach the copy still queued
    Device::synchronize();
    std::cout << "the copy delivered " << int{static_cast<unsigned char*>(device)[0]} << '\n';
    Pool::deallocate(other);
    // [gating]

    // [empty]
    // empty_cache() gives the cached blocks whose work is done back to the system.
    std::cout << "empty_cache released " << Pool::empty_cache() << " bytes\n";
    print("after empty_cache", Pool::stats());
    // [empty]
    Device::deallocate(device, 4096);
    return Device::faults().empty() ? 0 : 1;
}
