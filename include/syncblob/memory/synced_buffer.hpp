// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// `SyncedBuffer`: bytes mirrored between host and device memory, copied lazily.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "../core/error.hpp"
#include "device_backend.hpp"
#include "fwd.hpp"
#include "host_allocator.hpp"
#include "transfer_stats.hpp"

SYNCBLOB_BEGIN_NAMESPACE

/// Where the fresh copy of a buffer's bytes is.
enum class Head : std::uint8_t {
    uninitialized,  ///< nothing allocated yet
    at_host,        ///< the host copy is fresh, the device copy (if any) stale
    at_device,      ///< the device copy is fresh, the host copy (if any) stale
    synced,         ///< both copies hold the same bytes
};

/// "uninitialized", "at_host", "at_device" or "synced".
[[nodiscard]] constexpr std::string_view head_name(Head h) noexcept {
    switch (h) {
        case Head::uninitialized:
            return "uninitialized";
        case Head::at_host:
            return "at_host";
        case Head::at_device:
            return "at_device";
        case Head::synced:
            return "synced";
    }
    return "?";
}

/// How memory handed to `set_host_data` / `set_device_data` is borrowed.
struct Borrow {
    /// Held as long as the buffer uses the memory (a memory mapping, a foreign tensor…).
    std::shared_ptr<void> keep_alive{};
    /// Never write the memory: the first mutable access copies it into owned memory first.
    bool read_only = false;
};

/// `size` bytes that may live on the host, on the device, or both, copied only when the side
/// asked for is stale. See docs/guide.md for the state table.
///
/// Const access (`host_data`, `device_data`) is thread-safe: the first caller copies, the others
/// wait and copy nothing, and once fresh the access is one atomic load. Mutable access from
/// several threads at once is a data race, as with standard containers. Not copyable or movable
/// (share it through `std::shared_ptr`, as `Blob` does).
template <HostAllocator HostAlloc, DeviceBackend Device>
class SyncedBuffer {
public:
    using host_allocator = HostAlloc;
    using device_backend = Device;
    using stream_type = typename Device::stream_type;

    /// A buffer of `bytes` bytes. Nothing is allocated before the first access.
    explicit SyncedBuffer(std::size_t bytes = 0) noexcept : size_(bytes) {}

    SyncedBuffer(const SyncedBuffer&) = delete;
    SyncedBuffer& operator=(const SyncedBuffer&) = delete;

    /// Waits for a pending asynchronous copy, then frees what the buffer owns (never what it borrowed).
    ~SyncedBuffer() {
        try {
            wait_host_unlocked();
        } catch (...) {  // a failing device cannot be waited on; the memory is freed all the same
        }
        release_host();
        release_device();
    }

    [[nodiscard]] std::size_t size() const noexcept { return size_; }

    /// Where the fresh copy is.
    [[nodiscard]] Head head() const noexcept {
        return static_cast<Head>(state_.load(std::memory_order_acquire) & head_mask);
    }

    /// True while an asynchronous copy issued by `push_to_device_async` / `pull_to_host_async` has not been waited on.
    [[nodiscard]] bool async_pending() const noexcept {
        return (state_.load(std::memory_order_acquire) & pending_bit) != 0;
    }

    /// Fresh host bytes for reading (allocates and zero-fills on first access, copies D→H when stale).
    [[nodiscard]] SYNCBLOB_ALWAYS_INLINE const void* host_data() const {
        if (const void* p = host_data_if_fresh()) {
            return p;
        }
        return access("SyncedBuffer::host_data", Access::host_read);
    }

    /// Fresh host bytes for writing; the device copy becomes stale.
    [[nodiscard]] SYNCBLOB_ALWAYS_INLINE void* mutable_host_data() {
        if (void* p = mutable_host_data_if_fresh()) {
            return p;
        }
        return access("SyncedBuffer::mutable_host_data", Access::host_write);
    }

    /// The host bytes if reading them needs nothing done first (head at the host or synced, no
    /// copy pending, memory allocated), else null. Never allocates, copies, locks or throws: the
    /// first step of `host_data()`, for callers with a cheaper way round the other cases.
    [[nodiscard]] SYNCBLOB_ALWAYS_INLINE const void* host_data_if_fresh() const noexcept {
        const auto s = state_.load(std::memory_order_acquire);
        return s == state_of(Head::at_host) || s == state_of(Head::synced) ? host_ : nullptr;
    }

