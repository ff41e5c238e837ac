// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Element conversion: the one rule table every converting load applies (`.npy`, safetensors,
/// JSON, Caffe's protobuf), as small constexpr functions over element types that a device
/// compiler can use too. `convert_checked<To>(v)` gives, for any pair of element types, the
/// converted value and whether it is `v` itself; a load refuses an inexact value unless its
/// caller chose `ConvertRule::saturate`, which takes the converted value. docs/file-safety.md
/// prints the table.
///
/// | to \ from value | exact | otherwise: `saturate` gives |
/// |---|---|---|
/// | an integer type | an integer within its range | NaN: 0; beyond the range (±inf too): its min or max; a fraction:
/// truncated toward zero | | BOOL | 0 or 1 (-0.0 and 1.0 too) | true for any nonzero value, NaN included (as C++ and
/// NumPy) | | a floating type | any value whose rounding to nearest (ties to even) is finite, NaN and ±inf | a finite
/// value beyond its range: its largest finite value of that sign |
///
/// Rounding a value to a floating type (0.1 to F32, 2^53 + 1 to F64, 1e-300 to F32's 0) is the one
/// change a conversion makes without saying: it is what a floating type is.

#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "../../core/element.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace detail {

/// What a converting load does with a value its target type cannot hold exactly.
enum class ConvertRule : std::uint8_t {
    exact,     ///< refuse it (the load throws a FormatError naming the element)
    saturate,  ///< take the nearest value the table gives (see above)
};

/// A converted value and whether it equals the source.
template <class To>
struct Converted {
    To value;
    bool exact;
};

template <class T>
inline constexpr bool is_float16 = std::same_as<T, half> || std::same_as<T, bfloat16>;

/// The largest finite value of a floating element type.
template <class T>
SYNCBLOB_HOST_DEVICE constexpr T largest_finite() noexcept {
    if constexpr (std::same_as<T, half>) {
        return half::from_bits(0x7BFF);  // 65504
    } else if constexpr (std::same_as<T, bfloat16>) {
        return bfloat16::from_bits(0x7F7F);  // 3.3895e38
    } else {
        return std::numeric_limits<T>::max();
    }
}

template <class T>
SYNCBLOB_HOST_DEVICE constexpr double as_double(T v) noexcept {
    if constexpr (is_float16<T>) {
        return static_cast<double>(static_cast<float>(v));
    } else {
        return static_cast<double>(v);
    }
}

template <class T>
SYNCBLOB_HOST_DEVICE constexpr T negated(T v) noexcept {
    if constexpr (is_float16<T>) {
        return T::from_bits(static_cast<std::uint16_t>(v.bits ^ 0x8000u));
    } else {
        return -v;
    }
}

// An integer, float or double into a floating type, rounded to nearest.
template <class To, class From>
SYNCBLOB_HOST_DEVICE constexpr Converted<To> to_floating(From v) noexcept {
    constexpr double inf = std::numeric_limits<double>::infinity();
    const auto overflow = [&] {
        return Converted<To>{v > From{0} ? largest_finite<To>() : negated(largest_finite<To>()), false};
    };
    if constexpr (std::same_as<From, double> && !std::same_as<To, double>) {
        // From FLT_MAX plus half an ulp on, a double rounds to infinity as a float (and a
        // conversion that overflows is no constant expression): say so before converting.
        constexpr double float_limit = 0x1.ffffffp127;
        if (v != inf && v != -inf && (v >= float_limit || v <= -float_limit)) {
            return overflow();
        }
    }
    To r{};
    if constexpr (is_float16<To>) {
        // Through float: the two roundings round as one (float has 24 >= 2 * 11 + 2 significant bits).
        r = To(static_cast<float>(v));
    } else {
        r = static_cast<To>(v);
    }
    const double out = as_double(r);
    const double in = as_double(v);
    if ((out == inf || out == -inf) && in != inf && in != -inf) {
        return overflow();
    }
    return {r, true};
}

