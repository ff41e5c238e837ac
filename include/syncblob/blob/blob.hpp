// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// `Blob<T, Allocator>`: an N-d array of `T` with a `data` and a `diff` (gradient) buffer, each
/// mirrored between host and device memory. Storage only: math is in `syncblob/math.hpp`. The
/// shape queries (`blob/indexing.hpp`), the members and buffer mechanics (`blob/detail/blob_state.hpp`),
/// both bases of Blob, the named options of its calls (`blob/options.hpp`) and printing
/// (`blob/print.hpp`) live in headers of their own and come with this one.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "../core/element.hpp"
#include "../core/error.hpp"
#include "../core/shape.hpp"
#include "../memory/synced_buffer.hpp"
#include "../memory/transfer_stats.hpp"
#include "detail/blob_state.hpp"
#include "fwd.hpp"
#include "indexing.hpp"
#include "options.hpp"

SYNCBLOB_BEGIN_NAMESPACE

/// An N-d array (≤ 32 axes, 64-bit extents) holding `data` and `diff`, each a `SyncedBuffer`.
///
/// Capacity rule (Caffe's): `reshape` reallocates only when the new count exceeds the capacity and
/// never shrinks; contents are kept when it does not reallocate and are not kept when it does.
/// A default-constructed blob has no axes and count 0; reshaping to the empty shape makes a scalar.
/// Move-only: deep copies are explicit (`clone`, `copy_from`).
template <Element T, SyncedAllocator Allocator>
class Blob : public BlobIndexing<Blob<T, Allocator>, T>, private detail::BlobState<T, Allocator> {
    using Indexing = BlobIndexing<Blob<T, Allocator>, T>;
    using State = detail::BlobState<T, Allocator>;

public:
    using value_type = T;
    using allocator_type = Allocator;
    using buffer_type = BufferFor<Allocator>;
    using device_backend = typename Allocator::device_backend;
    using stream_type = typename device_backend::stream_type;

    /// No axes, count 0, nothing allocated.
    Blob() noexcept = default;
    /// A blob of the given shape; nothing is allocated before the first access. \throws ShapeError
    explicit Blob(const Shape& shape) { reshape(shape); }
    Blob(std::initializer_list<std::int64_t> shape) { reshape(Shape(shape)); }
    explicit Blob(std::span<const std::int64_t> shape) { reshape(Shape(shape)); }
    /// Caffe's legacy 4-D constructor.
    Blob(std::int64_t num, std::int64_t channels, std::int64_t height, std::int64_t width) {
        reshape(Shape{num, channels, height, width});
    }

    Blob(const Blob&) = delete;
    Blob& operator=(const Blob&) = delete;
    /// Leaves `other` empty (no axes, count 0).
    Blob(Blob&& other) noexcept { swap(other); }
    Blob& operator=(Blob&& other) noexcept {
        Blob(std::move(other)).swap(*this);
        return *this;
    }
    ~Blob() = default;

    /// Exchanges everything: shapes, buffers, statistics, streams and layout marks.
    void swap(Blob& other) noexcept {
        static_assert(std::is_nothrow_swappable_v<State>);
        std::swap(state(), other.state());
    }

    // ---- shape -----------------------------------------------------------------------------

    // Shape queries (extent by axis, counts of axis ranges, legacy 4-D accessors, offsets, checked
    // element reads) come from BlobIndexing.
    using Indexing::count;
    using Indexing::shape;

    [[nodiscard]] const Shape& shape() const noexcept { return layout_.shape; }
    [[nodiscard]] std::int64_t count() const noexcept { return layout_.count; }
    /// Elements the buffers can hold without reallocating.
    [[nodiscard]] std::int64_t capacity() const noexcept {
        if (!data_.buffer) {
            return 0;
        }
        return static_cast<std::int64_t>(std::min(data_.buffer->size(), diff_.buffer->size()) / sizeof(T));
    }

    // ---- reshape ---------------------------------------------------------------------------

