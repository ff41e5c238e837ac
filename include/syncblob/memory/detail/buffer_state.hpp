// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The engine under `SyncedBuffer`: the slow path that carries out the transitions of
/// detail/transitions.hpp for an access, an asynchronous copy (prefetch) and a borrow, over the
/// members and side mechanics of detail/buffer_sides.hpp. `SyncedBuffer` adds the public surface
/// and nothing else.

#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "../../core/error.hpp"
#include "../../core/sync_audit.hpp"
#include "../device_backend.hpp"
#include "../head.hpp"
#include "../stream_order.hpp"
#include "buffer_sides.hpp"
#include "transitions.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace detail {

/// The slow path of `SyncedBuffer<HostAlloc, Device>` (its only user), over its members.
template <HostAllocator HostAlloc, DeviceBackend Device>
class BufferState : protected BufferSides<HostAlloc, Device> {
    using Base = BufferSides<HostAlloc, Device>;

protected:
    using Base::check_borrow, Base::check_device_id, Base::count, Base::ensure, Base::head, Base::make_stale,
        Base::note_host_access, Base::owns_unlocked, Base::publish, Base::pull, Base::push, Base::register_host,
        Base::release_device, Base::release_host, Base::require_device, Base::side_ptr, Base::unregister_host,
        Base::wait_host_unlocked;
    using Base::device_, Base::device_holding_, Base::device_read_only_, Base::host_, Base::host_holding_,
        Base::host_read_only_, Base::mutex_, Base::pending_, Base::size_, Base::stats_, Base::stream_;
    using typename Base::Contents;
    using typename Base::stream_type;

    explicit BufferState(std::size_t bytes) noexcept : Base(bytes) {}

    // The slow path of an access to a whole side (the accessors' calls stay as short as they were).
    SYNCBLOB_NOINLINE void* access(std::string_view op, Access a) const { return access(op, a, 0); }

    // The slow path of a read, write or overwrite of side `a.side`: every access that changes
    // something, as transition says. Holds the mutex; on any exception the head is unchanged
    // (allocation happens before the head moves). The stale side is poisoned only after the new
    // head is published, so a failing poison cannot leave a fresh side garbled under a head that
    // still names it fresh. `written`: for a write, the leading bytes the caller overwrites at
    // once; the copy or zero-fill the write needs covers only the bytes after them.
    SYNCBLOB_NOINLINE void* access(std::string_view op, Access a, std::size_t written) const {
        const bool to_host = a.side == Side::host;
        // A host access asks for the wait for the copy that brings the host side up to date; a
        // device access asks for no wait (an implicit copy to the device waits, and is reported).
        const audit::Operation audited(op, to_host ? audit::host_read : audit::Waits{});
        if (!to_host) {
            require_device(op);
        }
        std::lock_guard lock(mutex_);
        if (writes(a) && (host_holding_.refuses_writes || device_holding_.refuses_writes)) {
            throw StateError(std::string(op) +
                             ": the buffer holds read-only memory that refuses writes (a read-only import); "
                             "copy it (Blob::clone) or import it copy-on-write");
        }
        if (to_host) {
            wait_host_unlocked();
        } else {
            pending_.order_own_stream(stream_);
            check_device_id(op);
        }
        const auto [step, next] = transition(a, head());
        switch (step) {
            case Step::none:
                break;
            case Step::allocate_zeroed:
                ensure(a.side, Contents::zeros, written);
                break;
            case Step::copy_from_other_side:
                to_host ? pull(op, written) : push(written);
                break;
            case Step::make_writable:
                ensure(a.side, Contents::kept, written);
                break;
            case Step::allocate_for_overwrite:
                ensure(a.side, Contents::unspecified);
                break;
            case Step::copy_async:  // prefetches only (prefetch below)
            case Step::refuse:
                break;
        }
        publish(next);
        if (writes(a)) {
            make_stale(other_side(a.side));
        }
        if (to_host) {
            note_host_access(writes(a), op);
        }
        return to_host ? host_ : device_;
    }

    // push_to_device_async (`to` the device) and pull_to_host_async (`to` the host): an
    // asynchronous copy of the fresh side into side `to` on `stream`, as transition says, tracked
    // by an event; the host does not wait.
    void prefetch(std::string_view op, Side to, stream_type stream) const {
        require_device(op);
        std::lock_guard lock(mutex_);
        const Head h = head();
        const auto [step, next] = transition({to, Want::prefetch}, h);
        if (step == Step::refuse) {
            throw StateError(std::string(op) + ": needs fresh " + (to == Side::device ? "host" : "device") +
                             " data, but the head is " + std::string(head_name(h)));
        }
        if (step == Step::none) {
            return;
        }
        check_device_id(op);
        ensure(to, Contents::unspecified);
        // A push: no copy is pending (every way to at_host, a host access or set_host_data, waited
        // for it), but the device block may still be in use by work on the buffer's stream. A pull:
        // the copy reads what kernels on the buffer's stream write, and writes the host block an
        // earlier asynchronous copy may still read; that copy is covered too, since the head reached
        // at_device through a device access, which made the buffer's stream wait for it, and a point
        // recorded after a wait is reached only once the waited work has run. Either way `stream`
        // waits for the buffer's stream (the host does not).
        detail::order_after<Device>(stream_, stream);
        if (size_ != 0) {
            const bool up = to == Side::device;
            Device::copy_async(side_ptr(to), side_ptr(other_side(to)), size_,
                               up ? CopyKind::host_to_device : CopyKind::device_to_host, stream);
            up ? count(stats_.host_to_device, stats_.host_to_device_bytes)
               : count(stats_.device_to_host, stats_.device_to_host_bytes);
        }
        pending_.issued(Device::record(stream));
        publish(next);
    }

    // set_host_data / set_device_data: side `side` becomes the size_ bytes at `data`, borrowed (never
    // freed by the buffer); an owned block of that side is freed. Nothing changes when it throws.
    void borrow(std::string_view op, Side side, void* data, std::size_t bytes,
                Borrow how) {  // NOLINT(performance-unnecessary-value-param): its keep-alive is moved
        const bool to_host = side == Side::host;
        int id = -1;
        if (!to_host) {
            require_device(op);
        }
        check_borrow(op, data, bytes);
        if (!to_host) {
            id = Device::device_of(data);  // the pointer's own device, not whichever is current
        }
        std::lock_guard lock(mutex_);
        if (owns_unlocked(data, size_)) {  // freeing it would leave the borrow dangling
            throw StateError(std::string(op) + ": cannot borrow memory of the buffer's own blocks");
        }
        wait_host_unlocked();
        if (to_host) {
            const bool registered = how.register_memory && register_host(data);  // throws: nothing changed
            release_host();
            host_ = data;
            if (registered) {
                host_holding_.registered = data;
                host_holding_.unregister = &unregister_host;
            }
            host_read_only_ = how.read_only;
            host_holding_.refuses_writes = how.read_only && how.refuse_writes;
            host_holding_.keep_alive = std::move(how.keep_alive);
        } else if constexpr (Device::has_device) {  // (require_device threw above otherwise)
            release_device();
            device_ = data;
            device_holding_.device = id;
            device_read_only_ = how.read_only;
            device_holding_.refuses_writes = how.read_only && how.refuse_writes;
            device_holding_.keep_alive = std::move(how.keep_alive);
        }
        publish(to_host ? Head::at_host : Head::at_device);
        make_stale(other_side(side));
    }
};

}  // namespace detail

SYNCBLOB_END_NAMESPACE
