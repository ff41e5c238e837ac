// SPDX-License-Identifier: BSD-2-Clause
// half and bfloat16 conversions against independent references: a decoder written from the
// formats' definitions (std::ldexp), an encoder that rounds in double with std::nearbyint, and,
// where the compiler has it (g++), the compiler's own _Float16 conversion.

#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <syncblob/core/half.hpp>

namespace {

using syncblob::bfloat16;
using syncblob::half;

// ---- references ----------------------------------------------------------------------------------

/// A 16-bit float format: `mantissa_bits` stored fraction bits, `exponent_bits` exponent bits.
struct Format {
    int mantissa_bits;
    int exponent_bits;
    [[nodiscard]] int bias() const { return (1 << (exponent_bits - 1)) - 1; }
    [[nodiscard]] int min_exponent() const { return 1 - bias(); }  // of normal numbers
    [[nodiscard]] unsigned max_biased() const { return (1u << exponent_bits) - 1u; }
};
constexpr Format binary16{10, 5};
constexpr Format bfloat{7, 8};

/// The value a 16-bit pattern stands for, from the format's definition.
double decode(Format f, std::uint16_t bits) {
    const bool negative = (bits & 0x8000u) != 0;
    const unsigned exponent = (static_cast<unsigned>(bits) >> f.mantissa_bits) & f.max_biased();
    const unsigned mantissa = bits & ((1u << f.mantissa_bits) - 1u);
    double magnitude = 0;
    if (exponent == f.max_biased()) {
        magnitude = mantissa == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
    } else if (exponent == 0) {
        magnitude = std::ldexp(static_cast<double>(mantissa), f.min_exponent() - f.mantissa_bits);
    } else {
        magnitude = std::ldexp(static_cast<double>((1u << f.mantissa_bits) + mantissa),
                               static_cast<int>(exponent) - f.bias() - f.mantissa_bits);
    }
    return negative ? -magnitude : magnitude;
}

/// `x` rounded to the format (to nearest, ties to even), computed in double: the quantum at x's
/// binade, std::nearbyint, and infinity when the rounded value leaves the finite range.
double round_to(Format f, float x) {
    const double a = std::fabs(static_cast<double>(x));
    if (std::isnan(a) || std::isinf(a) || a == 0) {
        return static_cast<double>(x);
    }
    const int binade = std::max(std::ilogb(a), f.min_exponent());
    const int quantum = binade - f.mantissa_bits;
    const double rounded = std::ldexp(std::nearbyint(std::ldexp(a, -quantum)), quantum);
    const int max_exponent = static_cast<int>(f.max_biased()) - 1 - f.bias();
    const double limit = std::ldexp(1.0, max_exponent + 1);
    const double result = rounded >= limit ? std::numeric_limits<double>::infinity() : rounded;
    return std::signbit(x) ? -result : result;
}

bool same_value(double a, double b) {
    if (std::isnan(a) || std::isnan(b)) {
        return std::isnan(a) && std::isnan(b);
    }
    return a == b && std::signbit(a) == std::signbit(b);
}

std::string describe(float x) {
    std::ostringstream os;
    os.precision(9);
    os << x << " (bits 0x" << std::hex << std::bit_cast<std::uint32_t>(x) << ")";
    return os.str();
}

/// Floats worth converting: every representable midpoint between neighbouring 16-bit values and
/// its float neighbours (the ties and near-ties), the 16-bit values themselves, the edges of the
/// subnormal and overflow ranges, special values, and a sweep over all float bit patterns.
std::vector<float> probe_floats(Format f) {
    std::vector<float> out;
    for (std::uint32_t bits = 0; bits < 0x8000u; ++bits) {
        const double v = decode(f, static_cast<std::uint16_t>(bits));
        const double next = decode(f, static_cast<std::uint16_t>(bits + 1));
        if (std::isnan(v)) {
            continue;
        }
        // above the largest finite value, round as if the exponent range went on
        const double next_value = std::isinf(next) ? 2 * v - decode(f, static_cast<std::uint16_t>(bits - 1)) : next;
        for (const double sign : {1.0, -1.0}) {
            const auto value = static_cast<float>(sign * v);
            out.push_back(value);
            if (!std::isinf(v)) {
                const auto mid = static_cast<float>(sign * (v + next_value) / 2);  // exact in float
                out.push_back(mid);
                out.push_back(std::nextafter(mid, 0.0f));
                out.push_back(std::nextafter(mid, static_cast<float>(sign) * std::numeric_limits<float>::infinity()));
            }
        }
    }
    for (std::uint64_t bits = 0; bits <= 0xFFFFFFFFu; bits += 4099) {
        out.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(bits)));
    }
    for (const float special : {0.0f,
                                -0.0f,
                                std::numeric_limits<float>::infinity(),
                                -std::numeric_limits<float>::infinity(),
                                std::numeric_limits<float>::max(),
                                std::numeric_limits<float>::min(),
                                std::numeric_limits<float>::denorm_min(),
                                std::numeric_limits<float>::quiet_NaN(),
                                -std::numeric_limits<float>::quiet_NaN(),
                                std::numeric_limits<float>::signaling_NaN(),
                                65504.0f,
                                65519.99f,
                                65520.0f,
                                65536.0f,
                                5.9604645e-8f,
                                2.9802322e-8f,
                                2.9802326e-8f,
                                6.1035156e-5f,
                                1e-10f,
                                3.3895314e38f,
                                3.3961776e38f}) {
        out.push_back(special);
    }
    return out;
}

