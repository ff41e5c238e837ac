// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// `cuda::Device`: the CUDA device backend (cudaMalloc / cudaFree, cudaMemcpy(Async) on the
/// buffer's stream, events for asynchronous copies). Host code: compiles with any C++ compiler.

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <string>
#include <string_view>

#include "../core/sync_audit.hpp"
#include "../memory/device_backend.hpp"
#include "error.hpp"
#include "runtime.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace cuda {

/// A `DeviceBackend` over the CUDA runtime. Synchronous copies run on the given stream and wait for
/// it; fills and asynchronous copies are only issued. Every wait is reported to the sync audit. Every call is checked:
/// where the runtime finds no usable driver or device, the first device access throws `NoDeviceError` carrying the
/// driver's message, and host-side use of a buffer is unaffected.
struct Device {
    /// `cudaStream_t`; a buffer's stream is `default_stream()` until it is given another.
    using stream_type = cudaStream_t;
    using event_type = Event;

    static constexpr std::string_view name = "cuda::Device";
    static constexpr bool has_device = true;

    /// \throws NoDeviceError without a usable device, `OutOfMemoryError` (a `std::bad_alloc`) when
    /// device memory runs out.
    [[nodiscard]] static void* allocate(std::size_t bytes) {
        audit::note(audit::Wait::system_allocation);
        void* p = nullptr;
        SYNCBLOB_CUDA_CHECK(cudaMalloc(&p, bytes), "cuda::Device::allocate(" + std::to_string(bytes) + " bytes)");
        return p;
    }

    static void deallocate(void* p, std::size_t) noexcept {
        if (p != nullptr) {
            audit::note_nothrow(audit::Wait::blocking_free);  // cudaFree waits for the whole device
            if (cudaFree(p) != cudaSuccess) {  // nothing to report from a release; a dead context frees everything
                (void)cudaGetLastError();      // anyway, but the error must not be blamed on the next call
            }
        }
    }

    /// `cudaStreamLegacy`, named explicitly: a null `cudaStream_t` means the legacy or the
    /// per-thread default stream depending on each translation unit's `--default-stream`, so two
    /// translation units of one program could disagree about a buffer's stream. The legacy default
    /// stream is also the one a kernel launched without a stream runs on under nvcc's default
    /// flags, so such kernels stay ordered with syncblob's work.
    [[nodiscard]] static stream_type default_stream() noexcept { return cudaStreamLegacy; }
    [[nodiscard]] static int current_device() { return cuda::current_device(); }
    static void set_device(int device) { cuda::set_device(device); }
    /// The device whose memory `p` points into (`cudaPointerGetAttributes`); the current device for
    /// memory CUDA does not know (plain host memory).
    [[nodiscard]] static int device_of(const void* p) {
        cudaPointerAttributes attributes{};
        if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
            (void)cudaGetLastError();  // not sticky, but would be blamed on the next call
            return current_device();
        }
        return attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged ? attributes.device
                                                                                                   : current_device();
    }
    [[nodiscard]] static int device_count() { return cuda::device_count(); }

    /// Copies on `stream` and waits for it (so everything issued on it before is finished too).
    static void copy(void* dst, const void* src, std::size_t bytes, CopyKind kind, stream_type stream) {
        if (bytes == 0) {
            return;
        }
        audit::note(audit::Wait::synchronous_copy);
        copy_async(dst, src, bytes, kind, stream);
        SYNCBLOB_CUDA_CHECK(cudaStreamSynchronize(stream), "cuda::Device::copy");
    }

    /// Issues the copy on `stream` and returns. The host side should be pinned memory for the
    /// copy to overlap with host work (`cuda::PinnedAllocator`).
    static void copy_async(void* dst, const void* src, std::size_t bytes, CopyKind kind, stream_type stream) {
        if (bytes == 0) {
            return;
        }
        SYNCBLOB_CUDA_CHECK(
            cudaMemcpyAsync(dst, src, bytes, runtime_kind(kind), stream),
            "cuda::Device::copy of " + std::to_string(bytes) + " bytes " + std::string(kind_name(kind)));
    }

    /// Sets `bytes` bytes at `dst` to `byte` on `stream`, in stream order: the host does not wait.
    static void fill(void* dst, unsigned char byte, std::size_t bytes, stream_type stream) {
        if (bytes == 0) {
            return;
        }
        SYNCBLOB_CUDA_CHECK(cudaMemsetAsync(dst, byte, bytes, stream),
                            "cuda::Device::fill of " + std::to_string(bytes) + " bytes");
    }

    /// Page-locks host memory for the device (`cudaHostRegister`): true when this call registered
    /// it, false when it already was (`cudaErrorHostMemoryAlreadyRegistered`: left as it is).
    /// \throws NoDeviceError without a usable driver; DeviceError when it cannot be page-locked.
    static bool register_host(void* p, std::size_t bytes) {
        const cudaError_t status = cudaHostRegister(p, bytes, cudaHostRegisterDefault);
        if (status == cudaErrorHostMemoryAlreadyRegistered) {
            (void)cudaGetLastError();
            return false;
        }
        SYNCBLOB_CUDA_CHECK(status, "cuda::Device::register_host of " + std::to_string(bytes) + " bytes");
        return true;
    }
    /// Undoes `register_host` (an error has nothing to report to: it is cleared).
    static void unregister_host(void* p) noexcept {
        (void)cudaHostUnregister(p);
        (void)cudaGetLastError();
    }

    [[nodiscard]] static event_type record(stream_type stream) { return Event::record(stream); }
    static void wait(event_type& event) { event.synchronize(); }
    static void stream_wait(stream_type stream, event_type& event) { event.make_wait(stream); }
    [[nodiscard]] static bool query(const event_type& event) { return event.query(); }

    /// Checking mode: buffers overwrite the side a mutable access made stale (0xFF bytes), so code
    /// that kept a stale pointer reads garbage. Off by default; process-wide.
    [[nodiscard]] static bool poisons_stale_side() noexcept { return checking().load(std::memory_order_relaxed); }
    static void set_checking(bool on) noexcept { checking().store(on, std::memory_order_relaxed); }

private:
    static std::atomic<bool>& checking() noexcept {
        static std::atomic<bool> flag{false};
        return flag;
    }

    static constexpr cudaMemcpyKind runtime_kind(CopyKind kind) noexcept {
        switch (kind) {
            case CopyKind::host_to_device:
                return cudaMemcpyHostToDevice;
            case CopyKind::device_to_host:
                return cudaMemcpyDeviceToHost;
            case CopyKind::device_to_device:
                return cudaMemcpyDeviceToDevice;
        }
        return cudaMemcpyDefault;
    }

    static constexpr std::string_view kind_name(CopyKind kind) noexcept {
        switch (kind) {
            case CopyKind::host_to_device:
                return "host to device";
            case CopyKind::device_to_host:
                return "device to host";
            case CopyKind::device_to_device:
                return "device to device";
        }
        return "?";
    }
};

static_assert(DeviceBackend<Device>);

}  // namespace cuda

SYNCBLOB_END_NAMESPACE