// A float or double into an integer type.
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

// An integer into another integer type.
template <std::integral To, std::integral From>
SYNCBLOB_HOST_DEVICE constexpr Converted<To> integer_to_integer(From v) noexcept {
    if (std::in_range<To>(v)) {
        return {static_cast<To>(v), true};
    }
    return {std::cmp_less(v, 0) ? std::numeric_limits<To>::min() : std::numeric_limits<To>::max(), false};
}

/// `v` as a `To` by the table above: the value `saturate` takes, and whether it is `v` exactly.
template <Element To, Element From>
SYNCBLOB_HOST_DEVICE constexpr Converted<To> convert_checked(From v) noexcept {
    if constexpr (std::same_as<To, From>) {
        return {v, true};
    } else if constexpr (is_float16<From>) {
        return convert_checked<To>(static_cast<float>(v));  // exact: float holds every half and bfloat16
    } else if constexpr (std::same_as<From, bool>) {
        return convert_checked<To>(static_cast<std::uint8_t>(v ? 1 : 0));
    } else if constexpr (std::same_as<To, bool>) {
        return {v != From{0}, v == From{0} || v == From{1}};
    } else if constexpr (std::floating_point<To> || is_float16<To>) {
        return to_floating<To>(v);
    } else if constexpr (std::floating_point<From>) {
        return floating_to_integer<To>(v);
    } else {
        return integer_to_integer<To>(v);
    }
}

// The C++ type a dtype is stored as.
template <Dtype D>
using stored_type_t = std::conditional_t<
    D == Dtype::F64, double,
    std::conditional_t<
        D == Dtype::F32, float,
        std::conditional_t<
            D == Dtype::F16, half,
            std::conditional_t<
                D == Dtype::BF16, bfloat16,
                std::conditional_t<
                    D == Dtype::I64, std::int64_t,
                    std::conditional_t<
                        D == Dtype::I32, std::int32_t,
                        std::conditional_t<
                            D == Dtype::I16, std::int16_t,
                            std::conditional_t<
                                D == Dtype::I8, std::int8_t,
                                std::conditional_t<
                                    D == Dtype::U64, std::uint64_t,
                                    std::conditional_t<
                                        D == Dtype::U32, std::uint32_t,
                                        std::conditional_t<
                                            D == Dtype::U16, std::uint16_t,
                                            std::conditional_t<D == Dtype::U8, std::uint8_t, bool>>>>>>>>>>>>;

/// Calls `fn(std::type_identity<S>{})` with `S` the element type stored as dtype `d`.
template <class Fn>
decltype(auto) visit_dtype(Dtype d, Fn&& fn) {
    switch (d) {
        case Dtype::F64:
            return fn(std::type_identity<double>{});
        case Dtype::F32:
            return fn(std::type_identity<float>{});
        case Dtype::F16:
            return fn(std::type_identity<half>{});
        case Dtype::BF16:
            return fn(std::type_identity<bfloat16>{});
        case Dtype::I64:
            return fn(std::type_identity<std::int64_t>{});
        case Dtype::I32:
            return fn(std::type_identity<std::int32_t>{});
        case Dtype::I16:
            return fn(std::type_identity<std::int16_t>{});
        case Dtype::I8:
            return fn(std::type_identity<std::int8_t>{});
        case Dtype::U64:
            return fn(std::type_identity<std::uint64_t>{});
        case Dtype::U32:
            return fn(std::type_identity<std::uint32_t>{});
        case Dtype::U16:
            return fn(std::type_identity<std::uint16_t>{});
        case Dtype::U8:
            return fn(std::type_identity<std::uint8_t>{});
        case Dtype::BOOL:
            break;
    }
    return fn(std::type_identity<bool>{});
}

