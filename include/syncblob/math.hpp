// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Blob math as free functions (target `syncblob::eigen`): `update` (data −= diff), `asum_data`,
/// `asum_diff`, `sumsq_data`, `sumsq_diff`, `scale_data`, `scale_diff` and `dot`.
///
/// Each runs where the data is fresh (Caffe's rule): a host head runs the host kernels
/// (syncblob/math/host_kernels.hpp); a device or synced head runs `DeviceKernels<Backend>` on the
/// buffer's own device (a `DeviceGuard` makes it current for the call and restores the caller's). An operand
/// of a two-operand function that is fresh only on the other side is copied there first (the copy
/// shows in its stats). Every buffer a kernel reads or writes counts it in its stats
/// (`host_kernels` / `device_kernels`). Only floating element types have math (`FloatingElement`);
/// half and bfloat16 compute and return in float. Reductions are deterministic for a given
/// processor and kernel path, whatever the thread count.
///
/// Math on uninitialized data: `asum`, `sumsq` and `dot` return 0 (the data would read as zeros)
/// without allocating; `scale` does nothing; `update` throws `StateError`.

#include <cstdint>
#include <string>
#include <type_traits>

#include "blob.hpp"
#include "core/element.hpp"
#include "core/error.hpp"
#include "math/device_kernels.hpp"
#include "math/host_kernels.hpp"
#include "math/simulated_kernels.hpp"
#include "memory/synced_buffer.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace detail {

// Every function below has two parts. The inline part handles the common case, a buffer whose host
// copy is fresh and needs nothing done (no allocation, copy or state change): one state check, the
// kernel count and a jump into the kernel, with no stack frame and no call that returns. Everything
// else (empty or uninitialized buffers, device heads, stale host copies, errors) goes to the
// out-of-line general part, which would otherwise give every small call its frame and spills.
// A blob with elements always has both buffers (only a blob without a shape has none, and its
// count is 0), so `n != 0` is the only guard a buffer pointer needs.

// True when math on a buffer with this head runs on the device.
template <SyncedAllocator A>
constexpr bool runs_on_device(Head head) noexcept {
    if constexpr (A::device_backend::has_device) {
        return head == Head::at_device || head == Head::synced;
    } else {
        (void)head;
        return false;
    }
}

// The host elements when math reading this buffer runs on the host with nothing to do first, else
// null. With a device, a synced head runs on the device, so only a host head qualifies.
template <class T, SyncedAllocator A, class Buffer>
SYNCBLOB_ALWAYS_INLINE const T* host_ready(const Buffer& buffer) noexcept {
    if constexpr (A::device_backend::has_device) {
        if (buffer->head() != Head::at_host) {
            return nullptr;
        }
    }
    return static_cast<const T*>(buffer->host_data_if_fresh());
}
// The host elements when math writing this buffer runs on the host with nothing to do first.
template <class T, class Buffer>
SYNCBLOB_ALWAYS_INLINE T* mutable_host_ready(const Buffer& buffer) noexcept {
    return static_cast<T*>(buffer->mutable_host_data_if_fresh());
}

// Counts a kernel on both operands' buffers, once when they are the same buffer.
template <class Buffer>
SYNCBLOB_ALWAYS_INLINE void record_kernels(const Buffer& a, const Buffer& b, bool on_device) noexcept {
    a->record_kernel(on_device);
    if (b != a) {
        b->record_kernel(on_device);
    }
}

// A kernel about to run on `runs_on`'s stream that reads `operand`: when the two buffers have
// different streams, the kernel's stream first waits for the work issued on the operand's.
template <class Buffer>
void order_after(const Buffer& runs_on, const Buffer& operand) {
    if (operand->stream() != runs_on->stream()) {
        using Device = typename std::remove_cvref_t<decltype(*operand)>::device_backend;
        auto written = Device::record(operand->stream());
        Device::stream_wait(runs_on->stream(), written);
    }
}

// After a kernel on `runs_on`'s stream that reads `operand`: the operand's buffer frees its device
// block after the work on its own stream (in stream order, or after the host waited for it), so
// that stream waits for the kernel, whatever the backend: a caching allocator would otherwise hand
// the block out again under the kernel. Reductions need none of this: their result reaches the host.
template <class Buffer>
void order_release_after(const Buffer& runs_on, const Buffer& operand) {
    using Device = typename std::remove_cvref_t<decltype(*operand)>::device_backend;
    detail::order_after<Device>(runs_on->stream(), operand->stream());
}

