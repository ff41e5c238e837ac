// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// A virtual clock for the engine behind `SimulatedDevice`: the simulator runs queued work late and
/// has no time of its own, so whether reads and copies overlap cannot be seen from its results. While
/// a `Timeline` is installed, every operation issued gets a virtual start and end: it starts when it
/// is issued (the issuing thread's time), when its stream's previous operation has ended and when
/// every point it waits for (`stream_wait`) has been reached, and lasts its bytes over a bandwidth
/// of the settings. Host threads have a time of their own (a lane each): host work the caller
/// reports advances its thread's lane, and a host wait moves the lane to the end of what it waited
/// for. The records then say how long the whole took and when each part ran.

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../../core/config.hpp"
#include "ops.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace sim::detail {

/// The durations a timeline gives: bytes over these rates (bytes per second).
struct TimelineSettings {
    /// Copies and fills: the bytes they write.
    double copy_bytes_per_second = 10e9;
    /// Kernels: the bytes they read plus the bytes they write.
    double kernel_bytes_per_second = 100e9;
    /// Host work reported in bytes; 0 takes the seconds the caller measured instead.
    double host_bytes_per_second = 0;
};

/// One operation or piece of host work on the virtual clock (seconds from the timeline's start).
struct TimelineRecord {
    std::string what;
    bool host = false;  ///< host work (a lane), not a device operation
    int stream = -1;    ///< the stream key of a device operation
    OpKind kind = OpKind::marker;
    double start = 0;
    double end = 0;
};

/// The clock and its records. The engine calls `issued`, `host_waited` and `synchronized` under the
/// simulator's lock; host threads call `host_work`, `now` and `advance_to`. Thread-safe.
class Timeline {
public:
    explicit Timeline(TimelineSettings settings) : settings_(settings) {}
    Timeline(const Timeline&) = delete;
    Timeline& operator=(const Timeline&) = delete;

    /// The timeline the engine feeds, or null.
    [[nodiscard]] static Timeline* active() noexcept { return slot().load(std::memory_order_acquire); }
    /// Installs `t` (null: none) and returns the one it replaces.
    static Timeline* install(Timeline* t) noexcept { return slot().exchange(t, std::memory_order_acq_rel); }

    /// An operation was queued on its stream (its sequence and waits are set).
    void issued(const Operation& op) {
        std::lock_guard lock(mutex_);
        double start = lane();
        if (const auto it = stream_free_.find(op.stream); it != stream_free_.end()) {
            start = std::max(start, it->second);
        }
        for (const auto& w : op.waits) {
            start = std::max(start, end_of(w));
        }
        const double end = start + duration(op);
        stream_free_[op.stream] = end;
        ends_[op.stream].emplace_back(op.sequence, end);
        records_.push_back(TimelineRecord{op.what, false, op.stream, op.kind, start, end});
    }

    /// The calling thread waited for `p`: its lane moves to where `p` is reached.
    void host_waited(const Point& p) {
        std::lock_guard lock(mutex_);
        double& l = lane();
        l = std::max(l, end_of(p));
    }

    /// The calling thread waited for everything queued.
    void synchronized() {
        std::lock_guard lock(mutex_);
        double& l = lane();
        for (const auto& [stream, end] : stream_free_) {
            l = std::max(l, end);
        }
    }

    /// The calling thread did `bytes` bytes of host work (`what`), which took `seconds` as it
    /// measured them: its lane advances by the modelled or the measured time.
    void host_work(std::string what, std::uint64_t bytes, double seconds) {
        std::lock_guard lock(mutex_);
        double& l = lane();
        const double start = l;
        l += settings_.host_bytes_per_second > 0 ? static_cast<double>(bytes) / settings_.host_bytes_per_second
                                                 : seconds;
        records_.push_back(TimelineRecord{std::move(what), true, -1, OpKind::marker, start, l});
    }

    /// The calling thread's time.
    [[nodiscard]] double now() {
        std::lock_guard lock(mutex_);
        return lane();
    }
    /// Moves the calling thread's time to `t` when it is earlier (work handed to another thread
    /// starts no earlier than the hand-over; the thread that waits for it resumes at its end).
    void advance_to(double t) {
        std::lock_guard lock(mutex_);
        double& l = lane();
        l = std::max(l, t);
    }

    [[nodiscard]] std::vector<TimelineRecord> records() const {
        std::lock_guard lock(mutex_);
        return records_;
    }

    [[nodiscard]] const TimelineSettings& settings() const noexcept { return settings_; }

private:
    static std::atomic<Timeline*>& slot() noexcept {
        static std::atomic<Timeline*> installed{nullptr};
        return installed;
    }

    // The calling thread's time (a thread new to the timeline starts at 0). Under the mutex.
    double& lane() { return lanes_[std::this_thread::get_id()]; }

    // When the operations of `p`'s stream up to `p` have all ended (0 for none the timeline saw).
    [[nodiscard]] double end_of(const Point& p) const {
        const auto it = ends_.find(p.stream);
        if (p.stream == -1 || it == ends_.end()) {
            return 0;
        }
        const auto& ends = it->second;  // in sequence order, ends non-decreasing
        const auto after = std::upper_bound(ends.begin(), ends.end(), p.sequence,
                                            [](std::uint64_t s, const auto& e) { return s < e.first; });
        return after == ends.begin() ? 0 : std::prev(after)->second;
    }

    [[nodiscard]] double duration(const Operation& op) const {
        const auto bytes = [](const std::vector<Range>& ranges) {
            std::size_t n = 0;
            for (const auto& r : ranges) {
                n += r.bytes;
            }
            return static_cast<double>(n);
        };
        switch (op.kind) {
            case OpKind::copy:
            case OpKind::fill:
                return bytes(op.writes) / settings_.copy_bytes_per_second;
            case OpKind::kernel:
                return (bytes(op.reads) + bytes(op.writes)) / settings_.kernel_bytes_per_second;
            case OpKind::allocation:
            case OpKind::free:
            case OpKind::marker:
                break;
        }
        return 0;
    }

    TimelineSettings settings_;
    mutable std::mutex mutex_;
    std::map<std::thread::id, double> lanes_;
    std::map<int, double> stream_free_;                                  // when each stream's last op ends
    std::map<int, std::vector<std::pair<std::uint64_t, double>>> ends_;  // (sequence, end) per stream
    std::vector<TimelineRecord> records_;
};

}  // namespace sim::detail

SYNCBLOB_END_NAMESPACE