    /// Changes the shape. Reallocates (dropping the contents) only when the count exceeds the
    /// capacity. \throws ShapeError on a bad shape; StateError for another shape when the layout
    /// is fixed (see fix_layout). The blob is then unchanged.
    void reshape(const Shape& shape) {
        if (fixed_by_ != nullptr && (!layout_.has_shape || shape != layout_.shape)) {
            refuse_layout_change("Blob::reshape", "reshape to " + shape.to_string());
        }
        const std::int64_t n = shape.count();
        if (!data_.buffer || n > capacity()) {
            this->replace_buffers(this->checked_bytes("Blob::reshape", n));
        }
        layout_ = {shape, n, true};
    }
    void reshape(std::initializer_list<std::int64_t> shape) { reshape(Shape(shape)); }
    void reshape(std::span<const std::int64_t> shape) { reshape(Shape(shape)); }
    void reshape(std::int64_t num, std::int64_t channels, std::int64_t height, std::int64_t width) {
        reshape(Shape{num, channels, height, width});
    }
    /// Takes the shape of `other` (any element type or allocator). Taking the "no shape" of a
    /// default-constructed blob keeps the buffers and their capacity.
    template <Element U, SyncedAllocator A2>
    void reshape_like(const Blob<U, A2>& other) {
        if (!other.has_shape()) {
            if (fixed_by_ != nullptr) {
                refuse_layout_change("Blob::reshape_like", "dropping the shape");
            }
            layout_ = {};
            return;
        }
        reshape(other.shape());
    }

    /// Makes room for `n` elements without changing the shape, as `std::vector::reserve` does:
    /// when `n` exceeds the capacity both buffers are reallocated and the count() elements of
    /// data and diff are kept (copied on the side where each is fresh). A blob that shared its
    /// buffers gets its own. \throws ShapeError when `n` is negative or too large (nothing changes).
    void reserve(std::int64_t n) {
        if (n < 0) {
            throw ShapeError("Blob::reserve: negative count " + std::to_string(n));
        }
        if (fixed_by_ != nullptr && n > capacity()) {
            refuse_layout_change("Blob::reserve", "room for " + std::to_string(n) + " elements");
        }
        if (!data_.buffer) {
            this->replace_buffers(this->checked_bytes("Blob::reserve", n));
        } else if (n > capacity()) {
            this->reallocate_keeping(this->checked_bytes("Blob::reserve", n));
        }
    }

    /// Reallocates to exactly count() elements when the capacity is larger, keeping the contents
    /// of data and diff (copied on the side where each is fresh). A blob that shared its buffers
    /// gets its own.
    void shrink_to_fit() {
        if (!data_.buffer || capacity() == layout_.count) {
            return;
        }
        if (fixed_by_ != nullptr) {
            refuse_layout_change("Blob::shrink_to_fit", "new buffers");
        }
        this->reallocate_keeping(this->used_bytes());
    }

    // ---- data and diff ---------------------------------------------------------------------

    [[nodiscard]] std::span<const T> host_data() const { return this->host_view(Part::data); }
    [[nodiscard]] std::span<T> mutable_host_data() { return this->mutable_host_view(Part::data); }
    [[nodiscard]] const T* device_data() const { return this->device_view(Part::data); }
    [[nodiscard]] T* mutable_device_data() { return this->mutable_device_view(Part::data); }
    [[nodiscard]] std::span<const T> host_diff() const { return this->host_view(Part::diff); }
    [[nodiscard]] std::span<T> mutable_host_diff() { return this->mutable_host_view(Part::diff); }
    [[nodiscard]] const T* device_diff() const { return this->device_view(Part::diff); }
    [[nodiscard]] T* mutable_device_diff() { return this->mutable_device_view(Part::diff); }

