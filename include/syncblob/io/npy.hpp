// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// NumPy's `.npy` format (versions 1.0, 2.0 and 3.0): save a blob's data or diff, load one back.
///
/// Files are written as `np.save` writes them (little-endian, C order, version 1.0 header padded
/// so the data starts on a 64-byte boundary). Loading reads little- and big-endian files (big-endian
/// data is byte-swapped) and rejects Fortran-order, object and structured arrays. bfloat16, which
/// NumPy lacks, is written with descr '<V2' (2-byte raw values: `np.load(f).view(np.uint16)` or
/// `.view(ml_dtypes.bfloat16)` in Python) and read back only into a bfloat16 blob.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "../blob/blob.hpp"
#include "../core/element.hpp"
#include "../core/error.hpp"
#include "detail/byte_source.hpp"
#include "detail/npy_format.hpp"
#include "detail/staged_load.hpp"
#include "file.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace io {

/// Which of a blob's two buffers a `.npy` file holds: syncblob's own `Part` (blob/options.hpp).
using syncblob::Part;

namespace detail {

template <class Source>
detail::NpyHeader read_npy_header(const Source& source) {
    detail::NpyHeader h;
    unsigned char first[12] = {};
    const auto size = source.size();
    source.read_at(0, first, static_cast<std::size_t>(size < 12 ? size : 12), "prefix");
    const auto [length, prefix] = detail::parse_npy_prefix(first, size, source.name(), h);
    std::string text(length, '\0');
    source.read_at(prefix, text.data(), length, "header");
    if (length == 0 || text.back() != '\n') {
        throw_format_error(source.name(), "header byte " + std::to_string(prefix + (length == 0 ? 0 : length - 1)),
                           "expected the header to end with a newline");
    }
    detail::NpyDictParser(text, prefix, source.name()).parse(h);
    h.data_offset = std::uint64_t{prefix} + length;
    const std::size_t item = dtype_size(h.dtype);
    if (h.count > (std::uint64_t{1} << 63) / item) {
        throw_format_error(source.name(), "shape", "the data size overflows");
    }
    h.data_bytes = h.count * item;
    const std::uint64_t available = size - h.data_offset;
    if (available != h.data_bytes) {
        throw_format_error(source.name(), "data at byte " + std::to_string(h.data_offset),
                           "the shape and descr need " + std::to_string(h.data_bytes) + " bytes, the input holds " +
                               std::to_string(available) +
                               (available < h.data_bytes ? " (truncated)" : " (trailing bytes)"));
    }
    return h;
}

template <Element T, SyncedAllocator A, class Source>
void load(const Source& source, Blob<T, A>& blob, const LoadOptions& options, Part part) {
    const auto h = read_npy_header(source);
    if (h.dtype != dtype_of<T> && !options.convert) {
        throw_format_error(source.name(), "descr",
                           "the file holds " + std::string(dtype_name(h.dtype)) + ", the blob " +
                               std::string(element_name<T>()) + " (set LoadOptions::convert to convert)");
    }
    if (h.dtype != dtype_of<T> && (h.dtype == Dtype::BF16) != (dtype_of<T> == Dtype::BF16)) {
        throw_format_error(
            source.name(), "descr",
            "'<V2' raw 2-byte values load only into a bfloat16 blob, not " + std::string(element_name<T>()));
    }
    const std::uint64_t need = h.count * sizeof(T);
    if (need > options.max_bytes || h.data_bytes > options.max_bytes) {
        throw_format_error(source.name(), "shape",
                           "loading needs " + std::to_string(need) + " bytes, more than the limit of " +
                               std::to_string(options.max_bytes) + " (LoadOptions::max_bytes)");
    }
    const Shape shape{std::span<const std::int64_t>(h.shape)};  // checked by the header parser
    if (!options.reshape && (shape != blob.shape() || !blob.has_shape())) {
        throw ShapeError("load_npy: " + source.name() + " holds shape " + shape.to_string() + ", the blob has " +
                         blob.shape_string() + " (set LoadOptions::reshape to adopt it)");
    }
    detail::StagedLoad<T, A> stage(blob, shape);
    const auto dst = part == Part::data ? stage.data() : stage.diff();
    detail::read_elements(source, h.data_offset, h.dtype, h.big_endian, dst.size(), dst.data(),
                          "data at byte " + std::to_string(h.data_offset), convert_rule(options));
    stage.commit(blob);
}

}  // namespace detail

/// Writes the blob's data (or diff) to `file` as `np.save` would, atomically. A blob with no
/// shape (default-constructed) is written with shape (0,). \throws IOError; FormatError, writing
/// nothing, for an element type NumPy has no standard dtype for (the 8-bit floats).
template <Element T, SyncedAllocator A>
void save_npy(const std::filesystem::path& file, const Blob<T, A>& blob, const SaveOptions& options = {},
              Part part = Part::data) {
    const std::vector<std::int64_t> shape = blob.has_shape()
                                                ? std::vector<std::int64_t>(blob.shape().begin(), blob.shape().end())
                                                : std::vector<std::int64_t>{0};
    if (detail::npy_descr(dtype_of<T>).empty()) {
        throw_format_error(file.string(), "descr",
                           std::string(element_name<T>()) +
                               " has no NumPy dtype: NumPy has no standard descriptor for the 8-bit floats "
                               "(save_safetensors names them; or copy the blob into a float blob first)");
    }
    const std::string header = detail::npy_header_bytes(dtype_of<T>, shape);
    const auto values = part == Part::data ? blob.host_data() : blob.host_diff();
    save_atomic(file, options, [&](FileWriter& w) {
        w.reserve(header.size() + values.size_bytes());
        w.write(header.data(), header.size());
        w.write(values.data(), values.size_bytes());
    });
}

/// Reads a `.npy` file into the blob's data (or diff), adopting its shape (see LoadOptions).
/// \throws FormatError on a malformed file, a dtype mismatch without `convert`, or a size above
/// `max_bytes`; ShapeError on a shape mismatch without `reshape`; IOError; std::bad_alloc. On any
/// exception the blob is unchanged (the file is read into new storage, which replaces the loaded
/// part only when the whole read succeeded).
template <Element T, SyncedAllocator A>
void load_npy(const std::filesystem::path& file, Blob<T, A>& blob, const LoadOptions& options = {},
              Part part = Part::data) {
    detail::load(detail::FileSource(file), blob, options, part);
}

/// Reads `.npy` bytes held in memory; `source` names them in error messages.
template <Element T, SyncedAllocator A>
void load_npy(std::span<const std::byte> bytes, std::string_view source, Blob<T, A>& blob,
              const LoadOptions& options = {}, Part part = Part::data) {
    detail::load(detail::MemorySource(bytes, source), blob, options, part);
}

/// A new blob holding a `.npy` file's array.
template <Element T, SyncedAllocator A = HostOnly>
[[nodiscard]] Blob<T, A> load_npy(const std::filesystem::path& file, const LoadOptions& options = {}) {
    Blob<T, A> blob;
    load_npy(file, blob, options);
    return blob;
}

}  // namespace io

SYNCBLOB_END_NAMESPACE
