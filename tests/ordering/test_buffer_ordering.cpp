// SPDX-License-Identifier: BSD-2-Clause
// SyncedBuffer and Blob, each ordering, lifetime and device statement seen fail: operands are made
// with work still pending on other streams and on a second simulated device, and every case runs
// under every seed of the fixed set, on the plain simulator and (where the statement is about
// stream-ordered memory) on the stream-ordered one. scripts/mutation-gate removes each statement
// in turn and expects one of these cases to fail.

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstring>
#include <vector>

#include <syncblob/blob.hpp>
#include <syncblob/memory/pinned_pool.hpp>
#include <syncblob/memory/synced_buffer.hpp>
#include <syncblob/sim/async_device.hpp>
#include <syncblob/sim/device.hpp>

#include "ordering_support.hpp"

using namespace syncblob_test;
using syncblob::SimulatedAsyncDevice;

namespace {

constexpr std::size_t n = 16;
constexpr std::size_t bytes = n * sizeof(float);

using Plain = syncblob::SyncedBuffer<syncblob::AlignedAllocator, SimulatedDevice>;
using Ordered = syncblob::SyncedBuffer<syncblob::AlignedAllocator, SimulatedAsyncDevice>;
// Both sides pooled, as cuda::PooledAllocator: the destructor frees without the host waiting.
using HostPool = syncblob::PinnedPool<syncblob::AlignedAllocator, SimulatedAsyncDevice>;
using Pooled = syncblob::SyncedBuffer<HostPool, SimulatedAsyncDevice>;

template <class Buffer>
float* host_floats(Buffer& b) {
    return static_cast<float*>(b.mutable_host_data());
}
template <class Buffer>
const float* device_floats(const Buffer& b) {
    return static_cast<const float*>(b.device_data());
}

template <class Buffer>
void fill_host(Buffer& b, float value) {
    float* h = host_floats(b);
    for (std::size_t i = 0; i < n; ++i) {
        h[i] = value;
    }
}

}  // namespace

TEMPLATE_TEST_CASE("set_stream orders the old stream before the new one, whatever the backend",
                   "[ordering][buffer][set_stream]", Plain, Ordered) {
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed)};
        const auto old_stream = SimulatedDevice::create_stream();
        const auto new_stream = SimulatedDevice::create_stream();
        {
            TestType b(bytes);
            b.set_stream(old_stream);
            auto* d = static_cast<float*>(b.mutable_device_data());  // zero-filled on the old stream
            set_kernel(old_stream, d, n, 2.0f);                      // still queued there
            b.set_stream(new_stream);
            CHECK(static_cast<const float*>(b.host_data())[0] == 2.0f);  // the D->H copy runs on the new stream
        }
        finish();
    }
}

TEMPLATE_TEST_CASE("push_to_device_async writes the device block only after the work on the buffer's stream",
                   "[ordering][buffer][push]", Plain, Ordered) {
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed)};
        const auto own = SimulatedDevice::create_stream();
        const auto copies = SimulatedDevice::create_stream();
        {
            TestType b(bytes);
            b.set_stream(own);
            fill_host(b, 1.0f);
            std::vector<float> seen(n, 0.0f);
            const float* d = device_floats(b);  // H->D on own, waited for
            // A kernel on the buffer's stream still reads the device block when the push is issued.
            copy_kernel(own, seen.data(), d, n);
            fill_host(b, 3.0f);
            b.push_to_device_async(copies);
            SimulatedDevice::synchronize();
            CHECK(seen[0] == 1.0f);  // the kernel read the old values first
            CHECK(d[n - 1] == 3.0f);
        }
        finish();
    }
}

TEMPLATE_TEST_CASE("copy_from on the device waits for the work on the source's stream", "[ordering][buffer][copy_from]",
                   Plain, Ordered) {
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed)};
        const auto source_stream = SimulatedDevice::create_stream();
        const auto target_stream = SimulatedDevice::create_stream();
        {
            TestType source(bytes);
            TestType target(bytes);
            source.set_stream(source_stream);
            target.set_stream(target_stream);
            auto* d = static_cast<float*>(source.mutable_device_data());
            set_kernel(source_stream, d, n, 4.0f);  // the source's values, still queued on its stream
            (void)target.mutable_device_data();
            target.copy_from(source);  // device to device, on the target's stream
            CHECK(static_cast<const float*>(target.host_data())[0] == 4.0f);
        }
        finish();
    }
}

