// SPDX-License-Identifier: BSD-2-Clause
#pragma once
// The ranks of one NCCL communicator as threads of one process: on a GPU machine a rank per device
// (test_nccl.cu, test_nccl_checkpoint.cu), on the stand-in any number of ranks on its one device
// (test_standin_shared_load.cpp).

#include <nccl.h>

#include <cstddef>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <syncblob/comm/nccl.hpp>
#include <syncblob/cuda/runtime.hpp>

namespace nccl_test {

/// One communicator of `ranks` ranks (ncclCommInitAll); `body(rank, ranks, comm, failures)` runs on a
/// thread per rank, with device `rank` current when `device_per_rank`. Failures are collected as
/// strings, by rank, and returned (Catch2 is not thread-safe).
inline std::vector<std::string> on_ranks(int ranks, const std::function<void(int, int, ncclComm_t, std::string&)>& body,
                                         bool device_per_rank = true) {
    std::vector<ncclComm_t> comms(static_cast<std::size_t>(ranks));
    syncblob::nccl::detail::check(ncclCommInitAll(comms.data(), ranks, nullptr), "test", "ncclCommInitAll");
    std::vector<std::string> failures(static_cast<std::size_t>(ranks));
    std::vector<std::thread> threads;
    for (int r = 0; r < ranks; ++r) {
        threads.emplace_back([&, r] {
            try {
                if (device_per_rank) {
                    syncblob::cuda::set_device(r);
                }
                body(r, ranks, comms[static_cast<std::size_t>(r)], failures[static_cast<std::size_t>(r)]);
            } catch (const std::exception& e) {
                failures[static_cast<std::size_t>(r)] += std::string("exception: ") + e.what();
            }
        });
    }
    for (auto& t : threads) {
        t.join();
    }
    for (auto comm : comms) {
        (void)ncclCommDestroy(comm);
    }
    return failures;
}

/// A communicator of every device of the machine, a rank per device.
inline std::vector<std::string> on_every_device(const std::function<void(int, int, ncclComm_t, std::string&)>& body) {
    return on_ranks(syncblob::cuda::device_count(), body);
}

/// Adds `what` to `failures` unless `ok`.
inline void expect(bool ok, std::string& failures, const std::string& what) {
    if (!ok) {
        failures += what + "; ";
    }
}

}  // namespace nccl_test
