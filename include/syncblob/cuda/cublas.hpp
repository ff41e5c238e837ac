// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Thin checked cuBLAS calls for float and double through the 64-bit entry points (`cublasSasum_64`
/// …, so no chunking at INT_MAX), on one handle per thread and device, created lazily. Host code.

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "../core/sync_audit.hpp"
#include "error.hpp"
#include "runtime.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace cuda {

namespace detail {

/// An owned cuBLAS handle.
class CublasHandle {
public:
    CublasHandle() = default;
    explicit CublasHandle(cublasHandle_t h) noexcept : handle_(h) {}
    CublasHandle(CublasHandle&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
    CublasHandle& operator=(CublasHandle&& other) noexcept {
        std::swap(handle_, other.handle_);
        return *this;
    }
    CublasHandle(const CublasHandle&) = delete;
    CublasHandle& operator=(const CublasHandle&) = delete;
    ~CublasHandle() {
        if (handle_ != nullptr) {
            (void)cublasDestroy(handle_);
        }
    }
    [[nodiscard]] cublasHandle_t get() const noexcept { return handle_; }

private:
    cublasHandle_t handle_ = nullptr;
};

}  // namespace detail

/// The calling thread's cuBLAS handle for the current device, created on first use and destroyed
/// when the thread ends. Results are returned to host memory (the default pointer mode).
/// \throws NoDeviceError without a usable device; DeviceError when cuBLAS cannot start.
[[nodiscard]] inline cublasHandle_t cublas_handle() {
    thread_local std::vector<detail::CublasHandle> handles;  // indexed by device
    const int device = current_device();
    const auto index = static_cast<std::size_t>(device);
    if (index >= handles.size()) {
        handles.resize(index + 1);
    }
    if (handles[index].get() == nullptr) {
        cublasHandle_t h = nullptr;
        SYNCBLOB_CUDA_CHECK(cublasCreate(&h), "cuda::cublas_handle for device " + std::to_string(device));
        handles[index] = detail::CublasHandle(h);
    }
    return handles[index].get();
}

namespace detail {
/// The thread's handle for the current device, set to issue its work on `stream`.
[[nodiscard]] inline cublasHandle_t cublas_on_stream(cudaStream_t stream) {
    cublasHandle_t h = cublas_handle();
    SYNCBLOB_CUDA_CHECK(cublasSetStream(h, stream), "cuda::blas");
    return h;
}
}  // namespace detail

namespace detail {
/// Device pointer mode on `h` for its lifetime (a result written to device memory, no host wait),
/// host pointer mode again after.
class DevicePointerMode {
public:
    explicit DevicePointerMode(cublasHandle_t h) : h_(h) {
        SYNCBLOB_CUDA_CHECK(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_DEVICE), "cuda::blas (device result)");
    }
    ~DevicePointerMode() { (void)cublasSetPointerMode(h_, CUBLAS_POINTER_MODE_HOST); }
    DevicePointerMode(const DevicePointerMode&) = delete;
    DevicePointerMode& operator=(const DevicePointerMode&) = delete;

private:
    cublasHandle_t h_;
};

/// `f` for float, `d` for double: of cuBLAS's two entry points, the one that takes T.
template <class T, class F, class D>
[[nodiscard]] constexpr auto entry(F f, D d) noexcept {
    if constexpr (std::same_as<T, float>) {
        return f;
    } else {
        return d;
    }
}

/// What a failed call says it was: "cuda::blas::dot<float> (device result)".
template <class T>
[[nodiscard]] std::string blas_what(std::string_view op, std::string_view more = {}) {
    std::string s = "cuda::blas::" + std::string(op) + (std::same_as<T, float> ? "<float>" : "<double>");
    return more.empty() ? s : s + " (" + std::string(more) + ")";
}
}  // namespace detail

/// The element types of cuBLAS's BLAS-1 calls here: float and double (other types have no overload,
/// which the device math layer detects).
template <class T>
concept CublasReal = std::same_as<T, float> || std::same_as<T, double>;

/// float and double BLAS-1 on device pointers, on `stream`. Reductions wait for their result.
namespace blas {

/// Σ|x[i]|.
template <CublasReal T>
[[nodiscard]] T asum(const T* x, std::int64_t n, cudaStream_t stream) {
    T r = 0;
    if (n > 0) {
        audit::note(audit::Wait::host_result);  // a host result pointer: cuBLAS waits
        SYNCBLOB_CUDA_CHECK(
            cuda::detail::entry<T>(cublasSasum_64, cublasDasum_64)(cuda::detail::cublas_on_stream(stream), n, x, 1, &r),
            cuda::detail::blas_what<T>("asum"));
    }
    return r;
}

/// Σx[i]·y[i].
template <CublasReal T>
[[nodiscard]] T dot(const T* x, const T* y, std::int64_t n, cudaStream_t stream) {
    T r = 0;
    if (n > 0) {
        audit::note(audit::Wait::host_result);  // a host result pointer: cuBLAS waits
        SYNCBLOB_CUDA_CHECK(cuda::detail::entry<T>(cublasSdot_64, cublasDdot_64)(cuda::detail::cublas_on_stream(stream),
                                                                                 n, x, 1, y, 1, &r),
                            cuda::detail::blas_what<T>("dot"));
    }
    return r;
}

/// y += alpha·x.
template <CublasReal T>
void axpy(std::type_identity_t<T> alpha, const T* x, T* y, std::int64_t n, cudaStream_t stream) {
    if (n > 0) {
        SYNCBLOB_CUDA_CHECK(cuda::detail::entry<T>(cublasSaxpy_64, cublasDaxpy_64)(
                                cuda::detail::cublas_on_stream(stream), n, &alpha, x, 1, y, 1),
                            cuda::detail::blas_what<T>("axpy"));
    }
}

/// x *= alpha.
template <CublasReal T>
void scal(std::type_identity_t<T> alpha, T* x, std::int64_t n, cudaStream_t stream) {
    if (n > 0) {
        SYNCBLOB_CUDA_CHECK(cuda::detail::entry<T>(cublasSscal_64, cublasDscal_64)(
                                cuda::detail::cublas_on_stream(stream), n, &alpha, x, 1),
                            cuda::detail::blas_what<T>("scal"));
    }
}

/// The reductions with their result left in device memory (`result`, on the device): queued on
/// `stream` in cuBLAS's device pointer mode; the host does not wait.
template <CublasReal T>
void asum_into(const T* x, std::int64_t n, cudaStream_t stream, T* result) {
    cublasHandle_t h = cuda::detail::cublas_on_stream(stream);
    const cuda::detail::DevicePointerMode mode(h);
    SYNCBLOB_CUDA_CHECK(cuda::detail::entry<T>(cublasSasum_64, cublasDasum_64)(h, n, x, 1, result),
                        cuda::detail::blas_what<T>("asum", "device result"));
}
template <CublasReal T>
void dot_into(const T* x, const T* y, std::int64_t n, cudaStream_t stream, T* result) {
    cublasHandle_t h = cuda::detail::cublas_on_stream(stream);
    const cuda::detail::DevicePointerMode mode(h);
    SYNCBLOB_CUDA_CHECK(cuda::detail::entry<T>(cublasSdot_64, cublasDdot_64)(h, n, x, 1, y, 1, result),
                        cuda::detail::blas_what<T>("dot", "device result"));
}

}  // namespace blas

}  // namespace cuda

SYNCBLOB_END_NAMESPACE
