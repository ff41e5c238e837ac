// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// `cuda::AsyncPool`: the CUDA device backend whose device memory comes from CUDA's stream-ordered
/// allocator (`cudaMallocFromPoolAsync` / `cudaFreeAsync` on a `cudaMemPool_t` per device, created
/// with a release threshold), so a freed block is reused without synchronising; and
/// `cuda::AsyncAllocator`, the bundle for `Blob<T, cuda::AsyncAllocator>`. Host code: compiles
/// with any C++ compiler.

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <mutex>
#include <string>
#include <string_view>

#include "../memory/allocator.hpp"
#include "../memory/device_backend.hpp"
#include "../memory/pool_stats.hpp"
#include "allocator.hpp"
#include "device.hpp"
#include "error.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace cuda {

/// Everything `cuda::Device` does, with device memory from a caching, stream-ordered pool: a
/// buffer allocates its device block on its stream and frees it there without the host waiting
/// (`StreamOrderedBackend`); CUDA hands the block out again to later work on that stream at once,
/// and to other streams once they are ordered after the free or the free has run (the pool's
/// default reuse policies). Freed memory stays reserved up to the release threshold (by default
/// all of it), so steady-state allocation costs no `cudaMalloc` and no synchronisation.
///
/// One pool per device, created on first use with `cudaMemPoolCreate` and kept for the life of the
/// process. Where the device has no memory pools (`cudaDevAttrMemoryPoolsSupported` is 0) the
/// first allocation throws `DeviceError`; without a usable driver, `NoDeviceError`.
struct AsyncPool : Device {
    static constexpr std::string_view name = "cuda::AsyncPool";
    /// The default release threshold: keep every freed byte reserved for reuse.
    static constexpr std::uint64_t keep_everything = std::numeric_limits<std::uint64_t>::max();

    /// `bytes` bytes from the current device's pool, usable by work on `stream` issued after this
    /// call (other streams must be ordered after it first). Zero bytes give a null pointer. No lock
    /// is taken: the device's pool is looked up in a fixed table and its counters are atomics, so
    /// threads allocating at once do not wait for each other (CUDA's own pool locks are CUDA's).
    /// When the device is out of memory, the pool first gives back what it holds unused (as
    /// `empty_cache` does: the device is synchronised, then the pool trimmed) and tries once more,
    /// as PyTorch's caching allocator does.
    /// \throws OutOfMemoryError (a `std::bad_alloc`) when the cap would be exceeded (nothing
    /// changes) or the device is still out of memory after that; DeviceError where pools are
    /// unsupported; NoDeviceError without a usable driver.
    [[nodiscard]] static void* allocate_async(std::size_t bytes, stream_type stream) {
        if (bytes == 0) {
            return nullptr;
        }
        int device = 0;
        SYNCBLOB_CUDA_CHECK(cudaGetDevice(&device), "cuda::AsyncPool::allocate(" + std::to_string(bytes) + " bytes)");
        PerDevice& d = of_device(device);
        const std::size_t requested = d.requested_bytes.fetch_add(bytes, std::memory_order_relaxed) + bytes;
        const std::size_t cap = d.cap.load(std::memory_order_relaxed);
        if (cap != 0 && (requested > cap || requested < bytes)) {
            d.requested_bytes.fetch_sub(bytes, std::memory_order_relaxed);
            throw OutOfMemoryError("cuda::AsyncPool::allocate(" + std::to_string(bytes) + " bytes): the cap of " +
                                   std::to_string(cap) + " bytes on device " + std::to_string(device) +
                                   " would be exceeded (" + std::to_string(requested - bytes) + " bytes in use)");
        }
        void* p = nullptr;
        cudaError_t status = cudaMallocFromPoolAsync(&p, bytes, d.pool, stream);
        if (status == cudaErrorMemoryAllocation) {
            (void)cudaGetLastError();
            cuda::synchronize();        // out of memory: the frees queued so far must run before the trim
            release_unused(d, device);  // what the cache holds goes back, then one more try
            ++d.oom_retries;
            status = cudaMallocFromPoolAsync(&p, bytes, d.pool, stream);
        }
        if (status != cudaSuccess) {
            d.requested_bytes.fetch_sub(bytes, std::memory_order_relaxed);
            detail::raise(status, "cudaMallocFromPoolAsync",
                          "cuda::AsyncPool::allocate(" + std::to_string(bytes) + " bytes)");
        }
        ++d.requests;
        const std::uint64_t reserved = attribute(d.pool, cudaMemPoolAttrReservedMemCurrent);
        if (reserved > d.last_reserved.exchange(reserved, std::memory_order_relaxed)) {
            audit::note_nothrow(audit::Wait::system_allocation);  // the pool grew: counted, not refused
            ++d.system_allocations;
        } else {
            ++d.cache_hits;
        }
        for (std::size_t peak = d.peak_requested_bytes.load(std::memory_order_relaxed);
             requested > peak && !d.peak_requested_bytes.compare_exchange_weak(peak, requested);) {
        }
        return p;
    }

