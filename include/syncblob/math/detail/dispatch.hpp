// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Where a blob's math runs, for any operation of operations.hpp: the step between the facade
/// (syncblob/math.hpp) and the kernels. A buffer whose host head is fresh runs the host dispatch
/// (syncblob/math/host_kernels.hpp: threads and instruction set); a device or synced head runs
/// `DeviceKernels<Backend>` on the buffer's own device (a `DeviceGuard` makes it current for the
/// call) and stream, ordered after the work issued on the other operands' streams. An operand fresh
/// only on the other side is copied there first (the copy shows in its stats). Every buffer a
/// kernel reads or writes counts it (`host_kernels` / `device_kernels`).
///
/// Uninitialized data reads as zeros, and every operation here keeps zeros zero: a reduction over
/// an uninitialized operand returns 0 and an element-wise operation on one does nothing, without
/// allocating. (update, which would write data from an uninitialized one, throws: math.hpp.)

#include <array>
#include <cstdint>
#include <tuple>
#include <type_traits>

#include "../../core/config.hpp"
#include "../../core/element.hpp"
#include "../../core/sync_audit.hpp"
#include "../../memory/synced_buffer.hpp"
#include "../device_kernels.hpp"
#include "../host_kernels.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace math::detail {

// Every operation has two parts. The inline part handles the common case, buffers whose host copies
// are fresh and need nothing done (no allocation, copy or state change): one state check per buffer,
// the kernel count and a jump into the kernel, with no stack frame and no call that returns.
// Everything else (empty or uninitialized buffers, device heads, stale host copies, errors) goes to
// the out-of-line general part, which would otherwise give every small call its frame and spills.
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
// The host elements of every buffer, into `p` in order, when all of them are host_ready; the first
// that is not stops the check.
template <class T, SyncedAllocator A, std::size_t N, class... Buffers>
SYNCBLOB_ALWAYS_INLINE bool all_host_ready(std::array<const T*, N>& p, const Buffers&... buffers) noexcept {
    std::size_t i = 0;
    return (((p[i++] = host_ready<T, A>(buffers)) != nullptr) && ...);
}

// Counts a kernel on each operand's buffer, once per buffer (an operand may share the first's).
template <class Buffer, class... More>
SYNCBLOB_ALWAYS_INLINE void record_kernels(bool on_device, const Buffer& first, const More&... more) noexcept {
    first->record_kernel(on_device);
    ((more != first ? more->record_kernel(on_device) : void()), ...);
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
    syncblob::detail::order_after<Device>(runs_on->stream(), operand->stream());
}

// A reduction over x and the other operands, on the side where x is fresh.
template <FloatingElement T, SyncedAllocator A, class Op, class Buffer, class... More>
SYNCBLOB_NOINLINE accumulator_t<T> reduce_general(Op op, std::int64_t n, const Buffer& x, const More&... more) {
    if (n == 0 || x->head() == Head::uninitialized || ((more->head() == Head::uninitialized) || ...)) {
        return 0;
    }
    if (runs_on_device<A>(x->head())) {
        if constexpr (A::device_backend::has_device) {
            using Device = typename A::device_backend;
            const audit::Operation audited(Op::operation, audit::Waits{audit::Wait::host_result});
            const DeviceGuard<Device> guard(x->device_id());
            const std::array<const T*, 1 + sizeof...(More)> p{static_cast<const T*>(x->device_data()),
                                                              static_cast<const T*>(more->device_data())...};
            record_kernels(true, x, more...);
            (order_after(x, more), ...);
            return std::apply([&](const auto*... q) { return DeviceKernels<Device>::reduce(op, n, x->stream(), q...); },
                              p);
        }
    }
    const std::array<const T*, 1 + sizeof...(More)> p{static_cast<const T*>(x->host_data()),
                                                      static_cast<const T*>(more->host_data())...};
    record_kernels(false, x, more...);
    return std::apply([&](const auto*... q) { return math::detail::reduce(op, n, q...); }, p);
}

/// Σ op over the n elements of x and the other operands (buffers of one blob or of several).
template <FloatingElement T, SyncedAllocator A, class Op, class Buffer, class... More>
accumulator_t<T> reduce_buffers(Op op, std::int64_t n, const Buffer& x, const More&... more) {
    std::array<const T*, 1 + sizeof...(More)> p{};
    if (n != 0 && all_host_ready<T, A>(p, x, more...)) {
        record_kernels(false, x, more...);
        return std::apply([&](const auto*... q) { return math::detail::reduce(op, n, q...); }, p);
    }
    return reduce_general<T, A>(op, n, x, more...);
}

