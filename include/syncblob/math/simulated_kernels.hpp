// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// `DeviceKernels<SimulatedDevice>`: the simulated device's memory is host memory, so its kernels
/// are the host kernels, queued on the buffer's stream and run in stream order as a GPU runs them
/// (reductions, whose result returns to the host, wait for their stream). The math functions count
/// them as device work.

#include <cstdint>
#include <utility>
#include <vector>

#include "../memory/simulated_async_device.hpp"
#include "../memory/simulated_device.hpp"
#include "device_kernels.hpp"
#include "host_kernels.hpp"

SYNCBLOB_BEGIN_NAMESPACE

template <>
struct DeviceKernels<SimulatedDevice> {
    using stream_type = SimulatedDevice::stream_type;

    template <FloatingElement T>
    static accumulator_t<T> asum(const T* x, std::int64_t n, stream_type stream) {
        return reduce(stream, "asum", {range(x, n)}, [=] { return math::asum(x, n); });
    }
    template <FloatingElement T>
    static accumulator_t<T> sumsq(const T* x, std::int64_t n, stream_type stream) {
        return reduce(stream, "sumsq", {range(x, n)}, [=] { return math::sumsq(x, n); });
    }
    template <FloatingElement T>
    static accumulator_t<T> dot(const T* x, const T* y, std::int64_t n, stream_type stream) {
        return reduce(stream, "dot", {range(x, n), range(y, n)}, [=] { return math::dot(x, y, n); });
    }
    template <FloatingElement T>
    static void sub(T* y, const T* x, std::int64_t n, stream_type stream) {
        SimulatedDevice::launch(stream, "sub", {range(y, n), range(x, n)}, {range(y, n)}, [=] { math::sub(y, x, n); });
    }
    template <FloatingElement T>
    static void scale(T* x, accumulator_t<T> alpha, std::int64_t n, stream_type stream) {
        SimulatedDevice::launch(stream, "scale", {range(x, n)}, {range(x, n)}, [=] { math::scale(x, alpha, n); });
    }

private:
    template <class T>
    static SimulatedDevice::Range range(const T* p, std::int64_t n) {
        return {p, static_cast<std::size_t>(n) * sizeof(T)};
    }

    // A reduction whose result returns to the host: queued like any kernel, then waited for (as a
    // cuBLAS call with a host result pointer waits).
    template <class Fn>
    static auto reduce(stream_type stream, const char* what, std::vector<SimulatedDevice::Range> reads, Fn fn) {
        decltype(fn()) result{};
        SimulatedDevice::launch(stream, what, std::move(reads), {}, [&result, fn] { result = fn(); });
        auto done = SimulatedDevice::record(stream);
        SimulatedDevice::wait(done);
        return result;
    }
};

/// `SimulatedAsyncDevice` runs the same kernels (it differs only in how it allocates).
template <>
struct DeviceKernels<SimulatedAsyncDevice> : DeviceKernels<SimulatedDevice> {};

SYNCBLOB_END_NAMESPACE
