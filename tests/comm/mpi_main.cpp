// SPDX-License-Identifier: BSD-2-Clause
// Catch2's main for the tests run by `mpirun -np N`: MPI_Init before the tests, MPI_Finalize
// after. Every rank runs every test case; the run fails on every rank (so mpirun and ctest fail)
// when any rank failed a test or left simulated-device faults.
#define CATCH_CONFIG_RUNNER
#include <mpi.h>
#include <catch2/catch.hpp>

#include <iostream>

#include <syncblob/sim/device.hpp>

int main(int argc, char* argv[]) {
    MPI_Init(&argc, &argv);
    int rank = 0;
    int size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int result = Catch::Session().run(argc, argv);
    const auto faults = syncblob::SimulatedDevice::faults();
    for (const auto& fault : faults) {
        std::cerr << "rank " << rank << ": simulated device fault: " << fault << '\n';
    }
    int failed = result != 0 || !faults.empty() ? 1 : 0;
    if (failed != 0) {
        std::cerr << "rank " << rank << " of " << size << ": FAILED\n";
    }
    int any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) {
        std::cout << "mpi: " << size << " ranks, " << (any != 0 ? "some failed" : "all passed") << std::endl;
    }
    MPI_Finalize();
    return any != 0 ? 1 : 0;
}
