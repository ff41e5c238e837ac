// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// A blob's JSON document read as a stream, in two passes over the reader's events, so that a
/// load holds only the blob it fills: `DocumentScan` checks the structure (dtype, shape or the
/// legacy 4-D fields, data, diff) and counts the values without keeping them, refusing a shape
/// over `LoadOptions::max_bytes` the moment it is read; `DocumentFill` then decodes each value
/// straight into the blob's new storage. Each error is a `FormatError` naming the field.

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "../../core/shape.hpp"
#include "../convert.hpp"
#include "convert_message.hpp"
#include "format_error.hpp"
#include "json_values.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace io::detail::json_io {

/// What a scan found: a document whose values fit its shape.
struct Document {
    Dtype dtype = Dtype::F32;
    Shape shape;
    bool has_diff = false;
};

/// Pass 1: the structure of `{"dtype", "shape" | "num"/"channels"/"height"/"width", "data", "diff"?}`.
class DocumentScan {
public:
    /// `value_bytes`: what one value takes in the blob; `max_bytes`: the most the blob may take.
    DocumentScan(std::string_view source, std::uint64_t value_bytes, std::uint64_t max_bytes)
        : source_(source), value_bytes_(value_bytes), max_bytes_(max_bytes) {}

    void begin_object(std::uint64_t) { open("object"); }
    void begin_array(std::uint64_t) { open("array"); }
    void key(std::string_view key, std::uint64_t) {
        constexpr std::array<std::string_view, 8> names{"dtype", "shape",    "data",   "diff",
                                                        "num",   "channels", "height", "width"};
        field_ = -1;
        for (std::size_t i = 0; i < names.size(); ++i) {
            field_ = key == names[i] ? static_cast<int>(i) : field_;
        }
        if (field_ < 0) {
            fail("field \"" + std::string(key) + "\"",
                 "unexpected field (expected dtype, shape, data, diff, num, channels, height, width)");
        }
        if ((seen_ & (1u << field_)) != 0) {
            fail("field \"" + std::string(key) + "\"", "duplicate key");
        }
        seen_ |= 1u << field_;
    }
    void end_object() { --depth_; }
    void end_array() {
        --depth_;
        if (field_ == shape_field) {
            finish_shape();
        }
    }
    void scalar(const Scalar& v) {
        if (depth_ == 0) {
            root_is_not_an_object(v.type_name(), v.describe());
        }
        if (depth_ == 2) {
            item(v);
            return;
        }
        if (field_ == dtype_field) {
            dtype_ = v.kind == ScalarKind::string ? parse_dtype(v.text) : std::nullopt;
            if (!dtype_) {
                fail("dtype", "expected one of " + dtype_names() + ", found " + v.describe());
            }
        } else if (field_ == shape_field) {
            fail("shape",
                 "expected an array of at most " + std::to_string(Shape::max_axes) + " extents, found " + v.describe());
        } else if (field_ == data_field || field_ == diff_field) {
            not_an_array(v.describe());
        } else {
            legacy_[static_cast<std::size_t>(field_ - num_field)] = extent(v, field_name());
        }
    }

    /// After the reader: the whole document checked. \throws FormatError
    [[nodiscard]] Document finish();

private:
    static constexpr int dtype_field = 0, shape_field = 1, data_field = 2, diff_field = 3, num_field = 4;

    [[noreturn]] void fail(const std::string& where, const std::string& what) const {
        io::throw_format_error(source_, where, what);
    }
    [[nodiscard]] std::string field_name() const {
        constexpr std::array<const char*, 8> names{"dtype", "shape",    "data",   "diff",
                                                   "num",   "channels", "height", "width"};
        return names[static_cast<std::size_t>(field_)];
    }
    [[noreturn]] void root_is_not_an_object(const char* type, const std::string& found) const {
        (void)type;
        fail("document", "expected an object with \"dtype\", \"shape\" and \"data\", found " + found);
    }
    [[noreturn]] void not_an_array(const std::string& found) const {
        fail(field_name(),
             (shape_ ? "expected an array of " + std::to_string(count()) + " values for shape " + shape_->to_string()
                     : std::string("expected an array of values")) +
                 ", found " + found);
    }

