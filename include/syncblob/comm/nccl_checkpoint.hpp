// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// A checkpoint loaded once by many ranks into the device side of their arenas (`nccl::load_shared`;
/// targets `syncblob::nccl` and `syncblob::json`): each rank reads a disjoint share of the
/// checkpoint's bytes, cut as `mpi::load_shared` cuts them (comm/detail/shared_load.hpp), through the
/// device load's own pipeline (reader threads, pinned staging blocks, one host-to-device copy per
/// chunk, conversions that cannot refuse a value run on the device), then NCCL completes every
/// rank's arena in device memory: for each run of the arena, one in-place `ncclBroadcast` per rank
/// of its part, grouped (NCCL has no all-gather of unequal parts). N ranks read the files once
/// between them instead of N times, and every rank ends with the bytes a device load on one rank
/// gives, bit for bit, the blobs at_device.
///
/// Everything is queued on the arena's stream and the call returns without waiting for the
/// copies or the broadcasts (the agreement aside, which waits for every rank's descriptor); the
/// streams of the arena's blobs are made to wait for them, so every later access through syncblob
/// is ordered after the load. A `cuda::Device` arena whose load converts on the device needs the
/// conversion's kernels: include <syncblob/checkpoint/cuda.cuh> from a .cu file, as for
/// `CheckpointArena::load`.
///
/// This header is part of the communication layer, which sits above the checkpoint layer: it uses
/// the checkpoint loader's reading and the arena, and the checkpoint layer knows nothing of NCCL.

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "../checkpoint/arena_loader.hpp"
#include "../checkpoint/detail/device_load.hpp"
#include "../checkpoint/options.hpp"
#include "../checkpoint/plan.hpp"
#include "../core/error.hpp"
#include "../memory/stream_order.hpp"
#include "detail/shared_load.hpp"
#include "nccl.hpp"
#include "reduce.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace nccl {

/// What `load_shared` did on the calling rank (shared with `mpi::load_shared`).
using SharedLoadReport = syncblob::SharedLoadReport;

