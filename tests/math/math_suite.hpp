// SPDX-License-Identifier: BSD-2-Clause
#pragma once
// The backend-generic math suite. The including .cpp defines `MathSuiteAllocators`, a std::tuple of
// SyncedAllocator bundles, before including this file; every test case runs for each of them.
// Each math function is checked against a plain double-precision reference for every floating
// element type, with the data fresh on the host and on the device, on every host kernel path this
// processor supports, for sizes 0, 1, 7, 1001, 1031 and for borrowed memory that is not 64-byte aligned.
//
// Tolerances. Test values are multiples of 1/64 in [-4, 4): exact in every element type, and so are
// their differences and their products with the scale factors used (0.5, -1.5, 3), so the
// element-wise functions (update, scale) must match the rounded reference exactly. A reduction of
// n terms t_i in an accumulator of unit roundoff u (2^-24 for float, half and bfloat16, 2^-53 for
// double), in any order and with or without fused multiply-adds, is off by at most
// (n + 1) · u · Σ|t_i| (Higham, "Accuracy and Stability of Numerical Algorithms", §4.2, plus one
// rounding per product); the double reference itself is far more accurate than that.

#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include <syncblob/blob.hpp>
#include <syncblob/math.hpp>

#include "device_guard.hpp"

namespace math_suite {

using syncblob::bfloat16;
using syncblob::half;
using syncblob::Head;

using FloatingTypes = std::tuple<float, double, half, bfloat16>;

template <class F, class... Ts>
void for_each_type(std::tuple<Ts...>*, F&& f) {
    (f(static_cast<Ts*>(nullptr)), ...);
}
template <class F>
void for_each_floating_type(F&& f) {
    for_each_type(static_cast<FloatingTypes*>(nullptr), f);
}

template <class T>
double to_double(T v) {
    if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) {
        return static_cast<double>(static_cast<float>(v));
    } else {
        return static_cast<double>(v);
    }
}
template <class T>
T from_double(double v) {
    if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) {
        return T(static_cast<float>(v));
    } else {
        return static_cast<T>(v);
    }
}

/// Deterministic values, multiples of 1/64 in [-4, 4) (exact in every floating element type).
template <class T>
std::vector<T> make_values(std::size_t n, std::uint32_t seed) {
    std::vector<T> v(n);
    std::uint32_t s = seed * 2654435761u + 12345u;
    for (auto& x : v) {
        s = s * 1664525u + 1013904223u;
        x = from_double<T>(static_cast<double>(static_cast<std::int32_t>(s >> 23) - 256) / 64.0);
    }
    return v;
}

template <class T>
double unit_roundoff() {
    return std::is_same_v<T, double> ? 0x1p-53 : 0x1p-24;
}

/// |got - reference| within (n + 1) · u · Σ|t_i| (see the file comment).
template <class T>
bool within_bound(double got, double reference, double abs_terms, std::size_t n) {
    const double bound = static_cast<double>(n + 1) * unit_roundoff<T>() * abs_terms;
    return std::abs(got - reference) <= bound;
}

/// Where a test operand's data is fresh before the call.
enum class Side { host, device };
inline const char* side_name(Side s) {
    return s == Side::host ? "host" : "device";
}

template <class T>
std::vector<unsigned char> bytes_of(const std::vector<T>& v) {
    std::vector<unsigned char> b(v.size() * sizeof(T));
    if (!b.empty()) {
        std::memcpy(b.data(), v.data(), b.size());
    }
    return b;
}

/// Memory that is deliberately not 64-byte aligned (offset by one element), for borrowing.
template <class T>
struct UnalignedStorage {
    std::vector<unsigned char> bytes;
    T* ptr = nullptr;
    explicit UnalignedStorage(std::size_t n) : bytes((n + 1) * sizeof(T) + 128) {
        auto address = reinterpret_cast<std::uintptr_t>(bytes.data());
        address = (address + 63) / 64 * 64 + sizeof(T);
        ptr = reinterpret_cast<T*>(address);
    }
};

