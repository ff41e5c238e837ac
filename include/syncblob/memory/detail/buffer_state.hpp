// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The engine under `SyncedBuffer`: its members, and the slow path that carries out the transitions
/// of detail/transitions.hpp (allocating, copying between the sides, poisoning the stale side in
/// checking mode, checking the device). `SyncedBuffer` adds the public surface and nothing else.

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
#include "../transfer_stats.hpp"
#include "holding.hpp"
#include "stream_order.hpp"
#include "transitions.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace detail {

/// Members and slow path of `SyncedBuffer<HostAlloc, Device>` (its only user).
template <HostAllocator HostAlloc, DeviceBackend Device>
class BufferState {
protected:
    using stream_type = typename Device::stream_type;

    explicit BufferState(std::size_t bytes) noexcept : size_(bytes) {}
    BufferState(const BufferState&) = delete;
    BufferState& operator=(const BufferState&) = delete;
    ~BufferState() = default;

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

    // The slow path of an access to a whole side (the accessors' calls stay as short as they were).
    SYNCBLOB_NOINLINE void* access(std::string_view op, Access a) const { return access(op, a, 0); }

    // The slow path of a read, write or overwrite of side `a.side`: every access that changes
    // something, as transition says. Holds the mutex; on any exception the head is unchanged
    // (allocation happens before the head moves). The stale side is poisoned only after the new
    // head is published, so a failing poison cannot leave a fresh side garbled under a head that
    // still names it fresh. `written`: for a write, the leading bytes the caller overwrites at
    // once; the copy or zero-fill the write needs covers only the bytes after them.
    SYNCBLOB_NOINLINE void* access(std::string_view op, Access a, std::size_t written) const {
        const bool to_host = a.side == Side::host;
        if (!to_host) {
            require_device(op);
        }
        std::lock_guard lock(mutex_);
        if (writes(a) && (host_holding_.refuses_writes || device_holding_.refuses_writes)) {
            throw StateError(std::string(op) +
                             ": the buffer holds read-only memory that refuses writes (a read-only import); "
                             "copy it (Blob::clone) or import it copy-on-write");
        }
        if (to_host) {
            wait_host_unlocked();
        } else {
            pending_.order_own_stream(stream_);
            check_device_id(op);
        }
        const auto [step, next] = transition(a, head());
        switch (step) {
            case Step::none:
                break;
            case Step::allocate_zeroed:
                ensure(a.side, Contents::zeros, written);
                break;
            case Step::copy_from_other_side:
                to_host ? pull(op, written) : push(written);
                break;
            case Step::make_writable:
                ensure(a.side, Contents::kept, written);
                break;
            case Step::allocate_for_overwrite:
                ensure(a.side, Contents::unspecified);
                break;
            case Step::copy_async:  // prefetches only (prefetch below)
            case Step::refuse:
                break;
        }
        publish(next);
        if (writes(a)) {
            make_stale(other_side(a.side));
        }
        if (to_host) {
            note_host_access(writes(a), op);
        }
        return to_host ? host_ : device_;
    }

    // push_to_device_async (`to` the device) and pull_to_host_async (`to` the host): an
    // asynchronous copy of the fresh side into side `to` on `stream`, as transition says, tracked
    // by an event; the host does not wait.
    void prefetch(std::string_view op, Side to, stream_type stream) const {
        require_device(op);
        std::lock_guard lock(mutex_);
        const Head h = head();
        const auto [step, next] = transition({to, Want::prefetch}, h);
        if (step == Step::refuse) {
            throw StateError(std::string(op) + ": needs fresh " + (to == Side::device ? "host" : "device") +
                             " data, but the head is " + std::string(head_name(h)));
        }
        if (step == Step::none) {
            return;
        }
        check_device_id(op);
        ensure(to, Contents::unspecified);
        // A push: no copy is pending (every way to at_host, a host access or set_host_data, waited
        // for it), but the device block may still be in use by work on the buffer's stream. A pull:
        // the copy reads what kernels on the buffer's stream write, and writes the host block an
        // earlier asynchronous copy may still read; that copy is covered too, since the head reached
        // at_device through a device access, which made the buffer's stream wait for it, and a point
        // recorded after a wait is reached only once the waited work has run. Either way `stream`
        // waits for the buffer's stream (the host does not).
        detail::order_after<Device>(stream_, stream);
        if (size_ != 0) {
            const bool up = to == Side::device;
            Device::copy_async(side_ptr(to), side_ptr(other_side(to)), size_,
                               up ? CopyKind::host_to_device : CopyKind::device_to_host, stream);
            up ? count(stats_.host_to_device, stats_.host_to_device_bytes)
               : count(stats_.device_to_host, stats_.device_to_host_bytes);
        }
        pending_.issued(Device::record(stream));
        publish(next);
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
    mutable void* host_ = nullptr;
    mutable void* device_ = nullptr;
    mutable std::atomic<std::uint64_t> host_kernels_{0};
    mutable std::atomic<std::uint64_t> device_kernels_{0};
    // The rest.
    std::size_t size_;
    mutable HostHolding<HostAlloc> host_holding_;
    mutable DeviceHolding<Device> device_holding_;
    mutable std::mutex mutex_;
    mutable PendingCopy<Device> pending_;
    stream_type stream_ = Device::default_stream();
    mutable TransferStats stats_{};  // kernel counts live in host_kernels_ and device_kernels_
    unsigned char poison_byte_ = 0xFF;
};

}  // namespace detail

SYNCBLOB_END_NAMESPACE
