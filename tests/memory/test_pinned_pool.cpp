// SPDX-License-Identifier: BSD-2-Clause
// PinnedPool: size classes, exact statistics, cache hits, reuse gated on the device work that used a
// block (on SimulatedDevice, whose asynchronous copies run late), a randomized stress of that gating
// over seeds, the cap, empty_cache, memory the pool did not hand out, and a Blob on SimulatedPooled.
// Each test case uses a pool of its own (a distinct upstream tag type), so counts are exact.

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <new>
#include <random>
#include <string_view>
#include <vector>

#include <syncblob/blob.hpp>
#include <syncblob/memory/pinned_pool.hpp>
#include <syncblob/sim/device.hpp>

#include "counting_allocator.hpp"

namespace {

using syncblob::CopyKind;
using syncblob::HostBlock;
using syncblob::PoolStats;
using syncblob::SimulatedDevice;

constexpr std::size_t KiB = std::size_t{1} << 10;
constexpr std::size_t MiB = std::size_t{1} << 20;

// An upstream of its own per tag (so each test's pool is fresh), marking its blocks with kind 7 and
// remembering the kind of the last block it took back.
template <int Tag>
struct Upstream {
    static constexpr std::string_view name = "test::Upstream";
    static constexpr std::uint32_t kind = 7;
    static inline std::atomic<std::uint64_t> frees{0};
    static inline std::atomic<std::uint32_t> last_freed_kind{0};

    [[nodiscard]] static HostBlock allocate(std::size_t bytes) {
        HostBlock block = syncblob::AlignedAllocator::allocate(bytes);
        block.kind = kind;
        return block;
    }
    static void deallocate(HostBlock block) noexcept {
        ++frees;
        last_freed_kind = block.kind;
        syncblob::AlignedAllocator::deallocate(block);
    }
};

template <int Tag>
using Pool = syncblob::PinnedPool<Upstream<Tag>, SimulatedDevice>;

bool same(const PoolStats& a, const PoolStats& b) {
    return a.in_use_bytes == b.in_use_bytes && a.requested_bytes == b.requested_bytes &&
           a.cached_bytes == b.cached_bytes && a.reserved_bytes == b.reserved_bytes &&
           a.peak_reserved_bytes == b.peak_reserved_bytes && a.peak_requested_bytes == b.peak_requested_bytes &&
           a.requests == b.requests && a.cache_hits == b.cache_hits && a.system_allocations == b.system_allocations &&
           a.system_frees == b.system_frees;
}

}  // namespace

TEST_CASE("PinnedPool rounds to 512 bytes under 1 MiB and to 2 MiB from 1 MiB on", "[pinned_pool]") {
    using P = Pool<0>;
    STATIC_REQUIRE(P::size_class(0) == 0);
    CHECK(P::size_class(1) == 512);
    CHECK(P::size_class(511) == 512);
    CHECK(P::size_class(512) == 512);
    CHECK(P::size_class(513) == 1024);
    CHECK(P::size_class(MiB - 512) == MiB - 512);
    CHECK(P::size_class(MiB - 1) == MiB);
    CHECK(P::size_class(MiB) == 2 * MiB);
    CHECK(P::size_class(MiB + 1) == 2 * MiB);
    CHECK(P::size_class(2 * MiB) == 2 * MiB);
    CHECK(P::size_class(2 * MiB + 1) == 4 * MiB);
    CHECK(P::size_class(33 * MiB) == 34 * MiB);  // a power-of-two pool would take 64 MiB
    CHECK_THROWS_AS(P::size_class(SIZE_MAX), std::bad_alloc);
    CHECK_THROWS_AS(P::allocate(SIZE_MAX - 7), std::bad_alloc);
    CHECK(same(P::stats(), PoolStats{}));
}

