// SPDX-License-Identifier: BSD-2-Clause
// mpi::allreduce_diff, broadcast_data and the bucketed non-blocking form, run on every rank of
// `mpirun -np N`: exact results against a serial reference computed on each rank, exact transfer
// counts on SimulatedDevice, and misuse raised as the same exception on every rank.
#include <mpi.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <syncblob/comm/mpi.hpp>
#include <syncblob/sim/device.hpp>

#include "device_guard.hpp"
#include "mpi_test_support.hpp"

using syncblob::CommStats;
using syncblob::Head;
using syncblob::HostOnly;
using syncblob::ParameterArena;
using syncblob::Reduce;
using syncblob::Simulated;
using syncblob::SimulatedDevice;
namespace mpi = syncblob::mpi;

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

// Rank r's gradient element i of blob b: small integers, so sums are exact in any order.
template <class T>
T value(int r, std::size_t b, std::size_t i) {
    return static_cast<T>((r + 1) * static_cast<int>(i % 13 + 1) + static_cast<int>(b));
}

// The serial reference: what every rank must hold after the all-reduce.
template <class T>
T reduced(std::size_t b, std::size_t i, Reduce reduce) {
    T sum = 0;
    for (int r = 0; r < ranks(); ++r) {
        sum += value<T>(r, b, i);
    }
    return reduce == Reduce::mean ? sum / static_cast<T>(ranks()) : sum;
}

// Uneven blobs, empty ones among them, and one that spans several 256-byte steps.
template <class T, class A>
void add_model(ParameterArena<T, A>& arena) {
    for (std::int64_t n : {7, 0, 300, 1, 64, 0, 33}) {
        arena.add({n});
    }
}

template <class T, class A>
void fill_diffs_on_host(ParameterArena<T, A>& arena) {
    for (std::size_t b = 0; b < arena.size(); ++b) {
        auto diff = arena[b].mutable_host_diff();
        for (std::size_t i = 0; i < diff.size(); ++i) {
            diff[i] = value<T>(rank(), b, i);
        }
    }
}

template <class T>
void fill_diff_on_device(ParameterArena<T, Simulated>& arena, std::size_t b) {
    const auto n = static_cast<std::size_t>(arena[b].count());
    std::vector<T> values(n);
    for (std::size_t i = 0; i < n; ++i) {
        values[i] = value<T>(rank(), b, i);
    }
    syncblob_test::write_device<SimulatedDevice>(arena[b].mutable_device_diff(), values.data(), n * sizeof(T));
}

template <class T>
std::vector<T> device_values(const T* device, std::size_t n) {
    const auto bytes = syncblob_test::read_device<SimulatedDevice>(device, n * sizeof(T));
    std::vector<T> out(n);
    std::memcpy(out.data(), bytes.data(), bytes.size());
    return out;
}

template <class T, class Span>
bool matches_reference(const Span& values, std::size_t b, Reduce reduce) {
    for (std::size_t i = 0; i < values.size(); ++i) {
        if (values[i] != reduced<T>(b, i, reduce)) {
            return false;
        }
    }
    return true;
}

}  // namespace

TEMPLATE_TEST_CASE("mpi::allreduce_diff of host-fresh diffs equals the serial reference exactly", "[mpi]", float,
                   double) {
    SimulatedDevice::Scope scope({.checking = true});
    const Reduce reduce = GENERATE(Reduce::sum, Reduce::mean);
    ParameterArena<TestType, Simulated> arena;
    add_model(arena);
    arena.seal();
    fill_diffs_on_host(arena);
    for (auto& b : arena.blobs()) {
        b.reset_stats();
    }
    const CommStats stats = mpi::allreduce_diff(arena, MPI_COMM_WORLD, reduce);
    CHECK(stats.calls == 1);
    CHECK(stats.bytes == arena.bytes());
    CHECK(stats.staged_blobs == 0);
    CHECK_FALSE(stats.on_device);
    for (std::size_t b = 0; b < arena.size(); ++b) {
        CHECK(matches_reference<TestType>(arena[b].host_diff(), b, reduce));
        CHECK(arena[b].diff_stats().transfers() == 0);  // reduced where it was fresh: nothing copied
        CHECK((arena[b].count() == 0 || arena[b].diff_head() == Head::at_host));
    }
    // The data is left alone.
    const auto data = arena.flat_data().host_data();
    CHECK(std::all_of(data.begin(), data.end(), [](TestType x) { return x == 0; }));
}

