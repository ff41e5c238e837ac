// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The worker pool under `parallel::run` (core/thread_pool.hpp, which describes how it behaves):
/// its threads, how a call's parts are claimed, how idle workers spin and sleep, and the settings
/// and the user's executor the public calls read.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "../config.hpp"
#include "../hardware.hpp"

#if defined(__linux__)
#include <pthread.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

SYNCBLOB_BEGIN_NAMESPACE

namespace detail {

/// The most threads a parallel call can split its work over (`parallel::thread_limit`).
inline constexpr unsigned max_pool_threads = 64;

/// Runs parts 0 … parts - 1 of a call (`parallel::Executor`).
using PartsExecutor = std::function<void(unsigned parts, const std::function<void(unsigned)>& part)>;

/// The settings of `parallel::set_max_threads` and `parallel::set_spin_microseconds`.
inline std::atomic<unsigned>& max_threads_value() noexcept {
    static std::atomic<unsigned> value{std::clamp(available_cpus(), 1u, max_pool_threads)};
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
    std::shared_ptr<const PartsExecutor> executor;

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
        const unsigned wanted = std::min(available_cpus(), max_pool_threads) - 1;
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

SYNCBLOB_END_NAMESPACE
