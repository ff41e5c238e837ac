// SPDX-License-Identifier: BSD-2-Clause
// syncblob/math.hpp on the host-only and simulated-device allocators (the generic suite), plus the
// host kernels' switches: kernel paths, threading and determinism.
#include <syncblob/math.hpp>
#include <syncblob/sim/device.hpp>

#include <algorithm>
#include <array>
#include <cstring>
#include <functional>
#include <tuple>
#include <vector>

using MathSuiteAllocators = std::tuple<syncblob::HostOnly, syncblob::Simulated, syncblob::SimulatedAsync>;
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
    CHECK_THROWS_AS(syncblob::math::set_parallel_threshold(-1), syncblob::StateError);
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

TEST_CASE("reductions give the same bits on 1, 2 and 4 threads, and element-wise results agree", "[math]") {
    const ThreadingGuard guard;
    constexpr std::size_t n = 3 * 65536 + 123;  // several reduction blocks and a partial one
    const auto x = math_suite::make_values<float>(n, 21);
    const auto y = math_suite::make_values<float>(n, 22);
    const auto xd = math_suite::make_values<double>(n, 23);
    const auto n64 = static_cast<std::int64_t>(n);
    struct Results {
        float a, s, d;
        double dd;
        std::vector<float> u;
    };
    const auto compute = [&](unsigned threads) {
        syncblob::math::set_max_threads(threads);
        syncblob::math::set_parallel_threshold(threads == 1 ? 0 : 1);  // 1: split whatever the size
        Results r{syncblob::math::asum(x.data(), n64), syncblob::math::sumsq(x.data(), n64),
                  syncblob::math::dot(x.data(), y.data(), n64), syncblob::math::dot(xd.data(), xd.data(), n64), x};
        syncblob::math::sub(r.u.data(), y.data(), n64);
        syncblob::math::scale(r.u.data(), 0.75f, n64);
        return r;
    };
    for (const auto path : syncblob::math::supported_kernel_paths()) {
        INFO("path " << syncblob::math::kernel_path_name(path));
        const syncblob::math::ScopedKernelPath scoped(path);
        const Results one = compute(1);
        for (const unsigned threads : {2u, 4u}) {
            INFO(threads << " threads");
            const Results many = compute(threads);
            CHECK(std::memcmp(&one.a, &many.a, sizeof one.a) == 0);
            CHECK(std::memcmp(&one.s, &many.s, sizeof one.s) == 0);
            CHECK(std::memcmp(&one.d, &many.d, sizeof one.d) == 0);
            CHECK(std::memcmp(&one.dd, &many.dd, sizeof one.dd) == 0);
            CHECK(math_suite::same_bits(one.u, many.u));

            // and the threaded results are right
            double ra = 0, rs = 0;
            for (const float v : x) {
                ra += std::abs(static_cast<double>(v));
                rs += static_cast<double>(v) * static_cast<double>(v);
            }
            CHECK(math_suite::within_bound<float>(static_cast<double>(many.a), ra, ra, n));
            CHECK(math_suite::within_bound<float>(static_cast<double>(many.s), rs, rs, n));
            for (std::size_t i = 0; i < n; i += 997) {
                CHECK(static_cast<double>(many.u[i]) == (static_cast<double>(x[i]) - static_cast<double>(y[i])) * 0.75);
            }
        }
    }
}

namespace {
// The sum of the one-block kernel over each reduction block of [0, n), added in block order: what a
// reduction of many blocks must give, bit for bit, on any thread count.
template <class T, class One>
syncblob::accumulator_t<T> block_by_block(std::int64_t n, std::int64_t block, const One& one) {
    syncblob::accumulator_t<T> total = 0;
    for (std::int64_t first = 0; first < n; first += block) {
        total += one(first, std::min(block, n - first));
    }
    return total;
}

template <class T>
void check_block_sums(std::int64_t n) {
    namespace sm = syncblob::math;
    INFO(n << " elements of " << sizeof(T) << " bytes");
    const auto x = math_suite::make_values<T>(static_cast<std::size_t>(n), 31);
    const auto y = math_suite::make_values<T>(static_cast<std::size_t>(n), 32);
    const T* px = x.data();
    const T* py = y.data();
    const auto asum = block_by_block<T>(n, sm::reduction_block<T>, [px](auto first, auto count) {
        return sm::detail::reduce_block(sm::detail::Asum{}, count, px + first);
    });
    const auto sumsq = block_by_block<T>(n, sm::reduction_block<T>, [px](auto first, auto count) {
        return sm::detail::reduce_block(sm::detail::Sumsq{}, count, px + first);
    });
    const auto dot = block_by_block<T>(n, sm::reduction_block<T, 2>, [px, py](auto first, auto count) {
        return sm::detail::reduce_block(sm::detail::Dot{}, count, px + first, py + first);
    });
    for (const unsigned threads : {1u, 2u}) {
        INFO(threads << " threads");
        sm::set_max_threads(threads);
        sm::set_parallel_threshold(threads == 1 ? 0 : 1);
        const auto a = sm::asum(px, n);
        const auto s = sm::sumsq(px, n);
        const auto d = sm::dot(px, py, n);
        CHECK(std::memcmp(&a, &asum, sizeof a) == 0);
        CHECK(std::memcmp(&s, &sumsq, sizeof s) == 0);
        CHECK(std::memcmp(&d, &dot, sizeof d) == 0);
    }
}
}  // namespace

