// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// All-reduce and broadcast of a `ParameterArena` through MPI (target `syncblob::mpi`): the diff of
/// every blob in one call per piece of the arena (`MPI_IN_PLACE`), blocking or bucketed and
/// non-blocking (mpi_bucketed.hpp). MPI's own collectives do the work where they can; syncblob adds
/// the flat layout, averaging, overlap, staging of device memory and the checks.
///
/// Where the bytes are: host-fresh diffs are reduced in the arena's host memory directly. Diffs
/// fresh on the device only are staged through the arena's host memory (pinned for
/// `cuda::Allocator`): copied D→H, reduced, copied back H→D, so they end synced; each copy is
/// counted in its blob's stats. With a device-aware MPI (detected, or set through `Options`) a sum
/// over diffs all fresh on the device runs on device memory instead, with no copy.
///
/// Averaging: MPI has no mean, so `Reduce::mean` runs syncblob's own all-reduce over MPI's
/// point-to-point messages (detail/mpi_ring.hpp), on the host, which divides each element by the
/// number of ranks in the same pass as its last addition: it costs what the sum costs. Every rank
/// gets the same bits: each element is the sum of the ranks' values (added in an order the call
/// chooses, as MPI's own sum does), divided by the number of ranks and rounded once. To keep a mean
/// on the device, use NCCL (`ncclAvg`) or sum and fold 1/n into the learning rate.

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../arena/parameter_arena.hpp"
#include "../core/error.hpp"
#include "../core/sync_audit.hpp"
#include "detail/mpi_agree.hpp"
#include "detail/mpi_call.hpp"
#include "detail/mpi_private_comm.hpp"
#include "detail/mpi_ring.hpp"
#include "detail/mpi_staging.hpp"
#include "detail/mpi_wait.hpp"
#include "error.hpp"
#include "mpi_bucketed.hpp"
#include "mpi_options.hpp"
#include "reduce.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace mpi {

namespace detail {

// One MPI_Allreduce (with a deadline: MPI_Iallreduce, waited for until it passes) per piece of
// [p, p + n), each split again at `max_count`; returns the number of calls.
template <MpiElement T, class Keep>
std::uint64_t sum_in_pieces(T* p, std::size_t n, std::size_t piece, MPI_Comm comm, const Deadline& deadline,
                            std::string_view op, Keep keep) {
    std::uint64_t calls = 0;
    for (std::size_t first = 0; first < n; first += piece) {
        calls += in_pieces(std::min(piece, n - first), [&](std::size_t offset, int count) {
            T* q = p + first + offset;
            collective(
                deadline, comm, op, "MPI_Allreduce", "MPI_Iallreduce", "the all-reduce",
                [&] { return MPI_Allreduce(MPI_IN_PLACE, q, count, datatype<T>(), MPI_SUM, comm); },
                [&](MPI_Request* r) { return MPI_Iallreduce(MPI_IN_PLACE, q, count, datatype<T>(), MPI_SUM, comm, r); },
                keep);
        });
    }
    return calls;
}

}  // namespace detail

/// All-reduces the diff of every blob of `arena` across `comm`, in place, on every rank: the sum,
/// or the mean (the sum divided by the number of ranks, rounded once: see the file comment). A
/// collective call: every rank of `comm` calls it with an arena of the same layout and the same
/// `reduce`, otherwise every rank throws the same StateError before any rank's data changes. A sum makes one
/// MPI_Allreduce per piece (`Options::piece_bytes`, unset: chosen from where the ranks run, and at
/// most `INT_MAX` elements); a mean one all-reduce of syncblob's engine per piece (`CommStats::calls` counts either).
/// \throws StateError (arenas or calls that differ, a `reduce` that is not a Reduce, an unsealed or
/// altered arena, MPI not initialized, a communicator given up on earlier); CommError when an MPI
/// call fails; DeviceError from staging copies; TimeoutError when `options.timeout` passes.
template <MpiElement T, SyncedAllocator A>
CommStats allreduce_diff(ParameterArena<T, A>& arena, MPI_Comm comm, Reduce reduce, Options options = {}) {
    using Device = typename A::device_backend;
    constexpr std::string_view op = "mpi::allreduce_diff";
    const audit::Operation audited(op, audit::Waits{audit::Wait::collective});  // a blocking all-reduce
    const detail::Deadline deadline(options.timeout);
    detail::ErrorsReturn errors(comm, op);
    CommStats stats;
    std::size_t n = 0;
    T* p = nullptr;
    std::vector<std::size_t> staged;
    std::optional<ArenaBuffer<T, A>> view;  // outlives the preparation: `p` points into it
    // What this rank does on its own (the staging copy, waiting for its stream) comes before the
    // agreement, so that a failure here reaches every rank as an exception instead of leaving the
    // others waiting in the collective.
    const auto failure = comm::detail::prepare(arena, op, [&] {
        auto& diff = view.emplace(arena.flat_diff());
        n = diff.elements();
        stats.bytes = diff.bytes();
        if constexpr (Device::has_device) {
            if (reduce == Reduce::sum && n != 0 && detail::use_device(options) && diff.fresh_on_device() &&
                !diff.fresh_on_host()) {
                p = diff.mutable_device_data();
                detail::wait_stream<Device>(arena.stream());
                stats.on_device = true;
                return;
            }
        }
        staged = detail::device_only(diff.buffers(), 0, diff.buffers().size());
        p = diff.mutable_host_data().data();
    });
    const auto keep = [&] { return detail::hold(view->buffers()); };
    // A mean on a communicator an earlier call has agreed on sends its first messages now: the
    // agreement's round and theirs then wait for the other ranks together (detail/mpi_ring.hpp).
    std::optional<detail::Allreduce<T>> early;
    if (reduce == Reduce::mean && p != nullptr && n != 0 && !failure) {
        if (const auto start = detail::early_start(comm, options.piece_bytes, op)) {
            early.emplace(start->mine, true, detail::piece_elements<T>(start->piece_bytes), ring_pieces_in_flight, op);
            stats.calls = early->add_before_agreement(p, n);
        }
    }
    const detail::Call call{comm::detail::CommOperation::allreduce,
                            static_cast<std::uint64_t>(reduce),
                            0,
                            0,
                            detail::requested_piece(options.piece_bytes),
                            deadline.bounded(),
                            false,
                            early ? early->sent_early() : 0};
    const detail::Agreement agreed =
        early ? detail::agree(arena, comm, op, call, deadline, failure,
                              detail::EarlyMessages<T, decltype(keep)>{*early, comm, deadline, keep})
              : detail::agree(arena, comm, op, call, deadline, failure);
    const std::size_t piece = detail::piece_elements<T>(agreed.piece_bytes(options.piece_bytes));
    if (early) {
        early->accept();
        early->wait(comm, deadline, "the all-reduce", keep);
    } else if (reduce == Reduce::mean) {
        detail::Allreduce<T> engine(detail::private_comm(comm, deadline, op), true, piece, ring_pieces_in_flight, op);
        stats.calls = engine.add(p, n);
        engine.wait(comm, deadline, "the all-reduce", keep);
    } else {
        stats.calls = detail::sum_in_pieces(p, n, piece, comm, deadline, op, keep);
    }
    if (!staged.empty()) {
        detail::push_back_to_device(view->buffers(), staged);
    }
    stats.staged_blobs = staged.size();
    return stats;
}

