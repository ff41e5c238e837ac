// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The engine behind `SimulatedDevice`: per-stream queues of operations (copies, fills, kernels,
/// stream-ordered allocations and frees) that run later, in stream order; dependencies between
/// streams recorded by `stream_wait`; a seeded interleaving of the streams at `synchronize`; and
/// the misuse it can see, recorded as faults. Ordering is tracked with vector clocks (one counter
/// per stream; the host's clock is what it has waited for), so "unordered" means neither operation
/// happens before the other. Streams belong to devices, as CUDA's do: each device has its own
/// legacy default stream. The race checks are detail/simulated_races.hpp.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "../../core/config.hpp"
#include "clock.hpp"
#include "ops.hpp"
#include "races.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace sim::detail {

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
    // ---- streams --------------------------------------------------------------------------------

    /// The key of stream `id` as seen while `current_device` is current: `Stream{0}` is that
    /// device's legacy default stream.
    [[nodiscard]] static int key(int id, int current_device) noexcept {
        return id == 0 ? default_stream_key(current_device) : id;
    }

    /// A new stream of `device`; returns its id.
    int create_stream(int device) {
        const int id = ++last_stream_;
        stream_devices_[id] = device;
        return id;
    }

    /// The device a stream belongs to.
    [[nodiscard]] int device_of_stream(int key) const {
        if (key < -1) {
            return -2 - key;
        }
        const auto it = stream_devices_.find(key);
        return it == stream_devices_.end() ? 0 : it->second;
    }

    // ---- issuing and running --------------------------------------------------------------------

    /// Queues `op` on its stream (stamping it, checking it for misuse); returns its sequence.
    std::uint64_t issue(Operation op, int current_device) {
        auto& s = streams_[op.stream];
        merge(s.clock, host_clock_);
        s.clock[op.stream] = ++s.issued;
        op.sequence = s.issued;
        op.clock = s.clock;
        op.waits = std::exchange(s.next_waits, {});
        if (op.kind != OpKind::marker) {
            check_stream_device(op, current_device);
            check_device(op, current_device);
            if (std::string race = races_.check(op); !race.empty()) {
                fault(std::move(race));
            }
            check_freed(op);
        }
        if (Timeline* t = Timeline::active()) {  // optional virtual clock (simulated_timeline.hpp)
            t->issued(op);
        }
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
            if (op.body && !op.cancelled) {
                op.body();
            }
        }
    }

    /// An event recorded on `stream` while `current_device` is current (`cudaEventRecord` fails
    /// when the stream belongs to another device: a fault here). See `point_after`.
    [[nodiscard]] Point record(int stream, int current_device) {
        const int owner = device_of_stream(stream);
        if (owner != current_device) {
            fault("event recorded on " + stream_name(stream) + ", which belongs to device " + std::to_string(owner) +
                  ", while device " + std::to_string(current_device) + " is current (cudaEventRecord fails there)");
        }
        return point_after(stream);
    }

    /// The point after everything issued on `stream` so far, waits included: a `stream_wait` not
    /// yet followed by an operation is carried by a marker, so the point is reached only once the
    /// work it waits for has run too.
    [[nodiscard]] Point point_after(int stream) {
        auto& s = streams_[stream];
        if (!s.next_waits.empty()) {
            Operation marker;
            marker.stream = stream;
            marker.kind = OpKind::marker;
            marker.what = "recorded point";
            (void)issue(std::move(marker), device_of_stream(stream));
        }
        return Point{stream, s.issued, s.clock};
    }

    /// The host waits for `p`: runs what it needs and learns what it had seen.
    void host_wait(const Point& p) {
        if (p.stream == -1) {
            return;
        }
        run_until(p.stream, p.sequence);
        if (Timeline* t = Timeline::active()) {
            t->host_waited(p);
        }
        merge(host_clock_, p.clock);
        races_.prune(host_clock_);
    }

    /// True when the work up to `p` has run (nothing runs now); the host then knows what it had
    /// seen, as after a wait.
    [[nodiscard]] bool reached(const Point& p) {
        if (p.stream == -1) {
            return true;
        }
        const auto it = streams_.find(p.stream);
        if (it != streams_.end() && !it->second.queue.empty() && it->second.queue.front().sequence <= p.sequence) {
            return false;
        }
        merge(host_clock_, p.clock);
        return true;
    }

    /// `stream`'s next operation runs after `p`; nothing runs now. (Waiting on a point of another
    /// device's stream is allowed, as in CUDA: it orders work across devices.)
    void stream_wait(int stream, const Point& p) {
        if (p.stream == -1 || p.stream == stream) {
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
        if (Timeline* t = Timeline::active()) {
            t->synchronized();
        }
        races_.prune(host_clock_);
    }

    /// Copies, fills, kernels and frees issued and not yet run (stream-ordered allocations and the
    /// markers that carry waits into a point do no work: they are not counted).
    [[nodiscard]] std::size_t queued() const {
        std::size_t n = 0;
        for (const auto& [id, s] : streams_) {
            n += static_cast<std::size_t>(std::count_if(s.queue.begin(), s.queue.end(), [](const Operation& op) {
                return op.kind != OpKind::marker && op.kind != OpKind::allocation;
            }));
        }
        return n;
    }

    // ---- the host's own accesses ----------------------------------------------------------------

    /// The host is about to read (or write) `r`: queued work that will still write it (or that
    /// still reads or writes it) races with the host, a fault.
    void check_host(const Range& r, bool write, const std::string& who) {
        for (const auto& [id, s] : streams_) {
            for (const auto& op : s.queue) {
                if (!op.body || op.cancelled) {
                    continue;
                }
                const bool writes = touches(op.writes, r);
                if (writes || (write && touches(op.reads, r))) {
                    fault(who + (write ? " writes " : " reads ") + std::to_string(r.bytes) + " host bytes at " +
                          hex(r.data) + " while " + op.what + " queued on " + stream_name(id) + " still " +
                          (writes ? "writes" : "reads") + " them");
                    return;  // one fault per access
                }
            }
        }
    }

    // ---- device blocks --------------------------------------------------------------------------

    void add_block(const void* p, std::size_t bytes, int device) { blocks_[p] = Block{bytes, device}; }

    /// Forgets a block about to be freed; queued work that still uses it is a fault and is
    /// cancelled (it would write freed memory).
    void remove_block(const void* p, std::size_t bytes) {
        const Range block{p, bytes == 0 ? 1 : bytes};
        for (auto& [id, s] : streams_) {
            for (auto& op : s.queue) {
                if (op.body && !op.cancelled && (touches(op.reads, block) || touches(op.writes, block))) {
                    fault("block " + hex(p) + " (" + std::to_string(bytes) + " bytes) freed while " + op.what +
                          " queued on " + stream_name(id) + " still uses it");
                    op.cancelled = true;
                }
            }
        }
        races_.forget(block);
        blocks_.erase(p);
        freed_.erase(p);
    }

    /// A stream-ordered allocation of block `p` on `stream`: an operation that "writes" the whole
    /// block, so work on another stream that uses the block before it is ordered after the
    /// allocation is a fault.
    void allocate_on(const void* p, std::size_t bytes, int stream, int current_device) {
        issue_on_block(OpKind::allocation, "stream-ordered allocation of ", p, bytes, stream, current_device);
    }

    /// Queues the stream-ordered free of a block on `stream` and returns the point where `stream`
    /// reaches it. Work on another stream that touches the block and is not ordered before the
    /// free is a fault (the block could be handed out again while that work runs); so is work that
    /// touches the block later, until `revive_block` hands it out again.
    Point retire_block(const void* p, std::size_t bytes, int stream, int current_device) {
        issue_on_block(OpKind::free, "stream-ordered free of ", p, bytes, stream, current_device);
        freed_[p] = Freed{bytes == 0 ? 1 : bytes, stream};
        return point_after(stream);
    }

    /// The block freed by `retire_block` is handed out again: work may touch it.
    void revive_block(const void* p) { freed_.erase(p); }

    /// True when `stream`'s next operation runs after `p` (through `stream_wait`, or because the
    /// host has waited for `p`): a block freed at `p` may then be handed to work on `stream`.
    [[nodiscard]] bool follows(int stream, const Point& p) const {
        if (p.stream == -1 || p.stream == stream) {
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
                if (op.body && !op.cancelled && (touches(op.reads, r) || touches(op.writes, r))) {
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

    // ---- faults and bookkeeping -----------------------------------------------------------------

    void fault(std::string message) { faults_.push_back("SimulatedDevice: " + std::move(message)); }
    [[nodiscard]] const std::vector<std::string>& faults() const noexcept { return faults_; }
    void truncate_faults(std::size_t n) { faults_.resize(std::min(n, faults_.size())); }

    [[nodiscard]] Footprint footprint() const {
        std::size_t queued_ops = 0;
        for (const auto& [id, s] : streams_) {
            queued_ops += s.queue.size();
        }
        return Footprint{queued_ops, races_.size(), streams_.size(), blocks_.size(), faults_.size()};
    }

private:
    // An operation of `kind` that writes the whole block at `p` (a zero-byte block as one byte).
    void issue_on_block(OpKind kind, const char* what, const void* p, std::size_t bytes, int stream,
                        int current_device) {
        Operation op;
        op.stream = stream;
        op.kind = kind;
        op.what = what + std::to_string(bytes) + " bytes at " + hex(p);
        op.writes = {Range{p, bytes == 0 ? 1 : bytes}};
        (void)issue(std::move(op), current_device);
    }

    const Block* find_block(const Range& r) const {
        auto it = blocks_.upper_bound(r.data);
        if (it == blocks_.begin()) {
            return nullptr;
        }
        --it;
        return overlap(Range{it->first, it->second.bytes == 0 ? 1 : it->second.bytes}, r) ? &it->second : nullptr;
    }

    // A kernel launched on a stream of another device than the current one fails in CUDA.
    void check_stream_device(const Operation& op, int current_device) {
        const int owner = device_of_stream(op.stream);
        if (op.kind == OpKind::kernel && owner != current_device) {
            fault(op.what + " launched on " + stream_name(op.stream) + ", which belongs to device " +
                  std::to_string(owner) + ", while device " + std::to_string(current_device) +
                  " is current (the launch fails there)");
        }
    }

    void check_device(const Operation& op, int current_device) {
        for (const auto* ranges : {&op.reads, &op.writes}) {
            for (const auto& r : *ranges) {
                const Block* b = find_block(r);
                if (b != nullptr && b->device != current_device) {
                    fault(op.what + " on " + stream_name(op.stream) + " touches a block of device " +
                          std::to_string(b->device) + " (" + hex(r.data) + ") while device " +
                          std::to_string(current_device) + " is current");
                    return;  // one fault per operation
                }
            }
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
                    fault(op.what + " on " + stream_name(op.stream) + " touches block " + hex(it->first) +
                          " after its stream-ordered free on " + stream_name(it->second.stream));
                    return;  // one fault per operation
                }
            }
        }
    }

    struct Freed {
        std::size_t bytes = 0;
        int stream = 0;
    };

    std::map<int, StreamQueue> streams_;
    std::map<int, int> stream_devices_;  // created streams' devices
    int last_stream_ = 0;
    std::map<const void*, Block> blocks_;
    std::map<const void*, Freed> freed_;  // blocks freed in stream order, not yet handed out again
    RaceLog races_;
    Clock host_clock_;
    std::vector<std::string> faults_;
};

}  // namespace sim::detail

SYNCBLOB_END_NAMESPACE
