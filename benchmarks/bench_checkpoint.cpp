// SPDX-License-Identifier: BSD-2-Clause
// Loading a sharded checkpoint shaped like a transformer's (an embedding, then per layer two norms,
// an attention and an MLP with their biases: 12 tensors a layer, 1,010 tensors of 3 KiB to 9 MiB)
// into the host side of a ParameterArena, against the limit of the same bytes: a parallel pread of
// every shard's data section into memory already touched, in pieces of the loader's chunk size on
// as many threads. Tensor-by-tensor loading (one SafetensorsFile::load per tensor into its own
// blob, as syncblob loaded checkpoints before the arena loader) beside it. The files stay in the
// page cache (written by the benchmark itself, read once before timing).
//
//   bench_checkpoint                          a small checkpoint (about 40 MB): the smoke run, seconds
//   SYNCBLOB_BENCH_CHECKPOINT=full bench_checkpoint
//                                             the measured one: 2.2 GiB over 5 shards (about a minute,
//                                             about 9 GiB of memory, 2.2 GiB of disk)
//
// Files go to $SYNCBLOB_BENCH_DIR (default: the temp folder) and are removed at the end. Each load
// is timed against the pread limit in alternating pairs; its "ratio_to_pread" counter is the median
// of the limit's time over its own (1.0: as fast as the limit), printed again in a summary.

#include <benchmark/benchmark.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <syncblob/checkpoint.hpp>
#include <syncblob/io/safetensors.hpp>

#include "checkpoint_bench_files.hpp"
#include "run_main.hpp"

namespace fs = std::filesystem;
using namespace syncblob;

namespace {

struct Size {
    std::int64_t width;
    int layers;
    std::uint64_t max_shard;
};

bool full_size() {
    const char* env = std::getenv("SYNCBLOB_BENCH_CHECKPOINT");
    return env != nullptr && std::string(env) == "full";
}

Size size() {
    return full_size() ? Size{768, 84, std::uint64_t{512} << 20} : Size{96, 84, std::uint64_t{10} << 20};
}

fs::path bench_dir() {
    static const fs::path dir = syncblob_bench::make_scratch_dir("checkpoint");
    return dir;
}

// The checkpoint, written once, then read once so that the page cache holds it.
const checkpoint::Checkpoint& stored_checkpoint() {
    static const checkpoint::Checkpoint ckpt = [] {
        const auto [d, layers, shard] = size();
        return syncblob_bench::write_checkpoint<float>(bench_dir(), syncblob_bench::transformer_layout(d, layers),
                                                       shard);
    }();
    return ckpt;
}

using syncblob_bench::median;
using syncblob_bench::ParallelPread;
using syncblob_bench::timed;

// A load timed against the parallel pread in rotating order (load, pread into the limit's own
// buffer, and with `same_memory`, pread into that memory: the load's own destination; then the
// next rotation). "ratio_to_pread" is the median of the pread's time over the load's;
// "ratio_to_pread_same_memory" the same for the pread into the load's memory, which takes the
// placement of the destination's pages out of the comparison.
template <class Load>
void paired_with_pread(benchmark::State& state, const Load& load, char* same_memory = nullptr) {
    const auto& c = stored_checkpoint();
    const checkpoint::LoadOptions defaults;
    ParallelPread limit(c, defaults.chunk_bytes);
    const unsigned threads = parallel::max_threads();
    const std::size_t steps = same_memory != nullptr ? 3 : 2;
    std::vector<double> to_pread;
    std::vector<double> to_same;
    for (auto _ : state) {
        double t[3] = {};
        bool ok = true;
        for (std::size_t k = 0; k < steps; ++k) {
            const std::size_t which = (k + to_pread.size()) % steps;
            t[which] = which == 0 ? timed(load)
                                  : timed([&] { ok = limit(threads, which == 2 ? same_memory : nullptr) && ok; });
        }
        if (!ok) {
            state.SkipWithError("pread failed");
            break;
        }
        state.SetIterationTime(t[0]);
        to_pread.push_back(t[1] / t[0]);
        to_same.push_back(t[2] / t[0]);
    }
    state.counters["ratio_to_pread"] = median(to_pread);
    if (same_memory != nullptr) {
        state.counters["ratio_to_pread_same_memory"] = median(to_same);
    }
    state.counters["tensors"] = static_cast<double>(c.tensors().size());
    state.counters["shards"] = static_cast<double>(c.shards().size());
    state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(limit.bytes()));
}

