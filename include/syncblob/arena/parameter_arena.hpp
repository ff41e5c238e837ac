// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// `ParameterArena<T, Allocator>`: many blobs whose data and diff are slices of one data buffer and
/// one diff buffer, so that a whole model's gradients can be all-reduced in a few calls
/// (`syncblob/comm/mpi.hpp`, `syncblob/comm/nccl.hpp`), and its buckets.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../blob/blob.hpp"
#include "../core/error.hpp"
#include "../core/prefetch.hpp"
#include "../core/shape.hpp"
#include "../core/thread_pool.hpp"
#include "arena_buffer.hpp"
#include "detail/blob_range.hpp"
#include "detail/storage.hpp"

SYNCBLOB_BEGIN_NAMESPACE

/// Blobs as slices of one data buffer and one diff buffer (Caffe's flat parameter buffers).
///
/// `add` returns blobs until `seal()`, which makes one allocation per buffer and side (zero-filled)
/// and lends each blob its slices, aligned to `alignment` bytes, host and device alike. Before seal
/// the blobs are the caller's to reshape: seal lays out the shapes they have then. Each blob
/// then keeps its own state machine on its slices, with every accessor of `Blob`; `flat_data()`
/// and `flat_diff()` see the union. After seal every blob's head is at_host (its zeros are fresh
/// there; contents written before seal are kept), so the first device access of a blob copies it.
///
/// After seal the blobs' shapes and buffers are fixed: `add` and `seal` throw `StateError`, and so
/// does every call on a blob that would change its shape or give it other buffers (`reshape` to
/// another shape, `share_data`, `set_host_data`…; see `Blob::fix_layout`), changing nothing.
/// Reshaping to the same shape, copies into a blob and loads of its own shape work. A blob moved
/// out of the arena (its place left empty) is reported by the next arena operation, before any
/// data moves.
/// Move-only; the blobs' addresses stay the same for the arena's life, and their memory lives as
/// long as any of their buffers does.
template <Element T, SyncedAllocator Allocator = HostOnly>
class ParameterArena {
public:
    using value_type = T;
    using allocator_type = Allocator;
    using blob_type = Blob<T, Allocator>;
    using buffer_type = BufferFor<Allocator>;
    using device_backend = typename Allocator::device_backend;
    using stream_type = typename device_backend::stream_type;

    /// Every slice starts at a multiple of this many bytes from its buffer's start, which is itself
    /// so aligned (cudaMalloc's guarantee; NCCL and vector loads want it).
    static constexpr std::size_t alignment = 256;

    ParameterArena() = default;
    ParameterArena(const ParameterArena&) = delete;
    ParameterArena& operator=(const ParameterArena&) = delete;
    ParameterArena(ParameterArena&&) noexcept = default;
    ParameterArena& operator=(ParameterArena&&) noexcept = default;

    /// The memory is freed when the last blob buffer borrowing it lets go, after the work queued on
    /// the arena's stream.
    ~ParameterArena() { release(); }

    /// A new blob of `shape` (count 0 allowed), its memory given at seal.
    /// \throws StateError after seal; ShapeError on a bad shape (nothing changes).
    blob_type& add(const Shape& shape) {
        if (sealed()) {
            throw StateError("ParameterArena::add: the arena is sealed (" + std::to_string(blobs_.size()) +
                             " blobs); add every blob before seal()");
        }
        auto blob = std::make_unique<blob_type>(shape);
        blob->set_stream(stream_);
        blobs_.push_back(std::move(blob));
        return *blobs_.back();
    }
    blob_type& add(std::initializer_list<std::int64_t> shape) { return add(Shape(shape)); }

