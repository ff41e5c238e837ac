// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// One element to and from a JSON value, exactly: floats as the shortest decimal that reads back
/// to the same value (half, bfloat16 and the 8-bit floats through float), NaN and infinities as the strings "NaN",
/// "Infinity" and "-Infinity", 64-bit integers as JSON integers, bool as true/false. Values are
/// read from the streaming reader's scalars (`parse::Scalar`), whether they come from text
/// or from a document in memory.

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

#include "../../core/convert.hpp"
#include "../../core/element.hpp"
#include "../parse/json_reader.hpp"
#include "format_error.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace io::detail::json_io {

using json = nlohmann::json;
using parse::Scalar;
using parse::ScalarKind;

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
    } else if constexpr (syncblob::detail::FloatingValue<T>) {
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

template <std::integral T>
[[nodiscard]] std::string range_text() {
    return "an integer in [" + std::to_string(std::numeric_limits<T>::min()) + ", " +
           std::to_string(std::numeric_limits<T>::max()) + "] for " + std::string(element_name<T>());
}

// A number or one of the strings "NaN", "Infinity", "-Infinity" as a double.
[[nodiscard]] inline double floating_value(const Scalar& v, std::string_view dtype, const Place& at) {
    switch (v.kind) {
        case ScalarKind::integer:
            return static_cast<double>(v.integer);
        case ScalarKind::unsigned_integer:
            return static_cast<double>(v.unsigned_integer);
        case ScalarKind::floating:
            return v.floating;
        case ScalarKind::string:
            if (v.text == "NaN") {
                return std::numeric_limits<double>::quiet_NaN();
            }
            if (v.text == "Infinity" || v.text == "-Infinity") {
                return v.text[0] == '-' ? -std::numeric_limits<double>::infinity()
                                        : std::numeric_limits<double>::infinity();
            }
            at.fail("expected a number, \"NaN\", \"Infinity\" or \"-Infinity\", found " + v.describe());
        default:
            at.fail("expected a number for " + std::string(dtype) + ", found " + v.describe());
    }
}

/// One element of dtype `S` from its JSON value. \throws FormatError naming the place.
template <Element S>
[[nodiscard]] S decode(const Scalar& v, const Place& at) {
    if constexpr (std::same_as<S, bool>) {
        if (v.kind != ScalarKind::boolean) {
            at.fail("expected true or false for BOOL, found " + v.describe());
        }
        return v.boolean;
    } else if constexpr (syncblob::detail::FloatingValue<S>) {
        // Rounded to nearest by the one conversion; a finite value beyond the type's range (or an
        // infinity it lacks, or for F8_E8M0 a value that is not positive) is refused.
        const double d = floating_value(v, element_name<S>(), at);
        const syncblob::detail::Converted<S> c = syncblob::detail::convert_checked<S>(d);
        if (!c.exact) {
            at.fail("value " + v.describe() + " out of range for " + std::string(element_name<S>()));
        }
        return c.value;
    } else {
        if (v.kind == ScalarKind::unsigned_integer) {
            if (std::cmp_greater(v.unsigned_integer, std::numeric_limits<S>::max())) {
                at.fail("expected " + range_text<S>() + ", found " + std::to_string(v.unsigned_integer));
            }
            return static_cast<S>(v.unsigned_integer);
        }
        if (v.kind != ScalarKind::integer) {
            at.fail("expected " + range_text<S>() + ", found " + v.describe());
        }
        if (!std::in_range<S>(v.integer)) {
            at.fail("expected " + range_text<S>() + ", found " + std::to_string(v.integer));
        }
        return static_cast<S>(v.integer);
    }
}

/// The scalar of a document value that is not an object or an array (`text` is left empty for
/// numbers: `Scalar::describe` then formats the value).
[[nodiscard]] inline Scalar scalar_of(const json& v) {
    Scalar s;
    switch (v.type()) {
        case json::value_t::boolean:
            s.kind = ScalarKind::boolean;
            s.boolean = v.get<bool>();
            break;
        case json::value_t::number_integer:
            s.kind = ScalarKind::integer;
            s.integer = v.get<std::int64_t>();
            break;
        case json::value_t::number_unsigned:
            s.kind = ScalarKind::unsigned_integer;
            s.unsigned_integer = v.get<std::uint64_t>();
            break;
        case json::value_t::number_float:
            s.kind = ScalarKind::floating;
            s.floating = v.get<double>();
            break;
        case json::value_t::string:
            s.kind = ScalarKind::string;
            s.text = v.get_ref<const std::string&>();
            break;
        default:  // null, and binary values (which no JSON text holds)
            break;
    }
    return s;
}

/// Reports a document in memory to a reader's handler as the reader would report its text. The
/// handlers stop (throw) before they would descend past the levels a blob document has, so the
/// recursion stays shallow whatever `j` holds.
template <class Handler>
void emit(const json& j, Handler& handler) {
    if (j.is_object()) {
        handler.begin_object(0);
        for (auto it = j.begin(); it != j.end(); ++it) {
            handler.key(it.key(), 0);
            emit(it.value(), handler);
        }
        handler.end_object();
    } else if (j.is_array()) {
        handler.begin_array(0);
        for (const json& v : j) {
            emit(v, handler);
        }
        handler.end_array();
    } else {
        handler.scalar(scalar_of(j));
    }
}

}  // namespace io::detail::json_io

SYNCBLOB_END_NAMESPACE
