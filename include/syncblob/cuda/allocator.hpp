// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// `cuda::PinnedAllocator` (page-locked host memory, falling back to pageable memory where no
/// driver is present) and `cuda::Allocator`, the bundle that makes `Blob<T, cuda::Allocator>` the
/// GPU blob. Host code: compiles with any C++ compiler.

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <string>
#include <string_view>

#include "../memory/allocator.hpp"
#include "../memory/pinned_pool.hpp"
#include "device.hpp"
#include "error.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace cuda {

/// Host memory for fast and asynchronous transfers: `cudaMallocHost` where a driver is present;
/// 64-byte-aligned pageable memory (`AlignedAllocator`, with its guard against absurd sizes) where
/// the runtime reports no usable driver or device (so host-side use of a GPU blob works on any
/// machine), and for a block for which pinned memory has run out (page-locked memory is a scarce,
/// system-wide resource; pageable memory still works, only its asynchronous copies are not truly
/// asynchronous). Each block records in `HostBlock::kind` how it was obtained and is freed the same way.
struct PinnedAllocator {
    static constexpr std::string_view name = "cuda::PinnedAllocator";
    /// Alignment of the pageable fallback (pinned blocks are page-aligned).
    static constexpr std::size_t alignment = AlignedAllocator::alignment;

    /// `HostBlock::kind` values.
    static constexpr std::uint32_t pinned = 1;    ///< from cudaMallocHost, freed by cudaFreeHost
    static constexpr std::uint32_t pageable = 2;  ///< the fallback, from AlignedAllocator

    /// \throws `std::bad_alloc` when neither pinned nor pageable memory is available (or `bytes` is
    /// absurd), `DeviceError` on any other failure of the runtime.
    [[nodiscard]] static HostBlock allocate(std::size_t bytes) {
        if (bytes == 0) {
            return {};
        }
        if (!driver_missing().load(std::memory_order_relaxed)) {
            audit::note(audit::Wait::system_allocation);
            void* p = nullptr;
            try {
                SYNCBLOB_CUDA_CHECK(cudaMallocHost(&p, bytes),
                                    "cuda::PinnedAllocator::allocate(" + std::to_string(bytes) + " bytes)");
                return {p, bytes, pinned};
            } catch (const NoDeviceError&) {
                // The driver's absence does not change while the process runs: ask only once.
                driver_missing().store(true, std::memory_order_relaxed);
            } catch (const OutOfMemoryError&) {  // pinned memory ran out: this block is pageable
            }
        }
        HostBlock block = AlignedAllocator::allocate(bytes);
        block.kind = pageable;
        return block;
    }

    static void deallocate(HostBlock block) noexcept {
        if (block.data == nullptr) {
            return;
        }
        if (block.kind == pinned) {
            audit::note_nothrow(audit::Wait::blocking_free);  // cudaFreeHost waits for the device
            (void)cudaFreeHost(block.data);
        } else {
            AlignedAllocator::deallocate(block);
        }
    }

    /// True when pinned allocation has been found impossible here (no driver or no device), so
    /// every block is pageable.
    [[nodiscard]] static bool falls_back() noexcept { return driver_missing().load(std::memory_order_relaxed); }

private:
    static std::atomic<bool>& driver_missing() noexcept {
        static std::atomic<bool> missing{false};
        return missing;
    }
};

static_assert(HostAllocator<PinnedAllocator>);

/// Pinned host memory and a CUDA device: `Blob<float, cuda::Allocator>` is the GPU blob.
struct Allocator {
    using host_allocator = PinnedAllocator;
    using device_backend = Device;
};

static_assert(SyncedAllocator<Allocator>);

/// A caching pool of pinned host blocks (`PinnedAllocator` upstream), reuse gated on CUDA events:
/// see `syncblob::PinnedPool` and docs/allocators.md.
using PinnedPool = syncblob::PinnedPool<PinnedAllocator, Device>;

static_assert(StreamAwareHostAllocator<PinnedPool, Device>);

/// Pooled pinned host memory and a CUDA device: `Blob<float, cuda::PooledHostAllocator>` allocates
/// its host side from `cuda::PinnedPool`.
struct PooledHostAllocator {
    using host_allocator = PinnedPool;
    using device_backend = Device;
};

static_assert(SyncedAllocator<PooledHostAllocator>);

}  // namespace cuda

SYNCBLOB_END_NAMESPACE
