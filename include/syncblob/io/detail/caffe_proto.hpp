// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Caffe's `BlobShape` and `BlobProto` messages on the protobuf wire: a scan that validates a
/// message and counts its values without allocating, the decoding of a scanned message into a
/// blob, and the encoding of a blob (fields in number order, as protobuf itself writes them).

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <string_view>

#include "../../blob/blob.hpp"
#include "../convert.hpp"
#include "../file.hpp"
#include "../parse/protobuf.hpp"
#include "convert_message.hpp"
#include "staged_load.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace io::detail::caffe {

namespace pb = parse::protobuf;

// caffe.proto: message BlobProto / BlobShape field numbers.
inline constexpr std::uint32_t field_num = 1, field_channels = 2, field_height = 3, field_width = 4, field_data = 5,
                               field_diff = 6, field_shape = 7, field_double_data = 8, field_double_diff = 9;
inline constexpr std::uint32_t field_dim = 1;

/// Caffe's blobs hold float or double: anything else is refused at compile time, with advice.
template <class T>
constexpr void require_caffe_element() noexcept {
    static_assert(std::same_as<T, float> || std::same_as<T, double>,
                  "Caffe's BlobProto holds float or double values: use a Blob<float> or Blob<double> and convert "
                  "afterwards");
}

/// Bytes a loaded blob costs beyond its elements (the object, its two buffers and their control
/// blocks), charged against `LoadOptions::max_bytes` so that many tiny blobs cannot exhaust memory.
inline constexpr std::uint64_t blob_overhead_bytes = 1024;

[[nodiscard]] inline std::string_view blob_field_name(std::uint32_t number) noexcept {
    constexpr std::array<std::string_view, 10> names{"",     "num",  "channels", "height",      "width",
                                                     "data", "diff", "shape",    "double_data", "double_diff"};
    return number < names.size() ? names[number] : std::string_view{};
}

[[nodiscard]] inline std::string_view shape_field_name(std::uint32_t number) noexcept {
    return number == 1 ? "dim" : "";
}

/// What a scan of one BlobProto found: its shape and how many values each repeated field holds.
struct BlobScan {
    Shape shape;
    std::array<std::uint64_t, 10> values{};  // indexed by field number (5, 6, 8, 9)
    std::size_t offset = 0;                  // of the message's first byte
};

inline std::string where(const pb::Reader& r, std::uint32_t number) {
    return r.field_name(number);
}

[[noreturn]] inline void wrong_wire_type(const pb::Reader& r, const pb::Field& f, std::string_view expected) {
    r.fail_at(f.offset, where(r, f.number),
              "wire type " + std::string(pb::wire_type_name(f.type)) + ", expected " + std::string(expected));
}

// A shape from extents checked as a whole, failing at the message's offset.
inline Shape message_shape(const pb::Reader& r, std::size_t offset, std::string_view field,
                           std::span<const std::int64_t> dims) {
    return syncblob::detail::checked_shape(dims,
                                           [&](const std::string& problem) { r.fail_at(offset, field, problem); });
}

inline void scan_shape(const pb::Reader& outer, const pb::Field& shape_field,
                       std::array<std::int64_t, Shape::max_axes>& dims, std::size_t& rank) {
    pb::Reader r(shape_field.bytes, shape_field.bytes_offset, outer.source(), "BlobShape", shape_field_name);
    const std::string name = "BlobShape.dim (field 1)";
    auto add = [&](std::uint64_t v, std::size_t offset) {
        const auto dim = static_cast<std::int64_t>(v);
        if (dim < 0) {
            r.fail_at(offset, name, "extent " + std::to_string(dim) + " is negative");
        }
        if (rank == dims.size()) {
            r.fail_at(offset, name, "more than " + std::to_string(dims.size()) + " axes (Caffe's kMaxBlobAxes)");
        }
        dims[rank++] = dim;
    };
    pb::Field f;
    while (r.next(f)) {
        if (f.number != field_dim) {
            continue;  // unknown fields are skipped, as protobuf does
        }
        if (f.type == pb::WireType::length_delimited) {
            pb::for_each_packed_varint(r, f, name, add);
        } else if (f.type == pb::WireType::varint) {
            add(f.value, f.offset);
        } else {
            r.fail_at(f.offset, name,
                      "wire type " + std::string(pb::wire_type_name(f.type)) + ", expected packed or plain varints");
        }
    }
}