/// A blob operand: data (and optionally diff) written on the requested side.
template <class T, class A>
struct Operand {
    syncblob::Blob<T, A> blob;
    std::vector<T> data;
    std::vector<T> diff;
    std::unique_ptr<UnalignedStorage<T>> borrowed_data;
    std::unique_ptr<UnalignedStorage<T>> borrowed_diff;
};

template <class T, class A>
void write_part(syncblob::Blob<T, A>& blob, bool is_diff, const std::vector<T>& values, Side side,
                std::unique_ptr<UnalignedStorage<T>>& borrowed, bool unaligned) {
    using Backend = typename A::device_backend;
    const std::size_t bytes = values.size() * sizeof(T);
    if (values.empty()) {
        return;
    }
    if (side == Side::host) {
        if (unaligned) {
            borrowed = std::make_unique<UnalignedStorage<T>>(values.size());
            std::memcpy(static_cast<void*>(borrowed->ptr), values.data(), bytes);
            auto& buffer = is_diff ? blob.diff_buffer() : blob.data_buffer();
            buffer->set_host_data(static_cast<void*>(borrowed->ptr), bytes);
        } else {
            auto span = is_diff ? blob.mutable_host_diff() : blob.mutable_host_data();
            std::memcpy(static_cast<void*>(span.data()), values.data(), bytes);
        }
    } else {
        if constexpr (Backend::has_device) {
            T* p = is_diff ? blob.mutable_device_diff() : blob.mutable_device_data();
            syncblob_test::write_device<Backend>(p, values.data(), bytes);
        }
    }
}

template <class T, class A>
Operand<T, A> make_operand(std::size_t n, std::uint32_t seed, Side side, bool with_diff, bool unaligned) {
    Operand<T, A> op{syncblob::Blob<T, A>({static_cast<std::int64_t>(n)}), make_values<T>(n, seed), {}, {}, {}};
    write_part(op.blob, false, op.data, side, op.borrowed_data, unaligned);
    if (with_diff) {
        op.diff = make_values<T>(n, seed + 1000);
        write_part(op.blob, true, op.diff, side, op.borrowed_diff, unaligned);
    }
    op.blob.reset_stats();
    return op;
}

