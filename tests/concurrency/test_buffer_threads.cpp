// SPDX-License-Identifier: BSD-2-Clause
// Many threads reading one shared SyncedBuffer whose fresh copy is on the other side: exactly one
// copy is made and every thread sees the right bytes. Built with ThreadSanitizer in CI. Catch2's
// macros are not thread-safe: threads only record what they saw; the main thread asserts.

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstring>
#include <functional>
#include <latch>
#include <thread>
#include <vector>

#include <syncblob/memory/synced_buffer.hpp>
#include <syncblob/sim/device.hpp>

#include "device_guard.hpp"

namespace {

using syncblob::Head;
using syncblob::SimulatedDevice;
using Buffer = syncblob::BufferFor<syncblob::Simulated>;
using Bytes = std::vector<unsigned char>;

constexpr std::size_t n = 4096;
constexpr int threads_per_side = 8;
constexpr int rounds = 25;

Bytes pattern(unsigned seed) {
    Bytes out(n);
    for (std::size_t i = 0; i < n; ++i) {
        out[i] = static_cast<unsigned char>(seed * 17u + i * 3u + 5u);
    }
    return out;
}

/// What one thread saw.
struct Seen {
    const void* pointer = nullptr;
    bool bytes_right = false;
};

enum class Side { host, device };

/// Starts `host_readers` threads calling host_data() and `device_readers` calling device_data()
/// on `buffer` all at once (a latch releases them together); returns what each saw.
std::vector<Seen> race(const Buffer& buffer, int host_readers, int device_readers, const Bytes& expected,
                       const std::function<void()>& also = {}) {
    const int total = host_readers + device_readers;
    std::vector<Seen> seen(static_cast<std::size_t>(total));
    std::latch start(total);
    std::vector<std::thread> threads;
    for (int t = 0; t < total; ++t) {
        const Side side = t < host_readers ? Side::host : Side::device;
        threads.emplace_back([&, t, side] {
            start.arrive_and_wait();
            if (also) {
                also();  // before this thread's own access, so it overlaps the others' copy
            }
            Seen& mine = seen[static_cast<std::size_t>(t)];
            if (side == Side::host) {
                mine.pointer = buffer.host_data();
                mine.bytes_right = std::memcmp(mine.pointer, expected.data(), n) == 0;
            } else {
                mine.pointer = buffer.device_data();
                mine.bytes_right = syncblob_test::read_device<SimulatedDevice>(mine.pointer, n) == expected;
            }
        });
    }
    for (auto& thread : threads) {
        thread.join();
    }
    return seen;
}

/// Every thread on a side saw the same pointer, and every thread saw the right bytes.
void check_seen(const std::vector<Seen>& seen, int host_readers) {
    int wrong_bytes = 0;
    int other_pointer = 0;
    for (std::size_t i = 0; i < seen.size(); ++i) {
        const bool host = static_cast<int>(i) < host_readers;
        const Seen& first = host ? seen.front() : seen.back();
        wrong_bytes += seen[i].bytes_right ? 0 : 1;
        other_pointer += seen[i].pointer == first.pointer ? 0 : 1;
    }
    CHECK(wrong_bytes == 0);
    CHECK(other_pointer == 0);
}

void fill_host(Buffer& b, const Bytes& bytes) {
    std::memcpy(b.mutable_host_data(), bytes.data(), n);
}
void fill_device(Buffer& b, const Bytes& bytes) {
    syncblob_test::write_device<SimulatedDevice>(b.mutable_device_data(), bytes.data(), n);
}

}  // namespace

TEST_CASE("8 threads read the host side of a device-fresh buffer: one copy", "[concurrency]") {
    for (int round = 0; round < rounds; ++round) {
        INFO("round " << round);
        Buffer b(n);
        const Bytes expected = pattern(static_cast<unsigned>(round));
        fill_device(b, expected);
        b.reset_stats();
        const auto seen = race(b, threads_per_side, 0, expected);
        check_seen(seen, threads_per_side);
        const auto stats = b.stats();
        CHECK(stats.device_to_host == 1);
        CHECK(stats.device_to_host_bytes == n);
        CHECK(stats.host_allocations == 1);
        CHECK(stats.host_to_device == 0);
        CHECK(b.head() == Head::synced);
    }
}

TEST_CASE("8 threads read the device side of a host-fresh buffer: one copy", "[concurrency]") {
    for (int round = 0; round < rounds; ++round) {
        INFO("round " << round);
        Buffer b(n);
        const Bytes expected = pattern(static_cast<unsigned>(round) + 100);
        fill_host(b, expected);
        b.reset_stats();
        const auto seen = race(b, 0, threads_per_side, expected);
        check_seen(seen, 0);
        const auto stats = b.stats();
        CHECK(stats.host_to_device == 1);
        CHECK(stats.host_to_device_bytes == n);
        CHECK(stats.device_allocations == 1);
        CHECK(stats.device_to_host == 0);
        CHECK(b.head() == Head::synced);
    }
}

