// SPDX-License-Identifier: BSD-2-Clause
// Host math throughput against this machine's own memory bandwidth, measured in the same run.
//
// For every op (asum, sumsq, dot, update, scale), element type (float, double) and size
// N = 2^10 .. 2^26 it times, in alternating one-millisecond batches ("paired measurement" below):
// - "syncblob/best": the blob-level function as users call it (default settings: automatic kernel
//   path, the worker pool and its split rule) against the faster of two limits of the same access
//   pattern measured in the same pairs: the bandwidth probe (bandwidth.cpp, always -march=native)
//   on one core, and the probe on both cores, each core one half, on a persistent helper thread
//   that spins between calls (the machine's best, with no pool overhead of syncblob's in it);
// - "<impl>/1t": on one thread against the one-core probe: syncblob's blob-level call, its raw
//   kernel (syncblob::math::*), the portable Eigen path, the raw kernel on the AVX2 path where the
//   automatic one is AVX-512, a plain loop compiled with this build's flags, OpenBLAS (cblas_*, one
//   thread) when it was found: how good each kernel is on one core.
// A row's "ratio" counter is its speed as a fraction of its baseline's. Rows of one N are
// registered together.
//
// Other rows: "bw-<pattern>/probe/1t" is the probe against itself (a control: how far the method
// scatters), "bw-<pattern>/probe/2t" the probe on both cores against one (the speed-up the machine
// offers); "syncblob-forced/2t" (N >= 2^12) the blob-level call split over two threads whatever
// its size against the same call on one (where the split starts to pay: the split rule's
// evidence); "syncblob-vs-raw/1t" (N <= 2^16) the blob-level call against the raw kernel on the
// same memory (the blob's fixed cost per call); "handover/f32|f64/pool-vs-helper/2t" (N = 2^12 .. 2^16)
// the two halves of the read probe run through syncblob's worker pool against the same halves on
// the limit's helper thread (the pool's own hand-over cost), also at 8-32 MiB of data, where two
// rows take a split asum apart: "halves/f32|f64/kernel-vs-probe/2t" the raw kernel (one call per
// half, on the path of the whole call) against the probe, both as two halves with the second on
// the helper, and "halves/f32|f64/blob-vs-kernel/2t" the blob-level call (split by the pool, block
// by block) against those kernel halves. Op "access" is the steady-state host_data() cost against a raw
// pointer. benchmarks/report.py turns the JSON into tables.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include <syncblob/math.hpp>

#include "bandwidth.hpp"

#ifdef SYNCBLOB_BENCH_CBLAS
#include <cblas.h>
#endif

#ifndef SYNCBLOB_BENCH_BUILD
#define SYNCBLOB_BENCH_BUILD "default"
#endif

namespace {

using syncblob_bench::Pattern;
namespace sm = syncblob::math;

constexpr int min_log = 10;
constexpr int max_log = 26;
int max_log_in_run = max_log;

enum class Op { asum, sumsq, dot, update, scale };
enum class Impl { blob, kernel, portable, avx2, loop, cblas };

const char* op_name(Op op) {
    switch (op) {
        case Op::asum:
            return "asum";
        case Op::sumsq:
            return "sumsq";
        case Op::dot:
            return "dot";
        case Op::update:
            return "update";
        case Op::scale:
            return "scale";
    }
    return "?";
}
const char* impl_name(Impl i) {
    switch (i) {
        case Impl::blob:
            return "syncblob";
        case Impl::kernel:
            return "syncblob-raw";
        case Impl::portable:
            return "syncblob-portable";
        case Impl::avx2:
            return "syncblob-avx2";
        case Impl::loop:
            return "loop";
        case Impl::cblas:
            return "openblas";
    }
    return "?";
}
const char* pattern_name(Pattern p) {
    switch (p) {
        case Pattern::read1:
            return "read1";
        case Pattern::read2:
            return "read2";
        case Pattern::rmw1:
            return "rmw1";
        case Pattern::rmw2:
            return "rmw2";
        case Pattern::triad:
            return "triad";
        case Pattern::read1_abs:
            return "read1-abs";
    }
    return "?";
}
Pattern pattern_of(Op op) {
    switch (op) {
        case Op::asum:
        case Op::sumsq:
            return Pattern::read1;
        case Op::dot:
            return Pattern::read2;
        case Op::scale:
            return Pattern::rmw1;
        case Op::update:
            return Pattern::rmw2;
    }
    return Pattern::read1;
}
// Bytes moved per element (reads + writes).
int streams(Pattern p) {
    switch (p) {
        case Pattern::read1:
        case Pattern::read1_abs:
            return 1;
        case Pattern::read2:
        case Pattern::rmw1:
            return 2;
        case Pattern::rmw2:
        case Pattern::triad:
            return 3;
    }
    return 1;
}

// Three 64-byte aligned arrays per element type, allocated and filled once.
template <class T>
struct Pool {
    T* x;
    T* y;
    T* z;
    static Pool& get() {
        static Pool p = [] {
            const std::size_t n = std::size_t{1} << max_log_in_run;
            Pool q{alloc(n), alloc(n), alloc(n)};
            for (std::size_t i = 0; i < n; ++i) {
                const auto v = static_cast<T>(static_cast<int>(i % 97) - 48) / T(64);
                q.x[i] = v;
                q.y[i] = v * T(0.5);
                q.z[i] = -v;
            }
            return q;
        }();
        return p;
    }
    static T* alloc(std::size_t n) { return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{64})); }
};

