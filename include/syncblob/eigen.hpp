// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Eigen views of a blob's host memory, without copying (target `syncblob::eigen`): what a user
/// includes for them. They are in `math/eigen.hpp`, with the math layer.

#include "math/eigen.hpp"
