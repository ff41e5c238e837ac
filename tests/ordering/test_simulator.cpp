// SPDX-License-Identifier: BSD-2-Clause
// The simulator without blind spots: for each thing a GPU does that a host program can get wrong,
// correct code gets the right values and no fault, and deliberately wrong code gets a fault or
// stale values, under every seed of the fixed set. Then the simulator's own memory over a long run.

#include <catch2/catch.hpp>

#include <sys/resource.h>

#include <cstddef>
#include <cstring>
#include <iostream>
#include <vector>

#include <syncblob/blob.hpp>
#include <syncblob/memory/synced_buffer.hpp>
#include <syncblob/sim/async_device.hpp>
#include <syncblob/sim/device.hpp>

#include "ordering_support.hpp"

using namespace syncblob_test;
using syncblob::CopyKind;
using syncblob::SimulatedAsyncDevice;

namespace {

constexpr std::size_t n = 16;  // floats per block
constexpr std::size_t bytes = n * sizeof(float);

float* device_floats() {
    return static_cast<float*>(SimulatedDevice::allocate(bytes));
}

}  // namespace

// ---- a recorded point honours the waits of its stream ----------------------------------------------

TEST_CASE("A point recorded after a stream_wait is reached only once the waited work has run",
          "[ordering][simulator][points]") {
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed)};
        const auto a = SimulatedDevice::create_stream();
        const auto b = SimulatedDevice::create_stream();
        float* d = device_floats();
        std::vector<float> h(n, 3.0f);
        SimulatedDevice::copy_async(d, h.data(), bytes, CopyKind::host_to_device, a);
        auto copied = SimulatedDevice::record(a);
        SimulatedDevice::stream_wait(b, copied);
        auto after = SimulatedDevice::record(b);  // nothing issued on b since the wait
        CHECK_FALSE(SimulatedDevice::query(after));
        SimulatedDevice::wait(after);
        CHECK(d[0] == 3.0f);  // the copy on a has run
        CHECK(d[n - 1] == 3.0f);
        CHECK(SimulatedDevice::query(after));
        SimulatedDevice::deallocate(d, bytes);
        CHECK(SimulatedDevice::faults().empty());
    }
}

TEST_CASE("A point recorded before the stream_wait does not cover the waited work: stale values",
          "[ordering][simulator][points]") {
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed)};
        const auto a = SimulatedDevice::create_stream();
        const auto b = SimulatedDevice::create_stream();
        float* d = device_floats();
        std::vector<float> h(n, 3.0f);
        SimulatedDevice::copy_async(d, h.data(), bytes, CopyKind::host_to_device, a);
        auto too_early = SimulatedDevice::record(b);  // wrong: recorded before b waits for a
        auto copied = SimulatedDevice::record(a);
        SimulatedDevice::stream_wait(b, copied);
        SimulatedDevice::wait(too_early);
        CHECK(d[0] != 3.0f);  // a's copy has not run
        SimulatedDevice::synchronize();
        SimulatedDevice::deallocate(d, bytes);
    }
}

// ---- devices: a legacy default stream each; streams and events belong to a device -----------------

TEST_CASE("Each device has its own default stream: waiting on device 0's does not run device 1's",
          "[ordering][simulator][devices]") {
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed, 2)};
        SimulatedDevice::set_device(1);
        float* d = device_floats();
        set_kernel(Stream{}, d, n, 5.0f);  // on device 1's default stream
        CHECK(SimulatedDevice::device_of_stream(Stream{}) == 1);
        SimulatedDevice::set_device(0);
        auto wrong = SimulatedDevice::record(Stream{});  // device 0's default stream
        SimulatedDevice::wait(wrong);
        CHECK(d[0] != 5.0f);  // stale: device 1's stream has not run
        SimulatedDevice::set_device(1);
        auto right = SimulatedDevice::record(Stream{});
        SimulatedDevice::wait(right);
        CHECK(d[0] == 5.0f);
        SimulatedDevice::deallocate(d, bytes);
        SimulatedDevice::set_device(0);
        CHECK(SimulatedDevice::faults().empty());
    }
}

