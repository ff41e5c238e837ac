// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// `CommError`: a failed call of a communication engine (MPI, NCCL).

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

SYNCBLOB_END_NAMESPACE
