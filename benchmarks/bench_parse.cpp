// SPDX-License-Identifier: BSD-2-Clause
// Parsing is linear in what a file holds, and every other piece of work in the count of what an
// input or a caller controls: safetensors headers, JSON objects, checkpoints, arenas and the
// agreement of 1 k, 10 k, 100 k and 1 M entries, each timed per entry, and a safetensors header
// near the format's 100 MB limit opened from a file.
//
//   bench_parse [--benchmark_filter=...]      files go to $SYNCBLOB_BENCH_DIR (default: the temp folder)
//
// Rows (each input is built before its timing starts):
//   safetensors_open/N      SafetensorsFile::from_memory of a header of N tensors, then a lookup of
//                           every name (contains): the parse, the duplicate check and N lookups
//   safetensors_load_all/N  the same, then load_all: N blobs, each found by name
//   json_reader/N           the streaming JSON reader over an object of N members {"kN":{}} (what
//                           every JSON text syncblob reads goes through), into a handler that counts
//   json_document/N         io::parse_json_text of that object: an nlohmann document of N members,
//                           each checked against the others for duplicates
//   json_blob/N             io::parse_json of a blob document of N F32 values
//   safetensors_100MB       SafetensorsFile::open of a file whose header is just under 100 MB
// and every other count an input or a caller controls, timed per item the same way:
//   checkpoint_open/N       checkpoint::Checkpoint::open of a folder whose index maps N tensors to one shard
//                           holding them: both parses, the name indexes and every check against the index
//   checkpoint_shards/N     Checkpoint::open of an index naming N shards, none of which exists: the
//                           index is read and its numbering checked, then the first shard is missing
//   checkpoint_save/N       checkpoint::Writer::save of N one-element blobs in shards of 4 MB, into a
//                           folder holding the last save (its index read, its shards replaced)
//   checkpoint_arena/N      checkpoint::CheckpointArena of a checkpoint of N one-element tensors (a
//                           third with diffs), laid out and loaded on the host
//   checkpoint_convert/N    the same checkpoint saved as F64, loaded into an F32 CheckpointArena laid
//                           out and loaded once before (LoadOptions::convert): the reads and
//                           conversions alone
//   arena_blobs/N           ParameterArena: N blobs added, sealed, and both buffers viewed
//   arena_buckets/N         ParameterArena::buckets(1 KiB) of N sealed one-element blobs
//   agreement_ranks/N       the agreement's verdict over the descriptors of N ranks (what every rank
//                           computes after the gather, in comm::detail::settle)
// and a baseline, the machine's own cost of the memory an item needs:
//   fresh_memory/N          N x 1.5 KiB in one block (about what a CheckpointArena holds per one-element
//                           tensor, its slices included), written once and freed. The small sizes reuse
//                           pages the iteration before freed; a block of 1.5 GB comes from the kernel anew
//                           each time, zeroed, at whatever rate the machine zeroes fresh pages.
// Every row first runs a second unmeasured (MinWarmUpTime), so each cell is the time per item of a
// program repeating the work: a 10^3 cell runs thousands of times, a 10^6 cell once or twice, which
// without the warm-up would be the process's first, cold pass over that much memory.
// The families whose items are objects of their own (arena_blobs, checkpoint_arena) also run at an equal footprint
// ("<family>_1M/N"): 10^6 items in every row, as 10^6 / N pieces of N items each, all alive together. Every row then
// touches the same memory, so a row's time per item differs from another's only by what the work does per item as N
// grows (a search inside a loop would show here), not by whether its objects fit in the caches or reuse pages the last
// iteration freed. The counter "per_entry" is the time per entry (tensor, member or value). After the run a summary
// prints, for each family, the time per entry at every size and its ratio to the 1 k one: linear
// parsing keeps that ratio near 1 (the bar is within 2x), where quadratic work makes it
// grow with N (before this code: 40 k tensors took 17 s, 1 M would take hours).

