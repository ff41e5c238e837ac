// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// `Blob<T, Allocator>`: an N-d array of `T` with a `data` and a `diff` (gradient) buffer, each
/// mirrored between host and device memory. Storage only: math is in `syncblob/math.hpp`. The
/// shape queries (`blob/indexing.hpp`, a base of Blob) and printing (`blob/print.hpp`) live in
/// headers of their own and come with this one.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "blob/indexing.hpp"
#include "core/element.hpp"
#include "core/error.hpp"
#include "core/shape.hpp"
#include "fwd.hpp"
#include "memory/synced_buffer.hpp"
#include "memory/transfer_stats.hpp"

SYNCBLOB_BEGIN_NAMESPACE

/// An N-d array (≤ 32 axes, 64-bit extents) holding `data` and `diff`, each a `SyncedBuffer`.
///
/// Capacity rule (Caffe's): `reshape` reallocates only when the new count exceeds the capacity and
/// never shrinks; contents are kept when it does not reallocate and are not kept when it does.
/// A default-constructed blob has no axes and count 0; reshaping to the empty shape makes a scalar.
/// Move-only: deep copies are explicit (`clone`, `copy_from`).
template <Element T, SyncedAllocator Allocator>
class Blob : public BlobIndexing<Blob<T, Allocator>, T> {
    using Indexing = BlobIndexing<Blob<T, Allocator>, T>;

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

    void swap(Blob& other) noexcept {
        std::swap(shape_, other.shape_);
        std::swap(count_, other.count_);
        std::swap(has_shape_, other.has_shape_);
        std::swap(data_, other.data_);
        std::swap(diff_, other.diff_);
        std::swap(retired_data_stats_, other.retired_data_stats_);
        std::swap(retired_diff_stats_, other.retired_diff_stats_);
        std::swap(stream_, other.stream_);
        std::swap(fixed_by_, other.fixed_by_);
    }

    // ---- shape -----------------------------------------------------------------------------

    // Shape queries (extent by axis, counts of axis ranges, legacy 4-D accessors, offsets, checked
    // element reads) come from BlobIndexing.
    using Indexing::count;
    using Indexing::shape;

    [[nodiscard]] const Shape& shape() const noexcept { return shape_; }
    [[nodiscard]] std::int64_t count() const noexcept { return count_; }
    /// Elements the buffers can hold without reallocating.
    [[nodiscard]] std::int64_t capacity() const noexcept {
        if (!data_) {
            return 0;
        }
        return static_cast<std::int64_t>(std::min(data_->size(), diff_->size()) / sizeof(T));
    }

    // ---- reshape ---------------------------------------------------------------------------

    /// Changes the shape. Reallocates (dropping the contents) only when the count exceeds the
    /// capacity. \throws ShapeError on a bad shape; StateError for another shape when the layout
    /// is fixed (see fix_layout). The blob is then unchanged.
    void reshape(const Shape& shape) {
        if (fixed_by_ != nullptr && (!has_shape_ || shape != shape_)) {
            refuse_layout_change("Blob::reshape", "reshape to " + shape.to_string());
        }
        const std::int64_t n = shape.count();
        if (!data_ || n > capacity()) {
            replace_buffers(checked_bytes("Blob::reshape", n));
        }
        shape_ = shape;
        count_ = n;
        has_shape_ = true;
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
            shape_ = Shape{};
            count_ = 0;
            has_shape_ = false;
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
        if (!data_) {
            replace_buffers(checked_bytes("Blob::reserve", n));
        } else if (n > capacity()) {
            reallocate_keeping(checked_bytes("Blob::reserve", n));
        }
    }

    /// Reallocates to exactly count() elements when the capacity is larger, keeping the contents
    /// of data and diff (copied on the side where each is fresh). A blob that shared its buffers
    /// gets its own.
    void shrink_to_fit() {
        if (!data_ || capacity() == count_) {
            return;
        }
        if (fixed_by_ != nullptr) {
            refuse_layout_change("Blob::shrink_to_fit", "new buffers");
        }
        reallocate_keeping(static_cast<std::size_t>(count_) * sizeof(T));
    }

