// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// `json_quote`: a string as a JSON string literal, written the way serde_json writes it, so that
/// the safetensors headers and checkpoint indexes syncblob writes equal the reference's bytes.

#include <algorithm>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "../detail/format_error.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace io::parse {

/// Appends `text` to `out` as a JSON string literal as serde_json writes it (", \ and control
/// characters escaped, other characters as UTF-8). \throws FormatError when `text` is not valid
/// UTF-8 (`out` unchanged).
inline void append_json_quoted(std::string& out, std::string_view text, std::string_view what) {
    // Printable ASCII other than " and \ is written as it is and is valid UTF-8: most names are
    // such, and they need no JSON value built and dumped (an allocation or two each, a million
    // times in a header of a million tensors).
    const bool plain =
        std::all_of(text.begin(), text.end(), [](char c) { return c >= ' ' && c <= '~' && c != '"' && c != '\\'; });
    if (plain) {
        out.append(1, '"').append(text).append(1, '"');
        return;
    }
    try {
        out.append(nlohmann::json(std::string(text)).dump(-1, ' ', false, nlohmann::json::error_handler_t::strict));
    } catch (const nlohmann::json::exception&) {
        io::throw_format_error("safetensors", what, "\"" + std::string(text) + "\" is not valid UTF-8");
    }
}

/// `text` as a JSON string literal (see `append_json_quoted`). \throws FormatError when `text` is
/// not valid UTF-8.
[[nodiscard]] inline std::string json_quote(std::string_view text, std::string_view what) {
    std::string out;
    append_json_quoted(out, text, what);
    return out;
}

}  // namespace io::parse

SYNCBLOB_END_NAMESPACE
