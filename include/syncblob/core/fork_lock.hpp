// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Internal, shared beyond its folder: used by the pinned pool and the simulated device's context (memory/),
/// so it sits outside detail/; its names stay in a detail namespace and are no user API.
///
/// Process-wide mutexes made safe across `fork()`: a child process has only the thread that
/// forked, so a mutex another thread held at that moment would stay locked in the child forever.
/// Each registered mutex is taken before the fork (in a fixed order of ranks, lowest first) and
/// released after it in both processes (`pthread_atfork`), so the child finds every one unlocked
/// and its data consistent.

#include <algorithm>
#include <mutex>
#include <vector>

#if defined(__unix__) || defined(__APPLE__)
#include <pthread.h>
#define SYNCBLOB_FORK_LOCKS 1
#else
#define SYNCBLOB_FORK_LOCKS 0
#endif

#include "config.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace detail {

/// Ranks of the process-wide mutexes: a component that calls another while holding its own mutex
/// has the lower rank, so the order before a fork is the order the code itself takes them in.
namespace fork_rank {
inline constexpr int host_pool = 10;       ///< `PinnedPool` (queries the device backend)
inline constexpr int simulated_pool = 20;  ///< `SimulatedAsyncDevice`'s pool (calls the simulator)
inline constexpr int simulator = 30;       ///< `SimulatedDevice`'s engine
}  // namespace fork_rank

/// Registers `mutex` for its lifetime: `fork()` takes it first and releases it after, in the
/// parent and in the child.
class ForkLock {
public:
    ForkLock(std::mutex& mutex, int rank) : mutex_(&mutex) {
#if SYNCBLOB_FORK_LOCKS
        auto& r = registry();
        std::lock_guard lock(r.mutex);
        const auto at =
            std::upper_bound(r.locks.begin(), r.locks.end(), rank, [](int k, const Entry& e) { return k < e.rank; });
        r.locks.insert(at, Entry{rank, mutex_});
#else
        (void)rank;
#endif
    }
    ~ForkLock() {
#if SYNCBLOB_FORK_LOCKS
        auto& r = registry();
        std::lock_guard lock(r.mutex);
        std::erase_if(r.locks, [this](const Entry& e) { return e.mutex == mutex_; });
#endif
    }
    ForkLock(const ForkLock&) = delete;
    ForkLock& operator=(const ForkLock&) = delete;

private:
    std::mutex* mutex_;

#if SYNCBLOB_FORK_LOCKS
    struct Entry {
        int rank;
        std::mutex* mutex;
    };
    struct Registry {
        std::mutex mutex;
        std::vector<Entry> locks;  // ascending rank
    };

    // Never destroyed: a fork during exit still finds it. The handlers are installed once.
    static Registry& registry() {
        static Registry* r = [] {
            auto* made = new Registry;  // NOLINT(cppcoreguidelines-owning-memory)
            (void)pthread_atfork(&before_fork, &after_fork, &after_fork);
            return made;
        }();
        return *r;
    }

    static void before_fork() noexcept {
        auto& r = registry();
        r.mutex.lock();
        for (const Entry& e : r.locks) {
            e.mutex->lock();
        }
    }

    static void after_fork() noexcept {  // in the parent and in the child alike
        auto& r = registry();
        for (auto it = r.locks.rbegin(); it != r.locks.rend(); ++it) {
            it->mutex->unlock();
        }
        r.mutex.unlock();
    }
#endif
};

}  // namespace detail

SYNCBLOB_END_NAMESPACE

#undef SYNCBLOB_FORK_LOCKS
