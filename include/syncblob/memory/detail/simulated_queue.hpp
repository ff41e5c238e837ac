// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The engine behind `SimulatedDevice`: per-stream queues of operations (copies, fills, kernels)
/// that run later, in stream order; dependencies between streams recorded by `stream_wait`; a
/// seeded interleaving of the streams at `synchronize`; and the misuse it can see, recorded as
/// faults: a block freed while queued work uses it, a block touched by work issued while another
/// device is current, and two unordered operations on different streams where one writes what the
/// other touches. Ordering is tracked with vector clocks (one counter per stream; the host's clock
/// is what it has waited for), so "unordered" means neither operation happens before the other.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "../../core/config.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace detail::sim {

/// Bytes an operation reads or writes.
struct Range {
    const void* data = nullptr;
    std::size_t bytes = 0;
};

/// A vector clock: for each stream, how many of its operations are known to have happened.
using Clock = std::map<int, std::uint64_t>;

inline void merge(Clock& into, const Clock& from) {
    for (const auto& [stream, n] : from) {
        auto& mine = into[stream];
        mine = std::max(mine, n);
    }
}

// True when everything `a` knows of has happened by `b`: an operation stamped `a` happens before
// one stamped `b`.
inline bool happens_before(const Clock& a, const Clock& b) {
    return std::all_of(a.begin(), a.end(), [&](const auto& entry) {
        const auto it = b.find(entry.first);
        return it != b.end() && it->second >= entry.second;
    });
}

inline bool overlap(const Range& a, const Range& b) {
    const auto x = reinterpret_cast<std::uintptr_t>(a.data);
    const auto y = reinterpret_cast<std::uintptr_t>(b.data);
    return a.bytes != 0 && b.bytes != 0 && x < y + b.bytes && y < x + a.bytes;
}

inline std::string hex(const void* p) {
    char text[2 * sizeof(void*) + 3];
    std::snprintf(text, sizeof text, "%p", p);
    return text;
}

/// A point in a stream: its operations up to `sequence`, and what they had seen.
struct Point {
    int stream = -1;
    std::uint64_t sequence = 0;
    Clock clock;
};

struct Operation {
    int stream = 0;
    std::uint64_t sequence = 0;
    std::string what;
    std::vector<Range> reads;
    std::vector<Range> writes;
    std::vector<Point> waits;  // other streams' points this operation runs after (stream_wait)
    Clock clock;
    std::function<void()> body;  // empty once cancelled
};

// One access of a past or queued operation, kept while a later operation could race with it.
struct Access {
    Range range;
    bool write = false;
    int stream = 0;
    Clock clock;
    std::string what;
};

struct Block {
    std::size_t bytes = 0;
    int device = 0;
};

struct StreamQueue {
    std::deque<Operation> queue;
    std::uint64_t issued = 0;
    Clock clock;
    std::vector<Point> next_waits;  // attached to the next operation issued on the stream
};

/// All of it; the caller (SimulatedDevice) holds the lock.
class Engine {
public:
    /// Queues `op` on its stream (stamping it, checking it for misuse); returns its sequence.
    std::uint64_t issue(Operation op, int current_device) {
        auto& s = streams_[op.stream];
        merge(s.clock, host_clock_);
        s.clock[op.stream] = ++s.issued;
        op.sequence = s.issued;
        op.clock = s.clock;
        op.waits = std::exchange(s.next_waits, {});
        check_device(op, current_device);
        check_races(op);
        check_freed(op);
        s.queue.push_back(std::move(op));
        return s.issued;
    }

    /// Runs `stream`'s operations up to `sequence`, each after the other streams' work it waits for.
    void run_until(int stream, std::uint64_t sequence) {
        const auto it = streams_.find(stream);
        if (it == streams_.end()) {
            return;
        }
        auto& queue = it->second.queue;
        while (!queue.empty() && queue.front().sequence <= sequence) {
            Operation op = std::move(queue.front());
            queue.pop_front();
            for (const auto& w : op.waits) {
                run_until(w.stream, w.sequence);
            }
            if (op.body) {
                op.body();
            }
        }
    }

    /// The point after everything issued on `stream` so far.
    [[nodiscard]] Point record(int stream) {
        auto& s = streams_[stream];
        return Point{stream, s.issued, s.clock};
    }

    /// The host waits for `p`: runs what it needs and learns what it had seen.
    void host_wait(const Point& p) {
        if (p.stream < 0) {
            return;
        }
        run_until(p.stream, p.sequence);
        merge(host_clock_, p.clock);
        prune();
    }

