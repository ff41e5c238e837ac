// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Caffe's own files, read and written without a protobuf dependency: `BlobProto` (`.binaryproto`,
/// e.g. mean images), `BlobProtoVector`, and the learned blobs of a `.caffemodel` (`NetParameter`,
/// new `layer` and V1 `layers` layouts) by layer name.
///
/// Blobs are `Blob<float>` or `Blob<double>`: a float blob reads `data`/`diff`, a double blob
/// `double_data`/`double_diff`; the other precision is read only with `LoadOptions::convert`.
/// The shape comes from `shape` or, when any is set, the legacy `num/channels/height/width`
/// fields (Caffe's rule; unset legacy fields are 0). `diff` is read when the file has one, and
/// left as it was otherwise. Every malformed input is a `FormatError` naming the input, the byte
/// offset and the field; loads take `LoadOptions::max_bytes` as the limit of what they allocate.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "../blob/blob.hpp"
#include "detail/caffe_proto.hpp"
#include "file.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace io {

/// A `.caffemodel`'s learned blobs: for each layer that has blobs, its name and its blobs in order.
template <Element T = float, SyncedAllocator A = HostOnly>
using CaffeModelBlobs = std::map<std::string, std::vector<Blob<T, A>>, std::less<>>;

/// Reads one serialized `BlobProto` into `blob` (reshaping it unless `options.reshape` is false).
/// \throws FormatError on a malformed message (the blob is then unchanged); ShapeError when
/// `options.reshape` is false and the shapes differ (unchanged too).
template <Element T, SyncedAllocator A>
void parse_blob_proto(std::string_view bytes, Blob<T, A>& blob, const LoadOptions& options = {},
                      std::string_view source = "BlobProto") {
    detail::caffe::require_caffe_element<T>();
    namespace dc = detail::caffe;
    const dc::BlobScan scan = dc::scan_blob(bytes, 0, source);
    const dc::BlobPlan plan = dc::plan_blob<T>(scan, options, source, "BlobProto");
    std::uint64_t budget = options.max_bytes;
    dc::charge(budget, plan.bytes, parse::protobuf::Reader({}, 0, source, "BlobProto"), 0, "BlobProto");
    if (!options.reshape && (scan.shape != blob.shape() || !blob.has_shape())) {
        throw ShapeError("io::parse_blob_proto: " + std::string(source) + " holds shape " + scan.shape.to_string() +
                         ", the blob has " + blob.shape_string() + " (LoadOptions::reshape is false)");
    }
    dc::apply_blob(blob, scan, plan, bytes, source);
}

/// Serializes `blob` as a `BlobProto` (with its diff when `write_diff`), fields in the order
/// protobuf writes them, so the bytes equal those of Caffe's own `ToProto` + `SerializeToString`.
template <Element T, SyncedAllocator A>
[[nodiscard]] std::string serialize_blob_proto(const Blob<T, A>& blob, bool write_diff = false) {
    detail::caffe::require_caffe_element<T>();
    detail::caffe::require_shape(blob, "io::serialize_blob_proto");
    std::string out;
    out.reserve(static_cast<std::size_t>(detail::caffe::blob_proto_size(blob, write_diff)));
    parse::protobuf::StringSink sink{out};
    parse::protobuf::Writer w(sink);
    detail::caffe::write_blob_proto(w, blob, write_diff);
    return out;
}

/// Reads a serialized `BlobProtoVector` (`LoadOptions::reshape` does not apply: the blobs are new).
/// Protobuf has no end marker: bytes cut short exactly between two blobs read as a valid, shorter
/// vector. Pass `expected_count` when the number of blobs is known, and a different count is a
/// `FormatError`.
template <Element T = float, SyncedAllocator A = HostOnly>
[[nodiscard]] std::vector<Blob<T, A>> parse_blob_proto_vector(std::string_view bytes, const LoadOptions& options = {},
                                                              std::string_view source = "BlobProtoVector",
                                                              std::optional<std::size_t> expected_count = {}) {
    detail::caffe::require_caffe_element<T>();
    namespace dc = detail::caffe;
    namespace pb = parse::protobuf;
    pb::Reader r(bytes, 0, source, "BlobProtoVector");
    std::vector<Blob<T, A>> blobs;
    std::uint64_t budget = options.max_bytes;
    pb::Field f;
    while (r.next(f)) {
        if (f.number != 1) {
            continue;
        }
        if (f.type != pb::WireType::length_delimited) {
            r.fail_at(f.offset, "BlobProtoVector.blobs (field 1)",
                      "wire type " + std::string(pb::wire_type_name(f.type)) + ", expected length-delimited (2)");
        }
        const std::string message = "BlobProtoVector.blobs[" + std::to_string(blobs.size()) + "]";
        const dc::BlobScan scan = dc::scan_blob(f.bytes, f.bytes_offset, source, message);
        const dc::BlobPlan plan = dc::plan_blob<T>(scan, options, source, message);
        dc::charge(budget, plan.bytes + dc::blob_overhead_bytes, r, f.offset, message);
        dc::apply_blob(blobs.emplace_back(), scan, plan, f.bytes, source);
    }
    if (expected_count && blobs.size() != *expected_count) {
        throw_format_error(source, "BlobProtoVector.blobs",
                           std::to_string(blobs.size()) + " blobs, " + std::to_string(*expected_count) +
                               " expected (cut short at a blob boundary?)");
    }
    return blobs;
}

