// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// `CommError`: a failed call of a communication engine (MPI, NCCL); `TimeoutError`: a collective
/// call that did not complete before its deadline.

#include <chrono>
#include <string>
#include <utility>

#include "../core/error.hpp"

SYNCBLOB_BEGIN_NAMESPACE

/// A failed MPI or NCCL call. The message names the syncblob operation, the engine's call and the
/// engine's own description of the failure (`MPI_Error_string`, `ncclGetErrorString`).
class CommError : public Error {
public:
    CommError(const std::string& what, std::string call, int code) : Error(what), call_(std::move(call)), code_(code) {}
    /// The engine's function that failed, e.g. "MPI_Allreduce".
    [[nodiscard]] const std::string& call() const noexcept { return call_; }
    /// The status it returned (an MPI error code or an `ncclResult_t`).
    [[nodiscard]] int code() const noexcept { return code_; }

private:
    std::string call_;
    int code_;
};

/// A collective call whose wait for the other ranks passed its deadline (`mpi::Options::timeout`):
/// some rank never joined it (it failed before the call, or stopped calling), or its messages stopped
/// arriving (a link down, a host gone: see docs/scaling-out.md, "Across hosts"). The message names the
/// syncblob operation, what it waited for, the engine's call and the timeout. See
/// docs/scaling-out.md for what the communicator and the arena are left like.
class TimeoutError : public Error {
public:
    TimeoutError(const std::string& what, std::string operation, std::string call, std::chrono::milliseconds timeout)
        : Error(what), operation_(std::move(operation)), call_(std::move(call)), timeout_(timeout) {}
    /// The syncblob operation, e.g. "mpi::broadcast_data".
    [[nodiscard]] const std::string& operation() const noexcept { return operation_; }
    /// The engine's call whose completion was awaited, e.g. "MPI_Iallgather".
    [[nodiscard]] const std::string& call() const noexcept { return call_; }
    /// How long the operation waited.
    [[nodiscard]] std::chrono::milliseconds timeout() const noexcept { return timeout_; }

private:
    std::string operation_;
    std::string call_;
    std::chrono::milliseconds timeout_;
};

SYNCBLOB_END_NAMESPACE
