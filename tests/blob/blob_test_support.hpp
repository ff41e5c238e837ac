// SPDX-License-Identifier: BSD-2-Clause
#pragma once
// Type lists and value helpers shared by the Blob tests.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include <syncblob/blob.hpp>
#include <syncblob/sim/device.hpp>

namespace blob_test {

using syncblob::bfloat16;
using syncblob::half;

/// One element type under one allocator bundle: the unit the typed tests run over.
template <class T, class A>
struct Case {
    using element = T;
    using allocator = A;
    using blob = syncblob::Blob<T, A>;
};

/// Every element type of the table (core/element.hpp), the 8-bit floats included.
using Elements = syncblob::ElementTypes;

template <class List, class A>
struct with_allocator;
template <class... Ts, class A>
struct with_allocator<std::tuple<Ts...>, A> {
    using type = std::tuple<Case<Ts, A>...>;
};

/// Every element type under HostOnly, then under Simulated (32 cases).
using HostOnlyCases = with_allocator<Elements, syncblob::HostOnly>::type;
using SimulatedCases = with_allocator<Elements, syncblob::Simulated>::type;
using AllCases = decltype(std::tuple_cat(HostOnlyCases{}, SimulatedCases{}));

/// Every element type once, the allocators alternating: for behaviour the allocator does not change.
using ZipCases =
    std::tuple<Case<float, syncblob::HostOnly>, Case<double, syncblob::Simulated>, Case<half, syncblob::HostOnly>,
               Case<bfloat16, syncblob::Simulated>, Case<std::int8_t, syncblob::HostOnly>,
               Case<std::int16_t, syncblob::Simulated>, Case<std::int32_t, syncblob::HostOnly>,
               Case<std::int64_t, syncblob::Simulated>, Case<std::uint8_t, syncblob::Simulated>,
               Case<std::uint16_t, syncblob::HostOnly>, Case<std::uint32_t, syncblob::Simulated>,
               Case<std::uint64_t, syncblob::HostOnly>, Case<bool, syncblob::Simulated>,
               Case<syncblob::float8_e4m3fn, syncblob::HostOnly>, Case<syncblob::float8_e5m2, syncblob::Simulated>,
               Case<syncblob::float8_e8m0fnu, syncblob::HostOnly>>;

template <class A>
inline constexpr bool has_device = A::device_backend::has_device;

/// A distinct, exactly representable value for index `i` (never all zeros: the first-touch fill).
template <class T>
T make(std::int64_t i) {
    const auto k = static_cast<int>(i % 100) + 1;
    if constexpr (std::is_same_v<T, bool>) {
        return i % 3 != 0;
    } else if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) {
        return T(static_cast<float>(k));
    } else if constexpr (std::is_class_v<T>) {  // an 8-bit float: its k-th positive value
        return T::from_bits(static_cast<std::uint8_t>(k));
    } else {
        return static_cast<T>(k);
    }
}

template <class T>
double to_double(T v) {
    if constexpr (std::is_class_v<T>) {  // half, bfloat16, the 8-bit floats
        return static_cast<double>(static_cast<float>(v));
    } else if constexpr (std::is_same_v<T, bool>) {
        return v ? 1.0 : 0.0;
    } else {
        return static_cast<double>(v);
    }
}

/// The values of a span, as doubles (Catch prints them on failure).
template <class T>
std::vector<double> values(std::span<T> s) {
    std::vector<double> out;
    out.reserve(s.size());
    for (const auto& v : s) {
        out.push_back(to_double(static_cast<std::remove_const_t<T>>(v)));
    }
    return out;
}

/// make<T>(first), make<T>(first + 1), … as doubles: what `values` of a patterned span gives.
template <class T>
std::vector<double> pattern(std::int64_t n, std::int64_t first = 0) {
    std::vector<double> out;
    for (std::int64_t i = 0; i < n; ++i) {
        out.push_back(to_double(make<T>(first + i)));
    }
    return out;
}

template <class T>
std::vector<double> constant(std::int64_t n, T value) {
    return std::vector<double>(static_cast<std::size_t>(n), to_double(value));
}

/// Writes make<T>(first + i) into every element of a span.
template <class T>
void write_pattern(std::span<T> s, std::int64_t first = 0) {
    for (std::size_t i = 0; i < s.size(); ++i) {
        s[i] = make<T>(first + static_cast<std::int64_t>(i));
    }
}

/// The count() leading elements of device memory, read through the backend without touching the blob's state.
template <class T, class Backend>
std::vector<double> device_values(const T* device, std::int64_t n) {
    std::vector<unsigned char> raw(static_cast<std::size_t>(n) * sizeof(T));
    if (n != 0) {
        Backend::copy(raw.data(), device, raw.size(), syncblob::CopyKind::device_to_host,
                      typename Backend::stream_type{});
    }
    std::vector<double> out;
    for (std::size_t i = 0; i < static_cast<std::size_t>(n); ++i) {
        T v{};
        std::memcpy(&v, raw.data() + i * sizeof(T), sizeof(T));
        out.push_back(to_double(v));
    }
    return out;
}

/// The dtype name each element type must print as (written out here, not taken from the library).
template <class T>
constexpr std::string_view expected_dtype() {
    if constexpr (std::is_same_v<T, float>) {
        return "F32";
    } else if constexpr (std::is_same_v<T, double>) {
        return "F64";
    } else if constexpr (std::is_same_v<T, half>) {
        return "F16";
    } else if constexpr (std::is_same_v<T, bfloat16>) {
        return "BF16";
    } else if constexpr (std::is_same_v<T, std::int8_t>) {
        return "I8";
    } else if constexpr (std::is_same_v<T, std::int16_t>) {
        return "I16";
    } else if constexpr (std::is_same_v<T, std::int32_t>) {
        return "I32";
    } else if constexpr (std::is_same_v<T, std::int64_t>) {
        return "I64";
    } else if constexpr (std::is_same_v<T, std::uint8_t>) {
        return "U8";
    } else if constexpr (std::is_same_v<T, std::uint16_t>) {
        return "U16";
    } else if constexpr (std::is_same_v<T, std::uint32_t>) {
        return "U32";
    } else if constexpr (std::is_same_v<T, std::uint64_t>) {
        return "U64";
    } else if constexpr (std::is_same_v<T, syncblob::float8_e4m3fn>) {
        return "F8_E4M3";
    } else if constexpr (std::is_same_v<T, syncblob::float8_e5m2>) {
        return "F8_E5M2";
    } else if constexpr (std::is_same_v<T, syncblob::float8_e8m0fnu>) {
        return "F8_E8M0";
    } else {
        return "BOOL";
    }
}

/// What a first access reads, as a double: the value of the all-zero bit pattern the buffer is
/// filled with (0 and false; 2^-127 for float8_e8m0fnu, which has no zero).
template <class T>
double zero_fill_value() {
    T v{};
    std::memset(static_cast<void*>(&v), 0, sizeof v);
    return to_double(v);
}

/// `n` elements as a first access reads them.
template <class T>
std::vector<double> zeros(std::int64_t n) {
    return std::vector<double>(static_cast<std::size_t>(n), zero_fill_value<T>());
}

/// Stats with every counter zero.
inline bool no_activity(const syncblob::TransferStats& s) {
    return s == syncblob::TransferStats{};
}

}  // namespace blob_test
