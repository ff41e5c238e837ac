// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// How a `SyncedBuffer` holds each side's memory: a block it allocated and frees the way it was
/// obtained, or borrowed memory it only keeps alive and never frees.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "../device_backend.hpp"
#include "../host_allocator.hpp"
#include "../stream_order.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace detail {

/// True when the `n` bytes at `p` (the byte at `p` when `n` is 0) and the `bytes` bytes at `begin`
/// share a byte. Compared as addresses, so a range running past the end of the address space
/// cannot wrap round.
[[nodiscard]] inline bool overlaps(const void* p, std::size_t n, const void* begin, std::size_t bytes) noexcept {
    if (p == nullptr || begin == nullptr || bytes == 0) {
        return false;
    }
    const auto q = reinterpret_cast<std::uintptr_t>(p);
    const auto b = reinterpret_cast<std::uintptr_t>(begin);
    const std::uintptr_t q_last = q + std::min<std::uintptr_t>(std::max<std::size_t>(n, 1) - 1, UINTPTR_MAX - q);
    const std::uintptr_t b_last = b + std::min<std::uintptr_t>(bytes - 1, UINTPTR_MAX - b);
    return q <= b_last && b <= q_last;
}

/// The host side: the block the allocator handed out (its `kind` says how, so it is freed the same
/// way whatever happens later), or nothing but a keep-alive handle when the memory is borrowed.
///
/// `hold()` hands out a handle that keeps the memory valid after the buffer lets go of it (for
/// memory lent to another library, as a DLPack export does): on release, the block or the
/// keep-alive goes to the holders, and is freed with the last of them.
template <HostAllocator HostAlloc>
struct HostHolding {
    HostBlock owned{};  ///< empty when the host side is borrowed or absent
    std::shared_ptr<void> keep_alive;
    bool refuses_writes = false;  ///< a read-only borrow that refuses mutable access (Borrow::refuse_writes)
    /// Borrowed memory the buffer registered with the device backend, and how to unregister it.
    void* registered = nullptr;
    void (*unregister)(void*) noexcept = nullptr;

    /// What a released side leaves to its holders.
    struct Lent {
        HostBlock block{};
        std::shared_ptr<void> keep_alive;
        Lent() = default;
        Lent(const Lent&) = delete;
        Lent& operator=(const Lent&) = delete;
        ~Lent() {
            if (block.data != nullptr) {
                HostAlloc::deallocate(block);
            }
        }
    };
    std::shared_ptr<Lent> lent;  ///< shared with the holders of the current memory, if any

    [[nodiscard]] std::shared_ptr<void> hold() {
        if (!lent) {
            lent = std::make_shared<Lent>();
        }
        return lent;
    }

    /// True when any of the `n` bytes at `p` lie in the owned block, whose extent is the larger of
    /// what the allocator reports and the buffer's `size` (an allocator may report 0).
    [[nodiscard]] bool owns(const void* p, std::size_t n, std::size_t size) const noexcept {
        return overlaps(p, n, owned.data, std::max(owned.bytes, size));
    }

    void adopt(HostBlock block) noexcept {
        release();
        owned = block;
    }

    /// Releases the side like `release`, but an owned block nothing else holds goes back to the
    /// allocator "after the work issued so far on `stream`", which the caller does not wait for.
    template <DeviceBackend Device>
    requires StreamAwareHostAllocator<HostAlloc, Device>
    void release_after(typename Device::stream_type stream) noexcept {
        if (!lent && owned.data != nullptr) {  // (registered memory is borrowed, never owned)
            HostAlloc::deallocate(owned, stream);
            owned = {};
        }
        release();
    }

    void release() noexcept {
        if (registered != nullptr) {  // before the keep-alive below may free the memory
            unregister(registered);
            registered = nullptr;
        }
        if (lent) {  // the holders free it
            lent->block = owned;
            lent->keep_alive = std::move(keep_alive);
            lent.reset();
        } else if (owned.data != nullptr) {
            HostAlloc::deallocate(owned);
        }
        owned = {};
        keep_alive.reset();
        refuses_writes = false;
    }
};

/// The device side: whether the block is the buffer's own, the device it lives on, and the
/// keep-alive handle of borrowed memory. The pointer itself lives with the buffer's hot members.
template <DeviceBackend Device>
struct DeviceHolding {
    using stream_type = typename Device::stream_type;
    using event_type = typename Device::event_type;

    bool owned = false;
    int device = -1;
    std::shared_ptr<void> keep_alive;
    bool refuses_writes = false;  ///< a read-only borrow that refuses mutable access (Borrow::refuse_writes)

    /// The memory the buffer lends (see HostHolding::hold), shared by the buffer and its holders:
    /// whichever of them lets go last frees an owned block (`let_go`).
    struct Lent {
        std::mutex mutex;
        void* block = nullptr;  ///< the owned block, once the buffer has let go of it
        std::size_t bytes = 0;
        int device = -1;
        std::shared_ptr<void> keep_alive;
        std::vector<event_type> after;  ///< how far the streams of those who let go first had got
        std::size_t users = 1;          ///< the buffer until it lets go, and each hold not yet let go
        bool unordered = false;         ///< a hold named no stream: the block is freed synchronously

        Lent() = default;
        Lent(const Lent&) = delete;
        Lent& operator=(const Lent&) = delete;

