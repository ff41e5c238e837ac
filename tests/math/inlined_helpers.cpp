// SPDX-License-Identifier: BSD-2-Clause
// Compiled (not run) by the tests math.codegen_*.small_call_helpers_inlined, which read the
// object's symbols: the element helpers of the kernels' scalar tails (ScalarLanes,
// rounded_product) are always inlined, so none may be emitted out of line. In a -march=native
// build GCC once kept them out of the x86 kernel entries, which carry a tuning of their own, giving
// every entry a stack frame and a call per tail element. (Whether reduce_blocks is inlined into a
// blob-level reduction depends on the size of the caller's translation unit; the benchmark shows
// that one, docs/benchmarks.md.)

#include <cstdint>

#include <syncblob/math/host_kernels.hpp>

namespace sm = syncblob::math;

float asum_f(const float* x, std::int64_t n) {
    return sm::asum(x, n);
}
double sumsq_d(const double* x, std::int64_t n) {
    return sm::sumsq(x, n);
}
float dot_f(const float* x, const float* y, std::int64_t n) {
    return sm::dot(x, y, n);
}
void sub_d(double* y, const double* x, std::int64_t n) {
    sm::sub(y, x, n);
}
void scale_f(float* x, float alpha, std::int64_t n) {
    sm::scale(x, alpha, n);
}
