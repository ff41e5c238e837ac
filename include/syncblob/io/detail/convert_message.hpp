// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// What a converting load says when it refuses a value (`ConvertRule::exact`): the value as
/// written in its own dtype, why the target type cannot hold it, and what
/// `LoadOptions::saturate` would load instead. Host code only; the rules are in convert.hpp.

#include <charconv>
#include <concepts>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>

#include "../../core/convert.hpp"
#include "../../core/element.hpp"
#include "../convert.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace io::detail {

/// An element as text: integers exactly, floating values as the shortest decimal that reads back.
template <Element S>
[[nodiscard]] std::string element_text(S v) {
    if constexpr (std::same_as<S, bool>) {
        return v ? "true" : "false";
    } else if constexpr (std::integral<S>) {
        return std::to_string(v);
    } else {
        char buf[64];
        const auto r = [&] {
            if constexpr (std::same_as<S, double>) {
                return std::to_chars(buf, buf + sizeof buf, v);
            } else {
                return std::to_chars(buf, buf + sizeof buf, static_cast<float>(v));
            }
        }();
        return std::string(buf, r.ptr);
    }
}

/// Why a value is not exactly its target type.
enum class Refusal : std::uint8_t { not_bool, nan, out_of_range, not_whole, infinite, not_positive, overflow };

/// Why `v` of element type S is not exactly a `T`, given what saturating gives (`saturated`).
template <Element T, Element S>
[[nodiscard]] Refusal refusal_of(S v, T saturated) {
    if constexpr (std::same_as<T, bool>) {
        return Refusal::not_bool;
    } else if constexpr (std::integral<T>) {
        if constexpr (std::integral<S>) {
            return Refusal::out_of_range;  // an integer source is inexact only when out of range
        } else {
            const double d = syncblob::detail::as_double(v);
            if (d != d) {
                return Refusal::nan;
            }
            const bool out_of_range = d >= static_cast<double>(std::numeric_limits<T>::max()) + 1.0 ||
                                      d < static_cast<double>(std::numeric_limits<T>::min());
            return out_of_range ? Refusal::out_of_range : Refusal::not_whole;
        }
    } else {
        const double d = syncblob::detail::as_double(v);
        if (syncblob::detail::is_infinite(d)) {
            return Refusal::infinite;
        }
        if (d <= 0 && syncblob::detail::as_double(saturated) > 0) {  // a type of positive values only (F8_E8M0)
            return Refusal::not_positive;
        }
        return Refusal::overflow;
    }
}

/// What bounds a `T` for a refusal's message: its range for an integer type, its largest finite
/// value for a floating one.
template <Element T>
[[nodiscard]] std::string bound_text() {
    if constexpr (std::same_as<T, bool>) {
        return {};
    } else if constexpr (std::integral<T>) {
        return std::to_string(std::numeric_limits<T>::min()) + ", " + std::to_string(std::numeric_limits<T>::max());
    } else {
        return element_text(syncblob::detail::largest_finite<T>());
    }
}

/// A refusal's message from its parts, each made knowing one element type only (the text is built
/// once here, not once for every pair of types).
[[nodiscard]] inline std::string refusal_message(const std::string& value, std::string_view from, Refusal why,
                                                 std::string_view to, const std::string& bound,
                                                 const std::string& saturated) {
    const std::string name(to);
    std::string text = "value " + value + " (" + std::string(from) + ") ";
    switch (why) {
        case Refusal::not_bool:
            text += "is neither 0 nor 1, which BOOL needs";
            break;
        case Refusal::nan:
            text += "is NaN, which " + name + " cannot hold";
            break;
        case Refusal::out_of_range:
            text += "is out of the range of " + name + " [" + bound + "]";
            break;
        case Refusal::not_whole:
            text += "is not a whole number, which " + name + " needs";
            break;
        case Refusal::infinite:
            text += "is infinite, which " + name + " cannot hold";
            break;
        case Refusal::not_positive:
            text += "is not positive, which " + name + " needs (its least value is " + saturated + ")";
            break;
        case Refusal::overflow:
            text += "overflows " + name + " (its largest finite value is " + bound + ")";
            break;
    }
    return text + "; LoadOptions::saturate would load it as " + saturated;
}

/// Why `v` of element type S is not exactly a `T`, and what saturating gives: "value -1 (I64) is
/// out of the range of U8 [0, 255]; LoadOptions::saturate would load it as 0".
template <Element T, Element S>
[[nodiscard]] std::string conversion_problem(S v) {
    const T saturated = syncblob::detail::convert_checked<T>(v).value;
    return refusal_message(element_text(v), element_name<S>(), refusal_of<T>(v, saturated), element_name<T>(),
                           bound_text<T>(), element_text(saturated));
}

/// `conversion_problem` for the little-endian element of dtype `from` at `p`.
template <Element T>
[[nodiscard]] std::string conversion_problem_at(Dtype from, const void* p) {
    return syncblob::detail::visit_dtype(
        from, [&]<class S>(std::type_identity<S>) { return conversion_problem<T>(load_little_endian<S>(p)); });
}

}  // namespace io::detail

SYNCBLOB_END_NAMESPACE