#include <benchmark/benchmark.h>

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <syncblob/arena.hpp>
#include <syncblob/checkpoint.hpp>
#include <syncblob/comm/detail/agreement.hpp>
#include <syncblob/io/json.hpp>
#include <syncblob/io/safetensors.hpp>

#include "run_main.hpp"

namespace fs = std::filesystem;
using namespace syncblob;

namespace {

fs::path bench_dir() {
    static const fs::path dir = syncblob_bench::make_scratch_dir("parse");
    return dir;
}

std::string length_prefix(std::uint64_t n) {
    std::string out(8, '\0');
    for (std::size_t i = 0; i < 8; ++i) {
        out[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
    }
    return out;
}

// A safetensors file of `n` one-byte U8 tensors named `prefix` + index, in data order.
std::string safetensors_bytes(std::size_t n, const std::string& prefix = "t") {
    std::string header = "{";
    header.reserve(n * (60 + prefix.size()));
    for (std::size_t i = 0; i < n; ++i) {
        const std::string k = std::to_string(i);
        header.append(i == 0 ? "\"" : ",\"").append(prefix).append(k);
        header.append("\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[").append(k).append(",");
        header.append(std::to_string(i + 1)).append("]}");
    }
    header.append("}");
    return length_prefix(header.size()) + header + std::string(n, '\x01');
}

const std::string& cached_safetensors(std::size_t n) {
    static std::map<std::size_t, std::string> files;
    auto& f = files[n];
    if (f.empty()) {
        f = safetensors_bytes(n);
    }
    return f;
}

const std::string& cached_object(std::size_t n) {
    static std::map<std::size_t, std::string> texts;
    auto& t = texts[n];
    if (t.empty()) {
        t = "{";
        for (std::size_t i = 0; i < n; ++i) {
            t.append(i == 0 ? "\"k" : ",\"k").append(std::to_string(i)).append("\":{}");
        }
        t.append("}");
    }
    return t;
}

const std::string& cached_blob_document(std::size_t n) {
    static std::map<std::size_t, std::string> texts;
    auto& t = texts[n];
    if (t.empty()) {
        t = "{\"dtype\": \"F32\", \"shape\": [" + std::to_string(n) + "], \"data\": [";
        for (std::size_t i = 0; i < n; ++i) {
            t.append(i == 0 ? "" : ", ").append(std::to_string(static_cast<double>(i % 1000) * 0.25));
        }
        t.append("]}");
    }
    return t;
}

void per_entry(benchmark::State& state, std::int64_t entries) {
    state.counters["per_entry"] = benchmark::Counter(
        static_cast<double>(entries), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

std::span<const std::byte> bytes_of(const std::string& s) {
    return std::as_bytes(std::span(s.data(), s.size()));
}

void BM_safetensors_open(benchmark::State& state) {
    const auto n = static_cast<std::size_t>(state.range(0));
    const std::string& file = cached_safetensors(n);
    std::vector<std::string> names;
    for (std::size_t i = 0; i < n; ++i) {
        names.push_back("t" + std::to_string(i));
    }
    for (auto _ : state) {
        const auto f = io::SafetensorsFile::from_memory(bytes_of(file), "bench");
        std::size_t found = 0;
        for (const auto& name : names) {
            found += f.contains(name) ? 1u : 0u;
        }
        if (found != n) {
            state.SkipWithError("a name was not found");
        }
    }
    per_entry(state, state.range(0));
}

void BM_safetensors_load_all(benchmark::State& state) {
    const std::string& file = cached_safetensors(static_cast<std::size_t>(state.range(0)));
    for (auto _ : state) {
        const auto blobs = io::SafetensorsFile::from_memory(bytes_of(file), "bench").load_all<std::uint8_t>();
        benchmark::DoNotOptimize(blobs.size());
    }
    per_entry(state, state.range(0));
}

struct CountingHandler {
    std::size_t events = 0;
    void begin_object(std::uint64_t) { ++events; }
    void begin_array(std::uint64_t) { ++events; }
    void end_object() { ++events; }
    void end_array() { ++events; }
    void key(std::string_view, std::uint64_t) { ++events; }
    void scalar(const io::parse::Scalar&) { ++events; }
};

void BM_json_reader(benchmark::State& state) {
    const std::string& text = cached_object(static_cast<std::size_t>(state.range(0)));
    for (auto _ : state) {
        CountingHandler h;
        io::parse::TextInput in(text);
        io::parse::read_json(in, h, {}, "bench");
        benchmark::DoNotOptimize(h.events);
    }
    per_entry(state, state.range(0));
}

void BM_json_document(benchmark::State& state) {
    const std::string& text = cached_object(static_cast<std::size_t>(state.range(0)));
    for (auto _ : state) {
        const auto doc = io::parse_json_text(text, io::default_max_bytes, "bench");
        benchmark::DoNotOptimize(doc.size());
    }
    per_entry(state, state.range(0));
}

void BM_json_blob(benchmark::State& state) {
    const std::string& text = cached_blob_document(static_cast<std::size_t>(state.range(0)));
    for (auto _ : state) {
        Blob<float> b;
        io::parse_json(text, b, {}, "bench");
        benchmark::DoNotOptimize(b.host_data().data());
    }
    per_entry(state, state.range(0));
}

// A file whose header is as close to the format's 100 MB limit as whole entries allow, with
// names like a large model's ("model.layers.<i>.mlp.weight"): about 1.3 M tensors.
void BM_safetensors_100MB(benchmark::State& state) {
    static const std::pair<fs::path, std::size_t> made = [] {
        const std::string prefix = "model.layers.mlp.weight.";
        std::size_t n = 0;
        for (std::uint64_t size = 2;; ++n) {  // the most tensors whose header stays under 100 MB
            const std::string k = std::to_string(n);
            const std::uint64_t entry =
                (n == 0 ? 1 : 2) + prefix.size() + k.size() + 44 + k.size() + 1 + std::to_string(n + 1).size() + 2;
            if (size + entry >= 100'000'000) {
                break;
            }
            size += entry;
        }
        const std::size_t lo = n;
        const fs::path file = bench_dir() / "header-100MB.safetensors";
        std::ofstream(file, std::ios::binary) << safetensors_bytes(lo, prefix);
        if (fs::file_size(file) - 8 - lo >= 100'000'000) {
            std::fprintf(stderr, "bench_parse: the header came out over 100 MB\n");
            std::abort();
        }
        return std::pair{file, lo};
    }();
    for (auto _ : state) {
        const auto f = io::SafetensorsFile::open(made.first);
        benchmark::DoNotOptimize(f.contains("model.layers.mlp.weight.0"));
    }
    state.counters["tensors"] = static_cast<double>(made.second);
    state.counters["header_MB"] = static_cast<double>(fs::file_size(made.first) - 8 - made.second) / 1e6;
    per_entry(state, static_cast<std::int64_t>(made.second));
}

// A checkpoint folder of N one-element tensors "t<k>" of T (every third with a diff), written once.
template <class T = float>
const fs::path& cached_checkpoint(std::size_t n, std::uint64_t shard_bytes = 4'000'000) {
    static std::map<std::size_t, fs::path> folders;
    auto& folder = folders[n];
    if (folder.empty()) {
        folder = bench_dir() / ("checkpoint-" + std::string(element_name<T>()) + "-" + std::to_string(n));
        checkpoint::Writer w;
        for (std::size_t k = 0; k < n; ++k) {
            Blob<T> b({1});
            b.fill(static_cast<T>(k));
            b.fill_diff(T{-1});
            w.add("t" + std::to_string(k), b, k % 3 == 0);
        }
        checkpoint::SaveOptions options;
        options.max_shard_bytes = shard_bytes;
        (void)w.save(folder, options);
    }
    return folder;
}

void BM_checkpoint_open(benchmark::State& state) {
    const auto n = static_cast<std::size_t>(state.range(0));
    const fs::path& folder = cached_checkpoint(n, std::uint64_t{1} << 40);  // one shard
    for (auto _ : state) {
        const auto c = checkpoint::Checkpoint::open(folder);
        benchmark::DoNotOptimize(c.tensors().size());
    }
    per_entry(state, state.range(0));
}

// An index naming N shards, none of which exists (written once).
const fs::path& cached_shard_index(std::size_t n) {
    static std::map<std::size_t, fs::path> indexes;
    auto& index = indexes[n];
    if (index.empty()) {
        index = bench_dir() / ("shards-" + std::to_string(n) + ".json");
        std::ofstream out(index, std::ios::binary);
        out << "{\"weight_map\": {";
        for (std::size_t k = 1; k <= n; ++k) {
            out << (k == 1 ? "\"t" : ", \"t") << k << "\": \""
                << syncblob::checkpoint::detail::shard_file_name("model", k, n) << "\"";
        }
        out << "}}";
    }
    return index;
}

// Opens the index: the numbering is checked, then the first shard is missing.
bool first_shard_missing(const fs::path& index) {
    try {
        (void)checkpoint::Checkpoint::open(index);
        return false;
    } catch (const IOError&) {
        return true;
    }
}

void BM_checkpoint_shards(benchmark::State& state) {
    const fs::path& index = cached_shard_index(static_cast<std::size_t>(state.range(0)));
    for (auto _ : state) {
        if (!first_shard_missing(index)) {
            state.SkipWithError("the missing shard was not found");
        }
    }
    per_entry(state, state.range(0));
}

void BM_checkpoint_save(benchmark::State& state) {
    const auto n = static_cast<std::size_t>(state.range(0));
    std::vector<Blob<float>> blobs;
    blobs.reserve(n);
    checkpoint::Writer w;
    for (std::size_t k = 0; k < n; ++k) {
        blobs.emplace_back(Shape{1}).fill(static_cast<float>(k));
        w.add("t" + std::to_string(k), blobs.back());
    }
    const fs::path folder = bench_dir() / ("save-" + std::to_string(n));
    checkpoint::SaveOptions options;
    options.max_shard_bytes = 4'000'000;
    for (auto _ : state) {
        benchmark::DoNotOptimize(w.save(folder, options).shards.size());
    }
    per_entry(state, state.range(0));
}

constexpr std::size_t million = 1'000'000;

// `pieces` arenas of the checkpoint `c`, laid out and loaded, all alive until the end.
void load_arenas(const checkpoint::Checkpoint& c, std::size_t pieces) {
    std::vector<checkpoint::CheckpointArena<float>> arenas;
    arenas.reserve(pieces);
    for (std::size_t p = 0; p < pieces; ++p) {
        benchmark::DoNotOptimize(arenas.emplace_back(c).load(c).tensors);
    }
}

void BM_checkpoint_arena(benchmark::State& state) {
    const auto c = checkpoint::Checkpoint::open(cached_checkpoint(static_cast<std::size_t>(state.range(0))));
    for (auto _ : state) {
        load_arenas(c, 1);
    }
    per_entry(state, state.range(0));
}

void BM_checkpoint_convert(benchmark::State& state) {
    const auto c = checkpoint::Checkpoint::open(cached_checkpoint<double>(static_cast<std::size_t>(state.range(0))));
    checkpoint::CheckpointArena<float> arena(c);
    checkpoint::LoadOptions options;
    options.convert = true;
    // A first load, untimed: a sealed arena's pages are mapped on its first write, which is the
    // layout's cost (checkpoint_arena times it). Google Benchmark calls this function anew for each
    // round of its iteration count, so without this every round timed one such load among its
    // few at 10^6 and the thousands at 10^3 (hence 227-376 ns for the same binary's 10^6 cell).
    (void)arena.load(c, options);
    for (auto _ : state) {
        benchmark::DoNotOptimize(arena.load(c, options).tensors);
    }
    per_entry(state, state.range(0));
}

void BM_checkpoint_arena_1M(benchmark::State& state) {
    const auto c = checkpoint::Checkpoint::open(cached_checkpoint(static_cast<std::size_t>(state.range(0))));
    for (auto _ : state) {
        load_arenas(c, million / static_cast<std::size_t>(state.range(0)));
    }
    per_entry(state, static_cast<std::int64_t>(million));
}

// `pieces` arenas of N one-element blobs, built, sealed and viewed, all alive until the end.
void build_arenas(std::size_t n, std::size_t pieces) {
    std::vector<ParameterArena<float>> arenas(pieces);
    for (auto& arena : arenas) {
        for (std::size_t i = 0; i < n; ++i) {
            arena.add({1});
        }
        arena.seal();
        benchmark::DoNotOptimize(arena.flat_data().fresh_on_host());
        benchmark::DoNotOptimize(arena.flat_diff().fresh_on_host());
    }
}

void BM_arena_blobs(benchmark::State& state) {
    for (auto _ : state) {
        build_arenas(static_cast<std::size_t>(state.range(0)), 1);
    }
    per_entry(state, state.range(0));
}

void BM_arena_blobs_1M(benchmark::State& state) {
    for (auto _ : state) {
        build_arenas(static_cast<std::size_t>(state.range(0)), million / static_cast<std::size_t>(state.range(0)));
    }
    per_entry(state, static_cast<std::int64_t>(million));
}

void BM_arena_buckets(benchmark::State& state) {
    const auto n = static_cast<std::size_t>(state.range(0));
    ParameterArena<float> arena;
    for (std::size_t i = 0; i < n; ++i) {
        arena.add({1});
    }
    arena.seal();
    for (auto _ : state) {
        benchmark::DoNotOptimize(arena.buckets(1024).size());
    }
    per_entry(state, state.range(0));
}

void BM_fresh_memory(benchmark::State& state) {
    const auto bytes = static_cast<std::size_t>(state.range(0)) * 1536;
    for (auto _ : state) {
        auto* block = static_cast<unsigned char*>(std::malloc(bytes));
        if (block == nullptr) {
            state.SkipWithError("out of memory");
            break;
        }
        std::memset(block, 1, bytes);
        benchmark::DoNotOptimize(block);
        benchmark::ClobberMemory();
        std::free(block);
    }
    per_entry(state, state.range(0));
}

void BM_agreement_ranks(benchmark::State& state) {
    const auto n = static_cast<std::size_t>(state.range(0));
    ParameterArena<float> arena;
    arena.add({300});
    arena.add({7});
    arena.seal();
    std::string problem;
    const auto mine = comm::detail::describe(arena, "bench", comm::detail::CommOperation::allreduce, 0, problem);
    const std::vector<comm::detail::ArenaDescriptor> all(n, mine);
    for (auto _ : state) {
        comm::detail::settle(all, "bench", 0, problem, nullptr);
        benchmark::ClobberMemory();
    }
    per_entry(state, state.range(0));
}

}  // namespace

BENCHMARK(BM_checkpoint_open)
    ->RangeMultiplier(10)
    ->Range(1'000, 1'000'000)
    ->MinWarmUpTime(1)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1);
BENCHMARK(BM_checkpoint_shards)
    ->RangeMultiplier(10)
    ->Range(1'000, 1'000'000)
    ->MinWarmUpTime(1)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1);
BENCHMARK(BM_checkpoint_save)
    ->RangeMultiplier(10)
    ->Range(1'000, 1'000'000)
    ->MinWarmUpTime(1)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1);
BENCHMARK(BM_checkpoint_arena)
    ->RangeMultiplier(10)
    ->Range(1'000, 1'000'000)
    ->MinWarmUpTime(1)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1);
BENCHMARK(BM_checkpoint_convert)
    ->RangeMultiplier(10)
    ->Range(1'000, 1'000'000)
    ->MinWarmUpTime(1)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1);
BENCHMARK(BM_arena_blobs)
    ->RangeMultiplier(10)
    ->Range(1'000, 1'000'000)
    ->MinWarmUpTime(1)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1);
BENCHMARK(BM_arena_buckets)
    ->RangeMultiplier(10)
    ->Range(1'000, 1'000'000)
    ->MinWarmUpTime(1)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1);
BENCHMARK(BM_checkpoint_arena_1M)
    ->RangeMultiplier(10)
    ->Range(1'000, 1'000'000)
    ->MinWarmUpTime(1)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1);
BENCHMARK(BM_arena_blobs_1M)
    ->RangeMultiplier(10)
    ->Range(1'000, 1'000'000)
    ->MinWarmUpTime(1)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1);
BENCHMARK(BM_fresh_memory)
    ->RangeMultiplier(10)
    ->Range(1'000, 1'000'000)
    ->MinWarmUpTime(1)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1);
BENCHMARK(BM_agreement_ranks)
    ->RangeMultiplier(10)
    ->Range(1'000, 1'000'000)
    ->MinWarmUpTime(1)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1);
BENCHMARK(BM_safetensors_open)
    ->RangeMultiplier(10)
    ->Range(1'000, 1'000'000)
    ->MinWarmUpTime(1)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2);
BENCHMARK(BM_safetensors_load_all)
    ->RangeMultiplier(10)
    ->Range(1'000, 1'000'000)
    ->MinWarmUpTime(1)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2);
BENCHMARK(BM_json_reader)
    ->RangeMultiplier(10)
    ->Range(1'000, 1'000'000)
    ->MinWarmUpTime(1)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2);
BENCHMARK(BM_json_document)
    ->RangeMultiplier(10)
    ->Range(1'000, 1'000'000)
    ->MinWarmUpTime(1)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2);
BENCHMARK(BM_json_blob)
    ->RangeMultiplier(10)
    ->Range(1'000, 1'000'000)
    ->MinWarmUpTime(1)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2);
BENCHMARK(BM_safetensors_100MB)->Unit(benchmark::kMillisecond)->Iterations(3);

// The console output, then each family's time per entry by size and its ratio to the 1 k size.
class SummaryReporter : public benchmark::ConsoleReporter {
public:
    void ReportRuns(const std::vector<Run>& runs) override {
        for (const auto& run : runs) {
            const std::string name = run.benchmark_name();
            const auto slash = name.find('/');
            if (name.rfind("BM_safetensors_100MB", 0) == 0) {
                hundred_ = run.GetAdjustedRealTime() * 1e-3;
                tensors_ = run.counters.count("tensors") != 0 ? run.counters.at("tensors").value : 0;
            } else if (const auto it = run.counters.find("per_entry");
                       it != run.counters.end() && slash != std::string::npos) {
                per_entry_[name.substr(0, slash)][std::stoll(name.substr(slash + 1))] = it->second;
            }
        }
        ConsoleReporter::ReportRuns(runs);
    }
    void Finalize() override {
        ConsoleReporter::Finalize();
        std::printf("\ntime per entry (ns) by size, and its ratio to the 1 k size (linear: near 1; the bar is 2):\n");
        for (const auto& [family, sizes] : per_entry_) {
            const auto base = sizes.find(1000);
            std::printf("  %-26s", family.c_str());
            for (const auto& [n, seconds] : sizes) {
                std::printf("  %7lld: %8.1f", static_cast<long long>(n), seconds * 1e9);
                if (base != sizes.end()) {
                    std::printf(" (x%.2f)", seconds / base->second);
                }
            }
            std::printf("\n");
        }
        if (hundred_ > 0) {
            std::printf("  a header just under 100 MB (%.0f tensors) opened from a file in %.2f s\n", tensors_,
                        hundred_);
        }
    }

private:
    std::map<std::string, std::map<long long, double>> per_entry_;
    double hundred_ = 0;
    double tensors_ = 0;
};

int main(int argc, char** argv) {
    return syncblob_bench::run_main<SummaryReporter>(argc, argv, "bench_parse", bench_dir());
}
