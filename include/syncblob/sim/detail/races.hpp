// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The race checks of the engine behind `SimulatedDevice`: the accesses of issued operations that a
/// later operation could still race with, and the check of each new operation against them. Two
/// operations on different streams race when one writes what the other touches and neither
/// happens before the other, as their vector clocks say.

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "../../core/config.hpp"
#include "ops.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace sim::detail {

/// One access of a past or queued operation, kept while a later operation could race with it.
struct Access {
    Range range;
    bool write = false;
    bool allocation = false;
    int stream = 0;
    Clock clock;
    std::string what;
};

/// The accesses remembered for race checks.
class RaceLog {
public:
    /// Compares `op` with every access it could race with, then remembers its own accesses.
    /// Returns how the first race found reads (one fault per operation), or "" when there is none.
    [[nodiscard]] std::string check(const Operation& op) {
        std::string found;
        const auto raced = [&](const Range& r, bool write) {
            for (const auto& a : history_) {
                if (a.stream != op.stream && (write || a.write) && overlap(a.range, r) &&
                    !happens_before(a.clock, op.clock)) {
                    found = race(op, a, write, r.data);
                    return true;
                }
            }
            return false;
        };
        if (!std::any_of(op.reads.begin(), op.reads.end(), [&](const Range& r) { return raced(r, false); })) {
            (void)std::any_of(op.writes.begin(), op.writes.end(), [&](const Range& r) { return raced(r, true); });
        }
        const bool allocation = op.kind == OpKind::allocation;
        for (const auto& r : op.reads) {
            history_.push_back(Access{r, false, false, op.stream, op.clock, op.what});
        }
        for (const auto& r : op.writes) {
            history_.push_back(Access{r, true, allocation, op.stream, op.clock, op.what});
        }
        return found;
    }

    /// Forgets the accesses to `r` (a block freed at once: nothing queued uses it any more).
    void forget(const Range& r) {
        std::erase_if(history_, [&](const Access& a) { return overlap(a.range, r); });
    }

    /// Forgets the accesses the host has waited for (`host` is what it has seen): they cannot race
    /// with anything issued from now on.
    void prune(const Clock& host) {
        std::erase_if(history_, [&](const Access& a) { return happens_before(a.clock, host); });
    }

    /// Accesses remembered.
    [[nodiscard]] std::size_t size() const noexcept { return history_.size(); }

private:
    // How a race between `op` and an earlier access `a` at `at` reads.
    static std::string race(const Operation& op, const Access& a, bool write, const void* at) {
        const std::string mine = op.what + " on " + stream_name(op.stream);
        const std::string theirs = a.what + " on " + stream_name(a.stream);
        if (op.kind == OpKind::free) {
            return "block " + hex(at) + " freed on " + stream_name(op.stream) + " while " + theirs +
                   ", not ordered before the free, still uses it";
        }
        if (a.allocation) {
            return mine + " uses " + hex(at) + " before it is ordered after the " + theirs;
        }
        const std::string how = write && a.write ? "both write"
                                : write          ? op.what + " writes what " + a.what + " reads"
                                                 : a.what + " writes what " + op.what + " reads";
        return mine + " and " + theirs + " are unordered: " + how + " at " + hex(at);
    }

    std::vector<Access> history_;
};

}  // namespace sim::detail

SYNCBLOB_END_NAMESPACE
