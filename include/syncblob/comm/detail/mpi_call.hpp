// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// What `syncblob/comm/mpi.hpp` needs around MPI's C API: status codes turned into `CommError`,
/// element types mapped to MPI datatypes, counts split under `INT_MAX`, and the detection of a
/// device-aware (CUDA-aware) MPI.

#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

#include <algorithm>
#include <climits>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "../../core/error.hpp"
#include "../error.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace mpi {

/// Element types MPI reduces natively (MPI has no half-precision types: use NCCL for those).
template <class T>
concept MpiElement = std::same_as<T, float> || std::same_as<T, double>;

namespace detail {

/// The most elements one MPI call may carry: `INT_MAX`, as Open MPI 4.1 has no large-count calls.
/// A test hook: lower it (through ScopedMaxCount) to see runs split without allocating 8 GiB.
inline std::size_t max_count = static_cast<std::size_t>(INT_MAX);

/// Sets `max_count` for its lifetime (tests only; not thread-safe).
class ScopedMaxCount {
public:
    explicit ScopedMaxCount(std::size_t n) : previous_(max_count) { max_count = std::max<std::size_t>(n, 1); }
    ~ScopedMaxCount() { max_count = previous_; }
    ScopedMaxCount(const ScopedMaxCount&) = delete;
    ScopedMaxCount& operator=(const ScopedMaxCount&) = delete;

private:
    std::size_t previous_;
};

template <MpiElement T>
MPI_Datatype datatype() noexcept {
    if constexpr (std::same_as<T, float>) {
        return MPI_FLOAT;
    } else {
        return MPI_DOUBLE;
    }
}

/// Throws CommError for an MPI status other than MPI_SUCCESS: "<op>: <call> failed: <MPI's message> (error class N)".
inline void check(int status, std::string_view op, const char* call) {
    if (status == MPI_SUCCESS) {
        return;
    }
    char text[MPI_MAX_ERROR_STRING] = {};
    int length = 0;
    if (MPI_Error_string(status, text, &length) != MPI_SUCCESS) {
        length = 0;
    }
    int error_class = status;
    (void)MPI_Error_class(status, &error_class);
    throw CommError(std::string(op) + ": " + call + " failed: " + std::string(text, static_cast<std::size_t>(length)) +
                        " (error class " + std::to_string(error_class) + ")",
                    call, status);
}

/// For its lifetime, MPI errors on `comm` return a status instead of aborting (MPI's default
/// handler), so they can become exceptions; the communicator's own handler is restored after.
class ErrorsReturn {
public:
    ErrorsReturn(MPI_Comm comm, std::string_view op) : comm_(comm) {
        int initialized = 0;
        int finalized = 0;
        (void)MPI_Initialized(&initialized);
        (void)MPI_Finalized(&finalized);
        if (initialized == 0 || finalized != 0) {
            throw StateError(std::string(op) + ": MPI is " + (finalized != 0 ? "finalized" : "not initialized") +
                             " (call it between MPI_Init and MPI_Finalize)");
        }
        if (comm == MPI_COMM_NULL) {
            throw StateError(std::string(op) + ": the communicator is MPI_COMM_NULL");
        }
        check(MPI_Comm_get_errhandler(comm, &previous_), op, "MPI_Comm_get_errhandler");
        check(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN), op, "MPI_Comm_set_errhandler");
    }
    ~ErrorsReturn() {
        (void)MPI_Comm_set_errhandler(comm_, previous_);
        (void)MPI_Errhandler_free(&previous_);
    }
    ErrorsReturn(const ErrorsReturn&) = delete;
    ErrorsReturn& operator=(const ErrorsReturn&) = delete;

private:
    MPI_Comm comm_;
    MPI_Errhandler previous_ = MPI_ERRHANDLER_NULL;
};

/// Calls `fn(first, count)` for consecutive pieces of `[0, elements)` of at most `max_count`
/// elements each; returns how many calls it made.
template <class Fn>
std::uint64_t in_pieces(std::size_t elements, Fn fn) {
    std::uint64_t calls = 0;
    for (std::size_t first = 0; first < elements;) {
        const std::size_t n = std::min(max_count, elements - first);
        fn(first, static_cast<int>(n));
        first += n;
        ++calls;
    }
    return calls;
}

/// True when the MPI library reads and writes device memory itself: `SYNCBLOB_MPI_DEVICE_AWARE=1`
/// or `0` in the environment decides; otherwise Open MPI's MPIX_Query_cuda_support() (false for an
/// MPI that cannot tell).
inline bool detect_device_aware() {
    if (const char* v = std::getenv("SYNCBLOB_MPI_DEVICE_AWARE"); v != nullptr && (*v == '0' || *v == '1')) {
        return *v == '1';
    }
#if defined(OMPI_HAVE_MPI_EXT_CUDA) && OMPI_HAVE_MPI_EXT_CUDA
    return MPIX_Query_cuda_support() == 1;
#else
    return false;
#endif
}

}  // namespace detail

}  // namespace mpi

SYNCBLOB_END_NAMESPACE
