// SPDX-License-Identifier: BSD-2-Clause
// nccl::load_shared without a GPU: this program is linked with the stand-in of tests/cuda/standin
// (each CUDA runtime and NCCL call runs at once on host memory and is counted; the ranks of one
// ncclCommInitAll are threads that meet in each collective). On 1, 2 and 3 ranks every rank's
// device arena holds, bit for bit, what a load on one rank gives; the ranks' shares tile the
// checkpoint, each byte read once; conversions run as a load on one rank runs them; and a rank that
// cannot load, or whose arena or checkpoint differs, is an exception on every rank.

#include <nccl.h>
#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <syncblob/checkpoint.hpp>
#include <syncblob/comm/nccl_checkpoint.hpp>
#include <syncblob/cuda/allocator.hpp>
#include <syncblob/cuda/async_pool.hpp>

#include "../checkpoint/checkpoint_support.hpp"
#include "nccl_ranks.hpp"
#include "standin/checkpoint_convert.hpp"
#include "standin/standin.hpp"

namespace sb = syncblob;
namespace nccl = syncblob::nccl;
using Catch::Matchers::Contains;
using sb::Head;
using sb::checkpoint::Checkpoint;
using sb::checkpoint::CheckpointArena;
using sb::checkpoint::LoadOptions;

namespace {

template <class T = float>
Checkpoint write_checkpoint(const std::filesystem::path& dir, int layers = 3, std::uint64_t max_shard = 6000) {
    return Checkpoint::open(test::save_with_diffs<T>(dir, layers, max_shard));
}

using test::same_bytes;

// `body(rank, comm, failures)` on a thread per rank of a communicator of `ranks`, all on the stand-in's
// one device; what went wrong, by rank.
std::vector<std::string> on_ranks(int ranks, const std::function<void(int, ncclComm_t, std::string&)>& body) {
    return nccl_test::on_ranks(
        ranks, [&](int rank, int, ncclComm_t comm, std::string& failed) { body(rank, comm, failed); }, false);
}

using nccl_test::expect;

// What `fn` throws as E, on this rank: its message, or what went wrong instead.
template <class E>
std::string thrown(const std::function<void()>& fn) {
    try {
        fn();
    } catch (const E& e) {
        return e.what();
    } catch (const std::exception& e) {
        return std::string("another exception: ") + e.what();
    }
    return "nothing thrown";
}

}  // namespace

TEST_CASE("nccl::load_shared gives every rank's device arena a load on one rank, bit for bit, each byte read once",
          "[standin][nccl][load]") {
    const test::TempDir dir;
    const Checkpoint ckpt = write_checkpoint(dir.path());
    REQUIRE(ckpt.shards().size() > 2);
    const int ranks = GENERATE(1, 2, 3);
    LoadOptions load;
    load.chunk_bytes = GENERATE(std::size_t{1}, std::size_t{8} << 20);  // taken as 4096: many chunks; or one per share
    load.threads = GENERATE(1u, 0u);
    CAPTURE(ranks, load.chunk_bytes, load.threads);
    CheckpointArena<float> single(ckpt);
    const auto single_report = single.load(ckpt, load);
    std::vector<sb::SharedLoadReport> reports(static_cast<std::size_t>(ranks));
    std::vector<std::optional<CheckpointArena<float, sb::cuda::Allocator>>> arenas(static_cast<std::size_t>(ranks));
    for (auto& arena : arenas) {
        arena.emplace(ckpt);
    }
    syncblob_standin::reset();
    const auto failures = on_ranks(ranks, [&](int rank, ncclComm_t comm, std::string&) {
        const auto r = static_cast<std::size_t>(rank);
        reports[r] = nccl::load_shared(*arenas[r], ckpt, comm, load);
    });
    const auto counted = syncblob_standin::all_calls();  // the loads' calls, not the reads' below
    for (std::size_t r = 0; r < arenas.size(); ++r) {
        CAPTURE(r);
        const auto& report = reports[r];
        for (const auto& blob : arenas[r]->arena().blobs()) {
            CHECK(blob.data_head() == Head::at_device);
        }
        CHECK(same_bytes(*arenas[r], single));
        CHECK(report.bytes_loaded == single_report.bytes_read);
        if (ranks > 1) {
            CHECK(report.bytes_read < report.bytes_loaded);  // no rank read everything
            CHECK(report.bytes_received > 0);
        } else {
            CHECK(report.bytes_read == report.bytes_loaded);
            CHECK(report.bytes_received == 0);
        }
    }
    CHECK(failures == std::vector<std::string>(static_cast<std::size_t>(ranks)));
    std::uint64_t read = 0;
    std::uint64_t calls = 0;
    for (const auto& r : reports) {
        read += r.bytes_read;
        calls += r.calls;
    }
    // The shares tile the tensors: together the ranks read each byte once.
    CHECK(read == single_report.bytes_read);
    // One group per run of the arena on each rank (the data, and the three runs of blobs with diffs),
    // each rank's broadcasts counted by the stand-in as the reports count them.
    const auto times = [&](const char* call) {
        const auto it = counted.find(call);
        return it == counted.end() ? std::uint64_t{0} : it->second;
    };
    CHECK(times("ncclGroupStart") == 4u * static_cast<unsigned>(ranks));
    CHECK(times("ncclGroupEnd") == 4u * static_cast<unsigned>(ranks));
    CHECK(times("ncclBroadcast") == calls);
    CHECK(calls >= 4u * static_cast<unsigned>(ranks));
    // The broadcasts are queued, not waited for: on one rank, reading on one thread, the load waits
    // as a device load of the whole checkpoint waits (for its staging blocks), and besides only in the
    // agreement (its gather's event, and its two synchronous copies of the descriptors).
    CHECK(times("cudaDeviceSynchronize") == 0);
    if (ranks == 1 && load.threads == 1) {
        CheckpointArena<float, sb::cuda::Allocator> plain(ckpt);
        syncblob_standin::reset();
        (void)plain.load(ckpt, load);
        CHECK(times("cudaEventSynchronize") == syncblob_standin::calls("cudaEventSynchronize") + 1);
        CHECK(times("cudaStreamSynchronize") == syncblob_standin::calls("cudaStreamSynchronize") + 2);
        CHECK(times("cudaMemcpyAsync H->D") == syncblob_standin::calls("cudaMemcpyAsync H->D") + 1);
        CHECK(times("cudaMemcpyAsync D->H") == 1);
    }
}

