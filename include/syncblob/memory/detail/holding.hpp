// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// How a `SyncedBuffer` holds each side's memory: a block it allocated and frees the way it was
/// obtained, or borrowed memory it only keeps alive and never frees.

#include <cstddef>
#include <functional>
#include <memory>

#include "../device_backend.hpp"
#include "../host_allocator.hpp"
#include "stream_order.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace detail {

/// True when `p` points into the `bytes` bytes at `begin`.
[[nodiscard]] inline bool points_into(const void* p, const void* begin, std::size_t bytes) noexcept {
    const auto* b = static_cast<const std::byte*>(begin);
    const auto* q = static_cast<const std::byte*>(p);
    return b != nullptr && q != nullptr && std::less_equal<>{}(b, q) && std::less<>{}(q, b + bytes);
}

/// The host side: the block the allocator handed out (its `kind` says how, so it is freed the same
/// way whatever happens later), or nothing but a keep-alive handle when the memory is borrowed.
template <HostAllocator HostAlloc>
struct HostHolding {
    HostBlock owned{};  ///< empty when the host side is borrowed or absent
    std::shared_ptr<void> keep_alive;

    [[nodiscard]] bool owns(const void* p, std::size_t bytes) const noexcept {
        return points_into(p, owned.data, bytes);
    }

    void adopt(HostBlock block) noexcept {
        release();
        owned = block;
    }

    void release() noexcept {
        if (owned.data != nullptr) {
            HostAlloc::deallocate(owned);
        }
        owned = {};
        keep_alive.reset();
    }
};

/// The device side: whether the block is the buffer's own, the device it lives on, and the
/// keep-alive handle of borrowed memory. The pointer itself lives with the buffer's hot members.
template <DeviceBackend Device>
struct DeviceHolding {
    bool owned = false;
    int device = -1;
    std::shared_ptr<void> keep_alive;

    [[nodiscard]] bool owns(const void* p, const void* block, std::size_t bytes) const noexcept {
        return owned && points_into(p, block, bytes);
    }

    /// Frees an owned block after the work issued on `stream` (kernels, copies) is done with it: a
    /// stream-ordered or caching allocator would otherwise hand the block out again while a kernel
    /// still reads it (cudaFree only hides this by synchronising the whole device).
    void release(void* block, std::size_t bytes, typename Device::stream_type stream) noexcept {
        if (owned) {
            finish_before_free<Device>(stream);
            Device::deallocate(block, bytes);
        }
        owned = false;
        keep_alive.reset();
    }
};

}  // namespace detail

SYNCBLOB_END_NAMESPACE
