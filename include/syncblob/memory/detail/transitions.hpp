// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The state machine of `SyncedBuffer` as a table: for each access (a side and what is wanted of
/// it) and each head, what must be done and which head follows. Every change of head goes through
/// it, the asynchronous copies included. docs/guide.md shows the same table; a test checks that
/// they agree.

#include <cstdint>

#include "../head.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace detail {

/// What an access wants of the side it touches.
enum class Want : std::uint8_t {
    read,       ///< fresh bytes to read; the other side stays fresh
    write,      ///< fresh bytes to change; the other side becomes stale
    overwrite,  ///< bytes about to be written whole: no zero-fill, no copy; the other side becomes stale
    prefetch,   ///< fresh bytes later: an asynchronous copy, the host not waiting (push / pull)
};

/// An access to one side of a buffer.
struct Access {
    Side side;
    Want want;
    friend constexpr bool operator==(Access, Access) noexcept = default;
};

/// Every access but a read and a prefetch makes the other side stale.
[[nodiscard]] constexpr bool writes(Access a) noexcept {
    return a.want == Want::write || a.want == Want::overwrite;
}

/// What an access does to the side it touches before the head moves.
enum class Step : std::uint8_t {
    none,                    ///< the side is fresh (and writable, for a write) as it is
    allocate_zeroed,         ///< first touch: allocate the side and zero it
    copy_from_other_side,    ///< the side is stale: allocate it if needed, copy the fresh side into it
    make_writable,           ///< the side is fresh but may be a read-only borrow: copy it into owned memory
    allocate_for_overwrite,  ///< allocate the side if needed (or replace a read-only borrow), no copy, no zero
    copy_async,              ///< allocate the side if needed, copy the fresh side into it on a stream, no wait
    refuse,                  ///< the access is an error from this head (`StateError`); nothing changes
};

struct Transition {
    Step step;
    Head next;
};

/// Reads and writes of the host side; those of the device side are its mirror image.
[[nodiscard]] constexpr Transition host_transition(Want w, Head h) noexcept {
    if (w == Want::overwrite) {
        return {Step::allocate_for_overwrite, Head::at_host};
    }
    const bool read = w == Want::read;
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

/// The asynchronous copies, which are not mirror images of each other: `pull_to_host_async` (a
/// host prefetch) is nothing from at_host, but `push_to_device_async` (a device prefetch) is an
/// error from at_device, since it promises a copy of the host's bytes. Neither allocates from
/// uninitialized: there is nothing to copy.
[[nodiscard]] constexpr Transition prefetch_transition(Side s, Head h) noexcept {
    const Head fresh_here = s == Side::host ? Head::at_host : Head::at_device;
    switch (h) {
        case Head::uninitialized:
            return {Step::refuse, h};
        case Head::synced:
            return {Step::none, h};
        default:
            break;
    }
    if (h == fresh_here) {
        return {s == Side::host ? Step::none : Step::refuse, h};
    }
    return {Step::copy_async, Head::synced};
}

[[nodiscard]] constexpr Head mirror(Head h) noexcept {
    return h == Head::at_host ? Head::at_device : h == Head::at_device ? Head::at_host : h;
}

/// What `a` does when the head is `h`.
[[nodiscard]] constexpr Transition transition(Access a, Head h) noexcept {
    if (a.want == Want::prefetch) {
        return prefetch_transition(a.side, h);
    }
    if (a.side == Side::host) {
        return host_transition(a.want, h);
    }
    const Transition t = host_transition(a.want, mirror(h));
    return {t.step, mirror(t.next)};
}

static_assert(transition({Side::device, Want::read}, Head::at_host).step == Step::copy_from_other_side);
static_assert(transition({Side::device, Want::read}, Head::at_host).next == Head::synced);
static_assert(transition({Side::device, Want::write}, Head::synced).next == Head::at_device);
static_assert(transition({Side::device, Want::prefetch}, Head::at_device).step == Step::refuse);
static_assert(transition({Side::host, Want::prefetch}, Head::at_host).step == Step::none);

}  // namespace detail

SYNCBLOB_END_NAMESPACE
