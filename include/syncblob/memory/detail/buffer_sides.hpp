// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The members of `SyncedBuffer` and the mechanics of its two sides: allocating a side's block
/// (zero-filled, copied from a read-only borrow, or left unspecified), copying between the sides,
/// poisoning the stale side in checking mode, releasing a side, checking the device, and
/// publishing the head. What an access does with them is detail/buffer_state.hpp's.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>

#include "../../core/error.hpp"
#include "../device_backend.hpp"
#include "../head.hpp"
#include "../host_allocator.hpp"
#include "../stream_order.hpp"
#include "../transfer_stats.hpp"
#include "holding.hpp"
#include "small_mutex.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace detail {

/// Members and side mechanics of `SyncedBuffer<HostAlloc, Device>`, under `BufferState`.
template <HostAllocator HostAlloc, DeviceBackend Device>
class BufferSides {
protected:
    explicit BufferSides(std::size_t bytes) noexcept : size_(bytes) {}
    BufferSides(const BufferSides&) = delete;
    BufferSides& operator=(const BufferSides&) = delete;
    ~BufferSides() = default;

    using stream_type = typename Device::stream_type;

    static constexpr std::uint8_t head_mask = 0x3;
    static constexpr std::uint8_t pending_bit = 0x4;
    static constexpr std::uint8_t state_of(Head h) noexcept { return static_cast<std::uint8_t>(h); }

    [[nodiscard]] Head head() const noexcept {
        return static_cast<Head>(state_.load(std::memory_order_acquire) & head_mask);
    }

    /// What a side's new owned block holds from its byte `from` on (the bytes before it are about
    /// to be overwritten by the caller).
    enum class Contents : std::uint8_t {
        unspecified,  ///< whatever the allocator returned (the caller writes it, or a copy fills it)
        zeros,        ///< zero-filled: the first touch of a side
        kept,         ///< the bytes of the read-only borrow the block replaces (copy on write)
    };

    // Page-locks `data` (size_ bytes) for the backend; true when this call did it (so the buffer
    // unregisters it), false when the backend has no registration or the memory already was.
    bool register_host(void* data) const {
        if constexpr (requires { Device::register_host(data, size_); }) {
            return size_ != 0 && Device::register_host(data, size_);
        } else {
            return false;
        }
    }
    static void unregister_host(void* data) noexcept {
        if constexpr (requires { Device::unregister_host(data); }) {
            Device::unregister_host(data);
        }
    }

    // Tells a backend that checks the host's accesses (SimulatedDevice) that the host is about to
    // read or write the host side through its pointer: queued device work that still uses that
    // memory is then a race it reports.
    SYNCBLOB_ALWAYS_INLINE void note_host_access(bool write, std::string_view who) const noexcept {
        if constexpr (requires { Device::host_access(host_, size_, write, who.data()); }) {
            if (host_ != nullptr) {
                Device::host_access(host_, size_, write, who.data());
            }
        }
    }

    // The pointer of side `s`.
    [[nodiscard]] void* side_ptr(Side s) const noexcept { return s == Side::host ? host_ : device_; }

    // Byte `offset` of `p`.
    [[nodiscard]] static void* at(void* p, std::size_t offset) noexcept { return static_cast<std::byte*>(p) + offset; }

    // H→D of the bytes from `from` on into a writable device block (allocated if needed, without zero-fill).
    void push(std::size_t from = 0) const {
        ensure(Side::device, Contents::unspecified);
        if (from < size_) {
            Device::copy(at(device_, from), at(host_, from), size_ - from, CopyKind::host_to_device, stream_);
            count(stats_.host_to_device, stats_.host_to_device_bytes, size_ - from);
        }
    }

    // D→H of the bytes from `from` on into a writable host block (allocated if needed, without zero-fill).
    void pull(std::string_view op, std::size_t from = 0) const {
        check_device_id(op);
        ensure(Side::host, Contents::unspecified);
        if (from < size_) {
            Device::copy(at(host_, from), at(device_, from), size_ - from, CopyKind::device_to_host, stream_);
            count(stats_.device_to_host, stats_.device_to_host_bytes, size_ - from);
        }
    }

    // Makes side `s` an owned, writable block: allocates when there is none or when it is a
    // read-only borrow; the new block holds `contents` from byte `from` on.
    void ensure(Side s, Contents contents, std::size_t from = 0) const {
        s == Side::host ? ensure_host(contents, from) : ensure_device(contents, from);
    }

    void ensure_host(Contents contents, std::size_t from) const {
        if (size_ == 0 || (host_ != nullptr && !host_read_only_)) {
            return;
        }
        HostBlock block = HostAlloc::allocate(size_);
        ++stats_.host_allocations;
        if (host_ != nullptr && contents == Contents::kept) {
            if (from < size_) {
                note_host_access(false, "SyncedBuffer's copy on write of a read-only borrow");
                std::memcpy(at(block.data, from), at(host_, from), size_ - from);
                count(stats_.host_to_host, stats_.host_to_host_bytes, size_ - from);
            }
        } else if (contents == Contents::zeros && from < size_) {
            std::memset(at(block.data, from), 0, size_ - from);
        }
        host_holding_.adopt(block);
        host_ = block.data;
        host_read_only_ = false;
    }

