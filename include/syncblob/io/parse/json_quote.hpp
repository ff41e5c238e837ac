// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// `json_quote`: a string as a JSON string literal, written the way serde_json writes it, so that
/// the safetensors headers and checkpoint indexes syncblob writes equal the reference's bytes.

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "../detail/format_error.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace io::parse {

/// A JSON string literal as serde_json writes it (", \ and control characters escaped, other
/// characters as UTF-8). \throws FormatError when `text` is not valid UTF-8.
[[nodiscard]] inline std::string json_quote(std::string_view text, std::string_view what) {
    try {
        return nlohmann::json(std::string(text)).dump(-1, ' ', false, nlohmann::json::error_handler_t::strict);
    } catch (const nlohmann::json::exception&) {
        io::throw_format_error("safetensors", what, "\"" + std::string(text) + "\" is not valid UTF-8");
    }
}

}  // namespace io::parse

SYNCBLOB_END_NAMESPACE