    /// Host data about to be overwritten whole: no zero-fill and no copy of the count() elements.
    /// When the capacity exceeds the count, the tail past count() stays valid: on a stale host side
    /// that tail, and only it, is copied from the device (see SyncedBuffer's overload).
    [[nodiscard]] std::span<T> mutable_host_data_for_overwrite() { return this->overwrite_host_view(Part::data); }
    /// Host diff about to be overwritten whole (as the data).
    [[nodiscard]] std::span<T> mutable_host_diff_for_overwrite() { return this->overwrite_host_view(Part::diff); }
    /// Device data about to be overwritten whole: the mirror image of the host data's.
    [[nodiscard]] T* mutable_device_data_for_overwrite() { return this->overwrite_device_view(Part::data); }
    /// Device diff about to be overwritten whole (as the data).
    [[nodiscard]] T* mutable_device_diff_for_overwrite() { return this->overwrite_device_view(Part::diff); }

    /// Lends `data` (at least count() elements) to the blob as the host side of its data, as
    /// Caffe's `set_cpu_data`: no copy, and the blob never frees it. `borrow` may carry a keep-alive
    /// handle and mark the memory read-only (the first mutable access then copies it first). When
    /// the capacity exceeds count(), the data gets a new buffer of exactly count() elements (the
    /// diff keeps its own, and sharing through `share_data` ends); otherwise a blob sharing the
    /// data buffer sees the lent memory too.
    /// \throws ShapeError when `elements` < count() or `data` is null for a non-empty blob;
    /// StateError on a blob without a shape, and when the count() elements at `data` overlap a block
    /// the blob's data or diff buffer owns (at any offset, the tail past count() included): that
    /// buffer would free it under the borrow. Nothing changes when it throws.
    void set_host_data(T* data, std::size_t elements, Borrow borrow = {}) {
        lend("Blob::set_host_data", Side::host, data, elements, std::move(borrow));
    }
    /// Read-only lending of host memory: never written; the first mutable access copies it first.
    void set_host_data(const T* data, std::size_t elements, std::shared_ptr<void> keep_alive = {}) {
        lend("Blob::set_host_data", Side::host, const_cast<T*>(data), elements, Borrow{std::move(keep_alive), true});
    }
    /// Lends device memory as the device side of the data, as Caffe's `set_gpu_data` (see
    /// set_host_data). \throws NoDeviceError on a host-only blob, and as set_host_data.
    void set_device_data(T* data, std::size_t elements, Borrow borrow = {}) {
        lend("Blob::set_device_data", Side::device, data, elements, std::move(borrow));
    }

    /// Where the fresh data / diff is (uninitialized for an empty blob).
    [[nodiscard]] Head data_head() const noexcept { return head(Part::data); }
    [[nodiscard]] Head diff_head() const noexcept { return head(Part::diff); }
    /// Where the fresh `part` is.
    [[nodiscard]] Head head(Part part) const noexcept {
        const auto& buffer = this->held(part).buffer;
        return buffer ? buffer->head() : Head::uninitialized;
    }

    /// Allocations, copies and kernels of data / diff over the blob's life, across reallocations
    /// (a shared buffer's counts include what its other owners did with it).
    [[nodiscard]] TransferStats data_stats() const { return data_.stats(); }
    [[nodiscard]] TransferStats diff_stats() const { return diff_.stats(); }
    /// Those of `part`.
    [[nodiscard]] TransferStats stats(Part part) const { return this->held(part).stats(); }
    void reset_stats() {
        data_.reset_stats();
        diff_.reset_stats();
    }

    /// The buffers themselves (null for a default-constructed blob), for the math and IO layers
    /// and for interop. Sharing them shares the memory.
    [[nodiscard]] const std::shared_ptr<buffer_type>& data_buffer() const noexcept { return data_.buffer; }
    [[nodiscard]] const std::shared_ptr<buffer_type>& diff_buffer() const noexcept { return diff_.buffer; }
    /// The buffer of `part`.
    [[nodiscard]] const std::shared_ptr<buffer_type>& buffer(Part part) const noexcept {
        return this->held(part).buffer;
    }

