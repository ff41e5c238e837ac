// SPDX-License-Identifier: BSD-2-Clause
// SimulatedAsyncDevice: the stream-ordered caching pool (the model of cuda::AsyncPool) and a
// SyncedBuffer whose device block is allocated and freed on its stream without the host waiting.
// A block is never handed out while work that may still use it is queued: the same stream may
// reuse it at once, another stream only once ordered after the free or once the free has run; a
// free that work on another stream is not ordered before, and work after a free, are faults.

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include <syncblob/memory/pinned_pool.hpp>
#include <syncblob/memory/synced_buffer.hpp>
#include <syncblob/sim/async_device.hpp>

#include "simulated_test_kernels.hpp"

namespace {

using syncblob::CopyKind;
using Device = syncblob::SimulatedAsyncDevice;
using Buffer = syncblob::SyncedBuffer<syncblob::AlignedAllocator, Device>;

using syncblob_test::add;
using syncblob_test::take_faults;

constexpr std::size_t n = syncblob_test::kernel_bytes;

// Each test starts and ends with an empty pool, so its statistics are its own.
class FreshPool {
public:
    FreshPool() : scope_(Device::Settings{}) {
        Device::empty_cache();
        Device::reset_peaks();
        before_ = Device::stats();
        blocks_ = Device::live_blocks();
    }
    ~FreshPool() {
        Device::set_cap(0);
        Device::empty_cache();
    }
    FreshPool(const FreshPool&) = delete;
    FreshPool& operator=(const FreshPool&) = delete;

    // The statistics since the test began (counters as differences; bytes as they are).
    [[nodiscard]] syncblob::PoolStats stats() const {
        auto s = Device::stats();
        s.requests -= before_.requests;
        s.cache_hits -= before_.cache_hits;
        s.system_allocations -= before_.system_allocations;
        s.system_frees -= before_.system_frees;
        return s;
    }
    [[nodiscard]] std::size_t blocks_before() const noexcept { return blocks_; }

private:
    Device::Scope scope_;
    syncblob::PoolStats before_;
    std::size_t blocks_ = 0;
};

}  // namespace

TEST_CASE("SimulatedAsyncDevice is a stream-ordered backend, SimulatedDevice is not", "[memory][pool]") {
    STATIC_REQUIRE(syncblob::StreamOrderedBackend<Device>);
    STATIC_REQUIRE_FALSE(syncblob::StreamOrderedBackend<syncblob::SimulatedDevice>);
    STATIC_REQUIRE(syncblob::SyncedAllocator<syncblob::SimulatedAsync>);
}

TEST_CASE("The stream that freed a block may reuse it at once", "[memory][pool]") {
    const FreshPool pool;
    const auto s = Device::create_stream();
    auto* p = static_cast<unsigned char*>(Device::allocate_async(n, s));
    add(s, p, 1);
    Device::deallocate_async(p, n, s);
    CHECK(Device::pending_copies() == 2);  // the kernel and the free: the host waited for neither
    void* q = Device::allocate_async(n, s);
    CHECK(q == p);
    const auto st = pool.stats();
    CHECK(st.requests == 2);
    CHECK(st.cache_hits == 1);
    CHECK(st.system_allocations == 1);
    CHECK(st.in_use_bytes == Device::granularity);
    CHECK(st.requested_bytes == n);
    Device::deallocate_async(q, n, s);
    Device::synchronize();
    CHECK(Device::faults().empty());
}