    /// True when the work up to `p` has run (nothing runs now); the host then knows what it had
    /// seen, as after a wait.
    [[nodiscard]] bool reached(const Point& p) {
        if (p.stream < 0) {
            return true;
        }
        const auto it = streams_.find(p.stream);
        if (it != streams_.end() && !it->second.queue.empty() && it->second.queue.front().sequence <= p.sequence) {
            return false;
        }
        merge(host_clock_, p.clock);
        return true;
    }

    /// `stream`'s next operation runs after `p`; nothing runs now.
    void stream_wait(int stream, const Point& p) {
        if (p.stream < 0 || p.stream == stream) {
            return;
        }
        auto& s = streams_[stream];
        s.next_waits.push_back(p);
        merge(s.clock, p.clock);
    }

    /// Runs everything queued, streams interleaved as `rng` picks them.
    void synchronize(std::mt19937_64& rng) {
        for (;;) {
            std::vector<int> ready;
            for (const auto& [id, s] : streams_) {
                if (!s.queue.empty()) {
                    ready.push_back(id);
                }
            }
            if (ready.empty()) {
                break;
            }
            const int pick = ready[std::uniform_int_distribution<std::size_t>(0, ready.size() - 1)(rng)];
            run_until(pick, streams_[pick].queue.front().sequence);
        }
        for (const auto& [id, s] : streams_) {
            merge(host_clock_, s.clock);
        }
        prune();
    }

    [[nodiscard]] std::size_t queued() const {
        std::size_t n = 0;
        for (const auto& [id, s] : streams_) {
            n += s.queue.size();
        }
        return n;
    }

    void add_block(const void* p, std::size_t bytes, int device) { blocks_[p] = Block{bytes, device}; }

    /// Forgets a block about to be freed; queued work that still uses it is a fault and is
    /// cancelled (it would write freed memory).
    void remove_block(const void* p, std::size_t bytes) {
        const Range block{p, bytes == 0 ? 1 : bytes};
        for (auto& [id, s] : streams_) {
            for (auto& op : s.queue) {
                if (op.body && (touches(op.reads, block) || touches(op.writes, block))) {
                    fault("block " + hex(p) + " (" + std::to_string(bytes) + " bytes) freed while " + op.what +
                          " queued on stream " + std::to_string(id) + " still uses it");
                    op.body = nullptr;
                }
            }
        }
        std::erase_if(history_, [&](const Access& a) { return overlap(a.range, block); });
        blocks_.erase(p);
        freed_.erase(p);
    }

    // ---- the stream-ordered allocator (SimulatedAsyncDevice) ----

    /// Queues the stream-ordered free of a block on `stream` and returns the point where `stream`
    /// reaches it. Work on another stream that touches the block and is not ordered before the
    /// free is a fault (the block could be handed out again while that work runs); so is work that
    /// touches the block later, until `revive_block` hands it out again.
    Point retire_block(const void* p, std::size_t bytes, int stream, int current_device) {
        Operation op;
        op.stream = stream;
        op.what = "stream-ordered free of " + std::to_string(bytes) + " bytes at " + hex(p);
        (void)issue(std::move(op), current_device);
        Point at = record(stream);
        const Range block{p, bytes == 0 ? 1 : bytes};
        for (const auto& a : history_) {
            if (a.stream != stream && overlap(a.range, block) && !happens_before(a.clock, at.clock)) {
                fault("block " + hex(p) + " (" + std::to_string(bytes) + " bytes) freed on stream " +
                      std::to_string(stream) + " while " + a.what + " on stream " + std::to_string(a.stream) +
                      ", not ordered before the free, still uses it");
                break;  // one fault per free
            }
        }
        freed_[p] = Freed{block.bytes, stream};
        return at;
    }

    /// The block freed by `retire_block` is handed out again: work may touch it.
    void revive_block(const void* p) { freed_.erase(p); }

    /// True when `stream`'s next operation runs after `p` (through `stream_wait`, or because the
    /// host has waited for `p`): a block freed at `p` may then be handed to work on `stream`.
    [[nodiscard]] bool follows(int stream, const Point& p) const {
        if (p.stream < 0 || p.stream == stream) {
            return true;
        }
        Clock known = host_clock_;
        if (const auto it = streams_.find(stream); it != streams_.end()) {
            merge(known, it->second.clock);
        }
        const auto it = known.find(p.stream);
        return it != known.end() && it->second >= p.sequence;
    }

