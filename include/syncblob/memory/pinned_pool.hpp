// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// `PinnedPool`: a caching host allocator over another (page-locked memory, typically), with size
/// classes that waste little, reuse gated on the device work that used a block, statistics, a cap
/// and `empty_cache()`. `StreamAwareHostAllocator`: a host allocator that can take a block back
/// while device work issued on a stream may still use it.

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <limits>
#include <list>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../core/error.hpp"
#include "allocator.hpp"
#include "device_backend.hpp"
#include "host_allocator.hpp"
#include "pool_stats.hpp"
#include "simulated_device.hpp"

SYNCBLOB_BEGIN_NAMESPACE

/// A host allocator that also takes a block back "after the work issued so far on `stream`"
/// (`deallocate(block, stream)`) and learns of other streams that use a block (`record_use`), so
/// it hands the block out again only when that work is done instead of making the caller wait.
template <class A, class Device>
concept StreamAwareHostAllocator = HostAllocator<A> && DeviceBackend<Device> &&
    requires(HostBlock block, const void* p, typename Device::stream_type stream) {
    { A::deallocate(block, stream) }
    noexcept;
    A::record_use(p, stream);
};

/// Size classes of `PinnedPool`: a request under 1 MiB rounds up to a multiple of 512 bytes, a
/// larger one to a multiple of 2 MiB (a power-of-two pool would round 1.1 MiB to 2 MiB and 33 MiB to
/// 64 MiB). Zero stays zero. \throws std::bad_alloc for a size no block can have.
[[nodiscard]] constexpr std::size_t pinned_pool_size_class(std::size_t bytes) {
    constexpr std::size_t small_step = 512;
    constexpr std::size_t large_step = std::size_t{2} << 20;
    constexpr std::size_t small_limit = std::size_t{1} << 20;
    if (bytes > static_cast<std::size_t>(PTRDIFF_MAX) - large_step) {
        throw std::bad_alloc();
    }
    const std::size_t step = bytes < small_limit ? small_step : large_step;
    return (bytes + step - 1) / step * step;
}

/// A caching pool of host blocks from `Upstream`, shared by the whole process (one pool per
/// instantiation), usable wherever a `HostAllocator` is: `Blob<float, B>` with
/// `B::host_allocator = PinnedPool<...>` allocates and frees through it. All members are static
/// and thread-safe.
///
/// - A request is rounded to its size class (`pinned_pool_size_class`); a freed block is cached and
///   handed out again for a request of the same class or, for classes of 2 MiB and more, of a class
///   at least half as large (the smallest such block is taken): a batch smaller than the last one
///   reuses its blocks instead of adding blocks of its own. A request of 2 MiB or more that finds
///   nothing to reuse first returns one ready cached block it outgrew (a class from half its own up
///   to below it), so a larger batch replaces the last one's blocks instead of piling up beside them.
/// - Reuse is gated on device work: `deallocate(block, stream)` records an event on `stream`, and
///   `record_use(p, stream)` one on every other stream that uses the block; a cached block is
///   handed out again only once `Device::query` says every one of them is reached. So a block an
///   asynchronous copy still reads is never given to a new owner who would overwrite it.
/// - `set_cap(bytes)` bounds the bytes held from `Upstream`: an allocation that would exceed it first
///   returns cached blocks whose work is done to `Upstream` (least recently given back first); if
///   that cannot make room it throws `std::bad_alloc` and changes nothing. Otherwise, apart from
///   outgrown blocks, the pool keeps what it caches until `empty_cache()`, which returns every cached block whose work
///   is done.
/// - A block keeps the `HostBlock` `Upstream` gave (its `kind`) and goes back to `Upstream` as it is.
/// - Deallocating memory the pool did not hand out (or a block twice) is ignored and counted in
///   `foreign_deallocations()`: `deallocate` is noexcept, and handing such memory to `Upstream`
///   could corrupt it. Tests and debug builds check that count.
/// - The pool's state lives as long as the process and is never destroyed, so a block freed by a
///   static object during exit still finds it; what it caches then goes back to the system with the process.
template <HostAllocator Upstream, DeviceBackend Device>
class PinnedPool {
public:
    using stream_type = typename Device::stream_type;
    using event_type = typename Device::event_type;

    static constexpr std::string_view name = "PinnedPool";
    /// From this size class on, a request may reuse a cached block of up to twice its class.
    static constexpr std::size_t large_classes = std::size_t{2} << 20;

    /// The size class of a request (see `pinned_pool_size_class`).
    [[nodiscard]] static constexpr std::size_t size_class(std::size_t bytes) { return pinned_pool_size_class(bytes); }

