// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The 8-bit floating storage types of the Open Compute Project: `float8_e4m3fn` and `float8_e5m2`
/// (OCP 8-bit Floating Point Specification, OFP8, revision 1.0) and `float8_e8m0fnu` (the scale
/// type of the OCP Microscaling Formats specification, v1.0). One byte each, bit-identical to
/// CUDA's `__nv_fp8_e4m3` / `__nv_fp8_e5m2` / `__nv_fp8_e8m0`, PyTorch's and ml_dtypes' types of
/// the same names. Like `half`, they store and convert; arithmetic happens in float.
///
/// - E4M3FN: sign, 4 exponent bits (bias 7), 3 mantissa bits; largest finite ±448 (S.1111.110),
///   least nonzero 2^-9 (S.0000.001); no infinity; NaN S.1111.111.
/// - E5M2: sign, 5 exponent bits (bias 15), 2 mantissa bits; largest finite ±57344 (S.11110.11),
///   least nonzero 2^-16 (S.00000.01); infinity S.11111.00; NaN S.11111.{01,10,11}.
/// - E8M0FNU: 8 exponent bits (bias 127), no sign, no mantissa: 2^-127 (0x00) … 2^127 (0xFE);
///   no zero, no infinity; NaN 0xFF.
///
/// Conversion to float is exact. Conversion from float rounds to nearest, ties to even (for E8M0FNU,
/// whose significand is always 1, a tie 1.5 × 2^k goes to 2^(k+1)), and then does with a value the
/// format cannot hold what `Saturation` says: OCP's non-saturating mode by default (as IEEE
/// conversions, PyTorch and ml_dtypes do), its saturating mode on request (as CUDA's
/// `__NV_SATFINITE`). NaN stays NaN (of the same sign in the signed formats) in both modes.

#include <bit>
#include <cstdint>

#include "config.hpp"
#include "half.hpp"

SYNCBLOB_BEGIN_NAMESPACE

/// What a conversion to an 8-bit float does with a value the format cannot hold: one beyond its
/// largest finite value after rounding, an infinity it lacks, and for E8M0FNU zero and negative values.
enum class Saturation : std::uint8_t {
    /// OCP's non-saturating mode, the default: ±infinity for E5M2, NaN for E4M3FN and E8M0FNU.
    off,
    /// OCP's saturating mode: the largest finite value of the sign (for E8M0FNU: 2^127 above the
    /// range, 2^-127 for zero and negative values). An infinity saturates too; NaN stays NaN.
    on,
};