TEST_CASE("mpi::allreduce_diff on a host-only arena", "[mpi]") {
    ParameterArena<double> arena;
    add_model(arena);
    arena.seal();
    fill_diffs_on_host(arena);
    const auto stats = mpi::allreduce_diff(arena, MPI_COMM_WORLD, Reduce::mean);
    CHECK(stats.calls == 1);
    for (std::size_t b = 0; b < arena.size(); ++b) {
        CHECK(matches_reference<double>(arena[b].host_diff(), b, Reduce::mean));
    }
}

TEST_CASE("mpi::allreduce_diff stages device-fresh diffs through host memory, one copy each way per blob", "[mpi]") {
    SimulatedDevice::Scope scope({.checking = true, .seed = static_cast<std::uint64_t>(rank())});
    const Reduce reduce = GENERATE(Reduce::sum, Reduce::mean);
    ParameterArena<float, Simulated> arena;
    add_model(arena);
    arena.seal();
    fill_diffs_on_host(arena);
    // Blobs 2, 4 and 6 fresh on the device only; 0 and 3 fresh on the host.
    for (std::size_t b : {2u, 4u, 6u}) {
        fill_diff_on_device(arena, b);
    }
    for (auto& b : arena.blobs()) {
        b.reset_stats();
    }
    const CommStats stats = mpi::allreduce_diff(arena, MPI_COMM_WORLD, reduce, {.device_aware = false});
    CHECK(stats.staged_blobs == 3);
    CHECK(stats.calls == 1);
    for (std::size_t b : {2u, 4u, 6u}) {
        const auto bytes = static_cast<std::uint64_t>(arena[b].count()) * sizeof(float);
        const auto s = arena[b].diff_stats();
        CHECK(s.device_to_host == 1);
        CHECK(s.device_to_host_bytes == bytes);
        CHECK(s.host_to_device == 1);
        CHECK(s.host_to_device_bytes == bytes);
        CHECK(arena[b].diff_head() == Head::synced);  // the result is where the gradient was, and on the host
        CHECK(matches_reference<float>(device_values(arena[b].device_diff(), bytes / sizeof(float)), b, reduce));
    }
    for (std::size_t b : {0u, 3u}) {
        CHECK(arena[b].diff_stats().transfers() == 0);
        CHECK(arena[b].diff_head() == Head::at_host);
        CHECK(matches_reference<float>(arena[b].host_diff(), b, reduce));
    }
    CHECK(SimulatedDevice::faults().empty());
}

TEST_CASE("mpi::allreduce_diff with a device-aware MPI sums device-fresh diffs in device memory", "[mpi]") {
    SimulatedDevice::Scope scope({.checking = true});
    ParameterArena<double, Simulated> arena;
    add_model(arena);
    arena.seal();
    for (std::size_t b = 0; b < arena.size(); ++b) {
        if (arena[b].count() != 0) {
            fill_diff_on_device(arena, b);
        }
    }
    for (auto& b : arena.blobs()) {
        b.reset_stats();
    }
    // SimulatedDevice's memory is host memory, so any MPI can play a device-aware one here.
    const CommStats sum = mpi::allreduce_diff(arena, MPI_COMM_WORLD, Reduce::sum, {.device_aware = true});
    CHECK(sum.on_device);
    CHECK(sum.staged_blobs == 0);
    for (std::size_t b = 0; b < arena.size(); ++b) {
        CHECK(arena[b].diff_stats().transfers() == 0);
        if (arena[b].count() != 0) {
            CHECK(arena[b].diff_head() == Head::at_device);
            CHECK(matches_reference<double>(
                device_values(arena[b].device_diff(), static_cast<std::size_t>(arena[b].count())), b, Reduce::sum));
        }
    }
    // A mean needs a division MPI cannot do: it is staged even so.
    const CommStats mean = mpi::allreduce_diff(arena, MPI_COMM_WORLD, Reduce::mean, {.device_aware = true});
    CHECK_FALSE(mean.on_device);
    CHECK(mean.staged_blobs == 5);
}