    /// A block of at least `bytes` bytes (`HostBlock::bytes` is `bytes`; `kind` is Upstream's):
    /// a cached block of the same class whose work is done, else a new one from `Upstream`. A
    /// zero-byte request returns an empty block and counts nothing.
    /// \throws std::bad_alloc when the cap or `Upstream` refuses (the pool is then as it was,
    /// except that when `Upstream` fails, an outgrown block and the cached blocks whose work is done
    /// were returned to it before the one retry).
    [[nodiscard]] static HostBlock allocate(std::size_t bytes) {
        if (bytes == 0) {
            return {};
        }
        const std::size_t size = size_class(bytes);
        auto& s = state();
        std::lock_guard lock(s.mutex);
        (void)s.cached[size];  // the class's list, created once: a deallocation never has to allocate it
        // The smallest ready block of the class or, from 2 MiB on, of a class up to twice as large.
        if (take_cached(s, size, size < large_classes ? size : 2 * size, bytes)) {
            return hand_out(s, s.in_use.back(), bytes);
        }
        make_room(s, size);  // throws before anything changes
        if (size >= large_classes) {
            release_outgrown(s, size);
        }
        HostBlock fresh = allocate_upstream(s, size);
        try {
            s.in_use.emplace_back();
            auto block = std::prev(s.in_use.end());
            block->upstream = fresh;
            block->size = size;
            block->requested = bytes;
            block->uses.reserve(1);  // deallocate(block, stream) records into it without allocating
            try {
                s.index.emplace(fresh.data, block);
            } catch (...) {
                s.in_use.pop_back();
                throw;
            }
        } catch (...) {
            Upstream::deallocate(fresh);
            throw;
        }
        ++s.stats.system_allocations;
        s.stats.in_use_bytes += size;
        s.stats.reserved_bytes += size;
        s.stats.peak_reserved_bytes = std::max(s.stats.peak_reserved_bytes, s.stats.reserved_bytes);
        return hand_out(s, s.in_use.back(), bytes);
    }

    /// Takes a block back for reuse; work recorded with `record_use` still gates it. Memory the
    /// pool did not hand out is ignored (see `foreign_deallocations`).
    static void deallocate(HostBlock block) noexcept { give_back(block.data, nullptr); }

    /// Takes a block back after the work issued on `stream` so far (an asynchronous copy from or
    /// into it, say): it is handed out again only once that work is done; the caller does not wait.
    /// When the device cannot record an event (no driver, a failed context, no memory for the
    /// event), the block cannot be proven free: it is abandoned, never reused nor freed, and no
    /// longer counted in the statistics (see `abandoned_blocks`).
    static void deallocate(HostBlock block, stream_type stream) noexcept { give_back(block.data, &stream); }

    /// The block holding `p` is also used by work issued on `stream` so far (besides the stream it
    /// is given back with): it is not handed out again before that work is done. A later use on the
    /// same stream replaces the earlier one. PyTorch names this `record_stream`.
    /// \throws StateError when `p` is not in a block the pool handed out and has not taken back.
    static void record_use(const void* p, stream_type stream) {
        auto& s = state();
        std::lock_guard lock(s.mutex);
        auto it = s.index.upper_bound(p);
        if (it != s.index.begin()) {
            --it;
        }
        const Block* found = it == s.index.end() ? nullptr : &*it->second;
        if (found == nullptr || found->cached || !contains(*found, p)) {
            throw StateError("PinnedPool::record_use: " + describe(p) + " is not in a block the pool has handed out");
        }
        Block& block = *it->second;
        add_use(block, stream);
        block.uses.reserve(block.uses.size() + 1);  // room for the event deallocate(block, stream) records
    }

    /// A snapshot of the statistics (see `PoolStats`).
    [[nodiscard]] static PoolStats stats() {
        auto& s = state();
        std::lock_guard lock(s.mutex);
        return s.stats;
    }

    /// Sets the peaks to the present values (to measure the peak of one phase).
    static void reset_peaks() {
        auto& s = state();
        std::lock_guard lock(s.mutex);
        s.stats.peak_reserved_bytes = s.stats.reserved_bytes;
        s.stats.peak_requested_bytes = s.stats.requested_bytes;
    }

    /// Returns every cached block whose work is done to `Upstream`; blocks still used by queued
    /// work stay cached. Returns the bytes released.
    static std::size_t empty_cache() {
        auto& s = state();
        std::lock_guard lock(s.mutex);
        return release_all_ready(s);
    }