// The arena loader into the host side of one arena, reused (touched memory, as the limit's).
void BM_arena_host_load(benchmark::State& state) {
    const auto& c = stored_checkpoint();
    checkpoint::CheckpointArena<float> arena(c);
    (void)arena.load(c);  // the arena's memory touched once, as the limit's buffer is
    // The arena's host data (padding included, so at least the bytes the limit reads).
    auto* memory = reinterpret_cast<char*>(arena.arena().flat_data().mutable_host_data().data());
    paired_with_pread(
        state,
        [&] {
            const auto report = arena.load(c);
            benchmark::DoNotOptimize(report.bytes_read);
        },
        memory);
}

// A new arena for every load: its pages are faulted in by the load.
void BM_arena_host_load_fresh(benchmark::State& state) {
    const auto& c = stored_checkpoint();
    paired_with_pread(state, [&] {
        auto arena = checkpoint::load<float>(c);
        benchmark::DoNotOptimize(arena.arena().flat_data().host_data().data());
    });
}

// Tensor by tensor: each shard opened as a SafetensorsFile, each tensor loaded into a blob of its
// own (kept between iterations, so its memory is touched too).
void BM_tensor_by_tensor(benchmark::State& state) {
    const auto& c = stored_checkpoint();
    std::vector<Blob<float>> blobs(c.tensors().size());
    const auto load = [&] {
        std::size_t k = 0;
        for (std::size_t s = 0; s < c.shards().size(); ++s) {
            const auto file = c.shard_file(s);
            for (const auto& t : c.tensors()) {
                if (t.shard == s) {
                    file.load(t.name, blobs[k++]);
                }
            }
        }
        benchmark::DoNotOptimize(blobs.data());
    };
    load();
    paired_with_pread(state, load);
}

// The limit alone.
void BM_parallel_pread(benchmark::State& state) {
    const checkpoint::LoadOptions defaults;
    ParallelPread limit(stored_checkpoint(), defaults.chunk_bytes);
    for (auto _ : state) {
        if (!limit(parallel::max_threads())) {
            state.SkipWithError("pread failed");
            break;
        }
    }
    state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(limit.bytes()));
}

// Pairs of each load and the limit: fewer for the slow rows of the full size.
int iterations(int full) {
    return full_size() ? full : 10;
}

}  // namespace

BENCHMARK(BM_parallel_pread)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(iterations(10));
BENCHMARK(BM_arena_host_load)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(iterations(11));
BENCHMARK(BM_arena_host_load_fresh)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(iterations(3));
BENCHMARK(BM_tensor_by_tensor)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(iterations(7));

// The console output, then each load as a fraction of the pread limit.
class SummaryReporter : public benchmark::ConsoleReporter {
public:
    void ReportRuns(const std::vector<Run>& runs) override {
        for (const auto& run : runs) {
            if (const auto it = run.counters.find("ratio_to_pread"); it != run.counters.end()) {
                const auto same = run.counters.find("ratio_to_pread_same_memory");
                ratios_.push_back(
                    {run.benchmark_name(), it->second.value, same != run.counters.end() ? same->second.value : -1.0});
            }
        }
        ConsoleReporter::ReportRuns(runs);
    }
    void Finalize() override {
        ConsoleReporter::Finalize();
        const auto& c = stored_checkpoint();
        std::printf(
            "\ncheckpoint: %.2f GiB, %zu tensors, %zu shards, %u threads; loads as a fraction of a parallel\n"
            "pread of the same bytes into touched memory (median of pairs, same run):\n",
            static_cast<double>(c.total_size()) / double(1 << 30), c.tensors().size(), c.shards().size(),
            parallel::max_threads());
        for (const auto& [name, ratio, same] : ratios_) {
            std::printf("  %-52s %.3f", name.c_str(), ratio);
            if (same >= 0) {
                std::printf("  (%.3f of a pread into its own memory)", same);
            }
            std::printf("\n");
        }
    }

private:
    struct Row {
        std::string name;
        double to_pread;
        double to_same_memory;  // negative: not measured
    };
    std::vector<Row> ratios_;
};

int main(int argc, char** argv) {
    return syncblob_bench::run_main<SummaryReporter>(argc, argv, "bench_checkpoint", bench_dir());
}
