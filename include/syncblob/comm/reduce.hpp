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

SYNCBLOB_END_NAMESPACE
