// SPDX-License-Identifier: BSD-2-Clause
// The GPU benchmark: what syncblob costs over writing the same CUDA by hand. Every figure is syncblob's
// value and a baseline's, measured in this process in alternating pairs (scripts/gpu-check runs it
// and keeps its JSON; docs/gpu.md's table is generated from that):
//   1  pinned copies of 1 GiB through a blob (device_data / host_data, and the asynchronous push and
//      pull) against cudaMemcpyAsync of the same pinned bytes; goal 0.95
//   2  device update, scale_data, dot, asum_data, sumsq_data on float, half and bfloat16 at 2^20 to
//      2^28 elements in bytes per second against a device-to-device cudaMemcpyAsync (the memory's
//      limit, measured at the same size), goal 0.9 from 2^24; half and bfloat16 against float, goal
//      0.8; float against the same cuBLAS call made by hand
//   3  small calls: microseconds per call of asum_data, update, dot and scale_data on 1 Ki floats
//      against the cuBLAS call by hand
//   4  a 4 GiB sharded checkpoint (float, and BF16 converted into float) streamed into a device arena
//      against the lower of a parallel pread of the same bytes and a pinned cudaMemcpyAsync of them;
//      goal 0.8
//   5  Blob<float, cuda::AsyncAllocator> create, first device access and destroy against
//      cudaMallocAsync + cudaFreeAsync (and + cudaMemsetAsync, the same work); the pool's cache hits
//      per request
//   6  nccl::allreduce_diff of a 256 MiB arena on one rank: the host's time blocked per call, and the
//      time to completion, against a plain ncclAllReduce of the same bytes
//   7  a steady training step on cuda::AsyncAllocator blobs (forward on one stream, a backward kernel
//      per blob on another, the diffs' mean through a bucketed NCCL all-reduce agreed once, update,
//      the loss read on the host) against the same step written with CUDA, cuBLAS and NCCL by hand;
//      and the sync audit's counts per step on this GPU, every wait in error mode asked for
//
//   bench_gpu [--out FILE] [--items 1,2,...] [--quick] [--seconds S] [--dir DIR]
// --quick measures small sizes only (a check that every item runs, not figures); --seconds scales
// every item's time budget (default 120 in all); --dir is where item 4 writes its checkpoints
// (default $SYNCBLOB_BENCH_DIR, else the temp folder; removed at the end).
// Exit status: 0 when every item ran, 1 when one failed (its error is in the JSON), 2 for a bad
// argument, 3 when no CUDA device is usable (the JSON says why).
#if !defined(__CUDACC__)
#error "bench_gpu.cu is a CUDA translation unit: build it with nvcc (SYNCBLOB_ENABLE_CUDA=ON)"
#endif

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <syncblob/checkpoint.hpp>
#include <syncblob/checkpoint/cuda.cuh>
#include <syncblob/comm/nccl.hpp>
#include <syncblob/core/sync_audit.hpp>
#include <syncblob/cuda/allocator.hpp>
#include <syncblob/cuda/async_pool.hpp>
#include <syncblob/cuda/kernels.cuh>
#include <syncblob/cuda/math.hpp>
#include <syncblob/math.hpp>

#include "gpu_figures.hpp"

namespace sb = syncblob;
namespace fs = std::filesystem;
using namespace syncblob_bench;

