// SPDX-License-Identifier: BSD-2-Clause
#pragma once
// Test values shared by the host tests of the kernel bodies and the device tests of the kernels.

#include <cmath>
#include <concepts>
#include <cstdint>
#include <limits>
#include <tuple>
#include <type_traits>
#include <vector>

#include <syncblob/core/element.hpp>

namespace syncblob_cuda_test {

using syncblob::bfloat16;
using syncblob::half;

using FloatingTypes = std::tuple<float, double, half, bfloat16>;
/// Every element type of the table, the 8-bit floats included.
using AllElements = syncblob::ElementTypes;

/// Multiples of 1/64 in [-4, 4): exact in every floating element type, as are their squares,
/// products and differences in the accumulator type.
template <class T>
std::vector<T> test_values(std::int64_t n, int seed) {
    std::vector<T> out(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) {
        const auto k = static_cast<int>((i * 37 + seed * 101) % 512) - 256;
        out[static_cast<std::size_t>(i)] = static_cast<T>(static_cast<float>(k) / 64.0f);
    }
    return out;
}

template <class T>
double as_double(T v) {
    return static_cast<double>(static_cast<float>(v));
}
template <>
inline double as_double<double>(double v) {
    return v;
}

/// Unit roundoff of the accumulator of T.
template <class T>
double unit_roundoff() {
    return std::same_as<T, double> ? std::ldexp(1.0, -53) : std::ldexp(1.0, -24);
}

/// Source values that exercise every conversion rule: zero, fractions, negatives, the limits of the
/// smaller types, values past them, infinities and NaN (for floating sources).
template <class From>
std::vector<From> conversion_sources() {
    std::vector<From> out;
    if constexpr (std::same_as<From, bool>) {
        out = {false, true};
    } else if constexpr (std::integral<From>) {
        for (const long long v : {0LL, 1LL, -1LL, 100LL, 127LL, 128LL, 255LL, 256LL, 300LL, -129LL, 32767LL, 65536LL,
                                  2147483647LL, -2147483648LL, 4294967296LL, 9007199254740993LL}) {
            out.push_back(static_cast<From>(v));  // wraps for the narrow types: that is the point
        }
        out.push_back(std::numeric_limits<From>::max());
        out.push_back(std::numeric_limits<From>::min());
    } else {
        for (const double v : {0.0, -0.0, 0.75, -0.75, 1.5, -2.5, 127.9, 128.0, 255.5, 256.0, -129.0, 65504.0, 70000.0,
                               -70000.0, 3e9, -3e9, 1e19, -1e19, 1e30}) {
            out.push_back(static_cast<From>(static_cast<float>(v)));
        }
        out.push_back(static_cast<From>(std::numeric_limits<float>::infinity()));
        out.push_back(static_cast<From>(-std::numeric_limits<float>::infinity()));
        out.push_back(static_cast<From>(std::numeric_limits<float>::quiet_NaN()));
    }
    return out;
}

/// Equal values (NaN equals NaN, and the sign of zero counts).
template <class T>
bool same_value(T a, T b) {
    if constexpr (std::is_class_v<T> || std::floating_point<T>) {  // half, bfloat16, the 8-bit floats
        const double da = as_double(a);
        const double db = as_double(b);
        return (std::isnan(da) && std::isnan(db)) || (da == db && std::signbit(da) == std::signbit(db));
    } else {
        return a == b;
    }
}

}  // namespace syncblob_cuda_test
