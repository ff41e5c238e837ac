// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Checked CUDA runtime and cuBLAS calls: `SYNCBLOB_CUDA_CHECK(call)` turns a failing
/// `cudaError_t` or `cublasStatus_t` into an exception that carries the call, the code and its name.
/// Host code: compiles with any C++ compiler.

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <new>
#include <string>
#include <string_view>

#include "../core/error.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace cuda {

/// Device memory (or pinned host memory) ran out. A `std::bad_alloc`, as every out-of-memory
/// condition in syncblob is, whose `what()` names the failing call.
class OutOfMemoryError : public std::bad_alloc {
public:
    explicit OutOfMemoryError(std::string what) : what_(std::move(what)) {}
    [[nodiscard]] const char* what() const noexcept override { return what_.c_str(); }

private:
    std::string what_;
};

/// True for the runtime statuses that mean "no usable driver or device here": no driver or a
/// stub driver, a driver older than the runtime, no GPU, or every GPU unavailable.
[[nodiscard]] constexpr bool is_no_device_status(cudaError_t status) noexcept {
    return status == cudaErrorInsufficientDriver || status == cudaErrorNoDevice || status == cudaErrorStubLibrary ||
           status == cudaErrorDevicesUnavailable || status == cudaErrorSystemDriverMismatch ||
           status == cudaErrorCompatNotSupportedOnDevice;
}

namespace detail {

[[nodiscard]] inline std::string status_message(std::string_view call, std::string_view context, const char* name,
                                                int code, const char* text) {
    std::string message;
    if (!context.empty()) {
        message.append(context).append(": ");
    }
    message.append(call).append(" failed with ").append(name != nullptr ? name : "?");
    message.append(" (").append(std::to_string(code)).append("): ").append(text != nullptr ? text : "?");
    return message;
}

/// Throws the exception for a failed runtime call: `NoDeviceError` when there is no usable driver
/// or device, `OutOfMemoryError` when memory ran out, `DeviceError` otherwise.
[[noreturn]] inline void raise(cudaError_t status, std::string_view call, std::string_view context = {}) {
    (void)cudaGetLastError();  // clear the (non-sticky) error so later launches are checked afresh
    const int code = static_cast<int>(status);
    std::string message = status_message(call, context, cudaGetErrorName(status), code, cudaGetErrorString(status));
    if (is_no_device_status(status)) {
        throw NoDeviceError("no usable CUDA device: " + message, code);
    }
    if (status == cudaErrorMemoryAllocation) {
        throw OutOfMemoryError(std::move(message));
    }
    throw DeviceError(message, code);
}

/// Throws the exception for a failed cuBLAS call (`OutOfMemoryError` for CUBLAS_STATUS_ALLOC_FAILED).
[[noreturn]] inline void raise(cublasStatus_t status, std::string_view call, std::string_view context = {}) {
    const int code = static_cast<int>(status);
    std::string message =
        status_message(call, context, cublasGetStatusName(status), code, cublasGetStatusString(status));
    if (status == CUBLAS_STATUS_ALLOC_FAILED) {
        throw OutOfMemoryError(std::move(message));
    }
    throw DeviceError(message, code);
}

[[nodiscard]] constexpr bool failed(cudaError_t status) noexcept {
    return status != cudaSuccess;
}
[[nodiscard]] constexpr bool failed(cublasStatus_t status) noexcept {
    return status != CUBLAS_STATUS_SUCCESS;
}

}  // namespace detail

}  // namespace cuda

SYNCBLOB_END_NAMESPACE

/// Runs `call` (returning `cudaError_t` or `cublasStatus_t`) and throws when it fails: `NoDeviceError`
/// when no usable driver or device exists, `syncblob::cuda::OutOfMemoryError` (a `std::bad_alloc`)
/// when memory ran out, `DeviceError` otherwise. The message holds the optional context (a
/// `std::string` or string literal naming the operation and its values, evaluated only on failure),
/// the call's text, the status name, its code and its description.
#define SYNCBLOB_CUDA_CHECK(call, ...)                                                          \
    do {                                                                                        \
        const auto syncblob_status_ = (call);                                                   \
        if (::syncblob::cuda::detail::failed(syncblob_status_)) {                               \
            ::syncblob::cuda::detail::raise(syncblob_status_, #call __VA_OPT__(, __VA_ARGS__)); \
        }                                                                                       \
    } while (false)