    /// Frees `p` once `stream` reaches this point (`cudaFreeAsync`); the host does not wait. Work on
    /// other streams that uses the block must be ordered before it. `p` belongs to the current device
    /// (a buffer frees its block with its device current).
    static void deallocate_async(void* p, std::size_t bytes, stream_type stream) noexcept {
        if (p == nullptr) {
            return;
        }
        if (cudaFreeAsync(p, stream) != cudaSuccess) {  // nothing to report from a release
            (void)cudaGetLastError();
        }
        given_back(bytes);
    }

    /// A block usable from any stream: allocated on the default stream, which is then waited for.
    [[nodiscard]] static void* allocate(std::size_t bytes) {
        void* p = allocate_async(bytes, default_stream());
        if (p != nullptr) {
            try {
                audit::note(audit::Wait::stream_synchronize);
                SYNCBLOB_CUDA_CHECK(cudaStreamSynchronize(default_stream()), "cuda::AsyncPool::allocate");
            } catch (...) {
                deallocate_async(p, bytes, default_stream());
                throw;
            }
        }
        return p;
    }

    /// Frees at once, after all work on the block's device has finished (as `cudaFree` of
    /// `cudaMalloc` memory synchronises; `cudaFree` of pool memory does not, so this waits first).
    static void deallocate(void* p, std::size_t bytes) noexcept {
        if (p == nullptr) {
            return;
        }
        try {
            const DeviceGuard<Device> guard(device_of(p));
            audit::note_nothrow(audit::Wait::device_synchronize);
            (void)cudaDeviceSynchronize();
            if (cudaFree(p) != cudaSuccess) {
                (void)cudaGetLastError();
            }
            given_back(bytes);
        } catch (...) {  // the device cannot be made current: a dead context frees everything anyway
            (void)cudaGetLastError();
        }
    }

    /// A snapshot of `device`'s pool (the current device by default): `in_use_bytes`,
    /// `reserved_bytes` and `peak_reserved_bytes` are CUDA's (`cudaMemPoolAttrUsedMemCurrent`,
    /// `ReservedMemCurrent`, `ReservedMemHigh`: rounded to its granularity), `cached_bytes` their
    /// difference; `requested_bytes`, its peak and `requests` are counted by syncblob;
    /// `cache_hits` counts requests that did not grow the reservation and `system_allocations` those
    /// that did; `system_frees` counts `empty_cache` calls that returned memory to the system.
    [[nodiscard]] static PoolStats stats(int device = -1) {
        if (device < 0) {
            device = current_device();
        }
        PerDevice& d = of_device(device);
        PoolStats s;
        s.requested_bytes = d.requested_bytes.load(std::memory_order_relaxed);
        s.peak_requested_bytes = d.peak_requested_bytes.load(std::memory_order_relaxed);
        s.requests = d.requests.load(std::memory_order_relaxed);
        s.cache_hits = d.cache_hits.load(std::memory_order_relaxed);
        s.system_allocations = d.system_allocations.load(std::memory_order_relaxed);
        s.system_frees = d.system_frees.load(std::memory_order_relaxed);
        s.in_use_bytes = static_cast<std::size_t>(attribute(d.pool, cudaMemPoolAttrUsedMemCurrent));
        s.reserved_bytes = static_cast<std::size_t>(attribute(d.pool, cudaMemPoolAttrReservedMemCurrent));
        s.peak_reserved_bytes = static_cast<std::size_t>(attribute(d.pool, cudaMemPoolAttrReservedMemHigh));
        s.cached_bytes = s.reserved_bytes - std::min(s.reserved_bytes, s.in_use_bytes);
        return s;
    }

    /// How often an allocation found the device out of memory, gave back the pool's unused memory
    /// and tried again (the current device by default).
    [[nodiscard]] static std::uint64_t out_of_memory_retries(int device = -1) {
        return of_device(device < 0 ? current_device() : device).oom_retries.load(std::memory_order_relaxed);
    }