TEST_CASE("PinnedPool statistics count rounded, requested, cached and peak bytes exactly", "[pinned_pool]") {
    using P = Pool<1>;
    CHECK(P::allocate(0).data == nullptr);  // counts nothing

    const HostBlock a = P::allocate(513);
    const HostBlock b = P::allocate(3 * MiB + 5);
    CHECK(a.bytes == 513);
    CHECK(a.kind == Upstream<1>::kind);
    auto s = P::stats();
    CHECK(s.in_use_bytes == 1024 + 4 * MiB);
    CHECK(s.requested_bytes == 513 + 3 * MiB + 5);
    CHECK(s.cached_bytes == 0);
    CHECK(s.reserved_bytes == 1024 + 4 * MiB);
    CHECK(s.peak_reserved_bytes == 1024 + 4 * MiB);
    CHECK(s.peak_requested_bytes == 513 + 3 * MiB + 5);
    CHECK(s.requests == 2);
    CHECK(s.cache_hits == 0);
    CHECK(s.system_allocations == 2);
    CHECK(s.system_frees == 0);

    P::deallocate(a);
    s = P::stats();
    CHECK(s.in_use_bytes == 4 * MiB);
    CHECK(s.requested_bytes == 3 * MiB + 5);
    CHECK(s.cached_bytes == 1024);
    CHECK(s.reserved_bytes == 1024 + 4 * MiB);

    const HostBlock c = P::allocate(700);  // the same class as a: served from the cache
    CHECK(c.data == a.data);
    CHECK(c.bytes == 700);
    s = P::stats();
    CHECK(s.requests == 3);
    CHECK(s.cache_hits == 1);
    CHECK(s.system_allocations == 2);
    CHECK(s.cached_bytes == 0);
    CHECK(s.requested_bytes == 700 + 3 * MiB + 5);
    CHECK(s.peak_requested_bytes == 700 + 3 * MiB + 5);  // a new peak

    const HostBlock d = P::allocate(1025);  // another class: a miss
    CHECK(d.data != a.data);
    CHECK(P::stats().cache_hits == 1);

    P::deallocate(b);
    P::deallocate(c);
    P::deallocate(d);
    s = P::stats();
    CHECK(s.in_use_bytes == 0);
    CHECK(s.requested_bytes == 0);
    CHECK(s.cached_bytes == 1024 + 4 * MiB + 1536);
    CHECK(s.peak_reserved_bytes == 1024 + 4 * MiB + 1536);

    P::reset_peaks();
    s = P::stats();
    CHECK(s.peak_reserved_bytes == s.reserved_bytes);
    CHECK(s.peak_requested_bytes == 0);

    CHECK(P::empty_cache() == 1024 + 4 * MiB + 1536);
    s = P::stats();
    CHECK(s.reserved_bytes == 0);
    CHECK(s.cached_bytes == 0);
    CHECK(s.system_frees == 3);
    CHECK(Upstream<1>::frees == 3);
    CHECK(Upstream<1>::last_freed_kind == Upstream<1>::kind);  // given back as Upstream handed it out
    CHECK(P::foreign_deallocations() == 0);
}

TEST_CASE("PinnedPool does not hand out a block an asynchronous copy still reads", "[pinned_pool][gating]") {
    using P = Pool<2>;
    const SimulatedDevice::Scope scope({});
    const auto stream = SimulatedDevice::create_stream();
    constexpr std::size_t bytes = 4 * KiB;
    void* device = SimulatedDevice::allocate(bytes);

    const HostBlock old_block = P::allocate(bytes);
    std::memset(old_block.data, 0x11, bytes);
    SimulatedDevice::copy_async(device, old_block.data, bytes, CopyKind::host_to_device, stream);
    P::deallocate(old_block, stream);  // the copy has not run: it still reads the block
    CHECK(P::stats().cached_bytes == bytes);

    const HostBlock new_block = P::allocate(bytes);  // same class, but the cached block is busy
    CHECK(new_block.data != old_block.data);
    CHECK_FALSE(SimulatedDevice::queued_work_touches(new_block.data, bytes));
    std::memset(new_block.data, 0x22, bytes);  // the new owner writes its block

    SimulatedDevice::synchronize();
    const auto* delivered = static_cast<const unsigned char*>(device);
    CHECK(std::all_of(delivered, delivered + bytes, [](unsigned char v) { return v == 0x11; }));

    const HostBlock again = P::allocate(bytes);  // the work is done: now the old block is reused
    CHECK(again.data == old_block.data);
    CHECK(P::stats().cache_hits == 1);
    CHECK(SimulatedDevice::faults().empty());

    P::deallocate(new_block);
    P::deallocate(again);
    SimulatedDevice::deallocate(device, bytes);
    CHECK(P::empty_cache() == 2 * bytes);
}

