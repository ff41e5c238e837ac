// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// `SimulatedAsyncDevice`: `SimulatedDevice` with a stream-ordered caching allocator modelled on
/// CUDA's `cudaMemPool` (`cudaMallocAsync` / `cudaFreeAsync`), so a buffer's stream-ordered
/// lifetime is tested on machines without a GPU.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "../memory/allocator.hpp"
#include "../memory/device_backend.hpp"
#include "../memory/pool_stats.hpp"
#include "device.hpp"

SYNCBLOB_BEGIN_NAMESPACE

/// `SimulatedDevice` (the same streams, queues, faults and settings) whose device blocks come from
/// a caching pool that frees in stream order, as `cuda::AsyncPool` does on a GPU:
///
/// - `deallocate_async(p, bytes, stream)` queues the free on `stream` and returns at once; the
///   block is cached. Work on another stream that still uses the block and is not ordered before
///   the free is a fault, and so is work that touches the block after the free.
/// - A cached block is handed out again, to a request of the same rounded size on the same device,
///   only when that cannot overlap its old work: at once to an allocation on the stream that freed
///   it (stream order); to one on another stream once that stream is ordered after the free
///   (`stream_wait` on an event after it: cudaMemPool's `ReuseFollowEventDependencies`) or once
///   the free has run (`ReuseAllowOpportunistic`). CUDA may also make the allocating stream wait
///   for the free (`ReuseAllowInternalDependencies`); the simulator allocates a new block instead,
///   the conservative choice.
/// - `allocate` and `deallocate` are synchronous: `deallocate` frees at once (queued work that
///   still uses the block is a fault and is cancelled, as with `SimulatedDevice`), and `allocate`
///   takes only blocks whose free has run.
///
/// The pool is process-wide, like a device's memory: `stats()`, `empty_cache()` and `set_cap()`
/// act on it, and its blocks count in `SimulatedDevice::live_blocks()` until `empty_cache()`.
class SimulatedAsyncDevice : public SimulatedDevice {
public:
    static constexpr std::string_view name = "SimulatedAsyncDevice";
    /// Requests are rounded up to a multiple of this; a cached block serves a request of its size.
    static constexpr std::size_t granularity = 256;

    /// A block for work on `stream`: its allocation is an operation on `stream`, so work on another
    /// stream that uses the block before it is ordered after this call is a fault. \throws std::bad_alloc when the cap
    /// would be exceeded (nothing changes), when out of memory, or when the scope's fault injection fails the system
    /// allocation.
    [[nodiscard]] static void* allocate_async(std::size_t bytes, Stream stream) { return obtain(bytes, key(stream)); }

    /// Queues the free of `p` on `stream` and returns at once; the block is cached.
    static void deallocate_async(void* p, std::size_t bytes, Stream stream) noexcept {
        give_back(p, bytes, key(stream));
    }

    /// A block whose earlier work is finished, usable from any stream.
    [[nodiscard]] static void* allocate(std::size_t bytes) { return obtain(bytes, -1); }

    /// Frees at once: queued work that still uses the block is a fault (and is cancelled).
    static void deallocate(void* p, std::size_t bytes) noexcept { give_back(p, bytes, -1); }

    /// The pool's statistics (`PoolStats`); `cache_hits` counts requests served by a cached block.
    [[nodiscard]] static PoolStats stats() {
        auto& pool = pool_state();
        std::lock_guard lock(pool.mutex);
        return pool.stats;
    }

    /// Runs all queued work (`SimulatedDevice::synchronize`), then returns every cached block to
    /// the system. Blocks in use stay.
    static void empty_cache() {
        SimulatedDevice::synchronize();
        auto& pool = pool_state();
        std::lock_guard lock(pool.mutex);
        for (const auto& c : pool.cached) {
            SimulatedDevice::deallocate(c.block, c.bytes);
            ++pool.stats.system_frees;
            pool.stats.reserved_bytes -= c.bytes;
            pool.stats.cached_bytes -= c.bytes;
        }
        pool.cached.clear();
    }

    /// Starts the peaks (`peak_reserved_bytes`, `peak_requested_bytes`) afresh from the current values.
    static void reset_peaks() {
        auto& pool = pool_state();
        std::lock_guard lock(pool.mutex);
        pool.stats.peak_reserved_bytes = pool.stats.reserved_bytes;
        pool.stats.peak_requested_bytes = pool.stats.requested_bytes;
    }

    /// Caps the bytes callers may hold at once (`PoolStats::requested_bytes`); 0 lifts the cap. A
    /// request past it throws `std::bad_alloc` and changes nothing.
    static void set_cap(std::size_t bytes) {
        auto& pool = pool_state();
        std::lock_guard lock(pool.mutex);
        pool.cap = bytes;
    }

private:
    struct Cached {
        void* block = nullptr;
        std::size_t bytes = 0;  // rounded
        int device = 0;
        Event freed;  // where its stream-ordered free is reached; empty after a synchronous free
    };
    struct InUse {
        std::size_t bytes = 0;  // rounded
        int device = 0;
    };
    struct Pool {
        std::mutex mutex;  // taken before SimulatedDevice's own, never after
        detail::ForkLock fork_lock{mutex, detail::fork_rank::simulated_pool};
        std::vector<Cached> cached;
        std::map<void*, InUse> in_use;
        PoolStats stats;
        std::size_t cap = 0;

