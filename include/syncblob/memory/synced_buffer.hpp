// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// `SyncedBuffer`: bytes mirrored between host and device memory, copied lazily.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "../core/error.hpp"
#include "detail/buffer_state.hpp"
#include "device_backend.hpp"
#include "fwd.hpp"
#include "head.hpp"
#include "host_allocator.hpp"
#include "transfer_stats.hpp"

SYNCBLOB_BEGIN_NAMESPACE

/// `size` bytes that may live on the host, on the device, or both, copied only when the side
/// asked for is stale. See docs/guide.md for the state table.
///
/// Const access (`host_data`, `device_data`) is thread-safe: the first caller copies, the others
/// wait and copy nothing, and once fresh the access is one atomic load. Mutable access from
/// several threads at once is a data race, as with standard containers. Not copyable or movable
/// (share it through `std::shared_ptr`, as `Blob` does).
template <HostAllocator HostAlloc, DeviceBackend Device>
class SyncedBuffer : private detail::BufferState<HostAlloc, Device> {
public:
    using host_allocator = HostAlloc;
    using device_backend = Device;
    using stream_type = typename Device::stream_type;

    /// A buffer of `bytes` bytes. Nothing is allocated before the first access.
    explicit SyncedBuffer(std::size_t bytes = 0) noexcept : detail::BufferState<HostAlloc, Device>(bytes) {}

    SyncedBuffer(const SyncedBuffer&) = delete;
    SyncedBuffer& operator=(const SyncedBuffer&) = delete;

    /// Frees what the buffer owns (never what it borrowed) once a pending asynchronous copy no longer
    /// needs it. Where the device backend frees in stream order and the host allocator takes blocks
    /// back on a stream (`StreamOrderedBackend`, `StreamAwareHostAllocator`: `cuda::PooledAllocator`),
    /// the buffer's stream waits for the copy and both blocks are given back on it: the host does
    /// not wait. Otherwise the host waits for the copy first.
    ~SyncedBuffer() {
        if constexpr (StreamOrderedBackend<Device> && StreamAwareHostAllocator<HostAlloc, Device>) {
            // Only a block of the buffer's own that nothing else holds: borrowed or lent memory
            // may be freed by others as soon as the buffer lets go of it.
            if (pending_.for_host() && host_holding_.owned.data != nullptr && !host_holding_.lent) {
                try {
                    // The waits, the free and the pool's event belong to the block's device's streams.
                    const DeviceGuard<Device> guard(device_ != nullptr ? device_holding_.device : -1);
                    pending_.order_own_stream(stream_);
                    host_holding_.template release_after<Device>(stream_);
                    release_device();
                    return;
                } catch (...) {  // the stream cannot wait: the host does, below
                }
            }
        }
        try {
            wait_host_unlocked();
        } catch (...) {  // a failing device cannot be waited on; the memory is freed all the same
        }
        release_host();
        release_device();
    }

    [[nodiscard]] std::size_t size() const noexcept { return size_; }

    /// Where the fresh copy is.
    [[nodiscard]] Head head() const noexcept { return Base::head(); }

    /// True while an asynchronous copy issued by `push_to_device_async` / `pull_to_host_async` has not been waited on.
    [[nodiscard]] bool async_pending() const noexcept {
        return (state_.load(std::memory_order_acquire) & pending_bit) != 0;
    }

    /// Fresh host bytes for reading (allocates and zero-fills on first access, copies D→H when stale).
    [[nodiscard]] SYNCBLOB_ALWAYS_INLINE const void* host_data() const {
        if (const void* p = host_data_if_fresh()) {
            return p;
        }
        return access("SyncedBuffer::host_data", {Side::host, Want::read});
    }

    /// Fresh host bytes for writing; the device copy becomes stale.
    [[nodiscard]] SYNCBLOB_ALWAYS_INLINE void* mutable_host_data() {
        if (void* p = mutable_host_data_if_fresh()) {
            return p;
        }
        return access("SyncedBuffer::mutable_host_data", {Side::host, Want::write});
    }

