// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// `ArenaBuffer`: the data or the diff of a `ParameterArena` as one buffer, seen through the
/// state machines of the blobs whose slices it holds; and `Bucket`, a contiguous run of slices.

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "../core/element.hpp"
#include "../core/error.hpp"
#include "../core/prefetch.hpp"
#include "../memory/allocator.hpp"
#include "../memory/fwd.hpp"
#include "../memory/synced_buffer.hpp"
#include "../memory/transfer_stats.hpp"

SYNCBLOB_BEGIN_NAMESPACE

/// A contiguous run of an arena's blobs, `[first, end)` in order of addition, and the bytes of the
/// arena's buffers it covers (the padding between its slices included).
struct Bucket {
    std::size_t first = 0;   ///< first blob (index in order of addition)
    std::size_t end = 0;     ///< one past the last blob
    std::size_t offset = 0;  ///< byte offset of the first slice in the arena's buffers
    std::size_t bytes = 0;   ///< bytes from the first slice's start to the last slice's end
    friend bool operator==(const Bucket&, const Bucket&) = default;
};

/// Where a blob's slice lies in the arena's buffers.
struct Slice {
    std::size_t offset = 0;  ///< bytes from the start of the buffer (a multiple of the arena's alignment)
    std::size_t bytes = 0;   ///< count() * sizeof(T), 0 for an empty blob
};

/// The data or the diff of a sealed arena as one buffer of `bytes()` bytes (the padding between
/// slices included). It has no head of its own: each blob's buffer keeps its state machine on its
/// slice, and this view sees the union. Its host side is fresh when every slice is fresh on the
/// host; asking for it copies exactly the slices that are not (counted in those blobs' stats) and
/// leaves the others alone. A view: it lives no longer than its arena.
template <Element T, SyncedAllocator Allocator>
class ArenaBuffer {
public:
    using buffer_type = BufferFor<Allocator>;
    using device_backend = typename Allocator::device_backend;
    using stream_type = typename device_backend::stream_type;

    ArenaBuffer(std::span<const std::shared_ptr<buffer_type>> buffers, std::span<const Slice> slices, T* host,
                T* device, std::size_t bytes) noexcept
        : buffers_(buffers), slices_(slices), host_(host), device_(device), bytes_(bytes) {}

    /// Bytes of the whole buffer, padding included.
    [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }
    /// Elements of the whole buffer, padding included (bytes() / sizeof(T)).
    [[nodiscard]] std::size_t elements() const noexcept { return bytes_ / sizeof(T); }

    /// True when every slice of blobs `[first, end)` holds fresh bytes on the host (empty blobs always do).
    [[nodiscard]] bool fresh_on_host(std::size_t first = 0, std::size_t end = npos) const {
        return all(first, end, [](Head h) { return h == Head::at_host || h == Head::synced; });
    }
    /// True when every slice of blobs `[first, end)` holds fresh bytes on the device.
    [[nodiscard]] bool fresh_on_device(std::size_t first = 0, std::size_t end = npos) const {
        return all(first, end, [](Head h) { return h == Head::at_device || h == Head::synced; });
    }

    /// The whole host side, its slices `[first, end)` fresh for reading: the stale ones are copied
    /// D→H (issued together, then waited for), each blob's head → synced.
    std::span<const T> host_data(std::size_t first = 0, std::size_t end = npos) const {
        pull(first, end);
        each(first, end, [](buffer_type& b) { (void)b.host_data(); });
        return {host_, elements()};
    }
    /// As host_data, then each blob's head → at_host (the device slices become stale).
    std::span<T> mutable_host_data(std::size_t first = 0, std::size_t end = npos) {
        pull(first, end);
        each(first, end, [](buffer_type& b) { (void)b.mutable_host_data(); });
        return {host_, elements()};
    }
    /// Host slices `[first, end)` about to be overwritten whole: no copy; heads → at_host.
    std::span<T> mutable_host_data_for_overwrite(std::size_t first = 0, std::size_t end = npos) {
        each(first, end, [](buffer_type& b) { (void)b.mutable_host_data_for_overwrite(); });
        return {host_, elements()};
    }

    /// The whole device side, its slices `[first, end)` fresh for reading: the stale ones are copied
    /// H→D (issued together), each blob's head → synced.
    const T* device_data(std::size_t first = 0, std::size_t end = npos) const {
        push(first, end);
        each(first, end, [](buffer_type& b) { (void)b.device_data(); });
        return device_;
    }
    /// As device_data, then each blob's head → at_device (the host slices become stale).
    T* mutable_device_data(std::size_t first = 0, std::size_t end = npos) {
        push(first, end);
        each(first, end, [](buffer_type& b) { (void)b.mutable_device_data(); });
        return device_;
    }
    /// Device slices `[first, end)` about to be overwritten whole: no copy; heads → at_device.
    T* mutable_device_data_for_overwrite(std::size_t first = 0, std::size_t end = npos) {
        each(first, end, [](buffer_type& b) { (void)b.mutable_device_data_for_overwrite(); });
        return device_;
    }

    /// Issues the H→D copies of the slices `[first, end)` that are fresh only on the host, on each
    /// blob's own stream, without waiting (heads → synced; see SyncedBuffer::push_to_device_async).
    void push_to_device_async(std::size_t first = 0, std::size_t end = npos) { push(first, end); }

    /// Allocations, copies and kernels of the slices' buffers, summed (cumulative while each blob keeps its buffer).
    [[nodiscard]] TransferStats stats() const {
        TransferStats s;
        for (const auto& b : buffers_) {
            s += b->stats();
        }
        return s;
    }

    /// The blob buffers this view spans, in order of addition.
    [[nodiscard]] std::span<const std::shared_ptr<buffer_type>> buffers() const noexcept { return buffers_; }

    static constexpr std::size_t npos = static_cast<std::size_t>(-1);

private:
    // How many buffers ahead `each` asks for a buffer (see core/prefetch.hpp: at a million
    // blobs each buffer is a miss, and a change of its head an atomic operation that waits for it).
    static constexpr std::size_t ahead = 16;

    template <class Fn>
    void each(std::size_t first, std::size_t end, Fn fn) const {
        end = std::min(end, buffers_.size());
        for (std::size_t i = first; i < end; ++i) {
            if (i + ahead < end) {
                detail::prefetch(buffers_[i + ahead].get());
            }
            if (slices_[i].bytes != 0) {
                fn(*buffers_[i]);
            }
        }
    }
    template <class Pred>
    bool all(std::size_t first, std::size_t end, Pred pred) const {
        bool ok = true;
        each(first, end, [&](buffer_type& b) { ok = ok && pred(b.head()); });
        return ok;
    }
    void pull(std::size_t first, std::size_t end) const {
        if constexpr (device_backend::has_device) {
            each(first, end, [](buffer_type& b) {
                if (b.head() == Head::at_device) {
                    b.pull_to_host_async();
                }
            });
        }
    }
    void push(std::size_t first, std::size_t end) const {
        if constexpr (device_backend::has_device) {
            each(first, end, [](buffer_type& b) {
                if (b.head() == Head::at_host) {
                    b.push_to_device_async();
                }
            });
        }
    }

    std::span<const std::shared_ptr<buffer_type>> buffers_;
    std::span<const Slice> slices_;
    T* host_;
    T* device_;
    std::size_t bytes_;
};

SYNCBLOB_END_NAMESPACE