// Applies the kernel-side settings for a row and restores the defaults after.
struct Settings {
    Settings(unsigned threads, bool forced_threads, sm::KernelPath path = sm::KernelPath::automatic) {
        sm::set_max_threads(threads);
        sm::set_parallel_threshold(forced_threads ? 1 : default_threshold);
        sm::set_kernel_path(path);
    }
    ~Settings() {
        sm::set_max_threads(default_threads);
        sm::set_parallel_threshold(default_threshold);
        sm::set_kernel_path(sm::KernelPath::automatic);
    }
    static inline std::int64_t default_threshold = sm::parallel_threshold();
    static inline unsigned default_threads = sm::max_threads();
};

// The second core of the two-core limit: one helper thread, started once, that runs the second
// half of a probe while the caller runs the first. It spins for 50 µs after each job (so probes in
// a batch reach it at once) and then sleeps (so it leaves the core to syncblob's rows).
class Helper {
public:
    static Helper& get() {
        static auto* helper = new Helper();  // never destroyed: its thread runs until exit
        return *helper;
    }
    template <class Mine, class Theirs>
    void run_with(const Mine& mine, const Theirs& theirs) {
        job_ = &theirs;
        call_ = [](const void* f) { (*static_cast<const Theirs*>(f))(); };
        const std::uint32_t ticket = posted_.fetch_add(1, std::memory_order_seq_cst) + 1;
        if (sleeping_.load(std::memory_order_seq_cst)) {
            posted_.notify_one();
        }
        mine();
        while (finished_.load(std::memory_order_acquire) != ticket) {
            relax();
        }
    }

private:
    Helper() {
        std::thread([this] { loop(); }).detach();
    }
    static void relax() {
#if defined(__x86_64__)
        __builtin_ia32_pause();
#endif
    }
    [[noreturn]] void loop() {
        std::uint32_t seen = 0;
        for (;;) {
            const auto until = Clock::now() + std::chrono::microseconds(50);
            std::uint32_t now = posted_.load(std::memory_order_acquire);
            for (unsigned i = 0; now == seen; ++i) {
                relax();
                if ((i & 63) == 63 && Clock::now() > until) {
                    sleeping_.store(true, std::memory_order_seq_cst);
                    if (posted_.load(std::memory_order_seq_cst) == seen) {
                        posted_.wait(seen, std::memory_order_seq_cst);
                    }
                    sleeping_.store(false, std::memory_order_seq_cst);
                }
                now = posted_.load(std::memory_order_acquire);
            }
            seen = now;
            call_(job_);
            finished_.store(seen, std::memory_order_release);
        }
    }
    using Clock = std::chrono::steady_clock;
    const void* job_ = nullptr;
    void (*call_)(const void*) = nullptr;
    alignas(64) std::atomic<std::uint32_t> posted_{0};
    alignas(64) std::atomic<std::uint32_t> finished_{0};
    std::atomic<bool> sleeping_{false};
};