    /// The host bytes if writing them needs nothing done first (head at the host, no copy pending,
    /// writable memory allocated), else null; the state is left as it is. As `host_data_if_fresh`,
    /// the first step of `mutable_host_data()`.
    [[nodiscard]] SYNCBLOB_ALWAYS_INLINE void* mutable_host_data_if_fresh() noexcept {
        return state_.load(std::memory_order_acquire) == state_of(Head::at_host) && !host_read_only_ ? host_ : nullptr;
    }

    /// Host bytes about to be overwritten whole: no zero-fill and no copy; contents unspecified.
    [[nodiscard]] void* mutable_host_data_for_overwrite() {
        return access("SyncedBuffer::mutable_host_data_for_overwrite", Access::host_overwrite);
    }
    /// The first `bytes` host bytes are about to be overwritten: the whole buffer as above; a prefix
    /// through `mutable_host_data()`, so the rest keeps valid contents (zeros when new).
    [[nodiscard]] void* mutable_host_data_for_overwrite(std::size_t bytes) {
        return bytes >= size_ ? mutable_host_data_for_overwrite() : mutable_host_data();
    }

    /// Fresh device bytes for reading (allocates and zero-fills on first access, copies H→D when stale).
    [[nodiscard]] SYNCBLOB_ALWAYS_INLINE const void* device_data() const {
        const auto s = state_.load(std::memory_order_acquire);
        if (s == state_of(Head::at_device) || s == state_of(Head::synced)) {
            return device_;
        }
        return access("SyncedBuffer::device_data", Access::device_read);
    }

    /// Fresh device bytes for writing; the host copy becomes stale.
    [[nodiscard]] SYNCBLOB_ALWAYS_INLINE void* mutable_device_data() {
        if (state_.load(std::memory_order_acquire) == state_of(Head::at_device) && !device_read_only_) {
            return device_;
        }
        return access("SyncedBuffer::mutable_device_data", Access::device_write);
    }

    /// Device bytes about to be overwritten whole: no zero-fill and no copy; contents unspecified.
    [[nodiscard]] void* mutable_device_data_for_overwrite() {
        return access("SyncedBuffer::mutable_device_data_for_overwrite", Access::device_overwrite);
    }
    /// The first `bytes` device bytes are about to be overwritten (see the host overload).
    [[nodiscard]] void* mutable_device_data_for_overwrite(std::size_t bytes) {
        return bytes >= size_ ? mutable_device_data_for_overwrite() : mutable_device_data();
    }

    /// Uses `data` (at least `bytes` ≥ size() bytes) as the host side, without copying; it is never
    /// freed by the buffer. Frees an owned host block. Head → at_host.
    /// \throws ShapeError when `bytes` < size() or `data` is null for a non-empty buffer;
    /// StateError when `data` is the buffer's own host block (nothing changes).
    void set_host_data(void* data, std::size_t bytes, Borrow borrow = {}) {
        check_borrow("SyncedBuffer::set_host_data", data, bytes);
        std::lock_guard lock(mutex_);
        if (owns_unlocked(data)) {  // freeing it would leave the borrow dangling
            throw StateError("SyncedBuffer::set_host_data: cannot borrow memory of the buffer's own blocks");
        }
        wait_host_unlocked();
        release_host();
        host_ = data;
        host_read_only_ = borrow.read_only;
        host_keep_alive_ = std::move(borrow.keep_alive);
        publish(Head::at_host);
        make_stale(Side::device);
    }

    /// Read-only borrow of host memory: never written; the first mutable access copies it first.
    void set_host_data(const void* data, std::size_t bytes, std::shared_ptr<void> keep_alive = {}) {
        set_host_data(const_cast<void*>(data), bytes, Borrow{std::move(keep_alive), true});
    }