/// Every bit pattern of T decodes to the reference value and converts back to itself (a NaN to a
/// NaN of the same sign; a quiet one, whose quiet bit is `quiet_bit`, with its payload).
template <class T>
void check_every_pattern(Format format, std::uint16_t quiet_bit) {
    int wrong_value = 0;
    int wrong_round_trip = 0;
    std::uint32_t first_bad = 0x10000;
    for (std::uint32_t b = 0; b <= 0xFFFFu; ++b) {
        const auto bits = static_cast<std::uint16_t>(b);
        const float f = static_cast<float>(T::from_bits(bits));
        if (!same_value(static_cast<double>(f), decode(format, bits))) {
            ++wrong_value;
            first_bad = std::min(first_bad, b);
        }
        const std::uint16_t back = T(f).bits;
        const bool quiet = (bits & quiet_bit) != 0;
        const bool ok = std::isnan(f) ? (std::isnan(static_cast<float>(T::from_bits(back))) &&
                                         (back & 0x8000u) == (bits & 0x8000u) && (!quiet || back == bits))
                                      : back == bits;
        if (!ok) {
            ++wrong_round_trip;
            first_bad = std::min(first_bad, b);
        }
    }
    INFO("first bad pattern 0x" << std::hex << first_bad);
    CHECK(wrong_value == 0);
    CHECK(wrong_round_trip == 0);
}

/// Every probe float converts to T as the reference rounding says.
template <class T>
void check_rounding(Format format) {
    REQUIRE(std::fegetround() == FE_TONEAREST);
    const std::vector<float> probes = probe_floats(format);
    std::size_t wrong = 0;
    std::string first;
    for (const float x : probes) {
        const std::uint16_t bits = T(x).bits;
        if (!same_value(decode(format, bits), round_to(format, x))) {
            if (wrong++ == 0) {
                first = describe(x);
            }
        }
    }
    INFO(probes.size() << " floats; first wrong: " << first);
    CHECK(wrong == 0);
}

}  // namespace

// ---- binary16 -----------------------------------------------------------------------------------------

TEST_CASE("half decodes every bit pattern and round-trips through float", "[core][half]") {
    check_every_pattern<half>(binary16, 0x0200u);
}