    /// Lays the blobs out in order of addition, each with the shape it has now, allocates the data
    /// and diff buffers (host and, for a backend with a device, device: one block each,
    /// zero-filled) and lends every blob its slices. Contents a blob was given before seal are
    /// copied into its slices.
    /// \throws StateError when already sealed or when a blob has no shape (moved out of the arena);
    /// ShapeError when the blobs laid out with their padding exceed the addressable size (both
    /// checked before anything is allocated); std::bad_alloc (nothing changes).
    void seal() {
        if (sealed()) {
            throw StateError("ParameterArena::seal: the arena is already sealed");
        }
        std::vector<Slice> slices = layout();
        const std::size_t offset =
            slices.empty() ? 0 : detail::round_up(slices.back().offset + slices.back().bytes, alignment);
        auto storage = std::make_shared<detail::ArenaStorage<Allocator>>(offset, alignment, stream_);
        std::vector<std::shared_ptr<buffer_type>> data_buffers;
        std::vector<std::shared_ptr<buffer_type>> diff_buffers;
        data_buffers.reserve(blobs_.size());
        diff_buffers.reserve(blobs_.size());
        // One pass over the blobs: at a million blobs, each pass is a million cache misses, and
        // each lend takes the buffer's lock: the blobs and buffers ahead are fetched meanwhile.
        for (std::size_t i = 0; i < blobs_.size(); ++i) {
            fetch_ahead(i);
            blob_type& blob = *blobs_[i];
            lend(*blob.data_buffer(), storage->data, slices[i], storage);
            lend(*blob.diff_buffer(), storage->diff, slices[i], storage);
            data_buffers.push_back(blob.data_buffer());
            diff_buffers.push_back(blob.diff_buffer());
            blob.fix_layout("ParameterArena::seal");
        }
        data_buffers_ = std::move(data_buffers);
        diff_buffers_ = std::move(diff_buffers);
        slices_ = std::move(slices);
        storage_ = std::move(storage);
    }

    [[nodiscard]] bool sealed() const noexcept { return storage_ != nullptr; }

    /// Number of blobs.
    [[nodiscard]] std::size_t size() const noexcept { return blobs_.size(); }
    /// Blob `i` in order of addition (unchecked).
    [[nodiscard]] blob_type& operator[](std::size_t i) noexcept { return *blobs_[i]; }
    [[nodiscard]] const blob_type& operator[](std::size_t i) const noexcept { return *blobs_[i]; }
    /// The blobs, in order of addition (a range of references).
    [[nodiscard]] auto blobs() noexcept {
        return detail::BlobRange<blob_type, std::vector<std::unique_ptr<blob_type>>>(blobs_);
    }
    [[nodiscard]] auto blobs() const noexcept {
        return detail::BlobRange<const blob_type, const std::vector<std::unique_ptr<blob_type>>>(blobs_);
    }

    /// Elements of all blobs (padding excluded). Before seal the blobs may hold more than an arena
    /// can (seal refuses them): the sum then stops at INT64_MAX.
    [[nodiscard]] std::int64_t count() const noexcept {
        std::int64_t n = 0;
        for (const auto& b : blobs_) {
            if (b->count() > INT64_MAX - n) {  // counts are never negative
                return INT64_MAX;
            }
            n += b->count();
        }
        return n;
    }
    /// Bytes of each buffer, padding included (0 before seal).
    [[nodiscard]] std::size_t bytes() const noexcept { return storage_ ? storage_->bytes : 0; }
    /// Where blob `i`'s slices lie. \throws StateError before seal; IndexError when out of range.
    [[nodiscard]] Slice slice(std::size_t i) const {
        require_sealed("ParameterArena::slice");
        if (i >= slices_.size()) {
            throw IndexError("ParameterArena::slice: blob " + std::to_string(i) + " out of range [0, " +
                             std::to_string(slices_.size()) + ")");
        }
        return slices_[i];
    }
    /// The blobs' shapes, in order of addition (a range of references, each the blob's own
    /// `shape()`): after seal, the shapes it laid out.
    [[nodiscard]] auto shapes() const noexcept {
        return detail::BlobRange<const blob_type, const std::vector<std::unique_ptr<blob_type>>, ShapeOf>(blobs_);
    }