    /// Bounds the bytes the pool holds from `Upstream` (`reserved_bytes`); the default is no bound.
    /// Takes effect at the next allocation that needs a new block; what the pool holds now stays.
    static void set_cap(std::size_t bytes) {
        auto& s = state();
        std::lock_guard lock(s.mutex);
        s.cap = bytes;
    }
    [[nodiscard]] static std::size_t cap() {
        auto& s = state();
        std::lock_guard lock(s.mutex);
        return s.cap;
    }

    /// Deallocations of memory the pool did not hand out, or had already taken back; they were ignored.
    [[nodiscard]] static std::uint64_t foreign_deallocations() {
        auto& s = state();
        std::lock_guard lock(s.mutex);
        return s.foreign_deallocations;
    }

    /// Blocks given back on a stream on which no event could be recorded; never reused nor freed.
    [[nodiscard]] static std::uint64_t abandoned_blocks() {
        auto& s = state();
        std::lock_guard lock(s.mutex);
        return s.abandoned.size();
    }

private:
    struct Block {
        HostBlock upstream{};
        std::size_t size = 0;       // the size class
        std::size_t requested = 0;  // what the present owner asked for
        bool cached = false;
        std::uint64_t given_back = 0;  // when it was last given back (State::given_back), for eviction order
        std::vector<std::pair<stream_type, event_type>> uses;  // one event per stream, the latest
    };
    using List = std::list<Block>;

    struct State {
        std::mutex mutex;
        List in_use;
        std::map<std::size_t, List> cached;                    // per size class, oldest first
        std::map<const void*, typename List::iterator> index;  // every block, by address
        PoolStats stats{};
        std::size_t cap = std::numeric_limits<std::size_t>::max();
        std::uint64_t given_back = 0;  // deallocations so far
        std::uint64_t foreign_deallocations = 0;
        List abandoned;  // kept (and reachable) but never reused nor freed
    };

    static State& state() {
        static State* s = new State;  // never destroyed: blocks may come back during static destruction
        return *s;
    }

    static bool contains(const Block& b, const void* p) noexcept {
        const auto* begin = static_cast<const std::byte*>(b.upstream.data);
        const auto* q = static_cast<const std::byte*>(p);
        return std::less_equal<>{}(begin, q) && std::less<>{}(q, begin + b.size);
    }

    static std::string describe(const void* p) {
        char text[2 * sizeof(void*) + 3];
        std::snprintf(text, sizeof text, "%p", p);
        return text;
    }

    static bool work_done(const Block& b) {
        for (const auto& [stream, event] : b.uses) {
            if (!Device::query(event)) {
                return false;
            }
        }
        return true;
    }

    static void add_use(Block& b, stream_type stream) {
        event_type event = Device::record(stream);
        for (auto& [used_on, last] : b.uses) {
            if (used_on == stream) {  // stream order: the new event comes after the old one
                last = std::move(event);
                return;
            }
        }
        b.uses.emplace_back(stream, std::move(event));
    }

    static HostBlock hand_out(State& s, Block& b, std::size_t bytes) noexcept {
        ++s.stats.requests;
        s.stats.requested_bytes += bytes;
        s.stats.peak_requested_bytes = std::max(s.stats.peak_requested_bytes, s.stats.requested_bytes);
        return {b.upstream.data, bytes, b.upstream.kind};
    }

    static void give_back(void* p, const stream_type* stream) noexcept {
        if (p == nullptr) {
            return;
        }
        auto& s = state();
        std::lock_guard lock(s.mutex);
        const auto found = s.index.find(p);
        if (found == s.index.end() || found->second->cached) {
            ++s.foreign_deallocations;
            return;
        }
        const auto it = found->second;
        s.stats.in_use_bytes -= it->size;
        s.stats.requested_bytes -= it->requested;
        it->requested = 0;
        if (stream != nullptr) {
            try {
                add_use(*it, *stream);
            } catch (...) {  // no event, so no way to know when the work is done: never reuse it
                s.stats.reserved_bytes -= it->size;
                s.index.erase(found);
                s.abandoned.splice(s.abandoned.end(), s.in_use, it);
                return;
            }
        }
        it->cached = true;
        it->given_back = ++s.given_back;
        s.stats.cached_bytes += it->size;
        auto& free_list = s.cached.find(it->size)->second;  // created by allocate
        free_list.splice(free_list.end(), s.in_use, it);
    }

    // Returns one cached block to Upstream.
    static void release(State& s, List& free_list, typename List::iterator block) noexcept {
        const std::size_t size = block->size;
        Upstream::deallocate(block->upstream);
        s.index.erase(block->upstream.data);
        free_list.erase(block);
        s.stats.cached_bytes -= size;
        s.stats.reserved_bytes -= size;
        ++s.stats.system_frees;
    }

