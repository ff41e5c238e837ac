// SPDX-License-Identifier: BSD-2-Clause
// Parsing is linear in what a file holds: safetensors headers and JSON objects of 1 k, 10 k,
// 100 k and 1 M entries, each timed per entry, and a safetensors header near the format's 100 MB
// limit opened from a file.
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
// The counter "per_entry" is the time per entry (tensor, member or value). After the run a summary
// prints, for each family, the time per entry at every size and its ratio to the 1 k one: linear
// parsing keeps that ratio near 1 (the bar is within 2x), where quadratic work makes it
// grow with N (before this code: 40 k tensors took 17 s, 1 M would take hours).

#include <benchmark/benchmark.h>

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <syncblob/io/json.hpp>
#include <syncblob/io/safetensors.hpp>

namespace fs = std::filesystem;
using namespace syncblob;

namespace {

fs::path bench_dir() {
    static const fs::path dir = [] {
        const char* env = std::getenv("SYNCBLOB_BENCH_DIR");
        fs::path d = (env != nullptr ? fs::path(env) : fs::temp_directory_path()) /
                     ("syncblob-bench-parse-" + std::to_string(::getpid()));
        fs::create_directories(d);
        return d;
    }();
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
    void scalar(const io::detail::json_stream::Scalar&) { ++events; }
};

void BM_json_reader(benchmark::State& state) {
    const std::string& text = cached_object(static_cast<std::size_t>(state.range(0)));
    for (auto _ : state) {
        CountingHandler h;
        io::detail::json_stream::TextInput in(text);
        io::detail::json_stream::read_json(in, h, {}, "bench");
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

}  // namespace

BENCHMARK(BM_safetensors_open)->RangeMultiplier(10)->Range(1'000, 1'000'000)->Unit(benchmark::kMillisecond)->MinTime(2);
BENCHMARK(BM_safetensors_load_all)
    ->RangeMultiplier(10)
    ->Range(1'000, 1'000'000)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2);
BENCHMARK(BM_json_reader)->RangeMultiplier(10)->Range(1'000, 1'000'000)->Unit(benchmark::kMillisecond)->MinTime(2);
BENCHMARK(BM_json_document)->RangeMultiplier(10)->Range(1'000, 1'000'000)->Unit(benchmark::kMillisecond)->MinTime(2);
BENCHMARK(BM_json_blob)->RangeMultiplier(10)->Range(1'000, 1'000'000)->Unit(benchmark::kMillisecond)->MinTime(2);
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
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) {
        return 1;
    }
    SummaryReporter reporter;
    benchmark::RunSpecifiedBenchmarks(&reporter);
    benchmark::Shutdown();
    std::error_code ec;
    fs::remove_all(bench_dir(), ec);
    return 0;
}
