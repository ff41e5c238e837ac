// SPDX-License-Identifier: BSD-2-Clause
// The OCP 8-bit floats against references written here from the specifications (OFP8 rev 1.0 for
// E4M3 and E5M2, OCP MX v1.0 for E8M0): the value of every one of the 256 patterns of each format,
// and float -> 8-bit conversion, in both modes, over a dense sweep of the floats, the midpoints
// between neighbouring 8-bit values and the special values, checked against a rounding that searches
// the format's values for the nearest one. The test tagged [exhaustive] (hidden; run it with
// `test_core "[exhaustive]"`) does the same for every one of the 2^32 floats.

#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <syncblob/core/float8.hpp>

namespace {

using syncblob::Saturation;

enum class Kind { e4m3fn, e5m2, e8m0fnu };

const char* name_of(Kind k) {
    return k == Kind::e4m3fn ? "E4M3FN" : k == Kind::e5m2 ? "E5M2" : "E8M0FNU";
}

constexpr long double inf = std::numeric_limits<long double>::infinity();
constexpr long double nan = std::numeric_limits<long double>::quiet_NaN();

// ---- the specifications' definitions ----------------------------------------------------------------

/// The value of an 8-bit pattern, from the format's definition.
long double spec_value(Kind k, unsigned b) {
    if (k == Kind::e8m0fnu) {  // 2^(E - 127), E = 0 … 254; 255 is NaN
        return b == 0xFF ? nan : std::ldexp(1.0L, static_cast<int>(b) - 127);
    }
    const bool negative = (b & 0x80u) != 0;
    long double magnitude = 0;
    if (k == Kind::e4m3fn) {  // S.EEEE.MMM, bias 7; S.1111.111 is NaN; no infinity
        const unsigned e = (b >> 3) & 0xFu;
        const unsigned m = b & 0x7u;
        if (e == 15 && m == 7) {
            return nan;
        }
        magnitude = e == 0 ? std::ldexp(static_cast<long double>(m), -9)
                           : std::ldexp(static_cast<long double>(8 + m), static_cast<int>(e) - 10);
    } else {  // S.EEEEE.MM, bias 15; S.11111.00 is infinity, S.11111.{01,10,11} NaN
        const unsigned e = (b >> 2) & 0x1Fu;
        const unsigned m = b & 0x3u;
        if (e == 31) {
            if (m != 0) {
                return nan;
            }
            magnitude = inf;
        } else {
            magnitude = e == 0 ? std::ldexp(static_cast<long double>(m), -16)
                               : std::ldexp(static_cast<long double>(4 + m), static_cast<int>(e) - 17);
        }
    }
    return negative ? -magnitude : magnitude;
}

float to_float(Kind k, std::uint8_t b) {
    switch (k) {
        case Kind::e4m3fn:
            return static_cast<float>(syncblob::float8_e4m3fn::from_bits(b));
        case Kind::e5m2:
            return static_cast<float>(syncblob::float8_e5m2::from_bits(b));
        case Kind::e8m0fnu:
            break;
    }
    return static_cast<float>(syncblob::float8_e8m0fnu::from_bits(b));
}

std::uint8_t from_float(Kind k, float x, Saturation mode) {
    switch (k) {
        case Kind::e4m3fn:
            return syncblob::float8_e4m3fn(x, mode).bits;
        case Kind::e5m2:
            return syncblob::float8_e5m2(x, mode).bits;
        case Kind::e8m0fnu:
            break;
    }
    return syncblob::float8_e8m0fnu(x, mode).bits;
}

/// The non-negative finite values of a format in increasing order, each with its code; then, past
/// the largest, the value the next code would have (the first value that is an overflow).
struct Grid {
    std::vector<long double> values;
    std::vector<unsigned> codes;
};

Grid grid_of(Kind k) {
    Grid g;
    for (unsigned b = 0; b < 0x80u || (k == Kind::e8m0fnu && b < 0xFFu); ++b) {
        const long double v = spec_value(k, b);
        if (std::isfinite(v)) {
            g.values.push_back(v);
            g.codes.push_back(b);
        }
    }
    // one step past the largest finite value: its code's successor (480 = S.1111.111 for E4M3FN,
    // 65536 = S.11111.00 for E5M2, 2^128 for E8M0FNU)
    const long double top = g.values.back();
    const long double step = top - g.values[g.values.size() - 2];
    g.values.push_back(k == Kind::e8m0fnu ? 2 * top : top + step);
    g.codes.push_back(g.codes.back() + 1);
    return g;
}

/// The expected result of converting `x` (a float, as long double) by the specifications: to
/// nearest (ties to the even code; E8M0FNU's to the larger power), then the mode's rule for what
/// the format cannot hold. `i` is the index of the first grid value not below |x| (grid size when
/// none is). Returns the code; for a NaN result any NaN pattern of the right sign passes (`matches`).
unsigned expected_at(Kind k, const Grid& g, long double x, std::size_t i, Saturation mode) {
    const bool saturate = mode == Saturation::on;
    const unsigned max_code = g.codes[g.codes.size() - 2];
    const unsigned nan_code = k == Kind::e4m3fn ? 0x7F : k == Kind::e5m2 ? 0x7E : 0xFF;
    const unsigned overflow = saturate ? max_code : (k == Kind::e5m2 ? 0x7Cu : nan_code);
    if (k == Kind::e8m0fnu) {
        if (std::isnan(x)) {
            return 0xFF;
        }
        if (x <= 0) {  // zero and negative values: below the (positive) range
            return saturate ? 0x00 : 0xFF;
        }
    }
    const unsigned sign = k != Kind::e8m0fnu && std::signbit(x) ? 0x80u : 0u;
    if (std::isnan(x)) {
        return sign | nan_code;
    }
    const long double a = std::fabs(x);
    unsigned code = 0;
    if (std::isinf(a) || i == g.values.size()) {
        code = g.codes.back();  // beyond even the overflow value
    } else if (g.values[i] == a || i == 0) {
        code = g.codes[i];
    } else {
        const long double below = a - g.values[i - 1];
        const long double above = g.values[i] - a;
        if (below < above) {
            code = g.codes[i - 1];
        } else if (above < below) {
            code = g.codes[i];
        } else if (k == Kind::e8m0fnu) {
            code = g.codes[i];  // a tie between powers of two goes up
        } else {
            code = (g.codes[i - 1] & 1u) == 0 ? g.codes[i - 1] : g.codes[i];
        }
    }
    return code > max_code ? sign | overflow : sign | code;
}

unsigned expected_code(Kind k, const Grid& g, long double x, Saturation mode) {
    const long double a = std::fabs(x);
    const auto i = std::isnan(a) ? 0 : std::lower_bound(g.values.begin(), g.values.end(), a) - g.values.begin();
    return expected_at(k, g, x, static_cast<std::size_t>(i), mode);
}

bool is_nan_code(Kind k, unsigned b) {
    return std::isnan(spec_value(k, b));
}

/// The library's code for x matches the expected one (any NaN of the expected sign for a NaN).
bool matches(Kind k, unsigned got, unsigned want) {
    if (is_nan_code(k, want)) {
        return is_nan_code(k, got) && (got & 0x80u) == (want & 0x80u);
    }
    return got == want;
}

/// Floats to try: a sweep of every 2^`stride_log2`-th bit pattern, both signs; every midpoint
/// between neighbouring 8-bit values and the floats one and two steps either side of it; the
/// special values.
std::vector<float> probe_floats(const Grid& g, int stride_log2) {
    std::vector<float> out;
    for (std::uint64_t u = 0; u <= 0x7F800000u; u += std::uint64_t{1} << stride_log2) {
        const auto f = std::bit_cast<float>(static_cast<std::uint32_t>(u));
        out.push_back(f);
        out.push_back(-f);
    }
    for (std::size_t i = 0; i + 1 < g.values.size(); ++i) {
        const auto mid = static_cast<float>((g.values[i] + g.values[i + 1]) / 2);  // exact: a float
        REQUIRE(static_cast<long double>(mid) == (g.values[i] + g.values[i + 1]) / 2);
        float below = mid;
        float above = mid;
        out.push_back(mid);
        for (int step = 0; step < 2; ++step) {
            below = std::nextafter(below, 0.0f);
            above = std::nextafter(above, std::numeric_limits<float>::infinity());
            out.insert(out.end(), {below, above, -below, -above, -mid});
        }
    }
    constexpr float fmax = std::numeric_limits<float>::max();
    out.insert(out.end(),
               {0.0f, -0.0f, fmax, -fmax, std::numeric_limits<float>::min(), std::numeric_limits<float>::denorm_min(),
                -std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::infinity(),
                -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                -std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::signaling_NaN(),
                std::bit_cast<float>(0x7F800001u), std::bit_cast<float>(0xFFFFFFFFu), 1.0f, -1.0f});
    return out;
}

void check_float(Kind k, const Grid& g, float x) {
    for (const Saturation mode : {Saturation::off, Saturation::on}) {
        const unsigned want = expected_code(k, g, static_cast<long double>(x), mode);
        const unsigned got = from_float(k, x, mode);
        if (!matches(k, got, want)) {
            FAIL(name_of(k) << (mode == Saturation::on ? " saturating" : "") << " of float " << x << " (bits 0x"
                            << std::hex << std::bit_cast<std::uint32_t>(x) << "): got 0x" << got << ", expected 0x"
                            << want);
        }
    }
}

constexpr Kind all_kinds[] = {Kind::e4m3fn, Kind::e5m2, Kind::e8m0fnu};

}  // namespace

