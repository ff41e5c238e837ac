// SPDX-License-Identifier: BSD-2-Clause
// Saving and loading a 256 MiB blob: syncblob's .npy and safetensors (copying and memory-mapped
// loads) against NumPy's np.save / np.load of the same array (timed by /usr/bin/python3 in the same
// run) and plain fwrite / fread / pread. Every save writes a new file; every load reads into fresh
// memory (the page cache holds the file, as it does right after a save or on a second load).
//
//   bench_io [--benchmark_filter=...]      files go to $SYNCBLOB_BENCH_DIR (default: the temp folder)
//
// Results are bytes per second; the "numpy/*" rows carry the times NumPy measured itself. The limit
// of a copying load is one pread(2) of the same file into memory already touched (no page faults):
// the copying loads are timed against it in alternating pairs, and their "ratio_to_pread" counter
// is the median of its time over theirs. After the run a summary prints each load's speed as a
// fraction of that limit and of np.load's.

#include <benchmark/benchmark.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <syncblob/io/npy.hpp>
#include <syncblob/io/safetensors.hpp>

#include "run_main.hpp"

namespace fs = std::filesystem;
using namespace syncblob;

namespace {

constexpr std::int64_t big_bytes = std::int64_t{256} << 20;

fs::path bench_dir() {
    static const fs::path dir = syncblob_bench::make_scratch_dir("io");
    return dir;
}

const Blob<float>& source_blob(std::int64_t bytes) {
    static std::map<std::int64_t, Blob<float>> blobs;
    auto& b = blobs[bytes];
    if (!b.has_shape()) {
        b.reshape({bytes / 4});
        auto v = b.mutable_host_data();
        for (std::size_t i = 0; i < v.size(); ++i) {
            v[i] = static_cast<float>(i % 1000) * 0.5f;
        }
    }
    return b;
}

fs::path saved_file(const std::string& kind, std::int64_t bytes) {
    const fs::path file =
        bench_dir() / (kind + "-" + std::to_string(bytes) + (kind == "npy" ? ".npy" : ".safetensors"));
    if (!fs::exists(file)) {
        if (kind == "npy") {
            io::save_npy(file, source_blob(bytes));
        } else {
            io::SafetensorsWriter w;
            w.add("w", source_blob(bytes));
            w.save(file);
        }
    }
    return file;
}

void BM_save_npy(benchmark::State& state) {
    const auto& blob = source_blob(state.range(0));
    const fs::path file = bench_dir() / "save.npy";
    for (auto _ : state) {
        state.PauseTiming();  // NumPy's timing leaves the removal out too
        fs::remove(file);
        state.ResumeTiming();
        io::save_npy(file, blob);
    }
    state.SetBytesProcessed(state.iterations() * state.range(0));
}

void BM_save_safetensors(benchmark::State& state) {
    const auto& blob = source_blob(state.range(0));
    const fs::path file = bench_dir() / "save.safetensors";
    for (auto _ : state) {
        state.PauseTiming();  // NumPy's timing leaves the removal out too
        fs::remove(file);
        state.ResumeTiming();
        io::SafetensorsWriter w;
        w.add("w", blob);
        w.save(file);
    }
    state.SetBytesProcessed(state.iterations() * state.range(0));
}

// One pread of `bytes` bytes of `file` into `buffer` (one call: Linux reads up to 2 GiB at once).
bool pread_into(const fs::path& file, void* buffer, std::size_t bytes) {
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return false;
    }
    const ssize_t got = ::pread(fd, buffer, bytes, 0);
    ::close(fd);
    return got == static_cast<ssize_t>(bytes);
}

// Memory of `bytes` bytes, every page touched once: what the limits read into. The first limit
// uses memory as `new` hands it out (4 KiB pages here); the second asks for transparent huge
// pages, as syncblob's loads do for their destination, so it is the copy alone, with neither page
// faults nor more TLB misses than a load's destination has.
char* touched_buffer(std::size_t bytes, bool huge_pages) {
    static std::map<std::pair<std::size_t, bool>, char*> buffers;  // kept for the whole run
    char*& b = buffers[{bytes, huge_pages}];
    if (b == nullptr) {
        constexpr std::size_t huge = std::size_t{2} << 20;
        if (huge_pages) {
            b = static_cast<char*>(std::aligned_alloc(huge, (bytes + huge - 1) / huge * huge));
            (void)::madvise(b, bytes, MADV_HUGEPAGE);
        } else {
            b = new char[bytes];
        }
        std::memset(b, 1, bytes);
    }
    return b;
}

