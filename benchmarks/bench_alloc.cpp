// SPDX-License-Identifier: BSD-2-Clause
// The pinned host pool (PinnedPool) against what it replaces, in one run:
//
// (a) allocate/free pairs over a fixed pseudo-random mix of 16 sizes from 4 KiB to 64 MiB, each
//     allocation written once per page as its user would, through
//       new_delete        ::operator new / ::operator delete
//       uncached_pinned   mmap + mlock / munlock + munmap for every block: what page-locking costs
//                         (cudaMallocHost does that and more); where mlock is refused (RLIMIT_MEMLOCK),
//                         mmap + touching every page instead, and the row's label says which
//       pinned_pool       PinnedPool over that same uncached pinned upstream (steady state: the cache is warm)
//     After the run a summary prints each one's time over the pool's.
// (b) a training-loop-shaped trace: persistent parameters; per iteration, an input staging buffer,
//     forward activations allocated in order, backward freeing them in reverse while gradient
//     buffers come and go, batch sizes varying from iteration to iteration; run through PinnedPool
//     and through a power-of-two caching pool for contrast. Counters: peak reserved / peak requested
//     (the goal for PinnedPool is <= 1.15), both peaks in MiB, and blocks obtained from the system.
//
//   bench_alloc [--benchmark_filter=...]

#include <benchmark/benchmark.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <new>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <syncblob/memory/no_device.hpp>
#include <syncblob/memory/pinned_pool.hpp>

#include "run_main.hpp"

using namespace syncblob;

namespace {

constexpr std::size_t KiB = std::size_t{1} << 10;
constexpr std::size_t MiB = std::size_t{1} << 20;
constexpr std::size_t page = 4096;

// ---- (a) allocate/free pairs ------------------------------------------------------------------------

/// 16 sizes, log-uniform in [4 KiB, 64 MiB], in a fixed pseudo-random order (the same every run).
const std::vector<std::size_t>& size_mix() {
    static const std::vector<std::size_t> sizes = [] {
        std::mt19937_64 rng(19);
        std::vector<std::size_t> out;
        for (int i = 0; i < 16; ++i) {
            const double u = static_cast<double>(rng() >> 11) / static_cast<double>(std::uint64_t{1} << 53);
            out.push_back(static_cast<std::size_t>(4.0 * KiB * std::exp2(14.0 * u)));
        }
        return out;
    }();
    return sizes;
}

/// Writes one byte per page, as the block's user would.
void touch(void* p, std::size_t bytes) {
    auto* b = static_cast<volatile unsigned char*>(p);
    for (std::size_t i = 0; i < bytes; i += page) {
        b[i] = 1;
    }
}

/// Page-locked memory without a cache: mmap + mlock, freed by munlock + munmap. Where mlock is
/// refused, the pages are touched instead (kind `touched`) and `locking_refused()` says so.
struct LockedUpstream {
    static constexpr std::string_view name = "bench::LockedUpstream";
    static constexpr std::uint32_t locked = 1;
    static constexpr std::uint32_t touched = 2;

    static bool& locking_refused() {
        static bool refused = false;
        return refused;
    }

    [[nodiscard]] static HostBlock allocate(std::size_t bytes) {
        void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            throw std::bad_alloc();
        }
        if (!locking_refused() && ::mlock(p, bytes) == 0) {
            return {p, bytes, locked};
        }
        locking_refused() = true;
        touch(p, bytes);
        return {p, bytes, touched};
    }

    static void deallocate(HostBlock block) noexcept {
        if (block.data == nullptr) {
            return;
        }
        if (block.kind == locked) {
            (void)::munlock(block.data, block.bytes);
        }
        (void)::munmap(block.data, block.bytes);
    }
};

using LockedPool = PinnedPool<LockedUpstream, NoDevice>;

/// `operator new` / `operator delete`, as a host allocator.
struct NewDelete {
    static constexpr std::string_view name = "bench::NewDelete";
    [[nodiscard]] static HostBlock allocate(std::size_t bytes) { return {::operator new(bytes), bytes, 0}; }
    static void deallocate(HostBlock block) noexcept { ::operator delete(block.data); }
};

/// One pass over the size mix per iteration: allocate, write once per page, free.
template <HostAllocator A>
void run_pairs(benchmark::State& state) {
    for (auto _ : state) {
        for (const std::size_t bytes : size_mix()) {
            const HostBlock b = A::allocate(bytes);
            touch(b.data, bytes);
            benchmark::DoNotOptimize(b.data);
            A::deallocate(b);
        }
    }
    state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(size_mix().size()));
}

void BM_pairs_new_delete(benchmark::State& state) {
    run_pairs<NewDelete>(state);
}

void BM_pairs_uncached_pinned(benchmark::State& state) {
    run_pairs<LockedUpstream>(state);
    state.SetLabel(LockedUpstream::locking_refused() ? "mmap+touch (mlock refused)" : "mmap+mlock");
}

