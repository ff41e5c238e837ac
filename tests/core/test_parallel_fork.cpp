// SPDX-License-Identifier: BSD-2-Clause
// The worker pool across fork() and under an affinity mask (processes of their own, so the test
// binary's own pool and affinity stay as they were), and the cache sizes the split rule reads.

#include <catch2/catch.hpp>

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <vector>

#include <syncblob/core/hardware.hpp>
#include <syncblob/core/thread_pool.hpp>

#include "child_process.hpp"

namespace parallel = syncblob::parallel;

namespace {

// Runs `child` in a forked process (with a watchdog: a hang ends it by SIGALRM) and returns its
// exit status, or -1 when it did not exit normally.
template <class Child>
int in_child(const Child& child) {
    return test::exit_status_of_child([&] {
        alarm(20);
        return child();
    });
}

// 0 when `parts` parts each ran once on a fresh call, else 1.
int every_part_runs(unsigned parts) {
    std::vector<std::atomic<int>> runs(parts);
    parallel::run(parts, [&](unsigned p) { runs[p].fetch_add(1); });
    for (auto& r : runs) {
        if (r.load() != 1) {
            return 1;
        }
    }
    return 0;
}

}  // namespace

TEST_CASE("a fork child's first parallel call works (the child makes a pool of its own)", "[parallel][fork]") {
    const unsigned threads = parallel::max_threads();
    parallel::set_max_threads(2);
    REQUIRE(every_part_runs(2) == 0);  // the parent's pool exists (its workers are not in the child)
    const auto* parents = &syncblob::detail::WorkerPool::instance();
    CHECK(in_child([parents] {
              const auto* own = &syncblob::detail::WorkerPool::instance();
              const bool fresh = own != parents && own->workers() == syncblob::available_cpus() - 1;
              return (fresh ? 0 : 4) + every_part_runs(2) + every_part_runs(5);
          }) == 0);
    CHECK(every_part_runs(3) == 0);  // and the parent's pool is untouched
    CHECK(&syncblob::detail::WorkerPool::instance() == parents);
    parallel::set_max_threads(threads);
}

TEST_CASE("the pool is sized by the CPUs the process may use, not the machine's", "[parallel]") {
    const int status = in_child([] {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(static_cast<std::size_t>(sched_getcpu()), &one);
        if (sched_setaffinity(0, sizeof(one), &one) != 0) {
            return 2;
        }
        if (syncblob::available_cpus() != 1 || syncblob::detail::WorkerPool::instance().workers() != 0) {
            return 3;
        }
        return every_part_runs(4);  // on one CPU, the caller runs every part itself
    });
    CHECK(status == 0);
    cpu_set_t mine;
    CPU_ZERO(&mine);
    REQUIRE(sched_getaffinity(0, sizeof(mine), &mine) == 0);
    CHECK(syncblob::available_cpus() == static_cast<unsigned>(CPU_COUNT(&mine)));
}

TEST_CASE("cache sizes come from the system, with a fallback for a level it does not have", "[parallel]") {
    CHECK(syncblob::cache_bytes(1) >= 4096);
    CHECK(syncblob::cache_bytes(2) >= syncblob::cache_bytes(1));
    CHECK(syncblob::cache_bytes(9, 12345) == 12345);
    // The names the pool's header gave the probes before they had a header of their own.
    STATIC_REQUIRE(&parallel::cache_bytes == &syncblob::cache_bytes);
    STATIC_REQUIRE(&parallel::available_cpus == &syncblob::available_cpus);
}