/// Serializes blobs as a `BlobProtoVector`.
template <Element T, SyncedAllocator A>
[[nodiscard]] std::string serialize_blob_proto_vector(std::span<const Blob<T, A>> blobs, bool write_diff = false) {
    detail::caffe::require_caffe_element<T>();
    namespace dc = detail::caffe;
    std::string out;
    parse::protobuf::StringSink sink{out};
    parse::protobuf::Writer w(sink);
    for (const auto& blob : blobs) {
        dc::require_shape(blob, "io::serialize_blob_proto_vector");
        w.length_delimited(1, dc::blob_proto_size(blob, write_diff));
        dc::write_blob_proto(w, blob, write_diff);
    }
    return out;
}

/// Serializes a vector of blobs as a `BlobProtoVector`.
template <Element T, SyncedAllocator A>
[[nodiscard]] std::string serialize_blob_proto_vector(const std::vector<Blob<T, A>>& blobs, bool write_diff = false) {
    return serialize_blob_proto_vector(std::span<const Blob<T, A>>(blobs), write_diff);
}

/// Reads the learned blobs of a serialized `NetParameter` (a `.caffemodel`): every layer of the
/// new layout (`layer`, field 100: name 1, blobs 7) and of the V1 layout (`layers`, field 2: name 4,
/// blobs 6) that has blobs, by layer name. Everything else in the net is skipped unread.
/// \throws FormatError also when two layers with blobs share a name.
template <Element T = float, SyncedAllocator A = HostOnly>
[[nodiscard]] CaffeModelBlobs<T, A> parse_caffemodel(std::string_view bytes, const LoadOptions& options = {},
                                                     std::string_view source = "NetParameter") {
    detail::caffe::require_caffe_element<T>();
    namespace dc = detail::caffe;
    namespace pb = parse::protobuf;
    CaffeModelBlobs<T, A> layers;
    std::uint64_t budget = options.max_bytes;
    pb::Reader net(bytes, 0, source, "NetParameter");
    pb::Field f;
    while (net.next(f)) {
        const bool v1 = f.number == 2;
        if (f.number != 100 && !v1) {
            continue;
        }
        const std::string_view message = v1 ? "V1LayerParameter" : "LayerParameter";
        if (f.type != pb::WireType::length_delimited) {
            net.fail_at(f.offset, v1 ? "NetParameter.layers (field 2)" : "NetParameter.layer (field 100)",
                        "wire type " + std::string(pb::wire_type_name(f.type)) + ", expected length-delimited (2)");
        }
        const std::uint32_t name_field = v1 ? 4 : 1;
        const std::uint32_t blobs_field = v1 ? 6 : 7;
        // First the name (wherever it is in the message), then the blobs.
        pb::Reader layer(f.bytes, f.bytes_offset, source, message);
        pb::Field g;
        std::string_view name;
        std::size_t blob_count = 0;
        while (layer.next(g)) {
            if (g.number != name_field && g.number != blobs_field) {
                continue;
            }
            if (g.type != pb::WireType::length_delimited) {
                layer.fail_at(
                    g.offset,
                    std::string(message) + (g.number == name_field ? ".name" : ".blobs") + " (field " +
                        std::to_string(g.number) + ")",
                    "wire type " + std::string(pb::wire_type_name(g.type)) + ", expected length-delimited (2)");
            }
            if (g.number == name_field) {
                name = g.bytes;
            } else {
                ++blob_count;
            }
        }
        if (blob_count == 0) {
            continue;
        }
        if (layers.contains(name)) {
            net.fail_at(f.offset, std::string(message) + ".name",
                        "a second layer named \"" + std::string(name) + "\" with blobs");
        }
        dc::charge(budget, name.size() + blob_count * dc::blob_overhead_bytes, net, f.offset, message);
        std::vector<Blob<T, A>> blobs;
        blobs.reserve(blob_count);
        pb::Reader again(f.bytes, f.bytes_offset, source, message);
        while (again.next(g)) {
            if (g.number != blobs_field) {
                continue;
            }
            const std::string where =
                std::string(message) + " \"" + std::string(name) + "\" blobs[" + std::to_string(blobs.size()) + "]";
            const dc::BlobScan scan = dc::scan_blob(g.bytes, g.bytes_offset, source, where);
            const dc::BlobPlan plan = dc::plan_blob<T>(scan, options, source, where);
            dc::charge(budget, plan.bytes, net, g.offset, where);
            dc::apply_blob(blobs.emplace_back(), scan, plan, g.bytes, source);
        }
        layers.emplace(std::string(name), std::move(blobs));
    }
    return layers;
}

