// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Declarations of the memory layer's templates, with their default arguments (declared here only).

#include "allocator.hpp"

SYNCBLOB_BEGIN_NAMESPACE

template <HostAllocator HostAlloc = AlignedAllocator, DeviceBackend Device = NoDevice>
class SyncedBuffer;

/// The `SyncedBuffer` type that a `SyncedAllocator` bundle describes.
template <SyncedAllocator A>
using BufferFor = SyncedBuffer<typename A::host_allocator, typename A::device_backend>;

SYNCBLOB_END_NAMESPACE