TEST_CASE("every 8-bit pattern converts to the float the specification gives", "[core][float8]") {
    for (const Kind k : all_kinds) {
        for (unsigned b = 0; b < 256; ++b) {
            INFO(name_of(k) << " pattern 0x" << std::hex << b);
            const long double want = spec_value(k, b);
            const float got = to_float(k, static_cast<std::uint8_t>(b));
            if (std::isnan(want)) {
                REQUIRE(std::isnan(got));
            } else {
                REQUIRE(static_cast<long double>(got) == want);
                REQUIRE(std::signbit(got) == std::signbit(want));
            }
        }
    }
}

TEST_CASE("the specifications' table rows", "[core][float8]") {
    using syncblob::float8_e4m3fn;
    using syncblob::float8_e5m2;
    using syncblob::float8_e8m0fnu;
    // OFP8 table 1, E4M3: max normal S.1111.110 = ±448, min normal S.0001.000 = 2^-6, max subnormal
    // S.0000.111 = 0.875 × 2^-6, min subnormal S.0000.001 = 2^-9, NaN S.1111.111, zeros S.0000.000
    CHECK(static_cast<float>(float8_e4m3fn::from_bits(0x7E)) == 448.0f);
    CHECK(static_cast<float>(float8_e4m3fn::from_bits(0xFE)) == -448.0f);
    CHECK(static_cast<float>(float8_e4m3fn::from_bits(0x08)) == 0x1p-6f);
    CHECK(static_cast<float>(float8_e4m3fn::from_bits(0x07)) == 0.875f * 0x1p-6f);
    CHECK(static_cast<float>(float8_e4m3fn::from_bits(0x01)) == 0x1p-9f);
    CHECK(std::isnan(static_cast<float>(float8_e4m3fn::from_bits(0x7F))));
    CHECK(std::isnan(static_cast<float>(float8_e4m3fn::from_bits(0xFF))));
    CHECK(std::signbit(static_cast<float>(float8_e4m3fn::from_bits(0x80))));
    CHECK(static_cast<float>(float8_e4m3fn::from_bits(0x38)) == 1.0f);
    // E5M2: max normal S.11110.11 = ±57344, min normal S.00001.00 = 2^-14, max subnormal
    // S.00000.11 = 0.75 × 2^-14, min subnormal S.00000.01 = 2^-16, infinities S.11111.00, NaN S.11111.{01,10,11}
    CHECK(static_cast<float>(float8_e5m2::from_bits(0x7B)) == 57344.0f);
    CHECK(static_cast<float>(float8_e5m2::from_bits(0x04)) == 0x1p-14f);
    CHECK(static_cast<float>(float8_e5m2::from_bits(0x03)) == 0.75f * 0x1p-14f);
    CHECK(static_cast<float>(float8_e5m2::from_bits(0x01)) == 0x1p-16f);
    CHECK(static_cast<float>(float8_e5m2::from_bits(0x7C)) == std::numeric_limits<float>::infinity());
    CHECK(static_cast<float>(float8_e5m2::from_bits(0xFC)) == -std::numeric_limits<float>::infinity());
    for (const unsigned b : {0x7Du, 0x7Eu, 0x7Fu, 0xFDu, 0xFEu, 0xFFu}) {
        CHECK(std::isnan(static_cast<float>(float8_e5m2::from_bits(static_cast<std::uint8_t>(b)))));
    }
    CHECK(static_cast<float>(float8_e5m2::from_bits(0x3C)) == 1.0f);
    // E8M0: 2^(E - 127), 0x00 = 2^-127, 0x7F = 1, 0xFE = 2^127, 0xFF NaN
    CHECK(static_cast<float>(float8_e8m0fnu::from_bits(0x00)) == 0x1p-127f);
    CHECK(static_cast<float>(float8_e8m0fnu::from_bits(0x7F)) == 1.0f);
    CHECK(static_cast<float>(float8_e8m0fnu::from_bits(0xFE)) == 0x1p127f);
    CHECK(std::isnan(static_cast<float>(float8_e8m0fnu::from_bits(0xFF))));
}

