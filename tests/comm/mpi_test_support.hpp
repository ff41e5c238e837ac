// SPDX-License-Identifier: BSD-2-Clause
#pragma once

// What the MPI tests share: this process's rank in a communicator, its size, and a communicator of
// the test's own.

#include <mpi.h>

inline int rank_in(MPI_Comm comm) {
    int r = 0;
    MPI_Comm_rank(comm, &r);
    return r;
}

inline int size_of(MPI_Comm comm) {
    int n = 0;
    MPI_Comm_size(comm, &n);
    return n;
}

// A communicator of the test's own, freed at the end of the scope (MPI completes what was given up
// on it if the missing rank joins later; freeing it only marks it for that).
struct OwnComm {
    MPI_Comm comm = MPI_COMM_NULL;
    OwnComm() { MPI_Comm_dup(MPI_COMM_WORLD, &comm); }
    ~OwnComm() { MPI_Comm_free(&comm); }
    OwnComm(const OwnComm&) = delete;
    OwnComm& operator=(const OwnComm&) = delete;
};