TEST_CASE("mpi::broadcast_data gives every rank the root's data", "[mpi]") {
    SimulatedDevice::Scope scope({.checking = true});
    const int root = ranks() - 1;
    ParameterArena<float, Simulated> arena;
    add_model(arena);
    arena.seal();
    for (std::size_t b = 0; b < arena.size(); ++b) {
        std::ranges::fill(arena[b].mutable_host_data(), static_cast<float>(rank() * 100 + static_cast<int>(b)));
    }
    (void)arena[2].mutable_device_data();  // fresh on the device only: it receives there
    for (auto& b : arena.blobs()) {
        b.reset_stats();
    }
    const CommStats stats = mpi::broadcast_data(arena, MPI_COMM_WORLD, root, {.device_aware = false});
    CHECK(stats.calls == 1);
    for (std::size_t b = 0; b < arena.size(); ++b) {
        const auto expected = static_cast<float>(root * 100 + static_cast<int>(b));
        CHECK(std::ranges::all_of(arena[b].host_data(), [&](float x) { return x == expected; }));
    }
    if (rank() == root) {
        CHECK(arena[2].data_stats().device_to_host == 1);  // the root reads its fresh bytes
        CHECK(arena[2].data_stats().host_to_device == 0);
    } else {
        CHECK(stats.staged_blobs == 1);
        CHECK(arena[2].data_stats().device_to_host == 0);  // overwritten whole: nothing to fetch
        CHECK(arena[2].data_stats().host_to_device == 1);  // and back where it was fresh
        CHECK(arena[2].data_head() == Head::synced);
    }
    CHECK_THROWS_AS(mpi::broadcast_data(arena, MPI_COMM_WORLD, ranks()), syncblob::IndexError);
    CHECK_THROWS_AS(mpi::broadcast_data(arena, MPI_COMM_WORLD, -1), syncblob::IndexError);
}

TEST_CASE("mpi::iallreduce_diff reduces bucket by bucket, in reverse order of addition", "[mpi]") {
    SimulatedDevice::Scope scope({.checking = true});
    const Reduce reduce = GENERATE(Reduce::sum, Reduce::mean);
    ParameterArena<float, Simulated> arena;
    add_model(arena);  // slices at 0, 256, 256, 1536, 1792, 2048, 2048
    arena.seal();
    fill_diffs_on_host(arena);
    fill_diff_on_device(arena, 4);

    mpi::BucketedAllreduce<float, Simulated> pending(arena, MPI_COMM_WORLD, reduce, 512, 512, {.device_aware = false});
    REQUIRE(pending.buckets().size() == 4);  // {4, 5, 6}, {3}, {2}, {0, 1}
    CHECK(pending.buckets()[0].first == 4);
    CHECK(pending.started() == 0);
    pending.ready(6);
    pending.ready(5);
    CHECK(pending.started() == 0);  // blob 4 is not ready yet
    pending.ready(2);
    CHECK(pending.started() == 0);  // bucket {2} waits for the buckets before it
    pending.ready(4);
    CHECK(pending.started() == 1);
    pending.ready(3);
    CHECK(pending.started() == 3);
    (void)pending.test();
    const CommStats stats = pending.wait();
    CHECK(pending.started() == 4);
    CHECK(stats.calls == 4);
    CHECK(stats.staged_blobs == 1);
    CHECK(arena[4].diff_head() == Head::synced);
    CHECK(arena[4].diff_stats().device_to_host == 1);
    for (std::size_t b = 0; b < arena.size(); ++b) {
        CHECK(matches_reference<float>(arena[b].host_diff(), b, reduce));
    }
    CHECK_THROWS_AS(pending.ready(0), syncblob::StateError);
    CHECK_THROWS_AS(pending.wait(), syncblob::StateError);

    // All buckets at once.
    fill_diffs_on_host(arena);
    auto all = mpi::iallreduce_diff(arena, MPI_COMM_WORLD, reduce, 300);
    CHECK(all.started() == all.buckets().size());
    const CommStats all_stats = all.wait();
    CHECK(all_stats.calls == all.buckets().size());
    for (std::size_t b = 0; b < arena.size(); ++b) {
        CHECK(matches_reference<float>(arena[b].host_diff(), b, reduce));
    }
}