    void open(const char* type) {
        if (depth_ == 0) {
            if (type[0] == 'a') {
                root_is_not_an_object(type, type);
            }
        } else if (depth_ == 2) {
            const std::string where =
                field_name() + "[" +
                std::to_string(field_ == shape_field ? rank_ : values_[static_cast<std::size_t>(field_ - data_field)]) +
                "]";
            fail(where, std::string(field_ == shape_field ? "expected a non-negative integer extent"
                                                          : "expected a number, string or boolean") +
                            ", found " + type);
        } else if (type[0] == 'o' || (field_ != shape_field && field_ != data_field && field_ != diff_field)) {
            if (field_ == dtype_field) {
                fail("dtype", "expected one of " + dtype_names() + ", found " + type);
            }
            if (field_ == shape_field) {
                fail("shape", std::string("expected an array of at most 32 extents, found ") + type);
            }
            if (field_ == data_field || field_ == diff_field) {
                not_an_array(type);
            }
            fail(field_name(), std::string("expected a non-negative integer extent, found ") + type);
        }
        ++depth_;
    }

    // A non-negative integer (a document in memory may hold one as a signed integer).
    std::int64_t extent(const Scalar& v, const std::string& where) const {
        if (v.kind == ScalarKind::integer && v.integer >= 0) {
            return v.integer;
        }
        if (v.kind != ScalarKind::unsigned_integer ||
            v.unsigned_integer > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
            fail(where, "expected a non-negative integer extent, found " + v.describe());
        }
        return static_cast<std::int64_t>(v.unsigned_integer);
    }

    void item(const Scalar& v) {
        if (field_ != shape_field) {
            ++values_[static_cast<std::size_t>(field_ - data_field)];
            return;
        }
        const std::int64_t e = extent(v, "shape[" + std::to_string(rank_) + "]");
        if (rank_ < dims_.size()) {
            dims_[rank_] = e;
        }
        ++rank_;
    }

    [[nodiscard]] std::uint64_t count() const { return static_cast<std::uint64_t>(shape_->count()); }

    void finish_shape() {
        if (rank_ > Shape::max_axes) {
            fail("shape", "expected an array of at most 32 extents, found array of " + std::to_string(rank_));
        }
        set_shape(std::span(dims_.data(), rank_), "shape");
    }

    // The shape, checked as a whole and against max_bytes now: before any value is read.
    void set_shape(std::span<const std::int64_t> extents, std::string_view where) {
        shape_ = shape_from_file(extents, source_, where);
        const std::uint64_t n = count();
        if (n > max_bytes_ / value_bytes_) {
            fail(std::string(where), std::to_string(n * value_bytes_) + " bytes for shape " + shape_->to_string() +
                                         " exceed the limit of " + std::to_string(max_bytes_) +
                                         " bytes (LoadOptions::max_bytes)");
        }
    }

    std::string_view source_;
    std::uint64_t value_bytes_;
    std::uint64_t max_bytes_;
    int depth_ = 0;
    int field_ = -1;
    unsigned seen_ = 0;
    std::optional<Dtype> dtype_;
    std::array<std::int64_t, Shape::max_axes> dims_{};
    std::size_t rank_ = 0;
    std::array<std::int64_t, 4> legacy_{1, 1, 1, 1};
    std::optional<Shape> shape_;
    std::array<std::uint64_t, 2> values_{};  // counted in data, diff
};