    // ---- data and diff ---------------------------------------------------------------------

    [[nodiscard]] std::span<const T> host_data() const { return host_view(data_); }
    [[nodiscard]] std::span<T> mutable_host_data() { return mutable_host_view(data_); }
    [[nodiscard]] const T* device_data() const { return device_view(data_); }
    [[nodiscard]] T* mutable_device_data() { return mutable_device_view(data_); }
    [[nodiscard]] std::span<const T> host_diff() const { return host_view(diff_); }
    [[nodiscard]] std::span<T> mutable_host_diff() { return mutable_host_view(diff_); }
    [[nodiscard]] const T* device_diff() const { return device_view(diff_); }
    [[nodiscard]] T* mutable_device_diff() { return mutable_device_view(diff_); }

    /// Host data about to be overwritten whole: no zero-fill, no copy from the device. (When the
    /// capacity exceeds the count, the tail past count() stays valid: see SyncedBuffer's overload.)
    [[nodiscard]] std::span<T> mutable_host_data_for_overwrite() { return overwrite_host_view(data_); }
    /// Host diff about to be overwritten whole: no zero-fill, no copy from the device.
    [[nodiscard]] std::span<T> mutable_host_diff_for_overwrite() { return overwrite_host_view(diff_); }
    /// Device data about to be overwritten whole: no zero-fill, no copy from the host.
    [[nodiscard]] T* mutable_device_data_for_overwrite() { return overwrite_device_view(data_); }
    /// Device diff about to be overwritten whole: no zero-fill, no copy from the host.
    [[nodiscard]] T* mutable_device_diff_for_overwrite() { return overwrite_device_view(diff_); }

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
        lend("Blob::set_host_data", false, data, elements, std::move(borrow));
    }
    /// Read-only lending of host memory: never written; the first mutable access copies it first.
    void set_host_data(const T* data, std::size_t elements, std::shared_ptr<void> keep_alive = {}) {
        lend("Blob::set_host_data", false, const_cast<T*>(data), elements, Borrow{std::move(keep_alive), true});
    }
    /// Lends device memory as the device side of the data, as Caffe's `set_gpu_data` (see
    /// set_host_data). \throws NoDeviceError on a host-only blob, and as set_host_data.
    void set_device_data(T* data, std::size_t elements, Borrow borrow = {}) {
        lend("Blob::set_device_data", true, data, elements, std::move(borrow));
    }

    /// Where the fresh data / diff is (uninitialized for an empty blob).
    [[nodiscard]] Head data_head() const noexcept { return data_ ? data_->head() : Head::uninitialized; }
    [[nodiscard]] Head diff_head() const noexcept { return diff_ ? diff_->head() : Head::uninitialized; }

    /// Allocations, copies and kernels of data / diff over the blob's life, across reallocations
    /// (a shared buffer's counts include what its other owners did with it).
    [[nodiscard]] TransferStats data_stats() const {
        return data_ ? retired_data_stats_ + data_->stats() : retired_data_stats_;
    }
    [[nodiscard]] TransferStats diff_stats() const {
        return diff_ ? retired_diff_stats_ + diff_->stats() : retired_diff_stats_;
    }
    void reset_stats() {
        retired_data_stats_ = {};
        retired_diff_stats_ = {};
        if (data_) {
            data_->reset_stats();
            diff_->reset_stats();
        }
    }

    /// The buffers themselves (null for a default-constructed blob), for the math and IO layers
    /// and for interop. Sharing them shares the memory.
    [[nodiscard]] const std::shared_ptr<buffer_type>& data_buffer() const noexcept { return data_; }
    [[nodiscard]] const std::shared_ptr<buffer_type>& diff_buffer() const noexcept { return diff_; }

    /// The stream synchronous copies of both buffers run on (kept across reallocations).
    void set_stream(stream_type stream) {
        stream_ = stream;
        if (data_) {
            data_->set_stream(stream);
            diff_->set_stream(stream);
        }
    }
    [[nodiscard]] stream_type stream() const noexcept { return stream_; }

    /// True unless default-constructed (or moved from): the blob has a shape, possibly rank 0.
    [[nodiscard]] bool has_shape() const noexcept { return has_shape_; }

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

    /// Copies `source`'s data (or, with `copy_diff`, its diff only) into this blob, on the side
    /// where the source is fresh: device to device when its head is on the device or synced.
    /// \throws ShapeError when the shapes differ and `reshape` is false. On any exception the
    /// blob keeps its shape and buffers.
    template <SyncedAllocator A2>
    void copy_from(const Blob<T, A2>& source, bool copy_diff = false, bool reshape = false) {
        if (static_cast<const void*>(&source) == static_cast<const void*>(this)) {
            return;
        }
        if (source.shape() != shape_ || source.has_shape() != has_shape_) {
            if (!reshape) {
                throw ShapeError("Blob::copy_from: source shape " + source.shape_string() + " differs from " +
                                 this->shape_string() + " (pass reshape = true to adopt it)");
            }
        }
        Blob saved = shallow_copy();
        try {
            if (reshape) {
                reshape_like(source);
            }
            if (count_ != 0) {
                const auto bytes = static_cast<std::size_t>(count_) * sizeof(T);
                if (copy_diff) {
                    diff_->copy_from(*source.diff_buffer(), bytes);
                } else {
                    data_->copy_from(*source.data_buffer(), bytes);
                }
            }
        } catch (...) {
            restore(std::move(saved));
            throw;
        }
    }

    /// Takes `staged`'s shape and its data and/or diff buffer (`take_data`, `take_diff`) in one step
    /// that cannot fail: the commit of contents built aside, as every loader builds a file's
    /// contents before it touches the target, so that a failure leaves the target as it was. A
    /// buffer not taken is kept when the new count fits in it (reshape's rule: its contents stay)
    /// and replaced by `staged`'s otherwise. A taken buffer replaces the old one, so sharing of that
    /// buffer with another blob (`share_data`) ends; transfer statistics carry over. `staged` is
    /// left without buffers.
    ///
    /// \throws StateError, before any change, when the layout is fixed (copy into such a blob instead).
    void commit(Blob&& staged, bool take_data, bool take_diff) {
        if (fixed_by_ != nullptr) {
            refuse_layout_change("Blob::commit", "new buffers");
        }
        const auto take = [&staged](std::shared_ptr<buffer_type>& mine, std::shared_ptr<buffer_type>& theirs,
                                    TransferStats& retired, bool wanted) noexcept {
            const bool fits = mine && mine->size() / sizeof(T) >= static_cast<std::size_t>(staged.count_);
            if (!wanted && fits) {
                return;
            }
            if (mine) {
                retire(mine, retired);
            }
            mine = std::move(theirs);
        };
        take(data_, staged.data_, retired_data_stats_, take_data);
        take(diff_, staged.diff_, retired_diff_stats_, take_diff);
        shape_ = staged.shape_;
        count_ = staged.count_;
        has_shape_ = staged.has_shape_;
        staged.data_.reset();
        staged.diff_.reset();
    }

    /// Makes data the same buffer as `other`'s (no copy; the buffer lives while either blob holds
    /// it). The shape is kept. \throws ShapeError unless both have a shape and the counts match
    void share_data(const Blob& other) {
        check_share("Blob::share_data", other);
        if (fixed_by_ != nullptr && data_ != other.data_) {
            refuse_layout_change("Blob::share_data", "another blob's data buffer");
        }
        if (data_ != other.data_) {
            retire(data_, retired_data_stats_);
            data_ = other.data_;
        }
    }
    /// Makes diff the same buffer as `other`'s (no copy). \throws ShapeError unless both have a
    /// shape and the counts match
    void share_diff(const Blob& other) {
        check_share("Blob::share_diff", other);
        if (fixed_by_ != nullptr && diff_ != other.diff_) {
            refuse_layout_change("Blob::share_diff", "another blob's diff buffer");
        }
        if (diff_ != other.diff_) {
            retire(diff_, retired_diff_stats_);
            diff_ = other.diff_;
        }
    }

    /// A deep copy: same shape, data and diff, each copied on the side where it is fresh.
    [[nodiscard]] Blob clone() const {
        Blob copy;
        copy.stream_ = stream_;
        if (!has_shape_) {
            return copy;
        }
        copy.reshape(shape_);
        if (count_ != 0) {
            const auto bytes = static_cast<std::size_t>(count_) * sizeof(T);
            if (data_->head() != Head::uninitialized) {
                copy.data_->copy_from(*data_, bytes);
            }
            if (diff_->head() != Head::uninitialized) {
                copy.diff_->copy_from(*diff_, bytes);
            }
        }
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

    static std::size_t checked_bytes(const char* op, std::int64_t n) {
        constexpr auto limit = static_cast<std::uint64_t>(std::numeric_limits<std::ptrdiff_t>::max()) / sizeof(T);
        if (static_cast<std::uint64_t>(n) > limit) {
            throw ShapeError(std::string(op) + ": " + std::to_string(n) + " elements of " +
                             std::string(element_name<T>()) + " exceed the addressable size");
        }
        return static_cast<std::size_t>(n) * sizeof(T);
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
        install(std::move(data), std::move(diff));
    }

    // New buffers of `bytes` holding the count() elements of data and diff, each copied on the side
    // where it is fresh. Built aside and installed last, so a failure changes nothing.
    void reallocate_keeping(std::size_t bytes) {
        const std::size_t kept = static_cast<std::size_t>(count_) * sizeof(T);
        auto data = make_buffer(bytes);
        auto diff = make_buffer(bytes);
        if (data_->head() != Head::uninitialized) {
            data->copy_from(*data_, kept);  // keeps the tail past `kept` valid
        }
        if (diff_->head() != Head::uninitialized) {
            diff->copy_from(*diff_, kept);
        }
        install(std::move(data), std::move(diff));
    }

    void install(std::shared_ptr<buffer_type> data, std::shared_ptr<buffer_type> diff) noexcept {
        if (data_) {
            retire(data_, retired_data_stats_);
            retire(diff_, retired_diff_stats_);
        }
        data_ = std::move(data);
        diff_ = std::move(diff);
    }

    void lend(const char* op, bool device, T* data, std::size_t elements, Borrow borrow) {
        if (device) {
            require_device(op);
        }
        if (!has_shape_) {
            throw StateError(std::string(op) + ": the blob has no shape (reshape it first)");
        }
        if (fixed_by_ != nullptr) {
            refuse_layout_change(op, "lent memory");
        }
        if (elements < static_cast<std::size_t>(count_)) {
            throw ShapeError(std::string(op) + ": " + std::to_string(elements) + " elements lent, but the blob " +
                             shape_.to_string() + " holds " + std::to_string(count_));
        }
        const std::size_t bytes = static_cast<std::size_t>(count_) * sizeof(T);
        // Either buffer would free its block under the borrow: the data when a capacity above the
        // count moves the borrow to a new buffer (below), or when it or a blob sharing it lets go
        // later; the diff on share_diff, reshape or destruction.
        for (const auto& [buffer, name] : {std::pair{data_.get(), "data"}, std::pair{diff_.get(), "diff"}}) {
            if (buffer->owns(data, bytes)) {
                throw StateError(std::string(op) + ": the memory belongs to this blob's " + name +
                                 " (alias buffers with share_data / share_diff, or copy with copy_from)");
            }
        }
        auto lend_to = [&](buffer_type& buffer) {
            if (device) {
                buffer.set_device_data(data, bytes, std::move(borrow));
            } else {
                buffer.set_host_data(data, bytes, std::move(borrow));
            }
        };
        if (data_->size() == bytes) {
            lend_to(*data_);
            return;
        }
        auto fitted = make_buffer(bytes);  // lent to before it replaces the data, so a throw changes nothing
        lend_to(*fitted);
        retire(data_, retired_data_stats_);
        data_ = std::move(fitted);
    }

    [[noreturn]] void refuse_layout_change(std::string_view op, const std::string& change) const {
        throw StateError(std::string(op) + ": the blob's shape and buffers are fixed by " + fixed_by_ + " (" +
                         this->shape_string() + "); " + change + " refused (copy into the blob instead)");
    }

    static void retire(const std::shared_ptr<buffer_type>& buffer, TransferStats& retired) noexcept {
        try {
            retired += buffer->stats();
        } catch (...) {  // locking a mutex can fail in theory; the counts are then lost, nothing else
        }
    }

    // A blob that shares this one's buffers (to restore after a failed copy_from).
    Blob shallow_copy() const {
        Blob b;
        b.shape_ = shape_;
        b.count_ = count_;
        b.has_shape_ = has_shape_;
        b.data_ = data_;
        b.diff_ = diff_;
        b.retired_data_stats_ = retired_data_stats_;
        b.retired_diff_stats_ = retired_diff_stats_;
        return b;
    }

    void restore(Blob&& saved) noexcept {
        shape_ = saved.shape_;
        count_ = saved.count_;
        has_shape_ = saved.has_shape_;
        data_ = std::move(saved.data_);
        diff_ = std::move(saved.diff_);
        retired_data_stats_ = saved.retired_data_stats_;
        retired_diff_stats_ = saved.retired_diff_stats_;
    }

    void check_share(const char* op, const Blob& other) const {
        if (!other.has_shape_ || !has_shape_) {  // a shapeless blob may hold buffers (reserve) but no elements
            throw ShapeError(std::string(op) + ": both blobs need a shape (" + other.shape_string() + " shared into " +
                             this->shape_string() + ")");
        }
        if (other.count_ != count_) {
            throw ShapeError(std::string(op) + ": counts differ (" + other.shape_string() + " shared into " +
                             this->shape_string() + ")");
        }
    }

    std::span<const T> host_view(const std::shared_ptr<buffer_type>& b) const {
        if (count_ == 0) {
            return {};
        }
        return {static_cast<const T*>(b->host_data()), static_cast<std::size_t>(count_)};
    }
    std::span<T> mutable_host_view(const std::shared_ptr<buffer_type>& b) {
        if (count_ == 0) {
            return {};
        }
        return {static_cast<T*>(b->mutable_host_data()), static_cast<std::size_t>(count_)};
    }
    // A blob without buffers has no device memory: null, or NoDeviceError for a host-only backend.
    static void require_device(const char* op) {
        if constexpr (!device_backend::has_device) {
            throw NoDeviceError(std::string(op) + ": this blob is host-only (device backend " +
                                std::string(device_backend::name) + ")");
        }
    }
    const T* device_view(const std::shared_ptr<buffer_type>& b) const {
        if (!b) {
            require_device("Blob::device_data");
            return nullptr;
        }
        return static_cast<const T*>(b->device_data());
    }
    T* mutable_device_view(const std::shared_ptr<buffer_type>& b) {
        if (!b) {
            require_device("Blob::mutable_device_data");
            return nullptr;
        }
        return static_cast<T*>(b->mutable_device_data());
    }

    std::span<T> overwrite_host_view(const std::shared_ptr<buffer_type>& b) {
        if (count_ == 0) {
            return {};
        }
        void* p = b->mutable_host_data_for_overwrite(static_cast<std::size_t>(count_) * sizeof(T));
        return {static_cast<T*>(p), static_cast<std::size_t>(count_)};
    }
    T* overwrite_device_view(const std::shared_ptr<buffer_type>& b) {
        if (!b) {
            require_device("Blob::mutable_device_data_for_overwrite");
            return nullptr;
        }
        return static_cast<T*>(b->mutable_device_data_for_overwrite(static_cast<std::size_t>(count_) * sizeof(T)));
    }

    Shape shape_{};
    std::int64_t count_ = 0;
    bool has_shape_ = false;
    std::shared_ptr<buffer_type> data_;
    std::shared_ptr<buffer_type> diff_;
    TransferStats retired_data_stats_{};
    TransferStats retired_diff_stats_{};
    stream_type stream_ = device_backend::default_stream();
    const char* fixed_by_ = nullptr;  // the owner that fixed the layout (fix_layout), or null
};

SYNCBLOB_END_NAMESPACE

#include "blob/print.hpp"  // operator<< for Blob
