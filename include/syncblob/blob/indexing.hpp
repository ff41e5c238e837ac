// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// What a blob answers from its shape alone: extents by (negative) axis, counts of axis ranges,
/// Caffe's legacy 4-D accessors, checked offsets and checked element reads. A base of `Blob`
/// (through CRTP), so that `blob.hpp` holds the storage and this header the indexing.

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>

#include "../core/config.hpp"
#include "../core/error.hpp"
#include "../core/shape.hpp"

SYNCBLOB_BEGIN_NAMESPACE

/// The shape queries of a `Blob<T, A>` (`Derived`), a base of it: every member here is a member
/// of Blob. `Derived` provides `shape()`, `has_shape()`, `host_data()` and `host_diff()`.
template <class Derived, class T>
class BlobIndexing {
public:
    /// Extent of `axis`; negative axes count from the end. \throws IndexError
    [[nodiscard]] std::int64_t shape(std::int64_t axis) const { return shape_of()[axis_index("Blob::shape", axis)]; }
    [[nodiscard]] std::size_t num_axes() const noexcept { return shape_of().rank(); }
    /// Product of the extents of axes [start, end) (1 for an empty range; 0 for a blob without a
    /// shape, which holds nothing). \throws IndexError unless 0 ≤ start ≤ end ≤ num_axes()
    [[nodiscard]] std::int64_t count(std::size_t start, std::size_t end) const {
        if (start > end || end > num_axes()) {
            throw IndexError("Blob::count: axis range [" + std::to_string(start) + ", " + std::to_string(end) +
                             ") invalid for shape " + shape_string() + " with " + std::to_string(num_axes()) + " axes");
        }
        return self().has_shape() ? shape_of().count(start, end) : 0;
    }
    /// Product of the extents from `start` on (`count(0) == count()`). \throws IndexError
    [[nodiscard]] std::int64_t count(std::size_t start) const { return count(start, num_axes()); }
    /// The index in [0, num_axes()) of a possibly negative axis. \throws IndexError
    [[nodiscard]] std::size_t canonical_axis_index(std::int64_t axis) const {
        return axis_index("Blob::canonical_axis_index", axis);
    }
    /// "2 3 4 5 (120)"; a default-constructed blob gives "(0)".
    [[nodiscard]] std::string shape_string() const {
        return self().has_shape() ? shape_of().to_string() : std::string("(0)");
    }

    /// Caffe's legacy accessors: extent of axis 0..3, 1 for axes past the last. \throws ShapeError above 4 axes
    [[nodiscard]] std::int64_t num() const { return legacy_shape(0); }
    [[nodiscard]] std::int64_t channels() const { return legacy_shape(1); }
    [[nodiscard]] std::int64_t height() const { return legacy_shape(2); }
    [[nodiscard]] std::int64_t width() const { return legacy_shape(3); }
    /// Extent of legacy axis `index` in [-4, 4) (negative from the end), 1 past the last axis.
    /// \throws ShapeError above 4 axes, IndexError for an index outside [-4, 4)
    [[nodiscard]] std::int64_t legacy_shape(std::int64_t index) const {
        if (num_axes() > 4) {
            throw ShapeError("Blob::legacy_shape: legacy accessors need at most 4 axes, shape is " + shape_string());
        }
        if (index < -4 || index >= 4) {
            throw IndexError("Blob::legacy_shape: axis " + std::to_string(index) + " out of range [-4, 4) for shape " +
                             shape_string());
        }
        const auto r = static_cast<std::int64_t>(num_axes());
        if (index >= r || index < -r) {
            return 1;  // axes past the last are 1 (Caffe's one-padding)
        }
        return shape(index);
    }

    /// Row-major offset of element (n, c, h, w) in the legacy 4-D view. \throws IndexError, ShapeError
    [[nodiscard]] std::int64_t offset(std::int64_t n, std::int64_t c = 0, std::int64_t h = 0,
                                      std::int64_t w = 0) const {
        const std::int64_t idx[4] = {n, c, h, w};
        std::int64_t result = 0;
        for (std::size_t axis = 0; axis < 4; ++axis) {
            const std::int64_t extent = legacy_shape(static_cast<std::int64_t>(axis));
            check_index("Blob::offset", axis, idx[axis], extent);
            result = result * extent + idx[axis];
        }
        return result;
    }

