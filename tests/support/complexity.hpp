// SPDX-License-Identifier: BSD-2-Clause
#pragma once
// The growth of a piece of work with the count of its input: the time of `f(10 n)` over the time of
// `f(n)`, each the best of a few runs. Linear work gives about 10, quadratic work about 100; a test
// asserts the order of growth (well under 100), not a speed (speed is measured by benchmarks/).

#include <algorithm>
#include <chrono>
#include <cstddef>

namespace test {

/// Seconds the fastest of `runs` calls of `f(n)` took.
template <class F>
double best_seconds(F& f, std::size_t n, int runs = 3) {
    double best = 1e30;
    for (int r = 0; r < runs; ++r) {
        const auto start = std::chrono::steady_clock::now();
        f(n);
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    return best;
}

/// The time of `f(10 n)` over the time of `f(n)`.
template <class F>
double tenfold_growth(F&& f, std::size_t n) {
    const double small = best_seconds(f, n);
    const double large = best_seconds(f, 10 * n);
    return large / std::max(small, 1e-9);
}

/// A bound on `tenfold_growth` that linear work (10, with some noise and cache effects) stays under
/// and quadratic work (100) does not.
inline constexpr double linear_bound = 30.0;

}  // namespace test
