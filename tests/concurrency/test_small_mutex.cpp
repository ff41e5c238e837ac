// SPDX-License-Identifier: BSD-2-Clause
// The four-byte lock every SyncedBuffer holds: threads contending for it never share it, and none
// is left asleep once the others are done (a missed wake-up hangs, so the threads run against a
// deadline). Built with ThreadSanitizer in CI, which reports a write its exclusion let through.

#include <catch2/catch.hpp>

#include <time.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <syncblob/memory/detail/small_mutex.hpp>

namespace {

using syncblob::detail::SmallMutex;

// What the threads share: on the heap and owned by each, so that threads left hanging after a
// failed deadline read nothing freed.
struct Shared {
    SmallMutex mutex;
    long counter = 0;         // written under the lock only
    int inside = 0;           // threads inside the lock at once: 1 while one is
    bool overlapped = false;  // a thread found another inside
    std::atomic<int> done{0};
};

}  // namespace

TEST_CASE("SmallMutex: contending threads each hold it alone, and every one finishes", "[concurrency][memory]") {
    constexpr int threads = 6;
    constexpr int rounds = 20000;
    auto shared = std::make_shared<Shared>();
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
        workers.emplace_back([shared] {
            for (int i = 0; i < rounds; ++i) {
                const std::lock_guard lock(shared->mutex);
                shared->overlapped = shared->overlapped || ++shared->inside != 1;
                const long seen = shared->counter;
                if (i % 64 == 0) {
                    std::this_thread::yield();  // held across a reschedule: the others must sleep or spin
                }
                shared->counter = seen + 1;
                --shared->inside;
            }
            shared->done.fetch_add(1, std::memory_order_release);
        });
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (shared->done.load(std::memory_order_acquire) != threads && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    const bool finished = shared->done.load(std::memory_order_acquire) == threads;
    for (auto& w : workers) {
        finished ? w.join() : w.detach();  // a thread asleep for good cannot be joined
    }
    REQUIRE(finished);
    CHECK_FALSE(shared->overlapped);
    CHECK(shared->counter == static_cast<long>(threads) * rounds);
}

TEST_CASE("SmallMutex: try_lock takes it only when free", "[concurrency][memory]") {
    SmallMutex m;
    REQUIRE(m.try_lock());
    CHECK_FALSE(m.try_lock());
    bool other = true;
    std::thread([&] { other = m.try_lock(); }).join();
    CHECK_FALSE(other);
    m.unlock();
    std::unique_lock lock(m, std::try_to_lock);
    CHECK(lock.owns_lock());
}

TEST_CASE("SmallMutex: a thread waiting for it sleeps instead of spinning", "[concurrency][memory]") {
    // A lock that only spun would still be correct, and would burn a core for as long as it is held.
    SmallMutex m;
    m.lock();
    std::atomic<bool> waiting{false};
    double waiter_cpu_ms = -1;
    std::thread waiter([&] {
        waiting = true;
        m.lock();  // held by the main thread for 300 ms
        timespec cpu{};
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
        waiter_cpu_ms = static_cast<double>(cpu.tv_sec) * 1e3 + static_cast<double>(cpu.tv_nsec) / 1e6;
        m.unlock();
    });
    while (!waiting) {
        std::this_thread::yield();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    m.unlock();
    waiter.join();
    INFO("the waiter's CPU time: " << waiter_cpu_ms << " ms");
    CHECK(waiter_cpu_ms >= 0);
    CHECK(waiter_cpu_ms < 100);
}
