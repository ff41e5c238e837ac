// SPDX-License-Identifier: BSD-2-Clause
// MPI on device blobs (the simulated device plays a device-aware MPI: its memory is host memory):
// the all-reduce, its bucketed form and the broadcast read device memory only after the work queued
// on the arena's stream, so a kernel still writing the gradients or the weights when the call
// starts is seen by every rank. Run by mpirun on 2 ranks, under every seed of the fixed set.

#include <mpi.h>

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>

#include <syncblob/arena.hpp>
#include <syncblob/comm/mpi.hpp>
#include <syncblob/sim/device.hpp>

namespace {

namespace mpi = syncblob::mpi;
using syncblob::Reduce;
using syncblob::SimulatedDevice;
using Arena = syncblob::ParameterArena<float, syncblob::Simulated>;
using Range = SimulatedDevice::Range;

constexpr std::uint64_t seeds[] = {0, 1, 2, 3, 5, 8, 13, 21};
constexpr std::size_t n = 64;

int rank() {
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}
int ranks() {
    int r = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &r);
    return r;
}

// Queues a kernel on `s` that sets the `n` floats at `p` to `value`.
void set_kernel(SimulatedDevice::Stream s, float* p, float value) {
    SimulatedDevice::launch(s, "set", {}, {Range{p, n * sizeof(float)}}, [p, value] {
        for (std::size_t i = 0; i < n; ++i) {
            p[i] = value;
        }
    });
}

// An arena of one blob on its own stream whose diff (or data) is fresh on the device only, written
// by a kernel still queued on the arena's stream.
void prepare(Arena& arena, bool diff, float value) {
    arena.set_stream(SimulatedDevice::create_stream());
    auto& blob = arena.add({static_cast<std::int64_t>(n)});
    arena.seal();
    float* p = diff ? blob.mutable_device_diff() : blob.mutable_device_data();
    set_kernel(arena.stream(), p, value);
}

}  // namespace

TEST_CASE("mpi::allreduce_diff of device gradients waits for the kernels that write them", "[mpi][ordering]") {
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope({.seed = seed});
        Arena arena;
        prepare(arena, true, static_cast<float>(rank() + 1));
        const auto stats = mpi::allreduce_diff(arena, MPI_COMM_WORLD, Reduce::sum, {.device_aware = true});
        CHECK(stats.on_device);
        const float sum = static_cast<float>(ranks() * (ranks() + 1) / 2);
        CHECK(arena[0].host_diff()[0] == sum);
        CHECK(arena[0].host_diff()[n - 1] == sum);
        CHECK(SimulatedDevice::faults().empty());
    }
}

TEST_CASE("mpi::iallreduce_diff of device gradients waits for the kernels that write them", "[mpi][ordering]") {
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope({.seed = seed});
        Arena arena;
        prepare(arena, true, static_cast<float>(rank() + 1));
        auto pending = mpi::iallreduce_diff(arena, MPI_COMM_WORLD, Reduce::sum, 1 << 20, {.device_aware = true});
        const auto stats = pending.wait();
        CHECK(stats.on_device);
        const float sum = static_cast<float>(ranks() * (ranks() + 1) / 2);
        CHECK(arena[0].host_diff()[n - 1] == sum);
        CHECK(SimulatedDevice::faults().empty());
    }
}

TEST_CASE("mpi::broadcast_data of device weights waits for the kernels that write them", "[mpi][ordering]") {
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope({.seed = seed});
        Arena arena;
        prepare(arena, false, rank() == 0 ? 42.0f : -1.0f);
        const auto stats = mpi::broadcast_data(arena, MPI_COMM_WORLD, 0, {.device_aware = true});
        CHECK(stats.on_device);
        CHECK(arena[0].host_data()[0] == 42.0f);
        CHECK(arena[0].host_data()[n - 1] == 42.0f);
        CHECK(SimulatedDevice::faults().empty());
    }
}
