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
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "detail/worker_pool.hpp"
#include "error.hpp"
#include "hardware.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace parallel {

/// The most threads a call can split its work over (a limit of `set_max_threads`).
inline constexpr unsigned thread_limit = detail::max_pool_threads;

/// Runs `part(0)` … `part(parts - 1)`, each exactly once, in any order and on any threads, and
/// returns when all have finished; an exception thrown by a part is rethrown to the caller (the
/// first, when several throw). Installed with `set_executor`.
using Executor = detail::PartsExecutor;

// The hardware probes live in core/hardware.hpp, in namespace syncblob; these names stay for callers
// that reach them through the pool.
using syncblob::available_cpus;
using syncblob::cache_bytes;

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