TEST_CASE("a reduction of many blocks is its blocks' one-block sums added in order, on every path", "[math]") {
    const ThreadingGuard guard;
    for (const auto path : syncblob::math::supported_kernel_paths()) {
        INFO("path " << syncblob::math::kernel_path_name(path));
        const syncblob::math::ScopedKernelPath scoped(path);
        // Two blocks and a partial third; and past 512 blocks, where a split keeps its block sums on the heap.
        check_block_sums<float>(2 * syncblob::math::reduction_block<float> + 5);
        check_block_sums<float>(513 * syncblob::math::reduction_block<float> + 77);
        check_block_sums<double>(3 * syncblob::math::reduction_block<double>);
        check_block_sums<double>(1030 * syncblob::math::reduction_block<double> + 1);
        check_block_sums<syncblob::half>(3 * syncblob::math::reduction_block<syncblob::half> - 9);
        check_block_sums<syncblob::bfloat16>(5 * syncblob::math::reduction_block<syncblob::bfloat16> + 3);
        // The first call of a process, when it reduces many blocks, resolves the path, then runs on it.
        const std::int64_t n = 4 * syncblob::math::reduction_block<float>;
        const auto x = math_suite::make_values<float>(static_cast<std::size_t>(n), 33);
        for (const unsigned threads : {1u, 2u}) {
            INFO(threads << " threads");
            syncblob::math::set_max_threads(threads);
            const std::array<float, 3> expected{syncblob::math::asum(x.data(), n), syncblob::math::sumsq(x.data(), n),
                                                syncblob::math::dot(x.data(), x.data(), n)};
            std::array<float, 3> first{};
            syncblob::math::detail::resolved_path().store(syncblob::math::KernelPath::automatic);
            first[0] = syncblob::math::asum(x.data(), n);
            syncblob::math::detail::resolved_path().store(syncblob::math::KernelPath::automatic);
            first[1] = syncblob::math::sumsq(x.data(), n);
            syncblob::math::detail::resolved_path().store(syncblob::math::KernelPath::automatic);
            first[2] = syncblob::math::dot(x.data(), x.data(), n);
            CHECK(std::memcmp(first.data(), expected.data(), sizeof first) == 0);
            CHECK(syncblob::math::detail::resolved_path().load() == path);
        }
    }
    syncblob::math::detail::resolved_path().store(syncblob::math::KernelPath::automatic);
}

TEST_CASE("the automatic path takes AVX2 for long streams only where 512-bit operations run in halves", "[math]") {
    using syncblob::math::KernelPath;
    using syncblob::math::SplitKind;
    using syncblob::math::detail::path_for;
    constexpr std::int64_t wide = syncblob::math::wide_stream_bytes;
    constexpr auto automatic = KernelPath::automatic;
    CHECK(path_for(KernelPath::avx512, automatic, SplitKind::reduction, wide, true) == KernelPath::avx2);
    CHECK(path_for(KernelPath::avx512, automatic, SplitKind::update, wide, true) == KernelPath::avx2);
    CHECK(path_for(KernelPath::avx512, automatic, SplitKind::scale, wide, true) == KernelPath::avx512);
    CHECK(path_for(KernelPath::avx512, automatic, SplitKind::reduction, wide - 1, true) == KernelPath::avx512);
    CHECK(path_for(KernelPath::avx512, automatic, SplitKind::reduction, wide, false) == KernelPath::avx512);
    CHECK(path_for(KernelPath::avx512, KernelPath::avx512, SplitKind::reduction, wide, true) == KernelPath::avx512);
    CHECK(path_for(KernelPath::avx2, automatic, SplitKind::reduction, wide, true) == KernelPath::avx2);
    CHECK(path_for(KernelPath::portable, KernelPath::portable, SplitKind::update, wide, true) == KernelPath::portable);
    CHECK(syncblob::math::kernel_path_for(SplitKind::reduction, wide - 1) == syncblob::math::active_kernel_path());
    CHECK(syncblob::math::kernel_path_for(SplitKind::scale, 4 * wide) == syncblob::math::active_kernel_path());
}