namespace {

struct Options {
    std::string out;
    std::vector<int> items{1, 2, 3, 4, 5, 6, 7};
    bool quick = false;
    double seconds = 120;
    fs::path dir;
};

constexpr double giga = 1e9;

void sync(cudaStream_t s) {
    SYNCBLOB_CUDA_CHECK(cudaStreamSynchronize(s), "bench_gpu");
}

/// Calls of `f` per timed sample, so that a sample lasts about 2 ms (1 to `most`).
template <class F>
int calls_per_sample(const F& f, int most = 1000) {
    f();  // warm
    const double once = timed(f);
    return static_cast<int>(std::clamp(2e-3 / std::max(once, 1e-7), 1.0, static_cast<double>(most)));
}

/// Seconds per call of `f`, over `k` calls then a wait for `stream`.
template <class F>
double per_call(const F& f, int k, cudaStream_t stream) {
    return timed([&] {
               for (int i = 0; i < k; ++i) {
                   f();
               }
               sync(stream);
           }) /
           k;
}

/// A cuBLAS handle of the benchmark's own, on `stream`, in cuBLAS's default (host) pointer mode: the
/// calls a user writes by hand.
class RawCublas {
public:
    explicit RawCublas(cudaStream_t stream) {
        SYNCBLOB_CUDA_CHECK(cublasCreate(&h_), "bench_gpu: cublasCreate");
        SYNCBLOB_CUDA_CHECK(cublasSetStream(h_, stream), "bench_gpu: cublasSetStream");
    }
    RawCublas(const RawCublas&) = delete;
    RawCublas& operator=(const RawCublas&) = delete;
    ~RawCublas() { (void)cublasDestroy(h_); }
    [[nodiscard]] cublasHandle_t get() const noexcept { return h_; }

private:
    cublasHandle_t h_ = nullptr;
};

volatile double sink = 0;  // keeps reductions' results alive

// ---- 1: copies through a blob against cudaMemcpyAsync ------------------------------------------------

void item_copies(Report& report, const Options& o) {
    const Budget budget(o.seconds * 0.08);
    const std::int64_t n = std::int64_t{1} << (o.quick ? 24 : 28);  // floats: 64 MiB or 1 GiB
    const auto bytes = static_cast<std::size_t>(n) * sizeof(float);
    const std::string size = o.quick ? "64 MiB" : "1 GiB";
    sb::Blob<float, sb::cuda::Allocator> blob({n});
    float* host = blob.mutable_host_data().data();  // pinned, zero-filled
    std::fill_n(host, n, 1.0f);
    float* device = blob.mutable_device_data();  // H->D; the device side is fresh
    (void)blob.host_data();                      // D->H; both sides fresh
    const cudaStream_t legacy = sb::cuda::Device::default_stream();
    const sb::cuda::Stream stream;
    const auto raw = [&](void* dst, const void* src, cudaMemcpyKind kind, cudaStream_t s) {
        return timed([&] {
            SYNCBLOB_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, s), "bench_gpu: cudaMemcpyAsync");
            sync(s);
        });
    };
    struct Case {
        std::string name;
        std::function<void()> prepare;  // makes the side to copy from the only fresh one
        std::function<void()> copy;     // syncblob's copy, finished when it returns
        std::function<double()> base;
    };
    const std::vector<Case> cases{
        {"H->D " + size + " through device_data()", [&] { (void)blob.mutable_host_data(); },
         [&] { (void)blob.device_data(); }, [&] { return raw(device, host, cudaMemcpyHostToDevice, legacy); }},
        {"D->H " + size + " through host_data()", [&] { (void)blob.mutable_device_data(); },
         [&] { (void)blob.host_data(); }, [&] { return raw(host, device, cudaMemcpyDeviceToHost, legacy); }},
        {"H->D " + size + " through push_to_device_async", [&] { (void)blob.mutable_host_data(); },
         [&] {
             blob.data_buffer()->push_to_device_async(stream);
             sync(stream);
         },
         [&] { return raw(device, host, cudaMemcpyHostToDevice, stream); }},
        {"D->H " + size + " through pull_to_host_async", [&] { (void)blob.mutable_device_data(); },
         [&] {
             blob.data_buffer()->pull_to_host_async(stream);
             sync(stream);
         },
         [&] { return raw(host, device, cudaMemcpyDeviceToHost, stream); }},
    };
    for (const auto& c : cases) {
        const auto ours = [&] {
            c.prepare();
            return timed(c.copy);
        };
        (void)ours();
        (void)c.base();
        const Pairs p = budget.pairs(7, ours, c.base);
        const auto b = static_cast<double>(bytes);
        report.add(gb_per_s("1", c.name, p, b, "cudaMemcpyAsync, same pinned bytes", b, 0.95));
    }
}

// ---- 2: device math against the memory's limit --------------------------------------------------------

struct MathOp {
    const char* name;
    double bytes_per_element;  // in units of sizeof(T): what the operation reads and writes
};

constexpr MathOp math_ops[] = {{"update", 3}, {"scale_data", 2}, {"dot", 2}, {"asum_data", 1}, {"sumsq_data", 1}};

template <class T>
void run_op(const std::string& op, sb::Blob<T, sb::cuda::Allocator>& a, const sb::Blob<T, sb::cuda::Allocator>& b) {
    if (op == "update") {
        sb::update(a);  // data -= diff (a diff of zeros: the values stay)
    } else if (op == "scale_data") {
        sb::scale_data(a, sb::accumulator_t<T>(-1));
    } else if (op == "dot") {
        sink = sink + static_cast<double>(sb::dot(a, b));
    } else if (op == "asum_data") {
        sink = sink + static_cast<double>(sb::asum_data(a));
    } else {
        sink = sink + static_cast<double>(sb::sumsq_data(a));
    }
}

// The same operation by hand: the float cuBLAS call syncblob makes.
void run_raw_op(const std::string& op, cublasHandle_t h, std::int64_t n, float* a, const float* diff, const float* b) {
    float r = 0;
    const float minus_one = -1.0f;
    if (op == "update") {
        SYNCBLOB_CUDA_CHECK(cublasSaxpy_64(h, n, &minus_one, diff, 1, a, 1), "bench_gpu");
    } else if (op == "scale_data") {
        SYNCBLOB_CUDA_CHECK(cublasSscal_64(h, n, &minus_one, a, 1), "bench_gpu");
    } else if (op == "dot") {
        SYNCBLOB_CUDA_CHECK(cublasSdot_64(h, n, a, 1, b, 1, &r), "bench_gpu");
    } else if (op == "asum_data") {
        SYNCBLOB_CUDA_CHECK(cublasSasum_64(h, n, a, 1, &r), "bench_gpu");
    } else {
        SYNCBLOB_CUDA_CHECK(cublasSdot_64(h, n, a, 1, a, 1, &r), "bench_gpu");
    }
    sink = sink + r;
}

/// Bytes per second of each operation on T at 2^log2n elements, keyed "op 2^k" (for half and
/// bfloat16 against float's).
using Speeds = std::map<std::string, double>;