/// The current values of data or diff, read on the side where they are fresh, without moving the head.
template <class T, class A>
std::vector<T> read_part(const syncblob::Blob<T, A>& blob, bool is_diff) {
    using Backend = typename A::device_backend;
    std::vector<T> out(static_cast<std::size_t>(blob.count()));
    if (out.empty()) {
        return out;
    }
    const Head head = is_diff ? blob.diff_head() : blob.data_head();
    if constexpr (Backend::has_device) {
        if (head == syncblob::Head::at_device) {
            const T* p = is_diff ? blob.device_diff() : blob.device_data();
            const auto bytes = syncblob_test::read_device<Backend>(p, out.size() * sizeof(T));
            std::memcpy(static_cast<void*>(out.data()), bytes.data(), bytes.size());
            return out;
        }
    }
    const auto s = is_diff ? blob.host_diff() : blob.host_data();
    std::memcpy(static_cast<void*>(out.data()), s.data(), out.size() * sizeof(T));
    return out;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

inline std::vector<std::size_t> sizes() {
    return {0, 1, 7, 1001, 1031};
}

template <class Backend>
std::vector<Side> sides() {
    if constexpr (Backend::has_device) {
        return {Side::host, Side::device};
    } else {
        return {Side::host};
    }
}

template <class A>
void run_reference_checks() {
    using Backend = typename A::device_backend;
    for_each_floating_type([&](auto* tag) {
        using T = std::remove_pointer_t<decltype(tag)>;
        for (const auto path : syncblob::math::supported_kernel_paths()) {
            const syncblob::math::ScopedKernelPath scoped(path);
            for (const Side side : sides<Backend>()) {
                for (const std::size_t n : sizes()) {
                    for (const bool unaligned : {false, true}) {
                        if (unaligned && side != Side::host) {
                            continue;  // borrowed host memory only
                        }
                        INFO("type " << syncblob::element_name<T>() << ", path "
                                     << syncblob::math::kernel_path_name(path) << ", fresh on " << side_name(side)
                                     << ", n " << n << (unaligned ? ", borrowed unaligned" : ""));
                        const bool on_device = side == Side::device;
                        const std::uint64_t kernel = n == 0 ? 0 : 1;

                        // asum, sumsq of data and diff
                        {
                            auto op = make_operand<T, A>(n, 1, side, true, unaligned);
                            double ra = 0, rs = 0, rda = 0, rds = 0, sq_terms = 0, dsq_terms = 0;
                            for (std::size_t i = 0; i < n; ++i) {
                                ra += std::abs(to_double(op.data[i]));
                                rs += to_double(op.data[i]) * to_double(op.data[i]);
                                rda += std::abs(to_double(op.diff[i]));
                                rds += to_double(op.diff[i]) * to_double(op.diff[i]);
                            }
                            sq_terms = rs;
                            dsq_terms = rds;
                            const double a = static_cast<double>(syncblob::asum_data(op.blob));
                            const double s = static_cast<double>(syncblob::sumsq_data(op.blob));
                            const double da = static_cast<double>(syncblob::asum_diff(op.blob));
                            const double ds = static_cast<double>(syncblob::sumsq_diff(op.blob));
                            CHECK(within_bound<T>(a, ra, ra, n));
                            CHECK(within_bound<T>(s, rs, sq_terms, n));
                            CHECK(within_bound<T>(da, rda, rda, n));
                            CHECK(within_bound<T>(ds, rds, dsq_terms, n));
                            const auto st = op.blob.data_stats();
                            const auto dst = op.blob.diff_stats();
                            CHECK(st.transfers() == 0);
                            CHECK(dst.transfers() == 0);
                            CHECK(st.host_kernels == (on_device ? 0 : 2 * kernel));
                            CHECK(st.device_kernels == (on_device ? 2 * kernel : 0));
                            CHECK(dst.host_kernels == (on_device ? 0 : 2 * kernel));
                            CHECK(dst.device_kernels == (on_device ? 2 * kernel : 0));
                        }

                        // dot
                        {
                            auto x = make_operand<T, A>(n, 2, side, false, unaligned);
                            auto y = make_operand<T, A>(n, 3, side, false, unaligned);
                            double r = 0, terms = 0;
                            for (std::size_t i = 0; i < n; ++i) {
                                r += to_double(x.data[i]) * to_double(y.data[i]);
                                terms += std::abs(to_double(x.data[i]) * to_double(y.data[i]));
                            }
                            CHECK(within_bound<T>(static_cast<double>(syncblob::dot(x.blob, y.blob)), r, terms, n));
                            CHECK(x.blob.data_stats().transfers() == 0);
                            CHECK(y.blob.data_stats().transfers() == 0);
                            CHECK(x.blob.data_stats().device_kernels == (on_device ? kernel : 0));
                            CHECK(y.blob.data_stats().device_kernels == (on_device ? kernel : 0));
                            CHECK(x.blob.data_stats().host_kernels == (on_device ? 0 : kernel));
                        }

                        // update: data -= diff, exact
                        {
                            auto op = make_operand<T, A>(n, 4, side, true, unaligned);
                            syncblob::update(op.blob);
                            std::vector<T> expected(n);
                            for (std::size_t i = 0; i < n; ++i) {
                                expected[i] = from_double<T>(to_double(op.data[i]) - to_double(op.diff[i]));
                            }
                            CHECK(same_bits(read_part(op.blob, false), expected));
                            CHECK(same_bits(read_part(op.blob, true), op.diff));
                            CHECK(op.blob.data_stats().transfers() == 0);
                            CHECK(op.blob.data_stats().device_kernels == (on_device ? kernel : 0));
                            CHECK(op.blob.data_stats().host_kernels == (on_device ? 0 : kernel));
                            CHECK(op.blob.diff_stats().device_kernels == (on_device ? kernel : 0));
                            if (n != 0) {
                                CHECK(op.blob.data_head() ==
                                      (on_device ? syncblob::Head::at_device : syncblob::Head::at_host));
                            }
                        }

                        // scale_data, scale_diff: exact for these factors
                        for (const double alpha : {0.5, -1.5, 3.0}) {
                            INFO("alpha " << alpha);
                            auto op = make_operand<T, A>(n, 5, side, true, unaligned);
                            syncblob::scale_data(op.blob, static_cast<syncblob::accumulator_t<T>>(alpha));
                            syncblob::scale_diff(op.blob, static_cast<syncblob::accumulator_t<T>>(-alpha));
                            std::vector<T> ed(n), eg(n);
                            for (std::size_t i = 0; i < n; ++i) {
                                ed[i] = from_double<T>(to_double(op.data[i]) * alpha);
                                eg[i] = from_double<T>(to_double(op.diff[i]) * -alpha);
                            }
                            CHECK(same_bits(read_part(op.blob, false), ed));
                            CHECK(same_bits(read_part(op.blob, true), eg));
                            CHECK(op.blob.data_stats().transfers() == 0);
                            CHECK(op.blob.data_stats().device_kernels == (on_device ? kernel : 0));
                            CHECK(op.blob.diff_stats().host_kernels == (on_device ? 0 : kernel));
                        }
                    }
                }
            }
        }
    });
}

}  // namespace math_suite

