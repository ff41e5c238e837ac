// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The threads syncblob's host work runs on: a persistent pool, created on first use, that a call
/// splits its work over (host math over large blobs, large copying loads).
///
/// - **Size.** One worker per CPU the process may run on (`sched_getaffinity`, so a container or
///   `taskset` limit counts, not the machine's total), the calling thread being one of them.
///   `set_max_threads` limits how many take part in a call; 1 turns threading off.
/// - **Wake-up.** A worker that has run a part spins for a short while (`spin_microseconds()`,
///   default 50 µs) watching for the next call, so calls in a loop reach it in well under a
///   microsecond, then sleeps on a futex: an idle pool costs no CPU time.
/// - **Progress.** Parts are claimed, not assigned: the caller runs parts too, and runs every part
///   no worker has claimed, so a worker that is asleep or descheduled (the other core busy with
///   the user's own threads) delays a call by at most the part it has already claimed. The work of
///   a part does not depend on who runs it, so results do not either.
/// - **Several callers.** One call uses the pool at a time; a call that finds it busy runs on its
///   own thread alone.
/// - **fork().** A child process has none of the parent's threads; its first parallel call
///   creates a new pool.
/// - **Your own threads.** `set_executor` hands the parts to your thread pool instead.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "error.hpp"

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

SYNCBLOB_BEGIN_NAMESPACE

namespace parallel {

/// The most threads a call can split its work over (a limit of `set_max_threads`).
inline constexpr unsigned thread_limit = 64;

/// Runs `part(0)` … `part(parts - 1)`, each exactly once, in any order and on any threads, and
/// returns when all have finished; an exception thrown by a part is rethrown to the caller (the
/// first, when several throw). Installed with `set_executor`.
using Executor = std::function<void(unsigned parts, const std::function<void(unsigned)>& part)>;

/// The CPUs this process may run on (its affinity mask; the hardware's count where that cannot be read).
[[nodiscard]] inline unsigned available_cpus() noexcept {
#if defined(__linux__)
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
        return static_cast<unsigned>(std::max(1, CPU_COUNT(&set)));
    }
#endif
    return std::max(1u, std::thread::hardware_concurrency());
}

/// The size in bytes of one core's cache at `level` (1 for data, 2, 3): from the system
/// (`sysconf`, else sysfs), or `fallback` where neither says.
[[nodiscard]] inline std::size_t cache_bytes(int level, std::size_t fallback = std::size_t{1} << 20) noexcept {
#if defined(__linux__)
    // sysfs first: it describes the cache a core sees (sysconf has reported the whole L3 of a
    // many-core package as one core's on virtual machines).
    for (int index = 0; index < 8; ++index) {
        char path[96];
        std::snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu0/cache/index%d/level", index);
        std::FILE* f = std::fopen(path, "r");
        if (f == nullptr) {
            break;
        }
        int found = 0;
        const bool ok = std::fscanf(f, "%d", &found) == 1;
        std::fclose(f);
        if (!ok || found != level) {
            continue;
        }
        std::snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu0/cache/index%d/type", index);
        if ((f = std::fopen(path, "r")) == nullptr) {
            continue;
        }
        char type[32] = {};
        const bool typed = std::fscanf(f, "%31s", type) == 1;
        std::fclose(f);
        if (!typed || type[0] == 'I') {  // "Data" or "Unified", not "Instruction"
            continue;
        }
        std::snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu0/cache/index%d/size", index);
        if ((f = std::fopen(path, "r")) == nullptr) {
            continue;
        }
        unsigned long long size = 0;
        char unit = 0;
        const int read = std::fscanf(f, "%llu%c", &size, &unit);
        std::fclose(f);
        if (read >= 1 && size > 0) {
            return static_cast<std::size_t>(size) * (unit == 'K' ? 1024u : unit == 'M' ? 1024u * 1024u : 1u);
        }
    }
#if defined(_SC_LEVEL2_CACHE_SIZE)
    const long value = level == 1   ? sysconf(_SC_LEVEL1_DCACHE_SIZE)
                       : level == 2 ? sysconf(_SC_LEVEL2_CACHE_SIZE)
                       : level == 3 ? sysconf(_SC_LEVEL3_CACHE_SIZE)
                                    : 0;
    if (value > 0) {
        return static_cast<std::size_t>(value);
    }
#endif
#endif
    (void)level;
    return fallback;
}

