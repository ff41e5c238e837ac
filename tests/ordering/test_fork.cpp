// SPDX-License-Identifier: BSD-2-Clause
// fork() while another thread is inside the simulator and the pinned pool: their mutexes are
// taken before the fork and released after it in both processes (detail::ForkLock), so each child
// finds them unlocked and can use both at once. 250 children, each with a watchdog: a child that
// deadlocks is killed by SIGALRM and counted as hung (the first one ends the test).
//
// Under AddressSanitizer the allocator is the sanitizer's, and GCC 12's runtime (like LLVM's before
// release 17) takes none of its own locks around fork(): a child forked while the other thread
// refilled its allocation cache from a size class's region finds that region's mutex locked and
// waits forever in its first allocation of that size (seen with gdb: the child blocked in
// `SizeClassAllocator64::GetFromAllocator`, no syncblob frame holding a lock). That thread takes
// those mutexes only to move chunks between its cache and the regions, which ASan's quarantine
// makes it do on almost every allocation (freed chunks wait in the quarantine, so each allocation
// takes a new one); without the quarantine a loop that frees what it allocated reuses its cache and
// takes none. So this program runs with the quarantine off: the sanitizer still checks every
// access, and a hang left is syncblob's.

#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstring>
#include <thread>

#include <syncblob/memory/pinned_pool.hpp>
#include <syncblob/memory/synced_buffer.hpp>
#include <syncblob/sim/async_device.hpp>
#include <syncblob/sim/device.hpp>

#if defined(__SANITIZE_ADDRESS__)
// Read by the ASan runtime at start-up (see the file comment).
extern "C" const char* __asan_default_options() {  // NOLINT(bugprone-reserved-identifier)
    return "quarantine_size_mb=0:thread_local_quarantine_size_kb=0";
}
#endif

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
    for (int child = 0; child < 250; ++child) {
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
    CHECK(rounds.load() > 250);
    SimulatedDevice::synchronize();
    SimulatedAsyncDevice::empty_cache();
    Pool::empty_cache();
}