TEST_CASE("Recording an event on a stream of another device is a fault", "[ordering][simulator][devices]") {
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed, 2)};
        SimulatedDevice::set_device(1);
        const auto s1 = SimulatedDevice::create_stream();
        CHECK(SimulatedDevice::device_of_stream(s1) == 1);
        SimulatedDevice::set_device(0);
        (void)SimulatedDevice::record(s1);  // wrong: s1 belongs to device 1
        const auto faults = take_faults();
        REQUIRE(faults.size() == 1);
        CHECK_THAT(faults[0], Catch::Contains("belongs to device 1") && Catch::Contains("device 0 is current") &&
                                  Catch::Contains("cudaEventRecord"));
    }
}

TEST_CASE("Launching a kernel on a stream of another device is a fault", "[ordering][simulator][devices]") {
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed, 2)};
        std::vector<float> h(n, 0.0f);
        SimulatedDevice::set_device(1);
        const auto s1 = SimulatedDevice::create_stream();
        SimulatedDevice::set_device(0);
        set_kernel(s1, h.data(), n, 1.0f);  // wrong: a launch on device 1's stream from device 0
        const auto faults = take_faults();
        REQUIRE(faults.size() == 1);
        CHECK_THAT(faults[0],
                   Catch::Contains("kernel set launched on stream") && Catch::Contains("belongs to device 1"));
        SimulatedDevice::synchronize();
    }
}

TEST_CASE("Waiting on an event of another device orders work across devices", "[ordering][simulator][devices]") {
    for (const bool waits : {true, false}) {
        for (const auto seed : seeds) {
            INFO("seed " << seed << (waits ? ", ordered" : ", not ordered"));
            const SimulatedDevice::Scope scope{with_seed(seed, 2)};
            std::vector<float> src(n, 0.0f);
            std::vector<float> dst(n, 0.0f);
            SimulatedDevice::set_device(1);
            const auto s1 = SimulatedDevice::create_stream();
            set_kernel(s1, src.data(), n, 7.0f);
            auto written = SimulatedDevice::record(s1);
            SimulatedDevice::set_device(0);
            const auto s0 = SimulatedDevice::create_stream();
            if (waits) {
                SimulatedDevice::stream_wait(s0, written);  // allowed across devices
            }
            copy_kernel(s0, dst.data(), src.data(), n);
            auto copied = SimulatedDevice::record(s0);
            SimulatedDevice::wait(copied);
            const auto faults = take_faults();
            if (waits) {
                CHECK(dst[0] == 7.0f);
                CHECK(faults.empty());
            } else {
                CHECK(dst[0] == 0.0f);  // stale: s1's kernel has not run
                CHECK(any_fault(faults, "are unordered"));
            }
            SimulatedDevice::synchronize();
        }
    }
}

// ---- a stream-ordered allocation is an operation -----------------------------------------------------

TEST_CASE("Using a stream-ordered allocation on another stream before ordering after it is a fault",
          "[ordering][simulator][allocation]") {
    for (const bool ordered : {true, false}) {
        for (const auto seed : seeds) {
            INFO("seed " << seed << (ordered ? ", ordered" : ", not ordered"));
            const SimulatedDevice::Scope scope{with_seed(seed)};
            const auto a = SimulatedDevice::create_stream();
            const auto b = SimulatedDevice::create_stream();
            auto* p = static_cast<float*>(SimulatedAsyncDevice::allocate_async(bytes, a));
            if (ordered) {
                auto allocated = SimulatedDevice::record(a);
                SimulatedDevice::stream_wait(b, allocated);
            }
            set_kernel(b, p, n, 1.0f);
            auto used = SimulatedDevice::record(b);
            SimulatedDevice::stream_wait(a, used);
            SimulatedAsyncDevice::deallocate_async(p, bytes, a);
            const auto faults = take_faults();
            if (ordered) {
                CHECK(faults.empty());
            } else {
                REQUIRE(faults.size() == 1);
                CHECK_THAT(faults[0], Catch::Contains("kernel set on stream " + std::to_string(b.id)) &&
                                          Catch::Contains("before it is ordered after the stream-ordered allocation"));
            }
            SimulatedAsyncDevice::empty_cache();
        }
    }
}

// ---- the host's reads and writes through a buffer's host pointer ------------------------------------

namespace {
using Buffer = syncblob::SyncedBuffer<syncblob::AlignedAllocator, SimulatedDevice>;
}  // namespace