TEST_CASE("a path forced with set_kernel_path is the path of every size", "[math]") {
    using syncblob::math::SplitKind;
    constexpr std::int64_t wide = syncblob::math::wide_stream_bytes;
    for (const auto p : syncblob::math::supported_kernel_paths()) {
        INFO("path " << syncblob::math::kernel_path_name(p));
        const syncblob::math::ScopedKernelPath scoped(p);
        for (const auto kind : {SplitKind::reduction, SplitKind::update, SplitKind::scale}) {
            for (const std::int64_t bytes : {std::int64_t{64}, wide - 1, wide, 4 * wide}) {
                CHECK(syncblob::math::kernel_path_for(kind, bytes) == p);
            }
        }
    }
}

TEST_CASE("a long stream runs on the path kernel_path_for names, on one thread and split", "[math]") {
    namespace sm = syncblob::math;
    const ThreadingGuard guard;
    // asum reads one array (the stream is its bytes), dot two, sub three (two read, one written).
    constexpr std::int64_t n = sm::wide_stream_bytes / std::int64_t{sizeof(float)};
    // Values with full mantissas, so that sums over 8 and over 16 lanes round differently.
    const auto values = [](std::uint32_t seed) {
        std::vector<float> v(static_cast<std::size_t>(n));
        for (auto& e : v) {
            seed = seed * 1664525u + 1013904223u;
            e = static_cast<float>(static_cast<double>(seed) * 0x1p-31 - 1.0) * 1.0009765625f;
        }
        return v;
    };
    const auto x = values(41);
    const auto y = values(42);
    const sm::KernelPath path = sm::kernel_path_for(sm::SplitKind::reduction, sm::wide_stream_bytes);
    INFO("a reduction of " << sm::wide_stream_bytes << " bytes runs on " << sm::kernel_path_name(path)
                           << ", calls under " << sm::kernel_path_name(sm::active_kernel_path()));
    struct Results {
        float asum, sumsq, dot;
        std::vector<float> sub, scale;
    };
    const auto run = [&](std::int64_t count) {
        Results r{sm::asum(x.data(), count), sm::sumsq(x.data(), count), sm::dot(x.data(), y.data(), count), x, x};
        sm::sub(r.sub.data(), y.data(), count);
        sm::scale(r.scale.data(), 0.3f, count);
        return r;
    };
    for (const unsigned threads : {1u, 2u}) {
        INFO(threads << " threads");
        sm::set_max_threads(threads);
        const Results automatic = run(n);
        Results forced;
        {
            const sm::ScopedKernelPath scoped(path);
            forced = run(n);
        }
        CHECK(std::memcmp(&automatic.asum, &forced.asum, sizeof(float)) == 0);
        CHECK(std::memcmp(&automatic.sumsq, &forced.sumsq, sizeof(float)) == 0);
        CHECK(std::memcmp(&automatic.dot, &forced.dot, sizeof(float)) == 0);
        CHECK(math_suite::same_bits(automatic.sub, forced.sub));
        CHECK(math_suite::same_bits(automatic.scale, forced.scale));
    }
    // One element less: asum's stream is under the limit and runs on the active path.
    const sm::ScopedKernelPath scoped(sm::active_kernel_path());
    const float widest = sm::asum(x.data(), n - 1);
    sm::set_kernel_path(sm::KernelPath::automatic);
    const float automatic = sm::asum(x.data(), n - 1);
    CHECK(std::memcmp(&widest, &automatic, sizeof(float)) == 0);
}