    /// The host bytes if reading them needs nothing done first (head at the host or synced, no
    /// copy pending, memory allocated), else null. Never allocates, copies, locks or throws: the
    /// first step of `host_data()`, for callers with a cheaper way round the other cases.
    [[nodiscard]] SYNCBLOB_ALWAYS_INLINE const void* host_data_if_fresh() const noexcept {
        const auto s = state_.load(std::memory_order_acquire);
        if (s == state_of(Head::at_host) || s == state_of(Head::synced)) {
            Base::note_host_access(false, "SyncedBuffer::host_data");
            return host_;
        }
        return nullptr;
    }

    /// The host bytes if writing them needs nothing done first (head at the host, no copy pending,
    /// writable memory allocated), else null; the state is left as it is. As `host_data_if_fresh`,
    /// the first step of `mutable_host_data()`.
    [[nodiscard]] SYNCBLOB_ALWAYS_INLINE void* mutable_host_data_if_fresh() noexcept {
        return host_if_writable("SyncedBuffer::mutable_host_data");
    }

    /// Host bytes about to be overwritten whole: no zero-fill and no copy from the device; contents
    /// unspecified. The device side becomes stale.
    [[nodiscard]] SYNCBLOB_ALWAYS_INLINE void* mutable_host_data_for_overwrite() {
        // At the host already: nothing to change, and no lock to take (at a million buffers, the
        // lock was most of a checkpoint load's pass over its blobs).
        if (void* p = host_if_writable("SyncedBuffer::mutable_host_data_for_overwrite")) {
            return p;
        }
        return access("SyncedBuffer::mutable_host_data_for_overwrite", {Side::host, Want::overwrite});
    }
    /// The first `bytes` host bytes are about to be overwritten: with `bytes` ≥ size() the whole
    /// buffer, as above. A prefix is a write that never copies nor zero-fills the prefix, while the
    /// rest keeps valid contents: on a stale host side the bytes after the prefix (and only those)
    /// are copied from the device, one D→H copy of size() − `bytes` bytes that `stats()` counts; a
    /// new host block gets zeros after the prefix.
    [[nodiscard]] void* mutable_host_data_for_overwrite(std::size_t bytes) {
        if (bytes >= size_) {
            return mutable_host_data_for_overwrite();
        }
        if (void* p = mutable_host_data_if_fresh()) {
            return p;
        }
        return access("SyncedBuffer::mutable_host_data_for_overwrite", {Side::host, Want::write}, bytes);
    }

    /// Fresh device bytes for reading (allocates and zero-fills on first access, copies H→D when stale).
    [[nodiscard]] SYNCBLOB_ALWAYS_INLINE const void* device_data() const {
        const auto s = state_.load(std::memory_order_acquire);
        if (s == state_of(Head::at_device) || s == state_of(Head::synced)) {
            return device_;
        }
        return access("SyncedBuffer::device_data", {Side::device, Want::read});
    }

    /// Fresh device bytes for writing; the host copy becomes stale.
    [[nodiscard]] SYNCBLOB_ALWAYS_INLINE void* mutable_device_data() {
        if (state_.load(std::memory_order_acquire) == state_of(Head::at_device) && !device_read_only_) {
            return device_;
        }
        return access("SyncedBuffer::mutable_device_data", {Side::device, Want::write});
    }

    /// Device bytes about to be overwritten whole: no zero-fill and no copy from the host; contents
    /// unspecified. The host side becomes stale.
    [[nodiscard]] void* mutable_device_data_for_overwrite() {
        return access("SyncedBuffer::mutable_device_data_for_overwrite", {Side::device, Want::overwrite});
    }
    /// The first `bytes` device bytes are about to be overwritten: the mirror image of the host
    /// overload (on a stale device side, one H→D copy of the bytes after the prefix).
    [[nodiscard]] void* mutable_device_data_for_overwrite(std::size_t bytes) {
        if (bytes >= size_) {
            return mutable_device_data_for_overwrite();
        }
        if (state_.load(std::memory_order_acquire) == state_of(Head::at_device) && !device_read_only_) {
            return device_;
        }
        return access("SyncedBuffer::mutable_device_data_for_overwrite", {Side::device, Want::write}, bytes);
    }

