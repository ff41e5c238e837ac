// SPDX-License-Identifier: BSD-2-Clause
// All-reduce of a ParameterArena's diff through MPI against a raw MPI_Allreduce of the same bytes,
// measured in the same run in alternating pairs: run it with `mpirun -np N bench_comm`.
//
// Each iteration all-reduces a plain buffer of S bytes (the baseline: one MPI_Allreduce) and the
// arena's diff of S bytes, each first in every other iteration: `sum` and `mean` through
// allreduce_diff, `bucketed_sum` and `bucketed_mean` through iallreduce_diff (buckets of 25 MiB) and
// wait(), and `step_mean` as a training loop makes it: one mpi::BucketedAllreduce, agreed before the
// iterations, restart()ed each one (no agreement in the step). The row `raw` is the control: a second plain buffer in
// place of the arena, so its ratio is the baseline against itself, and how far it is from 1 is the noise of that run;
// the row `ring` is syncblob's own all-reduce (a mean, in the pieces a call would choose: 4 MiB on one host, 16 MiB
// across hosts; halving and doubling on a power of two ranks, else the ring) called directly on that second buffer,
// without the arena and the checks of a call around it, and `ring_schedule` the same with the ring's schedule on any
// number of ranks (what the engine was before halving and doubling). The row `agreement` is a call on an arena of one
// empty blob, which moves no data but agrees as every call does first: its `ratio` is the raw all-reduce of S bytes
// over what the agreement alone costs. Before each call every rank meets at a barrier, and the time of a call is the
// longest over the ranks. Reported per row (medians over the iterations):
//   busbw        the arena's bus bandwidth, S / t * 2 (n - 1) / n (NCCL's definition)
//   raw_busbw    the same for the raw MPI_Allreduce
//   ratio        raw time / arena time (1 = the arena costs nothing over MPI itself)
//   pair_ratio   the median over the iterations of each pair's raw time / arena time (the two
//                measured back to back, so a slow phase of the shared machine hits both)
// and one row for a model of 100 small blobs reduced one MPI call per blob (the naive way) against
// the arena's single call (`speedup` = naive time / arena time).
//
// Built with syncblob::json, the rows `shared_load/<MiB>` load a checkpoint of that size (16
// tensors, shards of 64 MiB) into a CheckpointArena on every rank, in alternating pairs: every rank
// reading all of it (`CheckpointArena::load`, the baseline) against `mpi::load_shared`. The first
// rank of each host (MPI_COMM_TYPE_SHARED) writes a copy of the checkpoint of that host's own, in
// $SYNCBLOB_BENCH_DIR or the temporary folder, and drops it from the page cache before every load
// (posix_fadvise DONTNEED on its shards), so each host reads from the disk, as hosts read from
// shared storage, and ranks on one host share its page cache as they would. Reported: `every_ms` and
// `shared_ms` (medians), `pair_ratio` (the median of every / shared; above 1 the shared load is
// faster), and the bytes each rank read in each (`every_read_MB`, `shared_read_MB`, on rank 0).
//
// Only rank 0 prints; `--benchmark_out` is honoured on rank 0 alone.
#include <benchmark/benchmark.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <syncblob/comm/mpi.hpp>
#if SYNCBLOB_BENCH_SHARED_LOAD
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include <syncblob/checkpoint/writer.hpp>
#include <syncblob/comm/mpi_checkpoint.hpp>
#endif

namespace sb = syncblob;

