// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The portable host kernels: Eigen maps of one reduction block, vectorised as far as the
/// consumer's compiler flags allow. half and bfloat16 are read as Eigen's bit-identical types and
/// computed in float.

#include <cstdint>
#include <type_traits>

#include <Eigen/Core>

#include "../../core/element.hpp"
#include "../device_kernels.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace math::detail {

/// Eigen's scalar for a syncblob element type (half and bfloat16 map to Eigen's bit-identical ones).
template <class T>
struct eigen_scalar {
    using type = T;
};
template <>
struct eigen_scalar<half> {
    using type = Eigen::half;
};
template <>
struct eigen_scalar<bfloat16> {
    using type = Eigen::bfloat16;
};
template <class T>
using eigen_scalar_t = typename eigen_scalar<T>::type;

static_assert(sizeof(Eigen::half) == sizeof(half) && alignof(Eigen::half) == alignof(half) &&
                  std::is_trivially_copyable_v<Eigen::half> && std::is_standard_layout_v<Eigen::half>,
              "syncblob::half must be bit-identical to Eigen::half");
static_assert(sizeof(Eigen::bfloat16) == sizeof(bfloat16) && alignof(Eigen::bfloat16) == alignof(bfloat16) &&
                  std::is_trivially_copyable_v<Eigen::bfloat16> && std::is_standard_layout_v<Eigen::bfloat16>,
              "syncblob::bfloat16 must be bit-identical to Eigen::bfloat16");

template <class T>
using ConstArrayMap = Eigen::Map<const Eigen::Array<eigen_scalar_t<T>, Eigen::Dynamic, 1>, Eigen::Unaligned>;
template <class T>
using ArrayMap = Eigen::Map<Eigen::Array<eigen_scalar_t<T>, Eigen::Dynamic, 1>, Eigen::Unaligned>;

template <class T>
ConstArrayMap<T> cmap(const T* p, std::int64_t n) {
    return ConstArrayMap<T>(reinterpret_cast<const eigen_scalar_t<T>*>(p), static_cast<Eigen::Index>(n));
}
template <class T>
ArrayMap<T> map(T* p, std::int64_t n) {
    return ArrayMap<T>(reinterpret_cast<eigen_scalar_t<T>*>(p), static_cast<Eigen::Index>(n));
}

// Inputs in the accumulator type: a no-op for float and double, a conversion for half and bfloat16.
template <class T, class Expr>
auto in_acc(const Expr& e) {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
        return e;
    } else {
        return e.template cast<float>();
    }
}

namespace portable {

template <FloatingElement T>
accumulator_t<T> asum(const T* x, std::int64_t n) {
    if (n == 0) {
        return 0;
    }
    return static_cast<accumulator_t<T>>(in_acc<T>(cmap(x, n)).abs().sum());
}

template <FloatingElement T>
accumulator_t<T> sumsq(const T* x, std::int64_t n) {
    if (n == 0) {
        return 0;
    }
    return static_cast<accumulator_t<T>>(in_acc<T>(cmap(x, n)).square().sum());
}

template <FloatingElement T>
accumulator_t<T> dot(const T* x, const T* y, std::int64_t n) {
    if (n == 0) {
        return 0;
    }
    return static_cast<accumulator_t<T>>((in_acc<T>(cmap(x, n)) * in_acc<T>(cmap(y, n))).sum());
}

template <FloatingElement T>
void sub(T* y, const T* x, std::int64_t n) {
    if (n == 0) {
        return;
    }
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
        map(y, n) -= cmap(x, n);
    } else {
        map(y, n) =
            (cmap(y, n).template cast<float>() - cmap(x, n).template cast<float>()).template cast<eigen_scalar_t<T>>();
    }
}

template <FloatingElement T>
void scale(T* x, accumulator_t<T> alpha, std::int64_t n) {
    if (n == 0) {
        return;
    }
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
        map(x, n) *= alpha;
    } else {
        map(x, n) = (cmap(x, n).template cast<float>() * alpha).template cast<eigen_scalar_t<T>>();
    }
}

}  // namespace portable
}  // namespace math::detail

SYNCBLOB_END_NAMESPACE