    /// Uses `data` (at least `bytes` ≥ size() bytes) as the host side, without copying; it is never
    /// freed by the buffer. Frees an owned host block. Head → at_host.
    /// \throws ShapeError when `bytes` < size() or `data` is null for a non-empty buffer;
    /// StateError when any of the size() bytes at `data` lie in a block the buffer owns, host or
    /// device, at any offset: freeing it would leave the borrow dangling (nothing changes).
    void set_host_data(void* data, std::size_t bytes, Borrow borrow = {}) {
        Base::borrow("SyncedBuffer::set_host_data", Side::host, data, bytes, std::move(borrow));
    }

    /// Read-only borrow of host memory: never written; the first mutable access copies it first.
    void set_host_data(const void* data, std::size_t bytes, std::shared_ptr<void> keep_alive = {}) {
        set_host_data(const_cast<void*>(data), bytes, Borrow{std::move(keep_alive), true});
    }

    /// Uses device memory `data` as the device side, without copying; never freed by the buffer.
    /// Frees an owned device block. Head → at_device.
    /// \throws ShapeError as set_host_data; StateError when the memory lies in a block the buffer
    /// owns, as set_host_data.
    void set_device_data(void* data, std::size_t bytes, Borrow borrow = {}) {
        Base::borrow("SyncedBuffer::set_device_data", Side::device, data, bytes, std::move(borrow));
    }

    /// Issues an H→D copy on `stream` and returns without waiting. at_host → synced; synced: nothing.
    /// A later host access blocks on the copy; a later device access makes the buffer's stream wait.
    /// \throws StateError from uninitialized or at_device.
    void push_to_device_async(stream_type stream) {
        Base::prefetch("SyncedBuffer::push_to_device_async", Side::device, stream);
    }
    void push_to_device_async() { push_to_device_async(stream_); }

