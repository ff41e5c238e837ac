// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// `SyncedAllocator`: a bundle of a host allocator and a device backend, the second template
/// argument of `Blob`; and `HostOnly`, the default bundle.

#include "device_backend.hpp"
#include "host_allocator.hpp"
#include "no_device.hpp"

SYNCBLOB_BEGIN_NAMESPACE

/// A type naming a `host_allocator` (a `HostAllocator`) and a `device_backend` (a `DeviceBackend`).
template <class A>
concept SyncedAllocator = requires {
    typename A::host_allocator;
    typename A::device_backend;
}
&&HostAllocator<typename A::host_allocator>&& DeviceBackend<typename A::device_backend>;

/// Host memory only: 64-byte aligned host blocks, no device.
struct HostOnly {
    using host_allocator = AlignedAllocator;
    using device_backend = NoDevice;
};

static_assert(SyncedAllocator<HostOnly>);

SYNCBLOB_END_NAMESPACE
