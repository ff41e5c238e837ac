// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Internal, shared beyond its folder: used by the arena's storage (arena/) and the checkpoint loader's
/// staging (checkpoint/), so it sits outside detail/; its names stay in a detail namespace and are no user
/// API.
///
/// The stream and event bookkeeping of `SyncedBuffer`: the asynchronous copy it has issued and not
/// yet waited on, and how work on one stream is ordered after work on another.

#include <optional>
#include <utility>

#include "../core/sync_audit.hpp"
#include "device_backend.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace detail {

/// Work issued next on `next` runs after what was issued on `first` so far (nothing to do on one stream).
template <DeviceBackend Device>
void order_after(typename Device::stream_type first, typename Device::stream_type next) {
    if (next != first) {
        auto issued = Device::record(first);
        Device::stream_wait(next, issued);
    }
}

/// Blocks until the work issued on `stream` so far is done, as far as a device that may be failing
/// allows: before memory that work uses is freed.
template <DeviceBackend Device>
void finish_before_free(typename Device::stream_type stream) noexcept {
    const audit::CountOnly audited;  // the wait is counted, and must happen whatever the audit's mode
    try {
        auto done = Device::record(stream);
        Device::wait(done);
    } catch (...) {  // a failing device cannot be waited on; the memory is freed all the same
    }
}

/// Blocks until `event` is reached, as `finish_before_free` does for a stream: before memory the
/// work up to it uses is freed.
template <DeviceBackend Device>
void wait_before_free(typename Device::event_type& event) noexcept {
    const audit::CountOnly audited;
    try {
        Device::wait(event);
    } catch (...) {  // a failing device cannot be waited on; the memory is freed all the same
    }
}

/// The asynchronous copy a buffer issued (`push_to_device_async`, `pull_to_host_async`), tracked by
/// its event until both the host and the buffer's stream have waited for it.
template <DeviceBackend Device>
class PendingCopy {
public:
    using stream_type = typename Device::stream_type;

    /// True until the host has waited (the buffer's stream may have waited already).
    [[nodiscard]] bool for_host() const noexcept { return host_; }
    /// True while either the host or the buffer's stream still has to wait.
    [[nodiscard]] bool any() const noexcept { return host_ || device_; }

    /// Tracks the copy that reaches `event`.
    void issued(typename Device::event_type event) {
        event_ = std::move(event);
        host_ = device_ = true;
    }

    /// The host blocks until the copy is done; true when there was one to wait for.
    bool wait_host() {
        if (!host_) {
            return false;
        }
        Device::wait(*event_);
        host_ = device_ = false;
        event_.reset();
        return true;
    }

    /// The buffer's stream waits for the copy (the host does not: it still waits before its next access).
    void order_own_stream(stream_type own) {
        if (device_) {
            Device::stream_wait(own, *event_);
            device_ = false;
        }
    }

private:
    std::optional<typename Device::event_type> event_;
    bool host_ = false;
    bool device_ = false;
};

}  // namespace detail

SYNCBLOB_END_NAMESPACE