// ---- files ---------------------------------------------------------------------------------

/// Loads a `.binaryproto` file into `blob`. \throws IOError, FormatError (naming the file), ShapeError
/// (strict load of another shape); on any of them the blob is unchanged.
template <Element T, SyncedAllocator A>
void load_binaryproto(const std::filesystem::path& file, Blob<T, A>& blob, const LoadOptions& options = {}) {
    const std::string bytes = read_file(file, options.max_bytes);
    parse_blob_proto(bytes, blob, options, file.string());
}

/// A new blob holding a `.binaryproto` file's blob, as `load_npy<T>(path)` gives one.
template <Element T = float, SyncedAllocator A = HostOnly>
[[nodiscard]] Blob<T, A> load_binaryproto(const std::filesystem::path& file, const LoadOptions& options = {}) {
    Blob<T, A> blob;
    load_binaryproto(file, blob, options);
    return blob;
}

/// Saves `blob` as a `.binaryproto` file, atomically (see `save_atomic`).
template <Element T, SyncedAllocator A>
void save_binaryproto(const std::filesystem::path& file, const Blob<T, A>& blob, bool write_diff = false,
                      const SaveOptions& options = {}) {
    detail::caffe::require_caffe_element<T>();
    detail::caffe::require_shape(blob, "io::save_binaryproto");
    save_atomic(file, options, [&](FileWriter& out) {
        out.reserve(detail::caffe::blob_proto_size(blob, write_diff));
        parse::protobuf::Writer w(out);
        detail::caffe::write_blob_proto(w, blob, write_diff);
    });
}

/// Loads a `BlobProtoVector` file; with `expected_count`, a file holding another number of blobs
/// is a `FormatError` (a file cut short between two blobs is otherwise a valid, shorter vector).
template <Element T = float, SyncedAllocator A = HostOnly>
[[nodiscard]] std::vector<Blob<T, A>> load_blob_proto_vector(const std::filesystem::path& file,
                                                             const LoadOptions& options = {},
                                                             std::optional<std::size_t> expected_count = {}) {
    const std::string bytes = read_file(file, options.max_bytes);
    return parse_blob_proto_vector<T, A>(bytes, options, file.string(), expected_count);
}

/// Saves blobs as a `BlobProtoVector` file, atomically.
template <Element T, SyncedAllocator A>
void save_blob_proto_vector(const std::filesystem::path& file, std::span<const Blob<T, A>> blobs,
                            bool write_diff = false, const SaveOptions& options = {}) {
    detail::caffe::require_caffe_element<T>();
    namespace dc = detail::caffe;
    for (const auto& blob : blobs) {
        dc::require_shape(blob, "io::save_blob_proto_vector");
    }
    save_atomic(file, options, [&](FileWriter& out) {
        parse::protobuf::Writer w(out);
        for (const auto& blob : blobs) {
            w.length_delimited(1, dc::blob_proto_size(blob, write_diff));
            dc::write_blob_proto(w, blob, write_diff);
        }
    });
}

/// Saves a vector of blobs as a `BlobProtoVector` file, atomically.
template <Element T, SyncedAllocator A>
void save_blob_proto_vector(const std::filesystem::path& file, const std::vector<Blob<T, A>>& blobs,
                            bool write_diff = false, const SaveOptions& options = {}) {
    save_blob_proto_vector(file, std::span<const Blob<T, A>>(blobs), write_diff, options);
}

/// Loads the learned blobs of a `.caffemodel` file by layer name (see `parse_caffemodel`).
template <Element T = float, SyncedAllocator A = HostOnly>
[[nodiscard]] CaffeModelBlobs<T, A> load_caffemodel(const std::filesystem::path& file,
                                                    const LoadOptions& options = {}) {
    const std::string bytes = read_file(file, options.max_bytes);
    return parse_caffemodel<T, A>(bytes, options, file.string());
}

}  // namespace io

SYNCBLOB_END_NAMESPACE
