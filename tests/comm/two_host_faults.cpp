// SPDX-License-Identifier: BSD-2-Clause
// The fault cases of the two-host harness (`scripts/two-hosts --fault cut-link|kill-host`): every
// rank all-reduces an arena again and again, each call with a timeout, while the harness takes the
// link down or kills host-b mid-call. Each rank that survives writes what the interrupted call
// threw, and how long after its start, to $SYNCBLOB_TWO_HOSTS_RUN/result.<rank>:
//   rank R on HOST: TYPE after E ms (timeout T ms): MESSAGE
// and the harness checks that TYPE is a typed error (TimeoutError or CommError) and E <= T + 1000.
// Before the loop each rank writes started.<rank> ("rank R of N on HOST pid P"), which tells the harness
// when to strike. The job cannot end normally across a dead link (MPI_Finalize needs every rank):
// after writing its result a rank waits to be ended by the harness, as a job is by its scheduler.
//
//   two_host_faults [--op mean|sum|bucketed|broadcast] [--mib N] [--timeout-ms T] [--seconds S]
//                   [--then wait|abort]
// With `--then abort` a rank calls MPI_Abort after writing its result, as a job that cannot go on
// would (to see what Open MPI does with it across a dead link), instead of waiting to be ended.
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

#include <syncblob/comm/mpi.hpp>

namespace sb = syncblob;
using Clock = std::chrono::steady_clock;

namespace {

struct Arguments {
    std::string op = "mean";
    std::size_t mib = 64;
    long timeout_ms = 3000;
    long seconds = 60;  // the longest the loop runs without an error before it reports none
    std::string then = "wait";
};

Arguments parse(int argc, char** argv) {
    Arguments a;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string key = argv[i];
        const char* value = argv[i + 1];
        if (key == "--op") {
            a.op = value;
        } else if (key == "--mib") {
            a.mib = std::strtoul(value, nullptr, 10);
        } else if (key == "--timeout-ms") {
            a.timeout_ms = std::strtol(value, nullptr, 10);
        } else if (key == "--seconds") {
            a.seconds = std::strtol(value, nullptr, 10);
        } else if (key == "--then") {
            a.then = value;
        } else {
            std::cerr << "two_host_faults: unknown option " << key << '\n';
            std::exit(2);
        }
    }
    return a;
}

// Writes `text` to <run>/<name> whole: a reader never sees half a line.
void publish(const std::string& run, const std::string& name, const std::string& text) {
    const std::string path = run + "/" + name;
    {
        std::ofstream out(path + ".tmp");
        out << text << '\n';
    }
    std::rename((path + ".tmp").c_str(), path.c_str());
}

void call(const std::string& op, sb::ParameterArena<float>& arena, const sb::mpi::Options& options) {
    if (op == "mean") {
        sb::mpi::allreduce_diff(arena, MPI_COMM_WORLD, sb::Reduce::mean, options);
    } else if (op == "sum") {
        sb::mpi::allreduce_diff(arena, MPI_COMM_WORLD, sb::Reduce::sum, options);
    } else if (op == "bucketed") {
        sb::mpi::iallreduce_diff(arena, MPI_COMM_WORLD, sb::Reduce::mean, std::size_t{25} << 20, options).wait();
    } else if (op == "broadcast") {
        sb::mpi::broadcast_data(arena, MPI_COMM_WORLD, 0, options);
    } else {
        std::cerr << "two_host_faults: --op is mean, sum, bucketed or broadcast, not " << op << '\n';
        std::exit(2);
    }
}

}  // namespace

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    const Arguments args = parse(argc, argv);
    int rank = 0;
    int size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    const char* run_env = std::getenv("SYNCBLOB_TWO_HOSTS_RUN");
    if (run_env == nullptr) {
        std::cerr << "two_host_faults: run it through scripts/two-hosts --fault ...\n";
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const std::string run = run_env;
    const std::string me = "rank " + std::to_string(rank) + " on " + host;

    sb::ParameterArena<float> arena;
    const auto floats = static_cast<std::int64_t>((args.mib << 20) / sizeof(float));
    for (const std::int64_t n : {floats / 2, std::int64_t{1000}, floats / 4, std::int64_t{10}, floats / 4 - 2048}) {
        arena.add({n});
    }
    arena.seal();
    for (auto& blob : arena.blobs()) {
        blob.fill_diff(1.0F);
        blob.fill(static_cast<float>(rank));
    }
    const sb::mpi::Options options{.timeout = std::chrono::milliseconds{args.timeout_ms}};
    // Once without a timeout, as the ranks may start seconds apart: the connections are made, and
    // syncblob's private communicator too.
    MPI_Barrier(MPI_COMM_WORLD);
    call(args.op, arena, {});
    MPI_Barrier(MPI_COMM_WORLD);
    publish(run, "started." + std::to_string(rank),
            "rank " + std::to_string(rank) + " of " + std::to_string(size) + " on " + host + " pid " +
                std::to_string(::getpid()));

    std::string outcome;
    const auto loop_start = Clock::now();
    long calls = 0;
    while (outcome.empty() && Clock::now() - loop_start < std::chrono::seconds{args.seconds}) {
        const auto start = Clock::now();
        const auto elapsed = [&] {
            return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count());
        };
        const std::string timing = " ms (timeout " + std::to_string(args.timeout_ms) + " ms): ";
        try {
            call(args.op, arena, options);
            ++calls;
        } catch (const sb::TimeoutError& e) {
            outcome = me + ": TimeoutError after " + elapsed() + timing + e.what();
        } catch (const sb::CommError& e) {
            outcome = me + ": CommError after " + elapsed() + timing + e.what();
        } catch (const std::exception& e) {
            outcome = me + ": other-exception after " + elapsed() + timing + e.what();
        }
    }
    if (outcome.empty()) {
        outcome = me + ": none after " + std::to_string(args.seconds * 1000) + " ms (timeout " +
                  std::to_string(args.timeout_ms) + " ms): " + std::to_string(calls) + " calls, no error";
    }
    publish(run, "result." + std::to_string(rank), outcome);
    std::cout << outcome << std::endl;
    if (args.then == "abort") {
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    // The job cannot finish across a dead link: wait to be ended (bounded, should the harness be gone).
    std::this_thread::sleep_for(std::chrono::seconds{120});
    std::_Exit(3);
}
