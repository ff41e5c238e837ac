// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Internal, shared beyond its folder: used by printing (blob/print.hpp), the loads (io/) and the CUDA
/// kernels (cuda/), so it sits outside detail/; its names stay in a detail namespace and are no user API.
///
/// Element conversion: the one rule for every pair of element types, as constexpr functions that
/// host and device code share. Every converting load (`.npy`, safetensors, JSON, Caffe's protobuf),
/// the JSON reader's decoding of a document's own values, and the CUDA conversion kernels
/// (`cuda::convert`) apply `convert_checked<To>(v)`: the converted value, and whether it is `v`
/// itself. docs/file-safety.md prints the table for every pair of dtypes.
///
/// Into each kind of type, what converts exactly, and what any other value becomes (its saturated
/// value, which `LoadOptions::saturate` loads and the CUDA kernels write):
/// - an integer type: an integer within its range. Otherwise NaN: 0; beyond the range (±inf too):
///   its min or max; a fraction: truncated toward zero.
/// - BOOL: 0 or 1 (-0.0 and 1.0 too). Otherwise true for any nonzero value, NaN included (as C++
///   and NumPy).
/// - a floating type: any value whose rounding to nearest (ties to even) it holds: finite, NaN,
///   and ±inf where it has them. Otherwise (beyond its range, or ±inf where it has none) its
///   largest finite value of that sign; for F8_E8M0 (positive only) zero and negative values: its
///   least, 2^-127.
///
/// Rounding a value to a floating type (0.1 to F32, 2^53 + 1 to F64, 1e-300 to F32's 0) is the one
/// change a conversion makes without saying: it is what a floating type is. It is one rounding from
/// the source value, also where the conversion passes through float (see `narrowing_float`).

#include <bit>
#include <concepts>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "element.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace detail {

/// A converted value and whether it equals the source.
template <class To>
struct Converted {
    To value;
    bool exact;
};

/// An element type stored as a class that converts to and from float: half, bfloat16, the 8-bit floats.
template <class T>
concept FloatStorage = Element<T> && std::is_class_v<T>;

/// Any floating element type: float, double, or a `FloatStorage` type.
template <class T>
concept FloatingValue = std::floating_point<T> || FloatStorage<T>;

/// The largest finite value of a floating element type.
template <FloatingValue T>
SYNCBLOB_HOST_DEVICE constexpr T largest_finite() noexcept {
    if constexpr (std::same_as<T, half>) {
        return half::from_bits(0x7BFF);  // 65504
    } else if constexpr (std::same_as<T, bfloat16>) {
        return bfloat16::from_bits(0x7F7F);  // 3.3895e38
    } else if constexpr (FloatStorage<T>) {
        return T(std::numeric_limits<float>::max(), Saturation::on);  // an 8-bit float
    } else {
        return std::numeric_limits<T>::max();
    }
}

/// The value of an element as a double (exact for every element type but the 64-bit integers).
template <Element T>
SYNCBLOB_HOST_DEVICE constexpr double as_double(T v) noexcept {
    if constexpr (FloatStorage<T>) {
        return static_cast<double>(static_cast<float>(v));
    } else {
        return static_cast<double>(v);
    }
}

SYNCBLOB_HOST_DEVICE constexpr bool is_infinite(double d) noexcept {
    return d == std::numeric_limits<double>::infinity() || d == -std::numeric_limits<double>::infinity();
}

/// A 32- or 64-bit integer as a float rounded to odd: truncated to 24 significant bits, the last
/// set when any bit was dropped.
template <std::integral I>
SYNCBLOB_HOST_DEVICE constexpr float odd_float(I v) noexcept {
    const bool negative = std::cmp_less(v, 0);
    const std::uint64_t magnitude =
        negative ? std::uint64_t{0} - static_cast<std::uint64_t>(v) : static_cast<std::uint64_t>(v);
    const auto width = static_cast<int>(std::bit_width(magnitude));
    const int shift = width > 24 ? width - 24 : 0;
    std::uint64_t kept = magnitude >> shift;
    if (shift > 0 && (magnitude & ((std::uint64_t{1} << shift) - 1)) != 0) {
        kept |= 1u;
    }
    const auto f = static_cast<float>(kept << shift);  // exact: 24 significant bits
    return negative ? -f : f;
}

/// A double as a float rounded to odd (NaN and the infinities as themselves; beyond float's range,
/// ±FLT_MAX, which every type narrower than float overflows as it would overflow the double).
SYNCBLOB_HOST_DEVICE constexpr float odd_float(double d) noexcept {
    constexpr auto float_max = static_cast<double>(std::numeric_limits<float>::max());
    if (d != d || is_infinite(d)) {
        return static_cast<float>(d);
    }
    if (d > float_max || d < -float_max) {
        return d > 0 ? std::numeric_limits<float>::max() : -std::numeric_limits<float>::max();
    }
    const auto f = static_cast<float>(d);  // rounded to nearest
    const auto back = static_cast<double>(f);
    if (back == d) {
        return f;
    }
    std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
    if ((back > d) == (d > 0)) {  // rounded away from zero: one step back (toward zero) truncates
        --bits;
    }
    return std::bit_cast<float>(bits | 1u);
}