TEST_CASE("mpi: runs over the count limit are split (INT_MAX in production, lowered here)", "[mpi]") {
    mpi::detail::ScopedMaxCount limit(100);
    ParameterArena<float> arena;
    add_model(arena);  // 576 floats with padding
    arena.seal();
    REQUIRE(arena.bytes() / sizeof(float) == 576);
    fill_diffs_on_host(arena);
    CHECK(mpi::allreduce_diff(arena, MPI_COMM_WORLD, Reduce::mean).calls == 6);
    for (std::size_t b = 0; b < arena.size(); ++b) {
        CHECK(matches_reference<float>(arena[b].host_diff(), b, Reduce::mean));
    }

    fill_diffs_on_host(arena);
    auto pending = mpi::iallreduce_diff(arena, MPI_COMM_WORLD, Reduce::sum, 1024);
    const auto stats = pending.wait();
    std::uint64_t expected_calls = 0;
    for (const auto& bucket : pending.buckets()) {
        expected_calls += (bucket.bytes / sizeof(float) + 99) / 100;
    }
    CHECK(stats.calls == expected_calls);
    CHECK(stats.calls > pending.buckets().size());
    for (std::size_t b = 0; b < arena.size(); ++b) {
        CHECK(matches_reference<float>(arena[b].host_diff(), b, Reduce::sum));
    }

    for (std::size_t b = 0; b < arena.size(); ++b) {
        std::ranges::fill(arena[b].mutable_host_data(), rank() == 0 ? 5.0f : -1.0f);
    }
    CHECK(mpi::broadcast_data(arena, MPI_COMM_WORLD, 0).calls == 6);
    CHECK(std::ranges::all_of(arena[2].host_data(), [](float x) { return x == 5.0f; }));
}

TEST_CASE("mpi calls left to choose their pieces cut 4 MiB on one host and 32 MiB across hosts", "[mpi]") {
    // Where the ranks run, as MPI's shared-memory split tells it (the calls learn it from the
    // agreement instead): more than one group is more than one host.
    MPI_Comm local = MPI_COMM_NULL;
    REQUIRE(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local) == MPI_SUCCESS);
    const bool across_hosts = size_of(local) < ranks();
    MPI_Comm_free(&local);
    INFO((across_hosts ? "across hosts, " : "on one host, ") << ranks() << " ranks");
    STATIC_REQUIRE(mpi::piece_bytes_within_host == std::size_t{4} << 20);
    STATIC_REQUIRE(mpi::piece_bytes_across_hosts == std::size_t{32} << 20);
    ParameterArena<float> arena;
    arena.add({std::int64_t{10} << 20});  // 40 MiB: 10 pieces of 4 MiB, or 32 MiB and 8 MiB
    arena.seal();
    const std::uint64_t expected = across_hosts ? 2 : 10;
    const Reduce reduce = GENERATE(Reduce::sum, Reduce::mean);
    const float expected_value =
        reduce == Reduce::sum ? static_cast<float>(ranks() * (ranks() + 1) / 2) : static_cast<float>(ranks() + 1) / 2;
    const auto fill = [&] {
        auto diff = arena[0].mutable_host_diff();
        std::ranges::fill(diff, static_cast<float>(rank() + 1));
    };
    const auto reduced_everywhere = [&] {
        const auto diff = arena[0].host_diff();
        return std::ranges::all_of(diff, [&](float x) { return x == expected_value; });
    };
    fill();
    CHECK(mpi::allreduce_diff(arena, MPI_COMM_WORLD, reduce).calls == expected);
    CHECK(reduced_everywhere());
    fill();
    auto pending = mpi::iallreduce_diff(arena, MPI_COMM_WORLD, reduce, std::size_t{64} << 20);
    CHECK(pending.wait().calls == expected);
    CHECK(reduced_everywhere());
    // Set, the value is taken wherever the ranks run.
    fill();
    CHECK(mpi::allreduce_diff(arena, MPI_COMM_WORLD, reduce, {.piece_bytes = std::size_t{16} << 20}).calls == 3);
    CHECK(reduced_everywhere());
}

