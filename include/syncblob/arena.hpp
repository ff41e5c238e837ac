// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// `ParameterArena<T, Allocator>`, many blobs in one data and one diff allocation, and its buckets:
/// what a user includes for it. The class is in `arena/parameter_arena.hpp`, its views
/// (`ArenaBuffer`, `Bucket`, `Slice`) in `arena/arena_buffer.hpp`; both come with this header.

#include "arena/parameter_arena.hpp"
