// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The bodies of syncblob's custom CUDA kernels, as `SYNCBLOB_HOST_DEVICE` functors over an
/// element index (the math operations' through adapters of math/operations.hpp), and the
/// launch geometry of the reductions. Plain C++: the host runs the same
/// bodies in tests (and `emulate_reduce` replays a reduction in the device's exact order).

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "../../core/convert.hpp"
#include "../../core/element.hpp"
#include "../../math/operations.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace cuda::detail {

/// Threads per block of every custom kernel.
inline constexpr int block_threads = 256;
/// Most blocks a reduction uses: the grid, and so the summation order, depends on `n` only.
inline constexpr std::int64_t max_reduce_blocks = 1024;
/// Most blocks an element-wise kernel uses (each thread then strides over the rest).
inline constexpr std::int64_t max_for_each_blocks = 65535;

/// Elements of `T` a thread loads before it uses any (`bytes` of each array, at least one element):
/// a thread of a memory-bound kernel keeps that many loads in flight instead of one.
template <class T, std::size_t bytes>
inline constexpr int loads_in_flight = sizeof(T) >= bytes ? 1 : static_cast<int>(bytes / sizeof(T));

/// Blocks for `n` elements: one per `block_threads`, at least 1, at most `cap`.
SYNCBLOB_HOST_DEVICE constexpr std::int64_t blocks_for(std::int64_t n, std::int64_t cap) noexcept {
    const std::int64_t b = (n + block_threads - 1) / block_threads;
    return b < 1 ? 1 : (b > cap ? cap : b);
}

/// The pointers of an operation's inputs (none for some).
template <class T, std::size_t N>
struct Inputs {
    const T* at[N];
};
template <class T>
struct Inputs<T, 0> {};

/// A reduction's body: `term(sum, i)` is `sum` plus the term of element i, as the operation `Op`
/// (math/operations.hpp) computes it, one element at a time in the accumulator type.
template <class Op, FloatingElement T, std::size_t N>
struct ReduceAt {
    using value_type = accumulator_t<T>;
    static constexpr int loads_ahead = loads_in_flight<T, 16>;
    Op op;
    Inputs<T, N> in;
    SYNCBLOB_HOST_DEVICE value_type operator()(value_type sum, std::int64_t i) const noexcept {
        return step(sum, i, std::make_index_sequence<N>{});
    }
    /// The terms of elements i, i + stride, … (K of them) added to `sum` in that order, as K calls
    /// of `operator()` add them; every element is loaded before the first is added.
    template <int K>
    SYNCBLOB_HOST_DEVICE value_type steps(value_type sum, std::int64_t i, std::int64_t stride) const noexcept {
        return steps<K>(sum, i, stride, std::make_index_sequence<N>{});
    }

private:
    template <std::size_t... I>
    SYNCBLOB_HOST_DEVICE value_type step(value_type sum, std::int64_t i, std::index_sequence<I...>) const noexcept {
        using L = math::detail::ScalarLanes<T>;
        return op.step(L{}, sum, L::load(in.at[I] + i)...);
    }
    template <int K, std::size_t... I>
    SYNCBLOB_HOST_DEVICE value_type steps(value_type sum, std::int64_t i, std::int64_t stride,
                                          std::index_sequence<I...>) const noexcept {
        using L = math::detail::ScalarLanes<T>;
        T loaded[N][static_cast<std::size_t>(K)];
        for (int k = 0; k < K; ++k) {
            ((loaded[I][k] = in.at[I][i + k * stride]), ...);
        }
        for (int k = 0; k < K; ++k) {
            sum = op.step(L{}, sum, L::load(&loaded[I][k])...);
        }
        return sum;
    }
};

/// An element-wise body: `body(i)` sets y[i] to the operation's value of y[i] and the inputs' element i.
template <class Op, FloatingElement T, std::size_t N>
struct TransformAt {
    static constexpr int loads_ahead = loads_in_flight<T, 16>;
    Op op;
    T* y;
    Inputs<T, N> in;
    SYNCBLOB_HOST_DEVICE void operator()(std::int64_t i) const noexcept { apply(i, std::make_index_sequence<N>{}); }
    /// What `operator()` does for elements i, i + stride, … (K of them), every element loaded
    /// before the first is stored.
    template <int K>
    SYNCBLOB_HOST_DEVICE void many(std::int64_t i, std::int64_t stride) const noexcept {
        many<K>(i, stride, std::make_index_sequence<N>{});
    }

private:
    template <std::size_t... I>
    SYNCBLOB_HOST_DEVICE void apply(std::int64_t i, std::index_sequence<I...>) const noexcept {
        using L = math::detail::ScalarLanes<T>;
        L::store(y + i, op.apply(L{}, L::load(y + i), L::load(in.at[I] + i)...));
    }
    template <int K, std::size_t... I>
    SYNCBLOB_HOST_DEVICE void many(std::int64_t i, std::int64_t stride, std::index_sequence<I...>) const noexcept {
        using L = math::detail::ScalarLanes<T>;
        T own[static_cast<std::size_t>(K)];
        [[maybe_unused]] T loaded[N + 1][static_cast<std::size_t>(K)];  // one row more than the inputs: N may be 0
        for (int k = 0; k < K; ++k) {
            own[k] = y[i + k * stride];
            ((loaded[I][k] = in.at[I][i + k * stride]), ...);
        }
        for (int k = 0; k < K; ++k) {
            L::store(y + i + k * stride, op.apply(L{}, L::load(&own[k]), L::load(&loaded[I][k])...));
        }
    }
};