TEST_CASE("mpi::allreduce_diff in pieces that cut across blobs gives the serial reference exactly", "[mpi]") {
    ParameterArena<double> arena;
    add_model(arena);  // 512 doubles with padding (4096 bytes)
    arena.seal();
    REQUIRE(arena.bytes() / sizeof(double) == 512);
    const Reduce reduce = GENERATE(Reduce::sum, Reduce::mean);
    for (const std::size_t piece_bytes : {std::size_t{1000}, std::size_t{8}, std::size_t{4096}, std::size_t{0}}) {
        INFO("piece_bytes " << piece_bytes);
        fill_diffs_on_host(arena);
        // 1000 bytes are 125 doubles: 5 calls, the last of 12; 8 bytes one double per call.
        const std::uint64_t expected = piece_bytes == 1000 ? 5 : piece_bytes == 8 ? 512 : 1;
        CHECK(mpi::allreduce_diff(arena, MPI_COMM_WORLD, reduce, {.piece_bytes = piece_bytes}).calls == expected);
        for (std::size_t b = 0; b < arena.size(); ++b) {
            CHECK(matches_reference<double>(arena[b].host_diff(), b, reduce));
        }
    }
    // The bucketed form starts one request per piece of each bucket.
    fill_diffs_on_host(arena);
    mpi::Options options;
    options.piece_bytes = 1000;
    auto pending = mpi::iallreduce_diff(arena, MPI_COMM_WORLD, reduce, 2048, options);
    const auto bucketed = pending.wait();
    std::uint64_t expected_requests = 0;
    for (const auto& bucket : pending.buckets()) {
        expected_requests += (bucket.bytes / sizeof(double) + 124) / 125;
    }
    CHECK(pending.buckets().size() > 1);
    CHECK(bucketed.calls == expected_requests);
    CHECK(bucketed.calls > pending.buckets().size());
    for (std::size_t b = 0; b < arena.size(); ++b) {
        CHECK(matches_reference<double>(arena[b].host_diff(), b, reduce));
    }
    // Pieces and the count limit together: each piece is split again.
    mpi::detail::ScopedMaxCount limit(100);
    fill_diffs_on_host(arena);
    CHECK(mpi::allreduce_diff(arena, MPI_COMM_WORLD, reduce, {.piece_bytes = 1000}).calls == 4 * 2 + 1);
    for (std::size_t b = 0; b < arena.size(); ++b) {
        CHECK(matches_reference<double>(arena[b].host_diff(), b, reduce));
    }
}