    /// Uses device memory `data` as the device side, without copying; never freed by the buffer.
    /// Frees an owned device block. Head → at_device.
    /// \throws ShapeError as set_host_data; StateError when `data` is the buffer's own device block.
    void set_device_data(void* data, std::size_t bytes, Borrow borrow = {}) {
        require_device("SyncedBuffer::set_device_data");
        check_borrow("SyncedBuffer::set_device_data", data, bytes);
        const int id = Device::device_of(data);  // the pointer's own device, not whichever is current
        std::lock_guard lock(mutex_);
        if (owns_unlocked(data)) {
            throw StateError("SyncedBuffer::set_device_data: cannot borrow memory of the buffer's own blocks");
        }
        wait_host_unlocked();
        release_device();
        device_ = data;
        device_id_ = id;
        device_read_only_ = borrow.read_only;
        device_keep_alive_ = std::move(borrow.keep_alive);
        publish(Head::at_device);
        make_stale(Side::host);
    }

    /// Issues an H→D copy on `stream` and returns without waiting. at_host → synced; synced: nothing.
    /// A later host access blocks on the copy; a later device access makes the buffer's stream wait.
    /// \throws StateError from uninitialized or at_device.
    void push_to_device_async(stream_type stream) {
        require_device("SyncedBuffer::push_to_device_async");
        std::lock_guard lock(mutex_);
        const Head h = head();
        if (h == Head::synced) {
            return;
        }
        if (h != Head::at_host) {
            throw StateError("SyncedBuffer::push_to_device_async: needs fresh host data, but the head is " +
                             std::string(head_name(h)));
        }
        wait_host_unlocked();
        check_device_id("SyncedBuffer::push_to_device_async");
        ensure_device(false, false);
        order_after_own_stream(stream);  // the device block may still be in use by work on the buffer's stream
        if (size_ != 0) {
            Device::copy_async(device_, host_, size_, CopyKind::host_to_device, stream);
            count(stats_.host_to_device, stats_.host_to_device_bytes);
        }
        set_pending(Device::record(stream));
        publish(Head::synced);
    }
    void push_to_device_async() { push_to_device_async(stream_); }

    /// Issues a D→H copy on `stream` and returns without waiting. at_device → synced; at_host, synced: nothing.
    /// \throws StateError from uninitialized.
    void pull_to_host_async(stream_type stream) {
        require_device("SyncedBuffer::pull_to_host_async");
        std::lock_guard lock(mutex_);
        const Head h = head();
        if (h == Head::at_host || h == Head::synced) {
            return;
        }
        if (h != Head::at_device) {
            throw StateError("SyncedBuffer::pull_to_host_async: needs fresh device data, but the head is " +
                             std::string(head_name(h)));
        }
        check_device_id("SyncedBuffer::pull_to_host_async");
        ensure_host(false, false);
        // The copy reads what kernels on the buffer's stream write, and writes the host block an
        // earlier asynchronous copy may still read: its stream waits for both (the host does not).
        order_after_own_stream(stream);
        if (pending_host_ || pending_device_) {
            Device::stream_wait(stream, *event_);
        }
        if (size_ != 0) {
            Device::copy_async(host_, device_, size_, CopyKind::device_to_host, stream);
            count(stats_.device_to_host, stats_.device_to_host_bytes);
        }
        set_pending(Device::record(stream));
        publish(Head::synced);
    }
    void pull_to_host_async() { pull_to_host_async(stream_); }

    /// Copies the fresh bytes of `source` (same size) into this buffer: device to device when the
    /// source is fresh on the device and both use the same backend, on the host otherwise.
    /// \throws ShapeError on a size mismatch (nothing changes).
    template <HostAllocator H2, DeviceBackend D2>
    void copy_from(const SyncedBuffer<H2, D2>& source) {
        if (source.size() != size_) {
            throw ShapeError("SyncedBuffer::copy_from: source holds " + std::to_string(source.size()) +
                             " bytes, target " + std::to_string(size_));
        }
        copy_from(source, size_);
    }

