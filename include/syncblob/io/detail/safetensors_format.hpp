// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The safetensors header: the reader that enforces the reference implementation's rules (and
/// rejects duplicate keys, which the reference's JSON parser would silently merge), and the writer
/// that produces the reference's bytes.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "../../core/element.hpp"
#include "../../core/shape.hpp"
#include "format_error.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace detail {

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

/// The reference's dtype enum order: a tensor of a higher rank is written first.
[[nodiscard]] constexpr int safetensors_rank(Dtype d) noexcept {
    switch (d) {
        case Dtype::BOOL:
            return 0;
        case Dtype::U8:
            return 1;
        case Dtype::I8:
            return 2;
        case Dtype::I16:
            return 3;
        case Dtype::U16:
            return 4;
        case Dtype::F16:
            return 5;
        case Dtype::BF16:
            return 6;
        case Dtype::I32:
            return 7;
        case Dtype::U32:
            return 8;
        case Dtype::F32:
            return 9;
        case Dtype::F64:
            return 10;
        case Dtype::I64:
            return 11;
        case Dtype::U64:
            return 12;
    }
    return -1;
}

/// A JSON string literal as serde_json writes it (", \ and control characters escaped, other
/// characters as UTF-8). \throws FormatError when `text` is not valid UTF-8.
[[nodiscard]] inline std::string json_quote(std::string_view text, std::string_view what) {
    try {
        return nlohmann::json(std::string(text)).dump(-1, ' ', false, nlohmann::json::error_handler_t::strict);
    } catch (const nlohmann::json::exception&) {
        io::throw_format_error("safetensors", what, "\"" + std::string(text) + "\" is not valid UTF-8");
    }
}

/// The header bytes (JSON padded with spaces to a multiple of 8) for entries already in file
/// order, and string metadata (keys sorted; omitted when empty, as the reference does for none).
[[nodiscard]] inline std::string safetensors_header(std::span<const SafetensorsEntry> entries,
                                                    const std::map<std::string, std::string>& metadata) {
    // Built with append only: g++ 12 at -O3 misreports `"literal" + std::string` (-Wrestrict).
    std::string h("{");
    if (!metadata.empty()) {
        h.append("\"__metadata__\":{");
        bool first = true;
        for (const auto& [key, value] : metadata) {
            h.append(first ? "" : ",").append(json_quote(key, "metadata key"));
            h.append(":").append(json_quote(value, "metadata value"));
            first = false;
        }
        h.append("}");
    }
    for (const auto& e : entries) {
        h.append(h.size() == 1 ? "" : ",").append(json_quote(e.name, "tensor name"));
        h.append(":{\"dtype\":\"").append(dtype_name(e.dtype)).append("\",\"shape\":[");
        for (std::size_t i = 0; i < e.shape.size(); ++i) {
            h.append(i == 0 ? "" : ",").append(std::to_string(e.shape[i]));
        }
        h.append("],\"data_offsets\":[").append(std::to_string(e.begin)).append(",");
        h.append(std::to_string(e.end)).append("]}");
    }
    h.append("}");
    h.append((8 - h.size() % 8) % 8, ' ');
    return h;
}

/// A parsed and validated header.
struct SafetensorsHeader {
    std::vector<SafetensorsEntry> entries;  ///< in data order
    std::map<std::string, std::string> metadata;
    std::uint64_t data_start = 0;  ///< 8 + header length
};

class SafetensorsHeaderParser {
    using json = nlohmann::json;

public:
    SafetensorsHeaderParser(std::string_view source, std::uint64_t data_bytes) : source_(source), data_(data_bytes) {}