TEMPLATE_TEST_CASE("A pull is ordered after an earlier copy that still reads the host block",
                   "[ordering][buffer][pull]", Plain, Ordered) {
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed)};
        const auto first = SimulatedDevice::create_stream();
        const auto second = SimulatedDevice::create_stream();
        {
            TestType b(bytes);
            fill_host(b, 7.0f);
            b.push_to_device_async(first);  // reads the host block, later
            (void)b.mutable_device_data();  // the buffer's stream waits for the push; nothing is issued on it
            b.pull_to_host_async(second);   // writes the host block the push reads
            CHECK(static_cast<const float*>(b.host_data())[n - 1] == 7.0f);
        }
        finish();
    }
}

TEMPLATE_TEST_CASE("set_device_data waits for a pending copy before it frees the old block",
                   "[ordering][buffer][set_device_data]", Plain, Ordered) {
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed)};
        const auto copies = SimulatedDevice::create_stream();
        void* lent = SimulatedDevice::allocate(bytes);
        {
            TestType b(bytes);
            fill_host(b, 1.0f);
            (void)b.device_data();  // an owned device block
            fill_host(b, 2.0f);
            b.push_to_device_async(copies);  // writes the owned block, later
            b.set_device_data(lent, bytes);  // frees the owned block
            CHECK_FALSE(b.async_pending());
        }
        finish();
        SimulatedDevice::deallocate(lent, bytes);
    }
}

TEST_CASE("The stream-ordered destructor frees after a pending push on another stream", "[ordering][buffer][destroy]") {
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed)};
        const auto own = SimulatedDevice::create_stream();
        const auto copies = SimulatedDevice::create_stream();
        {
            Pooled b(bytes);
            b.set_stream(own);
            fill_host(b, 1.0f);
            (void)b.device_data();
            fill_host(b, 2.0f);
            b.push_to_device_async(copies);
        }  // both blocks go back on `own`, which must first wait for the push
        finish();
        HostPool::empty_cache();
    }
}

TEST_CASE("Checking mode poisons the host block only after a pending push has read it", "[ordering][buffer][poison]") {
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed, 1, true)};
        const auto copies = SimulatedDevice::create_stream();
        {
            Plain b(bytes);
            fill_host(b, 5.0f);
            b.push_to_device_async(copies);
            auto* d = static_cast<float*>(b.mutable_device_data());  // the host side becomes stale: poisoned
            SimulatedDevice::synchronize();
            CHECK(d[0] == 5.0f);  // the push read the values, not the poison
            CHECK(d[n - 1] == 5.0f);
        }
        finish();
    }
}

// ---- devices --------------------------------------------------------------------------------------

TEMPLATE_TEST_CASE("A new device block belongs to the device current at its allocation", "[ordering][buffer][devices]",
                   Plain, Ordered) {
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed, 2)};
        SimulatedDevice::set_device(1);
        {
            TestType b(bytes);
            (void)b.mutable_device_data();  // allocated and zero-filled on device 1
            CHECK(b.device_id() == 1);
            SimulatedDevice::set_device(0);
            CHECK_THROWS_AS(b.host_data(), syncblob::DeviceError);  // the D->H copy needs device 1 current
            SimulatedDevice::set_device(1);
            CHECK(static_cast<const float*>(b.host_data())[0] == 0.0f);
            SimulatedDevice::set_device(0);
        }  // destroyed while device 0 is current
        finish();
    }
}

TEMPLATE_TEST_CASE("set_device_data records the device of the memory lent, not the current one",
                   "[ordering][buffer][devices]", Plain, Ordered) {
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed, 2)};
        SimulatedDevice::set_device(1);
        void* on_one = SimulatedDevice::allocate(bytes);
        SimulatedDevice::set_device(0);
        {
            TestType b(bytes);
            b.set_device_data(on_one, bytes);  // device 0 is current
            CHECK(b.device_id() == 1);
            CHECK_THROWS_AS(b.host_data(), syncblob::DeviceError);
            SimulatedDevice::set_device(1);
            CHECK_NOTHROW(b.host_data());
            SimulatedDevice::set_device(0);
        }
        finish();
        SimulatedDevice::deallocate(on_one, bytes);
    }
}