namespace {

int rank() {
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}
int ranks() {
    int n = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    return n;
}

// Seconds `fn` takes, the longest over the ranks, all starting together.
template <class Fn>
double timed(Fn fn) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto start = std::chrono::steady_clock::now();
    fn();
    const double mine = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    double longest = 0;
    MPI_Allreduce(&mine, &longest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return longest;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

double bus_bandwidth(double bytes, double seconds) {
    const double n = ranks();
    return bytes / seconds * 2.0 * (n - 1.0) / n;
}

// A model of `bytes` bytes: eight uneven blobs (a few large layers and their biases).
void add_layers(sb::ParameterArena<float>& arena, std::size_t bytes) {
    const auto floats = static_cast<std::int64_t>(bytes / sizeof(float));
    const std::int64_t parts[] = {4, 1, 8, 1, 2, 1, 1};  // in 1/18ths
    std::int64_t used = 0;
    for (const std::int64_t p : parts) {
        const std::int64_t n = floats * p / 18 - 64;  // leaves room for the 256-byte alignment
        arena.add({n});
        used += n;
    }
    arena.add({floats - used - 64});
}

enum class Variant { raw, ring, ring_schedule, sum, mean, bucketed_sum, bucketed_mean, step_mean, agreement };

void allreduce(benchmark::State& state, Variant variant) {
    const auto bytes = static_cast<std::size_t>(state.range(0)) << 20;
    std::vector<float> raw(bytes / sizeof(float), 1.0f);
    sb::ParameterArena<float> arena;
    add_layers(arena, bytes);
    arena.seal();
    for (auto& blob : arena.blobs()) {
        blob.fill_diff(1.0f);
    }
    std::vector<double> raw_times;
    std::vector<double> arena_times;
    std::vector<double> pair_ratios;
    sb::ParameterArena<float> empty;  // Variant::agreement: a call that moves no data, only agrees
    empty.add({0});
    empty.seal();
    const bool plain = variant == Variant::raw || variant == Variant::ring || variant == Variant::ring_schedule;
    std::vector<float> control(plain ? raw.size() : 0, 1.0f);
    const double measured = plain ? static_cast<double>(bytes) : static_cast<double>(arena.bytes());
    MPI_Comm ring_comm = MPI_COMM_NULL;
    MPI_Comm_dup(MPI_COMM_WORLD, &ring_comm);
    // The ring's pieces as a mean left to choose them takes them: by whether the ranks span hosts.
    MPI_Comm local = MPI_COMM_NULL;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
    int local_ranks = 0;
    MPI_Comm_size(local, &local_ranks);
    MPI_Comm_free(&local);
    const std::size_t ring_piece =
        local_ranks < ranks() ? sb::mpi::piece_bytes_across_hosts : sb::mpi::piece_bytes_within_host;
    const double per_byte = measured / static_cast<double>(bytes);
    // Variant::step_mean: a training loop's all-reduce, agreed once here and restarted each step.
    std::optional<sb::mpi::BucketedAllreduce<float, sb::HostOnly>> step;
    if (variant == Variant::step_mean) {
        step.emplace(arena, MPI_COMM_WORLD, sb::Reduce::mean, std::size_t{25} << 20, std::size_t{25} << 20);
        step->wait();
    }
    const auto raw_call = [&] {
        MPI_Allreduce(MPI_IN_PLACE, raw.data(), static_cast<int>(raw.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    };
    const auto arena_call = [&] {
        switch (variant) {
            case Variant::raw:
                MPI_Allreduce(MPI_IN_PLACE, control.data(), static_cast<int>(control.size()), MPI_FLOAT, MPI_SUM,
                              MPI_COMM_WORLD);
                break;
            case Variant::ring:
            case Variant::ring_schedule: {
                using Engine = sb::mpi::detail::Allreduce<float>;
                Engine ring(ring_comm, true, ring_piece / sizeof(float), sb::mpi::ring_pieces_in_flight, "bench_comm",
                            variant == Variant::ring ? Engine::Schedule::automatic : Engine::Schedule::ring);
                ring.add(control.data(), control.size());
                ring.wait(MPI_COMM_WORLD, sb::mpi::detail::Deadline{}, "the ring",
                          [] { return std::vector<std::shared_ptr<void>>{}; });
                break;
            }
            case Variant::sum:
                sb::mpi::allreduce_diff(arena, MPI_COMM_WORLD, sb::Reduce::sum);
                break;
            case Variant::mean:
                sb::mpi::allreduce_diff(arena, MPI_COMM_WORLD, sb::Reduce::mean);
                break;
            case Variant::bucketed_sum:
                sb::mpi::iallreduce_diff(arena, MPI_COMM_WORLD, sb::Reduce::sum, std::size_t{25} << 20).wait();
                break;
            case Variant::bucketed_mean:
                sb::mpi::iallreduce_diff(arena, MPI_COMM_WORLD, sb::Reduce::mean, std::size_t{25} << 20).wait();
                break;
            case Variant::step_mean:
                step->restart();
                step->wait();
                break;
            case Variant::agreement:
                sb::mpi::allreduce_diff(empty, MPI_COMM_WORLD, sb::Reduce::mean);
                break;
        }
    };
    bool raw_first = true;
    for (auto _ : state) {
        // Each side goes first in every other pair: neither gains from running second (caches, the
        // other ranks' lag), and a pair's two times are still back to back.
        double t = 0;
        if (raw_first) {
            raw_times.push_back(timed(raw_call));
            t = timed(arena_call);
        } else {
            t = timed(arena_call);
            raw_times.push_back(timed(raw_call));
        }
        raw_first = !raw_first;
        arena_times.push_back(t);
        pair_ratios.push_back(raw_times.back() * per_byte / t);
        state.SetIterationTime(t);
    }
    const double raw_t = median(raw_times);
    const double arena_t = median(arena_times);
    state.counters["busbw_GBps"] = bus_bandwidth(measured, arena_t) / 1e9;
    state.counters["raw_busbw_GBps"] = bus_bandwidth(static_cast<double>(bytes), raw_t) / 1e9;
    state.counters["ratio"] = raw_t * per_byte / arena_t;
    state.counters["pair_ratio"] = median(pair_ratios);
    state.counters["ranks"] = ranks();
    MPI_Comm_free(&ring_comm);
}

// 100 small blobs (10 KiB each): one MPI_Allreduce per blob, against one arena call.
void small_blobs(benchmark::State& state) {
    constexpr int blobs = 100;
    constexpr std::int64_t floats = 2560;
    std::vector<sb::Blob<float>> separate;
    sb::ParameterArena<float> arena;
    for (int i = 0; i < blobs; ++i) {
        separate.emplace_back(sb::Shape{floats});
        separate.back().fill_diff(1.0f);
        arena.add({floats});
    }
    arena.seal();
    std::vector<double> naive_times;
    std::vector<double> arena_times;
    for (auto _ : state) {
        naive_times.push_back(timed([&] {
            for (auto& blob : separate) {
                auto diff = blob.mutable_host_diff();
                MPI_Allreduce(MPI_IN_PLACE, diff.data(), static_cast<int>(diff.size()), MPI_FLOAT, MPI_SUM,
                              MPI_COMM_WORLD);
            }
        }));
        const double t = timed([&] { sb::mpi::allreduce_diff(arena, MPI_COMM_WORLD, sb::Reduce::sum); });
        arena_times.push_back(t);
        state.SetIterationTime(t);
    }
    state.counters["naive_us"] = median(naive_times) * 1e6;
    state.counters["arena_us"] = median(arena_times) * 1e6;
    state.counters["speedup"] = median(naive_times) / median(arena_times);
    state.counters["ranks"] = ranks();
}

#if SYNCBLOB_BENCH_SHARED_LOAD
// This host's copy of a checkpoint of `mib` MiB, written by its first rank, and removed with this.
class HostCheckpoint {
public:
    explicit HostCheckpoint(std::size_t mib) {
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank(), MPI_INFO_NULL, &host_);
        MPI_Comm_rank(host_, &host_rank_);
        long job = static_cast<long>(::getpid());
        MPI_Bcast(&job, 1, MPI_LONG, 0, MPI_COMM_WORLD);
        char name[256] = {};
        gethostname(name, sizeof name - 1);
        const char* base = std::getenv("SYNCBLOB_BENCH_DIR");
        dir_ = std::filesystem::path(base != nullptr ? base : std::filesystem::temp_directory_path().string()) /
               ("syncblob-bench-shared-load-" + std::to_string(job)) / name;
        if (host_rank_ == 0) {
            sb::checkpoint::Writer writer;
            constexpr int tensors = 16;
            const auto floats = static_cast<std::int64_t>((mib << 20) / sizeof(float) / tensors);
            for (int t = 0; t < tensors; ++t) {
                sb::Blob<float> blob(sb::Shape{floats});
                auto v = blob.mutable_host_data();
                for (std::size_t i = 0; i < v.size(); ++i) {
                    v[i] = static_cast<float>((i * 2654435761u + static_cast<std::size_t>(t)) % 1000003) * 1e-3F;
                }
                writer.add("layer" + std::to_string(t) + ".weight", blob);
            }
            sb::checkpoint::SaveOptions options;
            options.max_shard_bytes = std::uint64_t{64} << 20;
            (void)writer.save(dir_, options);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        checkpoint_ = sb::checkpoint::Checkpoint::open(dir_);
    }
    ~HostCheckpoint() {
        MPI_Barrier(MPI_COMM_WORLD);
        if (host_rank_ == 0) {
            std::error_code ec;
            std::filesystem::remove_all(dir_.parent_path(), ec);
        }
        MPI_Comm_free(&host_);
    }
    HostCheckpoint(const HostCheckpoint&) = delete;
    HostCheckpoint& operator=(const HostCheckpoint&) = delete;

    [[nodiscard]] const sb::checkpoint::Checkpoint& checkpoint() const noexcept { return checkpoint_; }
    // The host's copy leaves the page cache: the next load reads it from the disk.
    void drop_from_cache() const {
        if (host_rank_ == 0) {
            for (const auto& shard : checkpoint_.shards()) {
                const int fd = ::open(shard.path.c_str(), O_RDONLY);
                if (fd >= 0) {
                    (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
                    ::close(fd);
                }
            }
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }

private:
    MPI_Comm host_ = MPI_COMM_NULL;
    int host_rank_ = 0;
    std::filesystem::path dir_;
    sb::checkpoint::Checkpoint checkpoint_;
};

void shared_load(benchmark::State& state) {
    const HostCheckpoint host(static_cast<std::size_t>(state.range(0)));
    const sb::checkpoint::Checkpoint& ckpt = host.checkpoint();
    sb::checkpoint::CheckpointArena<float> every(ckpt);
    sb::checkpoint::CheckpointArena<float> shared(ckpt);
    std::vector<double> every_times;
    std::vector<double> shared_times;
    std::vector<double> pair_ratios;
    std::uint64_t every_read = 0;
    std::uint64_t shared_read = 0;
    const auto every_call = [&] {
        host.drop_from_cache();
        return timed([&] { every_read = every.load(ckpt).bytes_read; });
    };
    const auto shared_call = [&] {
        host.drop_from_cache();
        return timed([&] { shared_read = sb::mpi::load_shared(shared, ckpt, MPI_COMM_WORLD).bytes_read; });
    };
    bool every_first = true;
    for (auto _ : state) {
        double e = 0;
        double t = 0;
        if (every_first) {
            e = every_call();
            t = shared_call();
        } else {
            t = shared_call();
            e = every_call();
        }
        every_first = !every_first;
        every_times.push_back(e);
        shared_times.push_back(t);
        pair_ratios.push_back(e / t);
        state.SetIterationTime(t);
    }
    state.counters["every_ms"] = median(every_times) * 1e3;
    state.counters["shared_ms"] = median(shared_times) * 1e3;
    state.counters["ratio"] = median(every_times) / median(shared_times);
    state.counters["pair_ratio"] = median(pair_ratios);
    state.counters["every_read_MB"] = static_cast<double>(every_read) / 1e6;
    state.counters["shared_read_MB"] = static_cast<double>(shared_read) / 1e6;
    state.counters["ranks"] = ranks();
}
#endif

// Fixed iteration counts: every rank must run the same collectives, so nothing may adapt to timing.
void register_all() {
    for (const int mib : {1, 4, 16, 64, 256}) {
        const int iterations = mib <= 4 ? 40 : mib <= 16 ? 20 : mib <= 64 ? 10 : 5;
        for (const auto& [name, variant] :
             {std::pair{"raw", Variant::raw}, std::pair{"ring", Variant::ring},
              std::pair{"ring_schedule", Variant::ring_schedule}, std::pair{"sum", Variant::sum},
              std::pair{"mean", Variant::mean}, std::pair{"bucketed_sum", Variant::bucketed_sum},
              std::pair{"bucketed_mean", Variant::bucketed_mean}, std::pair{"step_mean", Variant::step_mean},
              std::pair{"agreement", Variant::agreement}}) {
            benchmark::RegisterBenchmark((std::string("allreduce/") + name).c_str(), allreduce, variant)
                ->Arg(mib)
                ->Iterations(iterations)
                ->UseManualTime()
                ->Unit(benchmark::kMillisecond);
        }
    }
    benchmark::RegisterBenchmark("small_blobs/100x10KiB", small_blobs)
        ->Iterations(40)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
#if SYNCBLOB_BENCH_SHARED_LOAD
    for (const int mib : {64, 256}) {
        benchmark::RegisterBenchmark("shared_load", shared_load)
            ->Arg(mib)
            ->Iterations(mib <= 64 ? 10 : 5)
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
    }
#endif
}

class Silent : public benchmark::BenchmarkReporter {
public:
    bool ReportContext(const Context&) override { return true; }
    void ReportRuns(const std::vector<Run>&) override {}
};

}  // namespace

int main(int argc, char* argv[]) {
    MPI_Init(&argc, &argv);
    std::vector<char*> args(argv, argv + argc);
    if (rank() != 0) {  // only rank 0 writes --benchmark_out
        std::erase_if(args, [](const char* a) { return std::strncmp(a, "--benchmark_out", 15) == 0; });
    }
    int count = static_cast<int>(args.size());
    benchmark::Initialize(&count, args.data());
    register_all();
    if (rank() == 0) {
        benchmark::RunSpecifiedBenchmarks();
    } else {
        Silent silent;
        benchmark::RunSpecifiedBenchmarks(&silent);
    }
    benchmark::Shutdown();
    MPI_Finalize();
    return 0;
}
