// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// `PinnedPool`: a caching host allocator over another (page-locked memory, typically), with size
/// classes that waste little, reuse gated on the device work that used a block, statistics, a cap
/// and `empty_cache()`. Its segments and blocks are kept in detail/pool_segments.hpp; the bundle
/// that tests it on the simulated device, `SimulatedPooled`, is in simulated_device.hpp.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../core/error.hpp"
#include "../core/fork_lock.hpp"
#include "allocator.hpp"
#include "detail/pool_segments.hpp"
#include "device_backend.hpp"
#include "host_allocator.hpp"
#include "pool_stats.hpp"

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
        s.pending.reserve(s.segments.blocks() + 2);  // room for every block, so give_back never allocates
        if (Block* fit = s.segments.best_fit(size)) {
            s.segments.take(*fit, size);
            fit->requested = bytes;
            s.stats.cached_bytes -= size;
            s.stats.in_use_bytes += size;
            ++s.stats.cache_hits;
            return hand_out(s, *fit, bytes);
        }
        make_room(s, size);  // throws before anything changes
        keep_headroom(s, size, bytes);
        const HostBlock fresh = allocate_upstream(s, size);
        Block* b = nullptr;
        try {
            b = &s.segments.add_segment(fresh, size);
        } catch (...) {
            Upstream::deallocate(fresh);
            throw;
        }
        b->requested = bytes;
        ++s.stats.system_allocations;
        s.stats.in_use_bytes += size;
        s.stats.reserved_bytes += size;
        s.stats.peak_reserved_bytes = std::max(s.stats.peak_reserved_bytes, s.stats.reserved_bytes);
        return hand_out(s, *b, bytes);
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
        Block* found = s.segments.containing(p);
        if (found == nullptr || found->state != BlockState::in_use) {
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
    using Uses = std::vector<std::pair<stream_type, event_type>>;  // one event per stream, the latest
    using Segments = detail::PoolSegments<Uses, large_classes>;
    using Block = typename Segments::Block;
    using BlockState = detail::BlockState;

    struct State {
        std::mutex mutex;
        detail::ForkLock fork_lock{mutex, detail::fork_rank::host_pool};  // a fork never copies it locked
        Segments segments;
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

    static void give_back(void* p, const stream_type* stream) noexcept {
        if (p == nullptr) {
            return;
        }
        auto& s = state();
        std::lock_guard lock(s.mutex);
        Block* const found = s.segments.find(p);
        if (found == nullptr || found->state != BlockState::in_use) {
            ++s.foreign_deallocations;
            return;
        }
        Block& b = *found;
        s.stats.in_use_bytes -= b.size;
        s.stats.requested_bytes -= b.requested;
        b.requested = 0;
        if (stream != nullptr) {
            try {
                add_use(b, *stream);
            } catch (...) {  // no event, so no way to know when the work is done: never reuse it
                s.stats.reserved_bytes -= b.size;
                b.state = BlockState::abandoned;
                ++s.abandoned;
                return;
            }
        }
        b.last_used = ++s.clock;
        s.stats.cached_bytes += b.size;
        if (b.uses.empty()) {
            s.segments.make_free(b);
        } else {
            b.state = BlockState::pending;
            s.pending.push_back(&b);  // within the capacity allocate reserved
        }
    }

    // Pending blocks whose work is done become free.
    static void settle_pending(State& s) {
        for (std::size_t i = 0; i < s.pending.size();) {
            Block& b = *s.pending[i];
            if (work_done(b)) {
                s.pending[i] = s.pending.back();
                s.pending.pop_back();
                s.segments.make_free(b);
            } else {
                ++i;
            }
        }
    }

    // Returns whole free segments to Upstream, least recently used first, until at least `wanted`
    // bytes are released (fewer when there are not as many). Returns the bytes released.
    static std::size_t release_ready(State& s, std::size_t wanted) {
        return s.segments.release_whole(wanted, [&s](HostBlock upstream, std::size_t size) {
            Upstream::deallocate(upstream);
            s.stats.cached_bytes -= size;
            s.stats.reserved_bytes -= size;
            ++s.stats.system_frees;
        });
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
        if (size > s.cap || s.segments.whole_free_bytes() < excess) {
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

SYNCBLOB_END_NAMESPACE