TEST_CASE("float to 8 bits rounds to nearest even and follows the mode past the range", "[core][float8]") {
    using syncblob::float8_e4m3fn;
    using syncblob::float8_e5m2;
    using syncblob::float8_e8m0fnu;
    constexpr float finf = std::numeric_limits<float>::infinity();
    // E4M3FN: 464 is the tie between 448 (S.1111.110, even) and the NaN slot: it rounds to 448; past it,
    // NaN (non-saturating) or 448 (saturating); infinity likewise
    CHECK(float8_e4m3fn(464.0f).bits == 0x7E);
    CHECK(float8_e4m3fn(464.0001f).bits == 0x7F);
    CHECK(float8_e4m3fn(-500.0f).bits == 0xFF);
    CHECK(float8_e4m3fn(-500.0f, Saturation::on).bits == 0xFE);
    CHECK(float8_e4m3fn(finf).bits == 0x7F);
    CHECK(float8_e4m3fn(finf, Saturation::on).bits == 0x7E);
    CHECK(float8_e4m3fn(-finf, Saturation::on).bits == 0xFE);
    CHECK(float8_e4m3fn(1.0625f).bits == 0x38);   // tie between 1 (even) and 1.125
    CHECK(float8_e4m3fn(1.1875f).bits == 0x3A);   // tie between 1.125 and 1.25 (even)
    CHECK(float8_e4m3fn(0x1p-10f).bits == 0x00);  // half the least subnormal: to the even zero
    CHECK(float8_e4m3fn(0x1.8p-10f).bits == 0x01);
    CHECK(float8_e4m3fn(-0.0f).bits == 0x80);
    // E5M2: 61440 is the tie between 57344 (odd) and infinity: it overflows
    CHECK(float8_e5m2(61439.996f).bits == 0x7B);
    CHECK(float8_e5m2(61440.0f).bits == 0x7C);
    CHECK(float8_e5m2(61440.0f, Saturation::on).bits == 0x7B);
    CHECK(float8_e5m2(-finf).bits == 0xFC);
    CHECK(float8_e5m2(-finf, Saturation::on).bits == 0xFB);
    CHECK(std::isnan(static_cast<float>(float8_e5m2(std::numeric_limits<float>::quiet_NaN(), Saturation::on))));
    // E8M0FNU: to the nearest power of two, a tie up; zero and negative values and overflow are NaN
    // unless saturating
    CHECK(float8_e8m0fnu(1.4999999f).bits == 0x7F);
    CHECK(float8_e8m0fnu(1.5f).bits == 0x80);
    CHECK(float8_e8m0fnu(0.0f).bits == 0xFF);
    CHECK(float8_e8m0fnu(0.0f, Saturation::on).bits == 0x00);
    CHECK(float8_e8m0fnu(-4.0f).bits == 0xFF);
    CHECK(float8_e8m0fnu(-4.0f, Saturation::on).bits == 0x00);
    CHECK(float8_e8m0fnu(std::numeric_limits<float>::denorm_min()).bits == 0x00);
    CHECK(float8_e8m0fnu(0x1.8p127f).bits == 0xFF);
    CHECK(float8_e8m0fnu(0x1.8p127f, Saturation::on).bits == 0xFE);
    CHECK(float8_e8m0fnu(finf, Saturation::on).bits == 0xFE);
}

