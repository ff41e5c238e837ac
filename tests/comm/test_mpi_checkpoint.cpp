// SPDX-License-Identifier: BSD-2-Clause
// mpi::load_shared, run on every rank of `mpirun -np N` (on one host, and across two with
// scripts/two-hosts): every rank's arena holds, bit for bit, what a load on one rank gives; the
// ranks' shares tile the checkpoint, each read once; and a rank that cannot load, or whose arena or
// checkpoint differs, is an exception on every rank instead of a hang.
#include <mpi.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <syncblob/comm/mpi_checkpoint.hpp>
#include <syncblob/sim/device.hpp>

#include "../checkpoint/checkpoint_support.hpp"
#include "mpi_test_support.hpp"

using syncblob::Head;
using syncblob::checkpoint::Checkpoint;
using syncblob::checkpoint::CheckpointArena;
using syncblob::checkpoint::LoadOptions;
namespace mpi = syncblob::mpi;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

std::uint64_t summed(std::uint64_t mine) {
    std::uint64_t all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    return all;
}

// A folder every rank sees (the ranks of a run share a file system, on one host and across the
// two of scripts/two-hosts), made by rank 0 and removed by it at the end.
class SharedDir {
public:
    SharedDir() {
        std::string name;
        if (rank_in(MPI_COMM_WORLD) == 0) {
            name = (fs::temp_directory_path() /
                    ("syncblob-shared-load-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++)))
                       .string();
            fs::create_directories(name);
        }
        int n = static_cast<int>(name.size());
        MPI_Bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD);
        name.resize(static_cast<std::size_t>(n));
        MPI_Bcast(name.data(), n, MPI_CHAR, 0, MPI_COMM_WORLD);
        path_ = name;
    }
    ~SharedDir() {
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank_in(MPI_COMM_WORLD) == 0) {
            std::error_code ec;
            fs::remove_all(path_, ec);
        }
    }
    SharedDir(const SharedDir&) = delete;
    SharedDir& operator=(const SharedDir&) = delete;
    [[nodiscard]] const fs::path& path() const noexcept { return path_; }

private:
    static int& counter() {
        static int c = 0;
        return c;
    }
    fs::path path_;
};

// test::save_with_diffs, written by rank 0 in shards of at most `max_shard` bytes (as element type
// T), then opened on every rank.
template <class T = float>
Checkpoint write_checkpoint(const SharedDir& dir, std::uint64_t max_shard = 6000) {
    if (rank_in(MPI_COMM_WORLD) == 0) {
        (void)test::save_with_diffs<T>(dir.path(), 3, max_shard);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    return Checkpoint::open(dir.path());
}

using test::same_bytes;

}  // namespace

TEST_CASE("mpi::load_shared gives every rank a load on one rank, bit for bit, each byte read once", "[mpi][load]") {
    SharedDir dir;
    const Checkpoint ckpt = write_checkpoint(dir);
    REQUIRE(ckpt.shards().size() > 2);
    LoadOptions load;
    load.chunk_bytes = GENERATE(std::size_t{1}, std::size_t{8} << 20);  // taken as 4096: many chunks; or one per share
    load.threads = GENERATE(1u, 0u);
    CheckpointArena<float> single(ckpt);
    const auto single_report = single.load(ckpt, load);
    // [shared-load]
    // On every rank: the same checkpoint, the same arena. Each rank reads its share of the bytes;
    // an all-gather gives every rank the others'.
    CheckpointArena<float> shared(ckpt);
    const mpi::SharedLoadReport report = mpi::load_shared(shared, ckpt, MPI_COMM_WORLD, load);
    // [shared-load]
    INFO("rank " << rank_in(MPI_COMM_WORLD) << ": read " << report.bytes_read << " of " << report.bytes_loaded
                 << " B, received " << report.bytes_received << " B in " << report.calls << " calls");
    CHECK(everywhere(same_bytes(shared, single)));
    // The shares tile the tensors: together the ranks read each byte once, and no rank all of them.
    CHECK(report.bytes_loaded == single_report.bytes_read);
    CHECK(summed(report.bytes_read) == report.bytes_loaded);
    if (size_of(MPI_COMM_WORLD) > 1) {
        CHECK(report.bytes_read < report.bytes_loaded);
        CHECK(report.bytes_received > 0);
    }
    CHECK(report.calls == 4);  // the data, and the three runs of blobs with diffs
    for (const auto& blob : shared.arena().blobs()) {
        CHECK(blob.data_head() == Head::at_host);
    }
}

TEST_CASE("mpi::load_shared converts as a load on one rank does, and cuts a run at MPI's count limit", "[mpi][load]") {
    SharedDir dir;
    const Checkpoint ckpt = write_checkpoint<double>(dir);
    LoadOptions load;
    load.convert = true;
    CheckpointArena<float> single(ckpt);
    (void)single.load(ckpt, load);
    // Three 256-byte units per call at most, so every run takes several calls.
    const mpi::detail::ScopedMaxCount small(3);
    CheckpointArena<float> shared(ckpt);
    const auto report = mpi::load_shared(shared, ckpt, MPI_COMM_WORLD, load);
    CHECK(everywhere(same_bytes(shared, single)));
    std::vector<bool> with_diff;
    for (const auto& name : shared.names()) {
        with_diff.push_back(ckpt.diff_of(ckpt.at(name)) != nullptr);
    }
    std::uint64_t calls = 0;
    for (const auto& region : syncblob::comm::detail::load_regions(shared.arena(), with_diff, 3)) {
        CHECK(region.end - region.first <= 3 * 256);
        ++calls;
    }
    CHECK(report.calls == calls);
    CHECK(report.calls > 4);
}