void BM_pairs_pinned_pool(benchmark::State& state) {
    run_pairs<LockedPool>(state);
    const PoolStats s = LockedPool::stats();
    state.counters["hit_rate"] = static_cast<double>(s.cache_hits) / static_cast<double>(s.requests);
    state.counters["reserved_MiB"] = static_cast<double>(s.reserved_bytes) / MiB;
    state.SetLabel(LockedUpstream::locking_refused() ? "over mmap+touch (mlock refused)" : "over mmap+mlock");
    (void)LockedPool::empty_cache();
}

BENCHMARK(BM_pairs_new_delete)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_pairs_uncached_pinned)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_pairs_pinned_pool)->Unit(benchmark::kMicrosecond)->UseRealTime();

// ---- (b) a training-loop-shaped trace ---------------------------------------------------------------

/// One step of the trace: allocate `bytes` as block `id`, or free block `id` (bytes == 0).
struct Event {
    int id;
    std::size_t bytes;
};

/// Persistent parameters; then per iteration (batch sizes vary, or not): an input staging buffer,
/// forward activations of 10 layers allocated in order, the input freed, then backward walking the
/// layers in reverse: each layer's parameter gradient allocated (kept for the optimizer step) and
/// its activation freed; the step frees the parameter gradients. The shape of CPU offloading, where
/// pinned host memory holds staged inputs, saved activations and gradients for a host optimizer.
std::vector<Event> training_trace(bool varying_batches) {
    constexpr std::array<std::size_t, 10> per_sample{800 * KiB, 800 * KiB, 400 * KiB, 400 * KiB, 200 * KiB,
                                                     200 * KiB, 100 * KiB, 100 * KiB, 16 * KiB,  4 * KiB};
    constexpr std::array<std::size_t, 10> params{7 * KiB,    148 * KiB,  295 * KiB,  590 * KiB, 1180 * KiB,
                                                 2360 * KiB, 4720 * KiB, 9440 * KiB, 8 * MiB,   2 * MiB};
    constexpr std::array<std::size_t, 8> batches{48, 64, 32, 56, 64, 40, 60, 64};
    constexpr std::size_t input_per_sample = 588 * KiB;  // 224 x 224 x 3 floats
    std::vector<Event> trace;
    int next = 0;
    for (const std::size_t p : params) {
        trace.push_back({next++, p});
    }
    for (std::size_t batch : batches) {
        batch = varying_batches ? batch : batches.back();
        const int input = next++;
        trace.push_back({input, batch * input_per_sample});
        std::array<int, 10> act{};
        for (std::size_t l = 0; l < act.size(); ++l) {
            act[l] = next++;
            trace.push_back({act[l], batch * per_sample[l]});
        }
        trace.push_back({input, 0});
        std::vector<int> param_grads;
        for (std::size_t l = act.size(); l-- > 0;) {
            param_grads.push_back(next++);
            trace.push_back({param_grads.back(), params[l]});
            trace.push_back({act[l], 0});
        }
        for (const int g : param_grads) {
            trace.push_back({g, 0});
        }
    }
    return trace;
}

/// An upstream that hands out untouched memory (the trace measures bytes, not speed); one per
/// trace, so each runs on a fresh pool.
template <int Trace>
struct TraceUpstream : NewDelete {};

/// The power-of-two caching pool users complain about: sizes round up to a power of two (512 B at
/// least), freed blocks are cached per size and never returned.
class PowerOfTwoPool {
public:
    PowerOfTwoPool() = default;
    PowerOfTwoPool(const PowerOfTwoPool&) = delete;
    PowerOfTwoPool& operator=(const PowerOfTwoPool&) = delete;
    ~PowerOfTwoPool() {
        for (auto& [size, blocks] : free_) {
            for (void* p : blocks) {
                ::operator delete(p);
            }
        }
    }
    void* allocate(std::size_t bytes) {
        const std::size_t size = std::bit_ceil(std::max<std::size_t>(bytes, 512));
        auto& cached = free_[size];
        void* p = nullptr;
        if (!cached.empty()) {
            p = cached.back();
            cached.pop_back();
        } else {
            p = ::operator new(size);
            reserved_ += size;
            ++system_allocations_;
            peak_reserved_ = std::max(peak_reserved_, reserved_);
        }
        requested_ += bytes;
        peak_requested_ = std::max(peak_requested_, requested_);
        sizes_[p] = {size, bytes};
        return p;
    }
    void deallocate(void* p) {
        const auto [size, bytes] = sizes_.at(p);
        sizes_.erase(p);
        requested_ -= bytes;
        free_[size].push_back(p);
    }
    [[nodiscard]] std::size_t peak_reserved() const { return peak_reserved_; }
    [[nodiscard]] std::size_t peak_requested() const { return peak_requested_; }
    [[nodiscard]] std::uint64_t system_allocations() const { return system_allocations_; }

private:
    std::map<std::size_t, std::vector<void*>> free_;
    std::map<void*, std::pair<std::size_t, std::size_t>> sizes_;
    std::size_t reserved_ = 0;
    std::size_t requested_ = 0;
    std::size_t peak_reserved_ = 0;
    std::size_t peak_requested_ = 0;
    std::uint64_t system_allocations_ = 0;
};