TEST_CASE("float to half rounds to nearest even, like an independent reference", "[core][half]") {
    check_rounding<half>(binary16);
    // a few values written out by hand
    CHECK(half(1.0f).bits == 0x3C00);
    CHECK(half(-2.0f).bits == 0xC000);
    CHECK(half(65504.0f).bits == 0x7BFF);
    CHECK(half(65519.99f).bits == 0x7BFF);
    CHECK(half(65520.0f).bits == 0x7C00);       // the tie above the largest half goes to infinity
    CHECK(half(5.9604645e-8f).bits == 0x0001);  // 2^-24, the smallest subnormal
    CHECK(half(2.9802322e-8f).bits == 0x0000);  // 2^-25: a tie, to even (zero)
    CHECK(half(2.9802326e-8f).bits == 0x0001);  // just above the tie
    CHECK(half(-0.0f).bits == 0x8000);
    CHECK(half(1.0f + 1.0f / 2048).bits == 0x3C00);  // tie, to even
    CHECK(half(1.0f + 3.0f / 2048).bits == 0x3C02);  // tie, to even (up)
}

#if defined(__FLT16_MAX__)
TEST_CASE("float to half agrees with the compiler's _Float16", "[core][half]") {
    const std::vector<float> probes = probe_floats(binary16);
    std::size_t wrong = 0;
    std::string first;
    for (const float x : probes) {
        const std::uint16_t ours = half(x).bits;
        const auto theirs = std::bit_cast<std::uint16_t>(static_cast<_Float16>(x));
        const bool ok = std::isnan(x) ? std::isnan(static_cast<float>(half::from_bits(ours))) : ours == theirs;
        if (!ok && wrong++ == 0) {
            first = describe(x);
        }
    }
    INFO(probes.size() << " floats; first disagreement: " << first);
    CHECK(wrong == 0);
    // and the compiler decodes every pattern as we do
    std::size_t wrong_decode = 0;
    for (std::uint32_t b = 0; b <= 0xFFFFu; ++b) {
        const auto bits = static_cast<std::uint16_t>(b);
        const auto theirs = static_cast<float>(std::bit_cast<_Float16>(bits));
        if (!same_value(static_cast<double>(static_cast<float>(half::from_bits(bits))), static_cast<double>(theirs))) {
            ++wrong_decode;
        }
    }
    CHECK(wrong_decode == 0);
}
#else
TEST_CASE("float to half agrees with the compiler's _Float16", "[core][half]") {
    std::cout << "skipped: this compiler has no _Float16 on this target (the reference encoder still runs)"
              << std::endl;
}
#endif

// ---- bfloat16 ---------------------------------------------------------------------------------------------

TEST_CASE("bfloat16 decodes every bit pattern and round-trips through float", "[core][bfloat16]") {
    check_every_pattern<bfloat16>(bfloat, 0x0040u);
}

TEST_CASE("float to bfloat16 rounds to nearest even, like an independent reference", "[core][bfloat16]") {
    check_rounding<bfloat16>(bfloat);
    CHECK(bfloat16(1.0f).bits == 0x3F80);
    CHECK(bfloat16(1.0f + 1.0f / 256).bits == 0x3F80);                  // tie, to even
    CHECK(bfloat16(1.0f + 3.0f / 256).bits == 0x3F82);                  // tie, to even (up)
    CHECK(bfloat16(std::numeric_limits<float>::max()).bits == 0x7F80);  // rounds past the largest: infinity
    CHECK(bfloat16(-std::numeric_limits<float>::infinity()).bits == 0xFF80);
    CHECK(std::isnan(static_cast<float>(bfloat16(std::numeric_limits<float>::signaling_NaN()))));
    // a NaN whose payload lives only in the low 16 bits must not become infinity
    CHECK(std::isnan(static_cast<float>(bfloat16(std::bit_cast<float>(0x7F800001u)))));
}
