// SPDX-License-Identifier: BSD-2-Clause
// nccl::allreduce_diff, broadcast_data and the bucketed form on every GPU of the machine: one
// communicator per device (ncclCommInitAll), each driven by a thread of its own, each with an
// arena of cuda::Allocator. Results against a serial reference; the transfer counts of host-fresh
// and device-fresh diffs; the mismatch error on every rank. Without a usable device the GPU tests
// print "skipped: no CUDA device (...)"; the error translation runs everywhere.
#if !defined(__CUDACC__)
#error "test_nccl.cu is a CUDA translation unit: build it with nvcc (SYNCBLOB_ENABLE_CUDA=ON)"
#endif

#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <functional>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <syncblob/comm/nccl.hpp>
#include <syncblob/cuda/allocator.hpp>

#include "cuda_test_device.hpp"
#include "nccl_ranks.hpp"
#include "stream_delay.cuh"

namespace sb = syncblob;
using Arena = sb::ParameterArena<float, sb::cuda::Allocator>;

namespace {

float value(int rank, std::size_t blob, std::size_t i) {
    return static_cast<float>((rank + 1) * static_cast<int>(i % 11 + 1) + static_cast<int>(blob));
}

void add_model(Arena& arena, bool extra) {
    for (std::int64_t n : {7, 0, 300, 64, 33}) {
        arena.add({n});
    }
    if (extra) {
        arena.add({5});
    }
}

using nccl_test::expect;
using nccl_test::on_every_device;

}  // namespace

TEST_CASE("nccl: the host's wait for an operation returns once its stream's work is done", "[cuda][nccl]") {
    SYNCBLOB_REQUIRE_DEVICE(sb::cuda::Device);
    const auto failures = on_every_device([&](int, int, ncclComm_t comm, std::string& failed) {
        const sb::cuda::Stream stream;
        expect(syncblob_cuda_test::try_delay(stream, 50) == cudaSuccess, failed, "the delay's launch");
        expect(cudaStreamQuery(stream) == cudaErrorNotReady, failed, "the stream is held back");
        sb::nccl::detail::finish(stream, comm, std::nullopt, "test", "the delay");
        expect(cudaStreamQuery(stream) == cudaSuccess, failed, "finish returned before the stream's work was done");
    });
    for (const auto& f : failures) {
        INFO(f);
        CHECK(f.empty());
    }
}

TEST_CASE("nccl::allreduce_diff sums and averages in device memory", "[cuda][nccl]") {
    SYNCBLOB_REQUIRE_DEVICE(sb::cuda::Device);
    for (const auto reduce : {sb::Reduce::sum, sb::Reduce::mean}) {
        const auto failures = on_every_device([&](int rank, int ranks, ncclComm_t comm, std::string& failed) {
            Arena arena;
            add_model(arena, false);
            arena.seal();
            for (std::size_t b = 0; b < arena.size(); ++b) {
                auto diff = arena[b].mutable_host_diff();
                for (std::size_t i = 0; i < diff.size(); ++i) {
                    diff[i] = value(rank, b, i);
                }
            }
            (void)arena[3].mutable_device_diff();  // fresh on the device already: no copy for it
            for (auto& b : arena.blobs()) {
                b.reset_stats();
            }
            const auto stats = sb::nccl::allreduce_diff(arena, comm, reduce);
            expect(stats.calls == 1 && stats.on_device, failed, "one call on the device");
            expect(stats.staged_blobs == 3, failed, "blobs 0, 2 and 4 copied H->D");
            expect(arena[0].diff_stats().host_to_device == 1, failed, "blob 0: one H->D");
            expect(arena[3].diff_stats().transfers() == 0, failed, "blob 3: no copy");
            for (std::size_t b = 0; b < arena.size(); ++b) {
                const auto diff = arena[b].host_diff();  // D->H through the state machine, after NCCL on the stream
                for (std::size_t i = 0; i < diff.size(); ++i) {
                    float sum = 0;
                    for (int r = 0; r < ranks; ++r) {
                        sum += value(r, b, i);
                    }
                    const float expected = reduce == sb::Reduce::mean ? sum / static_cast<float>(ranks) : sum;
                    // ncclAvg may scale before or after summing: exact for sums, within rounding for means.
                    const bool ok = reduce == sb::Reduce::sum ? diff[i] == expected
                                                              : std::fabs(diff[i] - expected) <= 1e-6f * expected;
                    if (!ok) {
                        expect(false, failed, "blob " + std::to_string(b) + " element " + std::to_string(i));
                        break;
                    }
                }
            }
        });
        for (const auto& f : failures) {
            INFO(f);
            CHECK(f.empty());
        }
    }
}