/// Validates one BlobProto message (`bytes`, at absolute offset `base`) and counts its values.
inline BlobScan scan_blob(std::string_view bytes, std::size_t base, std::string_view source,
                          std::string_view message = "BlobProto") {
    pb::Reader r(bytes, base, source, message, blob_field_name);
    BlobScan scan;
    scan.offset = base;
    std::array<std::int64_t, Shape::max_axes> dims{};
    std::size_t rank = 0;
    std::array<std::int64_t, 4> legacy{};
    bool has_legacy = false;
    pb::Field f;
    while (r.next(f)) {
        switch (f.number) {
            case field_num:
            case field_channels:
            case field_height:
            case field_width: {
                if (f.type != pb::WireType::varint) {
                    wrong_wire_type(r, f, "varint (0)");
                }
                const auto v = static_cast<std::int64_t>(f.value);
                if (v < 0) {
                    r.fail_at(f.offset, where(r, f.number), "extent " + std::to_string(v) + " is negative");
                }
                legacy[f.number - 1] = v;
                has_legacy = true;
                break;
            }
            case field_data:
            case field_diff:
            case field_double_data:
            case field_double_diff: {
                const std::size_t size = f.number <= field_diff ? 4 : 8;
                const auto single = size == 4 ? pb::WireType::fixed32 : pb::WireType::fixed64;
                if (f.type == pb::WireType::length_delimited) {
                    if (f.bytes.size() % size != 0) {
                        r.fail_at(f.offset, where(r, f.number),
                                  "packed length " + std::to_string(f.bytes.size()) + " is not a multiple of " +
                                      std::to_string(size));
                    }
                    scan.values[f.number] += f.bytes.size() / size;
                } else if (f.type == single) {
                    scan.values[f.number] += 1;
                } else {
                    wrong_wire_type(r, f,
                                    size == 4 ? "length-delimited (2, packed) or 32-bit (5)"
                                              : "length-delimited (2, packed) or 64-bit (1)");
                }
                break;
            }
            case field_shape:
                if (f.type != pb::WireType::length_delimited) {
                    wrong_wire_type(r, f, "length-delimited (2)");
                }
                scan_shape(r, f, dims, rank);  // repeated occurrences merge, as protobuf merges messages
                break;
            default:
                break;  // unknown fields are skipped, as protobuf does
        }
    }
    // Caffe's Blob::FromProto: the legacy 4-D fields, when any is set, take precedence over shape.
    if (has_legacy) {
        scan.shape = message_shape(r, base, std::string(message) + " num/channels/height/width", legacy);
    } else {
        scan.shape = message_shape(r, base, std::string(message) + ".shape", std::span(dims.data(), rank));
    }
    return scan;
}

/// How a scanned BlobProto goes into a `Blob<T>`: which fields to read, and whether they convert.
struct BlobPlan {
    std::uint32_t data_field = 0;
    std::uint32_t diff_field = 0;  // 0: the message has no diff
    std::uint64_t bytes = 0;       // what the blob's buffers take
    ConvertRule rule = ConvertRule::exact;
};

template <class T>
BlobPlan plan_blob(const BlobScan& scan, const io::LoadOptions& options, std::string_view source,
                   std::string_view message) {
    constexpr bool is_double = std::same_as<T, double>;
    const std::uint32_t native_data = is_double ? field_double_data : field_data;
    const std::uint32_t other_data = is_double ? field_data : field_double_data;
    const pb::Reader r({}, scan.offset, source, message, blob_field_name);
    const auto count = static_cast<std::uint64_t>(scan.shape.count());

    auto pick = [&](std::uint32_t native, std::uint32_t other, bool required) -> std::uint32_t {
        std::uint32_t chosen = native;
        if (scan.values[native] == 0 && scan.values[other] != 0) {
            chosen = other;
            if (!options.convert) {
                r.fail_at(scan.offset, where(r, other),
                          std::to_string(scan.values[other]) + " " +
                              std::string(dtype_name(is_double ? Dtype::F32 : Dtype::F64)) +
                              " values, but the blob holds " + std::string(element_name<T>()) +
                              " (set LoadOptions::convert to convert them)");
            }
        } else if (!required && scan.values[native] == 0) {
            return 0;
        }
        if (scan.values[chosen] != count) {
            r.fail_at(scan.offset, where(r, chosen),
                      std::to_string(scan.values[chosen]) + " values, but shape " + scan.shape.to_string() + " needs " +
                          std::to_string(count));
        }
        return chosen;
    };

    BlobPlan plan;
    plan.data_field = pick(native_data, other_data, true);
    plan.diff_field =
        pick(is_double ? field_double_diff : field_diff, is_double ? field_diff : field_double_diff, false);
    plan.bytes = count * sizeof(T) * (plan.diff_field != 0 ? 2 : 1);
    plan.rule = io::convert_rule(options);
    return plan;
}

/// Copies the values of repeated field `number` of a (validated) BlobProto into `dst`, converting
/// by `rule`. \throws FormatError naming the field, the value's index and the value for the first
/// value `ConvertRule::exact` refuses.
template <class T>
void read_values(std::string_view bytes, std::size_t base, std::string_view source, std::uint32_t number, T* dst,
                 ConvertRule rule) {
    const bool file_double = number >= field_double_data;
    const Dtype from = file_double ? Dtype::F64 : Dtype::F32;
    const std::size_t size = file_double ? 8 : 4;
    const bool same = (file_double == std::same_as<T, double>);
    pb::Reader r(bytes, base, source, "BlobProto", blob_field_name);
    pb::Field f;
    std::size_t at = 0;
    const auto convert = [&](const void* src, std::size_t n, std::size_t offset) {
        const std::size_t bad = convert_elements(from, src, n, dst + at, rule);
        if (bad != n) {
            r.fail_at(offset, r.field_name(number) + " value " + std::to_string(at + bad),
                      conversion_problem_at<T>(from, static_cast<const char*>(src) + bad * size));
        }
        at += n;
    };
    while (r.next(f)) {
        if (f.number != number) {
            continue;
        }
        if (f.type == pb::WireType::length_delimited) {
            const std::size_t n = f.bytes.size() / size;
            if (same && std::endian::native == std::endian::little) {
                std::memcpy(dst + at, f.bytes.data(), f.bytes.size());
                at += n;
            } else {
                convert(f.bytes.data(), n, f.offset);
            }
        } else {
            unsigned char le[8];
            for (std::size_t i = 0; i < size; ++i) {
                le[i] = static_cast<unsigned char>(f.value >> (8 * i));
            }
            convert(le, 1, f.offset);
        }
    }
}