void report_trace(benchmark::State& state, std::size_t peak_reserved, std::size_t peak_requested,
                  std::uint64_t system_allocations) {
    state.counters["reserved_over_requested"] =
        static_cast<double>(peak_reserved) / static_cast<double>(peak_requested);
    state.counters["peak_reserved_MiB"] = static_cast<double>(peak_reserved) / MiB;
    state.counters["peak_requested_MiB"] = static_cast<double>(peak_requested) / MiB;
    state.counters["system_allocations"] = static_cast<double>(system_allocations);
}

/// Through PinnedPool with its default headroom (Bounded) or with the headroom rule off.
template <int Varying, bool Bounded = true>
void BM_trace_pinned_pool(benchmark::State& state) {
    using Pool = PinnedPool<TraceUpstream<Varying + (Bounded ? 0 : 2)>, NoDevice>;
    const auto trace = training_trace(Varying != 0);
    if (!Bounded) {
        Pool::set_headroom(std::numeric_limits<double>::infinity());
    }
    PoolStats s;
    for (auto _ : state) {
        (void)Pool::empty_cache();
        const auto before = Pool::stats().system_allocations;
        Pool::reset_peaks();
        std::map<int, HostBlock> live;
        for (const auto& e : trace) {
            if (e.bytes != 0) {
                live[e.id] = Pool::allocate(e.bytes);
            } else {
                Pool::deallocate(live.at(e.id));
                live.erase(e.id);
            }
        }
        for (const auto& [id, block] : live) {
            Pool::deallocate(block);
        }
        s = Pool::stats();
        s.system_allocations -= before;
    }
    report_trace(state, s.peak_reserved_bytes, s.peak_requested_bytes, s.system_allocations);
    (void)Pool::empty_cache();
}

void BM_trace_power_of_two_pool(benchmark::State& state) {
    const auto trace = training_trace(state.range(0) != 0);
    std::size_t peak_reserved = 0;
    std::size_t peak_requested = 0;
    std::uint64_t system_allocations = 0;
    for (auto _ : state) {
        PowerOfTwoPool pool;
        std::map<int, void*> live;
        for (const auto& e : trace) {
            if (e.bytes != 0) {
                live[e.id] = pool.allocate(e.bytes);
            } else {
                pool.deallocate(live.at(e.id));
                live.erase(e.id);
            }
        }
        for (const auto& [id, p] : live) {
            pool.deallocate(p);
        }
        peak_reserved = pool.peak_reserved();
        peak_requested = pool.peak_requested();
        system_allocations = pool.system_allocations();
    }
    report_trace(state, peak_reserved, peak_requested, system_allocations);
}

// Argument 1: batch sizes vary from iteration to iteration; 0: every batch is 64.
BENCHMARK(BM_trace_pinned_pool<1>)->Arg(1)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_trace_pinned_pool<0>)->Arg(0)->Unit(benchmark::kMillisecond)->Iterations(3);
// The same with the headroom rule off (segments and merging alone).
BENCHMARK_TEMPLATE(BM_trace_pinned_pool, 1, false)->Arg(1)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK_TEMPLATE(BM_trace_pinned_pool, 0, false)->Arg(0)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_trace_power_of_two_pool)->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond)->Iterations(3);

// The console output, then each allocate/free path's time over the pool's, from this run.
class SummaryReporter : public benchmark::ConsoleReporter {
public:
    void ReportRuns(const std::vector<Run>& runs) override {
        for (const auto& run : runs) {
            seconds_[run.benchmark_name()] = run.GetAdjustedRealTime();
        }
        ConsoleReporter::ReportRuns(runs);
    }
    void Finalize() override {
        ConsoleReporter::Finalize();
        const auto pool = seconds_.find("BM_pairs_pinned_pool/real_time");
        if (pool == seconds_.end()) {
            return;
        }
        std::printf("\nallocate/free pairs (%zu sizes, 4 KiB to 64 MiB), time over PinnedPool's, same run:\n",
                    size_mix().size());
        for (const char* row : {"BM_pairs_new_delete/real_time", "BM_pairs_uncached_pinned/real_time"}) {
            if (const auto it = seconds_.find(row); it != seconds_.end()) {
                std::printf("  %-36s %.1fx\n", row, it->second / pool->second);
            }
        }
        std::printf("  uncached pinned path: %s\n",
                    LockedUpstream::locking_refused() ? "mmap + touch (mlock refused)" : "mmap + mlock");
    }

private:
    std::map<std::string, double> seconds_;
};

}  // namespace

int main(int argc, char** argv) {
    return syncblob_bench::run_main<SummaryReporter>(argc, argv, "bench_alloc");
}