/// Σ op over the n elements of x and the other operands, written into the one element of `out` where
/// x is fresh: on the device, by a kernel on x's stream into out's device side, with out's stream
/// ordered around it (the host does not wait); on the host, into out's host side.
template <FloatingElement T, SyncedAllocator A, class Op, class Out, class Buffer, class... More>
SYNCBLOB_NOINLINE void reduce_into(Op op, std::int64_t n, Out& out, const Buffer& x, const More&... more) {
    using R = accumulator_t<T>;
    const bool none = n == 0 || x->head() == Head::uninitialized || ((more->head() == Head::uninitialized) || ...);
    if (!none && runs_on_device<A>(x->head())) {
        if constexpr (A::device_backend::has_device) {
            using Device = typename A::device_backend;
            const audit::Operation audited(Op::operation);
            const DeviceGuard<Device> on_x(x->device_id());  // into a device scalar: on x's own device
            const std::array<const T*, 1 + sizeof...(More)> p{static_cast<const T*>(x->device_data()),
                                                              static_cast<const T*>(more->device_data())...};
            record_kernels(true, x, more...);
            (order_after(x, more), ...);  // the operands' last writers, into a device scalar
            R* dst = out.mutable_device_data_for_overwrite();
            order_after(x, out.data_buffer());  // the kernel overwrites what work on out's stream may read
            std::apply([&](const auto*... q) { DeviceKernels<Device>::reduce_into(op, n, x->stream(), dst, q...); }, p);
            order_release_after(x, out.data_buffer());  // later work on out's stream reads the result
            (order_release_after(x, more), ...);
            return;
        }
    }
    const R value = none ? R{0} : reduce_general<T, A>(op, n, x, more...);
    out.mutable_host_data_for_overwrite()[0] = value;
}

/// y = op(y, inputs) over n elements when every buffer's host copy is fresh: runs it and returns
/// true; false, doing nothing, otherwise.
template <FloatingElement T, SyncedAllocator A, class Op, class Buffer, class... In>
SYNCBLOB_ALWAYS_INLINE bool transform_on_host_now(Op op, std::int64_t n, const Buffer& y, const In&... in) {
    std::array<const T*, sizeof...(In)> p{};
    if (n != 0 && all_host_ready<T, A>(p, in...)) {
        if (T* py = static_cast<T*>(y->mutable_host_data_if_fresh())) {
            record_kernels(false, y, in...);
            std::apply([&](const auto*... q) { math::detail::transform(op, n, py, q...); }, p);
            return true;
        }
    }
    return false;
}

/// y = op(y, inputs) over n elements, on the side where y is fresh.
template <FloatingElement T, SyncedAllocator A, class Op, class Buffer, class... In>
SYNCBLOB_NOINLINE void transform_general(Op op, std::int64_t n, const Buffer& y, const In&... in) {
    if (n == 0 || y->head() == Head::uninitialized || ((in->head() == Head::uninitialized) || ...)) {
        return;
    }
    if (runs_on_device<A>(y->head())) {
        if constexpr (A::device_backend::has_device) {
            using Device = typename A::device_backend;
            const audit::Operation audited(Op::operation);
            const DeviceGuard<Device> guard(y->device_id());
            // the inputs before the write: an input may be y's own buffer
            const std::array<const T*, sizeof...(In)> p{static_cast<const T*>(in->device_data())...};
            auto* py = static_cast<T*>(y->mutable_device_data());
            record_kernels(true, y, in...);
            (order_after(y, in), ...);
            std::apply([&](const auto*... q) { DeviceKernels<Device>::transform(op, n, y->stream(), py, q...); }, p);
            (order_release_after(y, in), ...);
            return;
        }
    }
    const std::array<const T*, sizeof...(In)> p{static_cast<const T*>(in->host_data())...};
    auto* py = static_cast<T*>(y->mutable_host_data());
    record_kernels(false, y, in...);
    std::apply([&](const auto*... q) { math::detail::transform(op, n, py, q...); }, p);
}

/// y = op(y, inputs) over the n elements of y and the inputs, where y is fresh.
template <FloatingElement T, SyncedAllocator A, class Op, class Buffer, class... In>
void transform_buffers(Op op, std::int64_t n, const Buffer& y, const In&... in) {
    if (!transform_on_host_now<T, A>(op, n, y, in...)) {
        transform_general<T, A>(op, n, y, in...);
    }
}

}  // namespace math::detail

SYNCBLOB_END_NAMESPACE
