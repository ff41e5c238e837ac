// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// What a checkpoint load into an arena is asked to do (`checkpoint::LoadOptions`) and what it did
/// (`checkpoint::LoadReport`).

#include <cstddef>
#include <cstdint>
#include <functional>

#include "../core/config.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace checkpoint {

/// Where a load puts the tensors.
enum class Target : std::uint8_t {
    automatic,  ///< the device when the arena has one, else the host
    host,       ///< the arena's host side (heads at_host), read straight from the files
    device,     ///< the arena's device side (heads at_device), through pinned staging blocks
};

/// Options of `CheckpointArena::load` and `checkpoint::load`.
struct LoadOptions {
    /// Allow tensors of another dtype than the arena's, converted by the one element conversion (see
    /// `io::LoadOptions::convert`). Off: such a tensor is a `FormatError` before anything is read.
    bool convert = false;
    /// With `convert`: a value the arena's type cannot hold takes the nearest one (see
    /// `io::LoadOptions::saturate`). Off: such a value is a `FormatError` naming its element.
    bool saturate = false;
    /// The most bytes a reader reads and a copy moves at once (a chunk; taken as 4096 when smaller;
    /// any larger value works, `SIZE_MAX` included: a chunk never spans more than one of the arena's
    /// buffers). A device load's staging blocks are the size of its largest chunk.
    std::size_t chunk_bytes = std::size_t{8} << 20;
    /// Reader threads (syncblob's pool); 0: all of them. Capped at `parallel::max_threads()` and at
    /// the number of chunks; `LoadReport::threads` says how many ran.
    unsigned threads = 0;
    /// Pinned staging blocks per reader thread for a device load (taken as 1 when 0, and as the
    /// reader's share of the chunks when more): with 2, a reader reads the next chunk while the copy
    /// of the last one runs.
    unsigned staging_blocks = 2;
    /// Where the tensors go: a value that is no `Target`, or `Target::device` for an arena whose
    /// backend has no device, is an OptionError before anything is read.
    Target target = Target::automatic;
    /// Called with (bytes read so far, bytes to read) after each chunk is read, from the reader
    /// threads, one call at a time, the first argument increasing. What it throws stops the load.
    std::function<void(std::uint64_t, std::uint64_t)> progress;
};

/// What a load did.
struct LoadReport {
    std::uint64_t bytes_read = 0;  ///< bytes of tensor data read from the files
    std::size_t tensors = 0;       ///< tensors loaded (diffs included)
    std::size_t chunks = 0;        ///< chunks read
    /// Host-to-device copies issued: one per chunk for a device load, none for a host load.
    std::size_t host_to_device_copies = 0;
    std::size_t device_conversions = 0;  ///< conversion kernels queued (one per converted piece)
    unsigned threads = 0;                ///< reader threads used
    bool on_device = false;              ///< the tensors went to the device side
    double seconds = 0;                  ///< wall time of the load (its copies may still run after it)
};

}  // namespace checkpoint

SYNCBLOB_END_NAMESPACE