using Clock = std::chrono::steady_clock;

// A copying load timed against the two limits in rotating order (load, pread, pread into huge
// pages; then the next rotation): "ratio_to_pread" and "ratio_to_pread_huge" are the medians of
// the limit's time over the load's.
template <class Load>
void paired_with_pread(benchmark::State& state, const fs::path& file, const Load& load) {
    const auto bytes = static_cast<std::size_t>(state.range(0));
    char* plain = touched_buffer(bytes, false);
    char* huge = touched_buffer(bytes, true);
    std::vector<double> to_plain;
    std::vector<double> to_huge;
    const auto timed = [](const auto& f) {
        const auto start = Clock::now();
        f();
        return std::chrono::duration<double>(Clock::now() - start).count();
    };
    const auto limit = [&](char* buffer) {
        return [&state, &file, buffer, bytes] {
            if (!pread_into(file, buffer, bytes)) {
                state.SkipWithError("pread failed");
            }
            benchmark::DoNotOptimize(buffer);
        };
    };
    for (auto _ : state) {
        double t[3] = {};
        for (std::size_t k = 0; k < 3; ++k) {
            const std::size_t which = (k + to_plain.size()) % 3;
            t[which] = which == 0 ? timed(load) : timed(limit(which == 1 ? plain : huge));
        }
        state.SetIterationTime(t[0]);
        to_plain.push_back(t[1] / t[0]);
        to_huge.push_back(t[2] / t[0]);
    }
    const auto median = [](std::vector<double>& v) {
        std::sort(v.begin(), v.end());
        return v.empty() ? 0.0 : v[v.size() / 2];
    };
    state.counters["ratio_to_pread"] = median(to_plain);
    state.counters["ratio_to_pread_huge"] = median(to_huge);
    state.SetBytesProcessed(state.iterations() * state.range(0));
}

void BM_load_npy(benchmark::State& state) {
    const fs::path file = saved_file("npy", state.range(0));
    paired_with_pread(state, file, [&] {
        Blob<float> blob;
        io::load_npy(file, blob);
        benchmark::DoNotOptimize(blob.host_data().data());
    });
}

// The same load on one thread (the pool off): what splitting the read gains.
void BM_load_npy_one_thread(benchmark::State& state) {
    const fs::path file = saved_file("npy", state.range(0));
    const unsigned threads = parallel::max_threads();
    parallel::set_max_threads(1);
    paired_with_pread(state, file, [&] {
        Blob<float> blob;
        io::load_npy(file, blob);
        benchmark::DoNotOptimize(blob.host_data().data());
    });
    parallel::set_max_threads(threads);
}

void BM_load_safetensors_copy(benchmark::State& state) {
    const fs::path file = saved_file("st", state.range(0));
    paired_with_pread(state, file, [&] {
        Blob<float> blob;
        io::SafetensorsFile::open(file).load("w", blob);
        benchmark::DoNotOptimize(blob.host_data().data());
    });
}

// The limits alone: pread of the .npy file into touched memory, of default pages and of huge pages.
void BM_pread_touched(benchmark::State& state, bool huge_pages) {
    const fs::path file = saved_file("npy", state.range(0));
    const auto bytes = static_cast<std::size_t>(state.range(0));
    char* buffer = touched_buffer(bytes, huge_pages);
    for (auto _ : state) {
        if (!pread_into(file, buffer, bytes)) {
            state.SkipWithError("pread failed");
        }
        benchmark::DoNotOptimize(buffer);
    }
    state.SetBytesProcessed(state.iterations() * state.range(0));
}