template <class T>
void plain_loop(Op op, T* x, const T* y, std::int64_t n) {
    switch (op) {
        case Op::asum: {
            T s = 0;
            for (std::int64_t i = 0; i < n; ++i) {
                s += std::abs(x[i]);
            }
            benchmark::DoNotOptimize(s);
            break;
        }
        case Op::sumsq: {
            T s = 0;
            for (std::int64_t i = 0; i < n; ++i) {
                s += x[i] * x[i];
            }
            benchmark::DoNotOptimize(s);
            break;
        }
        case Op::dot: {
            T s = 0;
            for (std::int64_t i = 0; i < n; ++i) {
                s += x[i] * y[i];
            }
            benchmark::DoNotOptimize(s);
            break;
        }
        case Op::update:
            for (std::int64_t i = 0; i < n; ++i) {
                x[i] -= y[i];
            }
            break;
        case Op::scale:
            for (std::int64_t i = 0; i < n; ++i) {
                x[i] *= T(-1);
            }
            break;
    }
}

#ifdef SYNCBLOB_BENCH_CBLAS
template <class T>
void openblas(Op op, T* x, const T* y, std::int64_t n64) {
    const auto n = static_cast<blasint>(n64);
    if constexpr (std::is_same_v<T, float>) {
        switch (op) {
            case Op::asum:
                benchmark::DoNotOptimize(cblas_sasum(n, x, 1));
                break;
            case Op::sumsq:
                benchmark::DoNotOptimize(cblas_sdot(n, x, 1, x, 1));
                break;
            case Op::dot:
                benchmark::DoNotOptimize(cblas_sdot(n, x, 1, y, 1));
                break;
            case Op::update:
                cblas_saxpy(n, -1.0f, y, 1, x, 1);
                break;
            case Op::scale:
                cblas_sscal(n, -1.0f, x, 1);
                break;
        }
    } else {
        switch (op) {
            case Op::asum:
                benchmark::DoNotOptimize(cblas_dasum(n, x, 1));
                break;
            case Op::sumsq:
                benchmark::DoNotOptimize(cblas_ddot(n, x, 1, x, 1));
                break;
            case Op::dot:
                benchmark::DoNotOptimize(cblas_ddot(n, x, 1, y, 1));
                break;
            case Op::update:
                cblas_daxpy(n, -1.0, y, 1, x, 1);
                break;
            case Op::scale:
                cblas_dscal(n, -1.0, x, 1);
                break;
        }
    }
}
#endif

// ---- paired measurement ------------------------------------------------------------------------
// A shared machine's speed drifts by tens of percent within seconds, so a kernel and its baseline
// measured in separate rows, even moments apart, can disagree by that much. Every row therefore
// times its subject `a` against its baseline `b` in alternating batches (a then b, then b then a,
// ...), each batch about one millisecond of calls (at least one call), and reports per pair the
// ratio of b's time per call to a's. One benchmark iteration is one pair; the row's counters are
// the median ratio ("ratio") and the lower quartile ("ratio_q1"), and its iteration time is a's time
// per call, so bytes_per_second is a's throughput.

using Clock = std::chrono::steady_clock;
double batch_seconds = 1e-3;
int pairs_per_row = 15;
int pieces_per_row = 1;

// What a row keeps from one piece to the next (a piece is one Google Benchmark repetition of the
// row; see --spread in main): its batch sizes, measured in its first piece, and the turn that
// rotates the order of its batches from round to round across all its pieces.
struct Row {
    std::vector<std::int64_t> calls;
    unsigned turn = 0;
};

template <class F>
double seconds_per_call(F& f, std::int64_t calls) {
    const auto start = Clock::now();
    for (std::int64_t i = 0; i < calls; ++i) {
        f();
    }
    return std::chrono::duration<double>(Clock::now() - start).count() / static_cast<double>(calls);
}

// A timed batch. First a pause longer than any spin (syncblob's pool workers and the limit's
// helper thread spin 50 us after their last part, then sleep), so the thread that served the
// previous batch is asleep and does not compete for the second core with this batch's threads;
// then 100 us of untimed calls, which wake this batch's own threads (a sleeping thread takes tens
// of microseconds to run again) and leave them spinning, as in a program's steady state. Without
// the pause a batch that follows the other party's batch spends its first 50 us sharing a core
// with a spinning thread (a bias of a few percent either way).
template <class F>
double batch(F& f, std::int64_t calls) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    const auto warm = Clock::now() + std::chrono::microseconds(100);
    do {
        f();
    } while (Clock::now() < warm);
    return seconds_per_call(f, calls);
}

