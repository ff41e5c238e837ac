// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// What every MPI call of `syncblob/comm/mpi.hpp` takes and shares: `mpi::Options`, whether the MPI
/// library is taken as device-aware, and the operations given up on at a timeout.

#include <chrono>
#include <cstddef>
#include <optional>

#include "../core/config.hpp"
#include "detail/mpi_call.hpp"
#include "detail/mpi_wait.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace mpi {

/// Choices for a call.
struct Options {
    /// Let MPI read and write device memory directly (a CUDA-aware MPI). Unset: detected once, see
    /// device_aware(). Set it to true only if the MPI library really is device-aware.
    std::optional<bool> device_aware{};
    /// The arena is reduced in consecutive pieces of this many bytes (whole elements; 0: pieces of
    /// `INT_MAX` elements): `allreduce_diff` makes one MPI_Allreduce per piece for a sum, and syncblob's
    /// own all-reduce (a mean, and the bucketed form) reduces a few pieces at a time. Unset, the
    /// call chooses from where the ranks run, which the agreement tells every rank alike:
    /// `piece_bytes_within_host` when they all run on one host, `piece_bytes_across_hosts` when the
    /// communicator spans hosts (docs/scaling-out.md has the measurements). Every rank must pass the
    /// same value, or leave it unset on every rank (checked with the arena).
    std::optional<std::size_t> piece_bytes{};
    /// How long a call waits for the other ranks before it gives up with TimeoutError: unset, as long
    /// as MPI's blocking calls do. Set, the agreement and the collectives are MPI's non-blocking
    /// ones, tested in a loop until they complete or the time has passed (from the start of the
    /// call; for a BucketedAllreduce, of its construction, of `wait()` and of its destruction).
    /// What a timeout leaves behind: docs/scaling-out.md. Ranks may wait for different times, but
    /// `allreduce_diff` and `broadcast_data` need it set on every rank or on none (a blocking and a
    /// non-blocking collective never match): otherwise every rank throws the same StateError. A
    /// timeout that is not positive is an OptionError on every rank, before any rank's data changes.
    std::optional<std::chrono::milliseconds> timeout{};
};

/// The pieces of a call whose ranks all run on one host (`Options::piece_bytes` unset): pieces of a
/// few MiB keep Open MPI's shared-memory transport in cache; on 2 ranks here a 256 MiB arena reduces
/// 2.5–3× faster in 4 MiB pieces than in one call.
inline constexpr std::size_t piece_bytes_within_host = std::size_t{4} << 20;

/// The pieces of a call whose communicator spans hosts (`Options::piece_bytes` unset): over TCP at
/// 1 Gbit/s between two hosts, a mean of 64 MiB on 2 ranks ran at 0.72–0.76 of a raw MPI_Allreduce
/// in 4 MiB pieces and at 1.00 in 16 MiB ones, but the bucketed form there at 0.75–0.81 until its
/// pieces were 32 MiB (1.00); 32 MiB was no worse at 10 Gbit/s or on 4 ranks. The ring's scratch
/// memory is `ring_pieces_in_flight` pieces divided by the number of ranks.
inline constexpr std::size_t piece_bytes_across_hosts = std::size_t{32} << 20;

/// Pieces of syncblob's own all-reduce (`Options::piece_bytes` each) in flight at a time, in a mean and in
/// the bucketed all-reduce: chosen from measurement (docs/scaling-out.md).
inline constexpr std::size_t ring_pieces_in_flight = 4;

/// Operations of this process given up on at a timeout that MPI has not completed yet (it
/// completes them if the missing ranks join later; until then syncblob keeps the memory they use).
/// Tests each of them first, letting MPI progress.
inline std::size_t abandoned_operations() noexcept {
    return detail::Graveyard::reap();
}

/// Whether the MPI library is taken as device-aware when `Options` does not say: the environment
/// variable `SYNCBLOB_MPI_DEVICE_AWARE` (`1` or `0`) if set, else Open MPI's
/// `MPIX_Query_cuda_support()`, else false. Decided at the first call (after MPI_Init).
inline bool device_aware() {
    static const bool aware = detail::detect_device_aware();
    return aware;
}

}  // namespace mpi

SYNCBLOB_END_NAMESPACE