/// Loads `ckpt` into the device side of `arena` on every rank of `comm`, each rank reading only its
/// share of the bytes (see the file comment); when the queued work has run, every rank's arena holds
/// what `arena.load(ckpt, load)` gives on one rank, bit for bit, at_device. A collective call: every
/// rank calls it with an arena of the same layout and the same checkpoint (its tensors' dtypes and
/// places in the shards; their bytes are not compared), else every rank throws the same StateError.
/// `load` is what `CheckpointArena::load` takes (convert, saturate, chunk_bytes, threads,
/// staging_blocks, progress — this rank's bytes); its `target` must not be `Target::host` (for the
/// host side, `mpi::load_shared`). `options.timeout` bounds the agreement's wait for the other ranks,
/// from the end of this rank's own reading. The load runs on the device of the arena's blocks,
/// whatever device the caller has current (an arena without device blocks yet gets them on the
/// current device, as on any first device access).
/// \throws on the rank where it happens, the other ranks throwing StateError naming it: OptionError
/// (`Target::host`), FormatError (a blob's tensor missing, a dtype other than T without `load.convert`,
/// a value the conversion refuses, a shard cut short), ShapeError, IOError, StateError (an arena blob
/// replaced or reshaped), DeviceError, and what `load.progress` throws. Then, on every rank alike:
/// OptionError (a timeout that is not positive), StateError (arenas or checkpoints that differ),
/// CommError, TimeoutError. After an exception the blobs' values are unspecified (the copies issued
/// stay ordered before any use of them).
template <NcclElement T, NcclAllocator A>
SharedLoadReport load_shared(checkpoint::CheckpointArena<T, A>& arena, const checkpoint::Checkpoint& ckpt,
                             ncclComm_t comm, const checkpoint::LoadOptions& load = {}, Options options = {}) {
    constexpr std::string_view op = "nccl::load_shared";
    constexpr std::size_t unit = ParameterArena<T, A>::alignment;
    using Device = typename A::device_backend;
    using stream_type = typename Device::stream_type;
    const auto started = std::chrono::steady_clock::now();
    auto& blobs = arena.arena();
    const auto rank_size = detail::rank_and_size(comm, op);
    const int rank = rank_size.first;
    const int ranks = rank_size.second;
    const stream_type stream = blobs.stream();
    const int device = checkpoint::detail::arena_device(blobs);
    // The arena's blocks and streams are its device's, whatever device the caller has current: the
    // staging, the events recorded on its streams and the agreement's scratch are made there.
    const DeviceGuard<Device> guard(device);  // the arena's blocks

    SharedLoadReport report;
    comm::detail::SharePlan share;
    std::optional<ArenaBuffer<T, A>> data;
    std::optional<ArenaBuffer<T, A>> diff;
    std::byte* bases[2] = {nullptr, nullptr};
    std::vector<stream_type> streams;  // the other streams the blobs' buffers use, once each
    // This rank's own work (checking the checkpoint against the arena, reading its share, queuing its
    // copies) comes before the agreement, so that a failure here reaches every rank as an exception.
    const auto failure = comm::detail::prepare(blobs, op, [&] {
        if (!checkpoint::detail::on_device(load.target, true)) {
            throw OptionError(std::string(op) +
                              ": LoadOptions::target is Target::host; a shared load through NCCL fills the arena's "
                              "device side (use Target::device or Target::automatic, or mpi::load_shared)");
        }
        share = comm::detail::plan_share(arena, ckpt, load, op, rank, ranks,
                                         std::numeric_limits<std::size_t>::max() / unit, true);
        // Every blob's data, and the diffs the checkpoint holds, are about to be overwritten whole.
        data.emplace(blobs.flat_data());
        diff.emplace(blobs.flat_diff());
        if (data->elements() != 0) {
            bases[0] = reinterpret_cast<std::byte*>(data->mutable_device_data_for_overwrite());
        }
        for (const auto& r : share.regions) {
            if (r.diff) {
                bases[1] =
                    reinterpret_cast<std::byte*>(diff->mutable_device_data_for_overwrite(r.first_blob, r.end_blob));
            }
        }
        streams = checkpoint::detail::load_streams(blobs, share.with_diff);
        std::erase(streams, stream);
        for (const stream_type s : streams) {
            syncblob::detail::order_after<Device>(s, stream);  // the copies overwrite what work on s uses
        }
        checkpoint::detail::DeviceLoad<T, A> reader(ckpt, share.plan, {bases[0], bases[1]}, stream, device,
                                                    checkpoint::detail::convert_rule(load));
        checkpoint::detail::Progress progress(load.progress, share.plan.source_bytes);
        report.threads = checkpoint::detail::reader_threads(load.threads, share.plan.chunks.size());
        try {
            reader.run(
                report.threads,
                checkpoint::detail::staging_blocks(load.staging_blocks, share.plan.chunks.size(), report.threads),
                share.plan.largest_chunk, progress);
        } catch (...) {
            for (const stream_type s : streams) {
                syncblob::detail::order_after<Device>(stream, s);  // the copies issued stay before any use
            }
            throw;
        }
        report.bytes_read = share.plan.source_bytes;
        report.read_seconds = checkpoint::detail::seconds_since(started);
    });
    detail::agree(blobs, comm, stream, op, comm::detail::CommOperation::shared_load,
                  comm::detail::checkpoint_fingerprint(ckpt, share.tensors), 0, 0, options.timeout, failure);

    // Each rank's part of each run, broadcast from it to the others, in place.
    std::uint64_t at = 0;  // in units, of the regions laid end to end
    for (const auto& r : share.regions) {
        const std::uint64_t n = (r.end - r.first) / unit;
        std::byte* p = bases[r.diff ? 1 : 0] + r.first;
        detail::check(ncclGroupStart(), op, "ncclGroupStart", comm);
        ncclResult_t status = ncclSuccess;
        for (int k = 0; k < ranks && status == ncclSuccess; ++k) {
            const auto [lo, hi] = comm::detail::part_of(share.units, at, n, k, ranks);
            if (hi > lo) {
                std::byte* part = p + lo * unit;
                status = ncclBroadcast(part, part, (hi - lo) * unit, ncclUint8, k, comm, stream);
                ++report.calls;
                report.bytes_received += k == rank ? 0 : (hi - lo) * unit;
            }
        }
        const ncclResult_t ended = ncclGroupEnd();
        detail::check(status, op, "ncclBroadcast", comm);
        detail::check(ended, op, "ncclGroupEnd", comm);
        at += n;
    }
    for (const stream_type s : streams) {
        syncblob::detail::order_after<Device>(stream, s);  // work on s runs after the copies and broadcasts
    }
    report.bytes_loaded = share.bytes_loaded;
    report.seconds = checkpoint::detail::seconds_since(started);
    return report;
}

}  // namespace nccl

SYNCBLOB_END_NAMESPACE
