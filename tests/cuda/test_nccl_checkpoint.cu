// SPDX-License-Identifier: BSD-2-Clause
// nccl::load_shared on every GPU of the machine (one communicator per device, a thread each): every
// rank's cuda::Device arena holds, bit for bit, what a load on one rank gives, for a float checkpoint
// and for a BF16 one converted by the kernels of checkpoint/cuda.cuh; the ranks' shares tile the
// checkpoint. On a machine of one GPU the communicator has one rank, which reads everything. Without a
// usable device each test prints "skipped: no CUDA device (...)" (and fails under SYNCBLOB_REQUIRE_GPU=1).
#if !defined(__CUDACC__)
#error "test_nccl_checkpoint.cu is a CUDA translation unit: build it with nvcc (SYNCBLOB_ENABLE_CUDA=ON)"
#endif

#include <catch2/catch.hpp>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <string>

#include <syncblob/checkpoint.hpp>
#include <syncblob/checkpoint/cuda.cuh>
#include <syncblob/comm/nccl_checkpoint.hpp>
#include <syncblob/cuda/allocator.hpp>

#include "../checkpoint/checkpoint_support.hpp"
#include "cuda_test_device.hpp"
#include "nccl_ranks.hpp"

namespace {

namespace sb = syncblob;
using nccl_test::expect;
using sb::checkpoint::CheckpointArena;

// Every blob's data in `a` is, byte for byte, that in `b` (read on the host).
template <class A, class B>
bool same_bytes(const CheckpointArena<float, A>& a, const CheckpointArena<float, B>& b) {
    for (std::size_t i = 0; i < a.arena().size(); ++i) {
        const auto x = a.arena()[i].host_data();
        const auto y = b.arena()[i].host_data();
        if (x.size() != y.size() || std::memcmp(x.data(), y.data(), x.size_bytes()) != 0) {
            return false;
        }
    }
    return true;
}

template <class T>
void check_shared_load() {
    const test::TempDir dir;
    const auto blobs = test::transformer_blobs(6, 64);
    const auto ckpt = test::save_checkpoint<T>(dir.path(), blobs, 40000);
    sb::checkpoint::LoadOptions load;
    load.convert = true;
    load.chunk_bytes = 16 << 10;
    CheckpointArena<float> single(ckpt);
    const auto single_report = single.load(ckpt, load);
    std::atomic<std::uint64_t> read{0};
    const auto failures = nccl_test::on_every_device([&](int, int ranks, ncclComm_t comm, std::string& failed) {
        CheckpointArena<float, sb::cuda::Allocator> shared(ckpt);
        const auto report = sb::nccl::load_shared(shared, ckpt, comm, load);
        read += report.bytes_read;
        expect(shared["embed"].data_head() == sb::Head::at_device, failed, "not at_device");
        expect(same_bytes(shared, single), failed, "bytes differ from a load on one rank");
        expect(report.bytes_loaded == single_report.bytes_read, failed, "bytes_loaded");
        expect(ranks == 1 || report.bytes_read < report.bytes_loaded, failed, "a rank read everything");
    });
    for (const auto& f : failures) {
        INFO(f);
        CHECK(f.empty());
    }
    CHECK(read.load() == single_report.bytes_read);
}

}  // namespace

TEST_CASE("nccl::load_shared: every GPU's arena holds a load on one rank, bit for bit", "[cuda][nccl][load]") {
    SYNCBLOB_REQUIRE_DEVICE(sb::cuda::Device);
    SECTION("a float checkpoint") {
        check_shared_load<float>();
    }
    SECTION("a BF16 checkpoint, converted by kernels on each GPU") {
        check_shared_load<sb::bfloat16>();
    }
}

TEST_CASE("nccl::load_shared fills each GPU's arena whatever device its caller has current", "[cuda][nccl][load]") {
    SYNCBLOB_REQUIRE_DEVICE(sb::cuda::Device);
    if (sb::cuda::device_count() < 2) {
        std::cout << "skipped: needs 2 CUDA devices, this machine has " << sb::cuda::device_count() << std::endl;
        return;
    }
    const test::TempDir dir;
    const auto blobs = test::transformer_blobs(4, 64);
    const auto ckpt = test::save_checkpoint(dir.path(), blobs, 40000);
    CheckpointArena<float> single(ckpt);
    (void)single.load(ckpt);
    const auto failures = nccl_test::on_every_device([&](int rank, int ranks, ncclComm_t comm, std::string& failed) {
        const sb::cuda::Stream stream;  // on device `rank`, as the arena's blocks
        CheckpointArena<float, sb::cuda::Allocator> shared(ckpt, {}, stream.get());
        (void)shared.arena().flat_data().device_data();
        (void)shared.arena().flat_diff().device_data();
        sb::cuda::set_device((rank + 1) % ranks);  // the caller on another one
        (void)sb::nccl::load_shared(shared, ckpt, comm);
        sb::cuda::set_device(rank);
        expect(same_bytes(shared, single), failed, "bytes differ from a load on one rank");
    });
    for (const auto& f : failures) {
        INFO(f);
        CHECK(f.empty());
    }
}