template <class T>
void math_at(Report& report, const Budget& budget, int log2n, Speeds& speeds, const Speeds& float_speeds) {
    const std::int64_t n = std::int64_t{1} << log2n;
    const double bytes = static_cast<double>(n) * static_cast<double>(sizeof(T));
    const std::string type(sb::element_name<T>());
    const std::string at = "2^" + std::to_string(log2n);
    const cudaStream_t legacy = sb::cuda::Device::default_stream();
    sb::Blob<T, sb::cuda::Allocator> a({n});
    sb::Blob<T, sb::cuda::Allocator> b({n});
    sb::cuda::fill(a.mutable_device_data(), static_cast<T>(0.5f), n, legacy);  // no host side is allocated
    sb::cuda::fill(a.mutable_device_diff(), static_cast<T>(0.0f), n, legacy);
    sb::cuda::fill(b.mutable_device_data(), static_cast<T>(0.25f), n, legacy);
    T* copy_to = b.mutable_device_diff();
    const T* copy_from = a.device_data();
    sync(legacy);
    const auto copy = [&] {
        SYNCBLOB_CUDA_CHECK(
            cudaMemcpyAsync(copy_to, copy_from, static_cast<std::size_t>(bytes), cudaMemcpyDeviceToDevice, legacy),
            "bench_gpu: cudaMemcpyAsync");
    };
    const int copy_k = calls_per_sample([&] {
        copy();
        sync(legacy);
    });
    std::optional<RawCublas> raw;
    if constexpr (std::is_same_v<T, float>) {
        raw.emplace(legacy);
    }
    for (const auto& [name, per_element] : math_ops) {
        const std::string op = name;
        const auto ours_once = [&] { run_op<T>(op, a, b); };
        const int k = calls_per_sample([&] {
            ours_once();
            sync(legacy);
        });
        const auto ours = [&] { return per_call(ours_once, k, legacy); };
        const Pairs p = budget.pairs(5, ours, [&] { return per_call(copy, copy_k, legacy); });
        const double moved = per_element * bytes;
        const double bps = moved / p.ours_median();
        speeds[op + " " + at] = bps;
        const auto params = [&](const char* against) {
            return nlohmann::json{{"op", op}, {"dtype", type}, {"log2n", log2n}, {"against", against}};
        };
        const std::optional<double> goal = log2n >= 24 ? std::optional<double>(0.9) : std::nullopt;
        Figure f =
            gb_per_s("2", op + " " + type + " " + at, p, moved, "device-to-device cudaMemcpyAsync", 2 * bytes, goal);
        f.params = params("copy");
        report.add(std::move(f));
        if constexpr (std::is_same_v<T, float>) {
            float* ad = a.mutable_device_data();
            const float* diff = a.device_diff();
            const float* bd = b.device_data();
            const auto raw_once = [&] { run_raw_op(op, raw->get(), n, ad, diff, bd); };
            const Pairs q = budget.pairs(5, ours, [&] { return per_call(raw_once, k, legacy); });
            Figure g = gb_per_s("2", op + " float " + at + " against cuBLAS by hand", q, moved,
                                "the same cuBLAS call by hand", moved);
            g.params = params("cublas");
            report.add(std::move(g));
        } else if (const auto found = float_speeds.find(op + " " + at); found != float_speeds.end()) {
            // bytes per second against float's, each the median of its own pairs in this run
            Figure g = reference("2", op + " " + type + " " + at + " against float", "GB/s", bps / giga, 0);
            g.baseline_name = op + " float " + at + " (same run)";
            g.baseline = found->second / giga;
            g.ratio = bps / found->second;
            g.goal = log2n >= 24 ? std::optional<double>(0.8) : std::nullopt;
            g.params = params("float");
            report.add(std::move(g));
        }
    }
}

void item_math(Report& report, const Options& o) {
    const Budget budget(o.seconds * 0.2);
    const std::vector<int> sizes = o.quick ? std::vector<int>{16, 20} : std::vector<int>{20, 22, 24, 26, 28};
    Speeds float_speeds;
    Speeds other;
    for (const int log2n : sizes) {
        math_at<float>(report, budget, log2n, float_speeds, float_speeds);
    }
    for (const int log2n : sizes) {
        math_at<sb::half>(report, budget, log2n, other, float_speeds);
        math_at<sb::bfloat16>(report, budget, log2n, other, float_speeds);
    }
}

// ---- 3: small calls against cuBLAS by hand ------------------------------------------------------------

void item_small_calls(Report& report, const Options& o) {
    const Budget budget(o.seconds * 0.05);
    constexpr std::int64_t n = 1024;
    const cudaStream_t legacy = sb::cuda::Device::default_stream();
    sb::Blob<float, sb::cuda::Allocator> a({n});
    sb::Blob<float, sb::cuda::Allocator> b({n});
    sb::cuda::fill(a.mutable_device_data(), 0.5f, n, legacy);
    sb::cuda::fill(a.mutable_device_diff(), 0.0f, n, legacy);
    sb::cuda::fill(b.mutable_device_data(), 0.25f, n, legacy);
    const RawCublas raw(legacy);
    float* ad = a.mutable_device_data();
    const float* diff = a.device_diff();
    const float* bd = b.device_data();
    constexpr int k = 2000;
    for (const std::string op : {"asum_data", "update", "dot", "scale_data"}) {
        const auto ours = [&] { return per_call([&] { run_op<float>(op, a, b); }, k, legacy); };
        const auto base = [&] { return per_call([&] { run_raw_op(op, raw.get(), n, ad, diff, bd); }, k, legacy); };
        (void)ours();
        (void)base();
        const Pairs p = budget.pairs(7, ours, base);
        report.add(microseconds("3", op + " of 1 Ki floats", "call", p, "the cuBLAS call by hand"));
    }
}

// ---- 4: a checkpoint streamed into a device arena ------------------------------------------------------

