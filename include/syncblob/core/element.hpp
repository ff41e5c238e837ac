// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Element types a blob can hold, and their dtype names (the safetensors ones).

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>

#include "config.hpp"
#include "half.hpp"

SYNCBLOB_BEGIN_NAMESPACE

/// Element type tags, named as safetensors names them.
enum class Dtype : std::uint8_t { F64, F32, F16, BF16, I64, I32, I16, I8, U64, U32, U16, U8, BOOL };

/// Every dtype, in declaration order.
inline constexpr std::array<Dtype, 13> all_dtypes{Dtype::F64, Dtype::F32, Dtype::F16, Dtype::BF16, Dtype::I64,
                                                  Dtype::I32, Dtype::I16, Dtype::I8,  Dtype::U64,  Dtype::U32,
                                                  Dtype::U16, Dtype::U8,  Dtype::BOOL};

namespace detail {
template <class T, class... Ts>
inline constexpr bool is_one_of = (std::same_as<T, Ts> || ...);
}  // namespace detail

/// A type a blob can hold: float, double, the fixed-width integers, bool, half or bfloat16.
template <class T>
concept Element = detail::is_one_of<T, float, double, half, bfloat16, std::int64_t, std::int32_t, std::int16_t,
                                    std::int8_t, std::uint64_t, std::uint32_t, std::uint16_t, std::uint8_t, bool>;

/// An element type that has math: float, double, half or bfloat16.
template <class T>
concept FloatingElement = detail::is_one_of<T, float, double, half, bfloat16>;

/// The type math accumulates and returns in: double for double, float for float, half and bfloat16.
template <FloatingElement T>
using accumulator_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

/// The dtype tag of an element type.
template <Element T>
inline constexpr Dtype dtype_of = [] {
    if constexpr (std::same_as<T, double>) {
        return Dtype::F64;
    } else if constexpr (std::same_as<T, float>) {
        return Dtype::F32;
    } else if constexpr (std::same_as<T, half>) {
        return Dtype::F16;
    } else if constexpr (std::same_as<T, bfloat16>) {
        return Dtype::BF16;
    } else if constexpr (std::same_as<T, std::int64_t>) {
        return Dtype::I64;
    } else if constexpr (std::same_as<T, std::int32_t>) {
        return Dtype::I32;
    } else if constexpr (std::same_as<T, std::int16_t>) {
        return Dtype::I16;
    } else if constexpr (std::same_as<T, std::int8_t>) {
        return Dtype::I8;
    } else if constexpr (std::same_as<T, std::uint64_t>) {
        return Dtype::U64;
    } else if constexpr (std::same_as<T, std::uint32_t>) {
        return Dtype::U32;
    } else if constexpr (std::same_as<T, std::uint16_t>) {
        return Dtype::U16;
    } else if constexpr (std::same_as<T, std::uint8_t>) {
        return Dtype::U8;
    } else {
        return Dtype::BOOL;
    }
}();

/// The dtype's name: "F64", "F32", "F16", "BF16", "I64" … "U8", "BOOL".
[[nodiscard]] constexpr std::string_view dtype_name(Dtype d) noexcept {
    constexpr std::array<std::string_view, 13> names{"F64", "F32", "F16", "BF16", "I64", "I32", "I16",
                                                     "I8",  "U64", "U32", "U16",  "U8",  "BOOL"};
    const auto index = static_cast<std::size_t>(d);
    return index < names.size() ? names[index] : std::string_view{"?"};
}

/// Bytes per element of a dtype.
[[nodiscard]] constexpr std::size_t dtype_size(Dtype d) noexcept {
    switch (d) {
        case Dtype::F64:
        case Dtype::I64:
        case Dtype::U64:
            return 8;
        case Dtype::F32:
        case Dtype::I32:
        case Dtype::U32:
            return 4;
        case Dtype::F16:
        case Dtype::BF16:
        case Dtype::I16:
        case Dtype::U16:
            return 2;
        case Dtype::I8:
        case Dtype::U8:
        case Dtype::BOOL:
            return 1;
    }
    return 0;
}

/// The dtype named `name` (exact, upper case), or nothing.
[[nodiscard]] constexpr std::optional<Dtype> parse_dtype(std::string_view name) noexcept {
    for (Dtype d : all_dtypes) {
        if (dtype_name(d) == name) {
            return d;
        }
    }
    return std::nullopt;
}

/// The dtype name of an element type, e.g. `element_name<float>() == "F32"`.
template <Element T>
[[nodiscard]] constexpr std::string_view element_name() noexcept {
    return dtype_name(dtype_of<T>);
}

SYNCBLOB_END_NAMESPACE
