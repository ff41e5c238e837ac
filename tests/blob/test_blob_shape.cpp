// SPDX-License-Identifier: BSD-2-Clause
// Blob: constructors, shape queries, zero-size shapes, legacy accessors.
// Shape logic does not depend on the allocator: ZipCases covers each element type once, under
// either bundle; constructors (first access, stats) run over the full product.

#include <climits>
#include <cstdint>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include <syncblob/blob.hpp>

#include "blob_test_support.hpp"
#include "checks.hpp"

using namespace blob_test;
using syncblob::Head;
using syncblob::IndexError;
using syncblob::Shape;
using syncblob::ShapeError;

TEMPLATE_LIST_TEST_CASE("Blob constructors", "[blob]", AllCases) {
    using B = typename TestType::blob;
    Checks checks;
    {  // default: no axes, count 0, nothing allocated
        const B b;
        BLOB_EQ(b.has_shape(), false);
        BLOB_EQ(b.num_axes(), 0);
        BLOB_EQ(b.count(), 0);
        BLOB_EQ(b.capacity(), 0);
        BLOB_EQ(b.shape_string(), "(0)");
        BLOB_TRUE(b.host_data().empty());
        BLOB_TRUE(b.data_buffer() == nullptr);
        BLOB_TRUE(no_activity(b.data_stats()));
    }
    {
        const B b{2, 3, 4};
        BLOB_EQ(b.has_shape(), true);
        BLOB_EQ(b.num_axes(), 3);
        BLOB_EQ(b.count(), 24);
        BLOB_EQ(b.shape(), (Shape{2, 3, 4}));
        BLOB_EQ(b.shape_string(), "2 3 4 (24)");
    }
    {
        const std::vector<std::int64_t> extents{5, 1, 7};
        const B b{std::span<const std::int64_t>(extents)};
        BLOB_EQ(b.num_axes(), 3);
        BLOB_EQ(b.count(), 35);
        BLOB_EQ(b.shape(0), 5);
        BLOB_EQ(b.shape(2), 7);
    }
    {
        const B b(Shape{6, 2});
        BLOB_EQ(b.shape(), (Shape{6, 2}));
        BLOB_EQ(b.count(), 12);
    }
    {  // Caffe's legacy (num, channels, height, width)
        const B b(2, 3, 4, 5);
        BLOB_EQ(b.num_axes(), 4);
        BLOB_EQ(b.count(), 120);
        BLOB_EQ(b.shape_string(), "2 3 4 5 (120)");
        BLOB_EQ(b.num(), 2);
        BLOB_EQ(b.channels(), 3);
        BLOB_EQ(b.height(), 4);
        BLOB_EQ(b.width(), 5);
    }
    {  // nothing is allocated before the first access, which reads zeros
        const B b{3, 2};
        BLOB_EQ(b.capacity(), 6);
        BLOB_TRUE(no_activity(b.data_stats()));
        BLOB_TRUE(no_activity(b.diff_stats()));
        BLOB_EQ(b.data_head(), Head::uninitialized);
        BLOB_EQ(values(b.host_data()), zeros<typename TestType::element>(6));
        BLOB_EQ(values(b.host_diff()), zeros<typename TestType::element>(6));
        BLOB_EQ(b.data_stats().host_allocations, 1);
        BLOB_EQ(b.diff_stats().host_allocations, 1);
    }
    {  // bad shapes
        BLOB_THROWS(ShapeError, (B{2, -1}), "-1", "axis 1");
        BLOB_THROWS(ShapeError, (B(1, 1, -3, 1)), "-3");
        BLOB_THROWS(ShapeError, (B{INT64_MAX, 2}), "overflow");
        const std::vector<std::int64_t> axes33(33, 1);
        BLOB_THROWS(ShapeError, B{std::span<const std::int64_t>(axes33)}, "33 axes");
    }
    verify(checks);
}

