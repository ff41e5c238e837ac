// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// `NoDevice`: the backend of host-only buffers. Every device operation throws `NoDeviceError`.

#include <cstddef>
#include <string>
#include <string_view>

#include "../core/error.hpp"
#include "device_backend.hpp"

SYNCBLOB_BEGIN_NAMESPACE

/// Host-only backend: a buffer with it has no device side.
struct NoDevice {
    struct stream_type {
        friend constexpr bool operator==(stream_type, stream_type) noexcept = default;
    };
    struct event_type {};

    static constexpr std::string_view name = "NoDevice";
    static constexpr bool has_device = false;

    [[noreturn]] static void unavailable(std::string_view operation) {
        throw NoDeviceError(std::string(operation) + ": this buffer is host-only (device backend NoDevice)");
    }

    [[noreturn]] static void* allocate(std::size_t) { unavailable("NoDevice::allocate"); }
    static void deallocate(void*, std::size_t) noexcept {}
    static constexpr stream_type default_stream() noexcept { return {}; }
    static int current_device() { return -1; }
    static void set_device(int) noexcept {}
    static int device_of(const void*) noexcept { return -1; }
    static void copy(void*, const void*, std::size_t, CopyKind, stream_type) { unavailable("NoDevice::copy"); }
    static void copy_async(void*, const void*, std::size_t, CopyKind, stream_type) {
        unavailable("NoDevice::copy_async");
    }
    static void fill(void*, unsigned char, std::size_t, stream_type) { unavailable("NoDevice::fill"); }
    static event_type record(stream_type) { unavailable("NoDevice::record"); }
    static void wait(event_type&) noexcept {}
    static void stream_wait(stream_type, event_type&) noexcept {}
    static constexpr bool query(const event_type&) noexcept { return true; }
    static constexpr bool poisons_stale_side() noexcept { return false; }
};

static_assert(DeviceBackend<NoDevice>);

SYNCBLOB_END_NAMESPACE
