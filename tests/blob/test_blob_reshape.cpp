// SPDX-License-Identifier: BSD-2-Clause
// Blob: reshape and capacity, reshape_like, reserve, shrink_to_fit, cumulative statistics.

#include <cstdint>
#include <span>
#include <vector>

#include <syncblob/blob.hpp>

#include "blob_test_support.hpp"
#include "checks.hpp"

using namespace blob_test;
using syncblob::Head;
using syncblob::Shape;
using syncblob::ShapeError;
using syncblob::SimulatedDevice;

TEMPLATE_LIST_TEST_CASE("Blob reshape keeps capacity: grows once, shrinks and regrows for free", "[blob]", AllCases) {
    using B = typename TestType::blob;
    using T = typename TestType::element;
    Checks checks;
    B b{4};
    write_pattern(b.mutable_host_data(), 0);
    write_pattern(b.mutable_host_diff(), 10);
    BLOB_EQ(b.data_stats().host_allocations, 1);
    BLOB_EQ(b.diff_stats().host_allocations, 1);

    b.reshape({8});  // grows: new buffers, allocated on first access
    BLOB_EQ(b.count(), 8);
    BLOB_EQ(b.capacity(), 8);
    BLOB_EQ(b.data_stats().host_allocations, 1);
    BLOB_EQ(values(b.host_data()), zeros<T>(8));  // contents are not kept when it reallocates
    (void)b.host_data();
    (void)b.mutable_host_diff();
    (void)b.host_diff();
    BLOB_EQ(b.data_stats().host_allocations, 2);  // once per buffer
    BLOB_EQ(b.diff_stats().host_allocations, 2);

    write_pattern(b.mutable_host_data(), 20);
    write_pattern(b.mutable_host_diff(), 30);
    b.reshape({2, 3});  // shrinks: same buffers, contents kept
    BLOB_EQ(b.count(), 6);
    BLOB_EQ(b.capacity(), 8);
    BLOB_EQ(values(b.host_data()), pattern<T>(6, 20));
    BLOB_EQ(values(b.host_diff()), pattern<T>(6, 30));
    b.reshape(1, 1, 1, 1);
    BLOB_EQ(b.shape_string(), "1 1 1 1 (1)");
    BLOB_EQ(values(b.host_data()), pattern<T>(1, 20));
    const std::vector<std::int64_t> regrow{2, 2, 2};
    b.reshape(std::span<const std::int64_t>(regrow));  // back up to the capacity: nothing allocated
    BLOB_EQ(b.count(), 8);
    BLOB_EQ(b.capacity(), 8);
    BLOB_EQ(values(b.host_data()), pattern<T>(8, 20));
    BLOB_EQ(values(b.host_diff()), pattern<T>(8, 30));
    BLOB_EQ(b.data_stats().host_allocations, 2);
    BLOB_EQ(b.diff_stats().host_allocations, 2);
    BLOB_EQ(b.data_stats().device_allocations, 0);

    b.reshape(Shape{});  // the empty shape is a scalar
    BLOB_EQ(b.count(), 1);
    BLOB_EQ(b.capacity(), 8);

    if constexpr (has_device<typename TestType::allocator>) {  // device-fresh contents are kept in place
        B d{6};
        write_pattern(d.mutable_host_data(), 3);
        (void)d.mutable_device_data();
        d.reset_stats();
        d.reshape({3});
        BLOB_EQ(d.data_head(), Head::at_device);
        BLOB_EQ((device_values<T, SimulatedDevice>(d.device_data(), 3)), pattern<T>(3, 3));
        BLOB_TRUE(no_activity(d.data_stats()));
    }
    verify(checks);
}