namespace detail {

/// A signed OCP 8-bit format: sign, exponent and `mantissa_bits` stored fraction bits.
struct SignedFloat8Format {
    int mantissa_bits;
    int bias;
    std::uint8_t max_code;  ///< the largest finite magnitude
    std::uint8_t nan_code;  ///< the NaN a conversion produces (a quiet one), without sign
    std::uint8_t inf_code;  ///< infinity, or `nan_code` in a format without one
};

inline constexpr SignedFloat8Format e4m3fn_format{3, 7, 0x7E, 0x7F, 0x7F};
inline constexpr SignedFloat8Format e5m2_format{2, 15, 0x7B, 0x7E, 0x7C};

/// |x| (`abs`: the bits of a finite float without its sign) in units of the format's least
/// subnormal, rounded to nearest even, as a magnitude code with no upper limit: a code above
/// `max_code` is an overflow. The carry of a rounding flows into the exponent bits.
SYNCBLOB_HOST_DEVICE constexpr std::uint32_t float8_magnitude(std::uint32_t abs, SignedFloat8Format f) noexcept {
    const int min_exponent = 1 - f.bias;  // of the format's normal numbers
    if (abs >= static_cast<std::uint32_t>(min_exponent + 127) << 23) {
        // normal: rebias the exponent, round away the float's extra mantissa bits
        const int shift = 23 - f.mantissa_bits;
        const std::uint32_t rebased = abs - (static_cast<std::uint32_t>(127 - f.bias) << 23);
        const std::uint32_t odd = (rebased >> shift) & 1u;
        return (rebased + (1u << (shift - 1)) - 1u + odd) >> shift;
    }
    if (abs < 0x00800000u) {  // a float subnormal (or zero): far below half the least 8-bit value
        return 0;
    }
    // a subnormal of the format: the significand with its implicit bit, shifted to units of 2^(min - m)
    const std::uint32_t significand = (abs & 0x7FFFFFu) | 0x800000u;
    const int drop = 23 + min_exponent - f.mantissa_bits - (static_cast<int>(abs >> 23) - 127);
    if (drop > 24) {  // below half the least subnormal
        return 0;
    }
    std::uint32_t code = significand >> drop;
    const std::uint32_t rest = significand & ((1u << drop) - 1u);
    const std::uint32_t halfway = 1u << (drop - 1);
    if (rest > halfway || (rest == halfway && (code & 1u) != 0)) {
        ++code;
    }
    return code;
}

SYNCBLOB_HOST_DEVICE constexpr std::uint8_t float_to_float8_bits(float value, SignedFloat8Format f,
                                                                 Saturation mode) noexcept {
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
    const auto sign = static_cast<std::uint8_t>((bits >> 24) & 0x80u);
    const std::uint32_t abs = bits & 0x7FFFFFFFu;
    const std::uint8_t overflow = mode == Saturation::on ? f.max_code : f.inf_code;
    if (abs > 0x7F800000u) {
        return static_cast<std::uint8_t>(sign | f.nan_code);
    }
    if (abs == 0x7F800000u) {
        return static_cast<std::uint8_t>(sign | overflow);
    }
    const std::uint32_t code = float8_magnitude(abs, f);
    return static_cast<std::uint8_t>(sign | (code > f.max_code ? overflow : code));
}

SYNCBLOB_HOST_DEVICE constexpr float e4m3fn_bits_to_float(std::uint8_t b) noexcept {
    const std::uint32_t sign = static_cast<std::uint32_t>(b & 0x80u) << 24;
    const std::uint32_t exponent = (b >> 3) & 0xFu;
    const std::uint32_t mantissa = b & 0x7u;
    if (exponent == 0xFu && mantissa == 0x7u) {
        return std::bit_cast<float>(sign | 0x7FC00000u);
    }
    if (exponent == 0) {  // subnormal: mantissa × 2^-9, exact in float
        const float magnitude = static_cast<float>(mantissa) * 0x1p-9f;
        return sign != 0 ? -magnitude : magnitude;
    }
    return std::bit_cast<float>(sign | ((exponent + 120u) << 23) | (mantissa << 20));
}

SYNCBLOB_HOST_DEVICE constexpr float e5m2_bits_to_float(std::uint8_t b) noexcept {
    return half_bits_to_float(static_cast<std::uint16_t>(b << 8));  // E5M2 is the upper byte of a binary16
}

SYNCBLOB_HOST_DEVICE constexpr std::uint8_t float_to_e8m0fnu_bits(float value, Saturation mode) noexcept {
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
    const std::uint32_t abs = bits & 0x7FFFFFFFu;
    const bool saturate = mode == Saturation::on;
    if (abs > 0x7F800000u) {
        return 0xFF;
    }
    if ((bits >> 31) != 0 || abs == 0) {  // no zero and no sign: below the range
        return saturate ? 0x00 : 0xFF;
    }
    const std::uint32_t exponent = abs >> 23;
    const std::uint32_t mantissa = abs & 0x7FFFFFu;
    std::uint32_t code = 0;
    if (exponent == 0) {  // a float subnormal: 2^-127 (code 0), or 2^-126 from 1.5 × 2^-127 on
        code = mantissa >= 0x600000u ? 1u : 0u;
    } else {  // the nearest power of two; a tie (significand 1.5) goes up
        code = exponent + (mantissa >= 0x400000u ? 1u : 0u);
    }
    if (code > 0xFEu) {  // beyond 2^127 after rounding, or infinity
        return saturate ? 0xFE : 0xFF;
    }
    return static_cast<std::uint8_t>(code);
}

SYNCBLOB_HOST_DEVICE constexpr float e8m0fnu_bits_to_float(std::uint8_t b) noexcept {
    if (b == 0xFFu) {
        return std::bit_cast<float>(0x7FC00000u);
    }
    // 2^(b - 127): a float subnormal for b = 0
    return std::bit_cast<float>(b == 0 ? 0x00400000u : static_cast<std::uint32_t>(b) << 23);
}

struct Float8E4M3FN {
    SYNCBLOB_HOST_DEVICE static constexpr float decode(std::uint8_t b) noexcept { return e4m3fn_bits_to_float(b); }
    SYNCBLOB_HOST_DEVICE static constexpr std::uint8_t encode(float v, Saturation mode) noexcept {
        return float_to_float8_bits(v, e4m3fn_format, mode);
    }
};

struct Float8E5M2 {
    SYNCBLOB_HOST_DEVICE static constexpr float decode(std::uint8_t b) noexcept { return e5m2_bits_to_float(b); }
    SYNCBLOB_HOST_DEVICE static constexpr std::uint8_t encode(float v, Saturation mode) noexcept {
        return float_to_float8_bits(v, e5m2_format, mode);
    }
};

struct Float8E8M0FNU {
    SYNCBLOB_HOST_DEVICE static constexpr float decode(std::uint8_t b) noexcept { return e8m0fnu_bits_to_float(b); }
    SYNCBLOB_HOST_DEVICE static constexpr std::uint8_t encode(float v, Saturation mode) noexcept {
        return float_to_e8m0fnu_bits(v, mode);
    }
};

}  // namespace detail

