// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The named values `Blob`'s calls take, so that a call says what it does: which of a blob's two
/// buffers (`Part`, `Parts`) and whether a copy may change the target's shape (`Reshape`).
///
///     target.copy_from(source, Part::diff);
///     target.copy_from(source, Reshape::allowed);
///     target.commit(std::move(staged), {.data = true, .diff = false});

#include <cstdint>

#include "../core/config.hpp"

SYNCBLOB_BEGIN_NAMESPACE

/// One of a blob's two buffers.
enum class Part : std::uint8_t {
    data,  ///< the values
    diff,  ///< the gradient
};

/// A choice of a blob's buffers, each named: `{.data = true, .diff = true}`.
struct Parts {
    bool data = false;
    bool diff = false;
};

/// Whether a copy may give the target the source's shape.
enum class Reshape : std::uint8_t {
    refused,  ///< the shapes must match (`ShapeError` otherwise)
    allowed,  ///< the target takes the source's shape (as `reshape_like`) before the copy
};

SYNCBLOB_END_NAMESPACE
