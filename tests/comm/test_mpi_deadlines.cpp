// SPDX-License-Identifier: BSD-2-Clause
// A wrong argument on one rank, a rank that never joins, a bucketed all-reduce dropped with
// buckets in flight: every rank ends with the same typed error, and none waits past its timeout.
// Each case that gives an operation up runs on a communicator of its own, which it frees.
#include <mpi.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <syncblob/comm/mpi.hpp>

#include "mpi_test_support.hpp"

using syncblob::ParameterArena;
using syncblob::Reduce;
namespace mpi = syncblob::mpi;
using namespace std::chrono_literals;

namespace {

// True on every rank when every rank of MPI_COMM_WORLD holds the same string.
bool same_everywhere(const std::string& s) {
    const auto h = static_cast<unsigned long long>(std::hash<std::string>{}(s));
    unsigned long long low = 0;
    unsigned long long high = 0;
    MPI_Allreduce(&h, &low, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&h, &high, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    return low == high;
}

template <class A = syncblob::HostOnly>
void build(ParameterArena<float, A>& arena) {
    for (std::int64_t n : {300, 7, 64, 33}) {
        arena.add({n});
    }
    arena.seal();
    for (auto& b : arena.blobs()) {
        for (float& x : b.mutable_host_data()) {
            x = static_cast<float>(rank_in(MPI_COMM_WORLD) + 1);
        }
        for (float& x : b.mutable_host_diff()) {
            x = 1.0F;
        }
    }
}

using Clock = std::chrono::steady_clock;

}  // namespace

TEST_CASE("mpi: a root outside the communicator on one rank is the same IndexError on every rank, no hang",
          "[mpi][hostile]") {
    // It used to throw on that rank before the agreement, and the others waited in it forever.
    const int odd = size_of(MPI_COMM_WORLD) - 1;
    const int bad_root = GENERATE(-1, 99);
    ParameterArena<float> arena;
    build(arena);
    const std::string message = outcome([&] {
        const int root = rank_in(MPI_COMM_WORLD) == odd ? bad_root : 0;
        mpi::broadcast_data(arena, MPI_COMM_WORLD, root);
    });
    INFO("rank " << rank_in(MPI_COMM_WORLD) << ": " << message);
    CHECK_THAT(message,
               Catch::StartsWith("IndexError: mpi::broadcast_data: root " + std::to_string(bad_root) +
                                 " is not a rank of the communicator [0, ") &&
                   Catch::Contains("(passed by rank " + std::to_string(odd) + "); no rank's data was changed"));
    CHECK(same_everywhere(message));
    // Nothing was sent: every rank keeps its own data.
    CHECK(arena[0].host_data()[0] == static_cast<float>(rank_in(MPI_COMM_WORLD) + 1));
    // The communicator is in step: the next call works everywhere.
    mpi::broadcast_data(arena, MPI_COMM_WORLD, 0);
    CHECK(arena[3].host_data()[32] == 1.0F);
}

TEST_CASE("mpi: arguments wrong in themselves are checked in the agreement, the same error on every rank",
          "[mpi][hostile]") {
    const int odd = size_of(MPI_COMM_WORLD) > 1 ? 1 : 0;
    const bool mine = rank_in(MPI_COMM_WORLD) == odd;
    ParameterArena<float> arena;
    build(arena);
    SECTION("a bucket limit of 0 on one rank") {
        const std::string message = outcome([&] {
            mpi::BucketedAllreduce<float, syncblob::HostOnly> pending(arena, MPI_COMM_WORLD, Reduce::sum, 1024,
                                                                      mine ? 0 : 512);
        });
        INFO(message);
        CHECK_THAT(message, Catch::StartsWith("ShapeError: mpi::iallreduce_diff: a bucket limit of 0 bytes") &&
                                Catch::Contains("passed by rank " + std::to_string(odd)));
        CHECK(same_everywhere(message));
    }
    SECTION("a reduction that is not a Reduce, on every rank: refused, not summed") {
        const std::string message =
            outcome([&] { mpi::allreduce_diff(arena, MPI_COMM_WORLD, static_cast<Reduce>(7)); });
        INFO(message);
        CHECK_THAT(message, Catch::StartsWith("StateError: mpi::allreduce_diff: reduction 7 is neither"));
        CHECK(same_everywhere(message));
        CHECK(arena[1].host_diff()[0] == 1.0F);
    }
    SECTION("a timeout on some ranks only") {
        mpi::Options options;
        if (mine) {
            options.timeout = 5s;
        }
        const std::string message = outcome([&] { mpi::allreduce_diff(arena, MPI_COMM_WORLD, Reduce::sum, options); });
        INFO(message);
        if (size_of(MPI_COMM_WORLD) > 1) {
            CHECK_THAT(message,
                       Catch::StartsWith("StateError: mpi::allreduce_diff: the ranks disagree on the timeout"));
        }
        CHECK(same_everywhere(message));
    }
}

TEST_CASE("mpi: a timeout that is not positive is the same OptionError on every rank, and the calls go on",
          "[mpi][hostile]") {
    const int odd = size_of(MPI_COMM_WORLD) > 1 ? 1 : 0;
    const bool mine = rank_in(MPI_COMM_WORLD) == odd;
    const auto bad = GENERATE(0ms, -5ms);
    const bool everyone = GENERATE(false, true);
    CAPTURE(bad.count(), everyone);
    ParameterArena<float> arena;
    build(arena);
    mpi::Options options;
    options.timeout = (mine || everyone) ? bad : 5000ms;
    const std::string message = outcome([&] { mpi::allreduce_diff(arena, MPI_COMM_WORLD, Reduce::sum, options); });
    INFO("rank " << rank_in(MPI_COMM_WORLD) << ": " << message);
    CHECK_THAT(message, Catch::StartsWith("OptionError: mpi::allreduce_diff: Options::timeout of " +
                                          std::to_string(bad.count()) + " ms: a timeout must be positive") &&
                            Catch::Contains("(passed by rank " + std::to_string(everyone ? 0 : odd) +
                                            "); no rank's data was changed"));
    CHECK(same_everywhere(message));
    CHECK(arena[1].host_diff()[0] == 1.0F);  // nothing moved
    const std::string bucketed = outcome([&] {
        mpi::BucketedAllreduce<float, syncblob::HostOnly> pending(arena, MPI_COMM_WORLD, Reduce::sum, 1024, 512,
                                                                  options);
    });
    CHECK_THAT(bucketed, Catch::StartsWith("OptionError: mpi::iallreduce_diff: Options::timeout of"));
    CHECK(same_everywhere(bucketed));
    // The communicator is in step: the next call works everywhere, with a timeout or without.
    options.timeout = 5000ms;
    mpi::allreduce_diff(arena, MPI_COMM_WORLD, Reduce::sum, options);
    CHECK(arena[1].host_diff()[0] == static_cast<float>(size_of(MPI_COMM_WORLD)));
}

TEST_CASE("mpi: a timeout on every rank keeps the calls working when every rank joins", "[mpi]") {
    ParameterArena<float> arena;
    build(arena);
    // [timeout]
    // Each wait of these calls ends 20 s after the call began at the latest, in a TimeoutError.
    const mpi::Options options{.timeout = 20s};
    mpi::allreduce_diff(arena, MPI_COMM_WORLD, Reduce::sum, options);
    mpi::broadcast_data(arena, MPI_COMM_WORLD, 0, options);
    auto pending = mpi::iallreduce_diff(arena, MPI_COMM_WORLD, Reduce::mean, 512, options);
    pending.wait();
    // [timeout]
    CHECK(arena[2].host_data()[10] == 1.0F);                                         // rank 0's
    CHECK(arena[2].host_diff()[10] == static_cast<float>(size_of(MPI_COMM_WORLD)));  // the mean of the sums
}

TEST_CASE("mpi: a rank that never joins ends every rank's call in a TimeoutError, none waits past it",
          "[mpi][hostile]") {
    if (size_of(MPI_COMM_WORLD) < 2) {
        return;
    }
    OwnComm own;
    const int late = size_of(MPI_COMM_WORLD) - 1;  // fails before the call (here: does not make it)
    const bool is_late = rank_in(MPI_COMM_WORLD) == late;
    const mpi::Options options{.timeout = 300ms};
    ParameterArena<float> arena;
    build(arena);
    const std::size_t abandoned_before = mpi::abandoned_operations();
    std::string message;
    const auto start = Clock::now();
    if (!is_late) {
        message = outcome([&] { mpi::broadcast_data(arena, own.comm, 0, options); });
        CHECK_THAT(message, Catch::Contains("agreement"));
        CHECK(mpi::abandoned_operations() == abandoned_before + 1);
    }
    const auto waited = Clock::now() - start;
    CHECK(waited < 10s);
    MPI_Barrier(MPI_COMM_WORLD);  // the late rank calls once the others have given up
    if (is_late) {
        // Its agreement is matched by the others' abandoned one; the broadcast then finds no one.
        message = outcome([&] { mpi::broadcast_data(arena, own.comm, 0, options); });
    }
    INFO("rank " << rank_in(MPI_COMM_WORLD) << ": " << message);
    CHECK_THAT(message, Catch::StartsWith("TimeoutError: mpi::broadcast_data: timed out after 300 ms on rank ") &&
                            Catch::Contains("or the network or the host it runs on failed"));  // across hosts too
    CHECK(everywhere(message.starts_with("TimeoutError: ")));
    // A rank that gave up refuses new calls on that communicator at once, without a collective.
    const std::string next = outcome([&] { mpi::allreduce_diff(arena, own.comm, Reduce::sum, options); });
    CHECK_THAT(next, Catch::StartsWith("StateError: mpi::allreduce_diff: an earlier mpi::broadcast_data on this "
                                       "communicator was given up"));
    // MPI_COMM_WORLD is not affected.
    mpi::allreduce_diff(arena, MPI_COMM_WORLD, Reduce::sum);
    CHECK(arena[0].host_diff()[0] == static_cast<float>(size_of(MPI_COMM_WORLD)));
}

TEST_CASE("mpi: a BucketedAllreduce dropped with buckets in flight ends the other ranks' waits in a TimeoutError",
          "[mpi][hostile]") {
    if (size_of(MPI_COMM_WORLD) < 2) {
        return;
    }
    OwnComm own;
    const int early = 1;  // throws during backward, with one bucket started
    const bool is_early = rank_in(MPI_COMM_WORLD) == early;
    // Ranks may wait for different times: the dropped one has ample time for the bucket it started.
    const mpi::Options options{.timeout = is_early ? std::chrono::milliseconds{10s} : 300ms};
    ParameterArena<float> arena;
    build(arena);
    std::string message;
    const auto start = Clock::now();
    {
        mpi::BucketedAllreduce<float, syncblob::HostOnly> pending(arena, own.comm, Reduce::sum, 512, 512, options);
        REQUIRE(pending.buckets().size() == 3);
        if (is_early) {
            pending.ready(3);
            pending.ready(2);
            CHECK(pending.started() == 1);
            // ...and is destroyed here: it waits for its bucket (the others started it too).
        } else {
            pending.start_all();
            message = outcome([&] { pending.wait(); });
        }
    }
    CHECK(Clock::now() - start < 10s);
    INFO("rank " << rank_in(MPI_COMM_WORLD) << ": " << message);
    if (!is_early) {
        CHECK_THAT(message, Catch::StartsWith("TimeoutError: mpi::iallreduce_diff: timed out after 300 ms on rank ") &&
                                Catch::Contains("the buckets' all-reduces (MPI_Isend/MPI_Irecv)"));
    } else {
        CHECK(message.empty());
        CHECK(arena[3].host_diff()[0] == static_cast<float>(size_of(MPI_COMM_WORLD)));  // its bucket completed
    }
    // Every rank, the dropped one included, now refuses that communicator with the same error type.
    const std::string next = outcome([&] { mpi::broadcast_data(arena, own.comm, 0, options); });
    INFO(next);
    CHECK_THAT(next, Catch::StartsWith("StateError: mpi::broadcast_data: an earlier mpi::iallreduce_diff"));
    CHECK(everywhere(next.starts_with("StateError: ")));
}

TEST_CASE("mpi: destroying a BucketedAllreduce whose buckets never complete returns within its timeout",
          "[mpi][hostile]") {
    if (size_of(MPI_COMM_WORLD) < 2) {
        return;
    }
    OwnComm own;
    const bool absent = rank_in(MPI_COMM_WORLD) == 0;  // starts nothing
    const mpi::Options options{.timeout = 200ms};
    ParameterArena<float> arena;
    build(arena);
    const auto start = Clock::now();
    {
        mpi::BucketedAllreduce<float, syncblob::HostOnly> pending(arena, own.comm, Reduce::sum, 512, 512, options);
        if (!absent) {
            pending.start_all();
        }
    }  // used to wait in MPI_Waitall for ever
    const auto waited = Clock::now() - start;
    CHECK(waited < 10s);
    if (!absent) {
        CHECK(waited >= 200ms);
        CHECK_THAT(outcome([&] { mpi::allreduce_diff(arena, own.comm, Reduce::sum); }),
                   Catch::StartsWith("StateError: mpi::allreduce_diff: an earlier mpi::iallreduce_diff"));
    }
    MPI_Barrier(MPI_COMM_WORLD);
}
