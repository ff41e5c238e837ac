// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// 16-bit floating storage types, bit-identical to Eigen's `Eigen::half` /
/// `Eigen::bfloat16` and CUDA's `__half` / `__nv_bfloat16`, so data can be
/// reinterpreted between them. They store and convert; arithmetic happens in float.

#include <bit>
#include <cstdint>
#include <type_traits>

#include "config.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace detail {

SYNCBLOB_HOST_DEVICE constexpr std::uint16_t float_to_half_bits(float value) noexcept {
    const std::uint32_t f = std::bit_cast<std::uint32_t>(value);
    const std::uint32_t sign = (f >> 16) & 0x8000u;
    const std::uint32_t abs = f & 0x7FFFFFFFu;
#if defined(__CUDA_ARCH__)
    // On the device, one instruction: cvt.rn rounds to nearest even, to infinity past 65504 and
    // into subnormals as the rule below does. Only a NaN's payload may differ (cvt may make it
    // canonical), so a NaN takes the rule below.
    if (!std::is_constant_evaluated() && abs <= 0x7F800000u) {
        unsigned short h = 0;
        asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(value));
        return h;
    }
#endif
    if (abs >= 0x7F800000u) {  // inf or NaN: keep NaN quiet and non-zero
        return static_cast<std::uint16_t>(sign | 0x7C00u | (abs > 0x7F800000u ? 0x0200u | ((abs >> 13) & 0x3FFu) : 0u));
    }
    if (abs >= 0x477FF000u) {  // rounds to a value past 65504: infinity
        return static_cast<std::uint16_t>(sign | 0x7C00u);
    }
    if (abs < 0x38800000u) {      // subnormal half (or zero): round at 2^-24 granularity
        if (abs < 0x33000000u) {  // below half the smallest subnormal: rounds to zero
            return static_cast<std::uint16_t>(sign);
        }
        const std::uint32_t mantissa = (abs & 0x7FFFFFu) | 0x800000u;
        const int shift = 126 - static_cast<int>(abs >> 23);  // 14..24
        std::uint32_t result = mantissa >> shift;
        const std::uint32_t rest = mantissa & ((1u << shift) - 1u);
        const std::uint32_t halfway = 1u << (shift - 1);
        if (rest > halfway || (rest == halfway && (result & 1u))) {
            ++result;
        }
        return static_cast<std::uint16_t>(sign | result);
    }
    // normal: rebias exponent 127 -> 15 and round the 13 dropped bits to nearest even
    std::uint32_t result = ((abs - 0x38000000u) >> 13);
    const std::uint32_t rest = abs & 0x1FFFu;
    if (rest > 0x1000u || (rest == 0x1000u && (result & 1u))) {
        ++result;
    }
    return static_cast<std::uint16_t>(sign | result);
}

SYNCBLOB_HOST_DEVICE constexpr float half_bits_to_float(std::uint16_t h) noexcept {
#if defined(__CUDA_ARCH__)
    // On the device, one exact instruction for every value but a NaN, whose payload the rule below
    // keeps as it is (cvt may make it canonical).
    if (!std::is_constant_evaluated() && (h & 0x7FFFu) <= 0x7C00u) {
        float f = 0;
        asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(static_cast<unsigned short>(h)));
        return f;
    }
#endif
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    const std::uint32_t exponent = (h >> 10) & 0x1Fu;
    std::uint32_t mantissa = h & 0x3FFu;
    if (exponent == 0x1Fu) {
        return std::bit_cast<float>(sign | 0x7F800000u | (mantissa << 13));
    }
    if (exponent == 0) {
        if (mantissa == 0) {
            return std::bit_cast<float>(sign);
        }
        // subnormal: normalise
        int e = -1;
        do {
            ++e;
            mantissa <<= 1;
        } while ((mantissa & 0x400u) == 0);
        const std::uint32_t exp32 = static_cast<std::uint32_t>(127 - 15 - e);
        return std::bit_cast<float>(sign | (exp32 << 23) | ((mantissa & 0x3FFu) << 13));
    }
    return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

SYNCBLOB_HOST_DEVICE constexpr std::uint16_t float_to_bfloat16_bits(float value) noexcept {
    const std::uint32_t f = std::bit_cast<std::uint32_t>(value);
    if ((f & 0x7FFFFFFFu) > 0x7F800000u) {  // NaN: keep it a quiet NaN
        return static_cast<std::uint16_t>((f >> 16) | 0x0040u);
    }
    const std::uint32_t rounding = 0x7FFFu + ((f >> 16) & 1u);  // round to nearest even
    return static_cast<std::uint16_t>((f + rounding) >> 16);
}

SYNCBLOB_HOST_DEVICE constexpr float bfloat16_bits_to_float(std::uint16_t b) noexcept {
    return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

}  // namespace detail

/// IEEE 754 binary16 storage. Converts to and from float (round to nearest even).
struct half {
    std::uint16_t bits = 0;

    constexpr half() = default;
    SYNCBLOB_HOST_DEVICE constexpr explicit half(float value) noexcept : bits(detail::float_to_half_bits(value)) {}
    SYNCBLOB_HOST_DEVICE constexpr explicit operator float() const noexcept { return detail::half_bits_to_float(bits); }
    /// A half from its raw bit pattern.
    SYNCBLOB_HOST_DEVICE static constexpr half from_bits(std::uint16_t raw) noexcept {
        half h;
        h.bits = raw;
        return h;
    }
    friend constexpr bool operator==(half, half) = default;
};

/// bfloat16 storage (the upper half of a binary32). Converts to and from float (round to nearest even).
struct bfloat16 {
    std::uint16_t bits = 0;

    constexpr bfloat16() = default;
    SYNCBLOB_HOST_DEVICE constexpr explicit bfloat16(float value) noexcept
        : bits(detail::float_to_bfloat16_bits(value)) {}
    SYNCBLOB_HOST_DEVICE constexpr explicit operator float() const noexcept {
        return detail::bfloat16_bits_to_float(bits);
    }
    /// A bfloat16 from its raw bit pattern.
    SYNCBLOB_HOST_DEVICE static constexpr bfloat16 from_bits(std::uint16_t raw) noexcept {
        bfloat16 b;
        b.bits = raw;
        return b;
    }
    friend constexpr bool operator==(bfloat16, bfloat16) = default;
};

static_assert(sizeof(half) == 2 && alignof(half) == 2);
static_assert(sizeof(bfloat16) == 2 && alignof(bfloat16) == 2);

SYNCBLOB_END_NAMESPACE