// Calls per batch: doubled until a batch takes a tenth of batch_seconds, then scaled to it from the
// fastest of three batches of that size (one slow moment must not leave a row with tiny batches).
template <class F>
std::int64_t calls_per_batch(F& f) {
    std::int64_t calls = 1;
    while (seconds_per_call(f, calls) * static_cast<double>(calls) < batch_seconds / 10 &&
           calls < (std::int64_t{1} << 30)) {
        calls *= 2;
    }
    double t = seconds_per_call(f, calls);
    for (int i = 0; i < 2; ++i) {
        t = std::min(t, seconds_per_call(f, calls));
    }
    return std::max<std::int64_t>(1, std::llround(batch_seconds / t));
}

// The subject `a` against the faster of two baselines, all three in rotating batches: per round
// the ratio is min(t_one, t_two) / t_a. "two_core_limit" counts the rounds the second was faster.
template <class A, class B1, class B2>
void paired_best(benchmark::State& state, Row& row, A a, B1 one, B2 two, std::int64_t bytes_per_call) {
    if (row.calls.empty()) {
        row.calls = {calls_per_batch(a), calls_per_batch(one), calls_per_batch(two)};
    }
    const std::int64_t calls_a = row.calls[0];
    const std::int64_t calls_1 = row.calls[1];
    const std::int64_t calls_2 = row.calls[2];
    std::vector<double> ratios;
    double seconds_1 = 0;
    double seconds_2 = 0;
    int two_faster = 0;
    for (auto _ : state) {
        double ta = 0;
        double t1 = 0;
        double t2 = 0;
        switch (row.turn++ % 3) {
            case 0:
                ta = batch(a, calls_a);
                t1 = batch(one, calls_1);
                t2 = batch(two, calls_2);
                break;
            case 1:
                t2 = batch(two, calls_2);
                ta = batch(a, calls_a);
                t1 = batch(one, calls_1);
                break;
            default:
                t1 = batch(one, calls_1);
                t2 = batch(two, calls_2);
                ta = batch(a, calls_a);
                break;
        }
        state.SetIterationTime(ta);
        ratios.push_back(std::min(t1, t2) / ta);
        seconds_1 += t1;
        seconds_2 += t2;
        two_faster += t2 < t1 ? 1 : 0;
    }
    std::sort(ratios.begin(), ratios.end());
    const auto rounds = static_cast<double>(ratios.size());
    state.counters["ratio"] = ratios[ratios.size() / 2];
    state.counters["ratio_q1"] = ratios[ratios.size() / 4];
    state.counters["one_core_bytes_per_second"] = static_cast<double>(bytes_per_call) * rounds / seconds_1;
    state.counters["two_core_bytes_per_second"] = static_cast<double>(bytes_per_call) * rounds / seconds_2;
    state.counters["two_core_limit"] = two_faster / rounds;
    state.SetBytesProcessed(state.iterations() * bytes_per_call);
}

template <class A, class B>
void paired(benchmark::State& state, Row& row, A a, B b, std::int64_t bytes_per_call) {
    if (row.calls.empty()) {
        row.calls = {calls_per_batch(a), calls_per_batch(b)};  // also the first warm-up: pages touched
    }
    const std::int64_t calls_a = row.calls[0];
    const std::int64_t calls_b = row.calls[1];
    std::vector<double> ratios;
    double b_seconds = 0;
    for (auto _ : state) {
        double ta = 0;
        double tb = 0;
        if (row.turn++ % 2 == 0) {
            ta = batch(a, calls_a);
            tb = batch(b, calls_b);
        } else {
            tb = batch(b, calls_b);
            ta = batch(a, calls_a);
        }
        state.SetIterationTime(ta);
        ratios.push_back(tb / ta);
        b_seconds += tb;
    }
    std::sort(ratios.begin(), ratios.end());
    state.counters["ratio"] = ratios[ratios.size() / 2];
    state.counters["ratio_q1"] = ratios[ratios.size() / 4];
    state.counters["baseline_bytes_per_second"] =
        static_cast<double>(bytes_per_call) * static_cast<double>(ratios.size()) / b_seconds;
    state.SetBytesProcessed(state.iterations() * bytes_per_call);
}

