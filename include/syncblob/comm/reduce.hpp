// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// What the communication layer shares between its engines: the reduction, and what a call did.

#include <cstdint>
#include <ostream>

#include "../core/config.hpp"

SYNCBLOB_BEGIN_NAMESPACE

/// How an all-reduce combines the ranks' values.
enum class Reduce : std::uint8_t {
    sum,   ///< the sum over ranks
    mean,  ///< the sum over ranks divided by their number (data-parallel gradients)
};

/// What one collective operation on an arena did, on the calling rank.
struct CommStats {
    std::uint64_t calls = 0;  ///< collective calls issued (a run over the engine's count limit takes several)
    std::uint64_t bytes = 0;  ///< bytes reduced or broadcast (the padding between slices included)
    /// Blobs copied to the memory the engine works on: for MPI, diffs fresh on the device only and
    /// staged through host memory (then copied back); for NCCL, slices fresh on the host only.
    std::uint64_t staged_blobs = 0;
    bool on_device = false;  ///< the engine read and wrote device memory directly (for some of the bytes at least)

    friend bool operator==(const CommStats&, const CommStats&) = default;
    friend std::ostream& operator<<(std::ostream& os, const CommStats& s) {
        return os << s.calls << " call(s), " << s.bytes << " B, " << s.staged_blobs << " blob(s) staged, "
                  << (s.on_device ? "on the device" : "on the host");
    }
};

/// What a shared checkpoint load (`mpi::load_shared`, `nccl::load_shared`) did on the calling rank.
struct SharedLoadReport {
    std::uint64_t bytes_read = 0;      ///< tensor bytes this rank read from the files (its share)
    std::uint64_t bytes_loaded = 0;    ///< tensor bytes of the checkpoint the load read, every rank's share together
    std::uint64_t bytes_received = 0;  ///< arena bytes this rank received from the other ranks
    std::uint64_t calls = 0;           ///< collective calls that completed the arena
    unsigned threads = 0;              ///< reader threads this rank used
    double read_seconds = 0;           ///< this rank's reading (for NCCL: until its copies were queued)
    double seconds = 0;                ///< the whole call on this rank
};

SYNCBLOB_END_NAMESPACE