fs::path bench_dir(const Options& o) {
    fs::path base = o.dir;
    if (base.empty()) {
        const char* env = std::getenv("SYNCBLOB_BENCH_DIR");
        base = env != nullptr ? fs::path(env) : fs::temp_directory_path();
    }
    return base / ("syncblob-bench-gpu-" + std::to_string(::getpid()));
}

/// Loads of `ckpt` into a float arena on the device against the limit of the same bytes.
void checkpoint_load(Report& report, const Budget& budget, const sb::checkpoint::Checkpoint& ckpt,
                     const std::string& what, bool convert) {
    using Arena = sb::checkpoint::CheckpointArena<float, sb::cuda::Allocator>;
    Arena arena(ckpt);
    sb::checkpoint::LoadOptions options;
    options.convert = convert;
    const cudaStream_t stream = arena.arena().stream();
    const auto load = [&] {
        return timed([&] {
            (void)arena.load(ckpt, options);
            sync(stream);  // the copies and conversions issued are done
        });
    };
    ParallelPread pread(ckpt, options.chunk_bytes);
    const std::uint64_t bytes = pread.bytes();
    const sb::HostBlock pinned = sb::cuda::PinnedAllocator::allocate(bytes);
    void* device = sb::cuda::Device::allocate(bytes);
    std::memcpy(pinned.data, pread.buffer(), bytes);  // touched
    const sb::cuda::Stream copies;
    const auto copy = [&] {
        return timed([&] {
            SYNCBLOB_CUDA_CHECK(cudaMemcpyAsync(device, pinned.data, bytes, cudaMemcpyHostToDevice, copies),
                                "bench_gpu: cudaMemcpyAsync");
            sync(copies);
        });
    };
    const unsigned threads = sb::parallel::max_threads();
    const auto read = [&] {
        bool ok = true;
        const double t = timed([&] { ok = pread(threads); });
        if (!ok) {
            throw sb::IOError("bench_gpu: a pread of the checkpoint came short");
        }
        return t;
    };
    (void)load();
    std::vector<double> loads;
    std::vector<double> reads;
    std::vector<double> copy_times;
    std::vector<double> ratios;
    for (int i = 0; i < 7 && (i < 3 || budget.left() > 0); ++i) {
        double t[3] = {};
        for (int k = 0; k < 3; ++k) {  // rotating order
            const int which = (k + i) % 3;
            t[which] = which == 0 ? load() : which == 1 ? read() : copy();
        }
        loads.push_back(t[0]);
        reads.push_back(t[1]);
        copy_times.push_back(t[2]);
        ratios.push_back(std::max(t[1], t[2]) / t[0]);
    }
    sb::cuda::Device::deallocate(device, bytes);
    sb::cuda::PinnedAllocator::deallocate(pinned);
    const auto gbps = [&](std::vector<double> v) { return static_cast<double>(bytes) / median(v) / giga; };
    const double read_gbps = gbps(reads);
    const double copy_gbps = gbps(copy_times);
    const int rounds = static_cast<int>(loads.size());
    report.add(reference("4", what + ": parallel pread alone", "GB/s", read_gbps, rounds));
    report.add(reference("4", what + ": pinned cudaMemcpyAsync alone", "GB/s", copy_gbps, rounds));
    // against the lower of the two limits, round by round: the slower of the two times over the load's
    Figure f = reference("4", what + " into a device arena", "GB/s", gbps(loads), rounds);
    f.baseline_name = read_gbps < copy_gbps ? "parallel pread (the lower)" : "pinned cudaMemcpyAsync (the lower)";
    f.baseline = std::min(read_gbps, copy_gbps);
    f.ratio = median(ratios);
    f.goal = 0.8;
    report.add(std::move(f));
}

void item_checkpoint(Report& report, const Options& o) {
    const Budget budget(o.seconds * 0.4);
    const fs::path dir = bench_dir(o);
    const std::int64_t width = o.quick ? 256 : 1024;  // 84 layers of 1024: 1.07 G elements, 3.97 GiB of float
    const int layers = o.quick ? 8 : 84;
    const std::uint64_t shard = std::uint64_t{512} << 20;
    std::error_code ec;
    fs::create_directories(dir);
    const auto space = fs::space(dir, ec);
    const std::uint64_t needed = o.quick ? (std::uint64_t{1} << 30) : (std::uint64_t{7} << 30);
    if (ec || space.available < needed) {
        throw sb::IOError("bench_gpu: the checkpoints need " + std::to_string(needed >> 30) + " GiB free in " +
                          dir.string() + ", it has " + std::to_string(space.available >> 30) + " GiB");
    }
    try {
        const auto layout = transformer_layout(width, layers);
        {
            const auto ckpt = write_checkpoint<float>(dir / "f32", layout, shard);
            const double gib = static_cast<double>(ckpt.total_size()) / double(1 << 30);
            char label[64];
            std::snprintf(label, sizeof label, "%.2f GiB float checkpoint", gib);
            checkpoint_load(report, budget, ckpt, label, false);
        }
        fs::remove_all(dir / "f32", ec);
        {
            const auto ckpt = write_checkpoint<sb::bfloat16>(dir / "bf16", layout, shard);
            const double gib = static_cast<double>(ckpt.total_size()) / double(1 << 30);
            char label[64];
            std::snprintf(label, sizeof label, "%.2f GiB BF16 checkpoint, converted", gib);
            checkpoint_load(report, budget, ckpt, label, true);
        }
    } catch (...) {
        fs::remove_all(dir, ec);
        throw;
    }
    fs::remove_all(dir, ec);
}