    /// Parses and validates `text` (the header, after the 8-byte length).
    SafetensorsHeader parse(std::string_view text) {
        if (text.empty() || text.front() != '{') {
            fail("header byte 8", "expected '{' opening the JSON header");
        }
        std::vector<std::unordered_set<std::string>> keys;
        const json::parser_callback_t guard = [&](int depth, json::parse_event_t event, json& parsed) {
            if (event == json::parse_event_t::object_start) {
                if (depth > 1) {
                    fail("header", "objects nested deeper than a tensor's entry");
                }
                keys.emplace_back();
            } else if (event == json::parse_event_t::array_start && depth > 2) {
                fail("header", "arrays nested inside arrays");
            } else if (event == json::parse_event_t::key) {
                const auto& key = parsed.get_ref<const std::string&>();
                if (!keys.back().insert(key).second) {
                    fail(depth == 1 ? "header" : "header entry", "duplicate key \"" + key + "\"");
                }
            } else if (event == json::parse_event_t::object_end) {
                keys.pop_back();
            }
            return true;
        };
        json root;
        try {
            root = json::parse(text.begin(), text.end(), guard);
        } catch (const json::parse_error& e) {
            std::string what = e.what();
            if (const auto at = what.find("] "); at != std::string::npos) {
                what.erase(0, at + 2);
            }
            fail("header byte " + std::to_string(8 + (e.byte == 0 ? 0 : e.byte - 1)), "not valid JSON: " + what);
        } catch (const json::exception& e) {  // out_of_range: a number too large for a double
            fail("header", std::string("not valid JSON: ") + e.what());
        }
        SafetensorsHeader header;
        header.data_start = 8 + text.size();
        for (auto it = root.begin(); it != root.end(); ++it) {
            if (it.key() == "__metadata__") {
                read_metadata(it.value(), header.metadata);
            } else {
                header.entries.push_back(read_entry(it.key(), it.value()));
            }
        }
        validate(header.entries);
        return header;
    }

private:
    [[noreturn]] void fail(const std::string& where, const std::string& what) const {
        io::throw_format_error(source_, where, what);
    }

    void read_metadata(const json& value, std::map<std::string, std::string>& out) const {
        if (value.is_null()) {
            return;
        }
        if (!value.is_object()) {
            fail("__metadata__", std::string("expected an object of strings, found ") + value.type_name());
        }
        for (auto it = value.begin(); it != value.end(); ++it) {
            if (!it.value().is_string()) {
                fail("__metadata__", "expected string values, \"" + it.key() + "\" holds a " + it.value().type_name());
            }
            out.emplace(it.key(), it.value().get<std::string>());
        }
    }

    static std::optional<std::uint64_t> unsigned_of(const json& v) {
        if (v.is_number_unsigned()) {
            return v.get<std::uint64_t>();
        }
        if (v.is_number_integer() && v.get<std::int64_t>() >= 0) {
            return static_cast<std::uint64_t>(v.get<std::int64_t>());
        }
        return std::nullopt;
    }

