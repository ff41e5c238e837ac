// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The `DeviceBackend` policy: where a buffer's device side lives and how bytes get there.

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "../core/config.hpp"

SYNCBLOB_BEGIN_NAMESPACE

/// Direction of a copy between host and device memory.
enum class CopyKind : std::uint8_t { host_to_device, device_to_host, device_to_device };

/// A device backend is a stateless policy type with static members:
/// - `stream_type` and `default_stream()`, the stream a buffer uses until it is given another,
///   named explicitly (for CUDA, a value-initialised `cudaStream_t` would mean the legacy or the
///   per-thread default stream depending on each translation unit's `--default-stream`), and
///   `event_type` (default-constructible, movable; marks a point in a stream);
/// - `name`, and `has_device` (false for a host-only backend);
/// - `allocate(bytes) -> void*` / `deallocate(p, bytes) noexcept`;
/// - `current_device() -> int`, `set_device(int)` (the calling thread's current device) and
///   `device_of(p) -> int` (the device whose memory `p` points into: a pointer's own device);
/// - `copy(dst, src, bytes, kind, stream)`, finished when it returns, and `copy_async(...)`,
///   which only issues it;
/// - `fill(dst, byte, bytes, stream)`, issued on `stream` (done in stream order; the host does
///   not wait, so a first touch costs no host wait);
/// - `record(stream) -> event_type`, `wait(event)` (the host blocks until the event is reached),
///   `stream_wait(stream, event)` (the stream waits, the host does not), `query(event) -> bool`
///   (true once the event is reached; never blocks: how a caching pool asks whether the work that
///   used a block is done);
/// - `poisons_stale_side()`: true when the backend asks buffers to overwrite the side a mutable
///   access made stale (a checking mode for tests).
template <class B>
concept DeviceBackend = requires {
    typename B::stream_type;
    typename B::event_type;
    { B::name } -> std::convertible_to<std::string_view>;
    { B::has_device } -> std::convertible_to<bool>;
}
&&std::default_initializable<typename B::event_type>&& std::movable<typename B::event_type>&&
    std::regular<typename B::stream_type>&& requires(std::size_t bytes, void* dst, const void* src, unsigned char byte,
                                                     CopyKind kind, typename B::stream_type stream,
                                                     typename B::event_type& event) {
    { B::allocate(bytes) } -> std::same_as<void*>;
    { B::deallocate(dst, bytes) }
    noexcept;
    { B::default_stream() } -> std::same_as<typename B::stream_type>;
    { B::current_device() } -> std::same_as<int>;
    B::set_device(0);
    { B::device_of(src) } -> std::same_as<int>;
    B::copy(dst, src, bytes, kind, stream);
    B::copy_async(dst, src, bytes, kind, stream);
    B::fill(dst, byte, bytes, stream);
    { B::record(stream) } -> std::same_as<typename B::event_type>;
    B::wait(event);
    B::stream_wait(stream, event);
    { B::query(event) } -> std::convertible_to<bool>;
    { B::poisons_stale_side() } -> std::convertible_to<bool>;
};

/// A device backend with a stream-ordered allocator (CUDA's `cudaMallocAsync` / `cudaFreeAsync`):
/// - `allocate_async(bytes, stream) -> void*`: a block usable by work issued on `stream` after this
///   call (and by other streams once they are ordered after it);
/// - `deallocate_async(p, bytes, stream) noexcept`: frees the block once `stream` reaches the free,
///   without the host waiting. Work on other streams that uses the block must be ordered before the
///   free (made to wait for it, or `stream` made to wait for them); the allocator may hand the
///   block out again to work on `stream` at once.
/// `SyncedBuffer` allocates and frees its own device blocks this way on its stream when the backend
/// has them; other backends' blocks are freed after the host has waited for the buffer's stream.
template <class B>
concept StreamOrderedBackend = DeviceBackend<B> &&
    requires(std::size_t bytes, void* p, typename B::stream_type stream) {
    { B::allocate_async(bytes, stream) } -> std::same_as<void*>;
    { B::deallocate_async(p, bytes, stream) }
    noexcept;
};

/// Makes a device current for its lifetime and restores the previous one after: device math and
/// device work on a buffer run on the buffer's own device whatever device the caller has current.
/// A negative device (no device block) changes nothing.
template <DeviceBackend Device>
class DeviceGuard {
public:
    explicit DeviceGuard(int device) {
        if constexpr (Device::has_device) {
            if (device >= 0) {
                previous_ = Device::current_device();
                if (previous_ != device) {
                    Device::set_device(device);
                    switched_ = true;
                }
            }
        }
    }
    ~DeviceGuard() {
        if (switched_) {
            try {
                Device::set_device(previous_);
            } catch (...) {  // the device that was current a moment ago cannot fail to be set again
            }
        }
    }
    DeviceGuard(const DeviceGuard&) = delete;
    DeviceGuard& operator=(const DeviceGuard&) = delete;

private:
    int previous_ = -1;
    bool switched_ = false;
};

SYNCBLOB_END_NAMESPACE