// ---- 5: the device pool against cudaMallocAsync -------------------------------------------------------

void item_pool(Report& report, const Options& o) {
    const Budget budget(o.seconds * 0.06);
    using Pool = sb::cuda::AsyncPool;
    const cudaStream_t legacy = sb::cuda::Device::default_stream();
    // The default pool keeps what is freed, as AsyncPool does by default: the baseline a user would tune.
    cudaMemPool_t pool = nullptr;
    SYNCBLOB_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, sb::cuda::current_device()), "bench_gpu");
    std::uint64_t keep = std::numeric_limits<std::uint64_t>::max();
    SYNCBLOB_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep), "bench_gpu");
    for (const std::size_t bytes : {std::size_t{4} << 10, std::size_t{1} << 20, std::size_t{64} << 20}) {
        const int k = bytes > (std::size_t{1} << 20) ? 100 : 500;
        const std::string size = bytes >= (std::size_t{1} << 20) ? std::to_string(bytes >> 20) + " MiB"
                                                                 : std::to_string(bytes >> 10) + " KiB";
        const auto ours = [&] {
            return per_call(
                [&] {
                    sb::Blob<float, sb::cuda::AsyncAllocator> blob({static_cast<std::int64_t>(bytes / sizeof(float))});
                    (void)blob.mutable_device_data();  // allocated and zero-filled on the device
                },
                k, legacy);
        };
        const auto raw = [&](bool zero) {
            return per_call(
                [&] {
                    void* p = nullptr;
                    SYNCBLOB_CUDA_CHECK(cudaMallocAsync(&p, bytes, legacy), "bench_gpu: cudaMallocAsync");
                    if (zero) {
                        SYNCBLOB_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, legacy), "bench_gpu: cudaMemsetAsync");
                    }
                    SYNCBLOB_CUDA_CHECK(cudaFreeAsync(p, legacy), "bench_gpu: cudaFreeAsync");
                },
                k, legacy);
        };
        (void)ours();
        (void)raw(false);
        const auto before = Pool::stats();
        const Pairs p = budget.pairs(7, ours, [&] { return raw(false); });
        const auto after = Pool::stats();
        const Pairs q = budget.pairs(5, ours, [&] { return raw(true); });
        const std::string name = "blob of " + size + ": create, first device access, destroy";
        report.add(microseconds("5", name, "cycle", p, "cudaMallocAsync + cudaFreeAsync"));
        report.add(microseconds("5", name + " (the same work by hand)", "cycle", q,
                                "cudaMallocAsync + cudaMemsetAsync + cudaFreeAsync"));
        const auto requests = static_cast<double>(after.requests - before.requests);
        const double hits = static_cast<double>(after.cache_hits - before.cache_hits) / std::max(requests, 1.0);
        Figure h = reference("5", "cache hits per request, blobs of " + size, "hits/request", hits,
                             static_cast<int>(p.ours.size()));
        h.baseline_name = "every request a hit";
        h.baseline = 1.0;
        h.ratio = hits;
        h.goal = 0.99;
        report.add(std::move(h));
    }
}

// ---- 6: NCCL on one rank -----------------------------------------------------------------------------

// What nccl::allreduce_diff does before NCCL's own call, and the host waits for.
constexpr const char* agreement =
    "the agreement before the all-reduce: a device scratch block, two copies, an ncclAllGather and a host wait "
    "(nccl::allreduce_diff checks that every rank's arena and call agree)";

void item_nccl(Report& report, const Options& o) {
    const Budget budget(o.seconds * 0.08);
    int device = sb::cuda::current_device();
    ncclComm_t comm = nullptr;
    sb::nccl::detail::check(ncclCommInitAll(&comm, 1, &device), "bench_gpu", "ncclCommInitAll");
    try {
        sb::ParameterArena<float, sb::cuda::Allocator> arena;
        const int blobs = o.quick ? 4 : 64;
        for (int i = 0; i < blobs; ++i) {
            arena.add({std::int64_t{1} << 20});  // 4 MiB each
        }
        arena.seal();
        auto diff = arena.flat_diff();
        float* p = diff.mutable_device_data();  // every slice fresh on the device
        const std::size_t count = diff.elements();
        const cudaStream_t stream = arena.stream();
        sync(stream);
        const std::string size = std::to_string(count * sizeof(float) >> 20) + " MiB";
        const auto ours = [&](bool complete) {
            const auto start = std::chrono::steady_clock::now();
            (void)sb::nccl::allreduce_diff(arena, comm, sb::Reduce::sum);
            if (complete) {
                sync(stream);
            }
            const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            sync(stream);
            return t;
        };
        const auto base = [&](bool complete) {
            const auto start = std::chrono::steady_clock::now();
            sb::nccl::detail::check(ncclAllReduce(p, p, count, ncclFloat32, ncclSum, comm, stream), "bench_gpu",
                                    "ncclAllReduce", comm);
            if (complete) {
                sync(stream);
            }
            const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            sync(stream);
            return t;
        };
        (void)ours(true);
        (void)base(true);
        for (const bool complete : {false, true}) {
            const Pairs q = budget.pairs(
                20, [&] { return ours(complete); }, [&] { return base(complete); });
            const std::string name = "allreduce_diff of a " + size + " arena on one rank" +
                                     (complete ? ", to completion" : ", host blocked");
            report.add(microseconds("6", name, "call", q,
                                    complete ? "ncclAllReduce and a stream wait" : "ncclAllReduce (the call alone)",
                                    std::nullopt, complete ? "" : agreement));
        }
    } catch (...) {
        (void)ncclCommDestroy(comm);
        throw;
    }
    (void)ncclCommDestroy(comm);
}