TEST_CASE("PinnedPool gates reuse on every stream recorded with record_use", "[pinned_pool][gating]") {
    using P = Pool<3>;
    const SimulatedDevice::Scope scope({});
    const auto first = SimulatedDevice::create_stream();
    const auto second = SimulatedDevice::create_stream();
    constexpr std::size_t bytes = 1000;
    void* device = SimulatedDevice::allocate(2 * bytes);
    auto* to = static_cast<unsigned char*>(device);

    const HostBlock block = P::allocate(bytes);
    std::memset(block.data, 0x33, bytes);
    SimulatedDevice::copy_async(to, block.data, bytes, CopyKind::host_to_device, first);
    // Interior pointer: the block holding it is meant.
    SimulatedDevice::copy_async(to + bytes, static_cast<unsigned char*>(block.data) + 10, bytes - 10,
                                CopyKind::host_to_device, second);
    P::record_use(static_cast<unsigned char*>(block.data) + 10, second);
    P::deallocate(block, first);

    auto event = SimulatedDevice::record(first);
    SimulatedDevice::wait(event);  // the first stream's copy is done, the second's is not
    CHECK(SimulatedDevice::queued_work_touches(block.data, bytes));
    const HostBlock other = P::allocate(bytes);
    CHECK(other.data != block.data);

    SimulatedDevice::synchronize();
    const HostBlock reused = P::allocate(bytes);
    CHECK(reused.data == block.data);
    CHECK(std::all_of(to + bytes, to + 2 * bytes - 10, [](unsigned char v) { return v == 0x33; }));

    CHECK_THROWS_AS(P::record_use(&event, second), syncblob::StateError);  // not the pool's memory
    P::deallocate(other);
    CHECK_THROWS_WITH(P::record_use(other.data, second), Catch::Contains("not in a block the pool has handed out"));
    P::deallocate(reused);
    SimulatedDevice::deallocate(device, 2 * bytes);
    CHECK(SimulatedDevice::faults().empty());
}

