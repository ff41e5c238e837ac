// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The memory of a sealed `ParameterArena`: one host and one device block per buffer (data, diff),
/// aligned, zero-filled, freed when the last blob buffer that borrows a slice of it lets go.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <new>

#include "../../memory/allocator.hpp"
#include "../../memory/device_backend.hpp"
#include "../../memory/huge_pages.hpp"
#include "../../memory/stream_order.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace detail {

[[nodiscard]] constexpr std::size_t round_up(std::size_t n, std::size_t multiple) noexcept {
    return (n + multiple - 1) / multiple * multiple;
}

/// One buffer's aligned host and device memory (device null for a host-only backend or 0 bytes).
/// Device blocks live on the device current at construction; a backend that allocates in stream
/// order (`StreamOrderedBackend`) allocates and frees them on the arena's stream, without the
/// host waiting; another frees them once the host has waited for that stream.
struct ArenaBlocks {
    void* host = nullptr;
    void* device = nullptr;
};

template <SyncedAllocator Allocator>
class ArenaStorage {
    using HostAlloc = typename Allocator::host_allocator;
    using Device = typename Allocator::device_backend;

public:
    /// Allocates and zero-fills `bytes` per buffer and side, aligned to `alignment`.
    /// \throws std::bad_alloc (what was allocated is freed).
    ArenaStorage(std::size_t bytes_, std::size_t alignment_, typename Device::stream_type stream_)
        : bytes(bytes_), alignment(alignment_), stream(stream_) {
        if (bytes == 0) {
            return;
        }
        try {
            data.host = allocate_host(data_host_);
            diff.host = allocate_host(diff_host_);
            if constexpr (Device::has_device) {
                device = Device::current_device();
                data.device = allocate_device(data_device_);
                diff.device = allocate_device(diff_device_);
            }
        } catch (...) {
            release();
            throw;
        }
    }
    ArenaStorage(const ArenaStorage&) = delete;
    ArenaStorage& operator=(const ArenaStorage&) = delete;
    ~ArenaStorage() { release(); }

    std::size_t bytes;
    std::size_t alignment;
    /// The stream work on the blocks is queued on: they are freed after it.
    typename Device::stream_type stream;
    /// The device of the device blocks (-1 without any).
    int device = -1;
    ArenaBlocks data;
    ArenaBlocks diff;

private:
    void* allocate_host(HostBlock& block) {
        if (bytes > SIZE_MAX - alignment) {
            throw std::bad_alloc();
        }
        // Zeros from an allocator that has them for free (fresh pages, zeroed when first touched)
        // are not written again: a large arena's pages are then touched once, by what fills them.
        constexpr bool zeroed = ZeroingHostAllocator<HostAlloc>;
        if constexpr (zeroed) {
            block = HostAlloc::allocate_zeroed(bytes + alignment);
        } else {
            block = HostAlloc::allocate(bytes + alignment);
        }
        auto* p = static_cast<std::byte*>(block.data);
        p += (alignment - reinterpret_cast<std::uintptr_t>(p) % alignment) % alignment;
        // Huge pages before anything first touches the block: a checkpoint load or an all-reduce
        // then writes a whole model's bytes with fewer TLB misses (and faults once per 2 MiB).
        advise_huge_pages(p, bytes);
        if constexpr (!zeroed) {
            std::memset(p, 0, bytes);
        }
        return p;
    }

    void* allocate_device(void*& block) {
        if constexpr (StreamOrderedBackend<Device>) {
            block = Device::allocate_async(bytes + alignment, stream);
        } else {
            block = Device::allocate(bytes + alignment);
        }
        auto* p = static_cast<std::byte*>(block);
        p += (alignment - reinterpret_cast<std::uintptr_t>(p) % alignment) % alignment;
        Device::fill(p, 0, bytes, stream);
        return p;
    }

    void release() noexcept {
        if constexpr (Device::has_device) {
            if (data_device_ != nullptr || diff_device_ != nullptr) {
                try {
                    const DeviceGuard<Device> guard(device);
                    free_device();
                } catch (...) {  // the device cannot be made current: freed from the current one
                    free_device();
                }
            }
            data_device_ = diff_device_ = nullptr;
        }
        HostAlloc::deallocate(data_host_);
        HostAlloc::deallocate(diff_host_);
        data_host_ = diff_host_ = {};
    }

    void free_device() noexcept {
        if constexpr (!StreamOrderedBackend<Device>) {
            finish_before_free<Device>(stream);
        }
        for (void* block : {data_device_, diff_device_}) {
            if (block == nullptr) {
                continue;
            }
            if constexpr (StreamOrderedBackend<Device>) {
                Device::deallocate_async(block, bytes + alignment, stream);
            } else {
                Device::deallocate(block, bytes + alignment);
            }
        }
    }

    HostBlock data_host_{};
    HostBlock diff_host_{};
    void* data_device_ = nullptr;
    void* diff_device_ = nullptr;
};

}  // namespace detail

SYNCBLOB_END_NAMESPACE