TEST_CASE("8 host readers and 8 device readers on one buffer: one copy, queries race too", "[concurrency]") {
    for (int round = 0; round < rounds; ++round) {
        INFO("round " << round);
        for (const bool device_fresh : {true, false}) {
            INFO((device_fresh ? "device-fresh" : "host-fresh"));
            Buffer b(n);
            const Bytes expected = pattern(static_cast<unsigned>(round) + 200);
            device_fresh ? fill_device(b, expected) : fill_host(b, expected);
            b.reset_stats();
            // const queries from every thread while the copy happens
            const auto seen = race(b, threads_per_side, threads_per_side, expected, [&b] {
                for (int i = 0; i < 20; ++i) {
                    (void)b.device_id();
                    (void)b.host_borrowed();
                    (void)b.head();
                    (void)b.async_pending();
                    std::this_thread::yield();
                }
                (void)b.stats();
            });
            check_seen(seen, threads_per_side);
            CHECK(b.stats().transfers() == 1);
            CHECK(b.stats().host_allocations + b.stats().device_allocations == 1);
            CHECK(b.head() == Head::synced);
        }
    }
}

TEST_CASE("16 threads make the first access of a new buffer: one allocation per side, one copy", "[concurrency]") {
    for (int round = 0; round < rounds; ++round) {
        INFO("round " << round);
        Buffer b(n);
        const auto seen = race(b, threads_per_side, threads_per_side, Bytes(n, 0));
        check_seen(seen, threads_per_side);
        const auto stats = b.stats();
        CHECK(stats.host_allocations == 1);
        CHECK(stats.device_allocations == 1);
        CHECK(stats.transfers() == 1);
        CHECK(b.head() == Head::synced);
    }
}

TEST_CASE("16 threads read a buffer with an async copy pending: it is waited for once, nothing more is copied",
          "[concurrency]") {
    for (int round = 0; round < rounds; ++round) {
        INFO("round " << round);
        for (const bool push : {true, false}) {
            INFO((push ? "after a push" : "after a pull"));
            const auto stream = SimulatedDevice::create_stream();
            Buffer b(n);
            const Bytes expected = pattern(static_cast<unsigned>(round) + 300);
            if (push) {
                fill_device(b, pattern(7));  // stale device bytes the push must replace
                fill_host(b, expected);
                b.reset_stats();
                b.push_to_device_async(stream);
            } else {
                fill_host(b, pattern(7));
                fill_device(b, expected);
                b.reset_stats();
                b.pull_to_host_async(stream);
            }
            const auto before = b.stats();
            const auto seen = race(b, threads_per_side, threads_per_side, expected);
            check_seen(seen, threads_per_side);
            CHECK(b.stats() == before);
            CHECK(before.transfers() == 1);
            CHECK_FALSE(b.async_pending());
        }
    }
}

TEST_CASE("Const queries run alongside a const access that allocates the other side", "[concurrency]") {
    // device_id() and host_borrowed() read what device_data() / host_data() allocate; they lock, so
    // ThreadSanitizer sees no race (it did before they did).
    int bad_ids = 0;
    int bad_borrowed = 0;
    for (int round = 0; round < 100; ++round) {
        Buffer b(n);
        fill_host(b, pattern(9));
        std::thread reader([&b] { (void)b.device_data(); });
        std::thread host_reader([&b] { (void)b.host_data(); });
        for (int i = 0; i < 100; ++i) {
            const int id = b.device_id();
            bad_ids += id == -1 || id == 0 ? 0 : 1;
            bad_borrowed += b.host_borrowed() ? 1 : 0;
        }
        reader.join();
        host_reader.join();
        bad_ids += b.device_id() == 0 ? 0 : 1;
    }
    CHECK(bad_ids == 0);
    CHECK(bad_borrowed == 0);
}

TEST_CASE("Const queries run alongside a host read that copies from the device", "[concurrency]") {
    int bad = 0;
    for (int round = 0; round < 100; ++round) {
        Buffer b(n);
        fill_device(b, pattern(10));
        std::thread reader([&b] { (void)b.host_data(); });
        for (int i = 0; i < 100; ++i) {
            bad += b.host_borrowed() ? 1 : 0;
        }
        reader.join();
        bad += std::memcmp(b.host_data(), pattern(10).data(), n) == 0 ? 0 : 1;
    }
    CHECK(bad == 0);
}
