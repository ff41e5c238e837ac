// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// What the shared checkpoint loads of MPI (`comm/mpi_checkpoint.hpp`) and NCCL
/// (`comm/nccl_checkpoint.hpp`) have in common: the runs of the arena a load fills, each rank's
/// share of them, the plan of the tensors' pieces that fall into a rank's share, and the
/// fingerprint of the checkpoint the ranks compare in their agreement.
///
/// The share: the arena's data buffer, and the runs of blobs whose diff the checkpoint holds in its
/// diff buffer, laid end to end and cut at 256-byte boundaries (the arena's alignment) into one
/// contiguous share per rank, in rank order, of equal size give or take 256 bytes.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>
#include <utility>
#include <vector>

#include "../../checkpoint/arena_loader.hpp"
#include "../../checkpoint/device_convert.hpp"
#include "../../checkpoint/options.hpp"
#include "../../checkpoint/plan.hpp"
#include "agreement.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace comm::detail {

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

/// Rank `k`'s part of a region of `n` units that starts `at` units into the regions laid end to end
/// (`units` in all): units [first, end) from the region's start (empty where the share misses it).
inline std::pair<std::uint64_t, std::uint64_t> part_of(std::uint64_t units, std::uint64_t at, std::uint64_t n, int k,
                                                       int ranks) noexcept {
    const std::uint64_t lo = std::clamp(share_start(units, k, ranks), at, at + n);
    const std::uint64_t hi = std::clamp(share_start(units, k + 1, ranks), at, at + n);
    return {lo - at, hi - at};
}

/// The regions of a shared load: the whole data buffer, then each run of consecutive blobs with a
/// diff in the checkpoint (`with_diff`); each cut into pieces of at most `max_units` units (MPI's
/// counts and displacements are ints).
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
    const std::size_t most = std::min(max_units, std::numeric_limits<std::size_t>::max() / unit) * unit;
    for (const LoadRegion& r : whole) {
        for (std::size_t first = r.first; first < r.end;) {
            const std::size_t n = std::min(most, r.end - first);  // never past r.end: no sum that wraps
            out.push_back({r.diff, first, first + n, r.first_blob, r.end_blob});
            first += n;
        }
    }
    return out;
}

/// An FNV-1a fingerprint of what a load reads for the arena's blobs (each tensor's and diff's dtype,
/// shard and place in it, and the shards' sizes): ranks whose checkpoints differ there disagree.
inline std::uint64_t checkpoint_fingerprint(const checkpoint::Checkpoint& ckpt,
                                            const std::vector<const checkpoint::Tensor*>& tensors) {
    Fnv1a h;
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

/// A rank's share of a shared load, checked against the arena and planned.
struct SharePlan {
    std::vector<const checkpoint::Tensor*> tensors;  ///< each blob's tensor, then its diff (or null)
    std::vector<bool> with_diff;                     ///< whether blob i's diff is loaded
    std::vector<LoadRegion> regions;
    std::uint64_t units = 0;         ///< of the regions laid end to end
    std::uint64_t bytes_loaded = 0;  ///< tensor bytes of every rank's share together
    checkpoint::detail::Plan plan;   ///< the pieces of this rank's share, in chunks of `chunk_bytes`
};

/// Checks `ckpt` against `arena` as `CheckpointArena::load` does (\throws as it does, `op` in the
/// message of a ShapeError) and plans rank `rank`'s share of `ranks`: the elements of each tensor
/// that fall into it, in chunks as a load cuts them; `on_device`, as a device load stages them
/// (conversions that cannot refuse a value staged raw, for a kernel).
template <Element T, SyncedAllocator A>
SharePlan plan_share(const checkpoint::CheckpointArena<T, A>& arena, const checkpoint::Checkpoint& ckpt,
                     const checkpoint::LoadOptions& load, std::string_view op, int rank, int ranks,
                     std::size_t max_units, bool on_device) {
    constexpr std::size_t unit = ParameterArena<T, A>::alignment;
    const auto& blobs = arena.arena();
    SharePlan out;
    for (const auto& m : arena.match(ckpt, load.convert, op)) {
        out.with_diff.push_back(m.diff != nullptr);
        out.tensors.push_back(m.tensor);
        out.tensors.push_back(m.diff);
        out.bytes_loaded += m.tensor->bytes + (m.diff != nullptr ? m.diff->bytes : 0);
    }
    out.regions = load_regions(blobs, out.with_diff, max_units);
    for (const auto& r : out.regions) {
        out.units += (r.end - r.first) / unit;
    }
    const std::uint64_t lo = share_start(out.units, rank, ranks) * unit;  // bytes of the regions end to end
    const std::uint64_t hi = share_start(out.units, rank + 1, ranks) * unit;
    std::vector<checkpoint::detail::PlanTensor> parts[2];  // of the data, of the diffs
    std::uint64_t at = 0;
    for (const auto& r : out.regions) {
        const std::uint64_t length = r.end - r.first;
        const std::uint64_t from = std::clamp(lo, at, at + length) - at + r.first;  // bytes of the buffer
        const std::uint64_t to = std::clamp(hi, at, at + length) - at + r.first;
        at += length;
        for (std::size_t i = r.first_blob; from < to && i < r.end_blob; ++i) {
            const Slice s = blobs.slice(i);
            const std::uint64_t a = std::max<std::uint64_t>(from, s.offset);
            const std::uint64_t b = std::min<std::uint64_t>(to, s.offset + s.bytes);
            if (a >= b) {
                continue;
            }
            const checkpoint::Tensor* t = out.tensors[2 * i + (r.diff ? 1 : 0)];
            parts[r.diff ? 1 : 0].push_back(
                {.tensor = static_cast<std::size_t>(t - ckpt.tensors().data()),
                 .dst = s.offset,
                 .count = (b - a) / sizeof(T),
                 .dtype = t->dtype,
                 .device_convert = on_device && checkpoint::detail::converts_on_device<T>(t->dtype),
                 .first = (a - s.offset) / sizeof(T),
                 .shard = t->shard,
                 .offset = t->offset});
        }
    }
    checkpoint::detail::Planner planner(sizeof(T), load.chunk_bytes, !on_device);
    planner.add(parts[0], false);
    planner.add(parts[1], true);
    out.plan = planner.finish();
    return out;
}

}  // namespace comm::detail

SYNCBLOB_END_NAMESPACE