TEST_CASE("PinnedPool never hands out a block queued work touches (random traffic, every seed)",
          "[pinned_pool][gating][stress]") {
    using P = Pool<4>;
    constexpr std::array<std::size_t, 7> sizes{100, 512, 700, 4 * KiB, 20 * KiB, 1536 * KiB, 3 * MiB};
    struct Live {
        HostBlock block;
        unsigned char value;
        SimulatedDevice::Stream last_stream;
    };
    struct Delivery {  // a copy out of a pool block and the bytes it must deliver
        void* device;
        std::size_t bytes;
        unsigned char value;
    };
    for (std::uint64_t seed = 1; seed <= 12; ++seed) {
        CAPTURE(seed);
        SimulatedDevice::Settings settings;
        settings.seed = seed;
        const SimulatedDevice::Scope scope(settings);
        const std::array<SimulatedDevice::Stream, 2> streams{SimulatedDevice::create_stream(),
                                                             SimulatedDevice::create_stream()};
        std::mt19937_64 rng(seed);
        std::vector<Live> live;
        std::vector<Delivery> deliveries;
        std::size_t wrong_deliveries = 0;
        std::uint64_t touched = 0;   // allocations handed a block queued work touches (must stay 0)
        std::uint64_t overlaps = 0;  // allocations overlapping a live block (must stay 0)
        auto check_deliveries = [&] {
            for (const auto& d : deliveries) {
                const auto* p = static_cast<const unsigned char*>(d.device);
                if (!std::all_of(p, p + d.bytes, [&](unsigned char v) { return v == d.value; })) {
                    ++wrong_deliveries;
                }
                SimulatedDevice::deallocate(d.device, d.bytes);
            }
            deliveries.clear();
        };
        unsigned char next_value = 1;
        for (int step = 0; step < 300; ++step) {
            const auto pick = rng() % 10;
            if (pick < 4 || live.empty()) {
                const std::size_t bytes = sizes[rng() % sizes.size()];
                const HostBlock block = P::allocate(bytes);
                if (SimulatedDevice::queued_work_touches(block.data, P::size_class(bytes))) {
                    ++touched;
                }
                const auto* begin = static_cast<const unsigned char*>(block.data);
                for (const auto& other : live) {  // carved blocks never overlap
                    const auto* o = static_cast<const unsigned char*>(other.block.data);
                    if (std::less<>{}(begin, o + other.block.bytes) && std::less<>{}(o, begin + bytes)) {
                        ++overlaps;
                    }
                }
                const unsigned char value = next_value++;
                std::memset(block.data, value, bytes);  // the new owner writes its whole block
                live.push_back({block, value, streams[0]});
            } else if (pick < 7) {
                auto& l = live[rng() % live.size()];
                const auto stream = streams[rng() % 2];
                void* device = SimulatedDevice::allocate(l.block.bytes);
                SimulatedDevice::copy_async(device, l.block.data, l.block.bytes, CopyKind::host_to_device, stream);
                deliveries.push_back({device, l.block.bytes, l.value});
                if (stream != l.last_stream) {
                    P::record_use(l.block.data, l.last_stream);  // the earlier stream's copies too
                }
                l.last_stream = stream;
            } else if (pick < 9) {
                const auto i = rng() % live.size();
                P::deallocate(live[i].block, live[i].last_stream);
                live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
            } else {
                SimulatedDevice::synchronize();
                check_deliveries();
            }
        }
        for (const auto& l : live) {
            P::deallocate(l.block, l.last_stream);
        }
        SimulatedDevice::synchronize();
        check_deliveries();
        CHECK(touched == 0);
        CHECK(overlaps == 0);
        CHECK(wrong_deliveries == 0);  // every copy delivered what its block held when it was issued
        CHECK(SimulatedDevice::faults().empty());
        const auto s = P::stats();
        CHECK(s.in_use_bytes == 0);
        CHECK(s.cache_hits > 0);  // reuse did happen
        P::empty_cache();
        CHECK(P::stats().reserved_bytes == 0);
    }
}

