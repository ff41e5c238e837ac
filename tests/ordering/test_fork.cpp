// SPDX-License-Identifier: BSD-2-Clause
// fork() while another thread is inside the simulator and the pinned pool: their mutexes are
// taken before the fork and released after it in both processes (detail::ForkLock), so each child
// finds them unlocked and can use both at once. 100 children, each with a watchdog: a child that
// deadlocks is killed by SIGALRM and counted as hung (the first one ends the test).

#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstring>
#include <thread>

#include <syncblob/memory/pinned_pool.hpp>
#include <syncblob/memory/simulated_async_device.hpp>
#include <syncblob/memory/simulated_device.hpp>
#include <syncblob/memory/synced_buffer.hpp>

namespace {

using syncblob::SimulatedAsyncDevice;
using syncblob::SimulatedDevice;
using Pool = syncblob::PinnedPool<syncblob::AlignedAllocator, SimulatedAsyncDevice>;
using Buffer = syncblob::SyncedBuffer<Pool, SimulatedAsyncDevice>;

constexpr std::size_t bytes = 4096;

// One round of everything the simulator and the pools do: a pooled host block, a stream-ordered
// device block, copies both ways, a kernel, frees on a stream.
bool round_trip(SimulatedDevice::Stream s, unsigned char value) {
    Buffer b(bytes);
    b.set_stream(s);
    std::memset(b.mutable_host_data(), value, bytes);
    auto* d = static_cast<unsigned char*>(b.mutable_device_data());
    SimulatedDevice::launch(s, "increment", {SimulatedDevice::Range{d, bytes}}, {SimulatedDevice::Range{d, bytes}},
                            [d] {
                                for (std::size_t i = 0; i < bytes; ++i) {
                                    ++d[i];
                                }
                            });
    const auto* h = static_cast<const unsigned char*>(b.host_data());
    return h[0] == static_cast<unsigned char>(value + 1) && h[bytes - 1] == static_cast<unsigned char>(value + 1);
}

// 0 when the child could use the simulator and the pool, 1 when a round gave wrong values.
int child_body() {
    alarm(5);  // a deadlocked child ends by SIGALRM instead of hanging the test
    const auto s = SimulatedDevice::create_stream();
    for (int i = 0; i < 3; ++i) {
        if (!round_trip(s, static_cast<unsigned char>(i))) {
            return 1;
        }
    }
    SimulatedDevice::synchronize();
    return SimulatedDevice::faults().empty() ? 0 : 2;
}

}  // namespace

TEST_CASE("fork() while another thread uses the simulator and the pinned pool leaves a child that can use them",
          "[ordering][fork]") {
    std::atomic<bool> stop{false};
    std::atomic<long> rounds{0};
    std::atomic<bool> wrong{false};
    std::thread busy([&] {
        const auto s = SimulatedDevice::create_stream();
        while (!stop.load()) {
            if (!round_trip(s, static_cast<unsigned char>(rounds.load()))) {
                wrong = true;
            }
            ++rounds;
        }
    });
    int hung = 0;
    int failed = 0;
    for (int child = 0; child < 100; ++child) {
        const long before = rounds.load();
        while (rounds.load() == before) {  // fork while the other thread is mid-round
            std::this_thread::yield();
        }
        const pid_t pid = fork();
        if (pid == 0) {
            _exit(child_body());
        }
        int status = 0;
        if (pid < 0 || waitpid(pid, &status, 0) != pid) {
            ++failed;
        } else if (WIFSIGNALED(status)) {
            ++hung;
            break;  // one is enough
        } else if (WEXITSTATUS(status) != 0) {
            ++failed;
        }
    }
    stop = true;
    busy.join();
    CHECK(hung == 0);
    CHECK(failed == 0);
    CHECK_FALSE(wrong.load());
    CHECK(rounds.load() > 100);
    SimulatedDevice::synchronize();
    SimulatedAsyncDevice::empty_cache();
    Pool::empty_cache();
}
