// SPDX-License-Identifier: BSD-2-Clause
#pragma once
// The main of a benchmark program that prints its own summary: Google Benchmark's flags, the run
// through the program's reporter, and the removal of the files the program wrote, with an exception
// from a benchmark reported as a failed run (status 1) instead of ending the program unclean.

#include <benchmark/benchmark.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <system_error>

namespace syncblob_bench {

/// A new folder for the files a benchmark program writes: `syncblob-bench-<name>-<pid>` in
/// $SYNCBLOB_BENCH_DIR, or in the temp folder when that is unset.
inline std::filesystem::path make_scratch_dir(const std::string& name) {
    const char* env = std::getenv("SYNCBLOB_BENCH_DIR");
    std::filesystem::path d = (env != nullptr ? std::filesystem::path(env) : std::filesystem::temp_directory_path()) /
                              ("syncblob-bench-" + name + "-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
}

/// Runs the benchmarks the command line selects with a `Reporter`, then removes `scratch` (when
/// given). Returns main's status: 1 for an argument Google Benchmark does not know or a benchmark
/// that threw.
template <class Reporter>
int run_main(int argc, char** argv, const char* program, const std::filesystem::path& scratch = {}) {
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) {
        return 1;
    }
    int status = 0;
    try {
        Reporter reporter;
        benchmark::RunSpecifiedBenchmarks(&reporter);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: %s\n", program, e.what());
        status = 1;
    }
    benchmark::Shutdown();
    if (!scratch.empty()) {
        std::error_code ec;
        std::filesystem::remove_all(scratch, ec);
    }
    return status;
}

}  // namespace syncblob_bench
