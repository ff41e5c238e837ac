// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// `SimulatedContext`: what `SimulatedDevice` runs in and what a test sees of it. Its settings
/// (fault injection, checking mode, devices, the seed of the interleaving), the scope a test
/// installs them for, and what the simulator observed (faults, footprint, live blocks), over one
/// process-wide state. `SimulatedDevice` derives from it, so `SimulatedDevice::Scope` and
/// `SimulatedDevice::faults()` are these.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "../core/error.hpp"
#include "../core/fork_lock.hpp"
#include "detail/queue.hpp"

SYNCBLOB_BEGIN_NAMESPACE

/// The settings, scopes and observations of the simulated devices (see `SimulatedDevice`).
class SimulatedContext {
public:
    /// What a `Scope` sets.
    struct Settings {
        /// Fail the k-th device allocation made inside the scope (1-based) with `std::bad_alloc`; 0: never.
        std::uint64_t fail_allocation = 0;
        /// Ask buffers to poison the side a mutable access made stale.
        bool checking = false;
        /// Number of simulated devices (at least 1); `set_device` accepts [0, device_count).
        int device_count = 1;
        /// Chooses the order in which `synchronize()` interleaves the streams' queued work.
        std::uint64_t seed = 0;
        /// Make `register_host` fail, as `cudaHostRegister` does when memory cannot be page-locked.
        bool fail_registration = false;
        /// Fail the k-th copy (`copy` or `copy_async`) issued inside the scope (1-based) with a
        /// `DeviceError`, as a failing device would; 0: never.
        std::uint64_t fail_copy = 0;
    };

    /// Installs settings for its lifetime and restores the previous ones after (not thread-safe
    /// against concurrent scopes; meant for tests). `faults()` reports what happened since the
    /// innermost scope began; an outer scope still sees its inner scopes' faults.
    /// \throws OptionError for a `device_count` below 1 (nothing is installed).
    class Scope {
    public:
        explicit Scope(Settings settings) {
            if (settings.device_count < 1) {
                throw OptionError("SimulatedDevice::Scope: Settings::device_count " +
                                  std::to_string(settings.device_count) + ": a scope needs at least one device");
            }
            auto& s = state();
            std::lock_guard lock(s.mutex);
            previous_ = s.settings;
            previous_allocations_ = s.allocations_in_scope;
            previous_copies_ = s.copies_in_scope;
            previous_first_fault_ = s.first_fault;
            previous_rng_ = s.rng;
            s.settings = settings;
            s.allocations_in_scope = 0;
            s.copies_in_scope = 0;
            s.first_fault = s.engine.faults().size();
            s.rng.seed(settings.seed);
        }
        ~Scope() {
            auto& s = state();
            std::lock_guard lock(s.mutex);
            s.settings = previous_;
            s.allocations_in_scope = previous_allocations_;
            s.copies_in_scope = previous_copies_;
            s.first_fault = previous_first_fault_;
            s.rng = previous_rng_;
        }
        Scope(const Scope&) = delete;
        Scope& operator=(const Scope&) = delete;

    private:
        Settings previous_;
        std::uint64_t previous_allocations_ = 0;
        std::uint64_t previous_copies_ = 0;
        std::size_t previous_first_fault_ = 0;
        std::mt19937_64 previous_rng_;
    };

    /// The settings in force.
    [[nodiscard]] static Settings settings() {
        auto& s = state();
        std::lock_guard lock(s.mutex);
        return s.settings;
    }

    /// The misuse seen since the innermost `Scope` began, in order (empty when there was none).
    [[nodiscard]] static std::vector<std::string> faults() {
        auto& s = state();
        std::lock_guard lock(s.mutex);
        const auto& all = s.engine.faults();
        return {all.begin() + static_cast<std::ptrdiff_t>(std::min(s.first_fault, all.size())), all.end()};
    }

    /// Forgets the faults recorded since the innermost `Scope` began (for a test that provoked
    /// them on purpose and checked them).
    static void clear_faults() {
        auto& s = state();
        std::lock_guard lock(s.mutex);
        s.engine.truncate_faults(s.first_fault);
    }

    /// Operations (copies, fills, kernels) issued but not yet run, on all streams.
    [[nodiscard]] static std::size_t pending_copies() {
        auto& s = state();
        std::lock_guard lock(s.mutex);
        return s.engine.queued();
    }

    /// How much the simulator holds (queued operations, remembered accesses, streams, blocks,
    /// faults): what must stay bounded over a long run.
    [[nodiscard]] static sim::detail::Footprint footprint() {
        auto& s = state();
        std::lock_guard lock(s.mutex);
        return s.engine.footprint();
    }

    /// Device blocks allocated and not yet freed (for leak checks).
    [[nodiscard]] static std::size_t live_blocks() {
        auto& s = state();
        std::lock_guard lock(s.mutex);
        return s.live_blocks;
    }

protected:
    /// Everything the simulator keeps, process-wide, under one mutex.
    struct State {
        std::mutex mutex;
        detail::ForkLock fork_lock{mutex, detail::fork_rank::simulator};  // a fork never copies it locked
        Settings settings;
        std::uint64_t allocations_in_scope = 0;
        std::uint64_t copies_in_scope = 0;
        std::size_t live_blocks = 0;
        std::size_t live_bytes = 0;
        sim::detail::Engine engine;
        std::size_t first_fault = 0;
        std::mt19937_64 rng{0};
        std::map<const void*, std::size_t> registered;  // register_host's ranges

        /// Remembers the `bytes` bytes at `p` as registered: false, remembering nothing, when part
        /// of them already is.
        bool add_registered(void* p, std::size_t bytes) {
            const auto* begin = static_cast<const std::byte*>(p);
            for (const auto& [q, n] : registered) {
                const auto* other = static_cast<const std::byte*>(q);
                if (std::less<>{}(begin, other + n) && std::less<>{}(other, begin + bytes)) {
                    return false;
                }
            }
            registered.emplace(p, bytes);
            return true;
        }

        /// True when `p` lies in a registered range.
        [[nodiscard]] bool is_registered(const void* p) const {
            const auto* q = static_cast<const std::byte*>(p);
            return std::any_of(registered.begin(), registered.end(), [q](const auto& range) {
                const auto* begin = static_cast<const std::byte*>(range.first);
                return std::less_equal<>{}(begin, q) && std::less<>{}(q, begin + range.second);
            });
        }
    };

    static State& state() {
        static State s;
        return s;
    }
};

SYNCBLOB_END_NAMESPACE