template <class T>
std::int64_t bytes_per_call(Pattern pattern, std::int64_t n) {
    return n * static_cast<std::int64_t>(sizeof(T)) * streams(pattern);
}

// The probe of `pattern` over N elements of the pool, on one core or on two (each one contiguous
// half, the second on the persistent helper thread).
template <class T>
auto probe(Pattern pattern, std::int64_t n, unsigned threads) {
    return [pattern, count = static_cast<std::size_t>(n), threads, &pool = Pool<T>::get()] {
        if (threads <= 1) {
            benchmark::DoNotOptimize(
                syncblob_bench::bandwidth_probe(pattern, sizeof(T), pool.x, pool.y, pool.z, 0, count));
        } else {
            const std::size_t half = count / 2 / 16 * 16;  // whole cache lines for either word size
            std::uint64_t mine = 0;
            std::uint64_t other = 0;
            const auto first = [&] {
                mine = syncblob_bench::bandwidth_probe(pattern, sizeof(T), pool.x, pool.y, pool.z, 0, half);
            };
            const auto second = [&] {
                other = syncblob_bench::bandwidth_probe(pattern, sizeof(T), pool.x, pool.y, pool.z, half, count);
            };
            Helper::get().run_with(first, second);
            benchmark::DoNotOptimize(mine + other);
        }
        benchmark::ClobberMemory();
    };
}

// Two blobs over the pool's memory (lent, so every row reads the same pages): a's data is x and
// its diff y; b's data is y.
template <class T>
struct Operands {
    syncblob::Blob<T> a;
    syncblob::Blob<T> b;
    explicit Operands(std::int64_t n) : a({n}), b({n}) {
        auto& pool = Pool<T>::get();
        const auto count = static_cast<std::size_t>(n);
        a.set_host_data(pool.x, count, syncblob::Borrow{});
        a.diff_buffer()->set_host_data(static_cast<void*>(pool.y), count * sizeof(T));
        b.set_host_data(pool.y, count, syncblob::Borrow{});
    }
};

// One call of `op` through `impl` on N elements.
template <class T>
auto operation(Op op, Impl impl, std::int64_t n, Operands<T>& blobs) {
    return [op, impl, n, &blobs, &pool = Pool<T>::get()] {
        const T alpha = T(-1);
        switch (impl) {
            case Impl::blob:
            case Impl::portable:
                switch (op) {
                    case Op::asum:
                        benchmark::DoNotOptimize(syncblob::asum_data(blobs.a));
                        break;
                    case Op::sumsq:
                        benchmark::DoNotOptimize(syncblob::sumsq_data(blobs.a));
                        break;
                    case Op::dot:
                        benchmark::DoNotOptimize(syncblob::dot(blobs.a, blobs.b));
                        break;
                    case Op::update:
                        syncblob::update(blobs.a);
                        break;
                    case Op::scale:
                        syncblob::scale_data(blobs.a, alpha);
                        break;
                }
                break;
            case Impl::kernel:
            case Impl::avx2:
                switch (op) {
                    case Op::asum:
                        benchmark::DoNotOptimize(sm::asum(pool.x, n));
                        break;
                    case Op::sumsq:
                        benchmark::DoNotOptimize(sm::sumsq(pool.x, n));
                        break;
                    case Op::dot:
                        benchmark::DoNotOptimize(sm::dot(pool.x, pool.y, n));
                        break;
                    case Op::update:
                        sm::sub(pool.x, pool.y, n);
                        break;
                    case Op::scale:
                        sm::scale(pool.x, alpha, n);
                        break;
                }
                break;
            case Impl::loop:
                plain_loop(op, pool.x, pool.y, n);
                break;
            case Impl::cblas:
#ifdef SYNCBLOB_BENCH_CBLAS
                openblas(op, pool.x, pool.y, n);
#endif
                break;
        }
        benchmark::ClobberMemory();
    };
}

// What users get: the blob-level call with the default settings against the faster limit.
template <class T>
void bench_best(benchmark::State& state, Row& row, Op op, std::int64_t n) {
    Operands<T> blobs(n);
    const Pattern p = pattern_of(op);
    paired_best(state, row, operation<T>(op, Impl::blob, n, blobs), probe<T>(p, n, 1), probe<T>(p, n, 2),
                bytes_per_call<T>(p, n));
}

