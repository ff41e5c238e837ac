// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// `SimulatedTimeline`: a virtual clock for `SimulatedDevice`, so that tests can see whether host
/// work and device work overlap (the simulator itself runs queued work late and has no time).

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "detail/clock.hpp"
#include "device.hpp"

SYNCBLOB_BEGIN_NAMESPACE

/// While it lives, every operation queued on a `SimulatedDevice` stream gets a virtual start and
/// end, and host threads a virtual time each. An operation starts when it is issued (the issuing
/// thread's time), once its stream's previous operation has ended and once the points it waits for
/// are reached; it lasts its bytes over the settings' bandwidth (copies and fills: bytes written;
/// kernels: bytes read plus written). Host work advances only when reported (`host_work`); a host
/// wait (`SimulatedDevice::wait`, a synchronous copy, `synchronize`) moves the waiting thread to
/// the end of what it waited for. Overlap then shows as a `makespan()` shorter than the sum of the
/// parts. One timeline at a time (a new one replaces the previous until it ends); for tests.
class SimulatedTimeline {
public:
    using Settings = sim::detail::TimelineSettings;
    using Record = sim::detail::TimelineRecord;

    explicit SimulatedTimeline(Settings settings = {})
        : timeline_(settings), previous_(sim::detail::Timeline::install(&timeline_)) {}
    ~SimulatedTimeline() { (void)sim::detail::Timeline::install(previous_); }
    SimulatedTimeline(const SimulatedTimeline&) = delete;
    SimulatedTimeline& operator=(const SimulatedTimeline&) = delete;

    /// Every operation and piece of host work so far, in the order they were recorded.
    [[nodiscard]] std::vector<Record> records() const { return timeline_.records(); }

    /// When the last recorded operation or host work ends (seconds from the timeline's start).
    [[nodiscard]] double makespan() const {
        double end = 0;
        for (const auto& r : timeline_.records()) {
            end = end < r.end ? r.end : end;
        }
        return end;
    }

    /// The summed durations of the host work (`host == true`) or of the device operations of kind `kind`.
    [[nodiscard]] double busy(bool host, sim::detail::OpKind kind = sim::detail::OpKind::copy) const {
        double sum = 0;
        for (const auto& r : timeline_.records()) {
            if (r.host == host && (host || r.kind == kind)) {
                sum += r.end - r.start;
            }
        }
        return sum;
    }

    /// The number of device operations of kind `kind` recorded.
    [[nodiscard]] std::size_t count(sim::detail::OpKind kind) const {
        std::size_t n = 0;
        for (const auto& r : timeline_.records()) {
            n += !r.host && r.kind == kind ? 1 : 0;
        }
        return n;
    }

    /// Reports host work of the calling thread to the timeline in force, if any (see
    /// `Settings::host_bytes_per_second`).
    static void host_work(std::string what, std::uint64_t bytes, double seconds) {
        if (auto* t = sim::detail::Timeline::active()) {
            t->host_work(std::move(what), bytes, seconds);
        }
    }
    /// The calling thread's time in the timeline in force (0 without one).
    [[nodiscard]] static double now() {
        auto* t = sim::detail::Timeline::active();
        return t != nullptr ? t->now() : 0;
    }
    /// Moves the calling thread's time forward to `t` (work handed from one thread to another).
    static void advance_to(double t) {
        if (auto* timeline = sim::detail::Timeline::active()) {
            timeline->advance_to(t);
        }
    }

private:
    sim::detail::Timeline timeline_;
    sim::detail::Timeline* previous_;
};

SYNCBLOB_END_NAMESPACE
