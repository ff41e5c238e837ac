// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The structure of a blob's JSON document: its fields checked (dtype, shape or the legacy 4-D
/// fields, data, diff) with a `FormatError` naming the field and what was expected.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "../../core/shape.hpp"
#include "format_error.hpp"
#include "json_values.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace detail::json_io {

// The parts of a blob document, validated.
struct Document {
    Dtype dtype = Dtype::F32;
    Shape shape;
    const nlohmann::json* data = nullptr;
    const nlohmann::json* diff = nullptr;
};

inline std::int64_t extent(const nlohmann::json& v, std::string_view source, const std::string& where) {
    if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<std::int64_t>() < 0) ||
        (v.is_number_unsigned() &&
         v.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))) {
        io::throw_format_error(source, where, "expected a non-negative integer extent, found " + describe(v));
    }
    return v.get<std::int64_t>();
}

inline Document read_document(const nlohmann::json& j, std::string_view source) {
    if (!j.is_object()) {
        io::throw_format_error(source, "document",
                               "expected an object with \"dtype\", \"shape\" and \"data\", found " + describe(j));
    }
    constexpr std::array<std::string_view, 4> legacy_names{"num", "channels", "height", "width"};
    Document doc;
    std::array<std::int64_t, 4> legacy{1, 1, 1, 1};
    bool has_legacy = false;
    const nlohmann::json* dtype = nullptr;
    const nlohmann::json* shape = nullptr;
    for (const auto& [key, value] : j.items()) {
        if (key == "dtype") {
            dtype = &value;
        } else if (key == "shape") {
            shape = &value;
        } else if (key == "data") {
            doc.data = &value;
        } else if (key == "diff") {
            doc.diff = &value;
        } else if (const auto* it = std::ranges::find(legacy_names, key); it != legacy_names.end()) {
            legacy[static_cast<std::size_t>(it - legacy_names.begin())] = extent(value, source, key);
            has_legacy = true;
        } else {
            io::throw_format_error(
                source, "field \"" + key + "\"",
                "unexpected field (expected dtype, shape, data, diff, num, channels, height, width)");
        }
    }
    if (dtype == nullptr) {
        io::throw_format_error(source, "dtype",
                               "missing (expected one of F64 F32 F16 BF16 I64 I32 I16 I8 U64 U32 U16 U8 BOOL)");
    }
    const auto parsed = dtype->is_string() ? parse_dtype(dtype->get_ref<const std::string&>()) : std::nullopt;
    if (!parsed) {
        io::throw_format_error(
            source, "dtype",
            "expected one of F64 F32 F16 BF16 I64 I32 I16 I8 U64 U32 U16 U8 BOOL, found " + describe(*dtype));
    }
    doc.dtype = *parsed;
    if (shape != nullptr && has_legacy) {
        io::throw_format_error(source, "shape", "given together with the legacy num/channels/height/width fields");
    }
    if (shape != nullptr) {
        if (!shape->is_array() || shape->size() > Shape::max_axes) {
            io::throw_format_error(source, "shape",
                                   "expected an array of at most 32 extents, found " + describe(*shape) +
                                       (shape->is_array() ? " of " + std::to_string(shape->size()) : std::string()));
        }
        std::array<std::int64_t, Shape::max_axes> dims{};
        for (std::size_t i = 0; i < shape->size(); ++i) {
            dims[i] = extent((*shape)[i], source, "shape[" + std::to_string(i) + "]");
        }
        doc.shape = shape_from_file(std::span(dims.data(), shape->size()), source, "shape");
    } else if (has_legacy) {
        doc.shape = shape_from_file(legacy, source, "num/channels/height/width");
    } else {
        io::throw_format_error(source, "shape", "missing (expected \"shape\" or the legacy num/channels/height/width)");
    }
    const auto count = static_cast<std::uint64_t>(doc.shape.count());
    auto check_values = [&](const nlohmann::json* values, std::string_view name) {
        if (!values->is_array() || values->size() != count) {
            io::throw_format_error(source, name,
                                   "expected an array of " + std::to_string(count) + " values for shape " +
                                       doc.shape.to_string() + ", found " + describe(*values) +
                                       (values->is_array() ? " of " + std::to_string(values->size()) : std::string()));
        }
    };
    if (doc.data == nullptr) {
        io::throw_format_error(source, "data", "missing (expected an array of " + std::to_string(count) + " values)");
    }
    check_values(doc.data, "data");
    if (doc.diff != nullptr) {
        check_values(doc.diff, "diff");
    }
    return doc;
}

/// Decodes a checked `values` array (`out.size()` elements) into `out`.
template <Element T>
void decode_values(const nlohmann::json& array, Dtype from, std::string_view source, std::string_view field,
                   std::span<T> out, ConvertRule rule) {
    if (!out.empty()) {
        decode_array(array, from, out.data(), source, field, rule);
    }
}

}  // namespace detail::json_io

SYNCBLOB_END_NAMESPACE
