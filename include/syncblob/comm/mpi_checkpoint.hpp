// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// A checkpoint loaded once by many ranks (`mpi::load_shared`; targets `syncblob::mpi` and
/// `syncblob::json`): each rank of a communicator reads a disjoint share of the checkpoint's bytes
/// into its `checkpoint::CheckpointArena`, then an all-gather over MPI completes every rank's arena.
/// N ranks read the files once between them instead of N times, and every rank ends with the bytes a
/// load on one rank gives, bit for bit.
///
/// The share: the arena's data buffer, and the runs of blobs whose diff the checkpoint holds in its
/// diff buffer, are cut at 256-byte boundaries (the arena's alignment) into one contiguous share per
/// rank, in rank order, of equal size give or take 256 bytes; a rank reads the tensors' elements that
/// fall into its share, in parallel (`checkpoint::LoadOptions::threads`, chunks of `chunk_bytes`),
/// converting as `CheckpointArena::load` does. Then one `MPI_Allgatherv` (in place) per run gives every
/// rank the others' shares; the padding between slices travels with them.
///
/// This header is part of the communication layer, which sits above the checkpoint layer: it uses
/// the checkpoint loader's reading and the arena, and the checkpoint layer knows nothing of MPI.

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "../checkpoint/arena_loader.hpp"  // with checkpoint::Checkpoint: the checkpoint layer is what comm uses
#include "../checkpoint/options.hpp"
#include "../checkpoint/plan.hpp"
#include "../checkpoint/read_chunk.hpp"
#include "../core/error.hpp"
#include "../core/thread_pool.hpp"
#include "detail/mpi_agree.hpp"
#include "detail/mpi_call.hpp"
#include "detail/mpi_staging.hpp"
#include "detail/mpi_wait.hpp"
#include "error.hpp"
#include "mpi_options.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace mpi {

/// What `load_shared` did on the calling rank.
struct SharedLoadReport {
    std::uint64_t bytes_read = 0;      ///< tensor bytes this rank read from the files (its share)
    std::uint64_t bytes_loaded = 0;    ///< tensor bytes of the checkpoint the load read, every rank's share together
    std::uint64_t bytes_received = 0;  ///< arena bytes this rank received from the other ranks
    std::uint64_t calls = 0;           ///< MPI all-gathers that completed the arena
    unsigned threads = 0;              ///< reader threads this rank used
    double read_seconds = 0;           ///< this rank's reading
    double seconds = 0;                ///< the whole call on this rank
};

namespace detail {

/// A run of one of the arena's buffers that a shared load fills: bytes [first, end), both multiples
/// of the arena's alignment; `blobs` [first_blob, end_blob) lie in it.
struct LoadRegion {
    bool diff = false;
    std::size_t first = 0;
    std::size_t end = 0;
    std::size_t first_blob = 0;
    std::size_t end_blob = 0;
};

/// The share of rank `r` of `ranks` in `units` units: [units * r / ranks, units * (r + 1) / ranks).
inline std::uint64_t share_start(std::uint64_t units, int r, int ranks) noexcept {
    const auto n = static_cast<std::uint64_t>(ranks);
    const auto k = static_cast<std::uint64_t>(r);
    return units / n * k + units % n * k / n;  // without overflowing units * r
}

/// The regions of a shared load: the whole data buffer, then each run of consecutive blobs with a
/// diff in the checkpoint (`with_diff`); each cut into pieces of at most `max_units` units, so that
/// one MPI call's counts and displacements fit an int.
template <Element T, SyncedAllocator A>
std::vector<LoadRegion> load_regions(const ParameterArena<T, A>& arena, const std::vector<bool>& with_diff,
                                     std::size_t max_units) {
    constexpr std::size_t unit = ParameterArena<T, A>::alignment;
    const auto end_of = [&](std::size_t i) {
        const Slice s = arena.slice(i);
        return (s.offset + s.bytes + unit - 1) / unit * unit;
    };
    std::vector<LoadRegion> whole;
    if (arena.size() != 0) {
        whole.push_back({false, 0, arena.bytes(), 0, arena.size()});
    }
    for (std::size_t i = 0; i < arena.size();) {
        if (!with_diff[i]) {
            ++i;
            continue;
        }
        std::size_t end = i;
        while (end < arena.size() && with_diff[end]) {
            ++end;
        }
        whole.push_back({true, arena.slice(i).offset, end_of(end - 1), i, end});
        i = end;
    }
    std::vector<LoadRegion> out;
    const std::size_t most = max_units * unit;
    for (const LoadRegion& r : whole) {
        for (std::size_t first = r.first; first < r.end; first += most) {
            out.push_back({r.diff, first, first + std::min(most, r.end - first), r.first_blob, r.end_blob});
        }
    }
    return out;
}

/// An FNV-1a fingerprint of what a load reads for the arena's blobs (each tensor's and diff's dtype,
/// shard and place in it, and the shards' sizes): ranks whose checkpoints differ there disagree.
inline std::uint64_t checkpoint_fingerprint(const checkpoint::Checkpoint& ckpt,
                                            const std::vector<const checkpoint::Tensor*>& tensors) {
    comm::detail::Fnv1a h;
    for (const checkpoint::Tensor* t : tensors) {
        h.word(t == nullptr ? ~std::uint64_t{0} : static_cast<std::uint64_t>(t->dtype));
        if (t != nullptr) {
            h.word(t->shard);
            h.word(t->offset);
            h.word(t->count);
        }
    }
    for (const auto& shard : ckpt.shards()) {
        h.word(shard.size);
    }
    return h.value();
}

}  // namespace detail

