// SPDX-License-Identifier: BSD-2-Clause
#pragma once

// What the MPI tests share: this process's rank in a communicator, its size, a communicator of the
// test's own, what a call threw, and whether every rank agrees.

#include <mpi.h>

#include <catch2/catch.hpp>

#include <functional>
#include <string>

#include <syncblob/comm/error.hpp>
#include <syncblob/core/error.hpp>

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

// "<type>: <message>" of what `call` threw ("" when nothing), for the types the MPI tests expect.
inline std::string outcome(const std::function<void()>& call) {
    try {
        call();
    } catch (const syncblob::TimeoutError& e) {
        return std::string("TimeoutError: ") + e.what();
    } catch (const syncblob::IndexError& e) {
        return std::string("IndexError: ") + e.what();
    } catch (const syncblob::ShapeError& e) {
        return std::string("ShapeError: ") + e.what();
    } catch (const syncblob::StateError& e) {
        return std::string("StateError: ") + e.what();
    } catch (const syncblob::OptionError& e) {
        return std::string("OptionError: ") + e.what();
    } catch (const syncblob::FormatError& e) {
        return std::string("FormatError: ") + e.what();
    }
    return {};
}

// True on every rank when `ok` is true on every rank of MPI_COMM_WORLD.
inline bool everywhere(bool ok) {
    int mine = ok ? 1 : 0;
    int all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return all == 1;
}

// True when MPI_COMM_WORLD has `n` ranks or more. Otherwise the test cannot show what it is about
// (ranks that differ, a rank that fails alone): it says so in a warning naming the ranks it needs,
// which Catch2 prints, and the caller returns (Catch2 2 has no skip). ctest runs each program on
// two ranks or more, and again on one (`comm.*_np1`), as `./test_mpi` started alone runs it.
inline bool has_ranks(int n) {
    if (size_of(MPI_COMM_WORLD) >= n) {
        return true;
    }
    WARN("skipped: this test needs " << n << " ranks or more (mpirun -np " << n << "), and this run has "
                                     << size_of(MPI_COMM_WORLD));
    return false;
}