        // SimulatedDevice's state is made first, so it outlives the pool, which returns the cached
        // blocks to it at exit (blocks still in use stay allocated: a leak checker sees them).
        Pool() { (void)SimulatedDevice::state(); }
        ~Pool() {
            for (const auto& c : cached) {
                SimulatedDevice::deallocate(c.block, c.bytes);
            }
        }
        Pool(const Pool&) = delete;
        Pool& operator=(const Pool&) = delete;
    };

    static Pool& pool_state() {
        static Pool pool;
        return pool;
    }

    static std::size_t rounded(std::size_t bytes) {
        if (bytes > std::numeric_limits<std::size_t>::max() - granularity) {
            throw std::bad_alloc();
        }
        return bytes == 0 ? granularity : (bytes + granularity - 1) / granularity * granularity;
    }

    // A block for a request on stream key `stream` (-1: for any stream, synchronously).
    static void* obtain(std::size_t bytes, int stream) {
        const std::size_t size = rounded(bytes);
        auto& pool = pool_state();
        std::lock_guard lock(pool.mutex);
        if (pool.cap != 0 && bytes > pool.cap - std::min(pool.cap, pool.stats.requested_bytes)) {
            throw std::bad_alloc();
        }
        const int device = current_device();
        void* block = take_cached(pool, size, device, stream);
        const bool hit = block != nullptr;
        if (!hit) {
            block = SimulatedDevice::allocate(size);  // fault injection and live_blocks count here
        }
        if (stream != -1) {
            try {
                auto& s = SimulatedDevice::state();
                std::lock_guard engine_lock(s.mutex);
                s.engine.allocate_on(block, size, stream, device);
            } catch (...) {  // out of memory for the bookkeeping: the block goes back where it came from
                if (hit) {
                    pool.cached.push_back(Cached{block, size, device, Event{}});
                } else {
                    SimulatedDevice::deallocate(block, size);
                }
                throw;
            }
        }
        pool.in_use.emplace(block, InUse{size, device});
        auto& st = pool.stats;
        ++st.requests;
        if (hit) {
            ++st.cache_hits;
            st.cached_bytes -= size;
        } else {
            ++st.system_allocations;
            st.reserved_bytes += size;
            st.peak_reserved_bytes = std::max(st.peak_reserved_bytes, st.reserved_bytes);
        }
        st.in_use_bytes += size;
        st.requested_bytes += bytes;
        st.peak_requested_bytes = std::max(st.peak_requested_bytes, st.requested_bytes);
        return block;
    }

    // The first cached block of `size` on `device` that work on `stream` may use now, taken out of
    // the cache; null when there is none.
    static void* take_cached(Pool& pool, std::size_t size, int device, int stream) {
        auto& s = SimulatedDevice::state();
        std::lock_guard lock(s.mutex);
        for (auto it = pool.cached.begin(); it != pool.cached.end(); ++it) {
            if (it->bytes != size || it->device != device) {
                continue;
            }
            const bool usable = s.engine.reached(it->freed) || (stream != -1 && s.engine.follows(stream, it->freed));
            if (usable) {
                void* block = it->block;
                s.engine.revive_block(block);
                pool.cached.erase(it);
                return block;
            }
        }
        return nullptr;
    }

    // Caches `p`, freed on `stream` in stream order, or at once when `stream` is -1.
    static void give_back(void* p, std::size_t bytes, int stream) noexcept {
        if (p == nullptr) {
            return;
        }
        auto& pool = pool_state();
        std::lock_guard lock(pool.mutex);
        auto& s = SimulatedDevice::state();
        std::lock_guard engine_lock(s.mutex);
        try {
            const auto it = pool.in_use.find(p);
            if (it == pool.in_use.end()) {
                s.engine.fault("free of " + sim::detail::hex(p) + ", which SimulatedAsyncDevice did not hand out");
                return;
            }
            const InUse block = it->second;
            Cached cached{p, block.bytes, block.device, Event{}};
            if (stream != -1) {
                cached.freed = s.engine.retire_block(p, block.bytes, stream, current());
            } else {  // forget its queued users (a fault each), then keep it as a fresh block of its device
                s.engine.remove_block(p, block.bytes);
                s.engine.add_block(p, block.bytes, block.device);
            }
            pool.cached.push_back(std::move(cached));
            pool.in_use.erase(it);
            auto& st = pool.stats;
            st.in_use_bytes -= block.bytes;
            st.requested_bytes -= std::min(st.requested_bytes, bytes);
            st.cached_bytes += block.bytes;
        } catch (...) {  // out of memory for the bookkeeping: the block stays in use, leaked to the pool
        }
    }
};

static_assert(StreamOrderedBackend<SimulatedAsyncDevice>);

/// Aligned host memory and a `SimulatedAsyncDevice`: the test vehicle for stream-ordered device memory.
struct SimulatedAsync {
    using host_allocator = AlignedAllocator;
    using device_backend = SimulatedAsyncDevice;
};

static_assert(SyncedAllocator<SimulatedAsync>);

SYNCBLOB_END_NAMESPACE