// ---- 7: the training step, and the sync audit's counts on CUDA -----------------------------------------

__global__ void backward_kernel(const float* w, float* g, std::int64_t n, float shift) {
    const std::int64_t stride = std::int64_t{gridDim.x} * blockDim.x;
    for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) {
        g[i] = 0.001f * w[i] + shift;
    }
}

/// The backward pass's stand-in: g = 0.001 w + shift, on `stream`.
void backward(const float* w, float* g, std::int64_t n, float shift, cudaStream_t stream) {
    const auto blocks = static_cast<unsigned>(std::clamp<std::int64_t>((n + 255) / 256, 1, 1024));
    backward_kernel<<<blocks, 256, 0, stream>>>(w, g, n, shift);
    SYNCBLOB_CUDA_CHECK(cudaGetLastError(), "bench_gpu: the backward kernel");
}

/// The layers of the step's model: per layer a weight of width x width, a bias and a 3 x width block.
std::vector<std::vector<std::int64_t>> step_shapes(int layers, std::int64_t width) {
    std::vector<std::vector<std::int64_t>> shapes;
    for (int l = 0; l < layers; ++l) {
        shapes.push_back({width, width});
        shapes.push_back({width});
        shapes.push_back({3, width});
    }
    return shapes;
}

/// The step through syncblob: forward (scale_data of every blob, on the arena's stream), backward (a
/// kernel per blob writing its diff on a second stream, and one into a temporary blob from the pool),
/// the diffs' mean through a bucketed NCCL all-reduce agreed once and queued without a host wait,
/// update, and the loss (asum of the first blob) read on the host: the step's one wait.
class SyncblobStep {
public:
    using A = sb::cuda::AsyncAllocator;
    SyncblobStep(ncclComm_t comm, const std::vector<std::vector<std::int64_t>>& shapes) {
        arena_.set_stream(forward_);
        for (const auto& s : shapes) {
            arena_.add(sb::Shape(s));
        }
        arena_.seal();
        reduce_.emplace(arena_, comm, sb::Reduce::mean, std::size_t{1} << 20, std::size_t{4} << 20);
    }
    float run(int index) {
        for (auto& blob : arena_.blobs()) {
            sb::scale_data(blob, 0.999f);
        }
        const auto forward_done = sb::cuda::Event::record(forward_);
        forward_done.make_wait(backward_);
        sb::Blob<float, A> scratch({256});
        scratch.set_stream(backward_);
        const float shift = 1e-4f * static_cast<float>(index % 7);
        for (auto& blob : arena_.blobs()) {
            backward(blob.device_data(), blob.mutable_device_diff(), blob.count(), shift, backward_);
        }
        backward(arena_[0].device_data(), scratch.mutable_device_data(), 256, shift, backward_);
        const auto backward_done = sb::cuda::Event::record(backward_);
        backward_done.make_wait(forward_);
        if (started_) {
            reduce_->restart();
        }
        started_ = true;
        for (std::size_t i = arena_.size(); i-- > 0;) {
            reduce_->ready(i);  // in the order a backward pass finishes its layers
        }
        reduce_->start_all();
        for (auto& blob : arena_.blobs()) {
            sb::update(blob);
        }
        return sb::asum_data(arena_[0]);
    }
    [[nodiscard]] std::size_t bytes() const { return arena_.bytes(); }
    [[nodiscard]] std::size_t buckets() const { return reduce_->buckets().size(); }

private:
    sb::cuda::Stream forward_;
    sb::cuda::Stream backward_;
    sb::ParameterArena<float, A> arena_;
    std::optional<sb::nccl::BucketedAllreduce<float, A>> reduce_;
    bool started_ = false;
};

