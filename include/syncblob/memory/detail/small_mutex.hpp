// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// `detail::SmallMutex`: a mutex of four bytes, for objects made by the million.

#include <atomic>
#include <cstdint>

#include "../../core/config.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace detail {

/// A lock of four bytes on C++20's atomic wait and notify (a futex on Linux). `std::mutex` is 40
/// bytes with glibc, an eighth of what a `SyncedBuffer` held; a buffer's lock is taken for a few
/// instructions at a time and seldom contended, so it needs no more than this. Unlocked it is one
/// compare-and-swap and one exchange, as a `pthread_mutex_t` is; a thread that finds it held marks
/// it contended and sleeps until the holder's unlock wakes one waiter. Not recursive.
/// Satisfies *Lockable*, so `std::lock_guard`, `std::unique_lock` and `std::scoped_lock` take it.
class SmallMutex {
public:
    SmallMutex() noexcept = default;
    SmallMutex(const SmallMutex&) = delete;
    SmallMutex& operator=(const SmallMutex&) = delete;

    void lock() noexcept {
        if (!try_lock()) {
            lock_contended();
        }
    }

    [[nodiscard]] bool try_lock() noexcept {
        std::uint32_t expected = unlocked;
        return state_.compare_exchange_strong(expected, locked, std::memory_order_acquire, std::memory_order_relaxed);
    }

    void unlock() noexcept {
        if (state_.exchange(unlocked, std::memory_order_release) == contended) {
            state_.notify_one();
        }
    }

private:
    static constexpr std::uint32_t unlocked = 0;
    static constexpr std::uint32_t locked = 1;     // held, nobody waiting
    static constexpr std::uint32_t contended = 2;  // held, and someone may be waiting

    // Marks the lock contended until it is taken: the thread that takes it this way leaves it
    // `contended`, so its unlock wakes whoever else is waiting.
    void lock_contended() noexcept {
        while (state_.exchange(contended, std::memory_order_acquire) != unlocked) {
            state_.wait(contended, std::memory_order_relaxed);
        }
    }

    std::atomic<std::uint32_t> state_{unlocked};
};

static_assert(sizeof(SmallMutex) == 4);

}  // namespace detail

SYNCBLOB_END_NAMESPACE
