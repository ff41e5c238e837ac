// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Element conversion for loaders asked to convert (`LoadOptions::convert`): little-endian source
/// elements of any dtype into any element type.

#include <bit>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "../../core/element.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace detail {

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

// A floating value into an integer type: saturating, NaN to 0 (a plain cast is undefined out of range).
template <std::integral To>
[[nodiscard]] To saturate_floating(double v) noexcept {
    if (std::isnan(v)) {
        return To{0};
    }
    constexpr auto lo = static_cast<double>(std::numeric_limits<To>::min());
    constexpr auto hi = static_cast<double>(std::numeric_limits<To>::max());  // rounds up to 2^k for 64-bit types
    if (v <= lo) {
        return std::numeric_limits<To>::min();
    }
    if (v >= hi) {
        return std::numeric_limits<To>::max();
    }
    return static_cast<To>(v);
}

template <class From, Element To>
[[nodiscard]] To convert_value(From v) noexcept {
    if constexpr (std::same_as<From, To>) {
        return v;
    } else if constexpr (std::same_as<From, half> || std::same_as<From, bfloat16>) {
        return convert_value<float, To>(static_cast<float>(v));
    } else if constexpr (std::same_as<To, bool>) {
        return v != From{0};
    } else if constexpr (std::same_as<To, half> || std::same_as<To, bfloat16>) {
        return To(static_cast<float>(v));
    } else if constexpr (std::floating_point<To>) {
        return static_cast<To>(v);
    } else if constexpr (std::floating_point<From>) {
        return saturate_floating<To>(static_cast<double>(v));
    } else {
        return static_cast<To>(v);  // integer to integer: modulo 2^N, as C++ and NumPy's astype do
    }
}

template <Dtype D, Element T>
void convert_from(const void* src, std::size_t n, T* dst) noexcept {
    using From = stored_type_t<D>;
    const auto* p = static_cast<const unsigned char*>(src);
    for (std::size_t i = 0; i < n; ++i, p += sizeof(From)) {
        From v;
        if constexpr (std::same_as<From, bool>) {
            v = *p != 0;  // any nonzero byte is true (a raw copy of 2 into a bool would be undefined)
        } else {
            std::memcpy(&v, p, sizeof(From));
            if constexpr (std::endian::native == std::endian::big && sizeof(From) > 1) {
                v = byteswap_value(v);
            }
        }
        dst[i] = convert_value<From, T>(v);
    }
}

/// Converts `n` little-endian elements of dtype `from` at `src` (any alignment) into `dst`.
/// Floating to integer saturates and maps NaN to 0; integer to integer wraps modulo 2^N; half and
/// bfloat16 convert through float; bool becomes 0/1 and anything becomes bool as "nonzero".
template <Element T>
void convert_elements(Dtype from, const void* src, std::size_t n, T* dst) noexcept {
    switch (from) {
        case Dtype::F64:
            return convert_from<Dtype::F64>(src, n, dst);
        case Dtype::F32:
            return convert_from<Dtype::F32>(src, n, dst);
        case Dtype::F16:
            return convert_from<Dtype::F16>(src, n, dst);
        case Dtype::BF16:
            return convert_from<Dtype::BF16>(src, n, dst);
        case Dtype::I64:
            return convert_from<Dtype::I64>(src, n, dst);
        case Dtype::I32:
            return convert_from<Dtype::I32>(src, n, dst);
        case Dtype::I16:
            return convert_from<Dtype::I16>(src, n, dst);
        case Dtype::I8:
            return convert_from<Dtype::I8>(src, n, dst);
        case Dtype::U64:
            return convert_from<Dtype::U64>(src, n, dst);
        case Dtype::U32:
            return convert_from<Dtype::U32>(src, n, dst);
        case Dtype::U16:
            return convert_from<Dtype::U16>(src, n, dst);
        case Dtype::U8:
            return convert_from<Dtype::U8>(src, n, dst);
        case Dtype::BOOL:
            return convert_from<Dtype::BOOL>(src, n, dst);
    }
}

}  // namespace detail

SYNCBLOB_END_NAMESPACE