namespace detail {

inline std::atomic<unsigned>& max_threads_value() noexcept {
    static std::atomic<unsigned> value{std::clamp(available_cpus(), 1u, thread_limit)};
    return value;
}
inline std::atomic<unsigned>& spin_value() noexcept {
    static std::atomic<unsigned> value{50};
    return value;
}

/// A user's executor, when one is installed (`has_executor` is the one load a call pays otherwise).
struct ExecutorSlot {
    std::atomic<bool> has_executor{false};
    std::mutex mutex;
    std::shared_ptr<const Executor> executor;

    static ExecutorSlot& get() noexcept {
        static ExecutorSlot slot;
        return slot;
    }
};

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
}

/// A part to run, as a pointer to the caller's callable and a function that calls it.
struct PartRef {
    const void* body = nullptr;
    void (*call)(const void* body, unsigned part) = nullptr;
    void operator()(unsigned part) const { call(body, part); }
};

/// The pool. Never destroyed (its workers may be asleep at exit, and must not outlive it);
/// abandoned in a fork child, whose new pool replaces it.
class WorkerPool {
public:
    /// The process's pool, created on first use (and again in a fork child).
    static WorkerPool& instance() {
        WorkerPool* pool = current().load(std::memory_order_acquire);
        return pool != nullptr ? *pool : create();
    }

    /// Workers beside the caller.
    [[nodiscard]] unsigned workers() const noexcept { return static_cast<unsigned>(threads_.size()); }

    /// The most parts one call can hand the pool (the claim word's field).
    static constexpr unsigned max_parts = 0xffffu;

    /// Runs `parts` parts (at most max_parts) on the pool and the calling thread. False, with
    /// nothing run, when another call holds the pool.
    bool try_run(unsigned parts, PartRef part) {
        if (busy_.exchange(true, std::memory_order_acquire)) {
            return false;
        }
        part_ = part;
        done_.store(0, std::memory_order_relaxed);
        // Publishes the job: a new epoch, part 0 already the caller's. Spinning workers watch
        // claim_ itself; sleeping ones are woken through wake_.
        const std::uint64_t epoch = (claim_.load(std::memory_order_relaxed) >> 32) + 1;
        claim_.store(claim_word(epoch, parts, 1), std::memory_order_seq_cst);
        if (sleepers_.load(std::memory_order_seq_cst) != 0) {
            wake_.fetch_add(1, std::memory_order_seq_cst);
            wake_.notify_all();
        }
        run_part(0);
        run_parts(epoch);
        while (done_.load(std::memory_order_acquire) != parts) {
            cpu_relax();
        }
        std::exception_ptr error = std::move(error_);  // before the next call may own the pool
        busy_.store(false, std::memory_order_release);
        if (error) {
            std::rethrow_exception(error);
        }
        return true;
    }

    WorkerPool(const WorkerPool&) = delete;
    WorkerPool& operator=(const WorkerPool&) = delete;

private:
    WorkerPool() = default;
    ~WorkerPool() = default;

    static std::atomic<WorkerPool*>& current() noexcept {
        static std::atomic<WorkerPool*> pool{nullptr};
        return pool;
    }