    /// Copies the first `bytes` fresh bytes of `source` into the start of this buffer, on the side
    /// where the source is fresh (as above). The rest of this buffer keeps its contents (zeros for
    /// a side allocated by this call); to keep them, a partial copy onto a stale side first brings
    /// that side up to date, a copy `stats()` counts.
    /// \throws ShapeError when `bytes` exceeds either size (nothing changes).
    template <HostAllocator H2, DeviceBackend D2>
    void copy_from(const SyncedBuffer<H2, D2>& source, std::size_t bytes) {
        if (bytes > source.size() || bytes > size_) {
            throw ShapeError("SyncedBuffer::copy_from: " + std::to_string(bytes) + " bytes asked, source holds " +
                             std::to_string(source.size()) + ", target " + std::to_string(size_));
        }
        if (static_cast<const void*>(&source) == static_cast<const void*>(this)) {
            return;
        }
        const Head h = source.head();
        if constexpr (std::same_as<D2, Device> && Device::has_device) {
            if (h == Head::at_device || h == Head::synced) {
                const void* src = source.device_data();
                void* dst = mutable_device_data_for_overwrite(bytes);
                if (bytes != 0) {
                    if (source.stream() != stream_) {  // the copy reads what work on the source's stream writes
                        auto written = Device::record(source.stream());
                        Device::stream_wait(stream_, written);
                    }
                    Device::copy(dst, src, bytes, CopyKind::device_to_device, stream_);
                    std::lock_guard lock(mutex_);
                    ++stats_.device_to_device;
                    stats_.device_to_device_bytes += bytes;
                }
                return;
            }
        }
        const void* src = source.host_data();
        void* dst = mutable_host_data_for_overwrite(bytes);
        if (bytes != 0) {
            std::memcpy(dst, src, bytes);
            std::lock_guard lock(mutex_);
            ++stats_.host_to_host;
            stats_.host_to_host_bytes += bytes;
        }
    }

    /// The stream synchronous copies run on (the default stream unless set).
    [[nodiscard]] stream_type stream() const noexcept { return stream_; }
    void set_stream(stream_type stream) noexcept { stream_ = stream; }

    /// Allocations and copies since construction or the last `reset_stats()`.
    [[nodiscard]] TransferStats stats() const {
        std::lock_guard lock(mutex_);
        TransferStats s = stats_;
        s.host_kernels = host_kernels_.load(std::memory_order_relaxed);
        s.device_kernels = device_kernels_.load(std::memory_order_relaxed);
        return s;
    }
    void reset_stats() {
        std::lock_guard lock(mutex_);
        stats_ = {};
        host_kernels_.store(0, std::memory_order_relaxed);
        device_kernels_.store(0, std::memory_order_relaxed);
    }