TEMPLATE_LIST_TEST_CASE("every math function matches a double reference on every head, type and kernel path", "[math]",
                        MathSuiteAllocators) {
    using Backend = typename TestType::device_backend;
    if constexpr (Backend::has_device) {
        SYNCBLOB_REQUIRE_DEVICE(Backend);
    }
    math_suite::run_reference_checks<TestType>();
}

TEMPLATE_LIST_TEST_CASE("math on uninitialized data reads zeros without allocating and update throws", "[math]",
                        MathSuiteAllocators) {
    using Backend = typename TestType::device_backend;
    if constexpr (Backend::has_device) {
        SYNCBLOB_REQUIRE_DEVICE(Backend);
    }
    math_suite::for_each_floating_type([](auto* tag) {
        using T = std::remove_pointer_t<decltype(tag)>;
        INFO("type " << syncblob::element_name<T>());
        syncblob::Blob<T, TestType> b({2, 3});
        syncblob::Blob<T, TestType> other({2, 3});
        CHECK(syncblob::asum_data(b) == 0);
        CHECK(syncblob::sumsq_data(b) == 0);
        CHECK(syncblob::asum_diff(b) == 0);
        CHECK(syncblob::sumsq_diff(b) == 0);
        CHECK(syncblob::dot(b, other) == 0);
        syncblob::scale_data(b, 2);
        CHECK_THROWS_AS(syncblob::update(b), syncblob::StateError);
        CHECK_THROWS_WITH(syncblob::update(b),
                          Catch::Contains("update") && Catch::Contains("uninitialized") && Catch::Contains("2 3 (6)"));
        CHECK(b.data_head() == syncblob::Head::uninitialized);
        CHECK(b.diff_head() == syncblob::Head::uninitialized);
        CHECK(b.data_stats() == syncblob::TransferStats{});

        // An uninitialized diff reads as zeros: update leaves the data as it is.
        syncblob::Blob<T, TestType> c({4});
        c.fill(T(1.5f));
        syncblob::update(c);
        CHECK(math_suite::to_double(c.host_data()[3]) == 1.5);
        CHECK(c.diff_head() == syncblob::Head::uninitialized);

        // Empty and default-constructed blobs: nothing to do, no error.
        syncblob::Blob<T, TestType> empty({0});
        syncblob::update(empty);
        syncblob::Blob<T, TestType> none;
        syncblob::update(none);
        CHECK(syncblob::asum_data(none) == 0);
        CHECK(syncblob::sumsq_diff(none) == 0);
        CHECK(syncblob::dot(none, none) == 0);
        syncblob::scale_data(none, 2.0f);
        CHECK(none.data_stats().host_kernels + none.data_stats().device_kernels == 0);
    });
}