    SafetensorsEntry read_entry(const std::string& name, const json& value) const {
        const std::string where = "tensor \"" + name + "\"";
        if (!value.is_object()) {
            fail(where,
                 std::string("expected an object with dtype, shape and data_offsets, found ") + value.type_name());
        }
        for (auto it = value.begin(); it != value.end(); ++it) {
            if (it.key() != "dtype" && it.key() != "shape" && it.key() != "data_offsets") {
                fail(where, "unexpected key \"" + it.key() + "\" (expected dtype, shape and data_offsets)");
            }
        }
        for (const char* key : {"dtype", "shape", "data_offsets"}) {
            if (!value.contains(key)) {
                fail(where, std::string("missing \"") + key + "\"");
            }
        }
        SafetensorsEntry e;
        e.name = name;
        const json& dtype = value["dtype"];
        if (!dtype.is_string()) {
            fail(where + ": dtype", std::string("expected a string, found ") + dtype.type_name());
        }
        const auto& d = dtype.get_ref<const std::string&>();
        const auto parsed = parse_dtype(d);
        if (!parsed) {
            constexpr std::string_view reference_only[] = {"C64",     "F8_E4M3", "F8_E5M2", "F8_E8M0",
                                                           "F6_E2M3", "F6_E3M2", "F4"};
            const bool known =
                std::find(std::begin(reference_only), std::end(reference_only), d) != std::end(reference_only);
            fail(where + ": dtype", "\"" + d +
                                        (known ? "\" is a safetensors dtype syncblob does not support"
                                               : "\" is not a safetensors dtype (expected F64 F32 F16 BF16 "
                                                 "I64 I32 I16 I8 U64 U32 U16 U8 BOOL)"));
        }
        e.dtype = *parsed;
        const json& shape = value["shape"];
        if (!shape.is_array()) {
            fail(where + ": shape", std::string("expected an array of extents, found ") + shape.type_name());
        }
        if (shape.size() > Shape::max_axes) {
            fail(where + ": shape",
                 std::to_string(shape.size()) + " axes, at most " + std::to_string(Shape::max_axes) + " supported");
        }
        constexpr auto max_extent = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
        for (const auto& extent : shape) {
            const auto v = unsigned_of(extent);
            if (!v || *v > max_extent) {
                fail(where + ": shape", "expected non-negative integer extents, found " + extent.dump());
            }
            e.shape.push_back(static_cast<std::int64_t>(*v));
        }
        if (auto problem = extents_problem(e.shape)) {
            fail(where + ": shape", *problem);
        }
        e.count = static_cast<std::uint64_t>(count_of(e.shape));
        const json& offsets = value["data_offsets"];
        const auto begin = offsets.is_array() && offsets.size() == 2 ? unsigned_of(offsets[0]) : std::nullopt;
        const auto end = offsets.is_array() && offsets.size() == 2 ? unsigned_of(offsets[1]) : std::nullopt;
        if (!begin || !end) {
            fail(where + ": data_offsets",
                 "expected [begin, end] as two non-negative integers, found " + offsets.dump());
        }
        e.begin = *begin;
        e.end = *end;
        return e;
    }

    // The reference's rules: sorted by offsets, contiguous from 0, each the size its shape and
    // dtype need, covering the data exactly.
    void validate(std::vector<SafetensorsEntry>& entries) const {
        std::sort(entries.begin(), entries.end(), [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
            return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
        });
        std::uint64_t at = 0;
        const SafetensorsEntry* previous = nullptr;
        for (const auto& e : entries) {
            const std::string where = "tensor \"" + e.name + "\": data_offsets [" + std::to_string(e.begin) + ", " +
                                      std::to_string(e.end) + "]";
            if (e.end < e.begin) {
                fail(where, "end before begin");
            }
            if (e.begin > at) {
                fail(where, "gap: data bytes [" + std::to_string(at) + ", " + std::to_string(e.begin) +
                                ") belong to no tensor (offsets must be contiguous from 0)");
            }
            if (e.begin < at) {
                fail(where,
                     "overlaps tensor \"" + previous->name + "\", which ends at data byte " + std::to_string(at));
            }
            const std::size_t item = dtype_size(e.dtype);
            if (e.count > std::numeric_limits<std::uint64_t>::max() / item) {
                fail(where, "the byte size of the shape overflows");
            }
            if (e.end - e.begin != e.count * item) {
                fail(where, "hold " + std::to_string(e.end - e.begin) + " bytes, shape " + shape_text(e.shape) +
                                " of " + std::string(dtype_name(e.dtype)) + " needs " + std::to_string(e.count * item));
            }
            if (e.end > data_) {
                fail(where, "past the end of the data (" + std::to_string(data_) + " bytes; truncated)");
            }
            at = e.end;
            previous = &e;
        }
        if (at != data_) {
            fail("data", "the tensors end at data byte " + std::to_string(at) + ", the data holds " +
                             std::to_string(data_) + " bytes (trailing bytes)");
        }
    }

    static std::string shape_text(const std::vector<std::int64_t>& shape) {
        std::string s = "[";
        for (std::size_t i = 0; i < shape.size(); ++i) {
            s += (i == 0 ? "" : ", ") + std::to_string(shape[i]);
        }
        return s + "]";
    }

    std::string source_;
    std::uint64_t data_;
};

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

}  // namespace detail

SYNCBLOB_END_NAMESPACE