TEST_CASE("the split follows the caches: a reduction and an update split before a scale", "[math]") {
    using syncblob::math::SplitKind;
    const auto l1 = static_cast<std::int64_t>(syncblob::parallel::cache_bytes(1, std::size_t{32} << 10));
    CHECK(syncblob::math::split_bytes(SplitKind::reduction) == 2 * l1);
    CHECK(syncblob::math::split_bytes(SplitKind::update) == 3 * l1);
    CHECK(syncblob::math::split_bytes(SplitKind::scale) == 6 * l1);
    const ThreadingGuard guard;
    syncblob::math::set_parallel_threshold(0);
    syncblob::math::set_max_threads(2);
    namespace detail = syncblob::math::detail;
    CHECK(detail::threads_for(SplitKind::reduction, 1, 2 * l1 - 1, 8) == 1);
    CHECK(detail::threads_for(SplitKind::reduction, 1, 2 * l1, 8) == 2);
    CHECK(detail::threads_for(SplitKind::update, 1, 3 * l1, 8) == 2);
    CHECK(detail::threads_for(SplitKind::scale, 1, 3 * l1, 8) == 1);
    CHECK(detail::threads_for(SplitKind::scale, 1, 6 * l1, 8) == 2);
    CHECK(detail::threads_for(SplitKind::update, 1, 8 * l1, 1) == 1);  // one part cannot be split
    syncblob::math::set_parallel_threshold(100);                       // a forced element count wins over the bytes
    CHECK(detail::threads_for(SplitKind::reduction, 99, l1 * 64, 8) == 1);
    CHECK(detail::threads_for(SplitKind::reduction, 100, 1, 8) == 2);
    syncblob::math::set_max_threads(1);
    CHECK(detail::threads_for(SplitKind::reduction, 100, l1 * 64, 8) == 1);
}

TEST_CASE("each kernel splits exactly from split_bytes on its first call and after", "[math]") {
    using syncblob::math::SplitKind;
    const ThreadingGuard guard;
    syncblob::math::set_parallel_threshold(0);
    syncblob::math::set_max_threads(2);
    unsigned split_calls = 0;  // calls handed to the executor: the split ones
    syncblob::parallel::set_executor([&](unsigned parts, const std::function<void(unsigned)>& part) {
        ++split_calls;
        for (unsigned p = 0; p < parts; ++p) {
            part(p);
        }
    });
    // Elements of `T` for an operation touching `bytes` over `arrays` arrays (each rounded up).
    const auto elements = [](std::int64_t bytes, std::int64_t arrays, std::int64_t size) {
        return (bytes + arrays * size - 1) / (arrays * size);
    };
    // From the system's figure, not split_bytes: in a process of its own this test's first kernel
    // calls are then the first to look the L1 size up.
    const auto l1 = static_cast<std::int64_t>(syncblob::parallel::cache_bytes(1, std::size_t{32} << 10));
    const std::int64_t update_at = elements(3 * l1, 3, 4);
    const std::int64_t scale_at = elements(6 * l1, 2, 4);
    const std::int64_t reduce_at = elements(2 * l1, 1, 4);
    std::vector<float> x(static_cast<std::size_t>(std::max({update_at, scale_at, reduce_at}) + 64), 1.0f);
    std::vector<float> y(x.size(), 2.0f);
    for (int round = 0; round < 2; ++round) {  // the first calls may find the L1 size not yet read
        split_calls = 0;
        syncblob::math::sub(y.data(), x.data(), update_at - 1);
        syncblob::math::scale(y.data(), 1.0f, scale_at - 1);
        CHECK(split_calls == 0);
        syncblob::math::sub(y.data(), x.data(), update_at);
        CHECK(split_calls == 1);
        syncblob::math::scale(y.data(), 1.0f, scale_at);
        CHECK(split_calls == 2);
        // A reduction splits from split_bytes when that is at least two blocks.
        const std::int64_t block = syncblob::math::reduction_block<float>;
        const std::int64_t reduce_n = std::max(reduce_at, block + 1);
        const unsigned under = reduce_n - 1 >= reduce_at && reduce_n - 1 > block ? 1u : 0u;
        CHECK(syncblob::math::asum(x.data(), reduce_n - 1) == static_cast<double>(reduce_n - 1));
        CHECK(split_calls == 2 + under);
        CHECK(syncblob::math::asum(x.data(), reduce_n) == static_cast<double>(reduce_n));
        CHECK(split_calls == 3 + under);
    }
    syncblob::parallel::set_executor({});
    CHECK(syncblob::math::split_bytes(SplitKind::update) == 3 * l1);
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