TEMPLATE_LIST_TEST_CASE("Blob failed reshape throws ShapeError and changes nothing", "[blob]", AllCases) {
    using B = typename TestType::blob;
    using T = typename TestType::element;
    Checks checks;
    B b{2, 3};
    write_pattern(b.mutable_host_data(), 0);
    write_pattern(b.mutable_host_diff(), 40);
    const auto data_stats = b.data_stats();
    const auto* buffer = b.data_buffer().get();
    auto unchanged = [&] {
        BLOB_EQ(b.shape(), (Shape{2, 3}));
        BLOB_EQ(b.count(), 6);
        BLOB_EQ(b.capacity(), 6);
        BLOB_TRUE(b.data_buffer().get() == buffer);
        BLOB_EQ(values(b.host_data()), pattern<T>(6, 0));
        BLOB_EQ(values(b.host_diff()), pattern<T>(6, 40));
        BLOB_EQ(b.data_stats(), data_stats);
    };
    BLOB_THROWS(ShapeError, b.reshape({2, -3}), "-3", "negative");
    unchanged();
    BLOB_THROWS(ShapeError, b.reshape(4, -1, 1, 1), "-1");
    unchanged();
    BLOB_THROWS(ShapeError, b.reshape({std::int64_t{1} << 40, std::int64_t{1} << 40}), "overflow");
    unchanged();
    const std::vector<std::int64_t> axes33(33, 1);
    BLOB_THROWS(ShapeError, b.reshape(std::span<const std::int64_t>(axes33)), "33 axes");
    unchanged();
    if constexpr (sizeof(T) > 1) {  // a count that fits int64 but not in addressable bytes
        BLOB_THROWS(ShapeError, b.reshape({std::int64_t{1} << 62}), "Blob::reshape", "4611686018427387904");
        unchanged();
        BLOB_THROWS(ShapeError, b.reserve(std::int64_t{1} << 62), "Blob::reserve");
        unchanged();
    }
    BLOB_THROWS(ShapeError, b.reserve(-1), "Blob::reserve", "-1");
    unchanged();
    verify(checks);
}

TEMPLATE_LIST_TEST_CASE("Blob reshape_like, reserve and shrink_to_fit", "[blob]", AllCases) {
    using B = typename TestType::blob;
    using T = typename TestType::element;
    Checks checks;
    {  // reshape_like takes the shape of a blob of any element type and allocator
        B b{5};
        const syncblob::Blob<float> other{2, 2};
        b.reshape_like(other);
        BLOB_EQ(b.shape(), (Shape{2, 2}));
        BLOB_EQ(b.capacity(), 5);
        const syncblob::Blob<std::int8_t, syncblob::Simulated> bigger{3, 3};
        b.reshape_like(bigger);
        BLOB_EQ(b.shape_string(), "3 3 (9)");
        BLOB_EQ(b.capacity(), 9);
        const syncblob::Blob<double> none;
        b.reshape_like(none);
        BLOB_EQ(b.has_shape(), false);
        BLOB_EQ(b.count(), 0);
        BLOB_EQ(b.capacity(), 9);
    }
    {  // reserve grows the capacity, keeps shape and contents
        B b{2, 2};
        write_pattern(b.mutable_host_data(), 0);
        write_pattern(b.mutable_host_diff(), 50);
        b.reserve(10);
        BLOB_EQ(b.capacity(), 10);
        BLOB_EQ(b.shape(), (Shape{2, 2}));
        BLOB_EQ(values(b.host_data()), pattern<T>(4, 0));
        BLOB_EQ(values(b.host_diff()), pattern<T>(4, 50));
        b.reserve(3);
        BLOB_EQ(b.capacity(), 10);
        const auto allocations = b.data_stats().host_allocations;
        BLOB_EQ(allocations, 2);
        b.reshape({10});
        (void)b.host_data();
        BLOB_EQ(b.data_stats().host_allocations, allocations);  // reshaping up to the reserve allocates nothing
        auto expected = pattern<T>(4, 0);
        expected.resize(10, zero_fill_value<T>());  // the reserved tail reads as zeros, like any first access
        BLOB_EQ(values(b.host_data()), expected);

        B empty;
        empty.reserve(5);
        BLOB_EQ(empty.capacity(), 5);
        BLOB_EQ(empty.has_shape(), false);
        empty.reshape({5});
        BLOB_EQ(empty.capacity(), 5);
    }
    {  // shrink_to_fit drops the spare capacity and keeps contents
        B b{10};
        write_pattern(b.mutable_host_data(), 0);
        write_pattern(b.mutable_host_diff(), 50);
        b.reshape({3});
        BLOB_EQ(b.capacity(), 10);
        b.shrink_to_fit();
        BLOB_EQ(b.capacity(), 3);
        BLOB_EQ(values(b.host_data()), pattern<T>(3, 0));
        BLOB_EQ(values(b.host_diff()), pattern<T>(3, 50));
        const auto before = b.data_stats();
        b.shrink_to_fit();  // already tight
        BLOB_EQ(b.data_stats(), before);
    }
    if constexpr (has_device<typename TestType::allocator>) {  // device-fresh contents move device to device
        B b{8};
        write_pattern(b.mutable_host_data(), 5);
        (void)b.mutable_device_data();
        b.reshape({4});
        b.reset_stats();
        b.shrink_to_fit();
        BLOB_EQ(b.capacity(), 4);
        BLOB_EQ(b.data_stats().device_to_device, 1);
        BLOB_EQ(b.data_stats().transfers(), 0);
        BLOB_EQ((device_values<T, SimulatedDevice>(b.device_data(), 4)), pattern<T>(4, 5));
        b.reserve(12);
        BLOB_EQ(b.data_stats().device_to_device, 2);
        BLOB_EQ(b.data_stats().transfers(), 0);
        BLOB_EQ((device_values<T, SimulatedDevice>(b.device_data(), 4)), pattern<T>(4, 5));
    }
    verify(checks);
}