/// The same step by hand: one cudaMallocAsync block for the data and one for the diffs, cuBLAS in
/// host pointer mode, two events made once, the temporary from cudaMallocAsync, one ncclAllReduce
/// (ncclAvg) of every diff, cublasSaxpy per blob, and the loss through cublasSasum.
class HandStep {
public:
    HandStep(ncclComm_t comm, const std::vector<std::vector<std::int64_t>>& shapes) : comm_(comm) {
        SYNCBLOB_CUDA_CHECK(cudaStreamCreateWithFlags(&forward_, cudaStreamNonBlocking), "bench_gpu");
        SYNCBLOB_CUDA_CHECK(cudaStreamCreateWithFlags(&backward_, cudaStreamNonBlocking), "bench_gpu");
        SYNCBLOB_CUDA_CHECK(cudaEventCreateWithFlags(&forward_done_, cudaEventDisableTiming), "bench_gpu");
        SYNCBLOB_CUDA_CHECK(cudaEventCreateWithFlags(&backward_done_, cudaEventDisableTiming), "bench_gpu");
        for (const auto& s : shapes) {
            std::int64_t n = 1;
            for (const auto d : s) {
                n *= d;
            }
            offsets_.push_back(total_);
            counts_.push_back(n);
            total_ += n;
        }
        const auto bytes = static_cast<std::size_t>(total_) * sizeof(float);
        SYNCBLOB_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&data_), bytes, forward_), "bench_gpu");
        SYNCBLOB_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&diff_), bytes, forward_), "bench_gpu");
        SYNCBLOB_CUDA_CHECK(cudaMemsetAsync(data_, 0, bytes, forward_), "bench_gpu");
        sync(forward_);
        cublas_.emplace(forward_);
    }
    HandStep(const HandStep&) = delete;
    HandStep& operator=(const HandStep&) = delete;
    ~HandStep() {
        cublas_.reset();
        (void)cudaFreeAsync(data_, forward_);
        (void)cudaFreeAsync(diff_, forward_);
        (void)cudaStreamSynchronize(forward_);
        (void)cudaEventDestroy(forward_done_);
        (void)cudaEventDestroy(backward_done_);
        (void)cudaStreamDestroy(forward_);
        (void)cudaStreamDestroy(backward_);
    }
    float run(int index) {
        const float decay = 0.999f;
        const float minus_one = -1.0f;
        for (std::size_t b = 0; b < counts_.size(); ++b) {
            SYNCBLOB_CUDA_CHECK(
                cublasSscal(cublas_->get(), static_cast<int>(counts_[b]), &decay, data_ + offsets_[b], 1),
                "bench_gpu: cublasSscal");
        }
        SYNCBLOB_CUDA_CHECK(cudaEventRecord(forward_done_, forward_), "bench_gpu");
        SYNCBLOB_CUDA_CHECK(cudaStreamWaitEvent(backward_, forward_done_, 0), "bench_gpu");
        float* scratch = nullptr;
        SYNCBLOB_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&scratch), 256 * sizeof(float), backward_),
                            "bench_gpu");
        const float shift = 1e-4f * static_cast<float>(index % 7);
        for (std::size_t b = 0; b < counts_.size(); ++b) {
            backward(data_ + offsets_[b], diff_ + offsets_[b], counts_[b], shift, backward_);
        }
        backward(data_, scratch, 256, shift, backward_);
        SYNCBLOB_CUDA_CHECK(cudaFreeAsync(scratch, backward_), "bench_gpu");
        SYNCBLOB_CUDA_CHECK(cudaEventRecord(backward_done_, backward_), "bench_gpu");
        SYNCBLOB_CUDA_CHECK(cudaStreamWaitEvent(forward_, backward_done_, 0), "bench_gpu");
        sb::nccl::detail::check(
            ncclAllReduce(diff_, diff_, static_cast<std::size_t>(total_), ncclFloat32, ncclAvg, comm_, forward_),
            "bench_gpu", "ncclAllReduce", comm_);
        for (std::size_t b = 0; b < counts_.size(); ++b) {
            SYNCBLOB_CUDA_CHECK(cublasSaxpy(cublas_->get(), static_cast<int>(counts_[b]), &minus_one,
                                            diff_ + offsets_[b], 1, data_ + offsets_[b], 1),
                                "bench_gpu: cublasSaxpy");
        }
        float loss = 0;
        SYNCBLOB_CUDA_CHECK(cublasSasum(cublas_->get(), static_cast<int>(counts_[0]), data_, 1, &loss),
                            "bench_gpu: cublasSasum");
        return loss;
    }

private:
    ncclComm_t comm_;
    cudaStream_t forward_ = nullptr;
    cudaStream_t backward_ = nullptr;
    cudaEvent_t forward_done_ = nullptr;
    cudaEvent_t backward_done_ = nullptr;
    std::vector<std::int64_t> offsets_;
    std::vector<std::int64_t> counts_;
    std::int64_t total_ = 0;
    float* data_ = nullptr;
    float* diff_ = nullptr;
    std::optional<RawCublas> cublas_;
};

void item_step(Report& report, const Options& o) {
    namespace audit = sb::audit;
    const Budget budget(o.seconds * 0.06);
    int device = sb::cuda::current_device();
    ncclComm_t comm = nullptr;
    sb::nccl::detail::check(ncclCommInitAll(&comm, 1, &device), "bench_gpu", "ncclCommInitAll");
    try {
        const int layers = 10;
        const std::int64_t width = o.quick ? 64 : 1024;
        const auto shapes = step_shapes(layers, width);
        SyncblobStep ours(comm, shapes);
        HandStep hand(comm, shapes);
        for (int i = 0; i < 3; ++i) {  // warm-up: the pool, the event cache, cuBLAS, the first zero-fill
            sink = sink + ours.run(i) + hand.run(i);
        }
        // The audit's counts over steady steps, then the same steps in error mode: any wait the step
        // did not ask for throws SyncError, and the item fails with its name.
        const int steps = 20;
        std::vector<audit::Count> counts;
        {
            const audit::ModeScope counting(audit::Mode::count);
            audit::reset();
            for (int i = 0; i < steps; ++i) {
                sink = sink + ours.run(100 + i);
            }
            counts = audit::counts();
            audit::reset();
        }
        for (const auto& c : counts) {
            report.add(reference("7",
                                 "audit, steady step: " + c.operation + ", " + std::string(audit::wait_name(c.wait)) +
                                     (c.asked ? " (asked for)" : " (NOT asked for)"),
                                 "per step", static_cast<double>(c.calls) / steps, steps));
        }
        if (counts.empty()) {
            report.add(reference("7", "audit, steady step: no wait counted", "per step", 0, steps));
        }
        {
            const audit::ModeScope strict(audit::Mode::error);
            for (int i = 0; i < 5; ++i) {
                sink = sink + ours.run(200 + i);  // a SyncError ends the item, naming the operation
            }
        }
        // The step's one wait is its loss read. Any other row, asked for or not (a wait of the
        // caller's own counts as asked), is a new wait in the steady state, as tests/audit's table holds.
        const bool only_the_loss = counts.size() == 1 && counts[0].operation == "math::asum" &&
                                   counts[0].wait == audit::Wait::host_result &&
                                   counts[0].calls == static_cast<std::uint64_t>(steps);
        if (!only_the_loss) {
            std::string rows;
            for (const auto& c : counts) {
                rows +=
                    " " + c.operation + " " + std::string(audit::wait_name(c.wait)) + " x" + std::to_string(c.calls);
            }
            throw std::runtime_error("the steady step's waits over " + std::to_string(steps) +
                                     " steps are not its loss read alone, once a step:" + rows);
        }
        const auto timed_step = [](auto& step, int index) {
            const auto start = std::chrono::steady_clock::now();
            sink = sink + step.run(index);  // the loss read waits for the whole step
            return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        };
        int index = 300;
        const Pairs p = budget.pairs(
            40, [&] { return timed_step(ours, ++index); }, [&] { return timed_step(hand, ++index); });
        report.add(microseconds("7",
                                "training step, " + std::to_string(shapes.size()) + " blobs of " +
                                    std::to_string(ours.bytes() >> 10) + " KiB in all, " +
                                    std::to_string(ours.buckets()) + " NCCL buckets, one rank",
                                "step", p, "the same step by hand (cuBLAS, kernels, one ncclAllReduce)"));
    } catch (...) {
        (void)ncclCommDestroy(comm);
        throw;
    }
    (void)ncclCommDestroy(comm);
}

