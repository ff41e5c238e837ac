// SPDX-License-Identifier: BSD-2-Clause
#pragma once
// What every fuzzer shares: the limit readers get, and a check that aborts (a finding) when a
// property of a successful read does not hold.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>

#include <syncblob/io/file.hpp>

namespace fuzz {

/// Readers may allocate at most this much per input: a hostile size field must be refused, never
/// turned into a huge allocation (libFuzzer's -rss_limit_mb would report that as a finding).
inline constexpr std::uint64_t max_bytes = std::uint64_t{64} << 20;

inline syncblob::io::LoadOptions options(bool convert, bool reshape = true) {
    syncblob::io::LoadOptions o;
    o.max_bytes = max_bytes;
    o.convert = convert;
    o.reshape = reshape;
    return o;
}

/// Aborts with a message when `ok` is false.
inline void require(bool ok, const char* what) {
    if (!ok) {
        std::fprintf(stderr, "fuzz property violated: %s\n", what);
        std::abort();
    }
}

/// Bitwise equality of two spans of elements.
template <class T>
bool same_bits(std::span<const T> a, std::span<const T> b) {
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size_bytes()) == 0);
}

}  // namespace fuzz