TEMPLATE_LIST_TEST_CASE("Blob shape queries on 0-, 1-, 4- and 32-axis shapes", "[blob]", ZipCases) {
    using B = typename TestType::blob;
    using T = typename TestType::element;
    Checks checks;
    {  // 0 axes: a scalar, count 1
        B b(Shape{});
        BLOB_EQ(b.has_shape(), true);
        BLOB_EQ(b.num_axes(), 0);
        BLOB_EQ(b.count(), 1);
        BLOB_EQ(b.count(0), 1);
        BLOB_EQ(b.count(0, 0), 1);
        BLOB_EQ(b.shape_string(), "(1)");
        BLOB_THROWS(IndexError, b.shape(0), "axis 0");
        BLOB_THROWS(IndexError, b.shape(-1), "axis -1");
        BLOB_EQ(b.num(), 1);
        BLOB_EQ(b.channels(), 1);
        BLOB_EQ(b.height(), 1);
        BLOB_EQ(b.width(), 1);
        BLOB_EQ(b.offset({}), 0);
        BLOB_EQ(b.offset(0, 0, 0, 0), 0);
        b.mutable_host_data()[0] = make<T>(4);
        BLOB_EQ(b.data_at({}), make<T>(4));
    }
    {  // 1 axis
        const B b{7};
        BLOB_EQ(b.num_axes(), 1);
        BLOB_EQ(b.count(), 7);
        BLOB_EQ(b.shape(0), 7);
        BLOB_EQ(b.shape(-1), 7);
        BLOB_THROWS(IndexError, b.shape(1), "axis 1", "7 (7)");
        BLOB_THROWS(IndexError, b.shape(-2), "axis -2");
        BLOB_EQ(b.count(0), 7);
        BLOB_EQ(b.count(1), 1);
        BLOB_EQ(b.shape_string(), "7 (7)");
        BLOB_EQ(b.num(), 7);
        BLOB_EQ(b.channels(), 1);
        BLOB_EQ(b.height(), 1);
        BLOB_EQ(b.width(), 1);
        BLOB_EQ(b.offset(6), 6);
        BLOB_EQ(b.offset({3}), 3);
    }
    {  // 4 axes
        const B b{2, 3, 4, 5};
        BLOB_EQ(b.count(), 120);
        BLOB_EQ(b.count(0), 120);
        BLOB_EQ(b.count(1), 60);
        BLOB_EQ(b.count(3), 5);
        BLOB_EQ(b.count(4), 1);
        BLOB_EQ(b.count(1, 3), 12);
        BLOB_EQ(b.count(2, 2), 1);
        BLOB_THROWS(IndexError, b.count(3, 2), "[3, 2)");
        BLOB_THROWS(IndexError, b.count(5), "[5, 4)");
        BLOB_THROWS(IndexError, b.count(0, 5), "[0, 5)", "2 3 4 5 (120)");
        BLOB_EQ(b.shape(-1), 5);
        BLOB_EQ(b.shape(-2), 4);
        BLOB_EQ(b.shape(-4), 2);
        BLOB_EQ(b.canonical_axis_index(-1), 3);
        BLOB_EQ(b.canonical_axis_index(-4), 0);
        BLOB_EQ(b.canonical_axis_index(2), 2);
        BLOB_THROWS(IndexError, b.canonical_axis_index(4), "axis 4");
        BLOB_THROWS(IndexError, b.shape(-5), "axis -5", "[-4, 4)");
        BLOB_EQ(b.offset(1, 2, 3, 4), ((1 * 3 + 2) * 4 + 3) * 5 + 4);
        BLOB_EQ(b.offset({1, 2, 3, 4}), 119);
        BLOB_EQ(b.offset({1, 1}), (1 * 3 + 1) * 20);  // missing trailing indices are 0
        BLOB_EQ(b.offset(1), 60);
    }
    {  // 32 axes, the most
        std::vector<std::int64_t> extents(32, 1);
        extents[0] = 2;
        extents[15] = 3;
        extents[31] = 5;
        const B b{std::span<const std::int64_t>(extents)};
        BLOB_EQ(b.num_axes(), 32);
        BLOB_EQ(b.count(), 30);
        BLOB_EQ(b.shape(-1), 5);
        BLOB_EQ(b.shape(-17), 3);
        BLOB_EQ(b.shape(-32), 2);
        BLOB_THROWS(IndexError, b.shape(-33), "axis -33");
        BLOB_THROWS(IndexError, b.shape(32), "axis 32");
        BLOB_EQ(b.count(1), 15);
        BLOB_EQ(b.count(16), 5);
        BLOB_EQ(b.shape_string(), "2 1 1 1 1 1 1 1 1 1 1 1 1 1 1 3 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 5 (30)");
        std::vector<std::int64_t> index(32, 0);
        index[0] = 1;
        index[15] = 2;
        index[31] = 4;
        BLOB_EQ(b.offset(std::span<const std::int64_t>(index)), 1 * 15 + 2 * 5 + 4);
        BLOB_THROWS(ShapeError, b.num(), "at most 4 axes");
        const std::vector<std::int64_t> too_many(33, 0);
        BLOB_THROWS(IndexError, b.offset(std::span<const std::int64_t>(too_many)), "33 indices");
    }
    {  // a blob without a shape counts 0 over its (empty) range of axes
        const B b;
        BLOB_EQ(b.count(0), 0);
        BLOB_EQ(b.count(0, 0), 0);
        BLOB_THROWS(IndexError, b.count(1), "[1, 0)");
        BLOB_THROWS(IndexError, b.shape(0), "axis 0", "(0)");
    }
    verify(checks);
}

