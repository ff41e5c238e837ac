// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Internal, shared beyond its folder: used by the CUDA kernels and cuBLAS mapping (cuda/), so it sits
/// outside detail/; its names stay in a detail namespace and are no user API.
///
/// The math operations, each written once as a functor over a lane type, and the one-element lane
/// type. Every path instantiates these functors: the portable kernels (Eigen's packets), the AVX2
/// and AVX-512 kernels (x86_kernels.hpp), their scalar tails, and the custom CUDA kernels
/// (cuda/detail/functors.hpp); the simulated device runs the host kernels.
///
/// A lane type `L` computes on `L::vec`, a group of `L::width` values in `accumulator_t<T>`:
/// `load`/`store` convert from and to the element type, `zero`, `set1`, `add`, `sub`, `mul`, `abs`,
/// `madd(a, b, c)` (a·b + c: fused where the lane type says so) and `hsum` (the sum of the lanes).
/// An operation is
/// - a reduction: `step(L, sum, x...)` adds the term of one element of each input to a running sum.
///   Sums are the only reductions: running sums and partial sums are combined by `add`;
/// - or an element-wise operation: `apply(L, y, x...)` is the new value of y (the first array, read
///   and written) from y and the inputs.
/// `name` labels its kernels (the simulator's queue, CUDA errors). A new operation is a functor here
/// and one registration (a raw-pointer function in syncblob/math/host_kernels.hpp); the facade,
/// syncblob/math.hpp, gives it a blob-level name.

#include <concepts>
#include <cstdint>

#include "../core/config.hpp"
#include "../core/element.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace math::detail {

/// a · b, rounded on its own. On the device it is never fused with the addition that follows it: nvcc
/// contracts `sum + a * b` into one fused multiply-add by default, which rounds once instead of twice
/// and so gives sums the host's replay (`cuda::detail::emulate_reduce`) cannot reproduce bit for bit.
template <std::floating_point V>
SYNCBLOB_HOST_DEVICE SYNCBLOB_ALWAYS_INLINE V rounded_product(V a, V b) noexcept {
#if defined(__CUDA_ARCH__)
    if constexpr (std::same_as<V, float>) {
        return __fmul_rn(a, b);
    } else {
        return __dmul_rn(a, b);
    }
#else
    return a * b;
#endif
}

/// One element at a time, in `accumulator_t<T>`: the scalar tails of the vector kernels and every
/// element of a custom CUDA kernel. `madd` rounds the product on its own (`rounded_product`).
/// Always inlined, as is `rounded_product`: GCC does not inline a function into one compiled for
/// another tuning, and the x86 kernel entries carry their own (x86_kernels.hpp), so a `-march=native`
/// build otherwise called out of line for every element of a tail and gave each entry a stack frame.
template <FloatingElement T>
struct ScalarLanes {
    using vec = accumulator_t<T>;
    static constexpr int width = 1;
    SYNCBLOB_HOST_DEVICE SYNCBLOB_ALWAYS_INLINE static vec load(const T* p) noexcept { return static_cast<vec>(*p); }
    SYNCBLOB_HOST_DEVICE SYNCBLOB_ALWAYS_INLINE static void store(T* p, vec v) noexcept { *p = static_cast<T>(v); }
    SYNCBLOB_HOST_DEVICE SYNCBLOB_ALWAYS_INLINE static vec zero() noexcept { return vec{0}; }
    SYNCBLOB_HOST_DEVICE SYNCBLOB_ALWAYS_INLINE static vec set1(vec a) noexcept { return a; }
    SYNCBLOB_HOST_DEVICE SYNCBLOB_ALWAYS_INLINE static vec add(vec a, vec b) noexcept { return a + b; }
    SYNCBLOB_HOST_DEVICE SYNCBLOB_ALWAYS_INLINE static vec sub(vec a, vec b) noexcept { return a - b; }
    SYNCBLOB_HOST_DEVICE SYNCBLOB_ALWAYS_INLINE static vec mul(vec a, vec b) noexcept { return a * b; }
    SYNCBLOB_HOST_DEVICE SYNCBLOB_ALWAYS_INLINE static vec madd(vec a, vec b, vec c) noexcept {
        return c + rounded_product(a, b);
    }
    SYNCBLOB_HOST_DEVICE SYNCBLOB_ALWAYS_INLINE static vec abs(vec a) noexcept { return a < vec{0} ? -a : a; }
    SYNCBLOB_HOST_DEVICE SYNCBLOB_ALWAYS_INLINE static vec hsum(vec a) noexcept { return a; }
};

// An operation's body: inlined into the kernel of each path, which alone carries that path's
// instruction set (a vector type may only cross a call between functions compiled for it). nvcc is
// told not to check where it may run: on the device with ScalarLanes, on the host with host lanes.
#define SYNCBLOB_OPERATION SYNCBLOB_HOST_DEVICE SYNCBLOB_ALWAYS_INLINE
#if defined(__CUDACC__)
#define SYNCBLOB_ANY_LANES _Pragma("nv_exec_check_disable")
#else
#define SYNCBLOB_ANY_LANES
#endif

/// Σ|x|.
struct Asum {
    static constexpr const char* name = "asum";
    static constexpr const char* operation = "math::asum";  ///< its name in the sync audit
    SYNCBLOB_ANY_LANES
    template <class L, class V>
    SYNCBLOB_OPERATION V step(L, const V& sum, const V& x) const noexcept {
        return L::add(sum, L::abs(x));
    }
};

/// Σx².
struct Sumsq {
    static constexpr const char* name = "sumsq";
    static constexpr const char* operation = "math::sumsq";  ///< its name in the sync audit
    SYNCBLOB_ANY_LANES
    template <class L, class V>
    SYNCBLOB_OPERATION V step(L, const V& sum, const V& x) const noexcept {
        return L::madd(x, x, sum);
    }
};

/// Σx·y.
struct Dot {
    static constexpr const char* name = "dot";
    static constexpr const char* operation = "math::dot";  ///< its name in the sync audit
    SYNCBLOB_ANY_LANES
    template <class L, class V>
    SYNCBLOB_OPERATION V step(L, const V& sum, const V& x, const V& y) const noexcept {
        return L::madd(x, y, sum);
    }
};

/// y − x (computed in the accumulator type, rounded once to the element type).
struct Sub {
    static constexpr const char* name = "sub";
    static constexpr const char* operation = "math::update";  ///< its name in the sync audit
    SYNCBLOB_ANY_LANES
    template <class L, class V>
    SYNCBLOB_OPERATION V apply(L, const V& y, const V& x) const noexcept {
        return L::sub(y, x);
    }
};

/// x · alpha (computed in the accumulator type `A`, rounded once to the element type).
template <class A>
struct Scale {
    static constexpr const char* name = "scale";
    static constexpr const char* operation = "math::scale";  ///< its name in the sync audit
    A alpha;
    SYNCBLOB_ANY_LANES
    template <class L, class V>
    SYNCBLOB_OPERATION V apply(L, const V& x) const noexcept {
        return L::mul(x, L::set1(alpha));
    }
};

#undef SYNCBLOB_OPERATION
#undef SYNCBLOB_ANY_LANES

}  // namespace math::detail

SYNCBLOB_END_NAMESPACE
