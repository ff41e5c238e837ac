// SPDX-License-Identifier: BSD-2-Clause
// syncblob/math.hpp on the host-only and simulated-device allocators (the generic suite), plus the
// host kernels' switches: kernel paths, threading and determinism.
#include <syncblob/math.hpp>
#include <syncblob/memory/simulated_device.hpp>

#include <tuple>
#include <vector>

using MathSuiteAllocators = std::tuple<syncblob::HostOnly, syncblob::Simulated>;
#include "math_suite.hpp"

namespace {

// Restores the threading settings on scope exit.
struct ThreadingGuard {
    std::int64_t threshold = syncblob::math::parallel_threshold();
    unsigned threads = syncblob::math::max_threads();
    ~ThreadingGuard() {
        syncblob::math::set_parallel_threshold(threshold);
        syncblob::math::set_max_threads(threads);
    }
};

}  // namespace

TEST_CASE("kernel paths: portable is always supported and each supported path can be forced", "[math]") {
    using syncblob::math::KernelPath;
    CHECK(syncblob::math::kernel_path_supported(KernelPath::portable));
    CHECK(syncblob::math::kernel_path_supported(KernelPath::automatic));
    const auto paths = syncblob::math::supported_kernel_paths();
    REQUIRE(!paths.empty());
    CHECK(paths.front() == KernelPath::portable);
    CHECK(syncblob::math::kernel_path() == KernelPath::automatic);
    CHECK(syncblob::math::active_kernel_path() == paths.back());  // automatic picks the widest
    for (const auto p : paths) {
        const syncblob::math::ScopedKernelPath scoped(p);
        CHECK(syncblob::math::active_kernel_path() == p);
    }
    CHECK(syncblob::math::kernel_path() == KernelPath::automatic);
    CHECK(syncblob::math::active_kernel_path() == paths.back());  // the scope's end resolves automatic again
    syncblob::math::set_kernel_path(KernelPath::portable);
    CHECK(syncblob::math::active_kernel_path() == KernelPath::portable);
    syncblob::math::set_kernel_path(KernelPath::automatic);
    CHECK(syncblob::math::active_kernel_path() == paths.back());
    for (const auto p : {KernelPath::avx2, KernelPath::avx512}) {
        if (!syncblob::math::kernel_path_supported(p)) {
            CHECK_THROWS_AS(syncblob::math::set_kernel_path(p), syncblob::StateError);
            CHECK(syncblob::math::kernel_path() == KernelPath::automatic);
        }
    }
    CHECK_THROWS_AS(syncblob::math::set_parallel_threshold(0), syncblob::StateError);
    CHECK_THROWS_AS(syncblob::math::set_max_threads(0), syncblob::StateError);
}

TEST_CASE("the first kernel call of a process resolves the requested path, then runs on it", "[math]") {
    using syncblob::math::KernelPath;
    namespace detail = syncblob::math::detail;
    const std::vector<float> x{1.0f, -2.0f, 3.0f, -4.0f, 5.0f, -6.0f, 7.0f, -8.0f, 9.0f};
    std::vector<float> y(x.size(), 1.0f);
    for (const auto p : syncblob::math::supported_kernel_paths()) {
        INFO("path " << syncblob::math::kernel_path_name(p));
        const syncblob::math::ScopedKernelPath scoped(p);
        // Each kernel as the first call of a process: the resolved path not yet set.
        detail::resolved_path().store(KernelPath::automatic);
        CHECK(syncblob::math::asum(x.data(), 9) == 45.0f);
        CHECK(detail::resolved_path().load() == p);
        detail::resolved_path().store(KernelPath::automatic);
        CHECK(syncblob::math::sumsq(x.data(), 9) == 285.0f);
        detail::resolved_path().store(KernelPath::automatic);
        CHECK(syncblob::math::dot(x.data(), y.data(), 9) == 5.0f);
        detail::resolved_path().store(KernelPath::automatic);
        syncblob::math::sub(y.data(), x.data(), 9);
        CHECK(y[1] == 3.0f);
        detail::resolved_path().store(KernelPath::automatic);
        syncblob::math::scale(y.data(), 2.0f, 9);
        CHECK(y[1] == 6.0f);
        CHECK(detail::resolved_path().load() == p);
        y.assign(x.size(), 1.0f);
    }
    detail::resolved_path().store(KernelPath::automatic);
    CHECK(syncblob::math::active_kernel_path() == syncblob::math::supported_kernel_paths().back());
}