TEMPLATE_TEST_CASE("A buffer of device 1 destroyed while device 0 is current frees after its own device's work",
                   "[ordering][buffer][devices][destroy]", Plain, Ordered) {
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed, 2)};
        SimulatedDevice::set_device(1);
        {
            TestType b(bytes);  // on device 1's default stream
            const float* d = device_floats(b);
            read_kernel(b.stream(), d, n);  // still queued on device 1's default stream
            SimulatedDevice::set_device(0);
        }
        finish();
    }
}

TEMPLATE_TEST_CASE("set_stream on a buffer of device 1 orders that device's streams", "[ordering][buffer][devices]",
                   Plain, Ordered) {
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed, 2)};
        SimulatedDevice::set_device(1);
        const auto next = SimulatedDevice::create_stream();
        {
            TestType b(bytes);  // device 1's default stream
            auto* d = static_cast<float*>(b.mutable_device_data());
            set_kernel(b.stream(), d, n, 6.0f);
            SimulatedDevice::set_device(0);
            b.set_stream(next);  // device 0 current: the wait is on device 1's default stream all the same
            SimulatedDevice::set_device(1);
            CHECK(static_cast<const float*>(b.host_data())[0] == 6.0f);
            SimulatedDevice::set_device(0);
        }
        finish();
    }
}

// ---- Blob -----------------------------------------------------------------------------------------

TEST_CASE("Blob::set_stream puts both buffers, and those of later reallocations, on the stream",
          "[ordering][blob][set_stream]") {
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed)};
        const auto s = SimulatedDevice::create_stream();
        {
            syncblob::Blob<float, syncblob::Simulated> blob{4};
            blob.set_stream(s);
            CHECK(blob.data_buffer()->stream() == s);
            CHECK(blob.diff_buffer()->stream() == s);
            float* diff = blob.mutable_device_diff();
            set_kernel(s, diff, 4, 1.5f);  // a kernel on the blob's stream writes the diff
            CHECK(blob.host_diff()[3] == 1.5f);
            blob.reshape({8});  // new buffers, on the blob's stream
            CHECK(blob.data_buffer()->stream() == s);
            CHECK(blob.diff_buffer()->stream() == s);
            float* data = blob.mutable_device_data();
            set_kernel(s, data, 8, 2.5f);
            CHECK(blob.host_data()[7] == 2.5f);
        }
        finish();
    }
}

// ---- more of the buffer's own waits and checks ----------------------------------------------------

TEMPLATE_TEST_CASE("A buffer destroyed with a pending push frees its blocks after the copy",
                   "[ordering][buffer][destroy]", Plain, Ordered) {
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed)};
        const auto copies = SimulatedDevice::create_stream();
        {
            TestType b(bytes);
            fill_host(b, 1.0f);
            b.push_to_device_async(copies);  // reads the host block and writes the device block, later
        }
        finish();
    }
}

TEMPLATE_TEST_CASE("set_host_data waits for a pending pull before it frees the host block",
                   "[ordering][buffer][set_host_data]", Plain, Ordered) {
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed)};
        const auto copies = SimulatedDevice::create_stream();
        std::vector<float> lent(n, 8.0f);
        {
            TestType b(bytes);
            fill_host(b, 1.0f);
            (void)b.mutable_device_data();  // at_device, with an owned host block
            b.pull_to_host_async(copies);   // writes the owned host block, later
            b.set_host_data(lent.data(), bytes);
            CHECK(static_cast<const float*>(b.host_data())[0] == 8.0f);
        }
        finish();
    }
}

TEMPLATE_TEST_CASE("Asynchronous copies and device accesses of a buffer of device 1 need device 1 current",
                   "[ordering][buffer][devices]", Plain, Ordered) {
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed, 2)};
        SimulatedDevice::set_device(1);
        {
            TestType b(bytes);
            fill_host(b, 1.0f);
            (void)b.device_data();
            fill_host(b, 2.0f);
            SimulatedDevice::set_device(0);
            CHECK_THROWS_WITH(b.push_to_device_async(),
                              Catch::Contains("lives on device 1") && Catch::Contains("device 0 is current"));
            CHECK_THROWS_AS(b.device_data(), syncblob::DeviceError);
            SimulatedDevice::set_device(1);
            (void)b.mutable_device_data();
            SimulatedDevice::set_device(0);
            CHECK_THROWS_AS(b.pull_to_host_async(), syncblob::DeviceError);
            CHECK(b.head() == syncblob::Head::at_device);
            SimulatedDevice::set_device(1);
            CHECK(static_cast<const float*>(b.host_data())[0] == 2.0f);
            SimulatedDevice::set_device(0);
        }
        finish();
    }
}