/// One byte of an OCP 8-bit floating format (see the file's table): storage that converts to and
/// from float. `Format` is the format's codec; use the aliases `float8_e4m3fn`, `float8_e5m2` and
/// `float8_e8m0fnu`.
template <class Format>
struct Float8 {
    std::uint8_t bits = 0;

    constexpr Float8() = default;
    /// `value` rounded to nearest, ties to even; a value the format cannot hold becomes what OCP's
    /// non-saturating mode gives (±infinity for E5M2, NaN for the others).
    SYNCBLOB_HOST_DEVICE constexpr explicit Float8(float value) noexcept
        : bits(Format::encode(value, Saturation::off)) {}
    /// `value` rounded to nearest, ties to even, converted in the given mode (see `Saturation`).
    SYNCBLOB_HOST_DEVICE constexpr Float8(float value, Saturation mode) noexcept : bits(Format::encode(value, mode)) {}
    /// The exact value (NaN for a NaN pattern).
    SYNCBLOB_HOST_DEVICE constexpr explicit operator float() const noexcept { return Format::decode(bits); }
    /// The value of a raw bit pattern.
    SYNCBLOB_HOST_DEVICE static constexpr Float8 from_bits(std::uint8_t raw) noexcept {
        return std::bit_cast<Float8>(raw);
    }
    /// Equal bit patterns (as `half`: +0 and -0 differ, a NaN equals itself).
    friend constexpr bool operator==(Float8, Float8) = default;
};

/// OCP E4M3 (FN: finite, no infinities; NaN only S.1111.111): ±448 at most.
using float8_e4m3fn = Float8<detail::Float8E4M3FN>;
/// OCP E5M2: IEEE-like, with infinities and NaNs; ±57344 at most.
using float8_e5m2 = Float8<detail::Float8E5M2>;
/// OCP MX E8M0 (FNU: finite, NaN 0xFF, unsigned): the powers of two 2^-127 … 2^127, no zero.
using float8_e8m0fnu = Float8<detail::Float8E8M0FNU>;

static_assert(sizeof(float8_e4m3fn) == 1 && alignof(float8_e4m3fn) == 1);
static_assert(sizeof(float8_e5m2) == 1 && sizeof(float8_e8m0fnu) == 1);

SYNCBLOB_END_NAMESPACE
