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

/// Why `v` of element type S is not exactly a `T`, and what saturating gives: "value -1 (I64) is
/// out of the range of U8 [0, 255]; LoadOptions::saturate would load it as 0".
template <Element T, Element S>
[[nodiscard]] std::string conversion_problem(S v) {
    const syncblob::detail::Converted<T> c = syncblob::detail::convert_checked<T>(v);
    std::string why;
    if constexpr (std::same_as<T, bool>) {
        why = "is neither 0 nor 1, which BOOL needs";
    } else if constexpr (std::integral<T>) {
        bool out_of_range = true;  // an integer source is inexact only when out of range
        if constexpr (!std::integral<S>) {
            const double d = syncblob::detail::as_double(v);
            out_of_range = d >= static_cast<double>(std::numeric_limits<T>::max()) + 1.0 ||
                           d < static_cast<double>(std::numeric_limits<T>::min());
            if (d != d) {
                why = "is NaN, which " + std::string(element_name<T>()) + " cannot hold";
            }
        }
        if (why.empty()) {
            why = out_of_range ? "is out of the range of " + std::string(element_name<T>()) + " [" +
                                     std::to_string(std::numeric_limits<T>::min()) + ", " +
                                     std::to_string(std::numeric_limits<T>::max()) + "]"
                               : "is not a whole number, which " + std::string(element_name<T>()) + " needs";
        }
    } else {
        const double d = syncblob::detail::as_double(v);
        const std::string name(element_name<T>());
        if (syncblob::detail::is_infinite(d)) {
            why = "is infinite, which " + name + " cannot hold";
        } else if (d <= 0 && syncblob::detail::as_double(c.value) > 0) {  // a type of positive values only (F8_E8M0)
            why = "is not positive, which " + name + " needs (its least value is " + element_text(c.value) + ")";
        } else {
            why = "overflows " + name + " (its largest finite value is " +
                  element_text(syncblob::detail::largest_finite<T>()) + ")";
        }
    }
    return "value " + element_text(v) + " (" + std::string(element_name<S>()) + ") " + why +
           "; LoadOptions::saturate would load it as " + element_text(c.value);
}

/// `conversion_problem` for the little-endian element of dtype `from` at `p`.
template <Element T>
[[nodiscard]] std::string conversion_problem_at(Dtype from, const void* p) {
    return syncblob::detail::visit_dtype(
        from, [&]<class S>(std::type_identity<S>) { return conversion_problem<T>(load_little_endian<S>(p)); });
}

}  // namespace io::detail

SYNCBLOB_END_NAMESPACE