TEMPLATE_LIST_TEST_CASE("dot rejects operands of different counts and leaves both as they were", "[math]",
                        MathSuiteAllocators) {
    using Backend = typename TestType::device_backend;
    if constexpr (Backend::has_device) {
        SYNCBLOB_REQUIRE_DEVICE(Backend);
    }
    syncblob::Blob<float, TestType> a({3});
    syncblob::Blob<float, TestType> b({2, 2});
    a.fill(1.0f);
    b.fill(2.0f);
    a.reset_stats();
    b.reset_stats();
    CHECK_THROWS_AS((void)syncblob::dot(a, b), syncblob::ShapeError);
    CHECK_THROWS_WITH((void)syncblob::dot(a, b),
                      Catch::Contains("dot") && Catch::Contains("3 (3)") && Catch::Contains("2 2 (4)"));
    CHECK(a.data_stats() == syncblob::TransferStats{});
    CHECK(b.data_stats() == syncblob::TransferStats{});
}

TEMPLATE_LIST_TEST_CASE("an operand fresh on the other side is copied to where the math runs", "[math]",
                        MathSuiteAllocators) {
    using Backend = typename TestType::device_backend;
    if constexpr (!Backend::has_device) {
        return;  // one side only
    } else {
        SYNCBLOB_REQUIRE_DEVICE(Backend);
        using math_suite::Side;
        constexpr std::size_t n = 37;
        const std::uint64_t bytes = n * sizeof(double);

        // dot runs where its first operand is fresh.
        auto x = math_suite::make_operand<double, TestType>(n, 7, Side::device, false, false);
        auto y = math_suite::make_operand<double, TestType>(n, 8, Side::host, false, false);
        double r = 0;
        for (std::size_t i = 0; i < n; ++i) {
            r += x.data[i] * y.data[i];
        }
        CHECK(syncblob::dot(x.blob, y.blob) == Approx(r).epsilon(1e-12));
        CHECK(y.blob.data_stats().host_to_device == 1);
        CHECK(y.blob.data_stats().host_to_device_bytes == bytes);
        CHECK(y.blob.data_head() == syncblob::Head::synced);
        CHECK(x.blob.data_stats().device_kernels == 1);
        CHECK(y.blob.data_stats().device_kernels == 1);

        auto u = math_suite::make_operand<double, TestType>(n, 9, Side::host, false, false);
        auto v = math_suite::make_operand<double, TestType>(n, 10, Side::device, false, false);
        (void)syncblob::dot(u.blob, v.blob);
        CHECK(v.blob.data_stats().device_to_host == 1);
        CHECK(v.blob.data_stats().host_kernels == 1);
        CHECK(u.blob.data_stats().transfers() == 0);

        // update runs where the data is fresh; a diff fresh on the device comes to the host.
        auto w = math_suite::make_operand<double, TestType>(n, 11, Side::host, false, false);
        w.diff = math_suite::make_values<double>(n, 12);
        std::unique_ptr<math_suite::UnalignedStorage<double>> none;
        math_suite::write_part(w.blob, true, w.diff, Side::device, none, false);
        w.blob.reset_stats();
        syncblob::update(w.blob);
        CHECK(w.blob.diff_stats().device_to_host == 1);
        CHECK(w.blob.data_stats().host_kernels == 1);
        const auto got = w.blob.host_data();
        for (std::size_t i = 0; i < n; ++i) {
            CHECK(got[i] == w.data[i] - w.diff[i]);
        }

        // A synced head runs on the device and leaves the data there.
        auto s = math_suite::make_operand<double, TestType>(n, 13, Side::host, true, false);
        (void)s.blob.device_data();
        (void)s.blob.device_diff();
        s.blob.reset_stats();
        CHECK(s.blob.data_head() == syncblob::Head::synced);
        syncblob::update(s.blob);
        CHECK(s.blob.data_stats().device_kernels == 1);
        CHECK(s.blob.data_stats().transfers() == 0);
        CHECK(s.blob.data_head() == syncblob::Head::at_device);

        // Reductions of a synced head run on the device too, although the host copy is fresh.
        auto q = math_suite::make_operand<double, TestType>(n, 14, Side::host, true, false);
        (void)q.blob.device_data();
        (void)q.blob.device_diff();
        q.blob.reset_stats();
        double ra = 0, rs = 0, rd = 0;
        for (std::size_t i = 0; i < n; ++i) {
            ra += std::abs(q.data[i]);
            rs += q.diff[i] * q.diff[i];
            rd += q.data[i] * q.data[i];
        }
        CHECK(syncblob::asum_data(q.blob) == Approx(ra).epsilon(1e-12));
        CHECK(syncblob::sumsq_diff(q.blob) == Approx(rs).epsilon(1e-12));
        CHECK(syncblob::dot(q.blob, q.blob) == Approx(rd).epsilon(1e-12));
        CHECK(q.blob.data_stats().device_kernels == 2);  // asum, dot (one buffer, counted once)
        CHECK(q.blob.diff_stats().device_kernels == 1);
        CHECK(q.blob.data_stats().host_kernels == 0);
        CHECK(q.blob.diff_stats().host_kernels == 0);
        CHECK(q.blob.data_stats().transfers() == 0);
        CHECK(q.blob.data_head() == syncblob::Head::synced);
        CHECK(q.blob.diff_head() == syncblob::Head::synced);
    }
}