template <bool Squares, FloatingElement T, SyncedAllocator A, class Buffer>
SYNCBLOB_NOINLINE accumulator_t<T> reduce_general(std::int64_t n, const Buffer& buffer) {
    const Head head = n != 0 ? buffer->head() : Head::uninitialized;
    if (head == Head::uninitialized) {
        return 0;
    }
    if (runs_on_device<A>(head)) {
        if constexpr (A::device_backend::has_device) {
            using K = DeviceKernels<typename A::device_backend>;
            const DeviceGuard<typename A::device_backend> guard(buffer->device_id());
            const auto* p = static_cast<const T*>(buffer->device_data());
            buffer->record_kernel(true);
            return Squares ? K::sumsq(p, n, buffer->stream()) : K::asum(p, n, buffer->stream());
        }
    }
    const auto* p = static_cast<const T*>(buffer->host_data());
    buffer->record_kernel(false);
    return Squares ? math::sumsq(p, n) : math::asum(p, n);
}

// Σ|x| (Squares: Σx²) over the n elements of a blob's data or diff buffer.
template <bool Squares, FloatingElement T, SyncedAllocator A, class Buffer>
accumulator_t<T> reduce_one(std::int64_t n, const Buffer& buffer) {
    if (const T* p = n != 0 ? host_ready<T, A>(buffer) : nullptr) {
        buffer->record_kernel(false);
        return Squares ? math::sumsq(p, n) : math::asum(p, n);
    }
    return reduce_general<Squares, T, A>(n, buffer);
}

template <FloatingElement T, SyncedAllocator A, class Buffer>
SYNCBLOB_NOINLINE void scale_general(std::int64_t n, const Buffer& buffer, accumulator_t<T> alpha) {
    const Head head = n != 0 ? buffer->head() : Head::uninitialized;
    if (head == Head::uninitialized) {
        return;  // zeros stay zeros
    }
    if (runs_on_device<A>(head)) {
        if constexpr (A::device_backend::has_device) {
            const DeviceGuard<typename A::device_backend> guard(buffer->device_id());
            auto* p = static_cast<T*>(buffer->mutable_device_data());
            buffer->record_kernel(true);
            DeviceKernels<typename A::device_backend>::scale(p, alpha, n, buffer->stream());
            return;
        }
    }
    auto* p = static_cast<T*>(buffer->mutable_host_data());
    buffer->record_kernel(false);
    math::scale(p, alpha, n);
}

// x *= alpha over the n elements of a blob's data or diff buffer.
template <FloatingElement T, SyncedAllocator A, class Buffer>
void scale_one(std::int64_t n, const Buffer& buffer, accumulator_t<T> alpha) {
    if (T* p = n != 0 ? mutable_host_ready<T>(buffer) : nullptr) {
        buffer->record_kernel(false);
        math::scale(p, alpha, n);
        return;
    }
    scale_general<T, A>(n, buffer, alpha);
}

template <FloatingElement T, SyncedAllocator A>
SYNCBLOB_NOINLINE void update_general(Blob<T, A>& blob) {
    const std::int64_t n = blob.count();
    if (n == 0) {
        return;
    }
    const auto& data = blob.data_buffer();
    const auto& diff = blob.diff_buffer();
    const Head head = data->head();
    if (head == Head::uninitialized) {
        throw StateError("update: the data of blob " + blob.shape_string() +
                         " is uninitialized (write it before updating it with its diff)");
    }
    if (diff->head() == Head::uninitialized) {
        return;
    }
    if (runs_on_device<A>(head)) {
        if constexpr (A::device_backend::has_device) {
            const DeviceGuard<typename A::device_backend> guard(data->device_id());
            const auto* d = static_cast<const T*>(diff->device_data());
            auto* y = static_cast<T*>(data->mutable_device_data());
            record_kernels(data, diff, true);
            order_after(data, diff);
            DeviceKernels<typename A::device_backend>::sub(y, d, n, data->stream());
            order_release_after(data, diff);
            return;
        }
    }
    const auto* d = static_cast<const T*>(diff->host_data());  // before the write: diff may be data
    auto* y = static_cast<T*>(data->mutable_host_data());
    record_kernels(data, diff, false);
    math::sub(y, d, n);
}