    // Returns every cached block whose work is done to Upstream.
    static std::size_t release_all_ready(State& s) {
        std::size_t released = 0;
        for (auto& [size, free_list] : s.cached) {
            for (auto it = free_list.begin(); it != free_list.end();) {
                const auto next = std::next(it);
                if (work_done(*it)) {
                    release(s, free_list, it);
                    released += size;
                }
                it = next;
            }
        }
        return released;
    }

    // Returns cached blocks whose work is done to Upstream, the least recently given back first,
    // until at least `wanted` bytes are released (fewer when there are not as many).
    static std::size_t release_ready(State& s, std::size_t wanted) {
        struct Candidate {
            std::uint64_t given_back;
            List* list;
            typename List::iterator block;
        };
        std::vector<Candidate> ready;
        for (auto& [size, free_list] : s.cached) {
            for (auto it = free_list.begin(); it != free_list.end(); ++it) {
                if (work_done(*it)) {
                    ready.push_back({it->given_back, &free_list, it});
                }
            }
        }
        std::sort(ready.begin(), ready.end(),
                  [](const Candidate& a, const Candidate& b) { return a.given_back < b.given_back; });
        std::size_t released = 0;
        for (const auto& c : ready) {
            if (released >= wanted) {
                break;
            }
            released += c.block->size;
            release(s, *c.list, c.block);
        }
        return released;
    }

    // Bytes of cached blocks whose work is done.
    static std::size_t ready_bytes(const State& s) {
        std::size_t bytes = 0;
        for (const auto& [size, free_list] : s.cached) {
            for (const auto& b : free_list) {
                bytes += work_done(b) ? size : 0;
            }
        }
        return bytes;
    }

    // Hands out the smallest ready cached block of a class in [smallest, largest], if any.
    static bool take_cached(State& s, std::size_t smallest, std::size_t largest, std::size_t bytes) {
        for (auto cls = s.cached.lower_bound(smallest); cls != s.cached.end() && cls->first <= largest; ++cls) {
            auto& free_list = cls->second;
            for (auto it = free_list.begin(); it != free_list.end(); ++it) {
                if (work_done(*it)) {
                    it->uses.clear();
                    it->requested = bytes;
                    it->cached = false;
                    s.in_use.splice(s.in_use.end(), free_list, it);
                    s.stats.cached_bytes -= cls->first;
                    s.stats.in_use_bytes += cls->first;
                    ++s.stats.cache_hits;
                    return true;
                }
            }
        }
        return false;
    }

    // A request of a large class that missed the cache returns one ready cached block it outgrew
    // (of the largest class from half of `size` up to below it, the least recently given back): the
    // new block serves that class as well, so a batch larger than the last one replaces the last
    // one's blocks instead of piling up beside them.
    static void release_outgrown(State& s, std::size_t size) {
        auto cls = s.cached.lower_bound(size);
        while (cls != s.cached.begin()) {
            --cls;
            if (cls->first < size / 2) {
                return;
            }
            auto& free_list = cls->second;
            for (auto it = free_list.begin(); it != free_list.end(); ++it) {  // oldest first
                if (work_done(*it)) {
                    release(s, free_list, it);
                    return;
                }
            }
        }
    }

    // Under the cap, a new block of `size` bytes must fit once cached blocks whose work is done are
    // returned (least recently given back first); else this throws before anything changes.
    static void make_room(State& s, std::size_t size) {
        const std::size_t reserved = s.stats.reserved_bytes;
        if (size <= s.cap && reserved <= s.cap - size) {
            return;
        }
        const std::size_t excess = reserved + size - s.cap;
        if (size > s.cap || ready_bytes(s) < excess) {
            throw std::bad_alloc();
        }
        (void)release_ready(s, excess);
    }

    // A new block from Upstream; when it fails, once more after returning the ready cached blocks.
    static HostBlock allocate_upstream(State& s, std::size_t size) {
        try {
            return Upstream::allocate(size);
        } catch (const std::bad_alloc&) {
            if (release_all_ready(s) == 0) {
                throw;
            }
        }
        return Upstream::allocate(size);
    }
};

/// Pooled host memory and a `SimulatedDevice`: how the pool and its reuse gating are tested.
struct SimulatedPooled {
    using host_allocator = PinnedPool<AlignedAllocator, SimulatedDevice>;
    using device_backend = SimulatedDevice;
};

static_assert(SyncedAllocator<SimulatedPooled>);
static_assert(StreamAwareHostAllocator<SimulatedPooled::host_allocator, SimulatedDevice>);

SYNCBLOB_END_NAMESPACE
