// SPDX-License-Identifier: BSD-2-Clause
// Compiled with -march=native -O3 in every benchmark build (see CMakeLists.txt).
#include "bandwidth.hpp"

#include <bit>
#include <cmath>

namespace syncblob_bench {
namespace {

constexpr std::size_t lanes_n = 64;

// The writing probes flip sign bits (one XOR per word, a single-cycle operation at any vector width,
// so the probe is limited by memory and not by arithmetic), which keeps the kernels' floating-point
// data in the shared arrays finite and of the same magnitudes whichever probe ran last.
template <class U>
constexpr U sign_bit = static_cast<U>(U{1} << (8 * sizeof(U) - 1));

template <class U>
std::uint64_t run(Pattern pattern, U* a, const U* b, const U* c, std::size_t first, std::size_t last) {
    switch (pattern) {
        case Pattern::read1: {
            U lanes[lanes_n] = {};  // independent chains, so the adds never limit the loads
            std::size_t i = first;
            for (; i + lanes_n <= last; i += lanes_n) {
                for (std::size_t j = 0; j < lanes_n; ++j) {
                    lanes[j] += a[i + j];
                }
            }
            U s = 0;
            for (; i < last; ++i) {
                s += a[i];
            }
            for (const U v : lanes) {
                s += v;
            }
            return static_cast<std::uint64_t>(s);
        }
        case Pattern::read2: {
            U lanes[lanes_n] = {};
            std::size_t i = first;
            for (; i + lanes_n <= last; i += lanes_n) {
                for (std::size_t j = 0; j < lanes_n; ++j) {
                    lanes[j] += a[i + j] ^ b[i + j];
                }
            }
            U s = 0;
            for (; i < last; ++i) {
                s += a[i] ^ b[i];
            }
            for (const U v : lanes) {
                s += v;
            }
            return static_cast<std::uint64_t>(s);
        }
        case Pattern::rmw1:  // a = -a
#pragma GCC unroll 4
            for (std::size_t i = first; i < last; ++i) {
                a[i] ^= sign_bit<U>;
            }
            return static_cast<std::uint64_t>(a[first]);
        case Pattern::rmw2:  // a = a with its sign flipped where b is negative
#pragma GCC unroll 4
            for (std::size_t i = first; i < last; ++i) {
                a[i] ^= b[i] & sign_bit<U>;
            }
            return static_cast<std::uint64_t>(a[first]);
        case Pattern::triad:  // a = b with c's sign folded in
#pragma GCC unroll 4
            for (std::size_t i = first; i < last; ++i) {
                a[i] = b[i] ^ (c[i] & sign_bit<U>);
            }
            return static_cast<std::uint64_t>(a[first]);
        case Pattern::read1_abs:  // floating point: magnitudes()
            return 0;
    }
    return 0;
}

// Σ|a[i]| in independent lanes, as read1 sums words: each lane adds the magnitudes of its own
// elements (no reordering of any lane's additions, so the loop vectorises without -ffast-math).
// 512 bytes of lanes, eight 512-bit vectors (enough sums in flight to cover the add's latency on two
// ports), folded as a tree (a sequential sum of the lanes would cost more than the loop at 2^10).
template <class F>
std::uint64_t magnitudes(const F* a, std::size_t first, std::size_t last) {
    constexpr std::size_t n = 512 / sizeof(F);
    F lanes[n] = {};
    std::size_t i = first;
    for (; i + n <= last; i += n) {
        for (std::size_t j = 0; j < n; ++j) {
            lanes[j] += std::fabs(a[i + j]);
        }
    }
    for (std::size_t w = n / 2; w > 0; w /= 2) {
        for (std::size_t j = 0; j < w; ++j) {
            lanes[j] += lanes[j + w];
        }
    }
    F s = lanes[0];
    for (; i < last; ++i) {
        s += std::fabs(a[i]);
    }
    return std::bit_cast<std::conditional_t<sizeof(F) == 4, std::uint32_t, std::uint64_t>>(s);
}

}  // namespace

std::uint64_t bandwidth_probe(Pattern pattern, std::size_t word_bytes, void* a, const void* b, const void* c,
                              std::size_t first, std::size_t last) {
    if (pattern == Pattern::read1_abs) {
        return word_bytes == 4 ? magnitudes(static_cast<const float*>(a), first, last)
                               : magnitudes(static_cast<const double*>(a), first, last);
    }
    if (word_bytes == 4) {
        return run(pattern, static_cast<std::uint32_t*>(a), static_cast<const std::uint32_t*>(b),
                   static_cast<const std::uint32_t*>(c), first, last);
    }
    return run(pattern, static_cast<std::uint64_t*>(a), static_cast<const std::uint64_t*>(b),
               static_cast<const std::uint64_t*>(c), first, last);
}

}  // namespace syncblob_bench
