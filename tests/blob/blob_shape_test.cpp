// SPDX-License-Identifier: BSD-2-Clause
// Blob: constructors, shape queries, legacy accessors, offsets, checked element reads.

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
        BLOB_EQ(values(b.host_data()), std::vector<double>(6, 0.0));
        BLOB_EQ(values(b.host_diff()), std::vector<double>(6, 0.0));
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

TEMPLATE_LIST_TEST_CASE("Blob shape queries on 0-, 1-, 4- and 32-axis shapes", "[blob]", AllCases) {
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

TEMPLATE_LIST_TEST_CASE("Blob zero-size shapes", "[blob]", AllCases) {
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

TEMPLATE_LIST_TEST_CASE("Blob legacy accessors", "[blob]", AllCases) {
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

TEMPLATE_LIST_TEST_CASE("Blob offsets are checked; IndexError names axis, index and shape", "[blob]", AllCases) {
    using B = typename TestType::blob;
    Checks checks;
    const B b{2, 3, 10};
    BLOB_THROWS_EXACT(IndexError, b.offset({1, 2, 12}),
                      "Blob::offset: index 12 out of range [0, 10) on axis 2 of shape 2 3 10 (60)");
    BLOB_THROWS_EXACT(IndexError, b.offset(1, 3, 0, 0),
                      "Blob::offset: index 3 out of range [0, 3) on axis 1 of shape 2 3 10 (60)");
    BLOB_THROWS(IndexError, b.offset(-1), "index -1", "axis 0", "2 3 10 (60)");
    BLOB_THROWS(IndexError, b.offset(0, 0, 10, 0), "index 10", "axis 2");
    BLOB_THROWS(IndexError, b.offset(0, 0, 0, 1), "index 1", "axis 3", "[0, 1)");
    BLOB_THROWS(IndexError, b.offset({0, 0, 0, 0}), "4 indices", "2 3 10 (60)");
    BLOB_THROWS(IndexError, b.offset({0, -1}), "index -1", "axis 1");
    BLOB_THROWS(IndexError, b.shape(3), "axis 3", "2 3 10 (60)");
    BLOB_THROWS(IndexError, b.shape(-4), "axis -4", "[-3, 3)");
    BLOB_EQ(b.offset({1, 2, 9}), 59);
    BLOB_EQ(b.offset({0, 1}), 10);
    verify(checks);
}

TEMPLATE_LIST_TEST_CASE("Blob data_at and diff_at are checked element reads", "[blob]", AllCases) {
    using B = typename TestType::blob;
    using T = typename TestType::element;
    Checks checks;
    B b{2, 3, 2, 2};
    write_pattern(b.mutable_host_data(), 0);
    write_pattern(b.mutable_host_diff(), 50);
    for (std::int64_t n = 0; n < 2; ++n) {
        for (std::int64_t c = 0; c < 3; ++c) {
            const std::int64_t at = ((n * 3 + c) * 2 + 1) * 2 + 1;
            BLOB_EQ(b.data_at({n, c, 1, 1}), make<T>(at));
            BLOB_EQ(b.data_at(n, c, 1, 1), make<T>(at));
            BLOB_EQ(b.diff_at({n, c, 1, 1}), make<T>(50 + at));
            BLOB_EQ(b.diff_at(n, c, 1, 1), make<T>(50 + at));
        }
    }
    BLOB_THROWS(IndexError, b.data_at({2, 0, 0, 0}), "index 2", "axis 0", "2 3 2 2 (24)");
    BLOB_THROWS(IndexError, b.diff_at({0, 0}), "Blob::diff_at", "2 indices");
    BLOB_THROWS(IndexError, b.data_at({0, 0, 0, 0, 0}), "Blob::data_at", "5 indices");
    BLOB_THROWS(IndexError, b.diff_at(0, 0, 0, 2), "index 2", "axis 3");
    const B empty;
    BLOB_THROWS(IndexError, empty.data_at({}), "no shape");
    BLOB_THROWS(IndexError, empty.diff_at(0, 0, 0, 0), "no shape");
    if constexpr (has_device<typename TestType::allocator>) {
        B d{4};
        write_pattern(d.mutable_host_data(), 7);
        (void)d.mutable_device_data();  // device fresh, host stale
        d.reset_stats();
        BLOB_EQ(d.data_at({3}), make<T>(10));
        BLOB_EQ(d.data_stats().device_to_host, 1);  // the read synchronised data to the host
        BLOB_EQ(d.data_head(), Head::synced);
    }
    verify(checks);
}

TEMPLATE_LIST_TEST_CASE("Blob with more than INT_MAX elements: shape only, nothing allocated", "[blob]", AllCases) {
    using B = typename TestType::blob;
    Checks checks;
    const std::int64_t extent = std::int64_t{1} << 16;
    const B b{extent, extent, 3};
    const std::int64_t expected = 65536LL * 65536LL * 3LL;
    BLOB_TRUE(expected > INT_MAX);
    BLOB_EQ(b.count(), expected);
    BLOB_EQ(b.capacity(), expected);
    BLOB_EQ(b.count(1), 65536LL * 3LL);
    BLOB_EQ(b.shape_string(), "65536 65536 3 (12884901888)");
    BLOB_EQ(b.offset({65535, 65535, 2}), expected - 1);
    BLOB_EQ(b.num(), 65536);
    BLOB_TRUE(no_activity(b.data_stats()));
    BLOB_TRUE(no_activity(b.diff_stats()));
    BLOB_EQ(b.data_head(), Head::uninitialized);
    B reshaped;
    reshaped.reshape({3, extent, extent});
    BLOB_EQ(reshaped.count(), expected);
    BLOB_TRUE(no_activity(reshaped.data_stats()));
    verify(checks);
}