// pread into fresh memory (page faults included), one thread.
void BM_pread_fresh(benchmark::State& state) {
    const fs::path file = saved_file("npy", state.range(0));
    const auto bytes = static_cast<std::size_t>(state.range(0));
    for (auto _ : state) {
        const std::unique_ptr<char[]> buffer(new char[bytes]);
        if (!pread_into(file, buffer.get(), bytes)) {
            state.SkipWithError("pread failed");
        }
        benchmark::DoNotOptimize(buffer.get());
    }
    state.SetBytesProcessed(state.iterations() * state.range(0));
}

// Open, validate, map and borrow: no tensor byte is read, so the time does not grow with the file.
void BM_load_safetensors_map(benchmark::State& state) {
    const fs::path file = saved_file("st", state.range(0));
    for (auto _ : state) {
        Blob<float> blob;
        io::SafetensorsFile::open(file, {}, io::LoadMode::map).load("w", blob);
        benchmark::DoNotOptimize(blob.host_data().data());
    }
    state.SetBytesProcessed(state.iterations() * state.range(0));
}

void BM_fwrite(benchmark::State& state) {
    const auto& blob = source_blob(state.range(0));
    const fs::path file = bench_dir() / "plain.bin";
    for (auto _ : state) {
        state.PauseTiming();  // NumPy's timing leaves the removal out too
        fs::remove(file);
        state.ResumeTiming();
        std::FILE* f = std::fopen(file.c_str(), "wb");
        const auto data = blob.host_data();
        if (f == nullptr || std::fwrite(data.data(), 1, data.size_bytes(), f) != data.size_bytes()) {
            state.SkipWithError("fwrite failed");
        }
        if (f != nullptr) {
            std::fclose(f);
        }
    }
    state.SetBytesProcessed(state.iterations() * state.range(0));
}

void BM_fread(benchmark::State& state) {
    const fs::path file = bench_dir() / "plain.bin";
    {
        std::FILE* f = std::fopen(file.c_str(), "wb");
        const auto data = source_blob(state.range(0)).host_data();
        std::fwrite(data.data(), 1, data.size_bytes(), f);
        std::fclose(f);
    }
    const auto bytes = static_cast<std::size_t>(state.range(0));
    for (auto _ : state) {
        const std::unique_ptr<char[]> buffer(new char[bytes]);  // fresh memory, as a load gets
        std::FILE* f = std::fopen(file.c_str(), "rb");
        if (f == nullptr || std::fread(buffer.get(), 1, bytes, f) != bytes) {
            state.SkipWithError("fread failed");
        }
        if (f != nullptr) {
            std::fclose(f);
        }
        benchmark::DoNotOptimize(buffer.get());
    }
    state.SetBytesProcessed(state.iterations() * state.range(0));
}

// One np.save (to a new file) or np.load of the same array, timed by /usr/bin/python3 itself:
// a process per iteration, so NumPy is sampled over the same period as syncblob (the machine is
// shared; a single early measurement would compare different moments).
double numpy_seconds(bool save, std::int64_t bytes) {
    static const fs::path script_file = [] {
        const fs::path f = bench_dir() / "numpy_time.py";
        std::FILE* out = std::fopen(f.c_str(), "w");
        std::fputs(
            "import numpy as np, os, sys, time\n"
            "op, n, path = sys.argv[1], int(sys.argv[2]) // 4, sys.argv[3]\n"
            "a = (np.arange(n, dtype=np.float32) % 1000) * 0.5\n"
            "if os.path.exists(path): os.remove(path)\n"
            "if op == 'load': np.save(path, a)\n"
            "t = time.perf_counter()\n"
            "if op == 'save': np.save(path, a)\n"
            "else: b = np.load(path); assert b.shape == a.shape\n"
            "print(time.perf_counter() - t)\n",
            out);
        std::fclose(out);
        return f;
    }();
    const fs::path out_file = bench_dir() / "numpy_time.txt";
    const std::string cmd = "/usr/bin/python3 '" + script_file.string() + "' " + (save ? "save " : "load ") +
                            std::to_string(bytes) + " '" + (bench_dir() / "numpy.npy").string() + "' > '" +
                            out_file.string() + "'";
    double seconds = -1;
    if (std::system(cmd.c_str()) == 0) {
        std::FILE* f = std::fopen(out_file.c_str(), "r");
        if (f == nullptr || std::fscanf(f, "%lf", &seconds) != 1) {
            seconds = -1;
        }
        if (f != nullptr) {
            std::fclose(f);
        }
    }
    return seconds;
}

