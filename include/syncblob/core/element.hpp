// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The element-type table: every type a blob can hold, once, with everything the library knows of
/// it. Every file format, the conversion, printing and DLPack read their codes from here; adding a
/// type is adding a row (and, for a new kind of number, its conversion in core/convert.hpp).

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "config.hpp"
#include "float8.hpp"
#include "half.hpp"

// One row per element type, in `Dtype` order:
//   the dtype, which is also its name (syncblob's dtype names are the safetensors ones);
//   the C++ type; its size in bytes;
//   NumPy's type code without the byte order ("" where NumPy has no such dtype; BF16 is written as
//   raw 2-byte values, 'V2');
//   the dtype's position in the safetensors reference's `Dtype` enum (its writer orders tensors by it);
//   the DLPack 1.1 `DLDataTypeCode` (kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4, kDLBool 6,
//   kDLFloat8_e4m3fn 10, kDLFloat8_e5m2 12, kDLFloat8_e8m0fnu 14);
//   the type math accumulates and returns in (`void`: the type has no math).
#define SYNCBLOB_ELEMENT_TYPES(X)                 \
    X(F64, double, 8, "f8", 19, 2, double)        \
    X(F32, float, 4, "f4", 17, 2, float)          \
    X(F16, half, 2, "f2", 13, 2, float)           \
    X(BF16, bfloat16, 2, "V2", 14, 4, float)      \
    X(I64, std::int64_t, 8, "i8", 20, 0, void)    \
    X(I32, std::int32_t, 4, "i4", 15, 0, void)    \
    X(I16, std::int16_t, 2, "i2", 11, 0, void)    \
    X(I8, std::int8_t, 1, "i1", 5, 0, void)       \
    X(U64, std::uint64_t, 8, "u8", 21, 1, void)   \
    X(U32, std::uint32_t, 4, "u4", 16, 1, void)   \
    X(U16, std::uint16_t, 2, "u2", 12, 1, void)   \
    X(U8, std::uint8_t, 1, "u1", 4, 1, void)      \
    X(BOOL, bool, 1, "b1", 0, 6, void)            \
    X(F8_E4M3, float8_e4m3fn, 1, "", 7, 10, void) \
    X(F8_E5M2, float8_e5m2, 1, "", 6, 12, void)   \
    X(F8_E8M0, float8_e8m0fnu, 1, "", 8, 14, void)

SYNCBLOB_BEGIN_NAMESPACE

/// Element type tags, named as safetensors names them.
enum class Dtype : std::uint8_t {
#define SYNCBLOB_ROW(dtype, type, size, numpy, safetensors, dlpack, accumulator) dtype,
    SYNCBLOB_ELEMENT_TYPES(SYNCBLOB_ROW)
#undef SYNCBLOB_ROW
};

/// What the table says of one dtype.
struct DtypeInfo {
    Dtype dtype;
    /// Its name: syncblob's and the safetensors format's ("F32", "BF16", "F8_E4M3").
    std::string_view name;
    /// Bytes per element.
    std::size_t size;
    /// NumPy's type code without the byte order ("f4", "u1", "V2" for BF16's raw bytes); empty
    /// where NumPy has no dtype for it (the 8-bit floats).
    std::string_view numpy_code;
    /// Its position in the safetensors reference implementation's `Dtype` enum: the reference's
    /// writer puts tensors of a later position first.
    int safetensors_position;
    /// DLPack's `DLDataTypeCode` (bits: 8 × size, one lane).
    std::uint8_t dlpack_code;
    /// Whether the type has math (an accumulator).
    bool has_math;
};

