// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// `Shape`: up to 32 axes of 64-bit extents with an overflow-checked element count.

#include <algorithm>
#include <array>
#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <ostream>
#include <ranges>
#include <span>
#include <string>
#include <utility>

#include "config.hpp"
#include "error.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace detail {
/// A contiguous, sized range of integers (not bools): what a `Shape` can be made from.
template <class R>
concept ExtentRange = std::ranges::contiguous_range<R> && std::ranges::sized_range<R> &&
    std::integral<std::ranges::range_value_t<R>> && !std::same_as<std::ranges::range_value_t<R>, bool>;

/// `a * b` for non-negative `a` and `b`, or nothing when the product does not fit in `std::int64_t`.
/// Every product of extents that comes from a caller or a file goes through here.
[[nodiscard]] constexpr std::optional<std::int64_t> multiply_extents(std::int64_t a, std::int64_t b) noexcept {
    if (b != 0 && a > std::numeric_limits<std::int64_t>::max() / b) {
        return std::nullopt;
    }
    return a * b;
}

/// The most axes a shape can have (Caffe's kMaxBlobAxes): `Shape::max_axes`.
inline constexpr std::size_t max_axes = 32;

/// What is wrong with `extents` as a shape, or nothing: more than 32 axes, a negative extent, or a
/// product of the non-zero extents that overflows `std::int64_t`. A zero extent makes the count 0 but
/// hides nothing: every run of axes is multiplied somewhere (`count(start, end)`, strides), so the
/// product of the others must fit too.
[[nodiscard]] inline std::optional<std::string> extents_problem(std::span<const std::int64_t> extents) {
    if (extents.size() > max_axes) {
        return std::to_string(extents.size()) + " axes given, at most " + std::to_string(max_axes) + " are supported";
    }
    std::int64_t product = 1;
    for (std::size_t i = 0; i < extents.size(); ++i) {
        const std::int64_t e = extents[i];
        if (e < 0) {
            return "extent " + std::to_string(e) + " on axis " + std::to_string(i) + " is negative";
        }
        const auto next = multiply_extents(product, e == 0 ? 1 : e);
        if (!next) {
            return "element count overflows int64 at axis " + std::to_string(i) + " (extent " + std::to_string(e) + ")";
        }
        product = *next;
    }
    return std::nullopt;
}

/// The element count of extents that `extents_problem` accepted.
[[nodiscard]] constexpr std::int64_t count_of(std::span<const std::int64_t> extents) noexcept {
    std::int64_t product = 1;
    for (const std::int64_t e : extents) {
        product *= e;
    }
    return product;
}
}  // namespace detail

/// The extents of an N-d array, N ≤ 32. Every constructed shape has non-negative
/// extents whose product fits in `std::int64_t`; a rank-0 shape is a scalar (count 1).
class Shape {
public:
    /// The most axes a shape can have (Caffe's kMaxBlobAxes).
    static constexpr std::size_t max_axes = detail::max_axes;

    /// The rank-0 shape (a scalar: count 1).
    constexpr Shape() noexcept {}  // NOLINT(modernize-use-equals-default): a const Shape needs it

    /// Copies never throw: a shape of more than a few axes shares its extents with its copies (a
    /// move is a copy).
    Shape(const Shape& other) noexcept { copy(other); }
    Shape& operator=(const Shape& other) noexcept {
        if (this != &other) {
            release();
            copy(other);
        }
        return *this;
    }
    ~Shape() { release(); }

    /// \throws ShapeError on a negative extent, more than 32 axes, or an element count that overflows.
    Shape(std::initializer_list<std::int64_t> extents) : Shape(std::span<const std::int64_t>(extents)) {}

    /// \copydoc Shape(std::initializer_list<std::int64_t>)
    explicit Shape(std::span<const std::int64_t> extents) { assign(extents); }

    /// From a span of integers of another type.
    /// \throws ShapeError as above, and when an extent does not fit in `std::int64_t`.
    template <std::integral I>
    requires(!std::same_as<I, std::int64_t>) explicit Shape(std::span<const I> extents) {
        if (extents.size() > max_axes) {
            throw_too_many_axes(extents.size());
        }
        std::array<std::int64_t, max_axes> converted{};
        for (std::size_t i = 0; i < extents.size(); ++i) {
            if (std::cmp_greater(extents[i], std::numeric_limits<std::int64_t>::max())) {
                throw ShapeError("Shape: extent " + std::to_string(extents[i]) + " on axis " + std::to_string(i) +
                                 " does not fit in int64");
            }
            converted[i] = static_cast<std::int64_t>(extents[i]);
        }
        assign(std::span<const std::int64_t>(converted.data(), extents.size()));
    }

    /// From any contiguous range of integers: `Shape(std::vector<int>{2, 3})`, `Shape(std::array{2, 3})`.
    /// \throws ShapeError as above.
    template <detail::ExtentRange R>
    explicit Shape(const R& extents)
        : Shape(
              std::span<const std::ranges::range_value_t<R>>(std::ranges::data(extents), std::ranges::size(extents))) {}

    /// Number of axes.
    [[nodiscard]] constexpr std::size_t rank() const noexcept { return rank_; }

    /// The extents, one per axis.
    [[nodiscard]] std::span<const std::int64_t> extents() const noexcept { return {data(), rank_}; }
    [[nodiscard]] const std::int64_t* begin() const noexcept { return data(); }
    [[nodiscard]] const std::int64_t* end() const noexcept { return data() + rank_; }

    /// Unchecked extent of axis `i` (0 ≤ i < rank).
    [[nodiscard]] std::int64_t operator[](std::size_t i) const noexcept { return data()[i]; }

