// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The staging memory of a device load: pinned host blocks from a pool, each remembering the chunk
/// whose copy last read it, and, when some chunk is converted on the device, one device block of
/// the same number of slots for the raw bytes the conversion kernels read. Both go back after the
/// work issued on the copy stream: the host blocks to the pool, which hands them out again only
/// once that work is done; the device block in stream order where the backend frees that way, else
/// once the host has waited for the stream.

#include <concepts>
#include <cstddef>
#include <type_traits>
#include <vector>

#include "../../memory/device_backend.hpp"
#include "../../memory/host_allocator.hpp"
#include "../../memory/pinned_pool.hpp"
#include "../../memory/stream_order.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace checkpoint::detail {

/// The pool staging blocks come from: the arena's host allocator when it is itself a pool that
/// gates reuse on device work (`cuda::PinnedPool`), else a `PinnedPool` over it (page-locked
/// memory for `cuda::Allocator`, whose host allocator is `cuda::PinnedAllocator`).
template <class HostAlloc, class Device>
using staging_pool_t =
    std::conditional_t<StreamAwareHostAllocator<HostAlloc, Device>, HostAlloc, PinnedPool<HostAlloc, Device>>;

template <class Pool, DeviceBackend Device>
class Staging {
public:
    using stream_type = typename Device::stream_type;
    static constexpr std::size_t none = static_cast<std::size_t>(-1);

    /// `blocks` host blocks of `bytes` bytes and, with `device_slots`, a device block of as many
    /// slots, for work on `stream`. \throws std::bad_alloc (what was taken goes back).
    Staging(std::size_t blocks, std::size_t bytes, bool device_slots, stream_type stream)
        : bytes_(bytes), stream_(stream), last_(blocks, none) {
        try {
            host_.reserve(blocks);
            for (std::size_t i = 0; i < blocks; ++i) {
                host_.push_back(Pool::allocate(bytes));
            }
            if (device_slots) {
                device_bytes_ = blocks * bytes;
                if constexpr (StreamOrderedBackend<Device>) {
                    device_ = Device::allocate_async(device_bytes_, stream_);
                } else {
                    device_ = Device::allocate(device_bytes_);
                }
            }
        } catch (...) {
            release();
            throw;
        }
    }
    Staging(const Staging&) = delete;
    Staging& operator=(const Staging&) = delete;
    ~Staging() { release(); }

    [[nodiscard]] std::size_t size() const noexcept { return host_.size(); }
    [[nodiscard]] std::byte* host(std::size_t i) const noexcept { return static_cast<std::byte*>(host_[i].data); }
    /// Device block `i`; null when this staging has no device slots (no offset is applied to null).
    [[nodiscard]] std::byte* device(std::size_t i) const noexcept {
        return device_ == nullptr ? nullptr : static_cast<std::byte*>(device_) + i * bytes_;
    }
    /// The chunk whose copy last read block `i` (`none` before the first).
    [[nodiscard]] std::size_t& last_chunk(std::size_t i) noexcept { return last_[i]; }

private:
    void release() noexcept {
        for (const HostBlock& b : host_) {
            Pool::deallocate(b, stream_);  // handed out again only once the copies that read it have run
        }
        host_.clear();
        if (device_ != nullptr) {
            if constexpr (StreamOrderedBackend<Device>) {
                Device::deallocate_async(device_, device_bytes_, stream_);
            } else {
                syncblob::detail::finish_before_free<Device>(stream_);
                Device::deallocate(device_, device_bytes_);
            }
            device_ = nullptr;
        }
    }

    std::size_t bytes_;
    stream_type stream_;
    std::vector<HostBlock> host_;
    std::vector<std::size_t> last_;
    void* device_ = nullptr;
    std::size_t device_bytes_ = 0;
};

}  // namespace checkpoint::detail

SYNCBLOB_END_NAMESPACE