    /// The stream synchronous copies of both buffers run on (kept across reallocations).
    void set_stream(stream_type stream) {
        stream_ = stream;
        if (data_.buffer) {
            data_.buffer->set_stream(stream);
            diff_.buffer->set_stream(stream);
        }
    }
    [[nodiscard]] stream_type stream() const noexcept { return stream_; }

    /// True unless default-constructed (or moved from): the blob has a shape, possibly rank 0.
    [[nodiscard]] bool has_shape() const noexcept { return layout_.has_shape; }

    /// Fixes the shape and the buffers, for an owner that laid the blob's memory out itself
    /// (`ParameterArena::seal` fixes its blobs; `owner` names it in error messages and must
    /// outlive the blob, as a string literal does). From then on every call that would change the
    /// shape or give the blob other buffers throws `StateError` and changes nothing: `reshape` to
    /// another shape, `reserve` beyond the capacity, `shrink_to_fit` of a larger capacity,
    /// `set_host_data`, `set_device_data`, `share_data`, `share_diff`, `commit`. Reshaping to the
    /// same shape, every accessor and copies into the blob (`copy_from` of the same shape, loads
    /// of the same shape) work as before. The mark moves with the blob (a moved-from blob is free).
    void fix_layout(const char* owner) noexcept { fixed_by_ = owner; }
    /// True after `fix_layout`.
    [[nodiscard]] bool layout_fixed() const noexcept { return fixed_by_ != nullptr; }
    /// The owner named by `fix_layout`, or null.
    [[nodiscard]] const char* layout_owner() const noexcept { return fixed_by_; }

    // ---- copies and sharing ----------------------------------------------------------------

    /// Copies `source`'s `part` (its data unless told otherwise) into this blob's, on the side where
    /// the source is fresh: device to device when its head is on the device or synced, the source
    /// using another allocator or not. With `Reshape::allowed` the blob first takes the source's
    /// shape (`reshape_like`). \throws ShapeError when the shapes differ and reshaping is refused.
    /// On any exception the blob keeps its shape and buffers (its whole state is restored).
    ///
    ///     target.copy_from(source);                  // the data, shapes equal
    ///     target.copy_from(source, Part::diff);      // the diff only
    ///     target.copy_from(source, Reshape::allowed);
    template <SyncedAllocator A2>
    void copy_from(const Blob<T, A2>& source, Part part = Part::data, Reshape reshape = Reshape::refused) {
        if (static_cast<const void*>(&source) == static_cast<const void*>(this)) {
            return;
        }
        if ((source.shape() != layout_.shape || source.has_shape() != layout_.has_shape) &&
            reshape == Reshape::refused) {
            throw ShapeError("Blob::copy_from: source shape " + source.shape_string() + " differs from " +
                             this->shape_string() + " (pass Reshape::allowed to reshape the target)");
        }
        State saved = state();  // the whole state, sharing the buffers
        try {
            if (reshape == Reshape::allowed) {
                reshape_like(source);
            }
            if (layout_.count != 0) {
                this->held(part).buffer->copy_from(*source.buffer(part), this->used_bytes());
            }
        } catch (...) {
            state() = std::move(saved);
            throw;
        }
    }
    /// Copies `source`'s data, reshaping as `reshape` says.
    template <SyncedAllocator A2>
    void copy_from(const Blob<T, A2>& source, Reshape reshape) {
        copy_from(source, Part::data, reshape);
    }

    /// Takes `staged`'s shape and the buffers `taken` names (`{.data = true, .diff = true}`) in one
    /// step that cannot fail: the commit of contents built aside, as every loader builds a file's
    /// contents before it touches the target, so that a failure leaves the target as it was. A
    /// buffer not taken is kept when the new count fits in it (reshape's rule: its contents stay)
    /// and replaced by `staged`'s otherwise. A taken buffer replaces the old one, so sharing of that
    /// buffer with another blob (`share_data`) ends; transfer statistics carry over. `staged` is
    /// left without buffers.
    ///
    /// \throws StateError, before any change, when the layout is fixed (copy into such a blob instead).
    void commit(Blob&& staged, Parts taken) {
        if (fixed_by_ != nullptr) {
            refuse_layout_change("Blob::commit", "new buffers");
        }
        this->take(staged.state(), taken);
    }

