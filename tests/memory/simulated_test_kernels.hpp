// SPDX-License-Identifier: BSD-2-Clause
#pragma once
// What the asynchronous-simulator tests share: a small kernel queued on a stream, and the faults a
// test provoked on purpose.

#include <cstddef>
#include <string>
#include <vector>

#include <syncblob/sim/device.hpp>

namespace syncblob_test {

/// Bytes each `add` kernel touches.
inline constexpr std::size_t kernel_bytes = 64;

/// Queues a kernel on `s` that adds `k` to each of the `kernel_bytes` bytes at `p`.
inline void add(syncblob::SimulatedDevice::Stream s, unsigned char* p, unsigned char k) {
    using Range = syncblob::SimulatedDevice::Range;
    syncblob::SimulatedDevice::launch(s, "add", {Range{p, kernel_bytes}}, {Range{p, kernel_bytes}}, [p, k] {
        for (std::size_t i = 0; i < kernel_bytes; ++i) {
            p[i] = static_cast<unsigned char>(p[i] + k);
        }
    });
}

/// The faults recorded so far, then forgotten (the test provoked them on purpose).
inline std::vector<std::string> take_faults() {
    auto faults = syncblob::SimulatedDevice::faults();
    syncblob::SimulatedDevice::clear_faults();
    return faults;
}

}  // namespace syncblob_test