/// Copies the data of every blob of `root`'s arena into the arenas of the other ranks of `comm`.
/// The root's data is read where it is fresh; on the other ranks each blob ends fresh on the side
/// it was fresh on before (device-fresh blobs receive on the host and are copied H→D, unless the
/// MPI is device-aware and every blob is fresh on the device). A collective call, checked as
/// allreduce_diff; `root` is checked there too, on every rank alike. \throws IndexError (on every
/// rank, with the same message) when some rank's `root` is not a rank of `comm`; as allreduce_diff.
template <MpiElement T, SyncedAllocator A>
CommStats broadcast_data(ParameterArena<T, A>& arena, MPI_Comm comm, int root, Options options = {}) {
    using Device = typename A::device_backend;
    constexpr std::string_view op = "mpi::broadcast_data";
    const audit::Operation audited(op, audit::Waits{audit::Wait::collective});  // a blocking broadcast
    const detail::Deadline deadline(options.timeout);
    detail::ErrorsReturn errors(comm, op);
    int rank = 0;
    detail::check(MPI_Comm_rank(comm, &rank), op, "MPI_Comm_rank");
    // `root` is checked in the agreement, on every rank: a rank that threw here, before it, would
    // leave the others waiting there. Until then a root outside the communicator is no rank's.
    CommStats stats;
    std::size_t n = 0;
    T* p = nullptr;
    std::vector<std::size_t> staged;
    // The root's staging copy and every rank's wait for its stream come before the agreement (see
    // allreduce_diff); the other ranks mark their data as about to be overwritten only after it, so
    // a refused call leaves their data as it was.
    bool device = false;
    std::optional<ArenaBuffer<T, A>> view;  // outlives the preparation: `p` points into it
    const auto failure = comm::detail::prepare(arena, op, [&] {
        auto& data = view.emplace(arena.flat_data());
        n = data.elements();
        stats.bytes = data.bytes();
        if constexpr (Device::has_device) {
            device = n != 0 && detail::use_device(options) && data.fresh_on_device() && !data.fresh_on_host();
            if (device) {
                if (rank == root) {
                    p = const_cast<T*>(data.device_data());
                }
                detail::wait_stream<Device>(arena.stream());
                return;
            }
        }
        if (rank == root) {
            p = const_cast<T*>(data.host_data().data());  // read only: MPI_Bcast does not write at the root
        }
    });
    detail::agree(arena, comm, op,
                  {comm::detail::CommOperation::broadcast, static_cast<std::uint64_t>(std::int64_t{root}), 0, 0, 0,
                   deadline.bounded()},
                  deadline, failure);
    stats.on_device = device;
    if (rank != root) {
        auto& data = *view;
        if (device) {
            p = data.mutable_device_data_for_overwrite();
        } else {
            staged = detail::device_only(data.buffers(), 0, data.buffers().size());
            p = data.mutable_host_data_for_overwrite().data();
        }
    }
    stats.calls = detail::in_pieces(n, [&](std::size_t first, int count) {
        detail::collective(
            deadline, comm, op, "MPI_Bcast", "MPI_Ibcast", "the broadcast",
            [&] { return MPI_Bcast(p + first, count, detail::datatype<T>(), root, comm); },
            [&](MPI_Request* r) { return MPI_Ibcast(p + first, count, detail::datatype<T>(), root, comm, r); },
            [&] { return detail::hold(view->buffers()); });
    });
    if (!staged.empty()) {
        detail::push_back_to_device(view->buffers(), staged);
    }
    stats.staged_blobs = staged.size();
    return stats;
}

}  // namespace mpi

SYNCBLOB_END_NAMESPACE