        /// One user lets go: the buffer (`buffer`, after it released the side) or a hold. `stream`
        /// is where its work on the memory was issued (null: a hold that named none). While others
        /// remain it records how far `stream` has got; a buffer whose holders include one that
        /// named no stream waits for its stream instead, as a free of its block would. The last
        /// one frees an owned block: with every user on a stream, in stream order on its own stream
        /// after the others' recorded work (the host does not wait; a backend without
        /// stream-ordered frees waits for those streams and frees at once); otherwise after the
        /// host waited for every stream it knows of, by the backend's synchronous `deallocate`
        /// (`cudaFree`, or `cuda::AsyncPool`'s device-wide wait), since a user that named no stream
        /// may have used the memory from any.
        void let_go(const stream_type* stream, bool buffer) noexcept {
            const std::lock_guard lock(mutex);
            try {
                const DeviceGuard<Device> guard(device);
                let_go_locked(stream, buffer);
            } catch (...) {  // its device cannot be made current: from the current one
                let_go_locked(stream, buffer);
            }
        }

    private:
        void let_go_locked(const stream_type* stream, bool buffer) noexcept {
            if (--users != 0) {
                if (stream != nullptr && (!buffer || block != nullptr)) {
                    if (buffer && unordered) {
                        finish_before_free<Device>(*stream);
                    } else {
                        try {
                            after.push_back(Device::record(*stream));
                        } catch (...) {        // not recorded: the last user frees synchronously, as for
                            unordered = true;  // a holder that named no stream
                        }
                    }
                }
                return;
            }
            if (block == nullptr) {
                return;  // borrowed memory: the keep-alive goes with this
            }
            void* b = std::exchange(block, nullptr);
            if constexpr (StreamOrderedBackend<Device>) {
                if (!unordered && stream != nullptr) {
                    try {
                        for (auto& e : after) {
                            Device::stream_wait(*stream, e);
                        }
                        Device::deallocate_async(b, bytes, *stream);
                        return;
                    } catch (...) {  // the stream cannot wait: the host does, below
                    }
                }
            }
            for (auto& e : after) {
                wait_before_free<Device>(e);
            }
            if (stream != nullptr) {
                finish_before_free<Device>(*stream);
            }
            Device::deallocate(b, bytes);
        }
    };

    /// One holder of the lent memory; lets go when destroyed.
    class Hold {
    public:
        Hold(std::shared_ptr<Lent> lent, const stream_type* stream) : lent_(std::move(lent)) {
            if (stream != nullptr) {
                stream_ = *stream;
            }
            const std::lock_guard lock(lent_->mutex);
            ++lent_->users;
            lent_->unordered = lent_->unordered || stream == nullptr;
        }
        ~Hold() { lent_->let_go(stream_ ? &*stream_ : nullptr, false); }
        Hold(const Hold&) = delete;
        Hold& operator=(const Hold&) = delete;

    private:
        std::shared_ptr<Lent> lent_;
        std::optional<stream_type> stream_;
    };

    std::shared_ptr<Lent> lent;

    /// A handle that keeps the current memory valid after the buffer lets go of it, used on
    /// `stream` (null: on streams nobody named; see Lent::let_go).
    [[nodiscard]] std::shared_ptr<void> hold(const stream_type* stream = nullptr) {
        if (!lent) {
            lent = std::make_shared<Lent>();
        }
        lent->device = device;
        return std::make_shared<Hold>(lent, stream);
    }

    /// True when any of the `n` bytes at `p` lie in the owned `bytes` bytes at `block`.
    [[nodiscard]] bool owns(const void* p, std::size_t n, const void* block, std::size_t bytes) const noexcept {
        return owned && overlaps(p, n, block, bytes);
    }

    /// Frees a block of the buffer's own that nothing else holds, as `release` says.
    static void free_block(void* block, std::size_t bytes, stream_type stream) noexcept {
        if constexpr (StreamOrderedBackend<Device>) {
            Device::deallocate_async(block, bytes, stream);
        } else {
            finish_before_free<Device>(stream);
            Device::deallocate(block, bytes);
        }
    }

    /// Frees an owned block after the work issued on `stream` (kernels, copies) is done with it: a
    /// stream-ordered or caching allocator would otherwise hand the block out again while a kernel
    /// still reads it (cudaFree only hides this by synchronising the whole device). A
    /// stream-ordered backend frees it on `stream` and the host does not wait; other backends free
    /// it once the host has waited for `stream`.
    /// With holders, the block (and the keep-alive) goes to them instead, freed by the last one
    /// (Lent::let_go): holders that named the streams they use free it in stream order; one that
    /// named none makes the host wait here for the buffer's stream, as before.
    void release(void* block, std::size_t bytes, stream_type stream) noexcept {
        if (lent) {
            {
                const std::lock_guard lock(lent->mutex);
                if (owned) {
                    lent->block = block;
                    lent->bytes = bytes;
                }
                lent->device = device;
                lent->keep_alive = std::move(keep_alive);
            }
            lent->let_go(&stream, true);
            lent.reset();
        } else if (owned) {
            free_block(block, bytes, stream);
        }
        owned = false;
        keep_alive.reset();
        refuses_writes = false;
    }
};

/// The device side of a backend without a device (`NoDevice`): there is never a block, a borrow
/// or a holder, so the holding keeps only the flags the buffer reads, a few bytes where the one
/// above takes 48 (a host-only buffer is made by the million in an arena).
template <DeviceBackend Device>
requires(!Device::has_device) struct DeviceHolding<Device> {
    using stream_type = typename Device::stream_type;

    bool owned = false;
    int device = -1;
    bool refuses_writes = false;

    /// No device memory to keep: an empty handle.
    [[nodiscard]] std::shared_ptr<void> hold(const stream_type* = nullptr) const noexcept { return {}; }
    [[nodiscard]] bool owns(const void*, std::size_t, const void*, std::size_t) const noexcept { return false; }
    void release(void*, std::size_t, stream_type) noexcept {
        owned = false;
        refuses_writes = false;
    }
};

}  // namespace detail

SYNCBLOB_END_NAMESPACE