    /// The data of every blob as one flat buffer (an `ArenaBuffer`, a view: a blob's own buffer is
    /// its `data_buffer()`). \throws StateError before seal or when a blob left its slices.
    [[nodiscard]] ArenaBuffer<T, Allocator> flat_data() const {
        check("ParameterArena::flat_data");
        return view(data_buffers_, storage_->data);
    }
    /// The diff of every blob as one flat buffer. \throws as flat_data.
    [[nodiscard]] ArenaBuffer<T, Allocator> flat_diff() const {
        check("ParameterArena::flat_diff");
        return view(diff_buffers_, storage_->diff);
    }
    /// Both flat buffers.
    struct FlatBuffers {
        ArenaBuffer<T, Allocator> data;
        ArenaBuffer<T, Allocator> diff;
    };
    /// `flat_data()` and `flat_diff()` with the blobs checked once for both (at a million blobs,
    /// each check is a pass over a million objects); `op` names the caller in the error.
    /// \throws as flat_data.
    [[nodiscard]] FlatBuffers flat(std::string_view op = "ParameterArena::flat") const {
        check(op);
        return {view(data_buffers_, storage_->data), view(diff_buffers_, storage_->diff)};
    }
    /// The names `flat_data` and `flat_diff` had before 0.2 (`Blob::data_buffer()` is a pointer to
    /// a blob's own buffer; these are views of every blob at once). Kept for the 0.2 releases.
    [[nodiscard, deprecated("use ParameterArena::flat_data()")]] ArenaBuffer<T, Allocator> data_buffer() const {
        return flat_data();
    }
    [[nodiscard, deprecated("use ParameterArena::flat_diff()")]] ArenaBuffer<T, Allocator> diff_buffer() const {
        return flat_diff();
    }

    /// The diff split into contiguous runs of whole blobs, in reverse order of addition (the order
    /// backward produces gradients): the first run holds at most `first_bytes`, the others at most
    /// `max_bytes` (a blob larger than that is a run of its own). Empty blobs join the run they
    /// sit in. Every blob is in exactly one run. \throws StateError before seal; ShapeError when a
    /// limit is 0.
    [[nodiscard]] std::vector<Bucket> buckets(std::size_t first_bytes, std::size_t max_bytes) const {
        require_sealed("ParameterArena::buckets");
        if (first_bytes == 0 || max_bytes == 0) {
            throw ShapeError("ParameterArena::buckets: a bucket limit of 0 bytes (first " +
                             std::to_string(first_bytes) + ", then " + std::to_string(max_bytes) + ")");
        }
        std::vector<Bucket> out;
        std::size_t end = slices_.size();
        while (end > 0) {
            const std::size_t limit = out.empty() ? first_bytes : max_bytes;
            std::size_t first = end - 1;
            while (first > 0 && span(first - 1, end) <= limit) {
                --first;
            }
            out.push_back({first, end, slices_[first].offset, span(first, end)});
            end = first;
        }
        return out;
    }
    /// Runs of at most `max_bytes`.
    [[nodiscard]] std::vector<Bucket> buckets(std::size_t max_bytes) const { return buckets(max_bytes, max_bytes); }
    /// The trainers' defaults: a first run of 1 MiB (the last layers' gradients go out early), then 25 MiB.
    [[nodiscard]] std::vector<Bucket> buckets() const { return buckets(std::size_t{1} << 20, std::size_t{25} << 20); }

    /// The stream of every blob's buffers (and of the arena's own zero-fill and release).
    void set_stream(stream_type stream) {
        stream_ = stream;
        for (auto& b : blobs_) {
            b->set_stream(stream);
        }
        if (storage_) {
            storage_->stream = stream;
        }
    }
    [[nodiscard]] stream_type stream() const noexcept { return stream_; }