    /// Waits for all work on `device` (the current one by default), then returns every byte the
    /// pool holds and has not handed out to the system (`cudaMemPoolTrimTo(pool, 0)`).
    static void empty_cache(int device = -1) {
        if (device < 0) {
            device = current_device();
        }
        const DeviceGuard<Device> guard(device);
        cuda::synchronize();
        release_unused(of_device(device), device);
    }

    /// Caps the bytes callers may hold at once from `device`'s pool (`PoolStats::requested_bytes`,
    /// checked before CUDA is asked); 0 lifts the cap. Memory cached beyond it is bounded by the
    /// release threshold and `empty_cache`.
    static void set_cap(std::size_t bytes, int device = -1) {
        of_device(device < 0 ? current_device() : device).cap.store(bytes, std::memory_order_relaxed);
    }

    /// Reserved bytes above which CUDA returns freed memory to the system at the next
    /// synchronisation (`cudaMemPoolAttrReleaseThreshold`); `keep_everything` by default.
    static void set_release_threshold(std::uint64_t bytes, int device = -1) {
        if (device < 0) {
            device = current_device();
        }
        SYNCBLOB_CUDA_CHECK(cudaMemPoolSetAttribute(of_device(device).pool, cudaMemPoolAttrReleaseThreshold, &bytes),
                            "cuda::AsyncPool::set_release_threshold(" + std::to_string(bytes) + ")");
    }

    /// Starts `peak_reserved_bytes` and `peak_requested_bytes` afresh from the current values.
    static void reset_peaks(int device = -1) {
        if (device < 0) {
            device = current_device();
        }
        PerDevice& d = of_device(device);
        std::uint64_t zero = 0;
        SYNCBLOB_CUDA_CHECK(cudaMemPoolSetAttribute(d.pool, cudaMemPoolAttrReservedMemHigh, &zero),
                            "cuda::AsyncPool::reset_peaks");
        SYNCBLOB_CUDA_CHECK(cudaMemPoolSetAttribute(d.pool, cudaMemPoolAttrUsedMemHigh, &zero),
                            "cuda::AsyncPool::reset_peaks");
        d.peak_requested_bytes.store(d.requested_bytes.load(std::memory_order_relaxed), std::memory_order_relaxed);
    }

    /// The pool of `device`, created on first use (for `cudaMemPoolSetAccess` and the like).
    [[nodiscard]] static cudaMemPool_t pool(int device) { return of_device(device).pool; }

private:
    /// Devices a process may use (CUDA's own limit per node is far below it).
    static constexpr int max_devices = 64;

    // One device's pool and counters: the pool is set once, under the creation lock, before the
    // slot is published; everything else is an atomic, so allocations and frees take no lock.
    struct PerDevice {
        cudaMemPool_t pool = nullptr;
        std::atomic<std::size_t> cap{0};
        std::atomic<std::size_t> requested_bytes{0};
        std::atomic<std::size_t> peak_requested_bytes{0};
        std::atomic<std::uint64_t> last_reserved{0};  // the pool's reservation after the last allocation
        std::atomic<std::uint64_t> requests{0};
        std::atomic<std::uint64_t> cache_hits{0};
        std::atomic<std::uint64_t> system_allocations{0};
        std::atomic<std::uint64_t> system_frees{0};
        std::atomic<std::uint64_t> oom_retries{0};
    };
    struct Pools {
        std::mutex creating;  // taken only to create a device's pool, once
        std::array<PerDevice, max_devices> devices;
        std::array<std::atomic<bool>, max_devices> ready{};
    };

    // Kept for the life of the process: destroying a pool at exit could outlive the CUDA runtime.
    static Pools& pools() {
        static Pools* state = new Pools;  // NOLINT(cppcoreguidelines-owning-memory)
        return *state;
    }

    // `device`'s slot, its pool created on first use. \throws DeviceError for a device past max_devices.
    static PerDevice& of_device(int device) {
        if (device < 0 || device >= max_devices) {
            throw DeviceError("cuda::AsyncPool: device " + std::to_string(device) + " is past the " +
                              std::to_string(max_devices) + " devices a process may use");
        }
        auto& state = pools();
        const auto i = static_cast<std::size_t>(device);
        if (!state.ready[i].load(std::memory_order_acquire)) {
            const std::lock_guard lock(state.creating);
            if (!state.ready[i].load(std::memory_order_relaxed)) {
                state.devices[i].pool = create_pool(device);
                state.ready[i].store(true, std::memory_order_release);
            }
        }
        return state.devices[i];
    }

