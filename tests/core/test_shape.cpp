// SPDX-License-Identifier: BSD-2-Clause
// Shape: ranks 0 to 32, negative and overflowing extents, negative axes, count ranges, printing.

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <syncblob/core/shape.hpp>

using syncblob::IndexError;
using syncblob::Shape;
using syncblob::ShapeError;

namespace {
constexpr std::int64_t int64_max = std::numeric_limits<std::int64_t>::max();

Shape from(const std::vector<std::int64_t>& extents) {
    return Shape(std::span<const std::int64_t>(extents));
}
}  // namespace

TEST_CASE("Shape of rank 0 is a scalar", "[core][shape]") {
    const Shape s;
    CHECK(s.rank() == 0);
    CHECK(s.count() == 1);
    CHECK(s.extents().empty());
    CHECK(s.count(0, 0) == 1);
    CHECK(s.to_string() == "(1)");
    CHECK(s == Shape{});
    CHECK_THROWS_AS(s.extent(0), IndexError);
    CHECK_THROWS_AS(s.extent(-1), IndexError);
}

TEST_CASE("Shape of rank 1 and 4", "[core][shape]") {
    const Shape one{7};
    CHECK(one.rank() == 1);
    CHECK(one.count() == 7);
    CHECK(one.extent(0) == 7);
    CHECK(one.extent(-1) == 7);
    CHECK(one.to_string() == "7 (7)");

    const Shape s{2, 3, 4, 5};
    CHECK(s.rank() == 4);
    CHECK(s.count() == 120);
    CHECK(s.to_string() == "2 3 4 5 (120)");
    std::ostringstream os;
    os << s;
    CHECK(os.str() == "2 3 4 5 (120)");
    CHECK(s[0] == 2);
    CHECK(s[3] == 5);
    CHECK(std::vector<std::int64_t>(s.begin(), s.end()) == std::vector<std::int64_t>{2, 3, 4, 5});
    CHECK(s == Shape{2, 3, 4, 5});
    CHECK_FALSE(s == Shape{2, 3, 4});
    CHECK_FALSE(s == Shape{2, 3, 5, 4});
}

TEST_CASE("Shape takes up to 32 axes", "[core][shape]") {
    const std::vector<std::int64_t> ones(32, 1);
    const Shape s32 = from(ones);
    CHECK(s32.rank() == 32);
    CHECK(s32.count() == 1);
    CHECK(s32.extent(-32) == 1);
    CHECK_THROWS_AS(s32.extent(-33), IndexError);
    CHECK_THROWS_AS(s32.extent(32), IndexError);

    std::vector<std::int64_t> twos(32, 2);
    twos[31] = 3;
    const Shape big = from(twos);
    CHECK(big.count() == (std::int64_t{1} << 31) * 3);
    CHECK(big.extent(-1) == 3);

    const std::vector<std::int64_t> thirty_three(33, 1);
    CHECK_THROWS_AS(from(thirty_three), ShapeError);
    CHECK_THROWS_WITH(from(thirty_three), Catch::Contains("33") && Catch::Contains("32"));
    const std::vector<int> thirty_three_int(33, 1);
    CHECK_THROWS_AS(Shape(std::span<const int>(thirty_three_int)), ShapeError);
}