    /// Issues a D→H copy on `stream` and returns without waiting. at_device → synced; at_host, synced: nothing.
    /// \throws StateError from uninitialized.
    void pull_to_host_async(stream_type stream) {
        Base::prefetch("SyncedBuffer::pull_to_host_async", Side::host, stream);
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
    /// the rest of that side up to date (`mutable_*_data_for_overwrite(bytes)`), a copy `stats()` counts.
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
    /// Makes `stream` the buffer's stream. When the buffer has a device block, `stream` first
    /// waits for the work issued on the old one (with the block's device current), whatever the
    /// backend: the copies the buffer issues next on `stream` read and write what that work
    /// touches, and the block is freed after `stream`'s work (in stream order, where the backend
    /// frees that way).
    /// \throws DeviceError when that wait cannot be issued (the stream is then unchanged).
    void set_stream(stream_type stream) {
        std::lock_guard lock(mutex_);
        if constexpr (Device::has_device) {
            if (device_ != nullptr) {
                const DeviceGuard<Device> guard(device_holding_.device);
                detail::order_after<Device>(stream_, stream);
            }
        }
        stream_ = stream;
    }

    /// Allocations and copies since construction or the last `reset_stats()`.
    [[nodiscard]] TransferStats stats() const {
        std::lock_guard lock(mutex_);
        return stats_.with_kernels(host_kernels_.load(std::memory_order_relaxed),
                                   device_kernels_.load(std::memory_order_relaxed));
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
        auto& kernels = on_device ? device_kernels_ : host_kernels_;
        kernels.store(kernels.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }

    /// The byte written over a stale side in checking mode (0xFF; element types with invalid
    /// bit patterns, such as bool, choose a valid one).
    void set_poison_byte(unsigned char byte) noexcept { poison_byte_ = byte; }

    /// The device the device block lives on, or -1 when there is none.
    /// (Locks: a concurrent const access may be allocating the device block.)
    [[nodiscard]] int device_id() const {
        std::lock_guard lock(mutex_);
        return device_ == nullptr ? -1 : device_holding_.device;
    }

    /// True when any of the `bytes` bytes at `p` (the byte at `p` when `bytes` is 0) lie in memory
    /// the buffer owns (its host block, or its device block, whole), which the buffer frees when it
    /// lets go of it: such memory cannot be lent to another buffer safely.
    [[nodiscard]] bool owns(const void* p, std::size_t bytes = 0) const {
        std::lock_guard lock(mutex_);
        return owns_unlocked(p, bytes);
    }

    /// True when the host side is memory the buffer does not own.
    [[nodiscard]] bool host_borrowed() const {
        std::lock_guard lock(mutex_);
        return host_ != nullptr && host_holding_.owned.data == nullptr;
    }

    /// True when the buffer holds memory lent with `Borrow::refuse_writes`: mutable access throws.
    [[nodiscard]] bool refuses_writes() const {
        std::lock_guard lock(mutex_);
        return host_holding_.refuses_writes || device_holding_.refuses_writes;
    }

    /// Keeps the memory the host side uses now valid while the returned handle lives, even when the
    /// buffer lets go of it meanwhile (`set_host_data`, a copy on write of a read-only borrow): the
    /// buffer then hands its block (or the borrow's keep-alive) to the handle, freed with the last
    /// copy of it. For memory lent to another library while the buffer goes on (DLPack export).
    [[nodiscard]] std::shared_ptr<void> hold_host() const {
        std::lock_guard lock(mutex_);
        return host_holding_.hold();
    }
    /// The device counterpart of `hold_host` (`set_device_data`, a copy on write of the device side).
    /// The holder may use the memory from any stream: when the buffer lets go of an owned block
    /// first, the host waits for the buffer's stream, and the last holder frees the block with
    /// the backend's synchronous `deallocate` (for `cuda::AsyncPool`, a device-wide wait). A
    /// buffer whose backend has no device (`NoDevice`) has no device memory to keep: an empty handle.
    [[nodiscard]] std::shared_ptr<void> hold_device() const {
        std::lock_guard lock(mutex_);
        return device_holding_.hold();
    }
    /// As `hold_device()`, for a holder that uses the memory only from `stream` (a stream of the
    /// device the memory lives on) and lets go once its work there is issued. Whoever lets go
    /// last (the buffer or a holder) frees an owned block after the others' work: with a
    /// stream-ordered backend in stream order on its own stream, which first waits for the
    /// others' streams, so no host waits; with another backend the host waits for those streams
    /// before the free. When the memory also has a holder that named no stream, it is freed as
    /// `hold_device()` says.
    [[nodiscard]] std::shared_ptr<void> hold_device(stream_type stream) const {
        std::lock_guard lock(mutex_);
        return device_holding_.hold(&stream);
    }

private:
    using Base = detail::BufferState<HostAlloc, Device>;
    friend Base;
    // The engine: its slow path (detail/buffer_state.hpp) and members (detail/buffer_sides.hpp).
    using Base::access, Base::owns_unlocked, Base::release_device, Base::release_host, Base::state_of,
        Base::wait_host_unlocked;
    using Base::device_, Base::device_holding_, Base::device_kernels_, Base::device_read_only_, Base::host_,
        Base::host_holding_, Base::host_kernels_, Base::host_read_only_, Base::mutex_, Base::pending_,
        Base::poison_byte_, Base::size_, Base::state_, Base::stats_, Base::stream_;
    using Base::pending_bit;
    using Want = detail::Want;

    // The host bytes if a write needs nothing done first (head at the host, no copy pending,
    // writable memory allocated), else null; `who` names the access to the device's host-access check.
    SYNCBLOB_ALWAYS_INLINE void* host_if_writable(std::string_view who) noexcept {
        if (state_.load(std::memory_order_acquire) == state_of(Head::at_host) && !host_read_only_) {
            Base::note_host_access(true, who);
            return host_;
        }
        return nullptr;
    }
};

SYNCBLOB_END_NAMESPACE