    // Returns what the pool holds unused (after the caller waited for the device's work).
    static void release_unused(PerDevice& d, int device) {
        const std::uint64_t before = attribute(d.pool, cudaMemPoolAttrReservedMemCurrent);
        SYNCBLOB_CUDA_CHECK(
            cudaMemPoolTrimTo(d.pool, 0),
            "cuda::AsyncPool: giving back the pool's unused memory on device " + std::to_string(device));
        const std::uint64_t after = attribute(d.pool, cudaMemPoolAttrReservedMemCurrent);
        d.last_reserved.store(after, std::memory_order_relaxed);
        if (after < before) {
            ++d.system_frees;
        }
    }

    static cudaMemPool_t create_pool(int device) {
        int supported = 0;
        SYNCBLOB_CUDA_CHECK(cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, device),
                            "cuda::AsyncPool on device " + std::to_string(device));
        if (supported == 0) {
            throw DeviceError("cuda::AsyncPool: device " + std::to_string(device) +
                              " does not support memory pools (cudaDevAttrMemoryPoolsSupported is 0); "
                              "use cuda::Device (cuda::Allocator) there");
        }
        cudaMemPoolProps props{};
        props.allocType = cudaMemAllocationTypePinned;
        props.handleTypes = cudaMemHandleTypeNone;
        props.location.type = cudaMemLocationTypeDevice;
        props.location.id = device;
        cudaMemPool_t pool = nullptr;
        SYNCBLOB_CUDA_CHECK(cudaMemPoolCreate(&pool, &props), "cuda::AsyncPool on device " + std::to_string(device));
        std::uint64_t threshold = keep_everything;
        const cudaError_t status = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold);
        if (status != cudaSuccess) {
            (void)cudaMemPoolDestroy(pool);
            detail::raise(status, "cudaMemPoolSetAttribute(cudaMemPoolAttrReleaseThreshold)",
                          "cuda::AsyncPool on device " + std::to_string(device));
        }
        return pool;
    }

    static std::uint64_t attribute(cudaMemPool_t pool, cudaMemPoolAttr which) {
        std::uint64_t value = 0;
        SYNCBLOB_CUDA_CHECK(cudaMemPoolGetAttribute(pool, which, &value), "cuda::AsyncPool statistics");
        return value;
    }

    // Counts a block of the current device given back by a caller that asked for `bytes`.
    static void given_back(std::size_t bytes) noexcept {
        int device = 0;
        if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= max_devices ||
            !pools().ready[static_cast<std::size_t>(device)].load(std::memory_order_acquire)) {
            (void)cudaGetLastError();
            return;
        }
        auto& requested = pools().devices[static_cast<std::size_t>(device)].requested_bytes;
        for (std::size_t now = requested.load(std::memory_order_relaxed);
             !requested.compare_exchange_weak(now, now - std::min(now, bytes), std::memory_order_relaxed);) {
        }
    }
};

static_assert(StreamOrderedBackend<AsyncPool>);

/// Pinned host memory and the pooled CUDA device: `Blob<float, cuda::AsyncAllocator>` is a GPU blob
/// whose device blocks are allocated and freed in stream order.
struct AsyncAllocator {
    using host_allocator = PinnedAllocator;
    using device_backend = AsyncPool;
};

static_assert(SyncedAllocator<AsyncAllocator>);

/// Both sides pooled: host blocks from `cuda::PinnedPool`, device blocks from `AsyncPool`.
/// `Blob<float, cuda::PooledAllocator>` is the GPU blob for code that creates and destroys blobs
/// every iteration (docs/allocators.md).
struct PooledAllocator {
    using host_allocator = PinnedPool;
    using device_backend = AsyncPool;
};

static_assert(SyncedAllocator<PooledAllocator>);
// So a buffer destroyed during its own asynchronous copy gives both blocks back on its stream
// instead of waiting (SyncedBuffer's destructor).
static_assert(StreamOrderedBackend<PooledAllocator::device_backend> &&
              StreamAwareHostAllocator<PooledAllocator::host_allocator, PooledAllocator::device_backend>);

}  // namespace cuda

SYNCBLOB_END_NAMESPACE
