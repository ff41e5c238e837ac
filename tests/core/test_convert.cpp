// SPDX-License-Identifier: BSD-2-Clause
// The one element conversion (core/convert.hpp) into the types narrower than float: a double
// or a 64-bit integer rounds once, from its own value, to the nearest value of the type. Before,
// such a value was rounded to float first, and a value just above (or below) a midpoint of the
// narrow type could land on the midpoint and then round to even, the wrong way: 1 + 2^-11 + 2^-40
// became half 1.0 (0x3C00) instead of 0x3C01, I32 2^30 + 2^22 + 1 became bfloat16 2^30 (0x4E80).

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>

#include <syncblob/core/convert.hpp>

namespace {

using syncblob::detail::convert_checked;

/// For every pair of neighbouring positive finite values a < b of T (by bit pattern), the doubles a
/// tiny step above and below their midpoint must round to b and to a (and the midpoint itself to the
/// even one), whatever float would make of them.
template <class T, class Bits>
void check_midpoints(Bits last_finite) {
    for (Bits bits = 1; bits < last_finite; ++bits) {
        const T a = T::from_bits(bits);
        const T b = T::from_bits(static_cast<Bits>(bits + 1));
        const double va = static_cast<double>(static_cast<float>(a));
        const double vb = static_cast<double>(static_cast<float>(b));
        const double mid = (va + vb) / 2;  // exact: both have few significant bits
        const double tiny = (vb - va) * 0x1p-30;
        INFO("between bit patterns " << bits << " and " << bits + 1);
        REQUIRE(convert_checked<T>(mid + tiny).value.bits == b.bits);
        REQUIRE(convert_checked<T>(mid - tiny).value.bits == a.bits);
        REQUIRE(convert_checked<T>(mid).value.bits == ((bits & 1u) == 0 ? a.bits : b.bits));
        REQUIRE(convert_checked<T>(-(mid + tiny)).value.bits == T(-static_cast<float>(b)).bits);
    }
}

}  // namespace

TEST_CASE("a double rounds once into half, bfloat16 and the 8-bit floats", "[core][convert]") {
    check_midpoints<syncblob::half>(std::uint16_t{0x7BFF});
    check_midpoints<syncblob::bfloat16>(std::uint16_t{0x7F7F});
    check_midpoints<syncblob::float8_e4m3fn>(std::uint8_t{0x7E});
    check_midpoints<syncblob::float8_e5m2>(std::uint8_t{0x7B});
    CHECK(convert_checked<syncblob::half>(1.0 + 0x1p-11 + 0x1p-40).value.bits == 0x3C01);
}

TEST_CASE("a 32- or 64-bit integer rounds once into bfloat16 and half", "[core][convert]") {
    // 2^30 + 2^22 is the midpoint of bfloat16's 2^30 (0x4E80) and 2^30 + 2^23 (0x4E81); float holds it
    CHECK(convert_checked<syncblob::bfloat16>(std::int32_t{(1 << 30) + (1 << 22) + 1}).value.bits == 0x4E81);
    CHECK(convert_checked<syncblob::bfloat16>(std::int32_t{(1 << 30) + (1 << 22) - 1}).value.bits == 0x4E80);
    CHECK(convert_checked<syncblob::bfloat16>(std::int32_t{(1 << 30) + (1 << 22)}).value.bits == 0x4E80);  // even
    CHECK(convert_checked<syncblob::bfloat16>(-std::int64_t{(1LL << 62) + (1LL << 54) + 1}).value.bits == 0xDE81);
    CHECK(convert_checked<syncblob::bfloat16>(std::uint64_t{(1ULL << 63) + (1ULL << 55) + 1}).value.bits == 0x5F01);
    // half: 65504 is its largest finite value; 65520 the midpoint to the next binade (infinity)
    CHECK(convert_checked<syncblob::half>(std::int64_t{65519}).value.bits == 0x7BFF);
    CHECK(convert_checked<syncblob::half>(std::int64_t{65519}).exact);
    CHECK_FALSE(convert_checked<syncblob::half>(std::int64_t{65520}).exact);  // rounds to infinity: overflows
    CHECK(convert_checked<syncblob::half>(std::int64_t{65520}).value.bits == 0x7BFF);
}

TEST_CASE("the 8-bit floats in the conversion table", "[core][convert]") {
    using syncblob::float8_e4m3fn;
    using syncblob::float8_e5m2;
    using syncblob::float8_e8m0fnu;
    const double inf = std::numeric_limits<double>::infinity();
    // into them: finite values beyond the range and infinities they lack are not exact, and saturate
    CHECK(convert_checked<float8_e4m3fn>(448.0).exact);
    CHECK_FALSE(convert_checked<float8_e4m3fn>(465.0).exact);
    CHECK(convert_checked<float8_e4m3fn>(-465.0).value.bits == 0xFE);
    CHECK_FALSE(convert_checked<float8_e4m3fn>(inf).exact);
    CHECK(convert_checked<float8_e4m3fn>(inf).value.bits == 0x7E);
    CHECK(convert_checked<float8_e5m2>(inf).exact);
    CHECK(convert_checked<float8_e5m2>(inf).value.bits == 0x7C);
    CHECK(std::isnan(static_cast<float>(convert_checked<float8_e4m3fn>(std::nan("")).value)));
    CHECK(convert_checked<float8_e4m3fn>(std::nan("")).exact);
    CHECK_FALSE(convert_checked<float8_e8m0fnu>(0.0).exact);
    CHECK(convert_checked<float8_e8m0fnu>(-2.0).value.bits == 0x00);  // positive only: its least, 2^-127
    CHECK(convert_checked<float8_e8m0fnu>(std::int32_t{1024}).value.bits == 127 + 10);
    CHECK(convert_checked<float8_e8m0fnu>(std::int32_t{1024}).exact);
    // out of them: exact into float; into integers by the integer rules
    CHECK(convert_checked<float>(float8_e5m2::from_bits(0x7B)).value == 57344.0f);
    CHECK(convert_checked<std::int16_t>(float8_e5m2::from_bits(0x7B)).value == 32767);
    CHECK_FALSE(convert_checked<std::int16_t>(float8_e5m2::from_bits(0x7B)).exact);
    CHECK(convert_checked<std::int32_t>(float8_e4m3fn::from_bits(0xB9)).value == -1);  // -1.125 truncated
    CHECK(convert_checked<bool>(float8_e8m0fnu::from_bits(0)).value);
    CHECK(convert_checked<syncblob::half>(float8_e8m0fnu::from_bits(0xFE)).value.bits == 0x7BFF);  // 2^127
    CHECK_FALSE(convert_checked<syncblob::half>(float8_e8m0fnu::from_bits(0xFE)).exact);
}
