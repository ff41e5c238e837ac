// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Internal, shared beyond its folder: used by the shared loads across ranks (comm/detail/shared_load.hpp),
/// so it sits outside detail/; its names stay in a detail namespace and are no user API.
///
/// How a checkpoint load is cut into chunks. The tensors of the arena's data (then of its diff) are
/// walked in the arena's order and cut, at element boundaries, into pieces; consecutive pieces form
/// a chunk of at most `chunk_bytes` staging bytes, which one reader reads and one copy moves:
/// - a *direct* chunk is an image of a run of the arena, `[arena_offset, arena_offset + bytes)`,
///   padding between slices included: its pieces are read (and, where the dtype differs, converted
///   on the host) into the staging block where they sit in the arena, so one copy puts them all in
///   place;
/// - a *device-converting* chunk holds its pieces' raw bytes, each at a 256-byte boundary of the
///   staging block; one copy moves them to device staging, and one kernel per piece converts them
///   into the arena.
/// Tensors converted on the device never share a chunk with the others, and a direct chunk never
/// spans a slice the load does not write (the diff of a blob whose diff the file does not hold).

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../core/element.hpp"
#include "../core/error.hpp"
#include "../core/thread_pool.hpp"
#include "options.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace checkpoint::detail {

/// A tensor to load: where it goes, where it is read from and how it is staged.
struct PlanTensor {
    std::size_t tensor = 0;       ///< position in `Checkpoint::tensors()`
    std::size_t dst = 0;          ///< byte offset of its slice in the arena's buffer
    std::uint64_t count = 0;      ///< elements to load
    Dtype dtype = Dtype::F32;     ///< its elements in the file
    bool device_convert = false;  ///< staged raw and converted by a device kernel
    std::uint64_t first = 0;      ///< the first element to load: elements [first, first + count) load
    std::size_t shard = 0;        ///< the shard that holds it (`Tensor::shard`)
    std::uint64_t offset = 0;     ///< where its bytes start in the shard file (`Tensor::offset`)
};

/// Elements of a tensor, `count` from the one at byte `source` of its shard. It carries what its
/// read needs (the shard, the place in it, the dtype), so a reader does not go back to the tensor's
/// description: at a million tensors that was two cache lines a piece, read again after the plan had
/// read them. 48 bytes.
struct Piece {
    std::size_t tensor = 0;
    std::uint64_t count = 0;
    std::size_t dst = 0;       ///< byte offset in the arena's buffer
    std::size_t staging = 0;   ///< byte offset in the staging block
    std::uint64_t source = 0;  ///< byte offset of its first element in the shard file
    /// The shard that holds it: a checkpoint keeps each of its shards open, and no process holds
    /// 2^32 files (Linux caps a process's descriptors below 2^31), so the number fits.
    std::uint32_t shard = 0;
    Dtype dtype = Dtype::F32;  ///< its elements in the file

    /// Its first element's place in its tensor, whose bytes start at `tensor_offset` of the shard.
    [[nodiscard]] std::uint64_t first(std::uint64_t tensor_offset) const noexcept {
        return (source - tensor_offset) / dtype_size(dtype);
    }
};

static_assert(sizeof(void*) != 8 || sizeof(Piece) == 48, "a piece is 48 bytes on 64-bit targets");

/// Pieces [first, end) read together and copied together.
struct Chunk {
    bool diff = false;            ///< into the arena's diff buffer (else its data buffer)
    bool device_convert = false;  ///< raw bytes, converted on the device
    std::size_t first = 0;
    std::size_t end = 0;
    std::size_t arena_offset = 0;    ///< a direct chunk: where its image starts in the arena
    std::size_t bytes = 0;           ///< staging bytes used: the size of its copy
    std::uint64_t source_bytes = 0;  ///< bytes it reads from the checkpoint
};

struct Plan {
    std::vector<Piece> pieces;
    std::vector<Chunk> chunks;
    std::uint64_t source_bytes = 0;
    std::size_t largest_chunk = 0;  ///< staging bytes of the largest chunk: what a staging block needs
};