/// Loads `ckpt` into `arena` on every rank of `comm`, each rank reading only its share of the bytes
/// (see the file comment); on return every rank's arena holds what `arena.load(ckpt, load)` gives on
/// one rank, bit for bit, in its host side (the blobs at_host; an arena with a device copies a blob
/// there on its first device access). A collective call: every rank calls it with an arena of the
/// same layout and the same checkpoint (its tensors' dtypes and places in the shards; their bytes
/// are not compared), else every rank throws the same StateError. `load` is what
/// `CheckpointArena::load` takes (convert, saturate, chunk_bytes, threads, progress — this rank's
/// bytes); its `target` must not be `Target::device`. `options.timeout` bounds the waits for the other
/// ranks, from the end of this rank's own reading: a rank whose share reads slower makes the others
/// wait that much longer, so allow for it.
/// \throws on every rank alike: OptionError (a timeout that is not positive). On the rank where it
/// happens, the other ranks throwing StateError naming it: OptionError (`Target::device`), FormatError (a blob's tensor
/// missing, a dtype other than T without `load.convert`, a value the conversion refuses, a shard cut short),
/// ShapeError, IOError, StateError (an arena blob replaced or reshaped), and what `load.progress` throws. Then
/// StateError (arenas or checkpoints that differ), CommError, TimeoutError. After an exception the blobs' values are
/// unspecified.
template <Element T, SyncedAllocator A>
SharedLoadReport load_shared(checkpoint::CheckpointArena<T, A>& arena, const checkpoint::Checkpoint& ckpt,
                             MPI_Comm comm, const checkpoint::LoadOptions& load = {}, Options options = {}) {
    constexpr std::string_view op = "mpi::load_shared";
    constexpr std::size_t unit = ParameterArena<T, A>::alignment;
    const auto started = std::chrono::steady_clock::now();
    detail::ErrorsReturn errors(comm, op);
    auto& blobs = arena.arena();
    const int ranks = detail::comm_size(comm, op);
    int rank = 0;
    detail::check(MPI_Comm_rank(comm, &rank), op, "MPI_Comm_rank");

    SharedLoadReport report;
    std::vector<bool> with_diff(blobs.size(), false);
    std::vector<const checkpoint::Tensor*> tensors;  // each blob's tensor, then its diff (or null)
    std::vector<detail::LoadRegion> regions;
    std::optional<ArenaBuffer<T, A>> data;
    std::optional<ArenaBuffer<T, A>> diff;
    std::byte* bases[2] = {nullptr, nullptr};
    // This rank's own work (checking the checkpoint against the arena, reading its share) comes before
    // the agreement, so that a failure here reaches every rank as an exception.
    const auto failure = comm::detail::prepare(blobs, op, [&] {
        if (load.target == checkpoint::Target::device) {
            throw OptionError(std::string(op) +
                              ": LoadOptions::target is Target::device; a shared load fills the arena's host side "
                              "(use Target::host or Target::automatic)");
        }
        const auto source = [&] {
            return ckpt.index_file().empty() ? ckpt.shards().at(0).path.string() : ckpt.index_file().string();
        };
        for (std::size_t i = 0; i < blobs.size(); ++i) {
            const std::string& name = arena.names()[i];
            const checkpoint::Tensor* t = ckpt.find(name);
            if (t == nullptr || checkpoint::Checkpoint::is_diff(name)) {
                io::throw_format_error(source(), "tensor \"" + name + "\"",
                                       "not in the checkpoint (the arena's blob " + std::to_string(i) + " needs it)");
            }
            if (t->shape != blobs[i].shape()) {
                throw ShapeError(std::string(op) + ": " + source() + " holds \"" + t->name + "\" of shape " +
                                 t->shape.to_string() + ", the arena's blob has " + blobs[i].shape_string());
            }
            if (t->dtype != dtype_of<T> && !load.convert) {
                io::throw_format_error(ckpt.shards()[t->shard].path.string(), "tensor \"" + t->name + "\": dtype",
                                       "the file holds " + std::string(dtype_name(t->dtype)) + ", the arena " +
                                           std::string(element_name<T>()) + " (set LoadOptions::convert to convert)");
            }
            const checkpoint::Tensor* d = ckpt.diff_of(*t);
            with_diff[i] = d != nullptr;
            tensors.push_back(t);
            tensors.push_back(d);
        }
        regions = detail::load_regions(blobs, with_diff, detail::max_count);
        // Every blob's data, and the diffs the checkpoint holds, are about to be overwritten whole.
        bases[0] =
            reinterpret_cast<std::byte*>(data.emplace(blobs.flat_data()).mutable_host_data_for_overwrite().data());
        diff.emplace(blobs.flat_diff());
        for (const auto& r : regions) {
            if (r.diff) {
                bases[1] = reinterpret_cast<std::byte*>(
                    diff->mutable_host_data_for_overwrite(r.first_blob, r.end_blob).data());
            }
        }
        // This rank's share of the regions laid end to end, as pieces of tensors to read.
        std::uint64_t units = 0;
        for (const auto& r : regions) {
            units += (r.end - r.first) / unit;
        }
        const std::uint64_t lo = detail::share_start(units, rank, ranks) * unit;
        const std::uint64_t hi = detail::share_start(units, rank + 1, ranks) * unit;
        syncblob::checkpoint::detail::Plan plan;
        const std::size_t chunk = std::max<std::size_t>(load.chunk_bytes / sizeof(T), 4096 / sizeof(T));
        std::uint64_t at = 0;  // where the region starts in the regions laid end to end
        for (const auto& r : regions) {
            const std::uint64_t length = r.end - r.first;
            const std::uint64_t from = std::clamp(lo, at, at + length) - at + r.first;  // bytes of the buffer
            const std::uint64_t to = std::clamp(hi, at, at + length) - at + r.first;
            at += length;
            for (std::size_t i = r.first_blob; from < to && i < r.end_blob; ++i) {
                const Slice s = blobs.slice(i);
                const std::uint64_t a = std::max<std::uint64_t>(from, s.offset);
                const std::uint64_t b = std::min<std::uint64_t>(to, s.offset + s.bytes);
                const checkpoint::Tensor* t = tensors[2 * i + (r.diff ? 1 : 0)];
                for (std::uint64_t e = (a - s.offset) / sizeof(T); a < b && e < (b - s.offset) / sizeof(T);) {
                    const std::uint64_t n = std::min<std::uint64_t>(chunk, (b - s.offset) / sizeof(T) - e);
                    const std::size_t dst = s.offset + static_cast<std::size_t>(e) * sizeof(T);
                    const std::size_t p = plan.pieces.size();
                    plan.pieces.push_back({static_cast<std::size_t>(t - ckpt.tensors().data()), e, n, dst, 0});
                    plan.chunks.push_back({r.diff, false, p, p + 1, dst, static_cast<std::size_t>(n) * sizeof(T),
                                           n * dtype_size(t->dtype)});
                    plan.source_bytes += n * dtype_size(t->dtype);
                    e += n;
                }
            }
        }
        // Read as CheckpointArena::load reads a host load: chunks claimed by the reader threads.
        report.threads = syncblob::checkpoint::detail::reader_threads(load.threads, plan.chunks.size());
        syncblob::checkpoint::detail::Progress progress(load.progress, plan.source_bytes);
        syncblob::checkpoint::detail::ChunkQueue queue(plan.chunks.size());
        const auto rule = load.saturate ? io::detail::ConvertRule::saturate : io::detail::ConvertRule::exact;
        parallel::run(report.threads, [&](unsigned) {
            try {
                for (std::size_t c = 0; queue.next(c);) {
                    const auto& ch = plan.chunks[c];
                    syncblob::checkpoint::detail::read_image<T>(ckpt, plan, ch,
                                                                bases[ch.diff ? 1 : 0] + ch.arena_offset, false, rule);
                    progress.add(ch.source_bytes);
                }
            } catch (...) {
                queue.fail();
                throw;
            }
        });
        report.bytes_read = plan.source_bytes;
        report.read_seconds = syncblob::checkpoint::detail::seconds_since(started);
    });
    // The waits for the other ranks start now (see the function comment).
    const detail::Deadline deadline(options.timeout);
    detail::agree(blobs, comm, op,
                  {comm::detail::CommOperation::shared_load, detail::checkpoint_fingerprint(ckpt, tensors), 0, 0, 0,
                   deadline.bounded()},
                  deadline, failure);

    MPI_Datatype bytes_unit = MPI_DATATYPE_NULL;
    detail::check(MPI_Type_contiguous(static_cast<int>(unit), MPI_BYTE, &bytes_unit), op, "MPI_Type_contiguous");
    detail::check(MPI_Type_commit(&bytes_unit), op, "MPI_Type_commit");
    struct FreeType {
        MPI_Datatype* type;
        ~FreeType() { (void)MPI_Type_free(type); }
    } free_type{&bytes_unit};
    std::uint64_t units = 0;
    for (const auto& r : regions) {
        units += (r.end - r.first) / unit;
    }
    std::uint64_t at = 0;  // in units, of the regions laid end to end
    for (const auto& r : regions) {
        // Each rank's count and place in the region: on the heap, as MPI reads them until a
        // non-blocking all-gather given up on completes.
        const auto layout = std::make_shared<std::vector<int>>(2 * static_cast<std::size_t>(ranks));
        int* counts = layout->data();
        int* displacements = counts + ranks;
        const std::uint64_t n = (r.end - r.first) / unit;
        for (int k = 0; k < ranks; ++k) {
            const std::uint64_t lo = std::clamp(detail::share_start(units, k, ranks), at, at + n);
            const std::uint64_t hi = std::clamp(detail::share_start(units, k + 1, ranks), at, at + n);
            counts[k] = static_cast<int>(hi - lo);
            displacements[k] = static_cast<int>(lo - at);
            if (k != rank) {
                report.bytes_received += (hi - lo) * unit;
            }
        }
        at += n;
        std::byte* p = bases[r.diff ? 1 : 0] + r.first;
        detail::collective(
            deadline, comm, op, "MPI_Allgatherv", "MPI_Iallgatherv", "the all-gather of the ranks' shares",
            [&] {
                return MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, p, counts, displacements, bytes_unit, comm);
            },
            [&](MPI_Request* request) {
                return MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, p, counts, displacements, bytes_unit, comm,
                                       request);
            },
            [&] {
                auto held = detail::hold(data->buffers());
                const auto diffs = detail::hold(diff->buffers());
                held.insert(held.end(), diffs.begin(), diffs.end());
                held.push_back(layout);
                return held;
            });
        ++report.calls;
    }
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        if (tensors[i] != nullptr) {
            report.bytes_loaded += tensors[i]->bytes;
        }
    }
    report.seconds = syncblob::checkpoint::detail::seconds_since(started);
    return report;
}

}  // namespace mpi

SYNCBLOB_END_NAMESPACE
