// SPDX-License-Identifier: BSD-2-Clause
// What the second core of this machine is worth, window by window: the machine alone, no syncblob.
// The one-stream read probe over N 32-bit words (default 2^14: 64 KiB, where syncblob's reductions
// begin to split) runs in windows: 2000 calls split in halves, the second half on a helper thread
// that spins between calls, then 2000 calls on one core, each call timed; then three ways of making
// 2000 calls, each timed as a whole, in rotating order: always split, never split, and a rule that
// judges its own split calls (below). Each window prints the medians of the caller's half, the
// helper's half, the split call and the one-core call in ns, the gain (one core over split), and
// each way's time over the faster of always and never splitting.
//
// The summary counts the windows in which the split did not pay and how it failed there: both halves
// slow (the two threads slowing each other), only the helper's half slow (the second core busy), or
// neither (the hand-over itself slow); and, per way, the average over the faster way and the share of
// windows under 0.9 of it.
//
//   build/bench/benchmarks/two_core_states [N] [seconds] [pin]   # default 16384 60
//
// With "pin" (Linux), the caller runs on the first CPU the process may use and the helper on the
// second, so the scheduler cannot move them.
//
// docs/benchmarks.md ("Threads") has what it showed here.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif

#include "bandwidth.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double ns_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
    const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
    std::nth_element(v.begin(), mid, v.end());
    return *mid;
}

std::atomic<std::uint64_t> sink{0};

std::uint64_t read(std::vector<std::uint32_t>& words, std::size_t first, std::size_t last) {
    return syncblob_bench::bandwidth_probe(syncblob_bench::Pattern::read1, 4, words.data(), nullptr, nullptr, first,
                                           last);
}

// The CPUs this process may run on, in order (empty where that cannot be known).
std::vector<int> allowed_cpus() {
    std::vector<int> cpus;
#if defined(__linux__)
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) == 0) {
        for (std::size_t cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
            if (CPU_ISSET(cpu, &allowed)) {
                cpus.push_back(static_cast<int>(cpu));
            }
        }
    }
#endif
    return cpus;
}

// Pins the calling thread to `cpu`; false when it cannot.
bool pin_to(int cpu) {
#if defined(__linux__)
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(static_cast<std::size_t>(cpu), &one);
    return pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0;
#else
    (void)cpu;
    return false;
#endif
}

}  // namespace