TEST_CASE("PinnedPool's cap: cached blocks whose work is done make room, else bad_alloc changes nothing",
          "[pinned_pool][cap]") {
    using P = Pool<5>;
    const SimulatedDevice::Scope scope({});
    P::set_cap(5 * MiB);
    CHECK(P::cap() == 5 * MiB);

    const HostBlock a = P::allocate(2 * MiB);  // class 2 MiB
    const HostBlock b = P::allocate(KiB);      // class 1 KiB
    auto before = P::stats();
    CHECK_THROWS_AS(P::allocate(4 * MiB), std::bad_alloc);  // 6 MiB + 1 KiB > 5 MiB, nothing cached
    CHECK(same(P::stats(), before));
    CHECK_THROWS_AS(P::allocate(8 * MiB), std::bad_alloc);  // over the cap on its own
    CHECK(same(P::stats(), before));

    // A cached block still read by queued work cannot make room.
    const auto stream = SimulatedDevice::create_stream();
    void* device = SimulatedDevice::allocate(4 * KiB);
    SimulatedDevice::copy_async(device, a.data, 4 * KiB, CopyKind::host_to_device, stream);
    P::deallocate(a, stream);
    before = P::stats();
    CHECK_THROWS_AS(P::allocate(3 * MiB), std::bad_alloc);  // needs a's 2 MiB back, but a is busy
    CHECK(same(P::stats(), before));
    CHECK(SimulatedDevice::queued_work_touches(a.data, 4 * KiB));  // a was not freed under the copy

    SimulatedDevice::synchronize();  // now a is done: it goes back to the system to make room
    const HostBlock c = P::allocate(3 * MiB);
    const auto s = P::stats();
    CHECK(s.system_frees == 1);
    CHECK(s.reserved_bytes == 4 * MiB + KiB);
    CHECK(s.cached_bytes == 0);
    CHECK(s.peak_reserved_bytes == 4 * MiB + KiB);
    CHECK(s.requests == 3);
    CHECK(Upstream<5>::frees == 1);

    P::deallocate(b);
    P::deallocate(c);
    SimulatedDevice::deallocate(device, 4 * KiB);
    P::set_cap(SIZE_MAX);
    CHECK(P::empty_cache() == 4 * MiB + KiB);
    CHECK(SimulatedDevice::faults().empty());
}

TEST_CASE("PinnedPool::empty_cache keeps the cached blocks queued work still uses", "[pinned_pool]") {
    using P = Pool<6>;
    const SimulatedDevice::Scope scope({});
    const auto stream = SimulatedDevice::create_stream();
    void* device = SimulatedDevice::allocate(KiB);
    const HostBlock busy = P::allocate(KiB);
    const HostBlock idle = P::allocate(3 * KiB);
    std::memset(busy.data, 0x44, KiB);
    SimulatedDevice::copy_async(device, busy.data, KiB, CopyKind::host_to_device, stream);
    P::deallocate(busy, stream);
    P::deallocate(idle, stream);  // nothing on the stream touches it, but its event is later still

    // Both events are queued behind the copy: neither block is done.
    CHECK(P::empty_cache() == 0);
    CHECK(P::stats().cached_bytes == 4 * KiB);

    SimulatedDevice::synchronize();
    CHECK(P::empty_cache() == 4 * KiB);
    const auto s = P::stats();
    CHECK(s.reserved_bytes == 0);
    CHECK(s.system_frees == 2);
    const auto* delivered = static_cast<const unsigned char*>(device);
    CHECK(std::all_of(delivered, delivered + KiB, [](unsigned char v) { return v == 0x44; }));
    SimulatedDevice::deallocate(device, KiB);
    CHECK(SimulatedDevice::faults().empty());
}

TEST_CASE("PinnedPool ignores and counts memory it did not hand out, and blocks given back twice", "[pinned_pool]") {
    using P = Pool<7>;
    const HostBlock block = P::allocate(100);
    const auto before = P::stats();
    int local = 0;
    P::deallocate(HostBlock{&local, sizeof local, 0});
    P::deallocate(HostBlock{static_cast<unsigned char*>(block.data) + 8, 8, 0});  // not a block's start
    CHECK(P::foreign_deallocations() == 2);
    CHECK(same(P::stats(), before));
    P::deallocate(block);
    P::deallocate(block);  // twice
    CHECK(P::foreign_deallocations() == 3);
    CHECK(P::stats().cached_bytes == 512);
    CHECK(P::stats().in_use_bytes == 0);
    CHECK(P::empty_cache() == 512);
    CHECK(Upstream<7>::frees == 1);
}

