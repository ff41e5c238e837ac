// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Blob math as free functions (target `syncblob::eigen`): `update` (data −= diff), `asum_data`,
/// `asum_diff`, `sumsq_data`, `sumsq_diff`, `scale_data`, `scale_diff` and `dot`.
///
/// Each runs where the data is fresh (Caffe's rule): a host head runs the host kernels
/// (syncblob/math/host_kernels.hpp); a device or synced head runs `DeviceKernels<Backend>`. An operand
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

#include "blob.hpp"
#include "core/element.hpp"
#include "core/error.hpp"
#include "math/device_kernels.hpp"
#include "math/host_kernels.hpp"
#include "math/simulated_kernels.hpp"
#include "memory/synced_buffer.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace detail {

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

template <FloatingElement T, SyncedAllocator A, class Buffer>
accumulator_t<T> reduce_one(const Blob<T, A>& blob, const Buffer& buffer, bool is_diff, bool squares) {
    if (blob.count() == 0 || !buffer || buffer->head() == Head::uninitialized) {
        return 0;
    }
    const std::int64_t n = blob.count();
    if (runs_on_device<A>(buffer->head())) {
        if constexpr (A::device_backend::has_device) {
            using K = DeviceKernels<typename A::device_backend>;
            const T* p = is_diff ? blob.device_diff() : blob.device_data();
            buffer->record_kernel(true);
            return squares ? K::sumsq(p, n, buffer->stream()) : K::asum(p, n, buffer->stream());
        }
    }
    const T* p = (is_diff ? blob.host_diff() : blob.host_data()).data();
    buffer->record_kernel(false);
    return squares ? math::sumsq(p, n) : math::asum(p, n);
}

template <FloatingElement T, SyncedAllocator A, class Buffer>
void scale_one(Blob<T, A>& blob, const Buffer& buffer, bool is_diff, accumulator_t<T> alpha) {
    if (blob.count() == 0 || !buffer || buffer->head() == Head::uninitialized) {
        return;  // zeros stay zeros
    }
    const std::int64_t n = blob.count();
    if (runs_on_device<A>(buffer->head())) {
        if constexpr (A::device_backend::has_device) {
            T* p = is_diff ? blob.mutable_device_diff() : blob.mutable_device_data();
            buffer->record_kernel(true);
            DeviceKernels<typename A::device_backend>::scale(p, alpha, n, buffer->stream());
            return;
        }
    }
    T* p = (is_diff ? blob.mutable_host_diff() : blob.mutable_host_data()).data();
    buffer->record_kernel(false);
    math::scale(p, alpha, n);
}

}  // namespace detail

/// data −= diff, where the data is fresh; the diff follows it (copied there if needed). An
/// uninitialized diff reads as zeros (nothing changes). \throws StateError when the data is
/// uninitialized; the blob is then unchanged.
template <FloatingElement T, SyncedAllocator A>
void update(Blob<T, A>& blob) {
    if (blob.count() == 0) {
        return;
    }
    const auto& data = blob.data_buffer();
    const auto& diff = blob.diff_buffer();
    if (data->head() == Head::uninitialized) {
        throw StateError("update: the data of blob " + blob.shape_string() +
                         " is uninitialized (write it before updating it with its diff)");
    }
    if (diff->head() == Head::uninitialized) {
        return;
    }
    const std::int64_t n = blob.count();
    const bool on_device = detail::runs_on_device<A>(data->head());
    if (on_device) {
        if constexpr (A::device_backend::has_device) {
            const T* d = blob.device_diff();
            T* y = blob.mutable_device_data();
            data->record_kernel(true);
            if (diff != data) {
                diff->record_kernel(true);
            }
            DeviceKernels<typename A::device_backend>::sub(y, d, n, data->stream());
            return;
        }
    }
    const T* d = blob.host_diff().data();
    T* y = blob.mutable_host_data().data();
    data->record_kernel(false);
    if (diff != data) {
        diff->record_kernel(false);
    }
    math::sub(y, d, n);
}

/// Σ|data|. 0 for uninitialized data.
template <FloatingElement T, SyncedAllocator A>
[[nodiscard]] accumulator_t<T> asum_data(const Blob<T, A>& blob) {
    return detail::reduce_one(blob, blob.data_buffer(), false, false);
}
/// Σ|diff|. 0 for an uninitialized diff.
template <FloatingElement T, SyncedAllocator A>
[[nodiscard]] accumulator_t<T> asum_diff(const Blob<T, A>& blob) {
    return detail::reduce_one(blob, blob.diff_buffer(), true, false);
}
/// Σdata². 0 for uninitialized data.
template <FloatingElement T, SyncedAllocator A>
[[nodiscard]] accumulator_t<T> sumsq_data(const Blob<T, A>& blob) {
    return detail::reduce_one(blob, blob.data_buffer(), false, true);
}
/// Σdiff². 0 for an uninitialized diff.
template <FloatingElement T, SyncedAllocator A>
[[nodiscard]] accumulator_t<T> sumsq_diff(const Blob<T, A>& blob) {
    return detail::reduce_one(blob, blob.diff_buffer(), true, true);
}
/// data *= s, where the data is fresh. Uninitialized data is left as it is (zeros).
template <FloatingElement T, SyncedAllocator A>
void scale_data(Blob<T, A>& blob, accumulator_t<T> s) {
    detail::scale_one(blob, blob.data_buffer(), false, s);
}
/// diff *= s, where the diff is fresh. An uninitialized diff is left as it is (zeros).
template <FloatingElement T, SyncedAllocator A>
void scale_diff(Blob<T, A>& blob, accumulator_t<T> s) {
    detail::scale_one(blob, blob.diff_buffer(), true, s);
}

/// Σ a.data · b.data, on the side where `a`'s data is fresh (`b`'s is copied there if needed).
/// 0 when either is uninitialized. \throws ShapeError when the counts differ.
template <FloatingElement T, SyncedAllocator A>
[[nodiscard]] accumulator_t<T> dot(const Blob<T, A>& a, const Blob<T, A>& b) {
    if (a.count() != b.count()) {
        throw ShapeError("dot: counts differ (" + a.shape_string() + " and " + b.shape_string() + ")");
    }
    const std::int64_t n = a.count();
    if (n == 0 || a.data_head() == Head::uninitialized || b.data_head() == Head::uninitialized) {
        return 0;
    }
    const auto& x = a.data_buffer();
    const auto& y = b.data_buffer();
    if (detail::runs_on_device<A>(x->head())) {
        if constexpr (A::device_backend::has_device) {
            const T* px = a.device_data();
            const T* py = b.device_data();
            x->record_kernel(true);
            if (y != x) {
                y->record_kernel(true);
            }
            return DeviceKernels<typename A::device_backend>::dot(px, py, n, x->stream());
        }
    }
    const T* px = a.host_data().data();
    const T* py = b.host_data().data();
    x->record_kernel(false);
    if (y != x) {
        y->record_kernel(false);
    }
    return math::dot(px, py, n);
}

SYNCBLOB_END_NAMESPACE
