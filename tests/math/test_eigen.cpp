// SPDX-License-Identifier: BSD-2-Clause
// syncblob/eigen.hpp: views go through the matching accessor (so heads and copies are right),
// matrix extents are checked, alignment is detected, and half/bfloat16 map bit-identically.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

#include <syncblob/eigen.hpp>
#include <syncblob/sim/device.hpp>

using syncblob::Head;

TEST_CASE("const views read through host_data: a stale host is refreshed and the head becomes synced", "[math]") {
    syncblob::Blob<float, syncblob::Simulated> b({2, 3});
    auto h = b.mutable_host_data();
    for (std::size_t i = 0; i < h.size(); ++i) {
        h[i] = static_cast<float>(i);
    }
    (void)b.mutable_device_data();  // at_device, host stale
    b.reset_stats();
    const auto v = syncblob::data_vector(b);
    CHECK(b.data_head() == Head::synced);
    CHECK(b.data_stats().device_to_host == 1);
    REQUIRE(v.size() == 6);
    CHECK(v(4) == 4.0f);
    const auto m = syncblob::data_matrix(b);
    CHECK(m.rows() == 2);
    CHECK(m.cols() == 3);
    CHECK(m(1, 0) == 3.0f);                     // row-major
    CHECK(b.data_stats().device_to_host == 1);  // already fresh: no second copy
}

TEST_CASE("mutable views write through mutable_host_data: the device copy becomes stale", "[math]") {
    syncblob::Blob<double, syncblob::Simulated> b({4});
    b.fill(1.0);
    b.fill_diff(2.0);
    (void)b.device_data();
    (void)b.device_diff();
    REQUIRE(b.data_head() == Head::synced);
    auto v = syncblob::mutable_data_vector(b);
    v *= 3.0;
    CHECK(b.data_head() == Head::at_host);
    auto d = syncblob::mutable_diff_matrix(b, 2, 2);
    d(1, 1) = 7.0;
    CHECK(b.diff_head() == Head::at_host);
    CHECK(b.diff_at({3}) == 7.0);
    CHECK(b.data_at({2}) == 3.0);
    (void)b.device_data();  // the device sees the write after a copy
    CHECK(b.data_stats().host_to_device == 2);
    const auto dv = syncblob::diff_vector(b);
    CHECK(dv.sum() == 2.0 + 2.0 + 2.0 + 7.0);
}

TEST_CASE("matrix views check their extents against the count", "[math]") {
    syncblob::Blob<float> b({2, 3, 4});
    b.fill(1.0f);
    const auto m = syncblob::data_matrix(b);
    CHECK(m.rows() == 2);
    CHECK(m.cols() == 12);
    CHECK(syncblob::data_matrix(b, 6, 4).cols() == 4);
    CHECK_THROWS_AS(syncblob::data_matrix(b, 5, 5), syncblob::ShapeError);
    CHECK_THROWS_WITH(syncblob::mutable_diff_matrix(b, 5, 5), Catch::Contains("mutable_diff_matrix") &&
                                                                  Catch::Contains("5 x 5") &&
                                                                  Catch::Contains("2 3 4 (24)"));
    CHECK(b.diff_head() == Head::uninitialized);  // a rejected view touches nothing
    syncblob::Blob<float> scalar;
    scalar.reshape(syncblob::Shape{});
    CHECK(syncblob::data_matrix(scalar).rows() == 1);
    CHECK(syncblob::data_matrix(scalar).cols() == 1);
    syncblob::Blob<float> empty({0, 5});
    CHECK(syncblob::data_matrix(empty).size() == 0);
}

TEST_CASE("a matrix view whose rows x cols overflows is refused, not wrapped to the count", "[math]") {
    // 2^32 x 2^32 wraps to 0 in int64 arithmetic, which would match an empty blob's count.
    constexpr std::int64_t big = std::int64_t{1} << 32;
    syncblob::Blob<float> empty({0});
    CHECK_THROWS_WITH(syncblob::data_matrix(empty, big, big),
                      Catch::Contains("data_matrix") && Catch::Contains("4294967296 x 4294967296"));
    CHECK_THROWS_AS(syncblob::mutable_data_matrix(empty, big, big), syncblob::ShapeError);
    CHECK_THROWS_AS(syncblob::diff_matrix(empty, big, big), syncblob::ShapeError);
    CHECK_THROWS_AS(syncblob::mutable_diff_matrix(empty, big, big), syncblob::ShapeError);
    // The same wrap onto a non-zero count: (2^62 + 6) x 4 = 2^64 + 24.
    syncblob::Blob<float> b({24});
    const std::int64_t wraps_to_24 = (std::int64_t{1} << 62) + 6;
    CHECK_THROWS_AS(syncblob::data_matrix(b, wraps_to_24, 4), syncblob::ShapeError);
    CHECK(b.data_head() == Head::uninitialized);
}

TEST_CASE("with_alignment gives an aligned map for owned memory and an unaligned one for borrowed memory", "[math]") {
    syncblob::Blob<float> owned({33});
    owned.fill(1.0f);
    bool aligned = false;
    const float s = syncblob::with_alignment(syncblob::data_vector(owned), [&](const auto& map) {
        using M = std::remove_cvref_t<decltype(map)>;
        aligned = std::is_same_v<M, Eigen::Map<const Eigen::VectorXf, Eigen::Aligned64>>;
        return map.sum();
    });
    CHECK(aligned);
    CHECK(s == 33.0f);

    std::vector<float> storage(64 + 33, 2.0f);
    float* p = storage.data();
    while (syncblob::is_aligned64(p)) {
        ++p;
    }
    syncblob::Blob<float> borrowed({33});
    borrowed.data_buffer()->set_host_data(static_cast<void*>(p), 33 * sizeof(float));
    const float t = syncblob::with_alignment(syncblob::mutable_data_vector(borrowed), [&](auto map) {
        using M = std::remove_cvref_t<decltype(map)>;
        aligned = std::is_same_v<M, Eigen::Map<Eigen::VectorXf, Eigen::Aligned64>>;
        map *= 2.0f;
        return map.sum();
    });
    CHECK_FALSE(aligned);
    CHECK(t == 33 * 4.0f);
    CHECK(p[32] == 4.0f);  // written through the borrow
}

TEMPLATE_TEST_CASE("half and bfloat16 map as Eigen's bit-identical types", "[math]", syncblob::half,
                   syncblob::bfloat16) {
    syncblob::Blob<TestType> b({5});
    const float values[] = {1.5f, -2.25f, 48.5f, 0.0f, -0.0f};
    auto h = b.mutable_host_data();
    for (std::size_t i = 0; i < 5; ++i) {
        h[i] = TestType(values[i]);
    }
    auto v = syncblob::mutable_data_vector(b);
    using E = syncblob::eigen_scalar_t<TestType>;
    static_assert(std::is_same_v<typename decltype(v)::Scalar, E>);
    for (Eigen::Index i = 0; i < 5; ++i) {
        CHECK(static_cast<float>(v(i)) == values[i]);
        std::uint16_t ours = 0, theirs = 0;
        std::memcpy(&ours, &h[static_cast<std::size_t>(i)], 2);
        const E e(values[i]);
        std::memcpy(&theirs, &e, 2);
        CHECK(ours == theirs);
    }
    v(0) = E(3.0f);
    CHECK(static_cast<float>(b.host_data()[0]) == 3.0f);
}