TEST_CASE("A host read of a buffer while a queued copy still writes its host block is a fault",
          "[ordering][simulator][host]") {
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed)};
        const auto s = SimulatedDevice::create_stream();
        Buffer b(bytes);
        std::memset(b.mutable_host_data(), 1, bytes);
        float* d = device_floats();
        SimulatedDevice::fill(d, 9, bytes, s);
        // Wrong: a copy into the buffer's host block, issued and not waited for, then a host read.
        SimulatedDevice::copy_async(b.mutable_host_data(), d, bytes, CopyKind::device_to_host, s);
        const auto* read = static_cast<const unsigned char*>(b.host_data());
        CHECK(read[0] == 1);  // stale: the copy has not run
        const auto faults = take_faults();
        REQUIRE(faults.size() == 1);
        CHECK_THAT(faults[0], Catch::Contains("SyncedBuffer::host_data reads " + std::to_string(bytes)) &&
                                  Catch::Contains("copy D->H") && Catch::Contains("still writes them"));
        SimulatedDevice::synchronize();
        SimulatedDevice::deallocate(d, bytes);
    }
}

TEST_CASE("A host write to a buffer while a queued copy still reads its host block is a fault",
          "[ordering][simulator][host]") {
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed)};
        const auto s = SimulatedDevice::create_stream();
        Buffer b(bytes);
        std::memset(b.mutable_host_data(), 1, bytes);
        float* d = device_floats();
        SimulatedDevice::copy_async(d, b.host_data(), bytes, CopyKind::host_to_device, s);
        auto* write = static_cast<unsigned char*>(b.mutable_host_data());  // wrong: the copy still reads it
        std::memset(write, 2, bytes);
        const auto faults = take_faults();
        REQUIRE(faults.size() == 1);
        CHECK_THAT(faults[0], Catch::Contains("SyncedBuffer::mutable_host_data writes") &&
                                  Catch::Contains("copy H->D") && Catch::Contains("still reads them"));
        SimulatedDevice::synchronize();
        CHECK(reinterpret_cast<unsigned char*>(d)[0] == 2);  // the late copy read the new bytes
        SimulatedDevice::deallocate(d, bytes);
    }
}

// ---- bounded memory over a long run -------------------------------------------------------------------

namespace {

// Fills a blob on the host and reads it on the device `iterations` times.
void fill_and_read(syncblob::Blob<float, syncblob::Simulated>& blob, int iterations) {
    for (int i = 0; i < iterations; ++i) {
        blob.fill(static_cast<float>(i));
        (void)blob.device_data();
    }
}

long peak_rss_kib() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_maxrss;
}

}  // namespace

TEST_CASE("The simulator holds no more after 5000 fills and device reads than after 100",
          "[ordering][simulator][memory]") {
    const SimulatedDevice::Scope scope{SimulatedDevice::Settings{.checking = true}};
    syncblob::Blob<float, syncblob::Simulated> blob{64};
    fill_and_read(blob, 100);
    const auto early = SimulatedDevice::footprint();
    fill_and_read(blob, 5000);
    const auto late = SimulatedDevice::footprint();
    CHECK(late.queued == early.queued);
    CHECK(late.history == early.history);
    CHECK(late.streams == early.streams);
    CHECK(late.blocks == early.blocks);
    CHECK(late.faults == early.faults);
    CHECK(blob.host_data()[63] == 4999.0f);  // the last fill of the second run
    CHECK(SimulatedDevice::faults().empty());
}

// Not run by default: `test_ordering_simulator "[.rss]"` prints the peak resident memory after 10^5
// and 10^6 iterations (the figure docs/gpu.md quotes).
TEST_CASE("Peak resident memory over 10^6 fills and device reads", "[.rss]") {
    const SimulatedDevice::Scope scope{SimulatedDevice::Settings{.checking = true}};
    syncblob::Blob<float, syncblob::Simulated> blob{1024};
    fill_and_read(blob, 100000);
    const long at_1e5 = peak_rss_kib();
    fill_and_read(blob, 900000);
    const long at_1e6 = peak_rss_kib();
    std::cout << "peak RSS after 10^5 iterations: " << at_1e5 << " KiB, after 10^6: " << at_1e6 << " KiB\n";
    CHECK(at_1e6 <= at_1e5 + 1024);
}