TEST_CASE("mpi: arenas that differ between ranks are a StateError on every rank, before any data moves", "[mpi]") {
    if (!has_ranks(2)) {
        return;
    }
    const int odd_rank = 1;
    const auto expect_refused = [&](auto& arena, const std::string& fragment, auto call) {
        std::vector<float> before;
        if (arena.sealed()) {
            for (const float x : arena.flat_diff().host_data()) {
                before.push_back(x);
            }
        }
        std::string message;
        try {
            call();
        } catch (const syncblob::StateError& e) {
            message = e.what();
        }
        INFO("rank " << rank() << ": " << message);
        CHECK(message.find(fragment) != std::string::npos);
        CHECK(everywhere(!message.empty()));
        if (arena.sealed()) {
            const auto after = arena.flat_diff().host_data();
            CHECK(std::equal(after.begin(), after.end(), before.begin(), before.end()));
        }
    };

    SECTION("one rank has an extra blob") {
        ParameterArena<float> arena;
        add_model(arena);
        if (rank() == odd_rank) {
            arena.add({5});
        }
        arena.seal();
        fill_diffs_on_host(arena);
        expect_refused(arena, "the arenas differ: rank 0 has 7 blobs",
                       [&] { mpi::allreduce_diff(arena, MPI_COMM_WORLD, Reduce::sum); });
    }
    SECTION("one rank's blob shapes differ, with the same sizes") {
        ParameterArena<float> arena;
        arena.add(rank() == odd_rank ? syncblob::Shape{3, 2} : syncblob::Shape{2, 3});
        arena.seal();
        fill_diffs_on_host(arena);
        expect_refused(arena, "blob shapes differ from rank 0's",
                       [&] { mpi::allreduce_diff(arena, MPI_COMM_WORLD, Reduce::sum); });
    }
    SECTION("one rank's arena holds doubles") {
        ParameterArena<float> floats;
        floats.add({8});
        floats.seal();
        ParameterArena<double> doubles;
        doubles.add({8});
        doubles.seal();
        expect_refused(floats, "of F32", [&] {
            if (rank() == odd_rank) {
                mpi::allreduce_diff(doubles, MPI_COMM_WORLD, Reduce::sum);
            } else {
                mpi::allreduce_diff(floats, MPI_COMM_WORLD, Reduce::sum);
            }
        });
    }
    SECTION("one rank did not seal") {
        ParameterArena<float> arena;
        add_model(arena);
        if (rank() != odd_rank) {
            arena.seal();
        }
        expect_refused(arena, "'s arena cannot be used",
                       [&] { mpi::allreduce_diff(arena, MPI_COMM_WORLD, Reduce::sum); });
    }
    SECTION("one rank asks for another reduction, or other buckets") {
        ParameterArena<float> arena;
        add_model(arena);
        arena.seal();
        fill_diffs_on_host(arena);
        expect_refused(
            arena,
            "disagree on the call's arguments: rank 0 passes Reduce::sum, pieces as the hosts suggest "
            "(Options::piece_bytes unset), rank " +
                std::to_string(odd_rank) + " passes Reduce::mean, pieces as the hosts suggest",
            [&] { mpi::allreduce_diff(arena, MPI_COMM_WORLD, rank() == odd_rank ? Reduce::mean : Reduce::sum); });
        expect_refused(
            arena,
            "rank 0 passes Reduce::sum, first bucket 1024 bytes, buckets of 1024 bytes, pieces as the hosts "
            "suggest (Options::piece_bytes unset), rank " +
                std::to_string(odd_rank) + " passes Reduce::sum, first bucket 512 bytes, buckets of 512 bytes",
            [&] { (void)mpi::iallreduce_diff(arena, MPI_COMM_WORLD, Reduce::sum, rank() == odd_rank ? 512u : 1024u); });
        expect_refused(arena, "disagree on the call's arguments", [&] {
            mpi::Options options;
            options.piece_bytes = rank() == odd_rank ? 512 : 1024;
            mpi::allreduce_diff(arena, MPI_COMM_WORLD, Reduce::sum, options);
        });
        expect_refused(arena, "disagree on the call's arguments", [&] {
            mpi::Options options;
            options.piece_bytes = rank() == odd_rank ? 512 : 1024;
            (void)mpi::iallreduce_diff(arena, MPI_COMM_WORLD, Reduce::sum, 1024, options);
        });
        // Set on one rank and unset on another is a disagreement too, even where the value set is
        // the one the others would choose.
        expect_refused(arena,
                       "rank 0 passes Reduce::sum, pieces as the hosts suggest (Options::piece_bytes unset), rank " +
                           std::to_string(odd_rank) + " passes Reduce::sum, pieces of 4194304 bytes",
                       [&] {
                           mpi::Options options;
                           if (rank() == odd_rank) {
                               options.piece_bytes = mpi::piece_bytes_within_host;
                           }
                           mpi::allreduce_diff(arena, MPI_COMM_WORLD, Reduce::sum, options);
                       });
    }
}

