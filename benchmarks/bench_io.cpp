// SPDX-License-Identifier: BSD-2-Clause
// Saving and loading a 256 MiB blob: syncblob's .npy and safetensors (copying and memory-mapped
// loads) against NumPy's np.save / np.load of the same array (timed by /usr/bin/python3 in the same
// run) and plain fwrite / fread. Every save writes a new file; every load reads into fresh memory
// (the page cache holds the file, as it does right after a save or on a second load).
//
//   bench_io [--benchmark_filter=...]      files go to $SYNCBLOB_BENCH_DIR (default: the temp folder)
//
// Results are bytes per second; the "numpy/*" rows carry the times NumPy measured itself.

#include <benchmark/benchmark.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <syncblob/io/npy.hpp>
#include <syncblob/io/safetensors.hpp>

namespace fs = std::filesystem;
using namespace syncblob;

namespace {

constexpr std::int64_t big_bytes = std::int64_t{256} << 20;

fs::path bench_dir() {
    static const fs::path dir = [] {
        const char* env = std::getenv("SYNCBLOB_BENCH_DIR");
        fs::path d = (env != nullptr ? fs::path(env) : fs::temp_directory_path()) /
                     ("syncblob-bench-io-" + std::to_string(::getpid()));
        fs::create_directories(d);
        return d;
    }();
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

void BM_load_npy(benchmark::State& state) {
    const fs::path file = saved_file("npy", state.range(0));
    for (auto _ : state) {
        Blob<float> blob;
        io::load_npy(file, blob);
        benchmark::DoNotOptimize(blob.host_data().data());
    }
    state.SetBytesProcessed(state.iterations() * state.range(0));
}

void BM_load_safetensors_copy(benchmark::State& state) {
    const fs::path file = saved_file("st", state.range(0));
    for (auto _ : state) {
        Blob<float> blob;
        io::SafetensorsFile::open(file).load("w", blob);
        benchmark::DoNotOptimize(blob.host_data().data());
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
BENCHMARK(BM_load_npy)->Arg(big_bytes)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2);
BENCHMARK(BM_load_safetensors_copy)->Arg(big_bytes)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2);
BENCHMARK(BM_fread)->Arg(big_bytes)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2);
BENCHMARK_CAPTURE(BM_numpy, load, false)->Arg(big_bytes)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(4);
BENCHMARK(BM_load_safetensors_map)
    ->Arg(std::int64_t{16} << 20)
    ->Arg(big_bytes)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

int main(int argc, char** argv) {
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) {
        return 1;
    }
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    std::error_code ec;
    fs::remove_all(bench_dir(), ec);
    return 0;
}