/// Whether a load with `target` goes to the device side. \throws OptionError for a value that is
/// no `Target`, or `Target::device` where the arena has no device.
inline bool on_device(checkpoint::Target target, bool has_device) {
    switch (target) {
        case checkpoint::Target::automatic:
            return has_device;
        case checkpoint::Target::host:
            return false;
        case checkpoint::Target::device:
            if (!has_device) {
                throw OptionError(
                    "CheckpointArena::load: LoadOptions::target is Target::device, but the arena's "
                    "backend has no device (use Target::host or Target::automatic)");
            }
            return true;
    }
    throw OptionError("CheckpointArena::load: LoadOptions::target " + std::to_string(static_cast<int>(target)) +
                      " is not a Target");
}

/// Reader threads for `chunks` chunks when `threads` were asked for (0: all): at most
/// `parallel::max_threads()`, as documented, and no more than there are chunks; at least 1.
inline unsigned reader_threads(unsigned threads, std::size_t chunks) {
    const std::size_t cap = parallel::max_threads();
    return static_cast<unsigned>(std::max<std::size_t>(1, std::min({threads == 0 ? cap : threads, cap, chunks})));
}

/// Staging blocks per reader: at least 1, and no more than a reader can fill (its share of the
/// chunks), so that no option value makes the load allocate blocks it never uses.
inline unsigned staging_blocks(unsigned blocks, std::size_t chunks, unsigned threads) {
    const std::size_t share = (chunks + threads - 1) / threads;
    return static_cast<unsigned>(std::max<std::size_t>(1, std::min<std::size_t>(blocks, share)));
}

/// Removes repeated values from `v` (in any order): sorted where the values are ordered (streams of
/// CUDA and of the simulator are), so that a caller's count of streams cannot make it quadratic.
template <class V>
void keep_distinct(std::vector<V>& v) {
    if constexpr (std::totally_ordered<V>) {
        std::ranges::sort(v, std::ranges::less{});  // a total order on pointers too
        v.erase(std::unique(v.begin(), v.end()), v.end());
    } else {
        std::vector<V> out;
        for (const V& x : v) {
            if (std::find(out.begin(), out.end(), x) == out.end()) {
                out.push_back(x);
            }
        }
        v = std::move(out);
    }
}

/// Where a device-converting piece starts in its staging block.
inline constexpr std::size_t staging_alignment = 256;
/// Where each slice of an arena starts (`ParameterArena::alignment`): the padding after a slice is
/// shorter than this.
inline constexpr std::size_t slice_alignment = 256;

class Planner {
public:
    /// `item` is the arena's element size; chunks hold at most `chunk_bytes` (at least 4096).
    /// `in_place`: a direct chunk's pieces are read where they go (a host load), so a chunk may span
    /// a slice the load does not write; otherwise its image is copied whole (a device load).
    /// `storage`: memory for the pieces (its elements are dropped, its capacity used).
    Planner(std::size_t item, std::size_t chunk_bytes, bool in_place, std::vector<Piece> storage = {})
        : item_(item), limit_(std::max<std::size_t>(chunk_bytes, 4096)), in_place_(in_place) {
        plan_.pieces = std::move(storage);
        plan_.pieces.clear();
    }

    /// Room for `pieces` pieces (a tensor makes one, unless it spans chunks).
    void reserve(std::size_t pieces) { plan_.pieces.reserve(pieces); }

    /// Adds the tensors of one of the arena's buffers, in its order.
    void add(std::span<const PlanTensor> tensors, bool diff) {
        reserve(plan_.pieces.size() + tensors.size());  // a piece each at least: no regrowth
        for (const auto& t : tensors) {
            add(t, diff);
        }
        close();
    }

