// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Blobs as JSON (nlohmann/json; CMake target `syncblob::json`):
///
///     {"dtype": "F32", "shape": [2, 3], "data": [0.5, 1, "NaN", ...], "diff": [...]}
///
/// `data` and the optional `diff` are flat row-major arrays. Floats are written as the shortest
/// decimal that reads back exactly (half and bfloat16 through float); NaN and infinities as the
/// strings "NaN", "Infinity" and "-Infinity"; 64-bit integers exactly; bool as true/false.
/// Readers also take Caffe's legacy 4-D fields `num`, `channels`, `height`, `width` instead of
/// `shape` (a missing one counts as 1). `nlohmann::json j = blob;` and `j.get_to(blob)` work
/// through the ADL hooks; `io::from_json` takes `LoadOptions` (strict shape, conversion, limit).

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "../blob.hpp"
#include "detail/json_document.hpp"
#include "detail/staged_load.hpp"
#include "file.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace io {

/// Whether a JSON writer includes a blob's diff.
enum class WriteDiff : std::uint8_t {
    if_set,  ///< when the diff holds values (its head is not `uninitialized`)
    always,
    never,
};

/// The JSON document of `blob`. \throws ShapeError when the blob has no shape (default-constructed).
template <Element T, SyncedAllocator A>
[[nodiscard]] nlohmann::json to_json(const Blob<T, A>& blob, WriteDiff diff = WriteDiff::if_set) {
    namespace dj = syncblob::detail::json_io;
    if (!blob.has_shape()) {
        throw ShapeError("io::to_json: the blob has no shape (default-constructed or moved from)");
    }
    auto values = [](std::span<const T> in) {
        nlohmann::json array = nlohmann::json::array();
        auto& elements = array.get_ref<nlohmann::json::array_t&>();
        elements.reserve(in.size());
        for (const T v : in) {
            elements.push_back(dj::encode(v));
        }
        return array;
    };
    nlohmann::json j = nlohmann::json::object();
    j["dtype"] = element_name<T>();
    j["shape"] = blob.shape().extents();
    j["data"] = values(blob.host_data());
    const bool with_diff =
        diff == WriteDiff::always || (diff == WriteDiff::if_set && blob.diff_head() != Head::uninitialized);
    if (with_diff) {
        j["diff"] = values(blob.host_diff());
    }
    return j;
}

/// Reads a JSON document into `blob`. With `options.reshape` (the default) the blob takes the
/// document's shape; without, a different shape is a `ShapeError`. A document dtype other than
/// the blob's is a `FormatError` unless `options.convert` (values convert by `LoadOptions`' rule).
/// `diff` is set when the document has one
/// and left as it was otherwise. On any exception the blob is unchanged.
/// \throws FormatError naming `source`, the field and what was expected.
template <Element T, SyncedAllocator A>
void from_json(const nlohmann::json& j, Blob<T, A>& blob, const LoadOptions& options,
               std::string_view source = "JSON") {
    const syncblob::detail::json_io::Document doc = syncblob::detail::json_io::read_document(j, source);
    if (doc.dtype != dtype_of<T> && !options.convert) {
        throw_format_error(source, "dtype",
                           "the document holds " + std::string(dtype_name(doc.dtype)) + ", the blob " +
                               std::string(element_name<T>()) + " (set LoadOptions::convert to convert)");
    }
    const auto count = static_cast<std::uint64_t>(doc.shape.count());
    const std::uint64_t bytes = count * sizeof(T) * (doc.diff != nullptr ? 2 : 1);
    if (bytes > options.max_bytes) {
        throw_format_error(source, "data",
                           std::to_string(bytes) + " bytes for shape " + doc.shape.to_string() +
                               " exceed the limit of " + std::to_string(options.max_bytes) +
                               " bytes (LoadOptions::max_bytes)");
    }
    if (!options.reshape && (doc.shape != blob.shape() || !blob.has_shape())) {
        throw ShapeError("io::from_json: " + std::string(source) + " holds shape " + doc.shape.to_string() +
                         ", the blob has " + blob.shape_string() + " (LoadOptions::reshape is false)");
    }
    syncblob::detail::StagedLoad<T, A> stage(blob, doc.shape);
    syncblob::detail::json_io::decode_values(*doc.data, doc.dtype, source, "data", stage.data(), convert_rule(options));
    if (doc.diff != nullptr) {
        syncblob::detail::json_io::decode_values(*doc.diff, doc.dtype, source, "diff", stage.diff(),
                                                 convert_rule(options));
    }
    stage.commit(blob);
}

