// SPDX-License-Identifier: BSD-2-Clause
// The steady training step of tests/audit with its diffs all-reduced across ranks: one bucketed
// all-reduce agreed once and restarted each step. After warm-up, five steps under the audit's error
// mode make no agreement, no device-wide synchronisation and no allocation from the system; the host
// waits only for the step's buckets (asked for by their wait), their staging for an MPI that reads host
// memory, the loss and the checkpoints.
#include <mpi.h>
#include <catch2/catch.hpp>

#include <filesystem>
#include <optional>
#include <string>

#include <syncblob/comm/mpi.hpp>
#include <syncblob/core/sync_audit.hpp>

#include "../audit/training_step.hpp"
#include "../io/tempfile.hpp"
#include "audit_counts.hpp"
#include "mpi_test_support.hpp"

namespace audit = syncblob::audit;
namespace mpi = syncblob::mpi;
using audit::Wait;
using audit_test::Device;
using test::audit_calls;

TEST_CASE("mpi: a steady training step agrees once, then waits only for its buckets, the loss and the checkpoints",
          "[mpi][audit]") {
    const test::TempDir dir;
    const auto folder = dir.path() / std::to_string(rank_in(MPI_COMM_WORLD));
    const Device::Scope scope{Device::Settings{}};
    float loss = 0;
    {
        audit_test::Model model(Device::create_stream());
        std::optional<mpi::BucketedAllreduce<float, audit_test::Allocator>> reduce;
        std::uint64_t agreements = 0;
        const auto all_reduce = [&](audit_test::Arena& arena) {
            if (!reduce) {
                reduce.emplace(arena, MPI_COMM_WORLD, syncblob::Reduce::mean, 16 << 10, 64 << 10);  // agrees
                ++agreements;
            } else {
                reduce->restart();  // the same buckets, no agreement
            }
            for (std::size_t i = arena.size(); i-- > 0;) {  // backward produces the last layers first
                reduce->ready(i);
            }
            (void)reduce->wait();
        };
        audit::reset();
        const audit::ModeScope counting(audit::Mode::count);
        for (int s = 1; s <= 2; ++s) {
            (void)model.step(s, all_reduce, 2, folder);
        }
        CHECK(audit_calls("mpi agreement", Wait::collective) == 1);  // at the construction, in warm-up
        audit::reset();
        {
            const audit::ModeScope strict(audit::Mode::error);
            for (int s = 1; s <= 5; ++s) {
                REQUIRE_NOTHROW(loss = model.step(s, all_reduce, 2, folder));
            }
        }
        INFO("rank " << rank_in(MPI_COMM_WORLD) << "\n" << audit::table());
        CHECK(agreements == 1);
        CHECK(audit::unasked() == 0);
        CHECK(audit_calls("mpi agreement", Wait::collective) == 0);
        // A wait a step; a run on one rank (./test_mpi_training) has none to wait for: its mean is its own.
        CHECK(audit_calls("mpi::BucketedAllreduce::wait", Wait::collective) == (size_of(MPI_COMM_WORLD) > 1 ? 5 : 0));
        CHECK(audit::total(Wait::device_synchronize) == 0);
        CHECK(audit::total(Wait::system_allocation) == 0);
        CHECK(audit::total(Wait::host_result) == 5);
        // every rank computed the same gradients: their mean is each rank's own, and so is the loss
        float lowest = loss;
        float highest = loss;
        MPI_Allreduce(&loss, &lowest, 1, MPI_FLOAT, MPI_MIN, MPI_COMM_WORLD);
        MPI_Allreduce(&loss, &highest, 1, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD);
        CHECK(lowest == highest);
        CHECK(loss > 0.0f);
    }
    Device::synchronize();
    syncblob::SimulatedAsyncDevice::empty_cache();
    CHECK(Device::faults().empty());
}