TEST_CASE("Shape copies and assigns at every rank, few axes or many", "[core][shape]") {
    // Up to six axes live in the object; more in a block its copies share. Every rank from 0 to 32,
    // assigned to and from every other, keeps its extents, its count and its copies apart.
    static_assert(sizeof(Shape) <= 64, "a shape of few axes fits one cache line");
    static_assert(std::is_nothrow_copy_constructible_v<Shape> && std::is_nothrow_copy_assignable_v<Shape> &&
                  std::is_nothrow_move_constructible_v<Shape> && std::is_nothrow_move_assignable_v<Shape>);
    std::vector<Shape> shapes;
    std::vector<std::vector<std::int64_t>> expected;
    for (std::size_t rank = 0; rank <= Shape::max_axes; ++rank) {
        std::vector<std::int64_t> extents(rank);
        for (std::size_t i = 0; i < rank; ++i) {
            extents[i] = static_cast<std::int64_t>(i % 3 + 1);
        }
        shapes.push_back(from(extents));
        expected.push_back(extents);
    }
    const auto holds = [](const Shape& s, const std::vector<std::int64_t>& e) {
        std::int64_t count = 1;
        for (const auto x : e) {
            count *= x;
        }
        return s.rank() == e.size() && std::equal(s.begin(), s.end(), e.begin(), e.end()) && s.count() == count;
    };
    for (std::size_t a = 0; a < shapes.size(); ++a) {
        for (std::size_t b = 0; b < shapes.size(); ++b) {
            Shape target = shapes[a];
            target = shapes[b];
            REQUIRE(holds(target, expected[b]));
            REQUIRE(target == shapes[b]);
            Shape moved = std::move(target);
            REQUIRE(holds(moved, expected[b]));
            moved = std::move(shapes[a]);
            REQUIRE(holds(moved, expected[a]));
            REQUIRE(holds(shapes[a], expected[a]));  // a move is a copy: the source keeps its extents
        }
    }
    // A copy outlives the shape it was made from (the shared block stays while any copy holds it).
    auto original = std::make_unique<Shape>(shapes.back());
    const Shape copy = *original;
    original.reset();
    CHECK(holds(copy, expected.back()));
    Shape self = shapes.back();
    const Shape& alias = self;
    self = alias;
    CHECK(holds(self, expected.back()));
}

TEST_CASE("Shape rejects negative extents", "[core][shape]") {
    CHECK_THROWS_AS((Shape{2, -1, 3}), ShapeError);
    CHECK_THROWS_WITH((Shape{2, -1, 3}), Catch::Contains("-1") && Catch::Contains("axis 1"));
    const std::vector<int> negative{4, 5, -7};
    CHECK_THROWS_AS(Shape(std::span<const int>(negative)), ShapeError);
    CHECK_THROWS_WITH(Shape(std::span<const int>(negative)), Catch::Contains("-7") && Catch::Contains("axis 2"));
}

TEST_CASE("Shape is made from any contiguous range of integers", "[core][shape]") {
    const std::vector<int> ints{2, 3, 4};
    CHECK(Shape(ints) == Shape{2, 3, 4});
    const std::vector<std::int64_t> wide{5, 6};
    CHECK(Shape(wide) == Shape{5, 6});
    const std::array<std::uint32_t, 2> unsigned_extents{7, 8};
    CHECK(Shape(unsigned_extents).count() == 56);
    std::vector<int> mutable_ints{9};
    CHECK(Shape(std::span<int>(mutable_ints)) == Shape{9});
    CHECK(Shape(std::vector<int>{}).rank() == 0);
    // the same checks as the other constructors
    CHECK_THROWS_WITH(Shape(std::vector<int>{4, -2}), Catch::Contains("-2") && Catch::Contains("axis 1"));
    CHECK_THROWS_WITH(Shape(std::vector<std::uint64_t>{1, std::numeric_limits<std::uint64_t>::max()}),
                      Catch::Contains("does not fit") && Catch::Contains("axis 1"));
    CHECK_THROWS_AS(Shape(std::vector<short>(33, 1)), ShapeError);
}

