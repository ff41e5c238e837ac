// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// What the machine offers a process, read from the system at run time with a fallback (a
/// header-only library cannot know the machine it will run on): the CPUs the process may run on
/// and the size of one core's caches. The thread pool sizes itself by the first, the host math cuts
/// its blocks by the second.

#include <algorithm>
#include <cstddef>
#include <thread>

#include "config.hpp"
#include "detail/sysfs_cache.hpp"

#if defined(__linux__)
#include <sched.h>
#include <unistd.h>
#endif

SYNCBLOB_BEGIN_NAMESPACE

/// The CPUs this process may run on (its affinity mask, so a container or `taskset` limit counts;
/// the hardware's count where that cannot be read).
[[nodiscard]] inline unsigned available_cpus() noexcept {
#if defined(__linux__)
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
        return static_cast<unsigned>(std::max(1, CPU_COUNT(&set)));
    }
#endif
    return std::max(1u, std::thread::hardware_concurrency());
}

/// The size in bytes of one core's cache at `level` (1 for data, 2, 3): from the system (sysfs,
/// else `sysconf`), or `fallback` where neither says.
[[nodiscard]] inline std::size_t cache_bytes(int level, std::size_t fallback = std::size_t{1} << 20) noexcept {
#if defined(__linux__)
    if (const std::size_t bytes = detail::sysfs_cache_bytes(level); bytes != 0) {
        return bytes;
    }
#if defined(_SC_LEVEL2_CACHE_SIZE)
    const long value = level == 1   ? sysconf(_SC_LEVEL1_DCACHE_SIZE)
                       : level == 2 ? sysconf(_SC_LEVEL2_CACHE_SIZE)
                       : level == 3 ? sysconf(_SC_LEVEL3_CACHE_SIZE)
                                    : 0;
    if (value > 0) {
        return static_cast<std::size_t>(value);
    }
#endif
#endif
    (void)level;
    return fallback;
}

SYNCBLOB_END_NAMESPACE