TEST_CASE("PinnedPool returns ready cached blocks and retries once when its upstream runs out", "[pinned_pool]") {
    using Counting = syncblob_test::CountingHost<Upstream<8>>;
    using P = syncblob::PinnedPool<Counting, SimulatedDevice>;
    P::set_headroom(std::numeric_limits<double>::infinity());  // only a failing upstream returns blocks here
    const HostBlock x = P::allocate(64 * KiB);
    const HostBlock y = P::allocate(2 * KiB);
    P::deallocate(y);
    P::deallocate(x);  // both cached and ready
    {
        const syncblob_test::FailHostAllocation<Counting> fail(1);
        const HostBlock b = P::allocate(65 * KiB);  // no cached block fits: fails once, returns both, succeeds
        CHECK(b.data != nullptr);
        P::deallocate(b);
    }
    auto s = P::stats();
    CHECK(s.system_frees == 2);
    CHECK(s.system_allocations == 3);
    CHECK(s.reserved_bytes == 65 * KiB);
    {
        const syncblob_test::FailHostAllocation<Counting> fail(1);
        const auto before = P::stats();
        const HostBlock c = P::allocate(70 * KiB);  // returns the 65 KiB block and retries: succeeds
        CHECK(P::stats().system_frees == before.system_frees + 1);
        P::deallocate(c);
    }
    P::empty_cache();
    {
        const syncblob_test::FailHostAllocation<Counting> fail(1);
        const auto before = P::stats();
        CHECK_THROWS_AS(P::allocate(KiB), std::bad_alloc);  // nothing cached to return: fails
        CHECK(same(P::stats(), before));
    }
    CHECK(Counting::live() == 0);
}

TEST_CASE("PinnedPool carves a request from the smallest cached block that fits; blocks given back merge",
          "[pinned_pool][segments]") {
    using P = Pool<9>;
    const HostBlock a = P::allocate(8 * MiB);
    auto* const base = static_cast<unsigned char*>(a.data);
    P::deallocate(a);
    const HostBlock b = P::allocate(3 * MiB);  // class 4 MiB, carved from the cached 8 MiB segment
    CHECK(b.data == base);
    CHECK(b.kind == Upstream<9>::kind);
    auto s = P::stats();
    CHECK(s.in_use_bytes == 4 * MiB);  // counted at the class, the rest stays cached
    CHECK(s.cached_bytes == 4 * MiB);
    CHECK(s.reserved_bytes == 8 * MiB);
    CHECK(s.cache_hits == 1);
    const HostBlock c = P::allocate(MiB + 1);  // class 2 MiB: from what was left
    const HostBlock d = P::allocate(2 * MiB);
    CHECK(c.data == base + 4 * MiB);
    CHECK(d.data == base + 6 * MiB);
    CHECK(d.kind == Upstream<9>::kind);
    CHECK(P::stats().cached_bytes == 0);
    const HostBlock e = P::allocate(2 * MiB);  // nothing left: a new segment
    CHECK(P::stats().system_allocations == 2);
    P::deallocate(c);
    P::deallocate(b);                          // merges with c's block after it
    P::deallocate(d);                          // merges with both before it: the segment is whole again
    const HostBlock f = P::allocate(7 * MiB);  // class 8 MiB: only a whole segment serves it
    CHECK(f.data == base);
    s = P::stats();
    CHECK(s.system_allocations == 2);
    CHECK(s.cache_hits == 4);
    CHECK(s.reserved_bytes == 10 * MiB);

    // Under 1 MiB the same, from segments of their own: a small request never splits a large segment.
    P::set_headroom(std::numeric_limits<double>::infinity());  // keep e's segment cached
    P::deallocate(e);                                          // a whole 2 MiB segment, cached
    const HostBlock g = P::allocate(1500);                     // class 1536: a new small segment
    P::deallocate(g);
    const HostBlock h = P::allocate(600);  // class 1024, carved from g's segment
    const HostBlock i = P::allocate(512);  // the rest of it
    CHECK(h.data == g.data);
    CHECK(i.data == static_cast<unsigned char*>(g.data) + 1024);
    CHECK(P::stats().system_allocations == 3);
    P::deallocate(i);
    P::deallocate(h);
    P::deallocate(f);
    CHECK(P::stats().in_use_bytes == 0);
    P::set_headroom(0.125);
    CHECK(P::empty_cache() == 10 * MiB + 1536);
    CHECK(Upstream<9>::frees == 3);  // every segment once, whole
    CHECK(P::foreign_deallocations() == 0);
}