TEST_CASE("mpi: a rank that fails before communicating makes every rank throw, not hang", "[mpi]") {
    const int odd_rank = ranks() > 1 ? 1 : 0;
    const bool failing = rank() == odd_rank;
    // The failing rank's first copy fails: the staging copy D->H of a device-fresh blob (allreduce),
    // or of the root's device-fresh data (broadcast from that rank).
    SimulatedDevice::Scope scope(SimulatedDevice::Settings{});
    ParameterArena<float, Simulated> arena;
    add_model(arena);
    arena.seal();
    fill_diffs_on_host(arena);
    const auto outcome = [&](auto call) {
        std::string message;
        try {
            SimulatedDevice::Scope fail({.fail_copy = failing ? 1u : 0u});
            call();
        } catch (const syncblob::DeviceError& e) {
            message = std::string("DeviceError: ") + e.what();
        } catch (const syncblob::StateError& e) {
            message = std::string("StateError: ") + e.what();
        }
        INFO("rank " << rank() << ": " << message);
        if (failing) {
            CHECK_THAT(message, Catch::StartsWith("DeviceError: ") && Catch::Contains("fail_copy"));
        } else {
            CHECK_THAT(message, Catch::StartsWith("StateError: ") &&
                                    Catch::Contains("rank " + std::to_string(odd_rank) + " failed before") &&
                                    Catch::Contains("no rank's data was changed"));
        }
        CHECK(everywhere(!message.empty()));
    };

    SECTION("allreduce_diff, staging a device-fresh diff") {
        std::vector<float> device(static_cast<std::size_t>(arena[2].count()), 3.0f);
        syncblob_test::write_device<SimulatedDevice>(arena[2].mutable_device_diff(), device.data(),
                                                     device.size() * sizeof(float));
        outcome([&] { mpi::allreduce_diff(arena, MPI_COMM_WORLD, Reduce::sum, {.device_aware = false}); });
        // Every rank's host-fresh diffs are as they were: nothing was reduced anywhere.
        CHECK(matches_reference<float>(arena[0].host_diff(), 0, Reduce::sum) == (ranks() == 1));
        fill_diffs_on_host(arena);
        mpi::allreduce_diff(arena, MPI_COMM_WORLD, Reduce::sum);  // and the next call works everywhere
        CHECK(matches_reference<float>(arena[2].host_diff(), 2, Reduce::sum));
    }
    SECTION("broadcast_data, the root staging its device-fresh data") {
        std::vector<float> device(static_cast<std::size_t>(arena[2].count()), 3.0f);
        syncblob_test::write_device<SimulatedDevice>(arena[2].mutable_device_data(), device.data(),
                                                     device.size() * sizeof(float));
        outcome([&] { mpi::broadcast_data(arena, MPI_COMM_WORLD, odd_rank, {.device_aware = false}); });
        // No rank's data was given up for the broadcast that did not happen.
        CHECK(arena[2].host_data()[0] == 3.0f);
        CHECK(arena[0].host_data()[0] == 0.0f);
    }
}

TEST_CASE("mpi: a failing MPI call is a CommError with the call and MPI's message", "[mpi]") {
    mpi::detail::ErrorsReturn errors(MPI_COMM_WORLD, "test");
    int x = 0;
    try {
        mpi::detail::check(MPI_Bcast(&x, 1, MPI_INT, ranks() + 3, MPI_COMM_WORLD), "mpi::broadcast_data", "MPI_Bcast");
        FAIL("MPI_Bcast to a root outside the communicator succeeded");
    } catch (const syncblob::CommError& e) {
        CHECK(e.call() == "MPI_Bcast");
        CHECK(e.code() != MPI_SUCCESS);
        CHECK_THAT(e.what(), Catch::StartsWith("mpi::broadcast_data: MPI_Bcast failed: ") && Catch::Contains("root") &&
                                 Catch::Contains("error class"));
    }
    CHECK_THROWS_WITH(mpi::detail::ErrorsReturn(MPI_COMM_NULL, "mpi::allreduce_diff"),
                      "mpi::allreduce_diff: the communicator is MPI_COMM_NULL");
}