    /// Makes data the same buffer as `other`'s (no copy; the buffer lives while either blob holds
    /// it). The shape is kept. \throws ShapeError unless both have a shape and the counts match
    void share_data(const Blob& other) { share("Blob::share_data", Part::data, other); }
    /// Makes diff the same buffer as `other`'s (no copy). \throws ShapeError unless both have a
    /// shape and the counts match
    void share_diff(const Blob& other) { share("Blob::share_diff", Part::diff, other); }

    /// A deep copy: same shape, data and diff, each copied on the side where it is fresh.
    [[nodiscard]] Blob clone() const {
        Blob copy;
        copy.stream_ = stream_;
        if (!layout_.has_shape) {
            return copy;
        }
        copy.reshape(layout_.shape);
        this->copy_contents_to(copy.state());
        return copy;
    }

    /// Sets every data element to `value` (on the host).
    void fill(T value) { std::ranges::fill(mutable_host_data_for_overwrite(), value); }
    /// Sets every diff element to `value` (on the host).
    void fill_diff(T value) { std::ranges::fill(mutable_host_diff_for_overwrite(), value); }

    friend void swap(Blob& a, Blob& b) noexcept { a.swap(b); }

private:
    template <Element, SyncedAllocator>
    friend class Blob;

    using State::data_, State::diff_, State::fixed_by_, State::layout_, State::stream_;

    // The members as one value (see detail::BlobState): what swap exchanges and copy_from restores.
    State& state() noexcept { return *this; }
    const State& state() const noexcept { return *this; }

    void lend(const char* op, Side side, T* data, std::size_t elements, Borrow borrow) {
        if (side == Side::device) {
            State::require_device(op);
        }
        if (!layout_.has_shape) {
            throw StateError(std::string(op) + ": the blob has no shape (reshape it first)");
        }
        if (fixed_by_ != nullptr) {
            refuse_layout_change(op, "lent memory");
        }
        if (elements < static_cast<std::size_t>(layout_.count)) {
            throw ShapeError(std::string(op) + ": " + std::to_string(elements) + " elements lent, but the blob " +
                             layout_.shape.to_string() + " holds " + std::to_string(layout_.count));
        }
        State::lend(op, side, data, std::move(borrow));
    }

    void share(const char* op, Part part, const Blob& other) {
        if (!other.layout_.has_shape ||
            !layout_.has_shape) {  // a shapeless blob may hold buffers (reserve) but no elements
            throw ShapeError(std::string(op) + ": both blobs need a shape (" + other.shape_string() + " shared into " +
                             this->shape_string() + ")");
        }
        if (other.layout_.count != layout_.count) {
            throw ShapeError(std::string(op) + ": counts differ (" + other.shape_string() + " shared into " +
                             this->shape_string() + ")");
        }
        auto& mine = this->held(part);
        const auto& theirs = other.held(part).buffer;
        if (mine.buffer == theirs) {
            return;
        }
        if (fixed_by_ != nullptr) {
            refuse_layout_change(op,
                                 std::string("another blob's ") + (part == Part::data ? "data" : "diff") + " buffer");
        }
        mine.replace(theirs);
    }

    [[noreturn]] void refuse_layout_change(std::string_view op, const std::string& change) const {
        throw StateError(std::string(op) + ": the blob's shape and buffers are fixed by " + fixed_by_ + " (" +
                         this->shape_string() + "); " + change + " refused (copy into the blob instead)");
    }
};

SYNCBLOB_END_NAMESPACE

#include "print.hpp"  // operator<< for Blob
