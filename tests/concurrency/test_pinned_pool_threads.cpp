// SPDX-License-Identifier: BSD-2-Clause
// Several threads allocating from and giving back to one PinnedPool at once, some through streams
// and record_use: no block is ever held by two threads, every thread's bytes stay its own, and the
// statistics add up afterwards. Built with ThreadSanitizer in CI. Threads only record what they saw;
// the main thread asserts (Catch2's macros are not thread-safe).

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <latch>
#include <random>
#include <string_view>
#include <thread>
#include <vector>

#include <syncblob/memory/pinned_pool.hpp>
#include <syncblob/sim/device.hpp>

namespace {

using syncblob::HostBlock;
using syncblob::SimulatedDevice;

struct ThreadUpstream {  // a pool of its own for this test
    static constexpr std::string_view name = "test::ThreadUpstream";
    [[nodiscard]] static HostBlock allocate(std::size_t bytes) { return syncblob::AlignedAllocator::allocate(bytes); }
    static void deallocate(HostBlock block) noexcept { syncblob::AlignedAllocator::deallocate(block); }
};
using Pool = syncblob::PinnedPool<ThreadUpstream, SimulatedDevice>;

constexpr int threads = 4;
constexpr int rounds = 400;
constexpr std::array<std::size_t, 4> sizes{64, 600, 5000, std::size_t{1} << 20};

/// What one thread saw.
struct Seen {
    int corrupted = 0;  // blocks whose bytes another thread changed while this one held them
    int allocations = 0;
    int errors = 0;  // exceptions
};

}  // namespace

TEST_CASE("PinnedPool serves several threads at once without sharing a block", "[concurrency][pinned_pool]") {
    const SimulatedDevice::Scope scope({});
    const auto start_stats = Pool::stats();
    const auto stream = SimulatedDevice::create_stream();
    std::vector<Seen> seen(threads);
    std::latch start(threads);
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
        workers.emplace_back([&, t] {
            Seen& mine = seen[static_cast<std::size_t>(t)];
            std::mt19937 rng(static_cast<unsigned>(t) + 1);
            std::vector<HostBlock> held;
            const auto value = static_cast<unsigned char>(t + 1);
            start.arrive_and_wait();
            try {
                for (int r = 0; r < rounds; ++r) {
                    if (held.size() < 4 && rng() % 2 == 0) {
                        const HostBlock b = Pool::allocate(sizes[rng() % sizes.size()]);
                        std::memset(b.data, value, b.bytes);
                        held.push_back(b);
                        ++mine.allocations;
                    } else if (!held.empty()) {
                        const HostBlock b = held.back();
                        held.pop_back();
                        const auto* p = static_cast<const unsigned char*>(b.data);
                        if (!std::all_of(p, p + b.bytes, [&](unsigned char v) { return v == value; })) {
                            ++mine.corrupted;
                        }
                        if (rng() % 3 == 0) {
                            Pool::record_use(b.data, stream);
                            Pool::deallocate(b, stream);
                        } else {
                            Pool::deallocate(b);
                        }
                    }
                    if (rng() % 50 == 0) {
                        SimulatedDevice::synchronize();
                    }
                    if (rng() % 200 == 0) {
                        (void)Pool::empty_cache();
                    }
                }
            } catch (...) {
                ++mine.errors;
            }
            for (const auto& b : held) {
                Pool::deallocate(b);
            }
        });
    }
    for (auto& w : workers) {
        w.join();
    }
    int allocations = 0;
    for (const auto& s : seen) {
        CHECK(s.corrupted == 0);
        CHECK(s.errors == 0);
        allocations += s.allocations;
    }
    const auto s = Pool::stats();
    CHECK(s.requests - start_stats.requests == static_cast<std::uint64_t>(allocations));
    CHECK(s.in_use_bytes == 0);
    CHECK(s.requested_bytes == 0);
    CHECK(s.reserved_bytes == s.cached_bytes);
    CHECK(s.cache_hits > 0);
    CHECK(Pool::foreign_deallocations() == 0);
    SimulatedDevice::synchronize();
    (void)Pool::empty_cache();
    CHECK(Pool::stats().reserved_bytes == 0);
    CHECK(SimulatedDevice::faults().empty());
}
