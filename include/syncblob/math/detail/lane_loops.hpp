// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The host kernels' two loops, written once over a lane type (operations.hpp): a reduction and an
/// element-wise loop, each ending in a scalar tail on `ScalarLanes`. Every path's kernel entry
/// (portable_kernels.hpp, x86_kernels.hpp) instantiates them with its lane type. They are always
/// inlined into that entry, which alone carries the path's instruction set and code placement, so
/// the loops are compiled for it and start where it puts them. Loads and stores are unaligned, so
/// borrowed memory of any alignment works.

#include <concepts>
#include <cstdint>

#include "../../core/config.hpp"
#include "../../core/element.hpp"
#include "../operations.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace math::detail {

/// Σ op.step over [0, n) of x and the inputs: eight independent sums (enough to cover the FMA
/// latency at two loads per cycle from L1), folded as a fixed tree, then the scalar tail.
template <class L, class Op, FloatingElement T, std::same_as<T>... In>
SYNCBLOB_ALWAYS_INLINE accumulator_t<T> reduce_lanes(Op op, std::int64_t n, const T* x, const In*... in) {
    using V = typename L::vec;
    constexpr std::int64_t w = L::width;
    V a[8] = {L::zero(), L::zero(), L::zero(), L::zero(), L::zero(), L::zero(), L::zero(), L::zero()};
    std::int64_t i = 0;
    for (; i + 8 * w <= n; i += 8 * w) {
        a[0] = op.step(L{}, a[0], L::load(x + i), L::load(in + i)...);
        a[1] = op.step(L{}, a[1], L::load(x + i + w), L::load(in + i + w)...);
        a[2] = op.step(L{}, a[2], L::load(x + i + 2 * w), L::load(in + i + 2 * w)...);
        a[3] = op.step(L{}, a[3], L::load(x + i + 3 * w), L::load(in + i + 3 * w)...);
        a[4] = op.step(L{}, a[4], L::load(x + i + 4 * w), L::load(in + i + 4 * w)...);
        a[5] = op.step(L{}, a[5], L::load(x + i + 5 * w), L::load(in + i + 5 * w)...);
        a[6] = op.step(L{}, a[6], L::load(x + i + 6 * w), L::load(in + i + 6 * w)...);
        a[7] = op.step(L{}, a[7], L::load(x + i + 7 * w), L::load(in + i + 7 * w)...);
    }
    for (; i + w <= n; i += w) {
        a[0] = op.step(L{}, a[0], L::load(x + i), L::load(in + i)...);
    }
    const V s = L::add(L::add(L::add(a[0], a[4]), L::add(a[2], a[6])), L::add(L::add(a[1], a[5]), L::add(a[3], a[7])));
    using S = ScalarLanes<T>;
    accumulator_t<T> sum = L::hsum(s);
    for (; i < n; ++i) {
        sum = op.step(S{}, sum, S::load(x + i), S::load(in + i)...);
    }
    return sum;
}

/// y = op.apply(y, inputs) over [0, n): two vectors a round, then one, then the scalar tail.
template <class L, class Op, FloatingElement T, std::same_as<T>... In>
SYNCBLOB_ALWAYS_INLINE void transform_lanes(Op op, std::int64_t n, T* y, const In*... in) {
    constexpr std::int64_t w = L::width;
    std::int64_t i = 0;
    for (; i + 2 * w <= n; i += 2 * w) {
        const auto r0 = op.apply(L{}, L::load(y + i), L::load(in + i)...);
        const auto r1 = op.apply(L{}, L::load(y + i + w), L::load(in + i + w)...);
        L::store(y + i, r0);
        L::store(y + i + w, r1);
    }
    for (; i + w <= n; i += w) {
        L::store(y + i, op.apply(L{}, L::load(y + i), L::load(in + i)...));
    }
    using S = ScalarLanes<T>;
    for (; i < n; ++i) {
        S::store(y + i, op.apply(S{}, S::load(y + i), S::load(in + i)...));
    }
}

}  // namespace math::detail

SYNCBLOB_END_NAMESPACE