// ---- the program --------------------------------------------------------------------------------------

bool parse(int argc, char** argv, Options& o) {
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const bool has_value = i + 1 < argc;
        if (a == "--quick") {
            o.quick = true;
        } else if (a == "--out" && has_value) {
            o.out = argv[++i];
        } else if (a == "--dir" && has_value) {
            o.dir = argv[++i];
        } else if (a == "--seconds" && has_value) {
            o.seconds = std::atof(argv[++i]);
            if (!(o.seconds > 0)) {
                std::cerr << "bench_gpu: --seconds must be positive, not " << argv[i] << '\n';
                return false;
            }
        } else if (a == "--items" && has_value) {
            o.items.clear();
            for (const char c : std::string(argv[++i])) {
                if (c >= '1' && c <= '7') {
                    o.items.push_back(c - '0');
                } else if (c != ',') {
                    std::cerr << "bench_gpu: --items takes numbers from 1 to 7, not " << argv[i] << '\n';
                    return false;
                }
            }
        } else {
            std::cerr << "bench_gpu: unknown argument " << a
                      << "\nusage: bench_gpu [--out FILE] [--items 1,2,...] [--quick] [--seconds S] [--dir DIR]\n";
            return false;
        }
    }
    return true;
}

void write(const Options& o, const nlohmann::json& j) {
    if (o.out.empty()) {
        std::cout << j.dump(1) << '\n';
        return;
    }
    std::ofstream(o.out) << j.dump(1) << '\n';
}

nlohmann::json device_json() {
    cudaDeviceProp p{};
    const int device = sb::cuda::current_device();
    SYNCBLOB_CUDA_CHECK(cudaGetDeviceProperties(&p, device), "bench_gpu");
    int driver = 0;
    int runtime = 0;
    (void)cudaDriverGetVersion(&driver);
    (void)cudaRuntimeGetVersion(&runtime);
    return {{"name", p.name},
            {"compute_capability", std::to_string(p.major) + "." + std::to_string(p.minor)},
            {"memory_bytes", p.totalGlobalMem},
            {"driver", driver},
            {"runtime", runtime},
            {"host_threads", sb::parallel::max_threads()}};
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    if (!parse(argc, argv, o)) {
        return 2;
    }
    if (const auto reason = sb::cuda::no_device_reason()) {
        std::cerr << "bench_gpu: no CUDA device (" << *reason << ")\n";
        write(o, {{"schema", 1}, {"status", "no device"}, {"reason", *reason}});
        return 3;
    }
    Report report;
    nlohmann::json device;
    try {
        device = device_json();
    } catch (const std::exception& e) {
        std::cerr << "bench_gpu: " << e.what() << '\n';
        write(o, {{"schema", 1}, {"status", "failed"}, {"reason", e.what()}});
        return 1;
    }
    const std::vector<std::pair<int, std::function<void(Report&, const Options&)>>> items{
        {1, item_copies}, {2, item_math}, {3, item_small_calls}, {4, item_checkpoint},
        {5, item_pool},   {6, item_nccl}, {7, item_step}};
    int status = 0;
    for (const auto& [id, run] : items) {
        if (std::find(o.items.begin(), o.items.end(), id) == o.items.end()) {
            continue;
        }
        std::printf("item %d\n", id);
        const auto start = std::chrono::steady_clock::now();
        const auto seconds = [&] {
            return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        };
        try {
            run(report, o);
            report.item(std::to_string(id), "ok", "", seconds());
        } catch (const std::exception& e) {
            std::fprintf(stderr, "bench_gpu: item %d: %s\n", id, e.what());
            report.item(std::to_string(id), "failed", e.what(), seconds());
            status = 1;
        }
    }
    auto j = report.to_json(device);
    j["status"] = status == 0 ? "ok" : "failed";
    j["quick"] = o.quick;
    write(o, j);
    return status;
}
