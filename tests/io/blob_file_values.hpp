// SPDX-License-Identifier: BSD-2-Clause
#pragma once
// Test values for every element type and the shapes the round-trip tests of the file formats
// (.npy, safetensors) run over.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <syncblob/syncblob.hpp>
#include <tuple>
#include <type_traits>
#include <vector>

namespace test {

using AllElements =
    std::tuple<float, double, syncblob::half, syncblob::bfloat16, std::int64_t, std::int32_t, std::int16_t, std::int8_t,
               std::uint64_t, std::uint32_t, std::uint16_t, std::uint8_t, bool>;

/// The 8-bit floats: safetensors holds them, `.npy` does not (NumPy has no standard dtype for them).
using Float8Elements = std::tuple<syncblob::float8_e4m3fn, syncblob::float8_e5m2, syncblob::float8_e8m0fnu>;

/// A value that differs between neighbours and exercises the sign and high bits of each type.
template <class T>
T value_at(std::size_t i, int salt = 0) {
    const auto k = static_cast<std::int64_t>(i) * 37 + salt * 11 - 50;
    if constexpr (std::is_same_v<T, bool>) {
        return (i + static_cast<std::size_t>(salt)) % 3 == 0;
    } else if constexpr (std::is_same_v<T, syncblob::half> || std::is_same_v<T, syncblob::bfloat16>) {
        return T(static_cast<float>(k % 500) * 0.25f);
    } else if constexpr (std::is_class_v<T>) {  // an 8-bit float: its bit patterns in turn, NaNs included
        return T::from_bits(static_cast<std::uint8_t>((k + 50) & 0xFF));
    } else if constexpr (std::is_floating_point_v<T>) {
        return static_cast<T>(static_cast<double>(k) * 0.125 + 1e-3);
    } else if constexpr (std::is_signed_v<T>) {
        return static_cast<T>(k * 1000003);
    } else {
        return static_cast<T>(static_cast<std::uint64_t>(k) * 0x9E3779B97F4A7C15ull);
    }
}

/// The shapes round trips cover: 0-d, zero-size, 1 to 4 axes and 32 axes.
inline std::vector<std::vector<std::int64_t>> round_trip_shapes() {
    std::vector<std::int64_t> many(32, 1);
    many[0] = 2;
    many[31] = 3;
    many[17] = 2;
    return {{}, {0}, {3, 0, 2}, {1}, {7}, {2, 3}, {2, 3, 4}, {1, 2, 1, 5}, many};
}

/// Fills data (and diff with another salt) with value_at.
template <class B>
void fill_values(B& blob) {
    using T = typename B::value_type;
    auto data = blob.mutable_host_data();
    for (std::size_t i = 0; i < data.size(); ++i) {
        data[i] = value_at<T>(i);
    }
    auto diff = blob.mutable_host_diff();
    for (std::size_t i = 0; i < diff.size(); ++i) {
        diff[i] = value_at<T>(i, 7);
    }
}

/// True when the two spans hold the same bytes.
template <class T>
bool same_bytes(std::span<const T> a, std::span<const T> b) {
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size_bytes()) == 0);
}

}  // namespace test