TEST_CASE("nccl::load_shared converts as a load on one rank does, on the device where it cannot refuse a value",
          "[standin][nccl][load]") {
    const test::TempDir dir;
    const int ranks = 2;
    SECTION("BF16 into float: staged raw, converted by the device's conversion") {
        const Checkpoint ckpt = write_checkpoint<sb::bfloat16>(dir.path());
        LoadOptions load;
        load.convert = true;
        CheckpointArena<float> single(ckpt);
        (void)single.load(ckpt, load);
        const auto failures = on_ranks(ranks, [&](int, ncclComm_t comm, std::string& failed) {
            CheckpointArena<float, sb::cuda::AsyncAllocator> shared(ckpt);
            expect(thrown<sb::FormatError>([&] {
                       (void)nccl::load_shared(shared, ckpt, comm);
                   }).find("(set LoadOptions::convert to convert)") != std::string::npos,
                   failed, "BF16 loaded without convert");
            (void)nccl::load_shared(shared, ckpt, comm, load);
            expect(same_bytes(shared, single), failed, "bytes differ from a load on one rank");
        });
        CHECK(failures == std::vector<std::string>(ranks));
    }
    SECTION("F64 into float: converted on the host while staging") {
        const Checkpoint ckpt = write_checkpoint<double>(dir.path());
        LoadOptions load;
        load.convert = true;
        CheckpointArena<float> single(ckpt);
        (void)single.load(ckpt, load);
        const auto failures = on_ranks(ranks, [&](int, ncclComm_t comm, std::string& failed) {
            CheckpointArena<float, sb::cuda::Allocator> shared(ckpt);
            (void)nccl::load_shared(shared, ckpt, comm, load);
            expect(same_bytes(shared, single), failed, "bytes differ from a load on one rank");
        });
        CHECK(failures == std::vector<std::string>(ranks));
    }
}