    /// True when an operation queued and not yet run (nor cancelled) reads or writes any of `r`.
    [[nodiscard]] bool queued_touches(const Range& r) const {
        for (const auto& [id, s] : streams_) {
            for (const auto& op : s.queue) {
                if (op.body && (touches(op.reads, r) || touches(op.writes, r))) {
                    return true;
                }
            }
        }
        return false;
    }

    /// The device a pointer's block belongs to, or -1 when it is not a device block.
    [[nodiscard]] int device_of(const void* p) const {
        const Block* b = find_block(Range{p, 1});
        return b == nullptr ? -1 : b->device;
    }

    void fault(std::string message) { faults_.push_back("SimulatedDevice: " + std::move(message)); }
    [[nodiscard]] const std::vector<std::string>& faults() const noexcept { return faults_; }
    void truncate_faults(std::size_t n) { faults_.resize(std::min(n, faults_.size())); }

    /// Forgets everything queued and known (a test's fresh start).
    void reset() {
        streams_.clear();
        history_.clear();
        host_clock_.clear();
    }

private:
    static bool touches(const std::vector<Range>& ranges, const Range& r) {
        return std::any_of(ranges.begin(), ranges.end(), [&](const Range& x) { return overlap(x, r); });
    }

    const Block* find_block(const Range& r) const {
        auto it = blocks_.upper_bound(r.data);
        if (it == blocks_.begin()) {
            return nullptr;
        }
        --it;
        return overlap(Range{it->first, it->second.bytes == 0 ? 1 : it->second.bytes}, r) ? &it->second : nullptr;
    }

    void check_device(const Operation& op, int current_device) {
        for (const auto* ranges : {&op.reads, &op.writes}) {
            for (const auto& r : *ranges) {
                const Block* b = find_block(r);
                if (b != nullptr && b->device != current_device) {
                    fault(op.what + " on stream " + std::to_string(op.stream) + " touches a block of device " +
                          std::to_string(b->device) + " (" + hex(r.data) + ") while device " +
                          std::to_string(current_device) + " is current");
                    return;  // one fault per operation
                }
            }
        }
    }

    // Compares `op` with every access it could race with, then remembers its own accesses.
    void check_races(const Operation& op) {
        auto check = [&](const Range& r, bool write) {
            for (const auto& a : history_) {
                if (a.stream != op.stream && (write || a.write) && overlap(a.range, r) &&
                    !happens_before(a.clock, op.clock)) {
                    const std::string how = write && a.write ? "both write"
                                            : write          ? op.what + " writes what " + a.what + " reads"
                                                             : a.what + " writes what " + op.what + " reads";
                    fault(op.what + " on stream " + std::to_string(op.stream) + " and " + a.what + " on stream " +
                          std::to_string(a.stream) + " are unordered: " + how + " at " + hex(r.data));
                    return;
                }
            }
        };
        for (const auto& r : op.reads) {
            check(r, false);
        }
        for (const auto& r : op.writes) {
            check(r, true);
        }
        for (const auto& r : op.reads) {
            history_.push_back(Access{r, false, op.stream, op.clock, op.what});
        }
        for (const auto& r : op.writes) {
            history_.push_back(Access{r, true, op.stream, op.clock, op.what});
        }
    }

    // Work that touches a block after its stream-ordered free (and before it is handed out again).
    void check_freed(const Operation& op) {
        for (const auto* ranges : {&op.reads, &op.writes}) {
            for (const auto& r : *ranges) {
                auto it = freed_.upper_bound(r.data);
                if (it == freed_.begin()) {
                    continue;
                }
                --it;
                if (overlap(Range{it->first, it->second.bytes}, r)) {
                    fault(op.what + " on stream " + std::to_string(op.stream) + " touches block " + hex(it->first) +
                          " after its stream-ordered free on stream " + std::to_string(it->second.stream));
                    return;  // one fault per operation
                }
            }
        }
    }

    // Accesses the host has waited for cannot race with anything issued from now on.
    void prune() {
        std::erase_if(history_, [&](const Access& a) { return happens_before(a.clock, host_clock_); });
    }

    std::map<int, StreamQueue> streams_;
    std::map<const void*, Block> blocks_;
    struct Freed {
        std::size_t bytes = 0;
        int stream = 0;
    };
    std::map<const void*, Freed> freed_;  // blocks freed in stream order, not yet handed out again
    std::vector<Access> history_;
    Clock host_clock_;
    std::vector<std::string> faults_;
};

}  // namespace detail::sim

SYNCBLOB_END_NAMESPACE