    /// Throws StateError naming the first blob that is no longer what seal() laid out (a new
    /// shape, or buffers other than its slices), or when the arena is not sealed. `op` names the caller.
    void check(std::string_view op) const {
        require_sealed(op);
        const std::size_t n = blobs_.size();
        std::size_t bad = n;
        if (n < parallel_check) {
            bad = first_changed(0, n);
        } else {  // a pass over a million blobs is a miss or two each: split among the threads
            const unsigned parts = parallel::max_threads();
            std::atomic<std::size_t> found{n};
            parallel::run(parts, [&](unsigned p) {
                const std::size_t end = n * (p + 1) / parts;
                const std::size_t i = first_changed(n * p / parts, end);
                for (std::size_t seen = found.load(); i < end && i < seen && !found.compare_exchange_weak(seen, i);) {
                }
            });
            bad = found.load();
        }
        if (bad == n) {
            return;
        }
        const blob_type& b = *blobs_[bad];
        const std::size_t elements = slices_[bad].bytes / sizeof(T);
        const std::string was = std::to_string(elements) + (elements == 1 ? " element" : " elements") + " at seal";
        if (!b.has_shape()) {
            throw StateError(std::string(op) + ": blob " + std::to_string(bad) + " (" + was +
                             ") has no shape now: it was moved out of the arena");
        }
        throw StateError(std::string(op) + ": blob " + std::to_string(bad) + " (" + was + ", " + b.shape_string() +
                         " now) no longer uses the arena's slices: it was replaced after seal");
    }

private:
    // How many blobs ahead a pass fetches a blob, and half as many its buffers (which it finds
    // through the blob fetched before).
    static constexpr std::size_t ahead = 16;

    struct ShapeOf {
        const Shape& operator()(const blob_type& blob) const noexcept { return blob.shape(); }
    };

    // Blobs from which `check` splits its pass among the threads (below, waking them costs more).
    static constexpr std::size_t parallel_check = std::size_t{1} << 16;

    // The first blob of [first, end) that is no longer what seal() laid out, or `end`. A blob with
    // seal's mark keeps its shape (Blob::fix_layout refuses another) and moves with it, its shape
    // and buffers together: a blob that has the mark and both of its slices' buffers is the blob
    // seal laid out, its shape included. A blob moved out leaves one without either behind.
    [[nodiscard]] std::size_t first_changed(std::size_t first, std::size_t end) const noexcept {
        for (std::size_t i = first; i < end; ++i) {
            const blob_type& b = *blobs_[i];
            if (!b.layout_fixed() || b.data_buffer() != data_buffers_[i] || b.diff_buffer() != diff_buffers_[i]) {
                return i;
            }
        }
        return end;
    }

    // Where each blob's slices go: in order of addition, each at a multiple of `alignment`.
    // \throws StateError for a blob without a shape (moved out: it has no buffers to lend);
    // ShapeError when the slices and their padding (and the alignment slack of the blocks) would
    // pass PTRDIFF_MAX bytes, before any offset wraps round.
    std::vector<Slice> layout() const {
        constexpr auto limit = static_cast<std::size_t>(PTRDIFF_MAX) - 2 * alignment;
        std::vector<Slice> slices;
        slices.reserve(blobs_.size());
        std::size_t offset = 0;
        for (std::size_t i = 0; i < blobs_.size(); ++i) {
            const blob_type& blob = *blobs_[i];
            if (!blob.has_shape()) {
                throw StateError("ParameterArena::seal: blob " + std::to_string(i) + " has no shape (moved out of " +
                                 "the arena of " + std::to_string(blobs_.size()) +
                                 " blobs); put a blob back in its place before seal");
            }
            const auto bytes = static_cast<std::size_t>(blob.count()) * sizeof(T);  // a blob's bytes fit
            if (bytes > limit - offset) {
                throw ShapeError("ParameterArena::seal: blob " + std::to_string(i) + " (" + blob.shape_string() + ", " +
                                 std::to_string(bytes) + " bytes) at offset " + std::to_string(offset) +
                                 " takes the arena past the addressable size");
            }
            slices.push_back({offset, bytes});
            offset = detail::round_up(offset + bytes, alignment);
        }
        return slices;
    }