    void ensure_device(Contents contents, std::size_t from) const {
        if (size_ == 0 || (device_ != nullptr && !device_read_only_)) {
            return;
        }
        void* block = allocate_device_block();
        try {
            if (device_ != nullptr && contents == Contents::kept) {
                if (from < size_) {
                    Device::copy(at(block, from), at(device_, from), size_ - from, CopyKind::device_to_device, stream_);
                    count(stats_.device_to_device, stats_.device_to_device_bytes, size_ - from);
                }
            } else if (contents == Contents::zeros && from < size_) {
                Device::fill(at(block, from), 0, size_ - from, stream_);
            }
        } catch (...) {
            if constexpr (StreamOrderedBackend<Device>) {  // the failed work was issued on stream_
                Device::deallocate_async(block, size_, stream_);
            } else {
                Device::deallocate(block, size_);
            }
            throw;
        }
        ++stats_.device_allocations;
        release_device();
        device_ = block;
        device_holding_.owned = true;
        device_holding_.device = Device::current_device();
    }

    // A device block of size_ bytes: on the buffer's stream when the backend allocates in stream order.
    void* allocate_device_block() const {
        if constexpr (StreamOrderedBackend<Device>) {
            return Device::allocate_async(size_, stream_);
        } else {
            return Device::allocate(size_);
        }
    }

    void release_host() const noexcept {
        if (host_holding_.owned.data != nullptr) {  // freeing it writes it, as far as queued work can tell
            note_host_access(true, "SyncedBuffer's release of its host block");
        }
        host_holding_.release();
        host_ = nullptr;
        host_read_only_ = false;
    }

    // Frees (or lets go of) the device side with its own device current: a stream-ordered free on
    // the default stream, or the wait before a plain free, belongs to that device's stream.
    void release_device() const noexcept {
        try {
            const DeviceGuard<Device> guard(device_ != nullptr ? device_holding_.device : -1);
            device_holding_.release(device_, size_, stream_);
        } catch (...) {  // its device cannot be made current: released from the current one
            device_holding_.release(device_, size_, stream_);
        }
        device_ = nullptr;
        device_read_only_ = false;
    }

    // In checking mode, overwrite the side that just became stale (owned memory only).
    void make_stale(Side side) const {
        if constexpr (Device::has_device) {
            if (size_ == 0 || !Device::poisons_stale_side()) {
                return;
            }
            if (side == Side::host && host_holding_.owned.data != nullptr) {
                wait_host_unlocked();  // an issued copy may still read or write the host block
                std::memset(host_, poison_byte_, size_);
            } else if (side == Side::device && device_holding_.owned) {
                Device::fill(device_, poison_byte_, size_, stream_);
            }
        }
    }

    void check_device_id(std::string_view op) const {
        if constexpr (Device::has_device) {
            if (device_ != nullptr) {
                const int current = Device::current_device();
                if (current != device_holding_.device) {
                    throw DeviceError(std::string(op) + ": the device block lives on device " +
                                      std::to_string(device_holding_.device) + " but device " +
                                      std::to_string(current) + " is current");
                }
            }
        }
    }

    static void require_device(std::string_view op) {
        if constexpr (!Device::has_device) {
            throw NoDeviceError(std::string(op) + ": this buffer is host-only (device backend " +
                                std::string(Device::name) + ")");
        }
    }

    // True when any of the `n` bytes at `p` lie in the host or device block the buffer owns.
    bool owns_unlocked(const void* p, std::size_t n) const noexcept {
        return host_holding_.owns(p, n, size_) || device_holding_.owns(p, n, device_, size_);
    }

    void check_borrow(std::string_view op, const void* data, std::size_t bytes) const {
        if (bytes < size_) {
            throw ShapeError(std::string(op) + ": borrowed " + std::to_string(bytes) + " bytes, the buffer holds " +
                             std::to_string(size_));
        }
        if (data == nullptr && size_ != 0) {
            throw ShapeError(std::string(op) + ": null pointer for a buffer of " + std::to_string(size_) + " bytes");
        }
    }

    // Counts a copy of `n` bytes (the whole buffer unless said otherwise).
    void count(std::uint64_t& copies, std::uint64_t& bytes) const noexcept { count(copies, bytes, size_); }
    static void count(std::uint64_t& copies, std::uint64_t& bytes, std::size_t n) noexcept {
        ++copies;
        bytes += n;
    }

    // The host blocks until a pending asynchronous copy has finished.
    void wait_host_unlocked() const {
        if (pending_.wait_host()) {
            publish(head());
        }
    }

    // Stores the head (and the pending bit) with release order, after every other member is written.
    void publish(Head h) const noexcept {
        const auto pending = static_cast<std::uint8_t>(pending_.any() ? pending_bit : 0);
        state_.store(static_cast<std::uint8_t>(state_of(h) | pending), std::memory_order_release);
    }

    // What a steady-state access and a math call touch, together in the first 40 bytes (one cache
    // line, or two when the object starts late in one).
    mutable std::atomic<std::uint8_t> state_{state_of(Head::uninitialized)};
    mutable bool host_read_only_ = false;
    mutable bool device_read_only_ = false;
    unsigned char poison_byte_ = 0xFF;  // (in the padding before the pointers)
    mutable void* host_ = nullptr;
    mutable void* device_ = nullptr;
    mutable std::atomic<std::uint64_t> host_kernels_{0};
    mutable std::atomic<std::uint64_t> device_kernels_{0};
    // The rest. A host-only buffer is 232 bytes in all: a `std::mutex`, a device holding of 48 bytes
    // and the kernel counts kept twice made it 328 (at a million arena blobs, 190 MB more to fault in).
    std::size_t size_;
    mutable HostHolding<HostAlloc> host_holding_;
    mutable DeviceHolding<Device> device_holding_;  // (a few bytes for a backend without a device)
    mutable SmallMutex mutex_;
    mutable PendingCopy<Device> pending_;
    [[no_unique_address]] stream_type stream_ = Device::default_stream();
    mutable CopyCounts stats_{};  // the kernel counts live in host_kernels_ and device_kernels_
};

}  // namespace detail

SYNCBLOB_END_NAMESPACE