TEST_CASE("PinnedPool merges a block given back on a stream only once its work is done", "[pinned_pool][segments]") {
    using P = Pool<10>;
    const SimulatedDevice::Scope scope{SimulatedDevice::Settings{}};
    const HostBlock whole = P::allocate(8 * MiB);
    auto* const base = static_cast<unsigned char*>(whole.data);
    P::deallocate(whole);
    const HostBlock x = P::allocate(4 * MiB);
    const HostBlock y = P::allocate(4 * MiB);
    REQUIRE(y.data == base + 4 * MiB);
    std::memset(y.data, 5, 4 * MiB);
    const auto stream = SimulatedDevice::create_stream();
    void* device = SimulatedDevice::allocate(4 * MiB);
    SimulatedDevice::copy_async(device, y.data, 4 * MiB, CopyKind::host_to_device, stream);
    P::deallocate(y, stream);                  // the copy has not run: y stays pending
    P::deallocate(x);                          // ready, but its neighbour is not
    CHECK(P::empty_cache() == 0);              // the segment is not whole: nothing goes back
    const HostBlock z = P::allocate(8 * MiB);  // cannot be served by x and y merged: a new segment
    CHECK(z.data != whole.data);
    CHECK_FALSE(SimulatedDevice::queued_work_touches(z.data, 8 * MiB));
    const HostBlock w = P::allocate(4 * MiB);  // x's block is ready and serves
    CHECK(w.data == base);
    std::memset(w.data, 9, 4 * MiB);
    P::deallocate(w);
    SimulatedDevice::synchronize();
    CHECK(static_cast<unsigned char*>(device)[4 * MiB - 1] == 5);  // the copy read y as it was given back
    P::deallocate(z);
    // Now x and y have merged: two whole 8 MiB segments serve two 8 MiB requests from the cache.
    const auto before = P::stats();
    const HostBlock v = P::allocate(8 * MiB);
    const HostBlock u = P::allocate(8 * MiB);
    CHECK(P::stats().cache_hits == before.cache_hits + 2);
    CHECK(P::stats().system_allocations == before.system_allocations);
    CHECK(((v.data == whole.data && u.data == z.data) || (v.data == z.data && u.data == whole.data)));
    P::deallocate(v);
    P::deallocate(u);
    SimulatedDevice::deallocate(device, 4 * MiB);
    CHECK(P::empty_cache() == 16 * MiB);
    CHECK(SimulatedDevice::faults().empty());
}