/// `v` as a float that rounds to every narrower floating type (half, bfloat16, the 8-bit floats) as
/// `v` itself does: `v` when float holds it, else `v` rounded to odd. Rounding to nearest twice (to
/// float, then to the type) would round some values near a midpoint of the type the wrong way; a
/// rounding to odd first does not, given 2 more significant bits than the type has (Boldo and
/// Melquiond, "When double rounding is odd", 2005): float has 24, these types at most 11.
template <Element From>
SYNCBLOB_HOST_DEVICE constexpr float narrowing_float(From v) noexcept {
    if constexpr (std::same_as<From, double> || (std::integral<From> && sizeof(From) >= 4)) {
        return odd_float(v);
    } else {
        return static_cast<float>(v);  // exact
    }
}

/// A float into a `FloatStorage` type: its rounding when that is a value the type holds (NaN and
/// infinity as themselves where the type has them); the saturated value otherwise.
template <FloatStorage To>
SYNCBLOB_HOST_DEVICE constexpr Converted<To> float_to_storage(float f) noexcept {
    const To rounded(f);
    const auto back = static_cast<double>(static_cast<float>(rounded));
    const auto in = static_cast<double>(f);
    const bool became_nan = back != back && in == in;
    const bool became_infinite = is_infinite(back) && !is_infinite(in);
    if (!became_nan && !became_infinite) {
        return {rounded, true};
    }
    if constexpr (requires { To(f, Saturation::on); }) {
        return {To(f, Saturation::on), false};  // an 8-bit float: the format's saturating mode
    } else {
        const To top = largest_finite<To>();  // half, bfloat16: only a finite value overflows them
        return {f > 0 ? top : To::from_bits(static_cast<std::uint16_t>(top.bits | 0x8000u)), false};
    }
}

/// An integer, float or double into float or double, rounded to nearest.
template <std::floating_point To, class From>
SYNCBLOB_HOST_DEVICE constexpr Converted<To> to_floating(From v) noexcept {
    constexpr To top = std::numeric_limits<To>::max();
    const Converted<To> overflow{v > From{0} ? top : -top, false};
    if constexpr (std::same_as<From, double> && std::same_as<To, float>) {
        // From FLT_MAX plus half an ulp on, a double rounds to infinity as a float (and a
        // conversion that overflows is no constant expression): say so before converting.
        constexpr double float_limit = 0x1.ffffffp127;
        if (!is_infinite(v) && (v >= float_limit || v <= -float_limit)) {
            return overflow;
        }
    }
    const auto r = static_cast<To>(v);
    if (is_infinite(static_cast<double>(r)) && !is_infinite(static_cast<double>(v))) {
        return overflow;
    }
    return {r, true};
}

/// A float or double into an integer type.
template <std::integral To, std::floating_point From>
SYNCBLOB_HOST_DEVICE constexpr Converted<To> floating_to_integer(From v) noexcept {
    const auto d = static_cast<double>(v);
    if (d != d) {
        return {To{0}, false};
    }
    // 2^digits, exactly (max + 1 rounds to it for 64-bit types and is exact for narrower ones).
    constexpr double top = static_cast<double>(std::numeric_limits<To>::max()) + 1.0;
    constexpr auto bottom = static_cast<double>(std::numeric_limits<To>::min());
    if (d >= top) {
        return {std::numeric_limits<To>::max(), false};
    }
    if (d < bottom) {
        return {std::numeric_limits<To>::min(), false};
    }
    const auto t = static_cast<To>(d);  // in range: truncation toward zero is defined
    return {t, static_cast<double>(t) == d};
}

/// An integer into another integer type.
template <std::integral To, std::integral From>
SYNCBLOB_HOST_DEVICE constexpr Converted<To> integer_to_integer(From v) noexcept {
    if (std::in_range<To>(v)) {
        return {static_cast<To>(v), true};
    }
    return {std::cmp_less(v, 0) ? std::numeric_limits<To>::min() : std::numeric_limits<To>::max(), false};
}

/// `v` as a `To` by the table above: the saturated value where `v` is not exact, and whether it is.
template <Element To, Element From>
SYNCBLOB_HOST_DEVICE constexpr Converted<To> convert_checked(From v) noexcept {
    if constexpr (std::same_as<To, From>) {
        return {v, true};
    } else if constexpr (FloatStorage<From>) {
        return convert_checked<To>(static_cast<float>(v));  // exact: float holds every value of these types
    } else if constexpr (std::same_as<From, bool>) {
        return convert_checked<To>(static_cast<std::uint8_t>(v ? 1 : 0));
    } else if constexpr (std::same_as<To, bool>) {
        return {v != From{0}, v == From{0} || v == From{1}};
    } else if constexpr (FloatStorage<To>) {
        return float_to_storage<To>(narrowing_float(v));
    } else if constexpr (std::floating_point<To>) {
        return to_floating<To>(v);
    } else if constexpr (std::floating_point<From>) {
        return floating_to_integer<To>(v);
    } else {
        return integer_to_integer<To>(v);
    }
}

}  // namespace detail

SYNCBLOB_END_NAMESPACE