/// Reverses the bytes of a trivially copyable value of 1, 2, 4 or 8 bytes.
template <class U>
[[nodiscard]] U byteswap_value(U v) noexcept {
    unsigned char b[sizeof(U)];
    std::memcpy(b, &v, sizeof(U));
    for (std::size_t i = 0; i < sizeof(U) / 2; ++i) {
        const unsigned char t = b[i];
        b[i] = b[sizeof(U) - 1 - i];
        b[sizeof(U) - 1 - i] = t;
    }
    std::memcpy(&v, b, sizeof(U));
    return v;
}

/// Reverses the bytes of each of `n` elements of `size` bytes in place.
inline void byteswap_elements(void* data, std::size_t n, std::size_t size) noexcept {
    auto* p = static_cast<unsigned char*>(data);
    if (size == 2) {
        for (std::size_t i = 0; i < n; ++i, p += 2) {
            std::uint16_t v;
            std::memcpy(&v, p, 2);
            v = static_cast<std::uint16_t>((v >> 8) | (v << 8));
            std::memcpy(p, &v, 2);
        }
    } else if (size == 4) {
        for (std::size_t i = 0; i < n; ++i, p += 4) {
            std::uint32_t v;
            std::memcpy(&v, p, 4);
            v = __builtin_bswap32(v);
            std::memcpy(p, &v, 4);
        }
    } else if (size == 8) {
        for (std::size_t i = 0; i < n; ++i, p += 8) {
            std::uint64_t v;
            std::memcpy(&v, p, 8);
            v = __builtin_bswap64(v);
            std::memcpy(p, &v, 8);
        }
    }
}

/// The element of type `S` stored little-endian at `p` (any alignment; any byte of a BOOL that is
/// not 0 is true: a raw copy of 2 into a bool would be undefined).
template <class S>
[[nodiscard]] S load_little_endian(const void* p) noexcept {
    if constexpr (std::same_as<S, bool>) {
        return *static_cast<const unsigned char*>(p) != 0;
    } else {
        S v;
        std::memcpy(&v, p, sizeof(S));
        if constexpr (std::endian::native == std::endian::big && sizeof(S) > 1) {
            v = byteswap_value(v);
        }
        return v;
    }
}

/// Converts `n` little-endian elements of dtype `from` at `src` (any alignment) into `dst` by the
/// table above. Returns `n`, or under `ConvertRule::exact` the index of the first element that is
/// not exact (`dst` is then written up to it, not beyond).
template <Element T>
[[nodiscard]] std::size_t convert_elements(Dtype from, const void* src, std::size_t n, T* dst,
                                           ConvertRule rule) noexcept {
    return visit_dtype(from, [&]<class S>(std::type_identity<S>) -> std::size_t {
        const auto* p = static_cast<const unsigned char*>(src);
        for (std::size_t i = 0; i < n; ++i, p += sizeof(S)) {
            const Converted<T> c = convert_checked<T>(load_little_endian<S>(p));
            if (!c.exact && rule == ConvertRule::exact) {
                return i;
            }
            dst[i] = c.value;
        }
        return n;
    });
}

/// C++'s own conversion (integers wrap modulo 2^N, floating to integer saturates, NaN to 0): the
/// rule `cuda::convert`'s kernels follow today and its tests compare against. No loader uses it:
/// loads follow the table above (`convert_checked`), and so should every new conversion.
template <class From, Element To>
[[nodiscard]] To convert_value(From v) noexcept {
    if constexpr (std::same_as<From, To>) {
        return v;
    } else if constexpr (is_float16<From>) {
        return convert_value<float, To>(static_cast<float>(v));
    } else if constexpr (std::same_as<To, bool>) {
        return v != From{0};
    } else if constexpr (is_float16<To>) {
        return To(static_cast<float>(v));
    } else if constexpr (std::floating_point<To>) {
        return static_cast<To>(v);
    } else if constexpr (std::floating_point<From>) {
        return convert_checked<To>(v).value;
    } else {
        return static_cast<To>(v);
    }
}

}  // namespace detail

SYNCBLOB_END_NAMESPACE
