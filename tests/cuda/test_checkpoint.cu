// SPDX-License-Identifier: BSD-2-Clause
// Checkpoint loads into a cuda::Device arena, one CUDA translation unit built by nvcc: a float
// checkpoint through pinned staging with one copy per chunk, and a BF16 checkpoint into a float arena
// converted by kernels on the GPU (checkpoint/cuda.cuh), each value checked on the host against the
// host's conversion. Without a usable device each test prints "skipped: no CUDA device (...)" (and fails
// under SYNCBLOB_REQUIRE_GPU=1).
#if !defined(__CUDACC__)
#error "test_checkpoint.cu is a CUDA translation unit: build it with nvcc (SYNCBLOB_ENABLE_CUDA=ON)"
#endif

#include <catch2/catch.hpp>

#include <cstddef>
#include <iostream>

#include <syncblob/checkpoint.hpp>
#include <syncblob/checkpoint/cuda.cuh>
#include <syncblob/cuda/allocator.hpp>
#include <syncblob/cuda/runtime.hpp>

#include "../checkpoint/checkpoint_support.hpp"
#include "cuda_test_device.hpp"

namespace {

namespace sb = syncblob;
using GpuArena = sb::checkpoint::CheckpointArena<float, sb::cuda::Allocator>;

}  // namespace

TEST_CASE("checkpoint: a float checkpoint streams onto the GPU, one copy per chunk", "[cuda][checkpoint]") {
    SYNCBLOB_REQUIRE_DEVICE(sb::cuda::Device);
    const test::TempDir dir;
    const auto blobs = test::transformer_blobs(8, 64);
    const auto ckpt = test::save_checkpoint(dir.path(), blobs, 40000);
    GpuArena loaded(ckpt);
    sb::checkpoint::LoadOptions options;
    options.chunk_bytes = 64 << 10;
    const auto report = loaded.load(ckpt, options);
    CHECK(report.on_device);
    CHECK(report.host_to_device_copies == report.chunks);
    CHECK(report.chunks < report.tensors);
    CHECK(loaded["embed"].data_head() == sb::Head::at_device);
    CHECK(test::arena_holds(loaded, blobs));
}

TEST_CASE("checkpoint: a BF16 checkpoint converts into a float arena on the GPU", "[cuda][checkpoint]") {
    SYNCBLOB_REQUIRE_DEVICE(sb::cuda::Device);
    const test::TempDir dir;
    const auto blobs = test::transformer_blobs(4, 64);
    const auto ckpt = test::save_checkpoint<sb::bfloat16>(dir.path(), blobs, 40000);
    GpuArena loaded(ckpt);
    sb::checkpoint::LoadOptions options;
    options.convert = true;
    options.chunk_bytes = 64 << 10;
    const auto report = loaded.load(ckpt, options);
    CHECK(report.device_conversions >= report.tensors);
    CHECK(report.host_to_device_copies == report.chunks);
    CHECK(test::arena_holds<sb::bfloat16>(loaded, blobs));
}