TEST_CASE("Another stream gets a freed block only once ordered after the free or once the free has run",
          "[memory][pool]") {
    const FreshPool pool;
    const auto a = Device::create_stream();
    const auto b = Device::create_stream();
    auto* p = static_cast<unsigned char*>(Device::allocate_async(n, a));
    add(a, p, 1);
    Device::deallocate_async(p, n, a);

    void* other = Device::allocate_async(n, b);  // b is not ordered after the free: a new block
    CHECK(other != p);
    CHECK(pool.stats().cache_hits == 0);

    auto freed = Device::record(a);
    Device::stream_wait(b, freed);  // now b's next work runs after the free
    void* reused = Device::allocate_async(n, b);
    CHECK(reused == p);
    CHECK(pool.stats().cache_hits == 1);
    CHECK(Device::pending_copies() == 2);  // stream_wait ran nothing: the kernel and the free are queued

    Device::deallocate_async(reused, n, b);
    Device::deallocate_async(other, n, b);
    const auto c = Device::create_stream();
    void* third = Device::allocate_async(n, c);  // a third stream, ordered after neither free: a new block
    CHECK(third != p);
    CHECK(third != other);
    CHECK(pool.stats().cache_hits == 1);
    Device::synchronize();  // every free has run: any stream may take the blocks now
    void* opportunistic = Device::allocate_async(n, c);
    CHECK((opportunistic == p || opportunistic == other));
    CHECK(pool.stats().cache_hits == 2);
    Device::deallocate_async(opportunistic, n, c);
    Device::deallocate_async(third, n, c);
    CHECK(Device::faults().empty());
}

TEST_CASE("A stream-ordered free that work on another stream is not ordered before is a fault",
          "[memory][pool][faults]") {
    const FreshPool pool;
    const auto a = Device::create_stream();
    const auto b = Device::create_stream();
    auto* p = static_cast<unsigned char*>(Device::allocate_async(n, a));
    Device::synchronize();
    add(b, p, 1);                       // queued on b
    Device::deallocate_async(p, n, a);  // forgot: a must wait for b first
    const auto faults = take_faults();
    REQUIRE(faults.size() == 1);
    CHECK_THAT(faults[0], Catch::Contains("freed on stream " + std::to_string(a.id)) &&
                              Catch::Contains("kernel add on stream " + std::to_string(b.id)) &&
                              Catch::Contains("not ordered before the free"));
    Device::synchronize();

    // The same with the wait: no fault.
    auto* q = static_cast<unsigned char*>(Device::allocate_async(n, a));
    Device::synchronize();
    add(b, q, 1);
    auto used = Device::record(b);
    Device::stream_wait(a, used);
    Device::deallocate_async(q, n, a);
    Device::synchronize();
    CHECK(Device::faults().empty());
}

TEST_CASE("Work that touches a block after its stream-ordered free is a fault", "[memory][pool][faults]") {
    const FreshPool pool;
    const auto s = Device::create_stream();
    auto* p = static_cast<unsigned char*>(Device::allocate_async(n, s));
    Device::deallocate_async(p, n, s);
    add(s, p, 1);  // a use after free, even on the same stream
    const auto faults = take_faults();
    REQUIRE(faults.size() == 1);
    CHECK_THAT(faults[0], Catch::Contains("kernel add") && Catch::Contains("after its stream-ordered free"));
    Device::synchronize();
}

TEST_CASE("The cap refuses a request with bad_alloc and changes nothing", "[memory][pool]") {
    const FreshPool pool;
    Device::set_cap(1000);
    void* p = Device::allocate(600);
    const auto before = pool.stats();
    CHECK_THROWS_AS(Device::allocate(401), std::bad_alloc);
    CHECK_THROWS_AS(Device::allocate_async(401, Device::default_stream()), std::bad_alloc);
    const auto after = pool.stats();
    CHECK(after.requests == before.requests);
    CHECK(after.requested_bytes == 600);
    CHECK(after.reserved_bytes == before.reserved_bytes);
    void* q = Device::allocate(400);  // exactly up to the cap
    CHECK(pool.stats().requested_bytes == 1000);
    Device::deallocate(q, 400);
    Device::deallocate(p, 600);
    Device::set_cap(0);
    void* big = Device::allocate(4000);
    Device::deallocate(big, 4000);
    CHECK(Device::faults().empty());
}