/// The body of a reduction of `op` over x and the inputs.
template <class Op, FloatingElement T, std::same_as<T>... In>
[[nodiscard]] ReduceAt<Op, T, 1 + sizeof...(In)> reduce_at(Op op, const T* x, const In*... in) noexcept {
    return {op, {{x, in...}}};
}
/// The body of `op` on y (read and written) and the inputs.
template <class Op, FloatingElement T, std::same_as<T>... In>
[[nodiscard]] TransformAt<Op, T, sizeof...(In)> transform_at(Op op, T* y, const In*... in) noexcept {
    if constexpr (sizeof...(In) == 0) {
        return {op, y, {}};
    } else {
        return {op, y, {{in...}}};
    }
}

template <Element T>
struct FillAt {
    T* dst;
    T value;
    SYNCBLOB_HOST_DEVICE void operator()(std::int64_t i) const noexcept { dst[i] = value; }
};

/// dst[i] = src[i] converted by the one rule (syncblob::detail::convert_checked): a value `To` holds
/// exactly converts to it, any other takes the saturated value the rule gives. With `first_inexact`,
/// the least index of such a value is kept there (atomically; start it at the largest
/// `unsigned long long`).
template <Element To, Element From>
struct ConvertAt {
    To* dst;
    const From* src;
    unsigned long long* first_inexact = nullptr;
    SYNCBLOB_HOST_DEVICE void operator()(std::int64_t i) const noexcept {
        const syncblob::detail::Converted<To> c = syncblob::detail::convert_checked<To>(src[i]);
        dst[i] = c.value;
        if (!c.exact && first_inexact != nullptr) {
            const auto index = static_cast<unsigned long long>(i);
#if defined(__CUDA_ARCH__)
            atomicMin(first_inexact, index);
#else
            *first_inexact = index < *first_inexact ? index : *first_inexact;
#endif
        }
    }
};

/// The summand type of a reduction term.
template <class Term>
using term_value_t = typename Term::value_type;

/// A body that loads several elements ahead (`ReduceAt`, `TransformAt`): `loads_ahead` of them.
template <class Term>
concept LoadsAhead = requires {
    Term::loads_ahead;
};

/// One thread's share of a reduction: the terms start, start + stride, … below n, summed in order
/// (several loaded ahead where the term can, in the same order).
template <class Term>
SYNCBLOB_HOST_DEVICE term_value_t<Term> strided_sum(const Term& term, std::int64_t n, std::int64_t start,
                                                    std::int64_t stride) noexcept {
    term_value_t<Term> sum{0};
    std::int64_t i = start;
    if constexpr (LoadsAhead<Term>) {
        constexpr int k = Term::loads_ahead;
        for (; i + (k - 1) * stride < n; i += k * stride) {
            sum = term.template steps<k>(sum, i, stride);
        }
    }
    for (; i < n; i += stride) {
        sum = term(sum, i);
    }
    return sum;
}

/// The block's tree reduction into values[0], done by one thread in the order the block's threads
/// do it in parallel (at each step, thread t < s adds values[t + s]; no step reads what it writes).
template <class V>
SYNCBLOB_HOST_DEVICE void tree_reduce(V* values) noexcept {
    for (int s = block_threads / 2; s > 0; s >>= 1) {
        for (int t = 0; t < s; ++t) {
            values[t] += values[t + s];
        }
    }
}

/// The blocks' partial sums added in block order (on the host after the kernel, or by one device
/// thread for a result left on the device).
template <class V>
[[nodiscard]] SYNCBLOB_HOST_DEVICE V sum_partials(const V* partials, std::int64_t count) noexcept {
    V sum{0};
    for (std::int64_t b = 0; b < count; ++b) {
        sum += partials[b];
    }
    return sum;
}

/// Replays on the host, in the same order, the reduction the device computes for `term` over `n`
/// elements (tests compare it with the device and with a plain host sum).
template <class Term>
[[nodiscard]] term_value_t<Term> emulate_reduce(const Term& term, std::int64_t n) {
    using V = term_value_t<Term>;
    if (n <= 0) {
        return V{0};
    }
    const std::int64_t blocks = blocks_for(n, max_reduce_blocks);
    const std::int64_t stride = blocks * block_threads;
    std::vector<V> partials(static_cast<std::size_t>(blocks));
    std::array<V, block_threads> cache{};
    for (std::int64_t b = 0; b < blocks; ++b) {
        for (int t = 0; t < block_threads; ++t) {
            cache[static_cast<std::size_t>(t)] = strided_sum(term, n, b * block_threads + t, stride);
        }
        tree_reduce(cache.data());
        partials[static_cast<std::size_t>(b)] = cache[0];
    }
    return sum_partials(partials.data(), blocks);
}

/// Runs an element-wise body over [0, n) on the host, as the device's grid-stride loop does.
template <class Op>
void for_each_on_host(const Op& op, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) {
        op(i);
    }
}

}  // namespace cuda::detail

SYNCBLOB_END_NAMESPACE
