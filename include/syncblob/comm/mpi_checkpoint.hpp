// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// A checkpoint loaded once by many ranks (`mpi::load_shared`; targets `syncblob::mpi` and
/// `syncblob::json`): each rank of a communicator reads a disjoint share of the checkpoint's bytes
/// into its `checkpoint::CheckpointArena`, then an all-gather over MPI completes every rank's arena.
/// N ranks read the files once between them instead of N times, and every rank ends with the bytes a
/// load on one rank gives, bit for bit.
///
/// The share (comm/detail/shared_load.hpp): the arena's data buffer, and the runs of blobs whose diff
/// the checkpoint holds in its diff buffer, are cut at 256-byte boundaries (the arena's alignment) into
/// one contiguous share per rank, in rank order, of equal size give or take 256 bytes; a rank reads the
/// tensors' elements that fall into its share, in parallel (`checkpoint::LoadOptions::threads`, chunks
/// of `chunk_bytes`), converting as `CheckpointArena::load` does. Then one `MPI_Allgatherv` (in place)
/// per run gives every rank the others' shares; the padding between slices travels with them.
///
/// This header is part of the communication layer, which sits above the checkpoint layer: it uses
/// the checkpoint loader's reading and the arena, and the checkpoint layer knows nothing of MPI.

#include <mpi.h>

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
#include "detail/shared_load.hpp"
#include "error.hpp"
#include "mpi_options.hpp"
#include "reduce.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace mpi {

/// What `load_shared` did on the calling rank (shared with `nccl::load_shared`).
using SharedLoadReport = syncblob::SharedLoadReport;

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
    comm::detail::SharePlan share;
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
        share = comm::detail::plan_share(arena, ckpt, load, op, rank, ranks, detail::max_count, false);
        // Every blob's data, and the diffs the checkpoint holds, are about to be overwritten whole.
        bases[0] =
            reinterpret_cast<std::byte*>(data.emplace(blobs.flat_data()).mutable_host_data_for_overwrite().data());
        diff.emplace(blobs.flat_diff());
        for (const auto& r : share.regions) {
            if (r.diff) {
                bases[1] = reinterpret_cast<std::byte*>(
                    diff->mutable_host_data_for_overwrite(r.first_blob, r.end_blob).data());
            }
        }
        const auto& plan = share.plan;
        // Read as CheckpointArena::load reads a host load: chunks claimed by the reader threads.
        report.threads = syncblob::checkpoint::detail::reader_threads(load.threads, plan.chunks.size());
        syncblob::checkpoint::detail::Progress progress(load.progress, plan.source_bytes);
        syncblob::checkpoint::detail::read_into_host<T>(ckpt, plan, bases[0], bases[1], report.threads, progress,
                                                        syncblob::checkpoint::detail::convert_rule(load));
        report.bytes_read = plan.source_bytes;
        report.read_seconds = syncblob::checkpoint::detail::seconds_since(started);
    });
    // The waits for the other ranks start now (see the function comment).
    const detail::Deadline deadline(options.timeout);
    detail::agree(blobs, comm, op,
                  {comm::detail::CommOperation::shared_load, comm::detail::checkpoint_fingerprint(ckpt, share.tensors),
                   0, 0, 0, deadline.bounded()},
                  deadline, failure);

    MPI_Datatype bytes_unit = MPI_DATATYPE_NULL;
    detail::check(MPI_Type_contiguous(static_cast<int>(unit), MPI_BYTE, &bytes_unit), op, "MPI_Type_contiguous");
    detail::check(MPI_Type_commit(&bytes_unit), op, "MPI_Type_commit");
    struct FreeType {
        MPI_Datatype* type;
        ~FreeType() { (void)MPI_Type_free(type); }
    } free_type{&bytes_unit};
    std::uint64_t at = 0;  // in units, of the regions laid end to end
    for (const auto& r : share.regions) {
        // Each rank's count and place in the region: on the heap, as MPI reads them until a
        // non-blocking all-gather given up on completes.
        const auto layout = std::make_shared<std::vector<int>>(2 * static_cast<std::size_t>(ranks));
        int* counts = layout->data();
        int* displacements = counts + ranks;
        const std::uint64_t n = (r.end - r.first) / unit;
        for (int k = 0; k < ranks; ++k) {
            const auto [lo, hi] = comm::detail::part_of(share.units, at, n, k, ranks);
            counts[k] = static_cast<int>(hi - lo);
            displacements[k] = static_cast<int>(lo);
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
    report.bytes_loaded = share.bytes_loaded;
    report.seconds = syncblob::checkpoint::detail::seconds_since(started);
    return report;
}

}  // namespace mpi

SYNCBLOB_END_NAMESPACE