int main(int argc, char** argv) {
    const std::size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 16384;
    const double seconds = argc > 2 ? std::strtod(argv[2], nullptr) : 60.0;
    if (n < 128 || seconds <= 0) {
        std::fprintf(stderr, "usage: two_core_states [N >= 128] [seconds > 0] [pin]\n");
        return 2;
    }
    const bool pin = argc > 3 && std::string_view(argv[3]) == "pin";
    const std::vector<int> cpus = pin ? allowed_cpus() : std::vector<int>{};
    if (pin && (cpus.size() < 2 || !pin_to(cpus[0]))) {
        std::fprintf(stderr, "two_core_states: cannot pin the caller and the helper to two CPUs\n");
        return 1;
    }
    std::atomic<int> helper_ready{0};  // 1 when it runs where it should, 2 when it could not be pinned
    std::vector<std::uint32_t> words(n, 1u);
    constexpr int calls = 2000;

    // The helper: runs the second half of call `job` when `job` changes, then reports its time.
    std::atomic<std::uint64_t> job{0};
    std::atomic<std::uint64_t> done{0};
    std::atomic<double> helper_ns{0};
    std::uint64_t call = 0;
    std::thread helper([&] {
        helper_ready.store(!pin || pin_to(cpus[1]) ? 1 : 2, std::memory_order_release);
        std::uint64_t seen = 0;
        for (;;) {
            std::uint64_t now = job.load(std::memory_order_acquire);
            while (now == seen) {
                now = job.load(std::memory_order_acquire);
            }
            if (now == ~std::uint64_t{0}) {
                return;
            }
            seen = now;
            const auto t0 = Clock::now();
            sink.fetch_add(read(words, n / 2, n), std::memory_order_relaxed);
            helper_ns.store(ns_since(t0), std::memory_order_relaxed);
            done.store(now, std::memory_order_release);
        }
    });

    struct Window {
        double own, helper, gain;
        double split, single, adaptive;  // over the faster of always splitting and never splitting
    };

    // The rule: one core would have taken about twice the caller's own half, so a split call that
    // lasts more than 1.9 times the caller's half does not pay. Every fourth split call is timed; when
    // the running average of that ratio (each sample capped at 2.5) passes 1.9, the next `backoff`
    // calls run on one core, then the split is tried again, its first 64 calls not judged.
    // A split call in its two steps: hand the second half to the helper and read the first, then
    // wait for the helper's half.
    const auto start_split = [&] {
        job.store(++call, std::memory_order_release);
        sink.fetch_add(read(words, 0, n / 2), std::memory_order_relaxed);
    };
    const auto finish_split = [&] {
        while (done.load(std::memory_order_acquire) != call) {
        }
    };
    const auto split_call = [&] {
        start_split();
        finish_split();
    };
    // A split call timed: the caller's own half and the whole call, in ns.
    const auto timed_split_call = [&] {
        const auto t0 = Clock::now();
        start_split();
        const double own_ns = ns_since(t0);
        finish_split();
        return std::pair{own_ns, ns_since(t0)};
    };
    const auto single_call = [&] { sink.fetch_add(read(words, 0, n), std::memory_order_relaxed); };
    constexpr int backoff = 2048;
    double average = 1.5;
    int single_left = 0;
    int grace = 0;  // split calls after a backoff that are not judged
    const auto adaptive_call = [&](int k) {
        if (single_left > 0) {
            --single_left;
            grace = single_left == 0 ? 64 : 0;
            single_call();
            return;
        }
        if (grace > 0 || (k & 3) != 0) {
            grace -= grace > 0;
            split_call();
            return;
        }
        const auto [own_ns, whole_ns] = timed_split_call();
        const double ratio = whole_ns / own_ns;
        average += (std::min(ratio, 2.5) - average) / 16;
        if (average > 1.9) {
            single_left = backoff;
            average = 1.5;
        }
    };
    const auto timed = [&](auto&& one) {
        const auto t0 = Clock::now();
        for (int k = 0; k < calls; ++k) {
            one(k);
        }
        return ns_since(t0);
    };
    std::vector<Window> windows;
    while (helper_ready.load(std::memory_order_acquire) == 0) {
    }
    if (helper_ready.load(std::memory_order_acquire) == 2) {
        std::fprintf(stderr, "two_core_states: cannot pin the helper to a second CPU\n");
        job.store(~std::uint64_t{0}, std::memory_order_release);
        helper.join();
        return 1;
    }
    const auto start = Clock::now();
    std::printf("%8s %10s %10s %10s %10s %6s %6s %6s %6s\n", "t_s", "own_ns", "helper_ns", "split_ns", "one_core",
                "gain", "always", "never", "rule");
    while (ns_since(start) < seconds * 1e9) {
        std::vector<double> own, theirs, split, single;
        for (int k = 0; k < calls; ++k) {
            const auto [own_ns, whole_ns] = timed_split_call();
            own.push_back(own_ns);
            split.push_back(whole_ns);
            theirs.push_back(helper_ns.load(std::memory_order_relaxed));
        }
        for (int k = 0; k < calls; ++k) {
            const auto t0 = Clock::now();
            single_call();
            single.push_back(ns_since(t0));
        }
        // The three ways in a rotating order, so none always follows the same one.
        double t[3] = {};
        for (int i = 0; i < 3; ++i) {
            const int way = static_cast<int>((windows.size() + static_cast<std::size_t>(i)) % 3);
            t[way] = way == 0   ? timed([&](int) { split_call(); })
                     : way == 1 ? timed([&](int) { single_call(); })
                                : timed(adaptive_call);
        }
        const double best = std::min(t[0], t[1]);
        const Window w{median(own), median(theirs), median(single) / median(split),
                       best / t[0], best / t[1],    best / t[2]};
        std::printf("%8.2f %10.0f %10.0f %10.0f %10.0f %6.2f %6.2f %6.2f %6.2f\n", ns_since(start) / 1e9, w.own,
                    w.helper, median(split), median(single), w.gain, w.split, w.single, w.adaptive);
        windows.push_back(w);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    job.store(~std::uint64_t{0}, std::memory_order_release);
    helper.join();

    // A half is slow when it took 1.5 times the caller's typical half (its median over all windows).
    std::vector<double> own_halves;
    for (const Window& w : windows) {
        own_halves.push_back(w.own);
    }
    const double slow = 1.5 * median(own_halves);
    int under_one = 0, under = 0, both_slow = 0, helper_slow = 0;
    for (const Window& w : windows) {
        under_one += w.gain < 1.0;
        if (w.gain < 1.2) {
            ++under;
            both_slow += w.own >= slow && w.helper >= slow;
            helper_slow += w.own < slow && w.helper >= slow;
        }
    }
    const auto percent = [&](int count) { return 100.0 * count / static_cast<double>(windows.size()); };
    std::printf("# %zu windows of %d calls, N %zu words; caller's typical half %.0f ns\n", windows.size(), calls, n,
                slow / 1.5);
    std::printf(
        "# split gain under 1.0: %d windows (%.1f %%); under 1.2: %d (%.1f %%), of which both halves slow %d,"
        " only the helper's %d, neither %d\n",
        under_one, percent(under_one), under, percent(under), both_slow, helper_slow, under - both_slow - helper_slow);
    for (auto [name, way] : {std::pair{"always splitting", &Window::split},
                             std::pair{"never splitting", &Window::single}, std::pair{"the rule", &Window::adaptive}}) {
        double sum = 0;
        int low = 0;
        for (const Window& w : windows) {
            sum += w.*way;
            low += w.*way < 0.9;
        }
        std::printf("# %s over the faster of always and never: %.3f on average, under 0.9 in %.1f %% of the windows\n",
                    name, sum / static_cast<double>(windows.size()), percent(low));
    }
    return 0;
}