    /// Adds the next tensor of the data (`diff` false) or of the diff; every tensor of the data is
    /// added before those of the diff, each buffer's in its order.
    void add(const PlanTensor& t, bool diff) {
        for (std::uint64_t e = t.first; e < t.first + t.count;) {
            if (open_ && (chunk_.device_convert != t.device_convert || chunk_.diff != diff ||
                          (e == t.first && !t.device_convert && beyond_padding(t.dst + e * item_)))) {
                close();
            }
            if (!open_) {
                chunk_ = Chunk{diff, t.device_convert, plan_.pieces.size(), 0, t.dst + e * item_, 0, 0};
                open_ = true;
            }
            const std::uint64_t n = t.device_convert ? stage_raw(t, e) : stage_image(t, e);
            if (n == 0) {
                close();  // no room left in this chunk: the next one takes the piece
                continue;
            }
            chunk_.source_bytes += n * dtype_size(t.dtype);
            e += n;
        }
    }

    [[nodiscard]] Plan finish() {
        close();
        return std::move(plan_);
    }

private:
    // Whether `at` lies past the padding that follows the open direct chunk's last piece: between
    // them is a slice this load does not write (a blob whose diff the file does not hold), which
    // the chunk's image, copied whole, would overwrite. Read in place, the chunk goes on: its
    // pieces (and, for a host load of a diff held by every third blob, their reads) stay together.
    [[nodiscard]] bool beyond_padding(std::size_t at) const noexcept {
        const std::size_t end = chunk_.arena_offset + chunk_.bytes;
        return !in_place_ && at > end && at - end >= slice_alignment;
    }

    // A piece placed where it sits in the arena; returns its elements (0: none fit).
    // Offsets are within the arena (at >= the chunk's start); the room left is computed without
    // adding anything to `limit_`, which may be as large as SIZE_MAX.
    std::uint64_t stage_image(const PlanTensor& t, std::uint64_t e) {
        const std::size_t at = t.dst + static_cast<std::size_t>(e) * item_;
        const std::size_t used = at - chunk_.arena_offset;
        if (used > limit_ || limit_ - used < item_) {
            return 0;
        }
        const std::uint64_t n = std::min<std::uint64_t>(t.first + t.count - e, (limit_ - used) / item_);
        plan_.pieces.push_back(piece(t, e, n, at, at - chunk_.arena_offset));
        chunk_.bytes = at + static_cast<std::size_t>(n) * item_ - chunk_.arena_offset;
        return n;
    }

    // A piece of raw bytes at the next aligned place of the staging block.
    std::uint64_t stage_raw(const PlanTensor& t, std::uint64_t e) {
        const std::size_t at = (chunk_.bytes + staging_alignment - 1) / staging_alignment * staging_alignment;
        const std::size_t source_item = dtype_size(t.dtype);
        if (at > limit_ || limit_ - at < source_item) {
            return 0;
        }
        const std::uint64_t n = std::min<std::uint64_t>(t.first + t.count - e, (limit_ - at) / source_item);
        plan_.pieces.push_back(piece(t, e, n, t.dst + static_cast<std::size_t>(e) * item_, at));
        chunk_.bytes = at + static_cast<std::size_t>(n) * source_item;
        return n;
    }

    // Elements [e, e + n) of `t`, to `dst` in the arena and `staging` in the staging block.
    static Piece piece(const PlanTensor& t, std::uint64_t e, std::uint64_t n, std::size_t dst, std::size_t staging) {
        return Piece{t.tensor, n, dst, staging, t.offset + e * dtype_size(t.dtype), static_cast<std::uint32_t>(t.shard),
                     t.dtype};
    }

    void close() {
        if (open_ && plan_.pieces.size() > chunk_.first) {
            chunk_.end = plan_.pieces.size();
            plan_.source_bytes += chunk_.source_bytes;
            plan_.largest_chunk = std::max(plan_.largest_chunk, chunk_.bytes);
            plan_.chunks.push_back(chunk_);
        }
        open_ = false;
    }

    std::size_t item_;
    std::size_t limit_;
    bool in_place_;
    Plan plan_;
    Chunk chunk_;
    bool open_ = false;
};

}  // namespace checkpoint::detail

SYNCBLOB_END_NAMESPACE
