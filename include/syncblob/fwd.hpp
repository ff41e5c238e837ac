// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Declarations of syncblob's class templates with their default arguments (`blob/fwd.hpp`), for
/// code that names `Blob` without needing its definition.

#include "blob/fwd.hpp"
