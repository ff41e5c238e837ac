// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The state under `Blob` and the buffer mechanics its calls share. Its members are one group, so
/// that a move or a swap, and the snapshot a failed copy restores, handle them whole and cannot
/// forget one; `Blob` (blob.hpp) adds the public surface.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>

#include "../../core/element.hpp"
#include "../../core/error.hpp"
#include "../../core/shape.hpp"
#include "../../memory/fwd.hpp"
#include "../../memory/synced_buffer.hpp"
#include "../../memory/transfer_stats.hpp"
#include "../options.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace detail {

/// The statistics of the buffers a blob replaced, in one word: none; the two allocation counts alone,
/// inline (a buffer replaced by a load, a reshape or a copy-on-write has often counted its allocation
/// and nothing else); or a block of their own once any other count is nonzero or an allocation count
/// outgrows its bits. A blob loaded again and again then makes no small block between the loads'
/// large ones: such blocks slowed a checkpoint loaded tensor by tensor (docs/waits.md).
class RetiredCounts {
public:
    RetiredCounts() = default;
    /// \throws std::bad_alloc (copying a block)
    RetiredCounts(const RetiredCounts& other) : word_(other.word_) {
        if (const TransferStats* b = other.block()) {
            word_ = word_of(new TransferStats(*b));
        }
    }
    RetiredCounts& operator=(const RetiredCounts& other) {
        RetiredCounts copy(other);  // copied first: a throw changes nothing
        std::swap(word_, copy.word_);
        return *this;
    }
    RetiredCounts(RetiredCounts&& other) noexcept : word_(std::exchange(other.word_, 0)) {}
    RetiredCounts& operator=(RetiredCounts&& other) noexcept {
        RetiredCounts moved(std::move(other));
        std::swap(word_, moved.word_);
        return *this;
    }
    ~RetiredCounts() { delete block(); }

    [[nodiscard]] TransferStats get() const noexcept {
        if (const TransferStats* b = block()) {
            return *b;
        }
        TransferStats s;
        s.host_allocations = (word_ >> 1) & host_mask;
        s.device_allocations = word_ >> device_shift;
        return s;
    }

    /// Adds `counted`. \throws std::bad_alloc (a block needed and not made: the counts are unchanged)
    void add(const TransferStats& counted) {
        if (counted == TransferStats{}) {
            return;
        }
        const TransferStats sum = get() + counted;
        if (TransferStats* b = block()) {
            *b = sum;
        } else if (inline_fits(sum)) {
            word_ = 1 | (sum.host_allocations << 1) | (sum.device_allocations << device_shift);
        } else {
            word_ = word_of(new TransferStats(sum));
        }
    }

    void reset() noexcept {
        delete block();
        word_ = 0;
    }

    /// Whether the counts take a block of their own.
    [[nodiscard]] bool in_block() const noexcept { return block() != nullptr; }

private:
    // word_: 0 (no counts), a TransferStats* (bit 0 clear: the block is aligned), or bit 0 set with
    // the host allocations in bits 1-31 and the device allocations in bits 32-63.
    static constexpr int device_shift = 32;
    static constexpr std::uint64_t host_mask = (std::uint64_t{1} << (device_shift - 1)) - 1;

    [[nodiscard]] static bool inline_fits(const TransferStats& s) noexcept {
        TransferStats rest = s;
        rest.host_allocations = 0;
        rest.device_allocations = 0;
        return rest == TransferStats{} && s.host_allocations <= host_mask &&
               s.device_allocations < (std::uint64_t{1} << (64 - device_shift));
    }
    [[nodiscard]] static std::uint64_t word_of(TransferStats* block) noexcept {
        return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(block));
    }
    [[nodiscard]] TransferStats* block() const noexcept {
        if ((word_ & 1) != 0) {
            return nullptr;
        }
        // The word is 0 or a pointer word_of made: the cast gives that pointer back.
        // NOLINTNEXTLINE(performance-no-int-to-ptr)
        return reinterpret_cast<TransferStats*>(static_cast<std::uintptr_t>(word_));
    }

    std::uint64_t word_ = 0;
};

/// One of a blob's buffers (null before the blob has any), and the statistics of the buffers it
/// replaced: what the blob's `data_stats()` / `diff_stats()` report over its whole life.
template <class Buffer>
struct HeldBuffer {
    std::shared_ptr<Buffer> buffer;
    RetiredCounts retired;