/// Puts a scanned and planned BlobProto into `blob`, through fresh storage committed only when
/// every value has been read (see StagedLoad): on any exception the blob is unchanged.
template <class T, class A>
void apply_blob(Blob<T, A>& blob, const BlobScan& scan, const BlobPlan& plan, std::string_view bytes,
                std::string_view source) {
    StagedLoad<T, A> stage(blob, scan.shape);
    const auto data = stage.data();
    if (!data.empty()) {
        read_values(bytes, scan.offset, source, plan.data_field, data.data(), plan.rule);
    }
    if (plan.diff_field != 0) {
        const auto diff = stage.diff();
        if (!diff.empty()) {
            read_values(bytes, scan.offset, source, plan.diff_field, diff.data(), plan.rule);
        }
    }
    stage.commit(blob);
}

/// Refuses a load that would take more than `budget` bytes (what is left of `LoadOptions::max_bytes`).
inline void charge(std::uint64_t& budget, std::uint64_t bytes, const pb::Reader& r, std::size_t offset,
                   std::string_view what) {
    if (bytes > budget) {
        r.fail_at(offset, what,
                  "needs " + std::to_string(bytes) + " more bytes, over the limit (LoadOptions::max_bytes; " +
                      std::to_string(budget) + " bytes left)");
    }
    budget -= bytes;
}

// ---- writing -------------------------------------------------------------------------------

inline std::uint64_t shape_payload_size(const Shape& shape) {
    std::uint64_t dims = 0;
    for (const std::int64_t d : shape.extents()) {
        dims += pb::varint_size(static_cast<std::uint64_t>(d));
    }
    return dims == 0 ? 0 : pb::tag_size(field_dim) + pb::varint_size(dims) + dims;
}

inline std::uint64_t packed_size(std::uint32_t number, std::uint64_t payload) {
    return payload == 0 ? 0 : pb::tag_size(number) + pb::varint_size(payload) + payload;
}

/// The serialized size of a blob's BlobProto.
template <class T, class A>
std::uint64_t blob_proto_size(const Blob<T, A>& blob, bool write_diff) {
    const auto values = static_cast<std::uint64_t>(blob.count()) * sizeof(T);
    const std::uint64_t shape = shape_payload_size(blob.shape());
    return packed_size(std::same_as<T, double> ? field_double_data : field_data, values) +
           (write_diff ? packed_size(std::same_as<T, double> ? field_double_diff : field_diff, values) : 0) +
           pb::tag_size(field_shape) + pb::varint_size(shape) + shape;
}

template <class Sink, class T, class A>
void write_shape(pb::Writer<Sink>& w, const Blob<T, A>& blob) {
    const std::uint64_t payload = shape_payload_size(blob.shape());
    w.length_delimited(field_shape, payload);
    if (payload != 0) {
        std::uint64_t dims = 0;
        for (const std::int64_t d : blob.shape().extents()) {
            dims += pb::varint_size(static_cast<std::uint64_t>(d));
        }
        w.length_delimited(field_dim, dims);
        for (const std::int64_t d : blob.shape().extents()) {
            w.varint(static_cast<std::uint64_t>(d));
        }
    }
}

/// Writes a blob's BlobProto fields in field-number order, as protobuf serializes them: float
/// blobs as data (5), diff (6), shape (7); double blobs as shape (7), double_data (8), double_diff (9).
template <class Sink, class T, class A>
void write_blob_proto(pb::Writer<Sink>& w, const Blob<T, A>& blob, bool write_diff) {
    const auto n = static_cast<std::size_t>(blob.count());
    if constexpr (std::same_as<T, float>) {
        w.packed_fixed(field_data, blob.host_data().data(), n);
        if (write_diff) {
            w.packed_fixed(field_diff, blob.host_diff().data(), n);
        }
        write_shape(w, blob);
    } else {
        write_shape(w, blob);
        w.packed_fixed(field_double_data, blob.host_data().data(), n);
        if (write_diff) {
            w.packed_fixed(field_double_diff, blob.host_diff().data(), n);
        }
    }
}

template <class T, class A>
void require_shape(const Blob<T, A>& blob, std::string_view op) {
    if (!blob.has_shape()) {
        throw ShapeError(std::string(op) + ": the blob has no shape (default-constructed or moved from)");
    }
}

}  // namespace io::detail::caffe

SYNCBLOB_END_NAMESPACE