TEST_CASE("Shape checks the element count for int64 overflow", "[core][shape]") {
    const std::int64_t half_range = std::int64_t{1} << 32;  // 2^32 * 2^32 = 2^64 overflows
    CHECK_THROWS_AS((Shape{half_range, half_range}), ShapeError);
    CHECK_THROWS_WITH((Shape{half_range, half_range}), Catch::Contains("overflow"));
    CHECK_THROWS_AS((Shape{int64_max, 2}), ShapeError);
    CHECK_THROWS_AS((Shape{3, int64_max / 2}), ShapeError);
    // the largest counts that fit are fine
    CHECK(Shape{int64_max}.count() == int64_max);
    CHECK((Shape{1, int64_max, 1}).count() == int64_max);
    CHECK((Shape{2, int64_max / 2}).count() == int64_max - 1);
    const std::int64_t p31 = std::int64_t{1} << 31;  // 2^31 * 2^31 * 2 = 2^63 does not fit
    CHECK_THROWS_AS((Shape{p31, p31, 2}), ShapeError);
    CHECK((Shape{p31, p31, 1}).count() == std::int64_t{1} << 62);
    // a zero extent makes the count 0, but the other extents must still multiply without overflow,
    // whatever their order, so that count(start, end) over any run of axes is safe
    CHECK((Shape{0, 5, 7}).count() == 0);
    CHECK_THROWS_AS((Shape{half_range, half_range, 0}), ShapeError);
    CHECK_THROWS_AS((Shape{0, half_range, half_range}), ShapeError);
    CHECK((Shape{0, half_range, 2}).count(1, 3) == std::int64_t{1} << 33);
    // unsigned extents beyond int64
    const std::vector<std::uint64_t> huge{std::uint64_t{1} << 63};
    CHECK_THROWS_AS(Shape(std::span<const std::uint64_t>(huge)), ShapeError);
    const std::vector<std::uint32_t> fine{4, 5};
    CHECK(Shape(std::span<const std::uint32_t>(fine)) == Shape{4, 5});
}

TEST_CASE("A failed Shape assignment leaves the target as it was", "[core][shape]") {
    Shape s{2, 3};
    CHECK_THROWS_AS(s = (Shape{-2, 3}), ShapeError);
    CHECK(s == Shape{2, 3});
    CHECK(s.count() == 6);
}

TEST_CASE("Shape canonicalises negative axes", "[core][shape]") {
    const Shape s{2, 3, 4, 5};
    for (std::int64_t axis = -4; axis < 4; ++axis) {
        INFO("axis " << axis);
        const std::size_t expected = static_cast<std::size_t>(axis < 0 ? axis + 4 : axis);
        CHECK(s.canonical_axis(axis) == expected);
        CHECK(s.extent(axis) == s[expected]);
    }
    CHECK_THROWS_AS(s.canonical_axis(4), IndexError);
    CHECK_THROWS_AS(s.canonical_axis(-5), IndexError);
    CHECK_THROWS_WITH(s.canonical_axis(-5),
                      Catch::Contains("-5") && Catch::Contains("[-4, 4)") && Catch::Contains("2 3 4 5 (120)"));
}

TEST_CASE("Shape::count(start, end) multiplies a range of axes", "[core][shape]") {
    const Shape s{2, 3, 4, 5};
    CHECK(s.count(0, 4) == 120);
    CHECK(s.count(1, 3) == 12);
    CHECK(s.count(2, 2) == 1);
    CHECK(s.count(4, 4) == 1);
    CHECK(s.count(0) == 120);
    CHECK(s.count(1) == 60);
    CHECK(s.count(3) == 5);
    CHECK(s.count(4) == 1);
    CHECK_THROWS_AS(s.count(3, 2), IndexError);
    CHECK_THROWS_AS(s.count(0, 5), IndexError);
    CHECK_THROWS_AS(s.count(5), IndexError);
    CHECK_THROWS_WITH(s.count(3, 2), Catch::Contains("[3, 2)") && Catch::Contains("2 3 4 5 (120)"));
    // every range of a random-looking shape agrees with a direct product
    const Shape t{3, 1, 4, 1, 5, 9, 2, 6};
    for (std::size_t a = 0; a <= t.rank(); ++a) {
        for (std::size_t b = a; b <= t.rank(); ++b) {
            std::int64_t product = 1;
            for (std::size_t i = a; i < b; ++i) {
                product *= t[i];
            }
            CHECK(t.count(a, b) == product);
        }
    }
}

TEST_CASE("Shape prints in Caffe's format", "[core][shape]") {
    CHECK((Shape{0}).to_string() == "0 (0)");
    CHECK((Shape{3, 0, 2}).to_string() == "3 0 2 (0)");
    CHECK((Shape{int64_max}).to_string() == "9223372036854775807 (9223372036854775807)");
    CHECK((Shape{1, 1, 1}).to_string() == "1 1 1 (1)");
}