// One thread: `op` through `impl` against the probe of its access pattern.
template <class T>
void bench_op(benchmark::State& state, Row& row, Op op, Impl impl, std::int64_t n) {
    const Settings settings(1, false,
                            impl == Impl::portable ? sm::KernelPath::portable
                            : impl == Impl::avx2   ? sm::KernelPath::avx2
                                                   : sm::KernelPath::automatic);
    Operands<T> blobs(n);
    paired(state, row, operation<T>(op, impl, n, blobs), probe<T>(pattern_of(op), n, 1),
           bytes_per_call<T>(pattern_of(op), n));
}

// The blob-level call against the raw-pointer kernel on the same memory: what the blob's state
// check, statistics and indirection cost, measured in pairs (ratio 1: nothing).
template <class T>
void bench_blob_overhead(benchmark::State& state, Row& row, Op op, std::int64_t n) {
    const Settings settings(1, false);
    Operands<T> blobs(n);
    paired(state, row, operation<T>(op, Impl::blob, n, blobs), operation<T>(op, Impl::kernel, n, blobs),
           bytes_per_call<T>(pattern_of(op), n));
}

// asum's limits on one thread: the blob-level call against the probe that does asum's own arithmetic
// (`arith`: 1 when syncblob costs what an ordinary loop of that arithmetic costs), and that probe
// against the read probe (`bw-read1-abs`: how far asum's arithmetic, two vector operations a vector
// where the read probe has one, lets a loop follow the loads; at sizes in L1 and L2 on a CPU with two
// vector ports for 512-bit operations, about half).
template <class T>
void bench_asum_arith(benchmark::State& state, Row& row, std::int64_t n) {
    const Settings settings(1, false);
    Operands<T> blobs(n);
    paired(state, row, operation<T>(Op::asum, Impl::blob, n, blobs), probe<T>(Pattern::read1_abs, n, 1),
           bytes_per_call<T>(Pattern::read1, n));
}
template <class T>
void bench_arith_probe(benchmark::State& state, Row& row, std::int64_t n) {
    paired(state, row, probe<T>(Pattern::read1_abs, n, 1), probe<T>(Pattern::read1, n, 1),
           bytes_per_call<T>(Pattern::read1, n));
}

// Two threads forced (threshold 1) against the same call on one thread: the ratio is the speed-up.
template <class T>
void bench_op_threads(benchmark::State& state, Row& row, Op op, std::int64_t n) {
    const Settings settings(2, true);
    Operands<T> blobs(n);
    auto call = operation<T>(op, Impl::blob, n, blobs);
    paired(
        state, row,
        [&] {
            sm::set_max_threads(2);
            call();
        },
        [&] {
            sm::set_max_threads(1);
            call();
        },
        bytes_per_call<T>(pattern_of(op), n));
}

// syncblob's worker pool against the limit's bare helper thread, both running the two halves of the
// same probe: the ratio is the helper's time over the pool's, so the pool's own cost of handing a
// part to a worker and collecting it shows as a ratio under 1.
template <class T>
void bench_handover(benchmark::State& state, Row& row, std::int64_t n) {
    auto& pool = Pool<T>::get();
    const std::size_t count = static_cast<std::size_t>(n);
    const std::size_t half = count / 2 / 16 * 16;
    const auto through_pool = [&pool, count, half] {
        std::array<std::uint64_t, 2> sums{};
        syncblob::parallel::run(2u, [&](unsigned part) {
            sums[part] = syncblob_bench::bandwidth_probe(Pattern::read1, sizeof(T), pool.x, pool.y, pool.z,
                                                         part == 0 ? 0 : half, part == 0 ? half : count);
        });
        benchmark::DoNotOptimize(sums[0] + sums[1]);
        benchmark::ClobberMemory();
    };
    const Settings settings(2, true);
    paired(state, row, through_pool, probe<T>(Pattern::read1, n, 2), bytes_per_call<T>(Pattern::read1, n));
}

// asum's raw kernel over the two halves of N elements, the second half on the limit's helper thread,
// each half one call on one thread, on the path the whole split call takes (kernel_path_for).
template <class T>
auto kernel_halves(std::int64_t n) {
    return [n, &pool = Pool<T>::get()] {
        const Settings settings(1, false, sm::kernel_path_for(sm::SplitKind::reduction, n * std::int64_t{sizeof(T)}));
        const std::int64_t half = n / 2 / 16 * 16;
        T mine = 0;
        T other = 0;
        Helper::get().run_with([&] { mine = sm::asum(pool.x, half); },
                               [&] { other = sm::asum(pool.x + half, n - half); });
        benchmark::DoNotOptimize(mine + other);
        benchmark::ClobberMemory();
    };
}

