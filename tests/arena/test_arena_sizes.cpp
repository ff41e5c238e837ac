// SPDX-License-Identifier: BSD-2-Clause
// ParameterArena with blobs whose sizes are legal one by one but not together: seal refuses the
// layout before any offset wraps round or anything is allocated, and count() stays defined.

#include <catch2/catch.hpp>

#include <cstdint>

#include <syncblob/arena.hpp>

#include "complexity.hpp"

using syncblob::ParameterArena;

TEST_CASE("ParameterArena::seal refuses blobs whose slices together pass the addressable size", "[arena][hostile]") {
    // Four blobs of 2^62 bytes: offsets 0, 2^62, 2^63, 3 * 2^62, then 2^64, which wrapped to 0, and
    // the arena was sealed over 512 bytes with slices far outside them.
    ParameterArena<std::uint8_t> arena;
    for (int i = 0; i < 4; ++i) {
        arena.add({std::int64_t{1} << 62});
    }
    arena.add({256});
    CHECK_THROWS_AS(arena.seal(), syncblob::ShapeError);
    CHECK_THROWS_WITH(arena.seal(),
                      Catch::Contains("ParameterArena::seal: blob 1 (4611686018427387904 (4611686018427387904), "
                                      "4611686018427387904 bytes) at offset 4611686018427387904"));
    CHECK_FALSE(arena.sealed());
    CHECK(arena.bytes() == 0);
    CHECK(arena.count() == INT64_MAX);  // the sum stops there instead of overflowing
}

TEST_CASE("ParameterArena::seal refuses a blob grown before seal past what the arena can hold", "[arena][hostile]") {
    ParameterArena<double> arena;
    arena.add({3});
    auto& big = arena.add({2});
    big.reshape({std::int64_t{1} << 59});  // 2^62 bytes: a legal blob, reshaped before seal
    auto& bigger = arena.add({1});
    bigger.reshape({std::int64_t{1} << 59});
    CHECK_THROWS_AS(arena.seal(), syncblob::ShapeError);
    CHECK_FALSE(arena.sealed());
    CHECK(arena.count() == 3 + (std::int64_t{1} << 60));
}

TEST_CASE("an arena of many blobs is built, sealed, viewed and bucketed in time linear in their count",
          "[arena][complexity]") {
    const auto build = [](std::size_t n) {
        ParameterArena<float> arena;
        for (std::size_t i = 0; i < n; ++i) {
            arena.add({1});
        }
        arena.seal();
        REQUIRE(arena.flat_data().fresh_on_host());  // a view of every blob, checked
        REQUIRE(arena.flat_diff().elements() >= n);
        REQUIRE(arena.buckets(1024).size() >= n / 4);
    };
    CHECK(test::tenfold_growth(build, 2000) < test::linear_bound);
}