TEST_CASE("float to 8 bits over a dense sweep of the floats, the midpoints and the special values", "[core][float8]") {
    for (const Kind k : all_kinds) {
        const Grid g = grid_of(k);
        const std::vector<float> probes = probe_floats(g, 12);
        INFO(name_of(k) << ": " << probes.size() << " floats");
        for (const float x : probes) {
            check_float(k, g, x);
        }
    }
}

TEST_CASE("every finite 8-bit value converts back to itself in both modes", "[core][float8]") {
    for (const Kind k : all_kinds) {
        for (unsigned b = 0; b < 256; ++b) {
            const float x = to_float(k, static_cast<std::uint8_t>(b));
            if (std::isnan(x)) {
                continue;
            }
            INFO(name_of(k) << " pattern 0x" << std::hex << b);
            const bool infinite = std::isinf(x);
            CHECK(from_float(k, x, Saturation::off) == b);
            CHECK((infinite || from_float(k, x, Saturation::on) == b));
        }
    }
}

TEST_CASE("8-bit conversions are constant expressions", "[core][float8]") {
    static_assert(syncblob::float8_e4m3fn(448.0f).bits == 0x7E);
    static_assert(static_cast<float>(syncblob::float8_e4m3fn::from_bits(0x01)) == 0x1p-9f);
    static_assert(syncblob::float8_e5m2(-2.0f).bits == 0xC0);
    static_assert(syncblob::float8_e8m0fnu(0.25f).bits == 0x7D);
    static_assert(static_cast<float>(syncblob::float8_e8m0fnu::from_bits(0x00)) == 0x1p-127f);
    SUCCEED("checked at compile time");
}

TEST_CASE("float to 8 bits for every float", "[.][exhaustive][core][float8]") {
    for (const Kind k : all_kinds) {
        const Grid g = grid_of(k);
        std::size_t i = 0;  // the first grid value not below the magnitude: it only grows
        for (std::uint32_t u = 0;; ++u) {
            const auto x = std::bit_cast<float>(u);
            const long double a = static_cast<long double>(x);
            while (std::isfinite(a) && i < g.values.size() && g.values[i] < a) {
                ++i;
            }
            for (const float y : {x, -x}) {
                for (const Saturation mode : {Saturation::off, Saturation::on}) {
                    const unsigned want = expected_at(k, g, static_cast<long double>(y), i, mode);
                    const unsigned got = from_float(k, y, mode);
                    if (!matches(k, got, want)) {
                        FAIL(name_of(k) << " of float bits 0x" << std::hex << std::bit_cast<std::uint32_t>(y)
                                        << ": got 0x" << got << ", expected 0x" << want);
                    }
                }
            }
            if (u == 0x7FFFFFFFu) {  // every magnitude, infinity and the NaNs included, with both signs
                break;
            }
        }
    }
    SUCCEED("every float, both modes, three formats");
}