TEST_CASE("reductions give the same bits on one thread and on two, and element-wise results agree", "[math]") {
    const ThreadingGuard guard;
    constexpr std::size_t n = 3 * 65536 + 123;  // several reduction blocks and a partial one
    const auto x = math_suite::make_values<float>(n, 21);
    const auto y = math_suite::make_values<float>(n, 22);
    const auto xd = math_suite::make_values<double>(n, 23);
    for (const auto path : syncblob::math::supported_kernel_paths()) {
        INFO("path " << syncblob::math::kernel_path_name(path));
        const syncblob::math::ScopedKernelPath scoped(path);
        const auto n64 = static_cast<std::int64_t>(n);

        syncblob::math::set_max_threads(1);
        const float a1 = syncblob::math::asum(x.data(), n64);
        const float s1 = syncblob::math::sumsq(x.data(), n64);
        const float d1 = syncblob::math::dot(x.data(), y.data(), n64);
        const double dd1 = syncblob::math::dot(xd.data(), xd.data(), n64);
        auto u1 = x;
        syncblob::math::sub(u1.data(), y.data(), n64);
        syncblob::math::scale(u1.data(), 0.75f, n64);

        syncblob::math::set_max_threads(2);
        syncblob::math::set_parallel_threshold(1);
        const float a2 = syncblob::math::asum(x.data(), n64);
        const float s2 = syncblob::math::sumsq(x.data(), n64);
        const float d2 = syncblob::math::dot(x.data(), y.data(), n64);
        const double dd2 = syncblob::math::dot(xd.data(), xd.data(), n64);
        auto u2 = x;
        syncblob::math::sub(u2.data(), y.data(), n64);
        syncblob::math::scale(u2.data(), 0.75f, n64);
        syncblob::math::set_parallel_threshold(std::int64_t{1} << 40);

        CHECK(std::memcmp(&a1, &a2, sizeof a1) == 0);
        CHECK(std::memcmp(&s1, &s2, sizeof s1) == 0);
        CHECK(std::memcmp(&d1, &d2, sizeof d1) == 0);
        CHECK(std::memcmp(&dd1, &dd2, sizeof dd1) == 0);
        CHECK(math_suite::same_bits(u1, u2));

        // and the threaded results are right
        double ra = 0, rs = 0;
        for (const float v : x) {
            ra += std::abs(static_cast<double>(v));
            rs += static_cast<double>(v) * static_cast<double>(v);
        }
        CHECK(math_suite::within_bound<float>(static_cast<double>(a2), ra, ra, n));
        CHECK(math_suite::within_bound<float>(static_cast<double>(s2), rs, rs, n));
        for (std::size_t i = 0; i < n; i += 997) {
            CHECK(static_cast<double>(u2[i]) == (static_cast<double>(x[i]) - static_cast<double>(y[i])) * 0.75);
        }
    }
}

TEST_CASE("simulated device math runs after the copies issued before it on the stream", "[math]") {
    syncblob::Blob<float, syncblob::Simulated> b({100});
    auto host = b.mutable_host_data();
    for (std::size_t i = 0; i < host.size(); ++i) {
        host[i] = static_cast<float>(i) - 50.0f;
    }
    b.data_buffer()->push_to_device_async();  // carried out late, as a GPU may
    b.reset_stats();
    double expected = 0;
    for (std::size_t i = 0; i < 100; ++i) {
        expected += std::abs(static_cast<double>(i) - 50.0);
    }
    CHECK(static_cast<double>(syncblob::asum_data(b)) == expected);
    CHECK(b.data_stats().device_kernels == 1);
    CHECK(b.data_stats().host_kernels == 0);
}

TEST_CASE("math records where it ran in the blob's cumulative stats", "[math]") {
    syncblob::Blob<float, syncblob::Simulated> b({8});
    b.fill(2.0f);
    b.fill_diff(0.5f);
    b.reset_stats();
    syncblob::update(b);                                             // host
    (void)syncblob::asum_data(b);                                    // host
    (void)b.mutable_device_data();                                   // moves data to the device
    syncblob::scale_data(b, 2.0f);                                   // device
    CHECK(static_cast<double>(syncblob::sumsq_data(b)) == 8 * 9.0);  // device
    const auto s = b.data_stats();
    CHECK(s.host_kernels == 2);
    CHECK(s.device_kernels == 2);
    CHECK(s.host_to_device == 1);
    CHECK(b.diff_stats().host_kernels == 1);
}
