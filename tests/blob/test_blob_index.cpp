// SPDX-License-Identifier: BSD-2-Clause
// Blob: checked offsets and element reads, and a blob of more than INT_MAX elements.

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

TEMPLATE_LIST_TEST_CASE("Blob offsets are checked and IndexError names axis, index and shape", "[blob]", ZipCases) {
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
