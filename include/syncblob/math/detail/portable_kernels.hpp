// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The portable path: the loops of lane_loops.hpp on Eigen's packets, as wide as the consumer's
/// compiler flags allow (SSE2 by default on x86-64, NEON on ARM, one element where Eigen does not
/// vectorise, as under nvcc). half and bfloat16 are converted to float lane by lane and computed
/// in float.

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <iterator>

#include <Eigen/Core>

#include "../../core/config.hpp"
#include "../../core/element.hpp"
#include "lane_loops.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace math::detail {

/// Eigen's packet of `accumulator_t<T>` as a lane type (operations.hpp).
template <FloatingElement T>
struct EigenLanes {
    using A = accumulator_t<T>;
    using vec = typename Eigen::internal::packet_traits<A>::type;
    static constexpr int width = Eigen::internal::unpacket_traits<vec>::size;
    static constexpr bool converts = !std::same_as<T, A>;

    static vec load(const T* p) {
        if constexpr (converts) {
            alignas(vec) A lanes[static_cast<std::size_t>(width)];
            for (std::size_t k = 0; k < std::size(lanes); ++k) {
                lanes[k] = static_cast<A>(p[k]);
            }
            return Eigen::internal::pload<vec>(lanes);
        } else {
            return Eigen::internal::ploadu<vec>(p);
        }
    }
    static void store(T* p, const vec& v) {
        if constexpr (converts) {
            alignas(vec) A lanes[static_cast<std::size_t>(width)];
            Eigen::internal::pstore(lanes, v);
            for (std::size_t k = 0; k < std::size(lanes); ++k) {
                p[k] = static_cast<T>(lanes[k]);
            }
        } else {
            Eigen::internal::pstoreu(p, v);
        }
    }
    static vec zero() { return Eigen::internal::pset1<vec>(A{0}); }
    static vec set1(A a) { return Eigen::internal::pset1<vec>(a); }
    static vec add(const vec& a, const vec& b) { return Eigen::internal::padd(a, b); }
    static vec sub(const vec& a, const vec& b) { return Eigen::internal::psub(a, b); }
    static vec mul(const vec& a, const vec& b) { return Eigen::internal::pmul(a, b); }
    static vec madd(const vec& a, const vec& b, const vec& c) { return Eigen::internal::pmadd(a, b, c); }
    static vec abs(const vec& a) { return Eigen::internal::pabs(a); }
    static A hsum(const vec& a) { return Eigen::internal::predux(a); }
};

// The portable kernels, out of line: inlined, their code would give the dispatcher a stack frame
// that every call, whatever its path, sets up and tears down.
namespace portable {
template <class Op, FloatingElement T, std::same_as<T>... In>
SYNCBLOB_NOINLINE accumulator_t<T> reduce(Op op, std::int64_t n, const T* x, const In*... in) {
    return reduce_lanes<EigenLanes<T>>(op, n, x, in...);
}
template <class Op, FloatingElement T, std::same_as<T>... In>
SYNCBLOB_NOINLINE void transform(Op op, std::int64_t n, T* y, const In*... in) {
    transform_lanes<EigenLanes<T>>(op, n, y, in...);
}
}  // namespace portable

}  // namespace math::detail

SYNCBLOB_END_NAMESPACE