TEST_CASE("PinnedPool keeps at most (1 + headroom) times the most ever requested; idle segments go back first",
          "[pinned_pool][segments]") {
    using P = Pool<11>;
    using Up = Upstream<11>;
    const SimulatedDevice::Scope scope{SimulatedDevice::Settings{}};
    CHECK(P::headroom() == 0.125);
    const HostBlock a = P::allocate(4 * MiB);
    const HostBlock b = P::allocate(6 * MiB);
    P::deallocate(a);  // used less recently than b
    P::deallocate(b);
    // 12 MiB fits no cached block; a new segment would make 22 MiB reserved against a bound of
    // 1.125 x 12 MiB: a (the least recently used) and then b go back.
    const HostBlock c = P::allocate(12 * MiB);
    auto s = P::stats();
    CHECK(s.reserved_bytes == 12 * MiB);
    CHECK(s.system_frees == 2);
    CHECK(Up::frees == 2);

    // Under the bound nothing goes back: 14 MiB requested at once now (12 + 2).
    const HostBlock d = P::allocate(2 * MiB);
    P::deallocate(d);
    P::deallocate(c);                          // 14 MiB cached in two segments
    const HostBlock e = P::allocate(MiB + 1);  // served by d's segment
    CHECK(e.data == d.data);
    P::deallocate(e);

    // A segment queued work still uses stays, whatever the bound.
    P::set_headroom(0.0);
    const auto stream = SimulatedDevice::create_stream();
    const HostBlock f = P::allocate(12 * MiB);
    CHECK(f.data == c.data);
    void* device = SimulatedDevice::allocate(MiB);
    SimulatedDevice::copy_async(device, f.data, MiB, CopyKind::host_to_device, stream);
    P::deallocate(f, stream);
    const HostBlock g = P::allocate(14 * MiB);  // d's 2 MiB segment is idle and goes; f's is busy and stays
    s = P::stats();
    CHECK(s.system_frees == 3);
    CHECK(s.reserved_bytes == 12 * MiB + 14 * MiB);
    SimulatedDevice::synchronize();

    // Infinity: nothing is given back for the headroom.
    P::set_headroom(std::numeric_limits<double>::infinity());
    P::deallocate(g);
    const HostBlock h = P::allocate(16 * MiB);
    CHECK(P::stats().reserved_bytes == 42 * MiB);
    P::deallocate(h);

    CHECK_THROWS_AS(P::set_headroom(-0.5), syncblob::StateError);
    CHECK_THROWS_WITH(P::set_headroom(std::numeric_limits<double>::quiet_NaN()),
                      Catch::Matchers::Contains("set_headroom") && Catch::Matchers::Contains("expected a fraction"));
    CHECK(P::headroom() == std::numeric_limits<double>::infinity());
    P::set_headroom(0.125);
    SimulatedDevice::deallocate(device, MiB);
    CHECK(P::empty_cache() == 42 * MiB);
    CHECK(SimulatedDevice::faults().empty());
}

TEST_CASE("Blob<float, SimulatedPooled>: push asynchronously, destroy, reallocate from the cache",
          "[pinned_pool][blob]") {
    using Pool = syncblob::SimulatedPooled::host_allocator;
    const SimulatedDevice::Scope scope({});
    (void)Pool::empty_cache();
    const auto start = Pool::stats();
    const auto stream = SimulatedDevice::create_stream();
    const void* first_host = nullptr;
    {
        syncblob::Blob<float, syncblob::SimulatedPooled> blob({1000});
        auto host = blob.mutable_host_data();
        std::fill(host.begin(), host.end(), 2.5f);
        first_host = host.data();
        blob.data_buffer()->push_to_device_async(stream);
        CHECK(blob.data_buffer()->async_pending());
        const auto t = blob.data_stats();
        CHECK(t.host_allocations == 1);
        CHECK(t.device_allocations == 1);
        CHECK(t.host_to_device == 1);
        CHECK(t.host_to_device_bytes == 4000);
        CHECK(t.device_to_host == 0);
        CHECK(Pool::stats().in_use_bytes == start.in_use_bytes + 4096);
    }  // the buffer waits for its copy, then gives both blocks back
    auto s = Pool::stats();
    CHECK(s.in_use_bytes == start.in_use_bytes);
    CHECK(s.cached_bytes == start.cached_bytes + 4096);
    CHECK(SimulatedDevice::pending_copies() == 0);

    syncblob::Blob<float, syncblob::SimulatedPooled> again({1000});
    const auto host = again.host_data();  // zero-filled, though the block is the old one
    CHECK(host.data() == first_host);
    CHECK(std::all_of(host.begin(), host.end(), [](float v) { return v == 0.0f; }));
    const auto device = again.device_data();
    CHECK(device != nullptr);
    const auto t = again.data_stats();
    CHECK(t.host_allocations == 1);
    CHECK(t.device_allocations == 1);
    CHECK(t.host_to_device == 1);
    CHECK(t.host_to_device_bytes == 4000);
    s = Pool::stats();
    CHECK(s.cache_hits == start.cache_hits + 1);
    CHECK(s.system_allocations == start.system_allocations + 1);
    CHECK(SimulatedDevice::faults().empty());
}
