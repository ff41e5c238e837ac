// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// syncblob's own duplicate of a caller's communicator, for the point-to-point messages of its own
/// all-reduce (mpi_ring.hpp): no message of the caller's on the communicator, whatever its tag or
/// source, can match one of syncblob's, nor the reverse. Made once per communicator, on the first
/// call that needs it, cached on the communicator as an attribute, and freed with it (or at
/// MPI_Finalize).

#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "../../core/sync_audit.hpp"
#include "mpi_call.hpp"
#include "mpi_wait.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace mpi::detail {

/// The private communicators alive, so that MPI_Finalize frees the ones its caller's communicator
/// still holds (MPI_COMM_WORLD's), while MPI still works: the attribute deleted first at
/// MPI_Finalize is MPI_COMM_SELF's, which `release_all` is.
class PrivateComms {
public:
    static void add(MPI_Comm c) {
        std::lock_guard lock(mutex());
        live().push_back(MPI_Comm_c2f(c));
    }
    /// Frees `c` unless it was freed already (at MPI_Finalize).
    static void release(MPI_Fint c) noexcept {
        std::lock_guard lock(mutex());
        auto& all = live();
        const auto it = std::find(all.begin(), all.end(), c);
        if (it != all.end()) {
            all.erase(it);
            MPI_Comm comm = MPI_Comm_f2c(c);
            (void)MPI_Comm_free(&comm);
        }
    }
    /// How many are alive (tests).
    static std::size_t count() {
        std::lock_guard lock(mutex());
        return live().size();
    }
    static void release_all() noexcept {
        std::lock_guard lock(mutex());
        for (const MPI_Fint c : live()) {
            MPI_Comm comm = MPI_Comm_f2c(c);
            (void)MPI_Comm_free(&comm);
        }
        live().clear();
    }

private:
    static std::mutex& mutex() {
        static std::mutex m;
        return m;
    }
    static std::vector<MPI_Fint>& live() {
        static std::vector<MPI_Fint> all;
        return all;
    }
};

// The attribute of a caller's communicator that holds its private duplicate (a Fortran handle, so
// that it fits a pointer whatever an MPI_Comm is); deleting it frees the duplicate.
inline int private_comm_key() {
    static const int key = [] {
        int k = MPI_KEYVAL_INVALID;
        const auto deleted = [](MPI_Comm, int, void* value, void*) -> int {
            PrivateComms::release(static_cast<MPI_Fint>(reinterpret_cast<std::intptr_t>(value)));
            return MPI_SUCCESS;
        };
        (void)MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, deleted, &k, nullptr);
        // MPI_COMM_SELF's attributes are deleted first at MPI_Finalize: the private duplicates go then.
        int at_finalize = MPI_KEYVAL_INVALID;
        const auto finalizing = [](MPI_Comm, int, void*, void*) -> int {
            PrivateComms::release_all();
            return MPI_SUCCESS;
        };
        (void)MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, finalizing, &at_finalize, nullptr);
        (void)MPI_Comm_set_attr(MPI_COMM_SELF, at_finalize, nullptr);
        return k;
    }();
    return key;
}

/// The private duplicate of `comm` when a call made it already, else MPI_COMM_NULL (makes nothing).
inline MPI_Comm existing_private_comm(MPI_Comm comm) {
    void* value = nullptr;
    int found = 0;
    if (MPI_Comm_get_attr(comm, private_comm_key(), &value, &found) != MPI_SUCCESS || found == 0) {
        return MPI_COMM_NULL;
    }
    return MPI_Comm_f2c(
        static_cast<MPI_Fint>(reinterpret_cast<std::intptr_t>(value)));  // NOLINT(performance-no-int-to-ptr)
}

/// The private duplicate of `comm`, made the first time (MPI_Comm_idup, waited for within `deadline`:
/// a collective of `comm`, so every rank calls this at the same point of the same syncblob call,
/// after its agreement). Its error handler returns errors, which become CommError.
/// \throws CommError; TimeoutError when a rank never joins (as mpi_wait.hpp's complete).
inline MPI_Comm private_comm(MPI_Comm comm, const Deadline& deadline, std::string_view op) {
    const int key = private_comm_key();
    void* value = nullptr;
    int found = 0;
    check(MPI_Comm_get_attr(comm, key, &value, &found), op, "MPI_Comm_get_attr");
    if (found != 0) {
        return MPI_Comm_f2c(static_cast<MPI_Fint>(reinterpret_cast<std::intptr_t>(value)));
    }
    auto dup = std::make_shared<MPI_Comm>(MPI_COMM_NULL);  // on the heap: given up on, MPI may still write it
    std::vector<MPI_Request> request(1, MPI_REQUEST_NULL);
    audit::note(audit::Wait::collective);  // before the duplication is posted (complete)
    check(MPI_Comm_idup(comm, dup.get(), request.data()), op, "MPI_Comm_idup");
    complete(request, comm, deadline, op, "MPI_Comm_idup", "every rank to make syncblob's private communicator",
             [&] { return std::vector<std::shared_ptr<void>>{dup}; });
    PrivateComms::add(*dup);
    check(MPI_Comm_set_errhandler(*dup, MPI_ERRORS_RETURN), op, "MPI_Comm_set_errhandler");
    // An attribute's value is a pointer: the handle travels in it as its Fortran integer (read back above).
    const auto handle = static_cast<std::intptr_t>(MPI_Comm_c2f(*dup));
    check(MPI_Comm_set_attr(comm, key, reinterpret_cast<void*>(handle)),  // NOLINT(performance-no-int-to-ptr)
          op, "MPI_Comm_set_attr");
    return *dup;
}

}  // namespace mpi::detail

SYNCBLOB_END_NAMESPACE
