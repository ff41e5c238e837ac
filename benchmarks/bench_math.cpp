// SPDX-License-Identifier: BSD-2-Clause
// Host math throughput against this machine's own memory bandwidth, measured in the same run.
//
// For every op (asum, sumsq, dot, update, scale), element type (float, double) and size
// N = 2^10 .. 2^26 it times: syncblob's blob-level function (what users call; automatic kernel
// path), the raw-pointer kernel (syncblob::math::*), the portable Eigen path forced, a plain loop
// compiled with this build's flags, and OpenBLAS (cblas_*) when it was found — and, next to them,
// the bandwidth probe of the same access pattern (bandwidth.cpp, always -march=native). Benchmarks
// are registered size by size, so a kernel and its baseline run moments apart. Two-thread rows
// (N >= 2^18) measure the threading threshold against a two-thread probe. scripts/run-benchmarks
// turns the JSON into ratios.
//
// Single-thread rows report CPU time (robust on a shared machine); two-thread rows report wall time
// (CPU time would add both threads). Names: <op>/<type>/<impl>/<threads>t/<N>; op "bw-<pattern>" is the probe, op
// "access" the steady-state host_data() cost against a raw pointer.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
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
enum class Impl { blob, kernel, portable, loop, cblas };

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
    Settings(unsigned threads, bool forced_threads, bool portable) {
        sm::set_max_threads(threads);
        sm::set_parallel_threshold(forced_threads ? 1 : default_threshold);
        sm::set_kernel_path(portable ? sm::KernelPath::portable : sm::KernelPath::automatic);
    }
    ~Settings() {
        sm::set_max_threads(2);
        sm::set_parallel_threshold(default_threshold);
        sm::set_kernel_path(sm::KernelPath::automatic);
    }
    static inline std::int64_t default_threshold = sm::parallel_threshold();
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

template <class T>
void bench_op(benchmark::State& state, Op op, Impl impl, std::int64_t n, unsigned threads, bool forced) {
    auto& pool = Pool<T>::get();
    const Settings settings(threads, forced, impl == Impl::portable);
    syncblob::Blob<T> a({n});
    syncblob::Blob<T> b({n});
    a.data_buffer()->set_host_data(static_cast<void*>(pool.x), static_cast<std::size_t>(n) * sizeof(T));
    a.diff_buffer()->set_host_data(static_cast<void*>(pool.y), static_cast<std::size_t>(n) * sizeof(T));
    b.data_buffer()->set_host_data(static_cast<void*>(pool.y), static_cast<std::size_t>(n) * sizeof(T));
    const T alpha = T(-1);
    for (auto _ : state) {
        switch (impl) {
            case Impl::blob:
            case Impl::portable:
                switch (op) {
                    case Op::asum:
                        benchmark::DoNotOptimize(syncblob::asum_data(a));
                        break;
                    case Op::sumsq:
                        benchmark::DoNotOptimize(syncblob::sumsq_data(a));
                        break;
                    case Op::dot:
                        benchmark::DoNotOptimize(syncblob::dot(a, b));
                        break;
                    case Op::update:
                        syncblob::update(a);
                        break;
                    case Op::scale:
                        syncblob::scale_data(a, alpha);
                        break;
                }
                break;
            case Impl::kernel:
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
    }
    state.SetBytesProcessed(state.iterations() * n * static_cast<std::int64_t>(sizeof(T)) * streams(pattern_of(op)));
}

template <class T>
void bench_bandwidth(benchmark::State& state, Pattern pattern, std::int64_t n, unsigned threads) {
    auto& pool = Pool<T>::get();
    const auto count = static_cast<std::size_t>(n);
    for (auto _ : state) {
        if (threads <= 1) {
            benchmark::DoNotOptimize(
                syncblob_bench::bandwidth_probe(pattern, sizeof(T), pool.x, pool.y, pool.z, 0, count));
        } else {  // the same shape as the kernels' threading: one extra thread started per call
            std::uint64_t other = 0;
            std::thread worker([&] {
                other = syncblob_bench::bandwidth_probe(pattern, sizeof(T), pool.x, pool.y, pool.z, count / 2, count);
            });
            const auto mine = syncblob_bench::bandwidth_probe(pattern, sizeof(T), pool.x, pool.y, pool.z, 0, count / 2);
            worker.join();
            benchmark::DoNotOptimize(mine + other);
        }
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(state.iterations() * n * static_cast<std::int64_t>(sizeof(T)) * streams(pattern));
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

template <class T>
void register_size(int log2n) {
    const std::int64_t n = std::int64_t{1} << log2n;
    const auto name = [&](const std::string& op, const std::string& impl, unsigned threads) {
        return op + "/" + type_name<T>() + "/" + impl + "/" + std::to_string(threads) + "t/" + std::to_string(n);
    };
    for (const Pattern p : {Pattern::read1, Pattern::read2, Pattern::rmw1, Pattern::rmw2, Pattern::triad}) {
        benchmark::RegisterBenchmark(name(std::string("bw-") + pattern_name(p), "probe", 1).c_str(), bench_bandwidth<T>,
                                     p, n, 1u);
        if (log2n >= 18) {
            benchmark::RegisterBenchmark(name(std::string("bw-") + pattern_name(p), "probe", 2).c_str(),
                                         bench_bandwidth<T>, p, n, 2u)
                ->UseRealTime();
        }
    }
    std::vector<Impl> impls{Impl::blob, Impl::kernel, Impl::portable, Impl::loop};
#ifdef SYNCBLOB_BENCH_CBLAS
    impls.push_back(Impl::cblas);
#endif
    for (const Op op : {Op::asum, Op::sumsq, Op::dot, Op::update, Op::scale}) {
        for (const Impl impl : impls) {
            benchmark::RegisterBenchmark(name(op_name(op), impl_name(impl), 1).c_str(), bench_op<T>, op, impl, n, 1u,
                                         false);
        }
        if (log2n >= 18) {  // two threads forced at every size: where does threading start to pay?
            benchmark::RegisterBenchmark(name(op_name(op), "syncblob-forced", 2).c_str(), bench_op<T>, op, Impl::blob,
                                         n, 2u, true)
                ->UseRealTime();
            // what users get by default: two threads from parallel_threshold() on
            benchmark::RegisterBenchmark(name(op_name(op), "syncblob-auto", 2).c_str(), bench_op<T>, op, Impl::blob, n,
                                         2u, false)
                ->UseRealTime();
        }
    }
}

}  // namespace

int main(int argc, char** argv) {
    // --max-log2=K limits the sizes (the smoke run uses it); everything else goes to Google Benchmark.
    std::vector<char*> args;
    for (int i = 0; i < argc; ++i) {
        if (std::strncmp(argv[i], "--max-log2=", 11) == 0) {
            max_log_in_run = std::atoi(argv[i] + 11);
        } else {
            args.push_back(argv[i]);
        }
    }
    int count = static_cast<int>(args.size());
#ifdef SYNCBLOB_BENCH_CBLAS
    openblas_set_num_threads(1);
    benchmark::AddCustomContext("openblas", "yes (1 thread)");
#else
    benchmark::AddCustomContext("openblas", "not found");
#endif
    benchmark::AddCustomContext("syncblob_build", SYNCBLOB_BENCH_BUILD);
    benchmark::AddCustomContext("syncblob_kernel_path", std::string(sm::kernel_path_name(sm::active_kernel_path())));
    benchmark::AddCustomContext("syncblob_parallel_threshold", std::to_string(sm::parallel_threshold()));
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