TEST_CASE("empty_cache returns the cached blocks to the system, and the statistics follow", "[memory][pool]") {
    const FreshPool pool;
    const auto s = Device::create_stream();
    void* p = Device::allocate_async(300, s);  // rounded to 512
    void* q = Device::allocate_async(n, s);
    auto st = pool.stats();
    CHECK(st.reserved_bytes == 512 + Device::granularity);
    CHECK(st.peak_reserved_bytes == 512 + Device::granularity);
    CHECK(st.peak_requested_bytes == 300 + n);
    Device::deallocate_async(p, 300, s);
    st = pool.stats();
    CHECK(st.in_use_bytes == Device::granularity);
    CHECK(st.cached_bytes == 512);
    CHECK(st.requested_bytes == n);
    CHECK(Device::live_blocks() == pool.blocks_before() + 2);  // the cached block is still held
    Device::empty_cache();
    st = pool.stats();
    CHECK(st.cached_bytes == 0);
    CHECK(st.reserved_bytes == Device::granularity);
    CHECK(st.system_frees == 1);
    CHECK(Device::live_blocks() == pool.blocks_before() + 1);
    Device::deallocate_async(q, n, s);
    CHECK(Device::faults().empty());
}

TEST_CASE("A synchronous free of a block still in use by queued work is a fault, as on SimulatedDevice",
          "[memory][pool][faults]") {
    const FreshPool pool;
    const auto s = Device::create_stream();
    auto* p = static_cast<unsigned char*>(Device::allocate(n));
    add(s, p, 1);
    Device::deallocate(p, n);
    const auto faults = take_faults();
    REQUIRE(faults.size() == 1);
    CHECK_THAT(faults[0], Catch::Contains("freed while kernel add queued"));
    Device::synchronize();
}

// ---- SyncedBuffer on the stream-ordered pool ------------------------------------------------------

TEST_CASE("A buffer frees its device block on its stream without the host waiting", "[memory][pool][buffer]") {
    const FreshPool pool;
    // [stream-ordered-free]
    const auto s = Device::create_stream();
    std::vector<unsigned char> out(n, 0);
    {
        Buffer b(n);  // SyncedBuffer<AlignedAllocator, SimulatedAsyncDevice>
        b.set_stream(s);
        std::memset(b.mutable_host_data(), 1, n);
        auto* d = static_cast<unsigned char*>(b.mutable_device_data());  // H->D, waited for
        add(s, d, 4);                                                    // a kernel, queued on s
        Device::copy_async(out.data(), d, n, CopyKind::device_to_host, s);
    }                                      // the block's free is queued on s too: the host does not wait
    CHECK(Device::pending_copies() == 3);  // the kernel, the copy and the free: none has run
    CHECK(out[0] == 0);
    Device::synchronize();
    CHECK(out[0] == 5);
    // [stream-ordered-free]
    CHECK(out[n - 1] == 5);
    CHECK(Device::faults().empty());
    CHECK(pool.stats().in_use_bytes == 0);
}

TEST_CASE("A new buffer on the same stream reuses the freed block at once, on another stream it does not",
          "[memory][pool][buffer]") {
    const FreshPool pool;
    const auto s = Device::create_stream();
    const auto t = Device::create_stream();
    const void* first = nullptr;
    {
        Buffer b(n);
        b.set_stream(s);
        first = b.mutable_device_data();
        add(s, static_cast<unsigned char*>(b.mutable_device_data()), 1);
    }
    Buffer other(n);
    other.set_stream(t);
    CHECK(other.mutable_device_data() != first);
    Buffer same(n);
    same.set_stream(s);
    CHECK(same.mutable_device_data() == first);
    CHECK(pool.stats().cache_hits == 1);
    CHECK(Device::faults().empty());
}

