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
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <set>
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
/// - **Segments and blocks.** What the pool gets from `Upstream` is a segment; it hands out blocks
///   carved from segments. A request is rounded to its size class (`pinned_pool_size_class`) and
///   served by the smallest cached block that is large enough and whose work is done; the rest of
///   that block stays cached as a block of its own. A block given back merges with the cached
///   blocks beside it in its segment, so one segment serves requests of every size up to its own
///   (a batch smaller than the last one reuses the last one's memory, and one large block serves a
///   mix of sizes asked for one after another). Requests under 1 MiB and from 1 MiB on are carved
///   from separate segments, so small blocks never split a large segment.
/// - **Headroom.** A request no cached block serves gets a new segment of its size class. If that
///   would take `reserved_bytes` past (1 + `headroom()`) times the most ever requested at once
///   (default headroom 1/8), whole cached segments whose work is done go back to `Upstream` first,
///   least recently used first: when the sizes a program asks for change (batch sizes, sequence
///   lengths) the pool holds about what the program needs at its peak, not every size it asked for.
/// - **Reuse is gated on device work**: `deallocate(block, stream)` records an event on `stream`,
///   and `record_use(p, stream)` one on every other stream that uses the block; a block given back
///   is cached as pending and joins the blocks that can be handed out (and merged) only once
///   `Device::query` says every one of them is reached. So a block an asynchronous copy still reads
///   is never given to a new owner who would overwrite it.
/// - `set_cap(bytes)` bounds the bytes held from `Upstream`: an allocation that would exceed it first
///   returns cached segments whose work is done to `Upstream` (least recently used first); if that
///   cannot make room it throws `std::bad_alloc` and changes nothing. `empty_cache()` returns every
///   cached segment whose work is done.
/// - A segment keeps the `HostBlock` `Upstream` gave (its `kind`, which every block carved from it
///   carries) and goes back to `Upstream` as it is, whole.
/// - Deallocating memory the pool did not hand out (or a block twice) is ignored and counted in
///   `foreign_deallocations()`: `deallocate` is noexcept, and handing such memory to `Upstream`
///   could corrupt it. Tests and debug builds check that count. `deallocate` never allocates.
/// - The pool's state lives as long as the process and is never destroyed, so a block freed by a
///   static object during exit still finds it; what it caches then goes back to the system with the process.
template <HostAllocator Upstream, DeviceBackend Device>
class PinnedPool {
public:
    using stream_type = typename Device::stream_type;
    using event_type = typename Device::event_type;

    static constexpr std::string_view name = "PinnedPool";
    /// The smallest class of the large segments (requests of 1 MiB and more); smaller requests are
    /// carved from segments of their own.
    static constexpr std::size_t large_classes = std::size_t{2} << 20;

    /// The size class of a request (see `pinned_pool_size_class`).
    [[nodiscard]] static constexpr std::size_t size_class(std::size_t bytes) { return pinned_pool_size_class(bytes); }

    /// A block of at least `bytes` bytes (`HostBlock::bytes` is `bytes`; `kind` is Upstream's):
    /// carved from the smallest cached block that fits and whose work is done, else from a new
    /// segment. A zero-byte request returns an empty block and counts nothing.
    /// \throws std::bad_alloc when the cap or `Upstream` refuses (the pool is then as it was,
    /// except that cached segments may have been returned to `Upstream`: for the headroom and, when
    /// `Upstream` fails, all those whose work is done, before the one retry).
    [[nodiscard]] static HostBlock allocate(std::size_t bytes) {
        if (bytes == 0) {
            return {};
        }
        const std::size_t size = size_class(bytes);
        auto& s = state();
        std::lock_guard lock(s.mutex);
        settle_pending(s);
        s.pending.reserve(s.index.size() + 2);  // room for every block, so give_back never allocates
        FreeSet& free = free_set(s, size);
        if (const auto fit = free.lower_bound(FreeKey{size, nullptr}); fit != free.end()) {
            Block& b = *fit->block;
            carve(s, free, fit, size);
            b.requested = bytes;
            s.stats.cached_bytes -= size;
            s.stats.in_use_bytes += size;
            ++s.stats.cache_hits;
            return hand_out(s, b, bytes);
        }
        make_room(s, size);  // throws before anything changes
        keep_headroom(s, size, bytes);
        auto block = std::make_unique<Block>();
        block->node = make_node();
        block->uses.reserve(1);  // deallocate(block, stream) records into it without allocating
        const HostBlock fresh = allocate_upstream(s, size);
        Block& b = *block;
        b.upstream = fresh;
        b.kind = fresh.kind;
        b.data = static_cast<std::byte*>(fresh.data);
        b.size = size;
        b.requested = bytes;
        b.where = Where::in_use;
        try {
            s.index.emplace(b.data, std::move(block));
        } catch (...) {
            Upstream::deallocate(fresh);
            throw;
        }
        ++s.stats.system_allocations;
        s.stats.in_use_bytes += size;
        s.stats.reserved_bytes += size;
        s.stats.peak_reserved_bytes = std::max(s.stats.peak_reserved_bytes, s.stats.reserved_bytes);
        return hand_out(s, b, bytes);
    }