// The kernel halves against the probe halves: under 1 where the kernel streams two halves slower
// than the machine can.
template <class T>
void bench_kernel_halves(benchmark::State& state, Row& row, std::int64_t n) {
    paired(state, row, kernel_halves<T>(n), probe<T>(Pattern::read1, n, 2), bytes_per_call<T>(Pattern::read1, n));
}

// The blob-level asum as users call it (split by the pool, block by block) against the kernel
// halves: under 1 where the split itself (pool, blocks, blob) costs time.
template <class T>
void bench_blob_halves(benchmark::State& state, Row& row, std::int64_t n) {
    Operands<T> blobs(n);
    paired(state, row, operation<T>(Op::asum, Impl::blob, n, blobs), kernel_halves<T>(n),
           bytes_per_call<T>(Pattern::read1, n));
}

// The probe against itself on one thread (the method's own scatter: ideally 1), or on two threads
// against one (the speed-up the machine offers).
template <class T>
void bench_bandwidth(benchmark::State& state, Row& row, Pattern pattern, std::int64_t n, unsigned threads) {
    paired(state, row, probe<T>(pattern, n, threads), probe<T>(pattern, n, 1), bytes_per_call<T>(pattern, n));
}

// Steady-state host_data() (already fresh) against a raw pointer read.
void bench_access(benchmark::State& state, bool through_blob) {
    syncblob::Blob<float> b({1024});
    b.fill(1.0f);
    const float* raw = b.host_data().data();
    benchmark::DoNotOptimize(raw);
    float sink = 0;
    for (auto _ : state) {
        if (through_blob) {
            sink += b.host_data()[7];
        } else {
            benchmark::DoNotOptimize(raw);
            sink += raw[7];
        }
        benchmark::DoNotOptimize(sink);
    }
}

template <class T>
const char* type_name() {
    return std::is_same_v<T, float> ? "f32" : "f64";
}

// Registers one row: its rounds (--pairs) in --spread pieces, each a Google Benchmark repetition
// of ceil(pairs / pieces) rounds, which random interleaving runs at separate moments of the process.
template <class F, class... Args>
void add_row(const std::string& name, F bench, Args... args) {
    const auto row = std::make_shared<Row>();
    benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& state) { bench(state, *row, args...); })
        ->UseManualTime()
        ->Iterations((pairs_per_row + pieces_per_row - 1) / pieces_per_row)
        ->Repetitions(pieces_per_row);
}