/// `from_json` that refuses to reshape: a document of another shape is a `ShapeError`.
template <Element T, SyncedAllocator A>
void from_json_strict(const nlohmann::json& j, Blob<T, A>& blob, std::string_view source = "JSON") {
    LoadOptions options;
    options.reshape = false;
    from_json(j, blob, options, source);
}

/// Parses JSON text into a document, refusing duplicate keys (nlohmann would keep the last),
/// nesting deeper than 64, and documents whose parsed form would exceed `max_bytes`.
/// \throws FormatError naming `source` and the byte offset.
[[nodiscard]] inline nlohmann::json parse_json_text(std::string_view text, std::uint64_t max_bytes,
                                                    std::string_view source = "JSON") {
    constexpr int max_depth = 64;
    std::vector<std::unordered_set<std::string>> keys;
    std::uint64_t bytes = text.size();
    auto check = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
        using E = nlohmann::json::parse_event_t;
        bytes += sizeof(nlohmann::json);
        if (bytes > max_bytes) {
            throw_format_error(
                source, "document",
                "parsing needs more than " + std::to_string(max_bytes) + " bytes (LoadOptions::max_bytes)");
        }
        if (depth > max_depth) {
            throw_format_error(source, "document", "nested deeper than " + std::to_string(max_depth) + " levels");
        }
        if (event == E::object_start) {
            keys.emplace_back();
        } else if (event == E::object_end && !keys.empty()) {
            keys.pop_back();
        } else if (event == E::key && !keys.empty()) {
            const auto& key = parsed.get_ref<const std::string&>();
            bytes += key.size();
            if (!keys.back().insert(key).second) {
                throw_format_error(source, "field \"" + key + "\"", "duplicate key");
            }
        }
        return true;
    };
    try {
        return nlohmann::json::parse(text.begin(), text.end(), check);
    } catch (const nlohmann::json::parse_error& e) {
        throw_format_error(source, "byte " + std::to_string(e.byte), e.what());
    } catch (const nlohmann::json::exception& e) {  // e.g. out_of_range: a number too large for a double
        throw_format_error(source, "document", e.what());
    }
}

/// Reads JSON text into `blob` (see `from_json`).
template <Element T, SyncedAllocator A>
void parse_json(std::string_view text, Blob<T, A>& blob, const LoadOptions& options = {},
                std::string_view source = "JSON") {
    from_json(parse_json_text(text, options.max_bytes, source), blob, options, source);
}

/// Loads a JSON file into `blob` (see `from_json`). \throws IOError, FormatError, ShapeError; the
/// blob is then unchanged.
template <Element T, SyncedAllocator A>
void load_json(const std::filesystem::path& file, Blob<T, A>& blob, const LoadOptions& options = {}) {
    const std::string text = read_file(file, options.max_bytes);
    parse_json(text, blob, options, file.string());
}

/// Saves `blob` as a JSON file, atomically (see `save_atomic`). `indent` < 0 writes one line.
template <Element T, SyncedAllocator A>
void save_json(const std::filesystem::path& file, const Blob<T, A>& blob, WriteDiff diff = WriteDiff::if_set,
               const SaveOptions& options = {}, int indent = -1) {
    const std::string text = to_json(blob, diff).dump(indent) + "\n";
    save_atomic(file, options, [&](FileWriter& out) { out.write(text.data(), text.size()); });
}

}  // namespace io

/// nlohmann's ADL hook: `nlohmann::json j = blob;` (diff included when it holds values).
template <Element T, SyncedAllocator A>
void to_json(nlohmann::json& j, const Blob<T, A>& blob) {
    j = io::to_json(blob, io::WriteDiff::if_set);
}

/// nlohmann's ADL hook: `j.get_to(blob)` reshapes the blob to the document's shape; the dtypes must
/// match. \throws FormatError, as `io::from_json`.
template <Element T, SyncedAllocator A>
void from_json(const nlohmann::json& j, Blob<T, A>& blob) {
    io::from_json(j, blob, io::LoadOptions{});
}

SYNCBLOB_END_NAMESPACE