    /// Takes a block back for reuse; work recorded with `record_use` still gates it. Memory the
    /// pool did not hand out is ignored (see `foreign_deallocations`).
    static void deallocate(HostBlock block) noexcept { give_back(block.data, nullptr); }

    /// Takes a block back after the work issued on `stream` so far (an asynchronous copy from or
    /// into it, say): it is handed out again only once that work is done; the caller does not wait.
    /// When the device cannot record an event (no driver, a failed context, no memory for the
    /// event), the block cannot be proven free: it is abandoned, never reused nor freed (nor is
    /// its segment), and no longer counted in the statistics (see `abandoned_blocks`).
    static void deallocate(HostBlock block, stream_type stream) noexcept { give_back(block.data, &stream); }

    /// The block holding `p` is also used by work issued on `stream` so far (besides the stream it
    /// is given back with): it is not handed out again before that work is done. A later use on the
    /// same stream replaces the earlier one. PyTorch names this `record_stream`.
    /// \throws StateError when `p` is not in a block the pool handed out and has not taken back.
    static void record_use(const void* p, stream_type stream) {
        auto& s = state();
        std::lock_guard lock(s.mutex);
        auto it = s.index.upper_bound(p);
        Block* found = nullptr;
        if (it != s.index.begin()) {
            found = std::prev(it)->second.get();
        }
        if (found == nullptr || found->where != Where::in_use || !contains(*found, p)) {
            throw StateError("PinnedPool::record_use: " + describe(p) + " is not in a block the pool has handed out");
        }
        add_use(*found, stream);
        found->uses.reserve(found->uses.size() + 1);  // room for the event deallocate(block, stream) records
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

    /// Returns every cached segment whose work is done to `Upstream` (a segment with a block in use
    /// or still used by queued work stays). Returns the bytes released.
    static std::size_t empty_cache() {
        auto& s = state();
        std::lock_guard lock(s.mutex);
        settle_pending(s);
        return release_ready(s, std::numeric_limits<std::size_t>::max());
    }

    /// Bounds the bytes the pool holds from `Upstream` (`reserved_bytes`); the default is no bound.
    /// Takes effect at the next allocation that needs a new segment; what the pool holds now stays.
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

    /// How much the pool may hold beyond the most its callers have asked for at once, as a fraction
    /// of that (default 1/8): a request that needs a new segment, which would take `reserved_bytes`
    /// past (1 + headroom) times the most bytes ever requested at once (this request included),
    /// first returns cached segments whose work is done, least recently used first. Segments in use
    /// or used by queued work stay, and so the bound can be passed. Infinity turns the rule off: the
    /// pool then keeps what it caches until `empty_cache()` or the cap.
    /// \throws StateError for a negative or NaN fraction.
    static void set_headroom(double fraction) {
        if (!(fraction >= 0.0)) {
            throw StateError("PinnedPool::set_headroom: " + std::to_string(fraction) +
                             ", expected a fraction of 0 or more (infinity: no bound)");
        }
        auto& s = state();
        std::lock_guard lock(s.mutex);
        s.headroom = fraction;
    }
    [[nodiscard]] static double headroom() {
        auto& s = state();
        std::lock_guard lock(s.mutex);
        return s.headroom;
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
        return s.abandoned;
    }

private:
    enum class Where : unsigned char { in_use, pending, free, abandoned };
    struct Block;
    struct FreeKey {  // cached blocks whose work is done, by size then address: the first that fits is the best
        std::size_t size;
        Block* block;
        bool operator<(const FreeKey& o) const noexcept {
            return size != o.size ? size < o.size : std::less<Block*>{}(block, o.block);
        }
    };
    using FreeSet = std::set<FreeKey>;

    struct Block {
        std::byte* data = nullptr;
        std::size_t size = 0;       // a multiple of the size classes' step
        std::size_t requested = 0;  // what the present owner asked for
        Where where = Where::in_use;
        HostBlock upstream{};    // the segment's, in its first block (prev == nullptr)
        std::uint32_t kind = 0;  // the segment's kind
        Block* prev = nullptr;   // the blocks beside it in its segment, by address
        Block* next = nullptr;
        std::uint64_t last_used = 0;       // when it was last given back (State::clock), for eviction order
        typename FreeSet::node_type node;  // its node of the free set while it is not in it
        std::vector<std::pair<stream_type, event_type>> uses;  // one event per stream, the latest
    };

    struct State {
        std::mutex mutex;
        std::map<const void*, std::unique_ptr<Block>> index;  // every block, by address
        FreeSet small_free;                                   // blocks of segments under large_classes
        FreeSet large_free;
        std::vector<Block*> pending;  // given back, waiting for their work (capacity: every block)
        PoolStats stats{};
        std::size_t cap = std::numeric_limits<std::size_t>::max();
        std::size_t most_requested = 0;  // the most requested_bytes has been (reset_peaks leaves it)
        double headroom = 0.125;
        std::uint64_t clock = 0;  // deallocations so far
        std::uint64_t foreign_deallocations = 0;
        std::uint64_t abandoned = 0;  // blocks kept (and reachable) but never reused nor freed
    };

    static State& state() {
        static State* s = new State;  // never destroyed: blocks may come back during static destruction
        return *s;
    }

    static FreeSet& free_set(State& s, std::size_t size) noexcept {
        return size < large_classes ? s.small_free : s.large_free;
    }

    // A node for a free set, made now so that giving the block back later allocates nothing.
    static typename FreeSet::node_type make_node() {
        FreeSet scratch;
        scratch.insert(FreeKey{0, nullptr});
        return scratch.extract(scratch.begin());
    }

    static bool contains(const Block& b, const void* p) noexcept {
        const auto* q = static_cast<const std::byte*>(p);
        return std::less_equal<>{}(b.data, q) && std::less<>{}(q, b.data + b.size);
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
        s.most_requested = std::max(s.most_requested, s.stats.requested_bytes);
        return {b.data, bytes, b.kind};
    }

    // Takes the free block at `fit` for a request of class `size`; what is left of it beyond `size`
    // stays free as a block of its own. Allocates (the remainder's entries) before it changes anything.
    static void carve(State& s, FreeSet& free, typename FreeSet::iterator fit, std::size_t size) {
        Block& b = *fit->block;
        if (b.size > size) {
            auto rest = std::make_unique<Block>();
            rest->node = make_node();
            rest->uses.reserve(1);
            Block& r = *rest;
            r.data = b.data + size;
            s.index.emplace(r.data, std::move(rest));  // the last step that can throw
            r.size = b.size - size;
            r.where = Where::free;
            r.last_used = b.last_used;
            r.kind = b.kind;
            r.prev = &b;
            r.next = b.next;
            if (b.next != nullptr) {
                b.next->prev = &r;
            }
            b.next = &r;
            r.node.value() = FreeKey{r.size, &r};
            free.insert(std::move(r.node));
        }
        b.node = free.extract(fit);
        b.size = size;
        b.where = Where::in_use;
        b.uses.clear();
    }

    static void give_back(void* p, const stream_type* stream) noexcept {
        if (p == nullptr) {
            return;
        }
        auto& s = state();
        std::lock_guard lock(s.mutex);
        const auto found = s.index.find(p);
        if (found == s.index.end() || found->second->where != Where::in_use) {
            ++s.foreign_deallocations;
            return;
        }
        Block& b = *found->second;
        s.stats.in_use_bytes -= b.size;
        s.stats.requested_bytes -= b.requested;
        b.requested = 0;
        if (stream != nullptr) {
            try {
                add_use(b, *stream);
            } catch (...) {  // no event, so no way to know when the work is done: never reuse it
                s.stats.reserved_bytes -= b.size;
                b.where = Where::abandoned;
                ++s.abandoned;
                return;
            }
        }
        b.last_used = ++s.clock;
        s.stats.cached_bytes += b.size;
        if (b.uses.empty()) {
            make_free(s, b);
        } else {
            b.where = Where::pending;
            s.pending.push_back(&b);  // within the capacity allocate reserved
        }
    }

    // Block `b` (given back, its work done) joins the free set, merged with free blocks beside it.
    static void make_free(State& s, Block& given) noexcept {
        FreeSet& free = free_set(s, given.size);
        Block* b = &given;
        b->uses.clear();
        b->where = Where::free;
        if (Block* next = b->next; next != nullptr && next->where == Where::free) {
            (void)free.extract(FreeKey{next->size, next});
            absorb(s, *b, *next);
        }
        if (Block* prev = b->prev; prev != nullptr && prev->where == Where::free) {
            prev->node = free.extract(FreeKey{prev->size, prev});
            absorb(s, *prev, *b);
            b = prev;
        }
        b->node.value() = FreeKey{b->size, b};
        free.insert(std::move(b->node));
    }

    // `into` takes over `next`, the block after it (out of the free set by now), which is destroyed.
    static void absorb(State& s, Block& into, Block& next) noexcept {
        into.size += next.size;
        into.last_used = std::max(into.last_used, next.last_used);
        into.next = next.next;
        if (next.next != nullptr) {
            next.next->prev = &into;
        }
        s.index.erase(next.data);
    }

    // Pending blocks whose work is done become free.
    static void settle_pending(State& s) {
        for (std::size_t i = 0; i < s.pending.size();) {
            Block& b = *s.pending[i];
            if (work_done(b)) {
                s.pending[i] = s.pending.back();
                s.pending.pop_back();
                make_free(s, b);
            } else {
                ++i;
            }
        }
    }

    // Returns whole free segments to Upstream, least recently used first, until at least `wanted`
    // bytes are released (fewer when there are not as many). Returns the bytes released.
    static std::size_t release_ready(State& s, std::size_t wanted) {
        std::vector<Block*> whole;
        for (FreeSet* free : {&s.small_free, &s.large_free}) {
            for (const FreeKey& k : *free) {
                if (k.block->prev == nullptr && k.block->next == nullptr) {
                    whole.push_back(k.block);
                }
            }
        }
        std::sort(whole.begin(), whole.end(),
                  [](const Block* a, const Block* b) { return a->last_used < b->last_used; });
        std::size_t released = 0;
        for (Block* b : whole) {
            if (released >= wanted) {
                break;
            }
            const std::size_t size = b->size;
            (void)free_set(s, size).extract(FreeKey{size, b});
            Upstream::deallocate(b->upstream);
            s.index.erase(b->data);
            s.stats.cached_bytes -= size;
            s.stats.reserved_bytes -= size;
            ++s.stats.system_frees;
            released += size;
        }
        return released;
    }

    // Bytes of whole free segments.
    static std::size_t ready_bytes(const State& s) {
        std::size_t bytes = 0;
        for (const FreeSet* free : {&s.small_free, &s.large_free}) {
            for (const FreeKey& k : *free) {
                bytes += k.block->prev == nullptr && k.block->next == nullptr ? k.size : 0;
            }
        }
        return bytes;
    }

    // Before a new segment of `size` bytes for a request of `bytes`: returns whole free segments
    // while the reserved bytes would pass (1 + headroom) times the most ever requested at once,
    // this request included (see set_headroom).
    static void keep_headroom(State& s, std::size_t size, std::size_t bytes) {
        const auto peak = static_cast<double>(std::max(s.most_requested, s.stats.requested_bytes + bytes));
        const double excess =
            static_cast<double>(s.stats.reserved_bytes) + static_cast<double>(size) - peak * (1.0 + s.headroom);
        if (excess > 0.0 && s.stats.cached_bytes != 0) {
            (void)release_ready(s,
                                static_cast<std::size_t>(std::min(excess, static_cast<double>(s.stats.cached_bytes))));
        }
    }

    // Under the cap, a new segment of `size` bytes must fit once whole free segments are returned
    // (least recently used first); else this throws before anything changes.
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

    // A new segment from Upstream; when it fails, once more after returning the whole free segments.
    static HostBlock allocate_upstream(State& s, std::size_t size) {
        try {
            return Upstream::allocate(size);
        } catch (const std::bad_alloc&) {
            if (release_ready(s, std::numeric_limits<std::size_t>::max()) == 0) {
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
