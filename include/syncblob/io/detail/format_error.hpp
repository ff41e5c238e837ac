// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// `io::throw_format_error`, the one way every reader reports a malformed input (declared here so
/// that the detail headers can use it; documented with the public API in `syncblob/io/file.hpp`),
/// `detail::ReadWhere`, what a read names in its error, and `detail::shape_from_file`, the one check
/// of a shape that comes from a file.

#include <concepts>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "../../core/error.hpp"
#include "../../core/shape.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace io {

/// Throws `FormatError("<source>: <where>: <what>")`, e.g.
/// "w.npy: header byte 10: expected 'descr' key". `source` names the file (or the in-memory
/// input), `where` the field or byte offset, `what` what was expected and what was found.
[[noreturn]] inline void throw_format_error(std::string_view source, std::string_view where, std::string_view what) {
    std::string message;
    message.reserve(source.size() + where.size() + what.size() + 4);
    message.append(source).append(": ").append(where).append(": ").append(what);
    throw FormatError(message);
}

}  // namespace io

namespace io::detail {

/// Where a read is, for the message of its error: a text, or a callable that makes one. A read calls
/// the callable only when it throws, so that a loop of many small reads (a load of a million tensors)
/// builds no text it never shows.
template <class W>
concept ReadWhere = std::convertible_to<const W&, std::string_view> || std::is_invocable_r_v<std::string, const W&>;

/// The text of `where`.
template <ReadWhere W>
[[nodiscard]] std::string where_text(const W& where) {
    if constexpr (std::convertible_to<const W&, std::string_view>) {
        return std::string(std::string_view(where));
    } else {
        return where();
    }
}

/// A shape read from a file, checked as a whole before anything is allocated: each extent, the
/// number of axes, and the product of the non-zero extents (a zero extent must not hide an
/// overflowing rest). \throws FormatError "<source>: <field>: <what is wrong>".
[[nodiscard]] inline Shape shape_from_file(std::span<const std::int64_t> extents, std::string_view source,
                                           std::string_view field) {
    return syncblob::detail::checked_shape(
        extents, [&](const std::string& problem) { io::throw_format_error(source, field, problem); });
}

}  // namespace io::detail

SYNCBLOB_END_NAMESPACE