    /// The index in [0, rank) of `axis`, which may be negative (-1 is the last axis), or nothing
    /// when it is out of range: the one axis rule, which `canonical_axis` and Blob's axis queries apply.
    [[nodiscard]] constexpr std::optional<std::size_t> axis_position(std::int64_t axis) const noexcept {
        const auto r = static_cast<std::int64_t>(rank_);
        if (axis < -r || axis >= r) {
            return std::nullopt;
        }
        return static_cast<std::size_t>(axis < 0 ? axis + r : axis);
    }

    /// The index in [0, rank) of `axis`, which may be negative (-1 is the last axis).
    /// \throws IndexError when out of range.
    [[nodiscard]] std::size_t canonical_axis(std::int64_t axis) const {
        if (const auto position = axis_position(axis)) {
            return *position;
        }
        throw IndexError("Shape::canonical_axis: " + axis_range_text(axis) + " for shape " + to_string());
    }

    /// "axis 5 out of range [-2, 2)": what an axis out of range is, for messages.
    [[nodiscard]] std::string axis_range_text(std::int64_t axis) const {
        const auto r = static_cast<std::int64_t>(rank_);
        return "axis " + std::to_string(axis) + " out of range [" + std::to_string(-r) + ", " + std::to_string(r) + ")";
    }

    /// Extent of `axis`, which may be negative. \throws IndexError when out of range.
    [[nodiscard]] std::int64_t extent(std::int64_t axis) const { return data()[canonical_axis(axis)]; }

    /// Product of all extents (1 for rank 0).
    [[nodiscard]] constexpr std::int64_t count() const noexcept { return count_; }

    /// Product of the extents of axes [start, end). \throws IndexError unless 0 ≤ start ≤ end ≤ rank.
    [[nodiscard]] std::int64_t count(std::size_t start, std::size_t end) const {
        if (start > end || end > rank_) {
            throw IndexError("Shape::count: axis range [" + std::to_string(start) + ", " + std::to_string(end) +
                             ") invalid for shape " + to_string());
        }
        std::int64_t product = 1;
        for (std::size_t i = start; i < end; ++i) {
            product *= data()[i];  // cannot overflow: a sub-product of count()
        }
        return product;
    }

    /// Product of the extents from `start` to the last axis.
    [[nodiscard]] std::int64_t count(std::size_t start) const { return count(start, rank_); }

    /// Caffe's format: extents separated by spaces, then the count in parentheses: "2 3 4 5 (120)".
    [[nodiscard]] std::string to_string() const {
        std::string out;
        for (std::size_t i = 0; i < rank_; ++i) {
            out += std::to_string(data()[i]);
            out += ' ';
        }
        out += '(';
        out += std::to_string(count_);
        out += ')';
        return out;
    }

    friend bool operator==(const Shape& a, const Shape& b) noexcept {
        return std::ranges::equal(a.extents(), b.extents());
    }

    friend std::ostream& operator<<(std::ostream& os, const Shape& s) { return os << s.to_string(); }

private:
    void assign(std::span<const std::int64_t> extents) {
        if (auto problem = detail::extents_problem(extents)) {
            throw ShapeError("Shape: " + *problem);
        }
        std::int64_t* to = inline_;
        if (extents.size() > inline_axes) {
            heap_ = new Spilled;  // the one step that can throw (std::bad_alloc)
            to = heap_->extents;
        }
        std::copy(extents.begin(), extents.end(), to);
        rank_ = static_cast<std::uint8_t>(extents.size());
        count_ = detail::count_of(extents);
    }

    // The extents of a shape of more than `inline_axes` axes: one immutable block shared by every
    // copy of the shape (a copy only counts a reference, so copying a shape never throws).
    struct Spilled {
        std::atomic<std::size_t> references{1};
        std::int64_t extents[max_axes];

        void share() noexcept { references.fetch_add(1, std::memory_order_relaxed); }
        void release() noexcept {
            if (references.fetch_sub(1, std::memory_order_acq_rel) == 1) {
                delete this;
            }
        }
    };

    [[nodiscard]] bool spilled() const noexcept { return rank_ > inline_axes; }
    [[nodiscard]] const std::int64_t* data() const noexcept { return spilled() ? heap_->extents : inline_; }

    void copy(const Shape& other) noexcept {
        count_ = other.count_;
        rank_ = other.rank_;
        if (other.spilled()) {
            heap_ = other.heap_;
            heap_->share();
        } else {
            std::copy(other.inline_, other.inline_ + inline_axes, inline_);
        }
    }

    void release() noexcept {
        if (spilled()) {
            heap_->release();
        }
    }

    [[noreturn]] static void throw_too_many_axes(std::size_t n) {
        throw ShapeError("Shape: " + std::to_string(n) + " axes given, at most " + std::to_string(max_axes) +
                         " are supported");
    }

    // Most shapes have few axes: up to `inline_axes` live in the object (64 bytes in all), more
    // in a shared block.
    static constexpr std::size_t inline_axes = 6;

    std::int64_t count_ = 1;
    std::uint8_t rank_ = 0;
    union {
        std::int64_t inline_[inline_axes] = {};
        Spilled* heap_;
    };
};

namespace detail {

/// A shape from extents that come from outside (a file, a foreign tensor), checked as a whole before
/// anything is made of them: `fail(problem)`, which must throw, is called with what
/// `extents_problem` finds; readers pass a `fail` that names the file, field or offset.
template <class Fail>
[[nodiscard]] Shape checked_shape(std::span<const std::int64_t> extents, Fail&& fail) {
    if (auto problem = extents_problem(extents)) {
        std::forward<Fail>(fail)(*problem);
    }
    return Shape(extents);
}

}  // namespace detail

SYNCBLOB_END_NAMESPACE