    /// Records that a math kernel ran on the host (`on_device == false`) or the device. Neither the
    /// buffer's lock nor an atomic increment: a locked read-modify-write waits for the stores before
    /// it, and in front of a host `scale` it added about a third to 1024 floats and doubled 256. A
    /// relaxed load and store costs less, though not nothing: in the native benchmark build, before
    /// the hot members shared a cache line, `scale` of 1024 floats ran at 0.88 of the probe with it
    /// and 0.94 without (docs/benchmarks.md). Math calls racing on one buffer from several threads
    /// may therefore count fewer kernels than ran; allocations and copies are counted under the
    /// lock, exactly.
    SYNCBLOB_ALWAYS_INLINE void record_kernel(bool on_device) const noexcept {
        auto& count = on_device ? device_kernels_ : host_kernels_;
        count.store(count.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }

    /// The byte written over a stale side in checking mode (0xFF; element types with invalid
    /// bit patterns, such as bool, choose a valid one).
    void set_poison_byte(unsigned char byte) noexcept { poison_byte_ = byte; }

    /// The device the device block lives on, or -1 when there is none.
    /// (Locks: a concurrent const access may be allocating the device block.)
    [[nodiscard]] int device_id() const {
        std::lock_guard lock(mutex_);
        return device_ == nullptr ? -1 : device_id_;
    }

    /// True when `p` points into memory the buffer owns (its host block, or its device block), which
    /// the buffer frees when it lets go of it: such memory cannot be lent to another buffer safely.
    [[nodiscard]] bool owns(const void* p) const {
        std::lock_guard lock(mutex_);
        return owns_unlocked(p);
    }

    /// True when the host side is memory the buffer does not own.
    [[nodiscard]] bool host_borrowed() const {
        std::lock_guard lock(mutex_);
        return host_ != nullptr && !host_block_.data;
    }

private:
    enum class Access : std::uint8_t {
        host_read,
        host_write,
        host_overwrite,
        device_read,
        device_write,
        device_overwrite
    };
    enum class Side : std::uint8_t { host, device };

    static constexpr std::uint8_t head_mask = 0x3;
    static constexpr std::uint8_t pending_bit = 0x4;
    static constexpr std::uint8_t state_of(Head h) noexcept { return static_cast<std::uint8_t>(h); }

    // The slow path: every access that changes something. Holds the mutex; on any exception the
    // head is unchanged (allocation happens before the head moves). The stale side is poisoned
    // only after the new head is published, so a failing poison cannot leave a fresh side garbled
    // under a head that still names it fresh.
    SYNCBLOB_NOINLINE void* access(std::string_view op, Access a) const {
        const bool to_host = a == Access::host_read || a == Access::host_write || a == Access::host_overwrite;
        if (!to_host) {
            require_device(op);
        }
        std::lock_guard lock(mutex_);
        if (to_host) {
            wait_host_unlocked();
        } else {
            wait_device_unlocked();
        }
        const Head h = head();
        switch (a) {
            case Access::host_read:
                if (h == Head::uninitialized) {
                    ensure_host(true, false);
                    publish(Head::at_host);
                } else if (h == Head::at_device) {
                    pull(op);
                    publish(Head::synced);
                }
                return host_;
            case Access::host_write:
                if (h == Head::uninitialized) {
                    ensure_host(true, false);
                } else if (h == Head::at_device) {
                    pull(op);
                } else {
                    ensure_host(false, true);  // copy on write of a read-only borrow
                }
                publish(Head::at_host);
                make_stale(Side::device);
                return host_;
            case Access::host_overwrite:
                ensure_host(false, false);
                publish(Head::at_host);
                make_stale(Side::device);
                return host_;
            case Access::device_read:
                if (h == Head::uninitialized) {
                    ensure_device(true, false);
                    publish(Head::at_device);
                } else if (h == Head::at_host) {
                    push(op);
                    publish(Head::synced);
                } else {
                    check_device_id(op);
                }
                return device_;
            case Access::device_write:
                if (h == Head::uninitialized) {
                    ensure_device(true, false);
                } else if (h == Head::at_host) {
                    push(op);
                } else {
                    check_device_id(op);
                    ensure_device(false, true);
                }
                publish(Head::at_device);
                make_stale(Side::host);
                return device_;
            case Access::device_overwrite:
                check_device_id(op);
                ensure_device(false, false);
                publish(Head::at_device);
                make_stale(Side::host);
                return device_;
        }
        return nullptr;
    }

    // H→D into a writable device block (allocated if needed, without zero-fill).
    void push(std::string_view op) const {
        check_device_id(op);
        ensure_device(false, false);
        if (size_ != 0) {
            Device::copy(device_, host_, size_, CopyKind::host_to_device, stream_);
            count(stats_.host_to_device, stats_.host_to_device_bytes);
        }
    }

    // D→H into a writable host block (allocated if needed, without zero-fill).
    void pull(std::string_view op) const {
        check_device_id(op);
        ensure_host(false, false);
        if (size_ != 0) {
            Device::copy(host_, device_, size_, CopyKind::device_to_host, stream_);
            count(stats_.device_to_host, stats_.device_to_host_bytes);
        }
    }

    // Makes the host side an owned, writable block: allocates when there is none or when it is a
    // read-only borrow (copying the borrowed bytes when `preserve`), zero-filling a new block when `zero`.
    void ensure_host(bool zero, bool preserve) const {
        if (size_ == 0 || (host_ != nullptr && !host_read_only_)) {
            return;
        }
        HostBlock block = HostAlloc::allocate(size_);
        ++stats_.host_allocations;
        if (host_ != nullptr && preserve) {
            std::memcpy(block.data, host_, size_);
            count(stats_.host_to_host, stats_.host_to_host_bytes);
        } else if (zero) {
            std::memset(block.data, 0, size_);
        }
        release_host();
        host_block_ = block;
        host_ = block.data;
    }

    // The device counterpart of ensure_host.
    void ensure_device(bool zero, bool preserve) const {
        if (size_ == 0 || (device_ != nullptr && !device_read_only_)) {
            return;
        }
        void* block = Device::allocate(size_);
        try {
            if (device_ != nullptr && preserve) {
                Device::copy(block, device_, size_, CopyKind::device_to_device, stream_);
                count(stats_.device_to_device, stats_.device_to_device_bytes);
            } else if (zero) {
                Device::fill(block, 0, size_, stream_);
            }
        } catch (...) {
            Device::deallocate(block, size_);
            throw;
        }
        ++stats_.device_allocations;
        release_device();
        device_ = block;
        device_owned_ = true;
        device_id_ = Device::current_device();
    }

    void release_host() const noexcept {
        if (host_block_.data != nullptr) {
            HostAlloc::deallocate(host_block_);
        }
        host_block_ = {};
        host_ = nullptr;
        host_read_only_ = false;
        host_keep_alive_.reset();
    }

    // Frees an owned device block after the work issued on the buffer's stream (kernels, copies)
    // is done with it: a stream-ordered or caching allocator would otherwise hand the block out
    // again while a kernel still reads it (cudaFree only hides this by synchronising the device).
    void release_device() const noexcept {
        if (device_owned_) {
            try {
                auto done = Device::record(stream_);
                Device::wait(done);
            } catch (...) {  // a failing device cannot be waited on; the block is freed all the same
            }
            Device::deallocate(device_, size_);
        }
        device_ = nullptr;
        device_owned_ = false;
        device_read_only_ = false;
        device_keep_alive_.reset();
    }

    // In checking mode, overwrite the side that just became stale (owned memory only).
    void make_stale(Side side) const {
        if constexpr (Device::has_device) {
            if (size_ == 0 || !Device::poisons_stale_side()) {
                return;
            }
            if (side == Side::host && host_block_.data != nullptr) {
                wait_host_unlocked();  // an issued copy may still read or write the host block
                std::memset(host_, poison_byte_, size_);
            } else if (side == Side::device && device_owned_) {
                Device::fill(device_, poison_byte_, size_, stream_);
            }
        }
    }

    void check_device_id(std::string_view op) const {
        if constexpr (Device::has_device) {
            if (device_ != nullptr) {
                const int current = Device::current_device();
                if (current != device_id_) {
                    throw DeviceError(std::string(op) + ": the device block lives on device " +
                                      std::to_string(device_id_) + " but device " + std::to_string(current) +
                                      " is current");
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

    bool owns_unlocked(const void* p) const noexcept {
        const auto within = [p](const void* begin, std::size_t bytes) {
            const auto* b = static_cast<const std::byte*>(begin);
            const auto* q = static_cast<const std::byte*>(p);
            return b != nullptr && q != nullptr && std::less_equal<>{}(b, q) && std::less<>{}(q, b + bytes);
        };
        return within(host_block_.data, size_) || (device_owned_ && within(device_, size_));
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

    void count(std::uint64_t& copies, std::uint64_t& bytes) const noexcept {
        ++copies;
        bytes += size_;
    }

    void set_pending(typename Device::event_type event) const {
        event_ = std::move(event);
        pending_host_ = pending_device_ = true;
    }

    // The host blocks until a pending asynchronous copy has finished.
    void wait_host_unlocked() const {
        if (pending_host_) {
            Device::wait(*event_);
            pending_host_ = pending_device_ = false;
            event_.reset();
            publish(head());
        }
    }

    // Work issued next on `stream` runs after what was issued on the buffer's own stream.
    void order_after_own_stream(stream_type stream) const {
        if (stream != stream_) {
            auto issued = Device::record(stream_);
            Device::stream_wait(stream, issued);
        }
    }

    // The buffer's stream waits for a pending copy; the host does not (it still waits before its next access).
    void wait_device_unlocked() const {
        if (pending_device_) {
            Device::stream_wait(stream_, *event_);
            pending_device_ = false;
        }
    }

    // Stores the head (and the pending bit) with release order, after every other member is written.
    void publish(Head h) const noexcept {
        const auto pending = static_cast<std::uint8_t>(pending_host_ || pending_device_ ? pending_bit : 0);
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
    mutable HostBlock host_block_{};  // owned host memory; empty when the host side is borrowed or absent
    mutable std::shared_ptr<void> host_keep_alive_;
    mutable bool device_owned_ = false;
    mutable int device_id_ = -1;
    mutable std::shared_ptr<void> device_keep_alive_;
    mutable std::mutex mutex_;
    mutable std::optional<typename Device::event_type> event_;
    mutable bool pending_host_ = false;
    mutable bool pending_device_ = false;
    stream_type stream_ = Device::default_stream();
    mutable TransferStats stats_{};  // kernel counts live in host_kernels_ and device_kernels_
    unsigned char poison_byte_ = 0xFF;
};

SYNCBLOB_END_NAMESPACE