// The counts of replaced buffers live out of line, made only when a replaced buffer had counted
// something: inline they were two TransferStats (192 bytes) in every blob, 320 bytes in all, and
// an arena of a million one-element blobs paid them a million times.
TEST_CASE("a blob keeps the counts of replaced buffers out of line", "[blob][memory]") {
    STATIC_REQUIRE(sizeof(syncblob::Blob<float>) <= 160);
    syncblob::Blob<float> b{2};
    (void)b.mutable_host_data();
    b.reshape({4});  // the old buffer's allocation is retired
    CHECK(b.data_stats().host_allocations == 1);
    CHECK(b.diff_stats().host_allocations == 0);
}

TEMPLATE_LIST_TEST_CASE("Blob data_stats and diff_stats are cumulative across reallocations", "[blob]", AllCases) {
    using B = typename TestType::blob;
    Checks checks;
    B b{4};
    (void)b.mutable_host_data();
    b.reshape({8});
    (void)b.mutable_host_data();
    b.reshape({16});
    (void)b.host_data();
    (void)b.host_diff();
    BLOB_EQ(b.data_stats().host_allocations, 3);
    BLOB_EQ(b.diff_stats().host_allocations, 1);
    b.reshape({2});
    b.shrink_to_fit();
    (void)b.host_diff();
    BLOB_EQ(b.data_stats().host_allocations, 4);
    BLOB_EQ(b.data_stats().host_to_host, 1);  // shrink_to_fit copied the 2 fresh elements
    BLOB_EQ(b.diff_stats().host_allocations, 2);
    BLOB_EQ(b.diff_stats().host_to_host, 1);
    B moved = std::move(b);  // the history moves with the blob
    BLOB_EQ(moved.data_stats().host_allocations, 4);
    if constexpr (has_device<typename TestType::allocator>) {
        (void)moved.mutable_device_data();
        moved.reshape({32});
        (void)moved.device_data();
        BLOB_EQ(moved.data_stats().device_allocations, 2);
        BLOB_EQ(moved.data_stats().host_to_device, 1);
    }
    moved.reset_stats();
    BLOB_TRUE(no_activity(moved.data_stats()));
    BLOB_TRUE(no_activity(moved.diff_stats()));
    verify(checks);
}
