// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Internal, shared beyond its folder: used by the checkpoint loader's device conversion (checkpoint/), so it
/// sits outside detail/; its names stay in a detail namespace and are no user API.
///
/// The converting loads' side of element conversion: what a load does with a value its blob's type
/// cannot hold (`ConvertRule`), and reading raw little-endian elements of a file's dtype into a
/// blob's type. The rule itself, for every pair of element types, is `detail::convert_checked`
/// (syncblob/core/convert.hpp), which the CUDA kernels share; docs/file-safety.md prints it.

#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../core/convert.hpp"
#include "../core/element.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace io::detail {

/// What a converting load does with a value its target type cannot hold exactly.
enum class ConvertRule : std::uint8_t {
    exact,     ///< refuse it (the load throws a FormatError naming the element)
    saturate,  ///< take the saturated value `convert_checked` gives
};

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

/// The element of type `S` stored little-endian at `p` (any alignment; any byte of a BOOL that is
/// not 0 is true: a raw copy of 2 into a bool would be undefined).
template <class S>
[[nodiscard]] S load_little_endian(const void* p) noexcept {
    if constexpr (std::same_as<S, bool>) {
        return *static_cast<const unsigned char*>(p) != 0;
    } else {
        S v;
        std::memcpy(&v, p, sizeof(S));
        if constexpr (std::endian::native == std::endian::big && sizeof(S) > 1) {
            v = byteswap_value(v);
        }
        return v;
    }
}

/// Converts `n` little-endian elements of dtype `from` at `src` (any alignment) into `dst` by the
/// one rule (`convert_checked`). Returns `n`, or under `ConvertRule::exact` the index of the first element that is
/// not exact (`dst` is then written up to it, not beyond).
template <Element T>
[[nodiscard]] std::size_t convert_elements(Dtype from, const void* src, std::size_t n, T* dst,
                                           ConvertRule rule) noexcept {
    return syncblob::detail::visit_dtype(from, [&]<class S>(std::type_identity<S>) -> std::size_t {
        const auto* p = static_cast<const unsigned char*>(src);
        for (std::size_t i = 0; i < n; ++i, p += sizeof(S)) {
            const syncblob::detail::Converted<T> c = syncblob::detail::convert_checked<T>(load_little_endian<S>(p));
            if (!c.exact && rule == ConvertRule::exact) {
                return i;
            }
            dst[i] = c.value;
        }
        return n;
    });
}

}  // namespace io::detail

SYNCBLOB_END_NAMESPACE
