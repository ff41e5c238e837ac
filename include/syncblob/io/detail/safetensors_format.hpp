// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The safetensors format: its entries, its dtype order, the writer that produces the reference
/// implementation's bytes and the check of the header length (the header's reader is
/// safetensors_header.hpp).

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "../../core/element.hpp"
#include "../../core/shape.hpp"
#include "../parse/json_quote.hpp"
#include "format_error.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace io::detail {

/// One tensor of a safetensors file. Offsets count from the start of the data (after the header).
struct SafetensorsEntry {
    std::string name;
    Dtype dtype = Dtype::F32;
    std::vector<std::int64_t> shape;
    std::uint64_t count = 0;
    std::uint64_t begin = 0;
    std::uint64_t end = 0;
};

/// The reference's header size limit.
inline constexpr std::uint64_t safetensors_max_header = 100'000'000;

/// "[2, 3]": a shape as messages print it.
inline std::string safetensors_shape_text(const std::vector<std::int64_t>& shape) {
    std::string s = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) {
        s.append(i == 0 ? "" : ", ").append(std::to_string(shape[i]));
    }
    return s + "]";
}

/// The dtype's position in the reference's dtype enum (the element table's column): the
/// reference's writer puts a tensor of a later position first.
[[nodiscard]] constexpr int safetensors_rank(Dtype d) noexcept {
    return is_dtype(d) ? dtype_table[static_cast<std::size_t>(d)].safetensors_position : -1;
}

/// Appends the header's JSON, padded with spaces to a multiple of 8 bytes, to `h`: the `n` entries
/// `entry_at(i)` (a `SafetensorsEntry`, or anything with its members: a name, a dtype, a shape
/// of `size()` extents and the offsets), already in file order, and string metadata (keys
/// sorted; omitted when empty, as the reference does for none). The string is sized once, from
/// the names' lengths, rather than grown by copies. \throws FormatError when a name, key or value
/// is not valid UTF-8.
template <class EntryAt>
void append_safetensors_header(std::string& h, std::size_t n, EntryAt entry_at,
                               const std::map<std::string, std::string>& metadata) {
    const std::size_t start = h.size();
    std::size_t estimate = 16;
    for (const auto& [key, value] : metadata) {
        estimate += key.size() + value.size() + 8;
    }
    for (std::size_t i = 0; i < n; ++i) {
        estimate += entry_at(i).name.size() + 96;  // the rest of an entry of up to two axes
    }
    h.reserve(start + estimate);
    const auto number = [&h](std::uint64_t x) {
        char digits[20];
        h.append(digits, std::to_chars(digits, digits + sizeof digits, x).ptr);
    };
    h.append("{");
    if (!metadata.empty()) {
        h.append("\"__metadata__\":{");
        bool first = true;
        for (const auto& [key, value] : metadata) {
            h.append(first ? "" : ",");
            parse::append_json_quoted(h, key, "metadata key");
            h.append(":");
            parse::append_json_quoted(h, value, "metadata value");
            first = false;
        }
        h.append("}");
    }
    for (std::size_t k = 0; k < n; ++k) {
        const auto& e = entry_at(k);  // a SafetensorsEntry, or a view with the same members
        h.append(h.size() == start + 1 ? "" : ",");
        parse::append_json_quoted(h, e.name, "tensor name");
        h.append(":{\"dtype\":\"").append(dtype_name(e.dtype)).append("\",\"shape\":[");
        for (std::size_t i = 0; i < e.shape.size(); ++i) {
            h.append(i == 0 ? "" : ",");
            number(static_cast<std::uint64_t>(e.shape[i]));  // extents are checked not negative
        }
        h.append("],\"data_offsets\":[");
        number(e.begin);
        h.append(",");
        number(e.end);
        h.append("]}");
    }
    h.append("}");
    h.append((8 - (h.size() - start) % 8) % 8, ' ');
}

/// Reads the 8-byte length and checks it against the limits and the input size; returns it.
[[nodiscard]] inline std::uint64_t safetensors_header_length(const unsigned char (&prefix)[8], std::uint64_t size,
                                                             std::uint64_t max_bytes, std::string_view source) {
    if (size < 8) {
        io::throw_format_error(
            source, "header length",
            "expected an 8-byte header length, the input holds " + std::to_string(size) + " bytes (truncated)");
    }
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) {
        n = (n << 8) | prefix[i];
    }
    const std::uint64_t limit = std::min(safetensors_max_header, max_bytes);
    if (n > limit) {
        io::throw_format_error(
            source, "header length",
            std::to_string(n) + " bytes exceed the limit of " + std::to_string(limit) +
                (limit == safetensors_max_header ? " (the format's 100 MB)" : " (LoadOptions::max_bytes)"));
    }
    if (n > size - 8) {
        io::throw_format_error(source, "header length",
                               std::to_string(n) + " header bytes expected, the input holds only " +
                                   std::to_string(size - 8) + " after the length (truncated)");
    }
    return n;
}

}  // namespace io::detail

SYNCBLOB_END_NAMESPACE