TEST_CASE("nccl::load_shared: a rank that cannot load, or whose arena or checkpoint differs, fails every rank",
          "[standin][nccl][load]") {
    const test::TempDir dir;
    const test::TempDir other_dir;
    const Checkpoint ckpt = write_checkpoint(dir.path());
    const Checkpoint other = write_checkpoint(other_dir.path(), 3, 1 << 20);  // the same tensors in one shard
    const int ranks = 2;
    std::vector<std::string> messages(ranks);
    const auto run = [&](const std::function<void(int, ncclComm_t)>& body) {
        messages.assign(ranks, "");
        return on_ranks(ranks, [&](int rank, ncclComm_t comm, std::string&) {
            messages[static_cast<std::size_t>(rank)] = thrown<sb::Error>([&] { body(rank, comm); });
        });
    };
    SECTION("a rank asks for the host side") {
        (void)run([&](int rank, ncclComm_t comm) {
            CheckpointArena<float, sb::cuda::Allocator> shared(ckpt);
            LoadOptions load;
            load.target = rank == 1 ? sb::checkpoint::Target::host : sb::checkpoint::Target::automatic;
            (void)nccl::load_shared(shared, ckpt, comm, load);
        });
        CHECK_THAT(messages[1], Contains("nccl::load_shared: LoadOptions::target is Target::host"));
        CHECK_THAT(messages[0], Contains("nccl::load_shared: rank 1 failed before communicating"));
    }
    SECTION("a rank's arena lacks a tensor of the others'") {
        (void)run([&](int rank, ncclComm_t comm) {
            std::vector<std::string> names = {"embed", "layer0.norm"};
            if (rank == 0) {
                names.emplace_back("layer0.attn");
            }
            CheckpointArena<float, sb::cuda::Allocator> shared(ckpt, names);
            (void)nccl::load_shared(shared, ckpt, comm);
        });
        CHECK_THAT(messages[0], Contains("nccl::load_shared"));
        CHECK(messages[0] == messages[1]);  // the same StateError on every rank
    }
    SECTION("a rank's checkpoint is another") {
        (void)run([&](int rank, ncclComm_t comm) {
            const Checkpoint& mine = rank == 0 ? ckpt : other;
            CheckpointArena<float, sb::cuda::Allocator> shared(mine);
            (void)nccl::load_shared(shared, mine, comm);
        });
        CHECK_THAT(messages[0], Contains("nccl::load_shared"));
        CHECK(messages[0] == messages[1]);
    }
    SECTION("a rank's checkpoint misses a tensor its arena needs") {
        const test::TempDir small_dir;
        sb::Blob<float> embed({72, 24});
        sb::checkpoint::Writer w;
        w.add("embed", embed);
        const Checkpoint small = Checkpoint::open(w.save(small_dir.path()));
        (void)run([&](int rank, ncclComm_t comm) {
            CheckpointArena<float, sb::cuda::Allocator> shared(ckpt);
            (void)nccl::load_shared(shared, rank == 1 ? small : ckpt, comm);
        });
        CHECK_THAT(messages[1], Contains("not in the checkpoint (the arena's blob 1 needs it)"));
        CHECK_THAT(messages[0], Contains("nccl::load_shared: rank 1 failed before communicating"));
    }
}

TEST_CASE("nccl::load_shared orders a blob on a stream of its own after the load, and after a load that failed",
          "[standin][nccl][load][ordering]") {
    // The stand-in runs work when it is issued, so the order shows in the waits it counts: a blob on a
    // stream other than the arena's makes the load's copies wait for that stream's work, and makes the
    // stream wait for the copies (and broadcasts): two waits more than a load where every blob is on
    // the arena's stream, also when the load fails part-way (its copies issued stay before any use).
    const test::TempDir dir;
    const Checkpoint ckpt = write_checkpoint(dir.path());
    const sb::cuda::Stream own;
    const bool fail = GENERATE(false, true);
    CAPTURE(fail);
    const auto count_waits = [&](bool own_stream) {
        std::uint64_t waits = 0;
        const auto failures = on_ranks(1, [&](int, ncclComm_t comm, std::string& failed) {
            CheckpointArena<float, sb::cuda::Allocator> shared(ckpt);
            if (own_stream) {
                shared["layer1.attn"].set_stream(own.get());
            }
            LoadOptions load;
            load.chunk_bytes = 4096;
            int chunks = 0;
            if (fail) {
                load.progress = [&chunks](std::uint64_t, std::uint64_t) {
                    if (++chunks == 3) {
                        throw std::runtime_error("stopped by the caller");
                    }
                };
            }
            syncblob_standin::reset();
            expect(thrown<std::runtime_error>([&] { (void)nccl::load_shared(shared, ckpt, comm, load); }) ==
                       (fail ? "stopped by the caller" : "nothing thrown"),
                   failed, "the load's outcome");
            waits = syncblob_standin::calls("cudaStreamWaitEvent");
        });
        CHECK(failures == std::vector<std::string>(1));
        return waits;
    };
    CHECK(count_waits(true) == count_waits(false) + 2);
}

TEST_CASE("nccl::load_shared works on the arena's device whatever device its caller has current",
          "[standin][nccl][load][ordering]") {
    // Two stand-in devices, a rank's arena on each (its stream and device blocks made there); each
    // rank calls the load with the other device current. An event of one device recorded on a stream of another is an
    // error (as on a GPU), so the load must make the arena's device current for what it queues.
    const test::TempDir dir;
    const Checkpoint ckpt = write_checkpoint(dir.path());
    CheckpointArena<float> single(ckpt);
    (void)single.load(ckpt);
    syncblob_standin::set_device_count(2);
    const auto failures = on_ranks(2, [&](int rank, ncclComm_t comm, std::string& failed) {
        sb::cuda::set_device(rank);
        const sb::cuda::Stream stream;  // on device `rank`
        CheckpointArena<float, sb::cuda::Allocator> shared(ckpt, {}, stream.get());
        (void)shared.arena().flat_data().device_data();  // its device blocks made on device `rank`
        (void)shared.arena().flat_diff().device_data();
        sb::cuda::set_device(1 - rank);
        (void)nccl::load_shared(shared, ckpt, comm);
        expect(sb::cuda::current_device() == 1 - rank, failed, "the caller's device not restored");
        sb::cuda::set_device(rank);
        expect(same_bytes(shared, single), failed, "bytes differ from a load on one rank");
    });
    syncblob_standin::set_device_count(1);
    CHECK(failures == std::vector<std::string>(2));
}
