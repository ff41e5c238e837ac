// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// `DeviceKernels<SimulatedDevice>`: the simulated device's memory is host memory, so its kernels
/// are the host kernels, queued on the buffer's stream and run in stream order as a GPU runs them
/// (reductions, whose result returns to the host, wait for their stream). The math functions count
/// them as device work.

#include <concepts>
#include <cstdint>
#include <vector>

#include "../math/device_kernels.hpp"
#include "../math/host_kernels.hpp"
#include "async_device.hpp"
#include "device.hpp"

SYNCBLOB_BEGIN_NAMESPACE

template <>
struct DeviceKernels<SimulatedDevice> {
    using stream_type = SimulatedDevice::stream_type;

    /// Σ op over x and the inputs: queued like any kernel, then waited for (as a cuBLAS call with a
    /// host result pointer waits).
    template <class Op, FloatingElement T, std::same_as<T>... In>
    static accumulator_t<T> reduce(Op op, std::int64_t n, stream_type stream, const T* x, const In*... in) {
        accumulator_t<T> result{};
        SimulatedDevice::launch(stream, Op::name, {range(x, n), range(in, n)...}, {},
                                [&result, op, n, x, in...] { result = math::detail::reduce(op, n, x, in...); });
        auto done = SimulatedDevice::record(stream);
        SimulatedDevice::wait_for_result(done);
        return result;
    }

    /// Σ op over x and the inputs into `out` (device memory), queued: the host does not wait.
    template <class Op, FloatingElement T, std::same_as<T>... In>
    static void reduce_into(Op op, std::int64_t n, stream_type stream, accumulator_t<T>* out, const T* x,
                            const In*... in) {
        SimulatedDevice::launch(stream, Op::name, {range(x, n), range(in, n)...},
                                {SimulatedDevice::Range{out, sizeof *out}},
                                [out, op, n, x, in...] { *out = math::detail::reduce(op, n, x, in...); });
    }

    /// y = op(y, inputs), queued.
    template <class Op, FloatingElement T, std::same_as<T>... In>
    static void transform(Op op, std::int64_t n, stream_type stream, T* y, const In*... in) {
        SimulatedDevice::launch(stream, Op::name, {range(y, n), range(in, n)...}, {range(y, n)},
                                [op, n, y, in...] { math::detail::transform(op, n, y, in...); });
    }

private:
    template <class T>
    static SimulatedDevice::Range range(const T* p, std::int64_t n) {
        return {p, static_cast<std::size_t>(n) * sizeof(T)};
    }
};

/// `SimulatedAsyncDevice` runs the same kernels (it differs only in how it allocates).
template <>
struct DeviceKernels<SimulatedAsyncDevice> : DeviceKernels<SimulatedDevice> {};

SYNCBLOB_END_NAMESPACE
