// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// One element to and from a JSON value, exactly: floats as the shortest decimal that reads back
/// to the same value (half and bfloat16 through float), NaN and infinities as the strings "NaN",
/// "Infinity" and "-Infinity", 64-bit integers as JSON integers, bool as true/false.

#include <charconv>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include <nlohmann/json.hpp>

#include "../../core/element.hpp"
#include "convert.hpp"
#include "convert_message.hpp"
#include "format_error.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace detail::json_io {

using json = nlohmann::json;

template <class T>
inline constexpr bool is_float16 = std::same_as<T, half> || std::same_as<T, bfloat16>;

/// The double whose shortest decimal form is that of float `f` (0.1f is written 0.1, not
/// 0.10000000149011612), when it reads back to `f`; the exact value of `f` otherwise.
[[nodiscard]] inline double shortest_double(float f) noexcept {
    char buf[32];
    const auto written = std::to_chars(buf, buf + sizeof buf, f);
    double d = 0;
    const auto read = std::from_chars(buf, written.ptr, d);
    if (written.ec != std::errc{} || read.ec != std::errc{} || static_cast<float>(d) != f) {
        return static_cast<double>(f);
    }
    return d;
}

/// The JSON value of one element.
template <Element T>
[[nodiscard]] json encode(T v) {
    if constexpr (std::same_as<T, bool>) {
        return json(v);
    } else if constexpr (std::floating_point<T> || is_float16<T>) {
        const auto wide = [&] {
            if constexpr (std::same_as<T, double>) {
                return v;
            } else {
                return static_cast<float>(v);
            }
        }();
        if (std::isnan(wide)) {
            return json("NaN");
        }
        if (std::isinf(wide)) {
            return json(wide > 0 ? "Infinity" : "-Infinity");
        }
        if constexpr (std::same_as<T, double>) {
            return json(wide);
        } else {
            return json(shortest_double(wide));
        }
    } else if constexpr (std::is_signed_v<T>) {
        return json(static_cast<std::int64_t>(v));
    } else {
        return json(static_cast<std::uint64_t>(v));
    }
}

/// Where a value sits, for error messages: "<source>: data[12]: ...".
struct Place {
    std::string_view source;
    std::string_view field;
    std::size_t index;

    [[noreturn]] void fail(std::string_view what) const {
        io::throw_format_error(source, std::string(field) + "[" + std::to_string(index) + "]", what);
    }
};

[[nodiscard]] inline std::string describe(const json& v) {
    if (v.is_string() || v.is_number() || v.is_boolean() || v.is_null()) {
        std::string text = v.dump();
        if (text.size() > 40) {
            text = text.substr(0, 37) + "...";
        }
        return std::string(v.type_name()) + " " + text;
    }
    return v.type_name();
}

template <std::integral T>
[[nodiscard]] std::string range_text() {
    return "an integer in [" + std::to_string(std::numeric_limits<T>::min()) + ", " +
           std::to_string(std::numeric_limits<T>::max()) + "] for " + std::string(element_name<T>());
}

/// One element of dtype `S` from its JSON value. \throws FormatError naming the place.
template <Element S>
[[nodiscard]] S decode(const json& v, const Place& at) {
    if constexpr (std::same_as<S, bool>) {
        if (!v.is_boolean()) {
            at.fail("expected true or false for BOOL, found " + describe(v));
        }
        return v.get<bool>();
    } else if constexpr (std::floating_point<S> || is_float16<S>) {
        double d = 0;
        if (v.is_number()) {
            d = v.get<double>();
        } else if (v.is_string()) {
            const auto& s = v.get_ref<const std::string&>();
            if (s == "NaN") {
                d = std::numeric_limits<double>::quiet_NaN();
            } else if (s == "Infinity") {
                d = std::numeric_limits<double>::infinity();
            } else if (s == "-Infinity") {
                d = -std::numeric_limits<double>::infinity();
            } else {
                at.fail("expected a number, \"NaN\", \"Infinity\" or \"-Infinity\", found " + describe(v));
            }
        } else {
            at.fail("expected a number for " + std::string(element_name<S>()) + ", found " + describe(v));
        }
        if constexpr (std::same_as<S, double>) {
            return d;
        } else {
            // Past FLT_MAX plus half an ulp a double rounds to infinity; below, to at most FLT_MAX.
            constexpr double float_limit = 0x1.ffffffp127;
            constexpr auto float_max = std::numeric_limits<float>::max();
            if (std::isfinite(d) && std::fabs(d) >= float_limit) {
                at.fail("value " + v.dump() + " out of range for " + std::string(element_name<S>()));
            }
            const float f = std::fabs(d) > static_cast<double>(float_max) && std::isfinite(d)
                                ? std::copysign(float_max, static_cast<float>(d > 0 ? 1 : -1))
                                : static_cast<float>(d);
            if constexpr (std::same_as<S, float>) {
                return f;
            } else {
                const S narrow(f);
                if (std::isfinite(f) && !std::isfinite(static_cast<float>(narrow))) {
                    at.fail("value " + v.dump() + " out of range for " + std::string(element_name<S>()));
                }
                return narrow;
            }
        }
    } else {
        if (!v.is_number_integer()) {
            at.fail("expected " + range_text<S>() + ", found " + describe(v));
        }
        if (v.is_number_unsigned()) {
            const auto u = v.get<std::uint64_t>();
            if (std::cmp_greater(u, std::numeric_limits<S>::max())) {
                at.fail("expected " + range_text<S>() + ", found " + std::to_string(u));
            }
            return static_cast<S>(u);
        }
        const auto i = v.get<std::int64_t>();
        if (!std::in_range<S>(i)) {
            at.fail("expected " + range_text<S>() + ", found " + std::to_string(i));
        }
        return static_cast<S>(i);
    }
}

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

/// Decodes the `n` values of a JSON array of dtype `from` into `dst`, converting to `T` by `rule`.
template <Element T>
void decode_array(const json& array, Dtype from, T* dst, std::string_view source, std::string_view field,
                  ConvertRule rule) {
    visit_dtype(from, [&]<class S>(std::type_identity<S>) {
        std::size_t i = 0;
        for (const json& v : array) {
            const Place at{source, field, i};
            const S s = decode<S>(v, at);
            const Converted<T> c = convert_checked<T>(s);
            if (!c.exact && rule == ConvertRule::exact) {
                at.fail(conversion_problem<T>(s));
            }
            dst[i++] = c.value;
        }
    });
}

}  // namespace detail::json_io

SYNCBLOB_END_NAMESPACE
