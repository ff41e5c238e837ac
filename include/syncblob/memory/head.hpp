// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The words for a `SyncedBuffer`'s state: `Side` (host or device), `Head` (where its fresh bytes
/// are), and `Borrow` (how it holds memory it does not own).

#include <cstdint>
#include <memory>
#include <string_view>

#include "../core/config.hpp"

SYNCBLOB_BEGIN_NAMESPACE

/// One of a buffer's two copies of its bytes.
enum class Side : std::uint8_t {
    host,    ///< host memory, read and written by the CPU
    device,  ///< memory of the device backend (an accelerator's)
};

/// The other side.
[[nodiscard]] constexpr Side other_side(Side s) noexcept {
    return s == Side::host ? Side::device : Side::host;
}

/// Where the fresh copy of a buffer's bytes is.
enum class Head : std::uint8_t {
    uninitialized,  ///< nothing allocated yet
    at_host,        ///< the host copy is fresh, the device copy (if any) stale
    at_device,      ///< the device copy is fresh, the host copy (if any) stale
    synced,         ///< both copies hold the same bytes
};

/// "uninitialized", "at_host", "at_device" or "synced".
[[nodiscard]] constexpr std::string_view head_name(Head h) noexcept {
    switch (h) {
        case Head::uninitialized:
            return "uninitialized";
        case Head::at_host:
            return "at_host";
        case Head::at_device:
            return "at_device";
        case Head::synced:
            return "synced";
    }
    return "?";
}

/// How memory handed to `set_host_data` / `set_device_data` is borrowed.
struct Borrow {
    /// Held as long as the buffer uses the memory (a memory mapping, a foreign tensor…).
    std::shared_ptr<void> keep_alive{};
    /// Never write the memory: the first mutable access copies it into owned memory first.
    bool read_only = false;
    /// With `read_only`: refuse mutable access instead (any mutable access to the buffer, on either
    /// side, throws `StateError` while it holds the memory), for memory whose owner said it must not
    /// change, such as a read-only DLPack import.
    bool refuse_writes = false;
    /// Host memory only: page-lock it for the device backend while the buffer uses it
    /// (`cudaHostRegister` for `cuda::Device`), so asynchronous copies from and to it run truly
    /// asynchronously; it is unregistered when the buffer lets go of it. Memory that is already
    /// registered (by its owner, or by another buffer) is used as it is and left registered.
    /// Ignored by backends without registration (`NoDevice`).
    bool register_memory = false;
};

SYNCBLOB_END_NAMESPACE