    HeldBuffer() = default;
    /// Shares the buffer and copies the retired counts. \throws std::bad_alloc
    HeldBuffer(const HeldBuffer&) = default;
    HeldBuffer& operator=(const HeldBuffer& other) {
        if (this != &other) {
            *this = HeldBuffer(other);  // copied first: a throw changes nothing
        }
        return *this;
    }
    HeldBuffer(HeldBuffer&&) noexcept = default;
    HeldBuffer& operator=(HeldBuffer&&) noexcept = default;
    ~HeldBuffer() = default;

    [[nodiscard]] TransferStats stats() const {
        const TransferStats old = retired.get();
        return buffer ? old + buffer->stats() : old;
    }

    void reset_stats() {
        retired.reset();
        if (buffer) {
            buffer->reset_stats();
        }
    }

    /// Holds `next` instead, adding the statistics of the buffer let go of to `retired`.
    void replace(std::shared_ptr<Buffer> next) noexcept {
        if (buffer) {
            try {
                retired.add(buffer->stats());
            } catch (...) {  // no memory for the counts' block: they are lost, nothing else
            }
        }
        buffer = std::move(next);
    }
};

/// What a blob looks like: its shape, whether it was given one (a default-constructed blob was
/// not; a scalar was), and its element count.
struct BlobLayout {
    Shape shape{};
    std::int64_t count = 0;
    bool has_shape = false;
};

/// The members of `Blob<T, Allocator>` (its only user, which derives from it) and the mechanics of
/// its buffers. Copyable as a whole: a copy shares the buffers (the snapshot `copy_from` restores).
template <Element T, SyncedAllocator Allocator>
class BlobState {
protected:
    using buffer_type = BufferFor<Allocator>;
    using device_backend = typename Allocator::device_backend;
    using stream_type = typename device_backend::stream_type;
    using Held = HeldBuffer<buffer_type>;

    [[nodiscard]] Held& held(Part p) noexcept { return p == Part::data ? data_ : diff_; }
    [[nodiscard]] const Held& held(Part p) const noexcept { return p == Part::data ? data_ : diff_; }

    // Bytes of `n` elements. \throws ShapeError (naming `op`) beyond the addressable size.
    static std::size_t checked_bytes(const char* op, std::int64_t n) {
        constexpr auto limit = static_cast<std::uint64_t>(std::numeric_limits<std::ptrdiff_t>::max()) / sizeof(T);
        if (static_cast<std::uint64_t>(n) > limit) {
            throw ShapeError(std::string(op) + ": " + std::to_string(n) + " elements of " +
                             std::string(element_name<T>()) + " exceed the addressable size");
        }
        return static_cast<std::size_t>(n) * sizeof(T);
    }

    // Bytes of the count() elements.
    [[nodiscard]] std::size_t used_bytes() const noexcept {
        return static_cast<std::size_t>(layout_.count) * sizeof(T);
    }

    std::shared_ptr<buffer_type> make_buffer(std::size_t bytes) const {
        auto buffer = std::make_shared<buffer_type>(bytes);
        buffer->set_stream(stream_);
        if constexpr (std::same_as<T, bool>) {
            buffer->set_poison_byte(0x01);  // a valid bool, so reading stale data stays defined
        }
        return buffer;
    }

    // Allocates both new buffers before touching the blob, so a failure changes nothing.
    void replace_buffers(std::size_t bytes) {
        auto data = make_buffer(bytes);
        auto diff = make_buffer(bytes);
        data_.replace(std::move(data));
        diff_.replace(std::move(diff));
    }

    // New buffers of `bytes` holding the count() elements of data and diff, each copied on the side
    // where it is fresh. Built aside and installed last, so a failure changes nothing.
    void reallocate_keeping(std::size_t bytes) {
        auto data = make_buffer(bytes);
        auto diff = make_buffer(bytes);
        if (data_.buffer->head() != Head::uninitialized) {
            data->copy_from(*data_.buffer, used_bytes());  // keeps the tail past the count valid
        }
        if (diff_.buffer->head() != Head::uninitialized) {
            diff->copy_from(*diff_.buffer, used_bytes());
        }
        data_.replace(std::move(data));
        diff_.replace(std::move(diff));
    }