    // Asks for blob i + ahead and the buffers of blob i + ahead / 2 (see core/prefetch.hpp).
    SYNCBLOB_ALWAYS_INLINE void fetch_ahead(std::size_t i) const noexcept {
        if (i + ahead < blobs_.size()) {
            detail::prefetch_bytes(blobs_[i + ahead].get(), sizeof(blob_type));
        }
        if (i + ahead / 2 < blobs_.size()) {
            const blob_type& b = *blobs_[i + ahead / 2];
            fetch(b.data_buffer().get());
            fetch(b.diff_buffer().get());
        }
    }

    // Asks for a buffer and the two counts that make_shared put before it (none: a blob moved out).
    SYNCBLOB_ALWAYS_INLINE static void fetch(const buffer_type* buffer) noexcept {
        if (buffer != nullptr) {
            detail::prefetch_bytes(buffer, sizeof(buffer_type), 16);
        }
    }

    // Lets go of the blobs and of the arena's handles to their buffers in one pass, blob by blob
    // (a pass per vector would miss the cache on every buffer three times at a million blobs, and
    // each release is an atomic decrement, which waits for its miss), the blobs ahead fetched.
    void release() noexcept {
        const std::size_t n = blobs_.size();
        const bool handles = data_buffers_.size() == n && diff_buffers_.size() == n;
        for (std::size_t i = 0; i < n; ++i) {
            fetch_ahead(i);
            if (handles) {
                data_buffers_[i].reset();
                diff_buffers_[i].reset();
            }
            blobs_[i].reset();
        }
    }

    void require_sealed(std::string_view op) const {
        if (!sealed()) {
            throw StateError(std::string(op) + ": the arena is not sealed (call seal() after adding its " +
                             std::to_string(blobs_.size()) + " blobs)");
        }
    }

    // Bytes from the start of blob `first`'s slice to the end of blob `end - 1`'s.
    std::size_t span(std::size_t first, std::size_t end) const {
        return slices_[end - 1].offset + slices_[end - 1].bytes - slices_[first].offset;
    }

    ArenaBuffer<T, Allocator> view(const std::vector<std::shared_ptr<buffer_type>>& buffers,
                                   const detail::ArenaBlocks& blocks) const {
        return {buffers, slices_, static_cast<T*>(blocks.host), static_cast<T*>(blocks.device), storage_->bytes};
    }

    // Keeps what the buffer holds (its fresh bytes, when it has any), then lends it its slices: the
    // device slice first, then the host slice, so the head ends at_host.
    static void lend(buffer_type& buffer, const detail::ArenaBlocks& blocks, const Slice& s,
                     const std::shared_ptr<detail::ArenaStorage<Allocator>>& storage) {
        if (s.bytes == 0) {
            return;
        }
        auto* host = static_cast<std::byte*>(blocks.host) + s.offset;
        if (buffer.head() != Head::uninitialized) {
            std::memcpy(host, buffer.host_data(), s.bytes);
        }
        if constexpr (device_backend::has_device) {
            buffer.set_device_data(static_cast<std::byte*>(blocks.device) + s.offset, s.bytes, Borrow{storage});
        }
        buffer.set_host_data(host, s.bytes, Borrow{storage});
    }

    std::vector<std::unique_ptr<blob_type>> blobs_;
    std::vector<Slice> slices_;
    std::vector<std::shared_ptr<buffer_type>> data_buffers_;
    std::vector<std::shared_ptr<buffer_type>> diff_buffers_;
    std::shared_ptr<detail::ArenaStorage<Allocator>> storage_;
    stream_type stream_ = device_backend::default_stream();
};

SYNCBLOB_END_NAMESPACE