void BM_numpy(benchmark::State& state, bool save) {
    for (auto _ : state) {
        const double seconds = numpy_seconds(save, state.range(0));
        if (seconds < 0) {
            state.SkipWithError("/usr/bin/python3 with NumPy is not available");
            break;
        }
        state.SetIterationTime(seconds);
    }
    state.SetBytesProcessed(state.iterations() * state.range(0));
}

}  // namespace

BENCHMARK(BM_save_npy)->Arg(big_bytes)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2);
BENCHMARK(BM_save_safetensors)->Arg(big_bytes)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2);
BENCHMARK(BM_fwrite)->Arg(big_bytes)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2);
BENCHMARK_CAPTURE(BM_numpy, save, true)->Arg(big_bytes)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(4);
BENCHMARK_CAPTURE(BM_pread_touched, pages, false)
    ->Arg(big_bytes)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(2);
BENCHMARK_CAPTURE(BM_pread_touched, huge_pages, true)
    ->Arg(big_bytes)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(2);
BENCHMARK(BM_pread_fresh)->Arg(big_bytes)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2);
BENCHMARK(BM_load_npy)->Arg(big_bytes)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(20);
BENCHMARK(BM_load_npy_one_thread)->Arg(big_bytes)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(20);
BENCHMARK(BM_load_safetensors_copy)->Arg(big_bytes)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(20);
BENCHMARK(BM_fread)->Arg(big_bytes)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2);
BENCHMARK_CAPTURE(BM_numpy, load, false)->Arg(big_bytes)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(4);
BENCHMARK(BM_load_safetensors_map)
    ->Arg(std::int64_t{16} << 20)
    ->Arg(big_bytes)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// The console output, then a summary of the loads against their two baselines.
class SummaryReporter : public benchmark::ConsoleReporter {
public:
    void ReportRuns(const std::vector<Run>& runs) override {
        for (const auto& run : runs) {
            const std::string name = run.benchmark_name();
            const double seconds = run.GetAdjustedRealTime() * 1e-3;  // the rows' unit is ms
            const bool np_load = name.rfind("BM_numpy/load", 0) == 0;
            seconds_[np_load ? std::string("np.load") : name.substr(0, name.find('/'))] = seconds;
            if (const auto it = run.counters.find("ratio_to_pread"); it != run.counters.end()) {
                to_pread_[name.substr(0, name.find('/'))] = it->second;
            }
            if (const auto it = run.counters.find("ratio_to_pread_huge"); it != run.counters.end()) {
                to_pread_huge_[name.substr(0, name.find('/'))] = it->second;
            }
        }
        ConsoleReporter::ReportRuns(runs);
    }
    void Finalize() override {
        ConsoleReporter::Finalize();
        const auto numpy = seconds_.find("np.load");
        std::printf(
            "\nloads as a fraction of pread into touched memory (default pages; huge pages), measured in the same\n"
            "rotations, and of np.load (the mean of the rows above, same run):\n");
        for (const char* load : {"BM_load_npy", "BM_load_npy_one_thread", "BM_load_safetensors_copy"}) {
            const auto t = seconds_.find(load);
            const auto r = to_pread_.find(load);
            if (t == seconds_.end() || r == to_pread_.end()) {
                continue;
            }
            std::printf("  %-26s %.2f of pread (%.2f of pread into huge pages)", load, r->second, to_pread_huge_[load]);
            if (numpy != seconds_.end()) {
                std::printf(", %.2f of np.load", numpy->second / t->second);
            }
            std::printf("\n");
        }
    }

private:
    std::map<std::string, double> seconds_;
    std::map<std::string, double> to_pread_;
    std::map<std::string, double> to_pread_huge_;
};

int main(int argc, char** argv) {
    return syncblob_bench::run_main<SummaryReporter>(argc, argv, "bench_io", bench_dir());
}