TEST_CASE("mpi::load_shared into an arena with a device fills its host side", "[mpi][load]") {
    syncblob::SimulatedDevice::Scope scope({.checking = true});
    SharedDir dir;
    const Checkpoint ckpt = write_checkpoint(dir);
    CheckpointArena<float, syncblob::HostOnly> single(ckpt);
    (void)single.load(ckpt);
    CheckpointArena<float, syncblob::Simulated> shared(ckpt);
    for (auto& blob : shared.arena().blobs()) {
        (void)blob.mutable_device_data();  // a stale host side that the load overwrites whole
    }
    (void)mpi::load_shared(shared, ckpt, MPI_COMM_WORLD);
    CHECK(everywhere(same_bytes(shared, single)));
    for (const auto& blob : shared.arena().blobs()) {
        CHECK(blob.data_head() == Head::at_host);
    }
}

TEST_CASE("mpi::load_shared: a rank that cannot load, or whose arena or checkpoint differs, fails every rank",
          "[mpi][load]") {
    if (!has_ranks(2)) {
        return;
    }
    SharedDir dir;
    const Checkpoint ckpt = write_checkpoint(dir);
    const int odd = size_of(MPI_COMM_WORLD) - 1;
    const bool is_odd = rank_in(MPI_COMM_WORLD) == odd;
    const std::string failed =
        "StateError: mpi::load_shared: rank " + std::to_string(odd) + " failed before communicating";

    SECTION("a dtype the arena does not hold, without convert, on one rank") {
        SharedDir other;
        const Checkpoint doubles = write_checkpoint<double>(other);
        CheckpointArena<float> arena(ckpt);
        const std::string got = outcome([&] { mpi::load_shared(arena, is_odd ? doubles : ckpt, MPI_COMM_WORLD); });
        INFO(got);
        if (is_odd) {
            CHECK_THAT(got, Catch::StartsWith("FormatError: ") && Catch::Contains("set LoadOptions::convert"));
        } else {
            CHECK_THAT(got, Catch::StartsWith(failed));
        }
    }
    SECTION("Target::device on one rank") {
        CheckpointArena<float> arena(ckpt);
        LoadOptions load;
        load.target = is_odd ? syncblob::checkpoint::Target::device : syncblob::checkpoint::Target::host;
        const std::string got = outcome([&] { mpi::load_shared(arena, ckpt, MPI_COMM_WORLD, load); });
        INFO(got);
        CHECK_THAT(got, Catch::StartsWith(
                            is_odd ? "OptionError: mpi::load_shared: LoadOptions::target is Target::device" : failed));
    }
    SECTION("an arena of other blobs on one rank") {
        const std::vector<std::string> fewer{"embed"};
        CheckpointArena<float> arena = is_odd ? CheckpointArena<float>(ckpt, fewer) : CheckpointArena<float>(ckpt);
        const std::string got = outcome([&] { mpi::load_shared(arena, ckpt, MPI_COMM_WORLD); });
        INFO(got);
        CHECK_THAT(got, Catch::StartsWith("StateError: mpi::load_shared: the arenas differ"));
    }
    SECTION("a checkpoint of other shards on one rank, the same tensors") {
        SharedDir other;
        const Checkpoint resharded = write_checkpoint(other, 1u << 20);  // one shard
        CheckpointArena<float> arena(ckpt);
        const std::string got = outcome([&] { mpi::load_shared(arena, is_odd ? resharded : ckpt, MPI_COMM_WORLD); });
        INFO(got);
        CHECK_THAT(got, Catch::StartsWith("StateError: mpi::load_shared: the ranks' checkpoints differ: rank " +
                                          std::to_string(odd)));
    }
    // The communicator is still usable: every rank failed in the agreement, which moved no data.
    CheckpointArena<float> arena(ckpt);
    CheckpointArena<float> single(ckpt);
    (void)single.load(ckpt);
    (void)mpi::load_shared(arena, ckpt, MPI_COMM_WORLD);
    CHECK(everywhere(same_bytes(arena, single)));
}

TEST_CASE("mpi::load_shared: a rank that never joins ends the others' waits in a TimeoutError",
          "[mpi][load][hostile]") {
    if (!has_ranks(2)) {
        return;
    }
    SharedDir dir;
    const Checkpoint ckpt = write_checkpoint(dir);
    OwnComm own;
    const bool late = rank_in(MPI_COMM_WORLD) == size_of(MPI_COMM_WORLD) - 1;
    CheckpointArena<float> arena(ckpt);
    const mpi::Options options{.timeout = 300ms};
    std::string got;
    const auto start = std::chrono::steady_clock::now();
    if (!late) {
        got = outcome([&] { mpi::load_shared(arena, ckpt, own.comm, {}, options); });
        CHECK(std::chrono::steady_clock::now() - start < 10s);
        CHECK_THAT(got, Catch::StartsWith("TimeoutError: mpi::load_shared: timed out after 300 ms on rank ") &&
                            Catch::Contains("every rank to join the agreement"));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (late) {
        got = outcome([&] { mpi::load_shared(arena, ckpt, own.comm, {}, options); });
        CHECK_THAT(got, Catch::StartsWith("TimeoutError: mpi::load_shared: timed out after 300 ms"));
    }
}