    SYNCBLOB_NOINLINE static WorkerPool& create() {
        static std::mutex mutex;
        std::lock_guard lock(mutex);
        if (WorkerPool* pool = current().load(std::memory_order_acquire)) {
            return *pool;
        }
        static const bool registered = [] {
#if defined(__linux__)
            // The child of a fork has the pool's memory but not its threads: forget it there (it
            // stays reachable through abandoned(), so leak checkers see no leak).
            (void)pthread_atfork(nullptr, nullptr, [] {
                if (WorkerPool* old = current().load(std::memory_order_relaxed)) {
                    abandoned().push_back(old);
                }
                current().store(nullptr, std::memory_order_relaxed);
            });
#endif
            return true;
        }();
        (void)registered;
        auto* pool = new WorkerPool();
        const unsigned wanted = std::min(available_cpus(), thread_limit) - 1;
        for (unsigned w = 0; w < wanted; ++w) {
            try {
                pool->threads_.emplace_back([pool] { pool->work(); });
                pool->threads_.back().detach();
            } catch (...) {  // fewer threads: the caller runs what they would have
                break;
            }
        }
        current().store(pool, std::memory_order_release);
        return *pool;
    }

    static std::vector<WorkerPool*>& abandoned() {
        static auto* list = new std::vector<WorkerPool*>();  // never destroyed: a fork child may use it at exit
        return *list;
    }

    // Claims and runs the parts of job `epoch` until none is left. A claim succeeds only while the
    // claim word still names `epoch`, and the part count is read from that same word, so a late
    // worker never takes a part of a job that is over or not yet published.
    void run_parts(std::uint64_t epoch) {
        std::uint64_t seen = claim_.load(std::memory_order_acquire);
        while ((seen >> 32) == epoch) {
            const auto next = static_cast<unsigned>(seen & 0xffffu);
            if (next >= static_cast<unsigned>(seen >> 16 & 0xffffu)) {
                return;
            }
            if (claim_.compare_exchange_weak(seen, seen + 1, std::memory_order_acq_rel, std::memory_order_acquire)) {
                run_part(next);
                seen = claim_.load(std::memory_order_acquire);
            }
        }
    }

    // Runs one claimed part; of the parts that throw, the lowest-numbered one's exception is kept.
    void run_part(unsigned part) {
        try {
            part_(part);
        } catch (...) {
            std::lock_guard lock(error_mutex_);
            if (!error_ || part < error_part_) {
                error_ = std::current_exception();
                error_part_ = part;
            }
        }
        done_.fetch_add(1, std::memory_order_release);
    }

    [[noreturn]] void work() {
        std::uint64_t seen = claim_.load(std::memory_order_acquire) >> 32;
        for (;;) {
            // Spin, then sleep, until a new job is published.
            const auto spin_until = std::chrono::steady_clock::now() +
                                    std::chrono::microseconds(spin_value().load(std::memory_order_relaxed));
            std::uint64_t epoch = claim_.load(std::memory_order_acquire) >> 32;
            for (unsigned i = 0; epoch == seen; ++i) {
                cpu_relax();
                if ((i & 63) == 63 && std::chrono::steady_clock::now() > spin_until) {
                    // Announce the sleep, then look once more: either the caller sees a sleeper
                    // and wakes it, or this sees the caller's job (both are sequentially consistent).
                    sleepers_.fetch_add(1, std::memory_order_seq_cst);
                    const std::uint32_t ticket = wake_.load(std::memory_order_seq_cst);
                    if ((claim_.load(std::memory_order_seq_cst) >> 32) == seen) {
                        wake_.wait(ticket, std::memory_order_seq_cst);
                    }
                    sleepers_.fetch_sub(1, std::memory_order_seq_cst);
                }
                epoch = claim_.load(std::memory_order_acquire) >> 32;
            }
            seen = epoch;
            run_parts(epoch);
        }
    }

    // The claim word: the job's epoch, its part count and the next part to claim, in one atomic, so
    // a worker that looks late never pairs one job's count with another's claim.
    static constexpr std::uint64_t claim_word(std::uint64_t epoch, unsigned parts, unsigned next) noexcept {
        return epoch << 32 | std::uint64_t{parts} << 16 | next;
    }