    /// Row-major offset of `indices` (at most num_axes(); missing trailing indices are 0). \throws IndexError
    [[nodiscard]] std::int64_t offset(std::span<const std::int64_t> indices) const {
        if (indices.size() > num_axes()) {
            throw IndexError("Blob::offset: " + std::to_string(indices.size()) + " indices for shape " +
                             shape_string() + " with " + std::to_string(num_axes()) + " axes");
        }
        std::int64_t result = 0;
        for (std::size_t axis = 0; axis < num_axes(); ++axis) {
            const std::int64_t i = axis < indices.size() ? indices[axis] : 0;
            check_index("Blob::offset", axis, i, shape_of()[axis]);
            result = result * shape_of()[axis] + i;
        }
        return result;
    }
    [[nodiscard]] std::int64_t offset(std::initializer_list<std::int64_t> indices) const {
        return offset(std::span<const std::int64_t>(indices));
    }

    /// Checked read of one data element, one index per axis (synchronises data to the host).
    /// \throws IndexError
    [[nodiscard]] T data_at(std::span<const std::int64_t> indices) const {
        return self().host_data()[element("Blob::data_at", indices)];
    }
    [[nodiscard]] T data_at(std::initializer_list<std::int64_t> indices) const {
        return data_at(std::span<const std::int64_t>(indices));
    }
    /// Checked read in the legacy 4-D view. \throws IndexError, ShapeError
    [[nodiscard]] T data_at(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) const {
        return self().host_data()[element("Blob::data_at", n, c, h, w)];
    }
    /// Checked read of one diff element, one index per axis (synchronises diff to the host).
    /// \throws IndexError
    [[nodiscard]] T diff_at(std::span<const std::int64_t> indices) const {
        return self().host_diff()[element("Blob::diff_at", indices)];
    }
    [[nodiscard]] T diff_at(std::initializer_list<std::int64_t> indices) const {
        return diff_at(std::span<const std::int64_t>(indices));
    }
    /// Checked read in the legacy 4-D view. \throws IndexError, ShapeError
    [[nodiscard]] T diff_at(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) const {
        return self().host_diff()[element("Blob::diff_at", n, c, h, w)];
    }

protected:
    BlobIndexing() = default;

private:
    const Derived& self() const noexcept { return static_cast<const Derived&>(*this); }
    const Shape& shape_of() const noexcept { return self().shape(); }

    std::size_t axis_index(const char* op, std::int64_t axis) const {
        if (const auto position = shape_of().axis_position(axis)) {
            return *position;
        }
        throw IndexError(std::string(op) + ": " + shape_of().axis_range_text(axis) + " for shape " + shape_string());
    }

    void check_index(const char* op, std::size_t axis, std::int64_t index, std::int64_t extent) const {
        if (index < 0 || index >= extent) {
            throw IndexError(std::string(op) + ": index " + std::to_string(index) + " out of range [0, " +
                             std::to_string(extent) + ") on axis " + std::to_string(axis) + " of shape " +
                             shape_string());
        }
    }

    // The checked position of one element: one index per axis, in range, in a blob that holds elements.
    std::size_t element(const char* op, std::span<const std::int64_t> indices) const {
        if (indices.size() != num_axes()) {
            throw IndexError(std::string(op) + ": " + std::to_string(indices.size()) + " indices for shape " +
                             shape_string() + " with " + std::to_string(num_axes()) + " axes");
        }
        require_elements(op);
        return static_cast<std::size_t>(offset(indices));
    }
    std::size_t element(const char* op, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) const {
        require_elements(op);
        return static_cast<std::size_t>(offset(n, c, h, w));
    }
    void require_elements(const char* op) const {
        if (!self().has_shape()) {
            throw IndexError(std::string(op) + ": the blob has no shape and holds no element");
        }
    }
};

SYNCBLOB_END_NAMESPACE
