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
///
/// The layers: these functions name an operation (math/operations.hpp, its arithmetic) and
/// its operands; math/detail/dispatch.hpp picks host or device; on the host,
/// syncblob/math/host_kernels.hpp picks the threads and the instruction set.

#include <cstdint>
#include <string>

#include "blob/blob.hpp"
#include "core/element.hpp"
#include "core/error.hpp"
#include "math/detail/dispatch.hpp"
#include "math/device_kernels.hpp"
#include "math/host_kernels.hpp"
#include "math/operations.hpp"
#include "sim/kernels.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace detail {

// update's general part: its one rule of its own (uninitialized data is an error), then the dispatch.
template <FloatingElement T, SyncedAllocator A>
SYNCBLOB_NOINLINE void update_general(Blob<T, A>& blob) {
    if (blob.count() != 0 && blob.data_head() == Head::uninitialized) {
        throw StateError("update: the data of blob " + blob.shape_string() +
                         " is uninitialized (write it before updating it with its diff)");
    }
    math::detail::transform_general<T, A>(math::detail::Sub{}, blob.count(), blob.data_buffer(), blob.diff_buffer());
}

template <FloatingElement T, SyncedAllocator A>
[[noreturn]] SYNCBLOB_NOINLINE void throw_counts_differ(const char* operation, const Blob<T, A>& a,
                                                        const Blob<T, A>& b) {
    throw ShapeError(std::string(operation) + ": counts differ (" + a.shape_string() + " and " + b.shape_string() +
                     ")");
}

template <class R, SyncedAllocator A>
void check_scalar(const char* operation, const Blob<R, A>& result) {
    if (result.count() != 1) {
        throw ShapeError(std::string(operation) + ": the result blob must hold one element, it is " +
                         result.shape_string());
    }
}

}  // namespace detail

/// data −= diff, where the data is fresh; the diff follows it (copied there if needed). An
/// uninitialized diff reads as zeros (nothing changes). \throws StateError when the data is
/// uninitialized; the blob is then unchanged.
template <FloatingElement T, SyncedAllocator A>
void update(Blob<T, A>& blob) {
    if (!math::detail::transform_on_host_now<T, A>(math::detail::Sub{}, blob.count(), blob.data_buffer(),
                                                   blob.diff_buffer())) {
        detail::update_general(blob);
    }
}

/// Σ|data|. 0 for uninitialized data.
template <FloatingElement T, SyncedAllocator A>
[[nodiscard]] accumulator_t<T> asum_data(const Blob<T, A>& blob) {
    return math::detail::reduce_buffers<T, A>(math::detail::Asum{}, blob.count(), blob.data_buffer());
}
/// Σ|diff|. 0 for an uninitialized diff.
template <FloatingElement T, SyncedAllocator A>
[[nodiscard]] accumulator_t<T> asum_diff(const Blob<T, A>& blob) {
    return math::detail::reduce_buffers<T, A>(math::detail::Asum{}, blob.count(), blob.diff_buffer());
}
/// Σdata². 0 for uninitialized data.
template <FloatingElement T, SyncedAllocator A>
[[nodiscard]] accumulator_t<T> sumsq_data(const Blob<T, A>& blob) {
    return math::detail::reduce_buffers<T, A>(math::detail::Sumsq{}, blob.count(), blob.data_buffer());
}
/// Σdiff². 0 for an uninitialized diff.
template <FloatingElement T, SyncedAllocator A>
[[nodiscard]] accumulator_t<T> sumsq_diff(const Blob<T, A>& blob) {
    return math::detail::reduce_buffers<T, A>(math::detail::Sumsq{}, blob.count(), blob.diff_buffer());
}
/// The reductions with their result left in `result` (a blob of one element) instead of returned:
/// where the data is fresh on the device, a kernel on the blob's stream writes `result`'s device
/// side and the host does not wait (read it when it is needed: `result.host_data()[0]` waits then);
/// on the host, `result`'s host side. As cuBLAS's device pointer mode, or CUB's `DeviceReduce`.
/// \throws ShapeError when `result` does not hold exactly one element (nothing is computed).
template <FloatingElement T, SyncedAllocator A>
void asum_data(const Blob<T, A>& blob, Blob<accumulator_t<T>, A>& result) {
    detail::check_scalar("asum_data", result);
    math::detail::reduce_into<T, A>(math::detail::Asum{}, blob.count(), result, blob.data_buffer());
}
template <FloatingElement T, SyncedAllocator A>
void asum_diff(const Blob<T, A>& blob, Blob<accumulator_t<T>, A>& result) {
    detail::check_scalar("asum_diff", result);
    math::detail::reduce_into<T, A>(math::detail::Asum{}, blob.count(), result, blob.diff_buffer());
}
template <FloatingElement T, SyncedAllocator A>
void sumsq_data(const Blob<T, A>& blob, Blob<accumulator_t<T>, A>& result) {
    detail::check_scalar("sumsq_data", result);
    math::detail::reduce_into<T, A>(math::detail::Sumsq{}, blob.count(), result, blob.data_buffer());
}
template <FloatingElement T, SyncedAllocator A>
void sumsq_diff(const Blob<T, A>& blob, Blob<accumulator_t<T>, A>& result) {
    detail::check_scalar("sumsq_diff", result);
    math::detail::reduce_into<T, A>(math::detail::Sumsq{}, blob.count(), result, blob.diff_buffer());
}
/// Σ a.data · b.data into `result`. \throws ShapeError when the counts differ or `result` does not
/// hold exactly one element.
template <FloatingElement T, SyncedAllocator A>
void dot(const Blob<T, A>& a, const Blob<T, A>& b, Blob<accumulator_t<T>, A>& result) {
    if (a.count() != b.count()) {
        detail::throw_counts_differ("dot", a, b);
    }
    detail::check_scalar("dot", result);
    math::detail::reduce_into<T, A>(math::detail::Dot{}, a.count(), result, a.data_buffer(), b.data_buffer());
}

/// data *= s, where the data is fresh. Uninitialized data is left as it is (zeros).
template <FloatingElement T, SyncedAllocator A>
void scale_data(Blob<T, A>& blob, accumulator_t<T> s) {
    math::detail::transform_buffers<T, A>(math::detail::Scale<accumulator_t<T>>{s}, blob.count(), blob.data_buffer());
}
/// diff *= s, where the diff is fresh. An uninitialized diff is left as it is (zeros).
template <FloatingElement T, SyncedAllocator A>
void scale_diff(Blob<T, A>& blob, accumulator_t<T> s) {
    math::detail::transform_buffers<T, A>(math::detail::Scale<accumulator_t<T>>{s}, blob.count(), blob.diff_buffer());
}

/// Σ a.data · b.data, on the side where `a`'s data is fresh (`b`'s is copied there if needed).
/// 0 when either is uninitialized. \throws ShapeError when the counts differ.
template <FloatingElement T, SyncedAllocator A>
[[nodiscard]] accumulator_t<T> dot(const Blob<T, A>& a, const Blob<T, A>& b) {
    if (a.count() != b.count()) {
        detail::throw_counts_differ("dot", a, b);
    }
    return math::detail::reduce_buffers<T, A>(math::detail::Dot{}, a.count(), a.data_buffer(), b.data_buffer());
}

SYNCBLOB_END_NAMESPACE