TEMPLATE_LIST_TEST_CASE("math writing read-only lent memory copies it first and never writes the memory", "[math]",
                        MathSuiteAllocators) {
    constexpr std::size_t n = 37;
    const auto values = math_suite::make_values<double>(n, 15);
    const auto lent = values;
    syncblob::Blob<double, TestType> blob({static_cast<std::int64_t>(n)});
    blob.set_host_data(lent.data(), n);  // const: lent read-only
    blob.mutable_host_diff()[0] = 1.0;   // the rest of the diff is zeros
    double ra = 0;
    for (const double v : values) {
        ra += std::abs(v);
    }
    CHECK(syncblob::asum_data(blob) == Approx(ra).epsilon(1e-12));  // read in place
    CHECK(blob.data_stats().host_allocations == 0);
    CHECK(blob.data_stats().host_kernels == 1);

    syncblob::scale_data(blob, 2.0);
    CHECK(blob.data_stats().host_allocations == 1);
    CHECK(blob.data_stats().host_to_host == 1);
    CHECK(blob.data_stats().host_kernels == 2);
    CHECK(lent == values);
    CHECK(blob.host_data().data() != lent.data());
    for (std::size_t i = 0; i < n; ++i) {
        CHECK(blob.host_data()[i] == 2.0 * values[i]);
    }

    syncblob::Blob<double, TestType> other({static_cast<std::int64_t>(n)});
    other.set_host_data(lent.data(), n);
    other.mutable_host_diff()[0] = 1.0;
    syncblob::update(other);
    CHECK(other.data_stats().host_to_host == 1);
    CHECK(lent == values);
    CHECK(other.host_data()[0] == values[0] - 1.0);
    CHECK(other.host_data()[1] == values[1]);
}