    // Lends the count() elements at `p` to side `side` of the data (see Blob::set_host_data): to
    // the data buffer when it holds exactly count() elements, else to a new one that replaces it.
    // The caller has checked the blob's shape, its layout and the element count.
    void lend(const char* op, Side side, T* p, Borrow borrow) {
        const std::size_t bytes = used_bytes();
        // Either buffer would free its block under the borrow: the data when a capacity above the
        // count moves the borrow to a new buffer (below), or when it or a blob sharing it lets go
        // later; the diff on share_diff, reshape or destruction.
        for (const Part part : {Part::data, Part::diff}) {
            if (held(part).buffer->owns(p, bytes)) {
                throw StateError(std::string(op) + ": the memory belongs to this blob's " +
                                 (part == Part::data ? "data" : "diff") +
                                 " (alias buffers with share_data / share_diff, or copy with copy_from)");
            }
        }
        const auto lend_to = [&](buffer_type& buffer) {
            if (side == Side::device) {
                buffer.set_device_data(p, bytes, std::move(borrow));
            } else {
                buffer.set_host_data(p, bytes, std::move(borrow));
            }
        };
        if (data_.buffer->size() == bytes) {
            lend_to(*data_.buffer);
            return;
        }
        auto fitted = make_buffer(bytes);  // lent to before it replaces the data, so a throw changes nothing
        lend_to(*fitted);
        data_.replace(std::move(fitted));
    }

    // Takes `staged`'s layout and the buffers `taken` names (Blob::commit); a buffer not taken stays
    // when the new count fits in it and is replaced by `staged`'s otherwise. Leaves `staged` without
    // buffers. Cannot fail.
    void take(BlobState& staged, Parts taken) noexcept {
        for (const Part part : {Part::data, Part::diff}) {
            auto& mine = held(part);
            const bool fits =
                mine.buffer && mine.buffer->size() / sizeof(T) >= static_cast<std::size_t>(staged.layout_.count);
            if ((part == Part::data ? taken.data : taken.diff) || !fits) {
                mine.replace(std::move(staged.held(part).buffer));
            }
        }
        layout_ = staged.layout_;
        staged.data_.buffer.reset();
        staged.diff_.buffer.reset();
    }

    // Copies the count() elements of data and diff, each fresh somewhere, into `copy` (of the same
    // shape), each on the side where it is fresh (Blob::clone).
    void copy_contents_to(BlobState& copy) const {
        if (layout_.count == 0) {
            return;
        }
        for (const Part part : {Part::data, Part::diff}) {
            if (held(part).buffer->head() != Head::uninitialized) {
                copy.held(part).buffer->copy_from(*held(part).buffer, used_bytes());
            }
        }
    }

    // A blob without buffers has no device memory: null, or NoDeviceError for a host-only backend.
    static void require_device(const char* op) {
        if constexpr (!device_backend::has_device) {
            throw NoDeviceError(std::string(op) + ": this blob is host-only (device backend " +
                                std::string(device_backend::name) + ")");
        }
    }

    // Typed views of one buffer's count() elements, through the matching accessor of the buffer.
    std::span<const T> host_view(Part p) const {
        if (layout_.count == 0) {
            return {};
        }
        return {static_cast<const T*>(held(p).buffer->host_data()), static_cast<std::size_t>(layout_.count)};
    }
    std::span<T> mutable_host_view(Part p) {
        if (layout_.count == 0) {
            return {};
        }
        return {static_cast<T*>(held(p).buffer->mutable_host_data()), static_cast<std::size_t>(layout_.count)};
    }
    std::span<T> overwrite_host_view(Part p) {
        if (layout_.count == 0) {
            return {};
        }
        void* data = held(p).buffer->mutable_host_data_for_overwrite(used_bytes());
        return {static_cast<T*>(data), static_cast<std::size_t>(layout_.count)};
    }
    const T* device_view(Part p) const {
        const auto& buffer = held(p).buffer;
        if (!buffer) {
            require_device("Blob::device_data");
            return nullptr;
        }
        return static_cast<const T*>(buffer->device_data());
    }
    T* mutable_device_view(Part p) {
        const auto& buffer = held(p).buffer;
        if (!buffer) {
            require_device("Blob::mutable_device_data");
            return nullptr;
        }
        return static_cast<T*>(buffer->mutable_device_data());
    }
    T* overwrite_device_view(Part p) {
        const auto& buffer = held(p).buffer;
        if (!buffer) {
            require_device("Blob::mutable_device_data_for_overwrite");
            return nullptr;
        }
        return static_cast<T*>(buffer->mutable_device_data_for_overwrite(used_bytes()));
    }

    BlobLayout layout_{};
    Held data_{};
    Held diff_{};
    stream_type stream_ = device_backend::default_stream();
    const char* fixed_by_ = nullptr;  // the owner that fixed the layout (fix_layout), or null
};

}  // namespace detail

SYNCBLOB_END_NAMESPACE
