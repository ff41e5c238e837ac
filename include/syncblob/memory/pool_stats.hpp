// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// `PoolStats`: what a caching pool (`PinnedPool`, `cuda::AsyncPool`) reports about the memory
/// it holds and how well its cache serves.

#include <cstddef>
#include <cstdint>

#include "../core/config.hpp"

SYNCBLOB_BEGIN_NAMESPACE

/// A snapshot of a caching pool. Bytes are counted at the size of the blocks the pool holds (the
/// size a request is rounded to, or a larger block that served it), except `requested_bytes`,
/// which counts what callers asked for.
struct PoolStats {
    std::size_t in_use_bytes = 0;          ///< handed out and not yet given back
    std::size_t requested_bytes = 0;       ///< what the callers of the blocks in use asked for
    std::size_t cached_bytes = 0;          ///< given back and kept for reuse (or waiting for its work to finish)
    std::size_t reserved_bytes = 0;        ///< in use + cached: what the pool holds from the system
    std::size_t peak_reserved_bytes = 0;   ///< the most `reserved_bytes` has been
    std::size_t peak_requested_bytes = 0;  ///< the most `requested_bytes` has been
    std::uint64_t requests = 0;            ///< allocations asked of the pool
    std::uint64_t cache_hits = 0;          ///< of those, served from the cache
    std::uint64_t system_allocations = 0;  ///< blocks obtained from the system
    std::uint64_t system_frees = 0;        ///< blocks returned to the system (`empty_cache`, the cap, destruction)
};

SYNCBLOB_END_NAMESPACE