TEST_CASE("A buffer moved to another stream frees its block after the work on the old one", "[memory][pool][buffer]") {
    const FreshPool pool;
    const auto a = Device::create_stream();
    const auto b = Device::create_stream();
    std::vector<unsigned char> out(n, 0);
    {
        Buffer buffer(n);
        buffer.set_stream(a);
        auto* d = static_cast<unsigned char*>(buffer.mutable_device_data());  // zero-filled
        add(a, d, 3);
        Device::copy_async(out.data(), d, n, CopyKind::device_to_host, a);
        buffer.set_stream(b);  // b waits for what a has queued, so the free on b comes after it
    }
    Device::synchronize();
    CHECK(out[0] == 3);
    CHECK(Device::faults().empty());
}

TEST_CASE("A buffer whose block a kernel on another stream still uses, unordered, is reported at the free",
          "[memory][pool][buffer][faults]") {
    const FreshPool pool;
    const auto mine = Device::create_stream();
    const auto theirs = Device::create_stream();
    {
        Buffer buffer(n);
        buffer.set_stream(mine);
        auto* d = static_cast<unsigned char*>(buffer.mutable_device_data());
        add(theirs, d, 1);  // a user's kernel, not ordered with the buffer's stream
    }
    const auto faults = take_faults();
    REQUIRE_FALSE(faults.empty());
    CHECK_THAT(faults.back(), Catch::Contains("not ordered before the free"));
    Device::synchronize();
}

TEST_CASE("A held device block is freed after its holders, its stream's work finished first",
          "[memory][pool][buffer]") {
    const FreshPool pool;
    const auto s = Device::create_stream();
    std::shared_ptr<void> holder;
    std::vector<unsigned char> out(n, 0);
    {
        Buffer buffer(n);
        buffer.set_stream(s);
        auto* d = static_cast<unsigned char*>(buffer.mutable_device_data());
        add(s, d, 2);
        holder = buffer.hold_device();
        Device::copy_async(out.data(), d, n, CopyKind::device_to_host, s);
    }
    CHECK(Device::pending_copies() == 0);  // handing the block to its holders waited for the stream
    CHECK(out[0] == 2);
    CHECK(pool.stats().in_use_bytes == Device::granularity);  // the holder keeps it
    holder.reset();
    CHECK(pool.stats().in_use_bytes == 0);
    CHECK(Device::faults().empty());
}

// ---- Both sides pooled: host blocks from PinnedPool, device blocks in stream order --------------------

TEST_CASE("A buffer destroyed during its asynchronous push gives both blocks back on its stream, unwaited",
          "[memory][pool][buffer][pinned_pool]") {
    using HostPool = syncblob::PinnedPool<syncblob::AlignedAllocator, Device>;
    using PooledBuffer = syncblob::SyncedBuffer<HostPool, Device>;
    STATIC_REQUIRE(syncblob::StreamAwareHostAllocator<HostPool, Device>);
    const FreshPool pool;
    (void)HostPool::empty_cache();
    const auto s = Device::create_stream();
    const auto t = Device::create_stream();
    std::vector<unsigned char> out(n, 0);
    const void* host = nullptr;
    {
        PooledBuffer b(n);
        b.set_stream(s);
        std::memset(b.mutable_host_data(), 6, n);
        host = b.host_data();
        b.push_to_device_async(t);  // on another stream than the buffer's
        Device::copy_async(out.data(), b.device_data(), n, CopyKind::device_to_host, s);  // s waits for t's push
    }
    // Nothing has run: the host did not wait for the push, and the pool keeps the host block from a
    // new owner while the push still reads it.
    CHECK(Device::queued_work_touches(host, n));
    CHECK(out[0] == 0);
    const syncblob::HostBlock other = HostPool::allocate(n);
    CHECK(other.data != host);
    std::memset(other.data, 9, n);
    HostPool::deallocate(other);
    Device::synchronize();
    CHECK(out[0] == 6);  // what the buffer held when it pushed
    CHECK(out[n - 1] == 6);
    CHECK(Device::faults().empty());
    CHECK(HostPool::stats().in_use_bytes == 0);
    CHECK(HostPool::foreign_deallocations() == 0);
    CHECK(HostPool::empty_cache() == 2 * HostPool::size_class(n));  // the push is done: its block is free again
}