TEMPLATE_LIST_TEST_CASE("Blob zero-size shapes", "[blob]", ZipCases) {
    using B = typename TestType::blob;
    using T = typename TestType::element;
    Checks checks;
    B b{2, 0, 3};
    BLOB_EQ(b.has_shape(), true);
    BLOB_EQ(b.count(), 0);
    BLOB_EQ(b.count(2), 3);
    BLOB_EQ(b.capacity(), 0);
    BLOB_EQ(b.shape_string(), "2 0 3 (0)");
    BLOB_TRUE(b.host_data().empty());
    BLOB_TRUE(b.mutable_host_diff().empty());
    b.fill(make<T>(1));
    b.fill_diff(make<T>(1));
    BLOB_TRUE(no_activity(b.data_stats()));
    BLOB_EQ(b.num(), 2);
    BLOB_EQ(b.channels(), 0);
    BLOB_EQ(b.height(), 3);
    BLOB_EQ(b.width(), 1);
    BLOB_THROWS(IndexError, b.offset({0, 0, 0}), "index 0", "axis 1", "2 0 3 (0)");
    BLOB_THROWS(IndexError, b.data_at({0, 0, 0}), "axis 1");
    std::ostringstream os;
    os << b;
    BLOB_EQ(os.str(), "Blob<" + std::string(expected_dtype<T>()) + ">(2 0 3 (0))");
    auto copy = b.clone();
    BLOB_EQ(copy.shape(), b.shape());
    const B one_axis{0};
    BLOB_EQ(one_axis.count(), 0);
    BLOB_EQ(one_axis.shape(-1), 0);
    verify(checks);
}

TEMPLATE_LIST_TEST_CASE("Blob legacy accessors", "[blob]", ZipCases) {
    using B = typename TestType::blob;
    Checks checks;
    {  // one-padding below 4 axes
        const B b2{6, 7};
        BLOB_EQ(b2.num(), 6);
        BLOB_EQ(b2.channels(), 7);
        BLOB_EQ(b2.height(), 1);
        BLOB_EQ(b2.width(), 1);
        BLOB_EQ(b2.offset(5, 6), 5 * 7 + 6);
        BLOB_EQ(b2.offset(5, 6, 0, 0), 41);
        BLOB_THROWS(IndexError, b2.offset(0, 0, 1, 0), "index 1", "axis 2");
        const B b3{2, 3, 4};
        BLOB_EQ(b3.legacy_shape(-1), 4);
        BLOB_EQ(b3.legacy_shape(-3), 2);
        BLOB_EQ(b3.legacy_shape(-4), 1);
        BLOB_EQ(b3.legacy_shape(3), 1);
        BLOB_THROWS(IndexError, b3.legacy_shape(4), "axis 4", "[-4, 4)");
        BLOB_THROWS(IndexError, b3.legacy_shape(-5), "axis -5");
        const B none;
        BLOB_EQ(none.num(), 1);  // Caffe's one-padding, even with no axes
    }
    {  // above 4 axes: ShapeError naming the shape
        const B b{1, 2, 3, 4, 5};
        BLOB_THROWS(ShapeError, b.num(), "1 2 3 4 5 (120)", "at most 4 axes");
        BLOB_THROWS(ShapeError, b.channels(), "1 2 3 4 5 (120)");
        BLOB_THROWS(ShapeError, b.height(), "1 2 3 4 5 (120)");
        BLOB_THROWS(ShapeError, b.width(), "1 2 3 4 5 (120)");
        BLOB_THROWS(ShapeError, b.offset(0, 0, 0, 0), "at most 4 axes");
        BLOB_THROWS(ShapeError, b.data_at(0, 0, 0, 0), "at most 4 axes");
    }
    verify(checks);
}