TEST_CASE("nccl::broadcast_data and the bucketed form", "[cuda][nccl]") {
    SYNCBLOB_REQUIRE_DEVICE(sb::cuda::Device);
    const auto failures = on_every_device([&](int rank, int ranks, ncclComm_t comm, std::string& failed) {
        Arena arena;
        add_model(arena, false);
        arena.seal();
        for (auto& b : arena.blobs()) {
            b.fill(static_cast<float>(rank + 1));
            b.fill_diff(static_cast<float>(rank + 1));
        }
        sb::nccl::broadcast_data(arena, comm, ranks - 1);
        for (const auto& b : arena.blobs()) {
            for (const float x : b.host_data()) {
                expect(x == static_cast<float>(ranks), failed, "broadcast value");
            }
        }
        auto pending = sb::nccl::iallreduce_diff(arena, comm, sb::Reduce::sum, 512);
        expect(pending.started() == pending.buckets().size(), failed, "every bucket queued");
        const auto stats = pending.wait();
        expect(stats.calls == pending.buckets().size(), failed, "one call per non-empty bucket");
        const float sum = static_cast<float>(ranks * (ranks + 1) / 2);
        for (const auto& b : arena.blobs()) {
            for (const float x : b.host_diff()) {
                expect(x == sum, failed, "bucketed sum");
            }
        }
    });
    for (const auto& f : failures) {
        INFO(f);
        CHECK(f.empty());
    }
}

TEST_CASE("nccl: arenas that differ between ranks are a StateError on every rank", "[cuda][nccl]") {
    SYNCBLOB_REQUIRE_DEVICE(sb::cuda::Device);
    if (sb::cuda::device_count() < 2) {
        std::cout << "skipped: needs 2 CUDA devices, this machine has " << sb::cuda::device_count() << std::endl;
        return;
    }
    const auto failures = on_every_device([&](int rank, int, ncclComm_t comm, std::string& failed) {
        Arena arena;
        add_model(arena, rank == 1);
        arena.seal();
        std::string message;
        try {
            sb::nccl::allreduce_diff(arena, comm, sb::Reduce::sum);
        } catch (const sb::StateError& e) {
            message = e.what();
        }
        expect(message.find("the arenas differ: rank 0 has 5 blobs") != std::string::npos, failed,
               "mismatch message: " + message);
    });
    for (const auto& f : failures) {
        INFO(f);
        CHECK(f.empty());
    }
}

TEST_CASE("nccl: failing calls are CommErrors with the call and NCCL's message", "[cuda][nccl]") {
    try {
        sb::nccl::detail::check(ncclCommInitAll(nullptr, 1, nullptr), "nccl::test", "ncclCommInitAll");
        FAIL("ncclCommInitAll with a null array succeeded");
    } catch (const sb::CommError& e) {
        CHECK(e.call() == "ncclCommInitAll");
        CHECK(e.code() != ncclSuccess);
        CHECK_THAT(e.what(), Catch::StartsWith("nccl::test: ncclCommInitAll failed: "));
    }
    Arena unsealed;  // no device memory needed: the communicator is checked first
    unsealed.add({3});
    CHECK_THROWS_WITH(sb::nccl::allreduce_diff(unsealed, nullptr, sb::Reduce::sum),
                      "nccl::allreduce_diff: the communicator is null");
}
