// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The state machine of `SyncedBuffer` as a table: for each access and head, what must be done
/// and which head follows. docs/guide.md shows the same table; a test checks that they agree.

#include <cstdint>

#include "../head.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace detail {

/// An access to one side of a buffer.
enum class Access : std::uint8_t {
    host_read,
    host_write,
    host_overwrite,  ///< every byte is about to be written: no zero-fill, no copy
    device_read,
    device_write,
    device_overwrite
};

[[nodiscard]] constexpr bool on_host(Access a) noexcept {
    return a == Access::host_read || a == Access::host_write || a == Access::host_overwrite;
}

/// Every access but a read makes the other side stale.
[[nodiscard]] constexpr bool writes(Access a) noexcept {
    return a != Access::host_read && a != Access::device_read;
}

/// What an access does to the side it touches before the head moves.
enum class Step : std::uint8_t {
    none,                    ///< the side is fresh (and writable, for a write) as it is
    allocate_zeroed,         ///< first touch: allocate the side and zero it
    copy_from_other_side,    ///< the side is stale: allocate it if needed, copy the fresh side into it
    make_writable,           ///< the side is fresh but may be a read-only borrow: copy it into owned memory
    allocate_for_overwrite,  ///< allocate the side if needed (or replace a read-only borrow), no copy, no zero
};

struct Transition {
    Step step;
    Head next;
};

/// The table for host accesses; device accesses are its mirror image.
[[nodiscard]] constexpr Transition host_transition(Access a, Head h) noexcept {
    if (a == Access::host_overwrite) {
        return {Step::allocate_for_overwrite, Head::at_host};
    }
    const bool read = a == Access::host_read;
    switch (h) {
        case Head::uninitialized:
            return {Step::allocate_zeroed, Head::at_host};
        case Head::at_host:
            return {read ? Step::none : Step::make_writable, Head::at_host};
        case Head::at_device:
            return {Step::copy_from_other_side, read ? Head::synced : Head::at_host};
        case Head::synced:
            return {read ? Step::none : Step::make_writable, read ? Head::synced : Head::at_host};
    }
    return {Step::none, h};
}

[[nodiscard]] constexpr Head mirror(Head h) noexcept {
    return h == Head::at_host ? Head::at_device : h == Head::at_device ? Head::at_host : h;
}

[[nodiscard]] constexpr Access mirror(Access a) noexcept {
    switch (a) {
        case Access::device_read:
            return Access::host_read;
        case Access::device_write:
            return Access::host_write;
        case Access::device_overwrite:
            return Access::host_overwrite;
        default:
            return a;
    }
}

/// What `a` does when the head is `h`.
[[nodiscard]] constexpr Transition transition(Access a, Head h) noexcept {
    if (on_host(a)) {
        return host_transition(a, h);
    }
    const Transition t = host_transition(mirror(a), mirror(h));
    return {t.step, mirror(t.next)};
}

static_assert(transition(Access::device_read, Head::at_host).step == Step::copy_from_other_side);
static_assert(transition(Access::device_read, Head::at_host).next == Head::synced);
static_assert(transition(Access::device_write, Head::synced).next == Head::at_device);

}  // namespace detail

SYNCBLOB_END_NAMESPACE
