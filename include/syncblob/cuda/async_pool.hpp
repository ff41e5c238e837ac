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
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
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
    /// call (other streams must be ordered after it first). Zero bytes give a null pointer.
    /// \throws OutOfMemoryError (a `std::bad_alloc`) when the cap would be exceeded (nothing
    /// changes) or the device is out of memory; DeviceError where pools are unsupported;
    /// NoDeviceError without a usable driver.
    [[nodiscard]] static void* allocate_async(std::size_t bytes, stream_type stream) {
        if (bytes == 0) {
            return nullptr;
        }
        int device = 0;
        SYNCBLOB_CUDA_CHECK(cudaGetDevice(&device), "cuda::AsyncPool::allocate(" + std::to_string(bytes) + " bytes)");
        auto& state = pools();
        std::lock_guard lock(state.mutex);
        PerDevice& d = of_device(state, device);
        if (d.cap != 0 && bytes > d.cap - std::min(d.cap, d.stats.requested_bytes)) {
            throw OutOfMemoryError("cuda::AsyncPool::allocate(" + std::to_string(bytes) + " bytes): the cap of " +
                                   std::to_string(d.cap) + " bytes on device " + std::to_string(device) +
                                   " would be exceeded (" + std::to_string(d.stats.requested_bytes) + " bytes in use)");
        }
        const std::uint64_t reserved = attribute(d.pool, cudaMemPoolAttrReservedMemCurrent);
        void* p = nullptr;
        SYNCBLOB_CUDA_CHECK(cudaMallocFromPoolAsync(&p, bytes, d.pool, stream),
                            "cuda::AsyncPool::allocate(" + std::to_string(bytes) + " bytes)");
        try {
            state.owners.emplace(p, device);
        } catch (...) {
            (void)cudaFreeAsync(p, stream);
            throw;
        }
        ++d.stats.requests;
        if (attribute(d.pool, cudaMemPoolAttrReservedMemCurrent) > reserved) {
            ++d.stats.system_allocations;
        } else {
            ++d.stats.cache_hits;
        }
        d.stats.requested_bytes += bytes;
        d.stats.peak_requested_bytes = std::max(d.stats.peak_requested_bytes, d.stats.requested_bytes);
        return p;
    }

    /// Frees `p` once `stream` reaches this point (`cudaFreeAsync`); the host does not wait. Work on
    /// other streams that uses the block must be ordered before it.
    static void deallocate_async(void* p, std::size_t bytes, stream_type stream) noexcept {
        if (p == nullptr) {
            return;
        }
        if (cudaFreeAsync(p, stream) != cudaSuccess) {  // nothing to report from a release
            (void)cudaGetLastError();
        }
        given_back(p, bytes);
    }

    /// A block usable from any stream: allocated on the default stream, which is then waited for.
    [[nodiscard]] static void* allocate(std::size_t bytes) {
        void* p = allocate_async(bytes, default_stream());
        if (p != nullptr) {
            try {
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
            (void)cudaDeviceSynchronize();
            if (cudaFree(p) != cudaSuccess) {
                (void)cudaGetLastError();
            }
        } catch (...) {  // the device cannot be made current: a dead context frees everything anyway
            (void)cudaGetLastError();
        }
        given_back(p, bytes);
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
        auto& state = pools();
        std::lock_guard lock(state.mutex);
        PerDevice& d = of_device(state, device);
        PoolStats s = d.stats;
        s.in_use_bytes = static_cast<std::size_t>(attribute(d.pool, cudaMemPoolAttrUsedMemCurrent));
        s.reserved_bytes = static_cast<std::size_t>(attribute(d.pool, cudaMemPoolAttrReservedMemCurrent));
        s.peak_reserved_bytes = static_cast<std::size_t>(attribute(d.pool, cudaMemPoolAttrReservedMemHigh));
        s.cached_bytes = s.reserved_bytes - std::min(s.reserved_bytes, s.in_use_bytes);
        return s;
    }

    /// Waits for all work on `device` (the current one by default), then returns every byte the
    /// pool holds and has not handed out to the system (`cudaMemPoolTrimTo(pool, 0)`).
    static void empty_cache(int device = -1) {
        if (device < 0) {
            device = current_device();
        }
        const DeviceGuard<Device> guard(device);
        cuda::synchronize();
        auto& state = pools();
        std::lock_guard lock(state.mutex);
        PerDevice& d = of_device(state, device);
        const std::uint64_t before = attribute(d.pool, cudaMemPoolAttrReservedMemCurrent);
        SYNCBLOB_CUDA_CHECK(cudaMemPoolTrimTo(d.pool, 0), "cuda::AsyncPool::empty_cache");
        if (attribute(d.pool, cudaMemPoolAttrReservedMemCurrent) < before) {
            ++d.stats.system_frees;
        }
    }

    /// Caps the bytes callers may hold at once from `device`'s pool (`PoolStats::requested_bytes`,
    /// checked before CUDA is asked); 0 lifts the cap. Memory cached beyond it is bounded by the
    /// release threshold and `empty_cache`.
    static void set_cap(std::size_t bytes, int device = -1) {
        if (device < 0) {
            device = current_device();
        }
        auto& state = pools();
        std::lock_guard lock(state.mutex);
        of_device(state, device).cap = bytes;
    }

    /// Reserved bytes above which CUDA returns freed memory to the system at the next
    /// synchronisation (`cudaMemPoolAttrReleaseThreshold`); `keep_everything` by default.
    static void set_release_threshold(std::uint64_t bytes, int device = -1) {
        if (device < 0) {
            device = current_device();
        }
        auto& state = pools();
        std::lock_guard lock(state.mutex);
        SYNCBLOB_CUDA_CHECK(
            cudaMemPoolSetAttribute(of_device(state, device).pool, cudaMemPoolAttrReleaseThreshold, &bytes),
            "cuda::AsyncPool::set_release_threshold(" + std::to_string(bytes) + ")");
    }

    /// Starts `peak_reserved_bytes` and `peak_requested_bytes` afresh from the current values.
    static void reset_peaks(int device = -1) {
        if (device < 0) {
            device = current_device();
        }
        auto& state = pools();
        std::lock_guard lock(state.mutex);
        PerDevice& d = of_device(state, device);
        std::uint64_t zero = 0;
        SYNCBLOB_CUDA_CHECK(cudaMemPoolSetAttribute(d.pool, cudaMemPoolAttrReservedMemHigh, &zero),
                            "cuda::AsyncPool::reset_peaks");
        SYNCBLOB_CUDA_CHECK(cudaMemPoolSetAttribute(d.pool, cudaMemPoolAttrUsedMemHigh, &zero),
                            "cuda::AsyncPool::reset_peaks");
        d.stats.peak_requested_bytes = d.stats.requested_bytes;
    }

    /// The pool of `device`, created on first use (for `cudaMemPoolSetAccess` and the like).
    [[nodiscard]] static cudaMemPool_t pool(int device) {
        auto& state = pools();
        std::lock_guard lock(state.mutex);
        return of_device(state, device).pool;
    }

private:
    struct PerDevice {
        cudaMemPool_t pool = nullptr;
        PoolStats stats;  // the counters syncblob keeps; the byte counts come from CUDA
        std::size_t cap = 0;
    };
    struct Pools {
        std::mutex mutex;
        std::map<int, PerDevice> devices;
        std::map<void*, int> owners;  // the device of each block handed out, for its statistics
    };

    // Kept for the life of the process: destroying a pool at exit could outlive the CUDA runtime.
    static Pools& pools() {
        static Pools* state = new Pools;  // NOLINT(cppcoreguidelines-owning-memory)
        return *state;
    }

    static PerDevice& of_device(Pools& state, int device) {
        PerDevice& d = state.devices[device];
        if (d.pool == nullptr) {
            d.pool = create_pool(device);
        }
        return d;
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

    // Counts a block given back by a caller that asked for `bytes`.
    static void given_back(void* p, std::size_t bytes) noexcept {
        auto& state = pools();
        std::lock_guard lock(state.mutex);
        const auto it = state.owners.find(p);
        if (it == state.owners.end()) {
            return;
        }
        auto& requested = state.devices[it->second].stats.requested_bytes;
        requested -= std::min(requested, bytes);
        state.owners.erase(it);
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
