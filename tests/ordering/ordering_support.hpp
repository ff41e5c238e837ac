// SPDX-License-Identifier: BSD-2-Clause
#pragma once
// What the ordering tests share: the fixed set of seeds every case runs under, small kernels queued
// on a simulated stream, the faults a case provoked on purpose, and the end of a case (finish).

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <syncblob/sim/async_device.hpp>
#include <syncblob/sim/device.hpp>

namespace syncblob_test {

using syncblob::SimulatedDevice;
using Range = SimulatedDevice::Range;
using Stream = SimulatedDevice::Stream;

/// Every ordering case runs under each of these seeds (the order `synchronize` interleaves streams in).
inline constexpr std::uint64_t seeds[] = {0, 1, 2, 3, 5, 8, 13, 21};

/// Settings for one seed, with `devices` simulated devices.
inline SimulatedDevice::Settings with_seed(std::uint64_t seed, int devices = 1, bool checking = false) {
    SimulatedDevice::Settings s;
    s.seed = seed;
    s.device_count = devices;
    s.checking = checking;
    return s;
}

/// Queues a kernel on `s` that sets each of the `n` elements at `p` to `value`.
template <class T>
void set_kernel(Stream s, T* p, std::size_t n, T value) {
    SimulatedDevice::launch(s, "set", {}, {Range{p, n * sizeof(T)}}, [p, n, value] {
        for (std::size_t i = 0; i < n; ++i) {
            p[i] = value;
        }
    });
}

/// Queues a kernel on `s` that reads the `n` elements at `p` (and writes nothing): a kernel still
/// using a block.
template <class T>
void read_kernel(Stream s, const T* p, std::size_t n) {
    SimulatedDevice::launch(s, "read", {Range{p, n * sizeof(T)}}, {}, [] {});
}

/// Queues a kernel on `s` that copies `n` elements from `from` to `to`.
template <class T>
void copy_kernel(Stream s, T* to, const T* from, std::size_t n) {
    SimulatedDevice::launch(s, "copy", {Range{from, n * sizeof(T)}}, {Range{to, n * sizeof(T)}}, [to, from, n] {
        for (std::size_t i = 0; i < n; ++i) {
            to[i] = from[i];
        }
    });
}

/// The faults recorded so far in the innermost scope, then forgotten (provoked on purpose).
inline std::vector<std::string> take_faults() {
    auto faults = SimulatedDevice::faults();
    SimulatedDevice::clear_faults();
    return faults;
}

/// True when one of `faults` contains `text`.
inline bool any_fault(const std::vector<std::string>& faults, const std::string& text) {
    for (const auto& f : faults) {
        if (f.find(text) != std::string::npos) {
            return true;
        }
    }
    return false;
}

/// Joined for a failure message.
inline std::string joined(const std::vector<std::string>& faults) {
    std::string all;
    for (const auto& f : faults) {
        all += f + "\n";
    }
    return all;
}

/// Ends a case: everything run, the stream-ordered pool emptied, no fault.
inline void finish() {
    SimulatedDevice::synchronize();
    syncblob::SimulatedAsyncDevice::empty_cache();
    const auto faults = SimulatedDevice::faults();
    INFO(joined(faults));
    CHECK(faults.empty());
}

}  // namespace syncblob_test