    // One cache line holds everything a worker reads to take a part: the claim word and the job,
    // written by the caller before it publishes the claim word, read by a worker only after it has
    // claimed a part of that job.
    alignas(64) std::atomic<std::uint64_t> claim_{0};
    PartRef part_{};
    alignas(64) std::atomic<unsigned> done_{0};       // parts finished
    alignas(64) std::atomic<std::uint32_t> wake_{0};  // what sleeping workers wait on
    std::atomic<unsigned> sleepers_{0};
    alignas(64) std::atomic<bool> busy_{false};
    std::mutex error_mutex_;  // taken only when a part throws
    std::exception_ptr error_;
    unsigned error_part_ = 0;
    std::vector<std::thread> threads_;
};

}  // namespace detail

/// Threads a call may split its work over (default: the CPUs the process may use, at most 64).
[[nodiscard]] inline unsigned max_threads() noexcept {
    return detail::max_threads_value().load(std::memory_order_relaxed);
}

/// Limits the threads a call may split its work over; 1 turns threading off. Takes effect from the
/// next call (calls running keep their split). \throws StateError when `n` is 0 or above 64.
inline void set_max_threads(unsigned n) {
    if (n < 1 || n > thread_limit) {
        throw StateError("parallel::set_max_threads: " + std::to_string(n) + " threads, expected 1 to " +
                         std::to_string(thread_limit));
    }
    detail::max_threads_value().store(n, std::memory_order_relaxed);
}

/// How long an idle worker watches for the next call before it sleeps (default 50 µs; 0: sleep
/// at once, so every call pays a wake-up of several microseconds).
[[nodiscard]] inline unsigned spin_microseconds() noexcept {
    return detail::spin_value().load(std::memory_order_relaxed);
}
inline void set_spin_microseconds(unsigned us) noexcept {
    detail::spin_value().store(us, std::memory_order_relaxed);
}

/// Hands the parts of every parallel call to `executor` instead of syncblob's pool (an empty
/// executor restores the pool). It must run every part once and return when all are done.
inline void set_executor(Executor executor) {
    auto& slot = detail::ExecutorSlot::get();
    std::lock_guard lock(slot.mutex);
    slot.executor = executor ? std::make_shared<const Executor>(std::move(executor)) : nullptr;
    slot.has_executor.store(slot.executor != nullptr, std::memory_order_release);
}

/// The parts a call with `parts` pieces of work is cut into: min(parts, max_threads()). They run on
/// the pool's workers and the caller; where there are fewer of those, some run one after another.
[[nodiscard]] inline unsigned threads_for(std::int64_t parts) noexcept {
    return static_cast<unsigned>(std::min<std::int64_t>(parts, max_threads()));
}

/// Runs `part(p)` for p in [0, parts) on up to `parts` threads (the caller among them) and returns
/// when all have run. Which thread runs a part varies; what a part does must not depend on it.
/// \throws whatever a part throws (the lowest-numbered part's exception when several throw).
template <class Part>
void run(unsigned parts, const Part& part) {
    if (parts == 0) {
        return;
    }
    if (parts == 1) {
        part(0u);
        return;
    }
    auto& slot = detail::ExecutorSlot::get();
    if (slot.has_executor.load(std::memory_order_acquire)) {
        std::shared_ptr<const Executor> executor;
        {
            std::lock_guard lock(slot.mutex);
            executor = slot.executor;
        }
        if (executor) {
            (*executor)(parts, std::function<void(unsigned)>([&part](unsigned p) { part(p); }));
            return;
        }
    }
    auto& pool = detail::WorkerPool::instance();
    const detail::PartRef ref{&part, [](const void* body, unsigned p) { (*static_cast<const Part*>(body))(p); }};
    if (pool.workers() != 0 && parts <= detail::WorkerPool::max_parts && pool.try_run(parts, ref)) {
        return;
    }
    // The pool is busy with another call (or has no worker): run every part here, in order.
    std::exception_ptr first;
    for (unsigned p = 0; p < parts; ++p) {
        try {
            part(p);
        } catch (...) {
            if (!first) {
                first = std::current_exception();
            }
        }
    }
    if (first) {
        std::rethrow_exception(first);
    }
}

}  // namespace parallel

SYNCBLOB_END_NAMESPACE
