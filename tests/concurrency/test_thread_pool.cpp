// SPDX-License-Identifier: BSD-2-Clause
// syncblob's worker pool (core/thread_pool.hpp) under concurrent use: every part runs once,
// exceptions reach the caller, many callers at once, the thread limit changed while calls run, a
// user's executor, and an idle pool that sleeps. The ThreadSanitizer build runs this group.

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <syncblob/core/thread_pool.hpp>
#include <syncblob/math.hpp>

namespace parallel = syncblob::parallel;

namespace {

struct LimitGuard {
    unsigned threads = parallel::max_threads();
    std::int64_t threshold = syncblob::math::parallel_threshold();
    ~LimitGuard() {
        parallel::set_max_threads(threads);
        syncblob::math::set_parallel_threshold(threshold);
        parallel::set_executor({});
    }
};

double process_cpu_seconds() {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

}  // namespace

TEST_CASE("every part of a parallel call runs exactly once", "[parallel]") {
    for (unsigned parts = 1; parts <= 70; ++parts) {  // past the 64 a call records errors for on its stack
        std::vector<std::atomic<int>> runs(parts);
        parallel::run(parts, [&](unsigned p) { runs[p].fetch_add(1, std::memory_order_relaxed); });
        int wrong = 0;
        for (auto& r : runs) {
            wrong += r.load() != 1 ? 1 : 0;
        }
        CHECK(wrong == 0);
    }
}

TEST_CASE("an exception thrown by a part reaches the caller, and the pool goes on working", "[parallel]") {
    for (int round = 0; round < 50; ++round) {
        std::atomic<int> ran{0};
        try {
            parallel::run(8, [&](unsigned p) {
                ran.fetch_add(1);
                if (p == 3 || p == 5) {
                    throw std::runtime_error("part " + std::to_string(p));
                }
            });
            FAIL("no exception");
        } catch (const std::runtime_error& e) {
            CHECK(std::string(e.what()) == "part 3");  // the lowest part's, whichever thread ran it
        }
        CHECK(ran.load() == 8);  // the other parts still ran
    }
    std::atomic<int> after{0};
    parallel::run(4, [&](unsigned) { after.fetch_add(1); });
    CHECK(after.load() == 4);
}

TEST_CASE("many threads calling at once all get every part run", "[parallel]") {
    constexpr int callers = 8;
    constexpr int calls = 300;
    std::vector<std::int64_t> totals(callers, 0);
    std::vector<std::thread> threads;
    for (int c = 0; c < callers; ++c) {
        threads.emplace_back([&totals, c] {
            for (int i = 0; i < calls; ++i) {
                const unsigned parts = 2 + static_cast<unsigned>(i % 3);
                std::vector<std::int64_t> mine(parts, 0);  // each part writes its own slot
                parallel::run(parts, [&](unsigned p) { mine[p] = p + 1; });
                for (const auto v : mine) {
                    totals[static_cast<std::size_t>(c)] += v;
                }
            }
        });
    }
    for (auto& t : threads) {
        t.join();
    }
    std::int64_t expected = 0;
    for (int i = 0; i < calls; ++i) {
        const int parts = 2 + i % 3;
        expected += parts * (parts + 1) / 2;
    }
    for (const auto total : totals) {
        CHECK(total == expected);
    }
}

TEST_CASE("math from many threads, with the thread limit changed while it runs, gives the same bits", "[parallel]") {
    const LimitGuard guard;
    syncblob::math::set_parallel_threshold(1);  // every call with two blocks or more splits
    constexpr std::int64_t n = 5 * 65536 + 77;
    std::vector<float> x(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) {
        x[static_cast<std::size_t>(i)] = static_cast<float>(i % 101) * 0.25f - 12.0f;
    }
    parallel::set_max_threads(1);
    const float expected = syncblob::math::asum(x.data(), n);
    std::atomic<bool> stop{false};
    std::thread changer([&] {
        unsigned t = 1;
        while (!stop.load()) {
            parallel::set_max_threads(t);
            t = t % 4 + 1;
            std::this_thread::yield();
        }
    });
    std::vector<int> mismatches(4, 0);
    std::vector<std::thread> callers;
    for (int c = 0; c < 4; ++c) {
        callers.emplace_back([&, c] {
            for (int i = 0; i < 40; ++i) {
                if (syncblob::math::asum(x.data(), n) != expected) {
                    ++mismatches[static_cast<std::size_t>(c)];
                }
            }
        });
    }
    for (auto& t : callers) {
        t.join();
    }
    stop.store(true);
    changer.join();
    for (const int m : mismatches) {
        CHECK(m == 0);
    }
}

TEST_CASE("a user's executor receives the parts, and an empty one gives the pool back", "[parallel]") {
    const LimitGuard guard;
    std::atomic<int> calls{0};
    std::atomic<unsigned> parts_seen{0};
    parallel::set_executor([&](unsigned parts, const std::function<void(unsigned)>& part) {
        calls.fetch_add(1);
        parts_seen.store(parts);
        for (unsigned p = parts; p-- > 0;) {  // any order will do
            part(p);
        }
    });
    parallel::set_max_threads(2);
    syncblob::math::set_parallel_threshold(1);
    std::vector<float> x(3 * 65536, 1.0f);
    CHECK(syncblob::math::asum(x.data(), static_cast<std::int64_t>(x.size())) == 3 * 65536.0f);
    CHECK(calls.load() == 1);
    CHECK(parts_seen.load() == 2);
    parallel::set_executor({});
    CHECK(syncblob::math::asum(x.data(), static_cast<std::int64_t>(x.size())) == 3 * 65536.0f);
    CHECK(calls.load() == 1);
}

TEST_CASE("an idle pool sleeps instead of spinning", "[parallel]") {
    const LimitGuard guard;
    parallel::set_max_threads(2);
    for (int i = 0; i < 100; ++i) {
        parallel::run(2, [](unsigned) {});
    }
    // Past the spin time the workers sleep: the process then uses almost no CPU time.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const double before = process_cpu_seconds();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const double used = process_cpu_seconds() - before;
    CHECK(used < 0.05);  // a spinning worker would use the whole 0.2 s
}