TEST_CASE("A host read that copies from the device while a queued copy still writes the host block is a fault",
          "[ordering][buffer][host]") {
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed)};
        const auto s = SimulatedDevice::create_stream();
        std::vector<float> other(n, 3.0f);
        {
            Plain b(bytes);
            float* h = host_floats(b);
            (void)b.mutable_device_data();  // at_device
            // Wrong: a copy into the buffer's (stale) host block, issued and not waited for.
            SimulatedDevice::copy_async(h, other.data(), bytes, syncblob::CopyKind::host_to_device, s);
            (void)b.host_data();  // the slow path: a D->H copy, then the host reads
            CHECK(any_fault(take_faults(), "SyncedBuffer::host_data reads"));
            SimulatedDevice::synchronize();
        }
        finish();
    }
}

TEST_CASE("Copying a read-only borrow on write reads it: a queued copy still writing it is a fault",
          "[ordering][buffer][host]") {
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed)};
        const auto s = SimulatedDevice::create_stream();
        std::vector<float> borrowed(n, 1.0f);
        std::vector<float> other(n, 3.0f);
        {
            Plain b(bytes);
            b.set_host_data(static_cast<const void*>(borrowed.data()), bytes);  // read-only
            SimulatedDevice::copy_async(borrowed.data(), other.data(), bytes, syncblob::CopyKind::host_to_device, s);
            (void)b.mutable_host_data();  // copies the borrow first
            CHECK(any_fault(take_faults(), "copy on write of a read-only borrow reads"));
            SimulatedDevice::synchronize();
        }
        finish();
    }
}

TEST_CASE("Checking mode poisons the side a write made stale", "[ordering][buffer][poison]") {
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed, 1, true)};
        {
            Plain b(bytes);
            fill_host(b, 1.0f);
            const auto* d = static_cast<const unsigned char*>(b.device_data());  // synced
            fill_host(b, 2.0f);              // the device side is stale, its poison queued on the buffer's stream
            SimulatedDevice::synchronize();  // device memory read straight from the host: after the queue
            CHECK(d[0] == 0xFF);
            CHECK(d[bytes - 1] == 0xFF);
            const auto* h = static_cast<const unsigned char*>(b.host_data());
            (void)b.mutable_device_data();  // synced -> at_device: the host side is stale
            CHECK(h[0] == 0xFF);
            CHECK(h[bytes - 1] == 0xFF);
        }
        finish();
    }
}

TEST_CASE("A pooled host block with a pending push goes to a new owner only after the copy read it",
          "[ordering][buffer][pool]") {
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed)};
        const auto own = SimulatedDevice::create_stream();
        const auto copies = SimulatedDevice::create_stream();
        {
            {
                Pooled b(bytes);
                b.set_stream(own);
                fill_host(b, 1.0f);
                b.push_to_device_async(copies);
            }  // the host block goes back to the pool after `own`, which waits for the push
            Pooled next(bytes);
            next.set_stream(own);
            fill_host(next, 2.0f);  // a block the push may still read must not be this one
        }
        finish();
        HostPool::empty_cache();
    }
}

TEST_CASE("A pooled buffer of device 1 with a pending push, destroyed while device 0 is current",
          "[ordering][buffer][devices][destroy]") {
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed, 2)};
        SimulatedDevice::set_device(1);
        const auto copies = SimulatedDevice::create_stream();
        {
            Pooled b(bytes);  // device 1's default stream
            fill_host(b, 1.0f);
            const float* d = device_floats(b);
            read_kernel(b.stream(), d, n);
            fill_host(b, 2.0f);
            b.push_to_device_async(copies);
            SimulatedDevice::set_device(0);
        }  // the waits and the frees go to device 1's default stream
        finish();
        HostPool::empty_cache();
    }
}
