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
///
/// Text is read by syncblob's streaming reader, in two passes (structure, then values) that hold
/// nothing but the blob being filled: `load_json` and `parse_json` take time linear in the text and
/// memory of the blob plus a small constant, whatever the text holds (a gigabyte of whitespace
/// included), and refuse a shape over `LoadOptions::max_bytes` as soon as they read it.

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "../blob/blob.hpp"
#include "detail/json_document.hpp"
#include "detail/json_dom.hpp"
#include "detail/posix_file.hpp"
#include "detail/staged_load.hpp"
#include "file.hpp"
#include "parse/json_input.hpp"
#include "parse/json_reader.hpp"

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
    namespace dj = detail::json_io;
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

namespace detail {

/// Loads a blob document that `pass(handler)` reports to a reader's handler (once per pass): the
/// structure first, then, into new storage of the document's shape, the values.
template <Element T, SyncedAllocator A, class Pass>
void load_document(Pass&& pass, Blob<T, A>& blob, const LoadOptions& options, std::string_view source) {
    namespace dj = detail::json_io;
    dj::DocumentScan scan(source, sizeof(T), options.max_bytes);
    pass(scan);
    const dj::Document doc = scan.finish();
    if (doc.dtype != dtype_of<T> && !options.convert) {
        throw_format_error(source, "dtype",
                           "the document holds " + std::string(dtype_name(doc.dtype)) + ", the blob " +
                               std::string(element_name<T>()) + " (set LoadOptions::convert to convert)");
    }
    if (!options.reshape && (doc.shape != blob.shape() || !blob.has_shape())) {
        throw ShapeError("io::from_json: " + std::string(source) + " holds shape " + doc.shape.to_string() +
                         ", the blob has " + blob.shape_string() + " (LoadOptions::reshape is false)");
    }
    detail::StagedLoad<T, A> stage(blob, doc.shape);
    const std::span<T> data = stage.data();
    const std::span<T> diff = doc.has_diff ? stage.diff() : std::span<T>{};
    dj::DocumentFill fill = dj::DocumentFill::of(doc.dtype, source, data, diff, convert_rule(options));
    pass(fill);
    stage.commit(blob);
}

/// The reader's limits for a blob document: no string in one is longer than a few bytes.
inline parse::JsonLimits document_limits() {
    parse::JsonLimits limits;
    limits.max_string = 4096;
    return limits;
}

}  // namespace detail

/// Reads a JSON document into `blob`. With `options.reshape` (the default) the blob takes the
/// document's shape; without, a different shape is a `ShapeError`. A document dtype other than
/// the blob's is a `FormatError` unless `options.convert` (values convert by `LoadOptions`' rule).
/// `diff` is set when the document has one and left as it was otherwise. On any exception the
/// blob is unchanged. \throws FormatError naming `source`, the field and what was expected.
template <Element T, SyncedAllocator A>
void from_json(const nlohmann::json& j, Blob<T, A>& blob, const LoadOptions& options,
               std::string_view source = "JSON") {
    detail::load_document([&](auto& handler) { detail::json_io::emit(j, handler); }, blob, options, source);
}

/// `from_json` that refuses to reshape: a document of another shape is a `ShapeError`.
template <Element T, SyncedAllocator A>
void from_json_strict(const nlohmann::json& j, Blob<T, A>& blob, std::string_view source = "JSON") {
    LoadOptions options;
    options.reshape = false;
    from_json(j, blob, options, source);
}

/// Parses JSON text into a document, refusing duplicate keys (nlohmann would keep the last),
/// nesting deeper than 64, and documents whose parsed form (with the text) would exceed
/// `max_bytes`. Time is linear in the text (up to the logarithm of an object's size, for the
/// lookups that refuse duplicate keys). \throws FormatError naming `source` and the byte offset.
[[nodiscard]] inline nlohmann::json parse_json_text(std::string_view text, std::uint64_t max_bytes,
                                                    std::string_view source = "JSON") {
    detail::json_io::DomBuilder builder(source, text.size(), max_bytes);
    parse::TextInput in(text);
    parse::read_json(in, builder, {}, source);
    return builder.take();
}

/// Reads JSON text into `blob` (see `from_json`), streaming: no document is built.
template <Element T, SyncedAllocator A>
void parse_json(std::string_view text, Blob<T, A>& blob, const LoadOptions& options = {},
                std::string_view source = "JSON") {
    detail::load_document(
        [&](auto& handler) {
            parse::TextInput in(text);
            parse::read_json(in, handler, detail::document_limits(), source);
        },
        blob, options, source);
}

/// Loads a JSON file into `blob` (see `from_json`), streaming it twice in small chunks: the load
/// holds the blob and a 64 KiB buffer, whatever the file's size. \throws IOError, FormatError,
/// ShapeError; the blob is then unchanged.
template <Element T, SyncedAllocator A>
void load_json(const std::filesystem::path& file, Blob<T, A>& blob, const LoadOptions& options = {}) {
    const detail::InputFile in(file);
    const std::string source = file.string();
    detail::load_document(
        [&](auto& handler) {
            parse::FileInput input(in, 0, in.size());
            parse::read_json(input, handler, detail::document_limits(), source);
        },
        blob, options, source);
}

/// A new blob holding a JSON file's blob (see `load_json` above), as `load_npy<T>(path)` gives one.
template <Element T, SyncedAllocator A = HostOnly>
[[nodiscard]] Blob<T, A> load_json(const std::filesystem::path& file, const LoadOptions& options = {}) {
    Blob<T, A> blob;
    load_json(file, blob, options);
    return blob;
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