template <class T>
void register_size(int log2n) {
    const std::int64_t n = std::int64_t{1} << log2n;
    const auto name = [&](const std::string& op, const std::string& impl, const std::string& threads) {
        return op + "/" + type_name<T>() + "/" + impl + "/" + threads + "/" + std::to_string(n);
    };
    for (const Pattern p : {Pattern::read1, Pattern::read2, Pattern::rmw1, Pattern::rmw2, Pattern::triad}) {
        const std::string op = std::string("bw-") + pattern_name(p);
        add_row(name(op, "probe", "1t"), bench_bandwidth<T>, p, n, 1u);
        add_row(name(op, "probe", "2t"), bench_bandwidth<T>, p, n, 2u);
    }
    std::vector<Impl> impls{Impl::blob, Impl::kernel, Impl::portable, Impl::loop};
    // Where the automatic path is AVX-512, the raw kernels on the AVX2 path too (does the wider
    // vector pay at every size?).
    if (sm::active_kernel_path() == sm::KernelPath::avx512 && sm::kernel_path_supported(sm::KernelPath::avx2)) {
        impls.insert(impls.begin() + 3, Impl::avx2);
    }
#ifdef SYNCBLOB_BENCH_CBLAS
    impls.push_back(Impl::cblas);
#endif
    for (const Op op : {Op::asum, Op::sumsq, Op::dot, Op::update, Op::scale}) {
        add_row(name(op_name(op), "syncblob", "best"), bench_best<T>, op, n);
        for (const Impl impl : impls) {
            add_row(name(op_name(op), impl_name(impl), "1t"), bench_op<T>, op, impl, n);
        }
        if (log2n <= 16) {  // where a call is short enough for its fixed cost to show
            add_row(name(op_name(op), "syncblob-vs-raw", "1t"), bench_blob_overhead<T>, op, n);
        }
        if (op == Op::asum && log2n <= 18) {  // in L1 and L2, where arithmetic can limit a read
            add_row(name("asum", "syncblob-vs-arith", "1t"), bench_asum_arith<T>, n);
            add_row(name("bw-read1-abs", "vs-read1", "1t"), bench_arith_probe<T>, n);
        }
        const std::int64_t data_bytes = n * std::int64_t{sizeof(T)};
        const bool long_split = data_bytes >= (std::int64_t{8} << 20) && data_bytes <= (std::int64_t{32} << 20);
        if (op == Op::asum && ((log2n >= 12 && log2n <= 16) || long_split)) {  // short calls; long streams
            add_row(name("handover", "pool-vs-helper", "2t"), bench_handover<T>, n);
        }
        if (op == Op::asum && long_split) {  // a split asum taken apart where it streams from L3
            add_row(name("halves", "kernel-vs-probe", "2t"), bench_kernel_halves<T>, n);
            add_row(name("halves", "blob-vs-kernel", "2t"), bench_blob_halves<T>, n);
        }
        if (log2n >= 12) {  // two threads forced at every size: where does threading start to pay?
            add_row(name(op_name(op), "syncblob-forced", "2t"), bench_op_threads<T>, op, n);
        }
    }
}

}  // namespace

int main(int argc, char** argv) {
    // --max-log2=K limits the sizes (the smoke run uses it), --pairs=P sets the measured pairs per row
    // (default 15), --spread=S measures them in S pieces (default 1: all at once; with
    // --benchmark_enable_random_interleaving=true the pieces of all rows are run in a random order,
    // so each row samples S moments of the process instead of one), --batch-us=U the length of a
    // batch (default 1000 µs); everything else goes to Google Benchmark.
    std::vector<char*> args;
    for (int i = 0; i < argc; ++i) {
        if (std::strncmp(argv[i], "--max-log2=", 11) == 0) {
            max_log_in_run = std::atoi(argv[i] + 11);
        } else if (std::strncmp(argv[i], "--batch-us=", 11) == 0) {
            batch_seconds = std::max(1, std::atoi(argv[i] + 11)) * 1e-6;
        } else if (std::strncmp(argv[i], "--pairs=", 8) == 0) {
            pairs_per_row = std::max(1, std::atoi(argv[i] + 8));
        } else if (std::strncmp(argv[i], "--spread=", 9) == 0) {
            pieces_per_row = std::max(1, std::atoi(argv[i] + 9));
        } else {
            args.push_back(argv[i]);
        }
    }
    pieces_per_row = std::min(pieces_per_row, pairs_per_row);  // a piece is at least one round
    int count = static_cast<int>(args.size());
#ifdef SYNCBLOB_BENCH_CBLAS
    openblas_set_num_threads(1);
    benchmark::AddCustomContext("openblas", "yes (1 thread)");
#else
    benchmark::AddCustomContext("openblas", "not found");
#endif
    benchmark::AddCustomContext("syncblob_build", SYNCBLOB_BENCH_BUILD);
    benchmark::AddCustomContext("syncblob_kernel_path", std::string(sm::kernel_path_name(sm::active_kernel_path())));
    benchmark::AddCustomContext("syncblob_split_bytes",
                                "reduction " + std::to_string(sm::split_bytes(sm::SplitKind::reduction)) + ", update " +
                                    std::to_string(sm::split_bytes(sm::SplitKind::update)) + ", scale " +
                                    std::to_string(sm::split_bytes(sm::SplitKind::scale)));
    benchmark::AddCustomContext("syncblob_max_threads", std::to_string(sm::max_threads()));
    benchmark::RegisterBenchmark("access/f32/host_data/1t/1", bench_access, true);
    benchmark::RegisterBenchmark("access/f32/raw-pointer/1t/1", bench_access, false);
    for (int log2n = min_log; log2n <= max_log_in_run; ++log2n) {
        register_size<float>(log2n);
        register_size<double>(log2n);
    }
    benchmark::Initialize(&count, args.data());
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