/// Every row of the table, in `Dtype` order.
inline constexpr DtypeInfo dtype_table[] = {
#define SYNCBLOB_ROW(dtype, type, size, numpy, safetensors, dlpack, accumulator) \
    {Dtype::dtype, #dtype, size, numpy, safetensors, dlpack, !std::is_void_v<accumulator>},
    SYNCBLOB_ELEMENT_TYPES(SYNCBLOB_ROW)
#undef SYNCBLOB_ROW
};

/// Every dtype, in declaration order.
inline constexpr auto all_dtypes = [] {
    std::array<Dtype, std::size(dtype_table)> out{};
    for (std::size_t i = 0; i < out.size(); ++i) {
        out[i] = dtype_table[i].dtype;
    }
    return out;
}();

namespace detail {

/// The row of an element type (undefined for other types).
template <class T>
struct ElementRow;

/// The C++ type of a dtype.
template <Dtype D>
struct DtypeRow;

#define SYNCBLOB_ROW(dtype, cxx_type, size, numpy, safetensors, dlpack, accumulator_type) \
    template <>                                                                           \
    struct ElementRow<cxx_type> {                                                         \
        static constexpr Dtype value = Dtype::dtype;                                      \
        using accumulator = accumulator_type;                                             \
    };                                                                                    \
    template <>                                                                           \
    struct DtypeRow<Dtype::dtype> {                                                       \
        using type = cxx_type;                                                            \
    };                                                                                    \
    static_assert(sizeof(cxx_type) == (size), "the table's size of " #dtype " is its C++ type's");
SYNCBLOB_ELEMENT_TYPES(SYNCBLOB_ROW)
#undef SYNCBLOB_ROW

}  // namespace detail

/// A type a blob can hold: a type of the table (float, double, the fixed-width integers, bool,
/// half, bfloat16 and the 8-bit floats).
template <class T>
concept Element = requires {
    detail::ElementRow<T>::value;
};

/// An element type that has math: float, double, half or bfloat16 (those with an accumulator).
/// The integers, bool and the 8-bit floats are storage only: math on them is a compile error.
template <class T>
concept FloatingElement = Element<T> && !std::is_void_v<typename detail::ElementRow<T>::accumulator>;

/// The type math accumulates and returns in: double for double, float for float, half and bfloat16.
template <FloatingElement T>
using accumulator_t = typename detail::ElementRow<T>::accumulator;

/// The dtype tag of an element type.
template <Element T>
inline constexpr Dtype dtype_of = detail::ElementRow<T>::value;

/// The element type stored as dtype `D`.
template <Dtype D>
using element_t = typename detail::DtypeRow<D>::type;

namespace detail {
template <std::size_t... I>
auto element_tuple(std::index_sequence<I...>) -> std::tuple<element_t<all_dtypes[I]>...>;
}  // namespace detail

/// Every element type, in `Dtype` order: `std::tuple<double, float, half, …>` (for code and tests
/// that run over all of them).
using ElementTypes = decltype(detail::element_tuple(std::make_index_sequence<all_dtypes.size()>{}));

/// Whether `d` is a dtype of the table (a value cast from a number need not be).
[[nodiscard]] constexpr bool is_dtype(Dtype d) noexcept {
    return static_cast<std::size_t>(d) < std::size(dtype_table);
}

/// The table's row of `d`, or nothing for a value that is no dtype.
[[nodiscard]] constexpr const DtypeInfo* dtype_info(Dtype d) noexcept {
    return is_dtype(d) ? &dtype_table[static_cast<std::size_t>(d)] : nullptr;
}

/// The dtype's name: "F64", "F32", "F16", "BF16", "I64" … "U8", "BOOL", "F8_E4M3", "F8_E5M2",
/// "F8_E8M0" ("?" for a value that is no dtype).
[[nodiscard]] constexpr std::string_view dtype_name(Dtype d) noexcept {
    return is_dtype(d) ? dtype_table[static_cast<std::size_t>(d)].name : std::string_view{"?"};
}

/// Bytes per element of a dtype (0 for a value that is no dtype).
[[nodiscard]] constexpr std::size_t dtype_size(Dtype d) noexcept {
    return is_dtype(d) ? dtype_table[static_cast<std::size_t>(d)].size : 0;
}

/// Every dtype's name, separated by spaces ("F64 F32 … F8_E8M0"): what messages list as accepted.
[[nodiscard]] inline std::string dtype_names() {
    std::string out;
    for (const DtypeInfo& row : dtype_table) {
        out.append(out.empty() ? "" : " ").append(row.name);
    }
    return out;
}

/// The dtype named `name` (exact, upper case), or nothing.
[[nodiscard]] constexpr std::optional<Dtype> parse_dtype(std::string_view name) noexcept {
    for (const DtypeInfo& row : dtype_table) {
        if (row.name == name) {
            return row.dtype;
        }
    }
    return std::nullopt;
}

/// The dtype name of an element type, e.g. `element_name<float>() == "F32"`.
template <Element T>
[[nodiscard]] constexpr std::string_view element_name() noexcept {
    return dtype_name(dtype_of<T>);
}

namespace detail {

/// Calls `fn(std::type_identity<T>{})` with `T` the element type stored as dtype `d` (a value that
/// is no dtype, which no parser produces, is visited as bytes: U8).
template <class Fn>
constexpr decltype(auto) visit_dtype(Dtype d, Fn&& fn) {
    switch (d) {
#define SYNCBLOB_ROW(dtype, type, size, numpy, safetensors, dlpack, accumulator) \
    case Dtype::dtype:                                                           \
        return fn(std::type_identity<type>{});
        SYNCBLOB_ELEMENT_TYPES(SYNCBLOB_ROW)
#undef SYNCBLOB_ROW
    }
    return fn(std::type_identity<std::uint8_t>{});
}

}  // namespace detail

SYNCBLOB_END_NAMESPACE

#undef SYNCBLOB_ELEMENT_TYPES
