// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Internal, shared beyond its folder: used by the file reads (io/) and the arena's host buffers (arena/), so
/// it sits outside detail/; its names stay in a detail namespace and are no user API.
///
/// `advise_huge_pages`: asking the kernel for transparent huge pages on a large range before it is
/// first touched (used by the loaders for their destination and by the arena for its host buffers).

#include <cstddef>
#include <cstdint>

#if __has_include(<sys/mman.h>) && __has_include(<unistd.h>)
#include <sys/mman.h>
#include <unistd.h>
#endif

#include "../core/config.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace detail {

/// Asks the kernel to back [p, p + bytes) with transparent huge pages before it is first touched:
/// writing it (a memset, a read from a file) then costs one fault per 2 MiB instead of per 4 KiB,
/// and later copies into it miss the TLB less. Only whole pages inside the range are advised; small
/// ranges, failures and systems without `madvise(MADV_HUGEPAGE)` are ignored.
inline void advise_huge_pages(void* p, std::size_t bytes) noexcept {
#if defined(MADV_HUGEPAGE)
    constexpr std::size_t huge = std::size_t{2} << 20;
    if (p == nullptr || bytes < 2 * huge) {
        return;
    }
    const long page_size = ::sysconf(_SC_PAGESIZE);
    const auto page = static_cast<std::uintptr_t>(page_size > 0 ? page_size : 4096);
    const auto begin = (reinterpret_cast<std::uintptr_t>(p) + page - 1) / page * page;
    const auto end = (reinterpret_cast<std::uintptr_t>(p) + bytes) / page * page;
    if (end > begin) {
        (void)::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
    }
#else
    (void)p;
    (void)bytes;
#endif
}

}  // namespace detail

SYNCBLOB_END_NAMESPACE
