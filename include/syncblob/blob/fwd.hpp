// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Declarations of syncblob's class templates with their default arguments, declared here once.

#include "../core/element.hpp"
#include "../memory/fwd.hpp"

SYNCBLOB_BEGIN_NAMESPACE

template <Element T, SyncedAllocator Allocator = HostOnly>
class Blob;

SYNCBLOB_END_NAMESPACE