inline Document DocumentScan::finish() {
    if (!dtype_) {
        fail("dtype", "missing (expected one of " + dtype_names() + ")");
    }
    const bool has_shape = (seen_ & (1u << shape_field)) != 0;
    const bool has_legacy = (seen_ & 0xF0u) != 0;
    if (has_shape && has_legacy) {
        fail("shape", "given together with the legacy num/channels/height/width fields");
    }
    if (has_legacy) {
        set_shape(legacy_, "num/channels/height/width");
    } else if (!has_shape) {
        fail("shape", "missing (expected \"shape\" or the legacy num/channels/height/width)");
    }
    Document doc;
    doc.dtype = *dtype_;
    doc.shape = *shape_;
    doc.has_diff = (seen_ & (1u << diff_field)) != 0;
    if ((seen_ & (1u << data_field)) == 0) {
        fail("data", "missing (expected an array of " + std::to_string(count()) + " values)");
    }
    for (const int f : {data_field, diff_field}) {
        const std::uint64_t got = values_[static_cast<std::size_t>(f - data_field)];
        if ((seen_ & (1u << f)) != 0 && got != count()) {
            fail(f == data_field ? "data" : "diff", "expected an array of " + std::to_string(count()) +
                                                        " values for shape " + shape_->to_string() +
                                                        ", found array of " + std::to_string(got));
        }
    }
    if (doc.has_diff && count() > max_bytes_ / value_bytes_ / 2) {
        fail("diff", std::to_string(2 * count() * value_bytes_) + " bytes for the data and diff of shape " +
                         shape_->to_string() + " exceed the limit of " + std::to_string(max_bytes_) +
                         " bytes (LoadOptions::max_bytes)");
    }
    return doc;
}

/// Pass 2: the values of a scanned document, decoded and converted into `data` and `diff` (each
/// holds as many values as the document). Everything else was checked by the scan.
///
/// One class for every pair of the document's dtype and the blob's element type: only the step
/// that decodes and converts one value depends on the pair (`store<S, T>`, reached through a
/// pointer), so the reader that walks the text is instantiated once per input, not once per pair
/// (16 x 16 of them; a JSON value's parse costs a hundred times the indirect call).
class DocumentFill {
public:
    /// The fill of a document of dtype `from` into a blob of `T`.
    template <Element T>
    [[nodiscard]] static DocumentFill of(Dtype from, std::string_view source, std::span<T> data, std::span<T> diff,
                                         ConvertRule rule) {
        const Store decode_and_store =
            syncblob::detail::visit_dtype(from, []<class S>(std::type_identity<S>) -> Store { return &store<S, T>; });
        return DocumentFill(source, data.data(), diff.data(), rule, decode_and_store);
    }

    void begin_object(std::uint64_t) { ++depth_; }
    void begin_array(std::uint64_t) {
        ++depth_;
        index_ = 0;
    }
    void end_object() { --depth_; }
    void end_array() { --depth_; }
    void key(std::string_view key, std::uint64_t) {
        target_ = key == "data" ? data_ : key == "diff" ? diff_ : nullptr;
        field_ = key;
    }
    void scalar(const Scalar& v) {
        if (depth_ != 2 || target_ == nullptr) {
            return;
        }
        store_(Place{source_, field_, index_}, v, target_, index_, rule_);
        ++index_;
    }

private:
    // Decodes `v` as an S and stores it, converted by `rule`, as element `index` of the T array `out`.
    using Store = void (*)(const Place& at, const Scalar& v, void* out, std::size_t index, ConvertRule rule);

    template <Element S, Element T>
    static void store(const Place& at, const Scalar& v, void* out, std::size_t index, ConvertRule rule) {
        const S s = decode<S>(v, at);
        const syncblob::detail::Converted<T> c = syncblob::detail::convert_checked<T>(s);
        if (!c.exact && rule == ConvertRule::exact) {
            at.fail(conversion_problem<T>(s));
        }
        static_cast<T*>(out)[index] = c.value;
    }

    DocumentFill(std::string_view source, void* data, void* diff, ConvertRule rule, Store decode_and_store)
        : source_(source), data_(data), diff_(diff), rule_(rule), store_(decode_and_store) {}

    std::string_view source_;
    void* data_;
    void* diff_;
    ConvertRule rule_;
    Store store_;
    int depth_ = 0;
    void* target_ = nullptr;
    std::string field_;
    std::size_t index_ = 0;
};

}  // namespace io::detail::json_io

SYNCBLOB_END_NAMESPACE
