// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Prefetch hints for passes over many objects (internal, shared with arena and checkpoint: the
/// names are in `detail`). At a million blobs, a pass that reaches each blob's buffers through a
/// pointer misses the cache once per object; where the pass also makes an atomic read-modify-write
/// on each one (a lock, a `shared_ptr`'s count), the processor waits for each miss before it starts
/// the next. Asking for the objects some iterations ahead lets the misses overlap; a prefetch is a
/// hint, not ordered with locked operations, and never faults.
///
/// Each is always inlined, and so must be every function of the library that does nothing but
/// call them: GCC counts a prefetch as no effect, so a call to a function made of prefetches alone
/// is removed as useless where it is not inlined (GCC 12, `-O3`: none was left in
/// `ParameterArena::seal` until its `fetch_ahead` was always inlined).

#include <cstddef>
#include <cstdint>

#include "config.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace detail {

/// Asks for the cache line at `p`, to be read. Nothing where the compiler has no prefetch hint.
SYNCBLOB_ALWAYS_INLINE void prefetch([[maybe_unused]] const void* p) noexcept {
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(p, 0);
#endif
}

/// Asks for the cache line at `p`, to be written.
SYNCBLOB_ALWAYS_INLINE void prefetch_for_write([[maybe_unused]] const void* p) noexcept {
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(p, 1);
#endif
}

/// Asks for every cache line of the `bytes` bytes at `p` and of the `before` bytes before it (an
/// object larger than a line: each of its lines is a miss of its own; `before`: a header kept in
/// front of it, such as the counts `std::make_shared` puts before the object).
SYNCBLOB_ALWAYS_INLINE void prefetch_bytes(const void* p, std::size_t bytes, std::size_t before = 0) noexcept {
    constexpr std::uintptr_t line = 64;
    const auto at = reinterpret_cast<std::uintptr_t>(p);
    const std::uintptr_t end = at + bytes;
    // In integers: the lines need not lie in one object, and a prefetch of any address is harmless.
    for (std::uintptr_t a = (at - before) & ~(line - 1); a < end; a += line) {
        prefetch(
            reinterpret_cast<const void*>(a));  // NOLINT(performance-no-int-to-ptr): an address to ask for, never read
    }
}

}  // namespace detail

SYNCBLOB_END_NAMESPACE