template <FloatingElement T, SyncedAllocator A>
SYNCBLOB_NOINLINE accumulator_t<T> dot_general(const Blob<T, A>& a, const Blob<T, A>& b) {
    if (a.count() != b.count()) {
        throw ShapeError("dot: counts differ (" + a.shape_string() + " and " + b.shape_string() + ")");
    }
    const std::int64_t n = a.count();
    if (n == 0 || a.data_head() == Head::uninitialized || b.data_head() == Head::uninitialized) {
        return 0;
    }
    const auto& x = a.data_buffer();
    const auto& y = b.data_buffer();
    if (runs_on_device<A>(x->head())) {
        if constexpr (A::device_backend::has_device) {
            const DeviceGuard<typename A::device_backend> guard(x->device_id());
            const auto* px = static_cast<const T*>(x->device_data());
            const auto* py = static_cast<const T*>(y->device_data());
            record_kernels(x, y, true);
            order_after(x, y);
            return DeviceKernels<typename A::device_backend>::dot(px, py, n, x->stream());
        }
    }
    const auto* px = static_cast<const T*>(x->host_data());
    const auto* py = static_cast<const T*>(y->host_data());
    record_kernels(x, y, false);
    return math::dot(px, py, n);
}

}  // namespace detail

/// data −= diff, where the data is fresh; the diff follows it (copied there if needed). An
/// uninitialized diff reads as zeros (nothing changes). \throws StateError when the data is
/// uninitialized; the blob is then unchanged.
template <FloatingElement T, SyncedAllocator A>
void update(Blob<T, A>& blob) {
    const std::int64_t n = blob.count();
    const auto& data = blob.data_buffer();
    const auto& diff = blob.diff_buffer();
    const T* d = n != 0 ? detail::host_ready<T, A>(diff) : nullptr;
    if (T* y = d != nullptr ? detail::mutable_host_ready<T>(data) : nullptr) {
        detail::record_kernels(data, diff, false);
        math::sub(y, d, n);
        return;
    }
    detail::update_general(blob);
}

/// Σ|data|. 0 for uninitialized data.
template <FloatingElement T, SyncedAllocator A>
[[nodiscard]] accumulator_t<T> asum_data(const Blob<T, A>& blob) {
    return detail::reduce_one<false, T, A>(blob.count(), blob.data_buffer());
}
/// Σ|diff|. 0 for an uninitialized diff.
template <FloatingElement T, SyncedAllocator A>
[[nodiscard]] accumulator_t<T> asum_diff(const Blob<T, A>& blob) {
    return detail::reduce_one<false, T, A>(blob.count(), blob.diff_buffer());
}
/// Σdata². 0 for uninitialized data.
template <FloatingElement T, SyncedAllocator A>
[[nodiscard]] accumulator_t<T> sumsq_data(const Blob<T, A>& blob) {
    return detail::reduce_one<true, T, A>(blob.count(), blob.data_buffer());
}
/// Σdiff². 0 for an uninitialized diff.
template <FloatingElement T, SyncedAllocator A>
[[nodiscard]] accumulator_t<T> sumsq_diff(const Blob<T, A>& blob) {
    return detail::reduce_one<true, T, A>(blob.count(), blob.diff_buffer());
}
/// data *= s, where the data is fresh. Uninitialized data is left as it is (zeros).
template <FloatingElement T, SyncedAllocator A>
void scale_data(Blob<T, A>& blob, accumulator_t<T> s) {
    detail::scale_one<T, A>(blob.count(), blob.data_buffer(), s);
}
/// diff *= s, where the diff is fresh. An uninitialized diff is left as it is (zeros).
template <FloatingElement T, SyncedAllocator A>
void scale_diff(Blob<T, A>& blob, accumulator_t<T> s) {
    detail::scale_one<T, A>(blob.count(), blob.diff_buffer(), s);
}

/// Σ a.data · b.data, on the side where `a`'s data is fresh (`b`'s is copied there if needed).
/// 0 when either is uninitialized. \throws ShapeError when the counts differ.
template <FloatingElement T, SyncedAllocator A>
[[nodiscard]] accumulator_t<T> dot(const Blob<T, A>& a, const Blob<T, A>& b) {
    const std::int64_t n = a.count();
    const auto& x = a.data_buffer();
    const auto& y = b.data_buffer();
    const T* px = n != 0 && n == b.count() ? detail::host_ready<T, A>(x) : nullptr;
    if (const T* py = px != nullptr ? detail::host_ready<T, A>(y) : nullptr) {
        detail::record_kernels(x, y, false);
        return math::dot(px, py, n);
    }
    return detail::dot_general(a, b);
}

SYNCBLOB_END_NAMESPACE
