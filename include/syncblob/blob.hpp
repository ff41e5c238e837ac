// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// `Blob<T, Allocator>`, an N-d array with a data and a diff buffer, each mirrored between host and
/// device memory: what a user includes for it. The class is in `blob/blob.hpp`, its shape queries,
/// options and printing in `blob/` beside it; all of them come with this header.

#include "blob/blob.hpp"
