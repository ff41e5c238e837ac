// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// `DeviceKernels<SimulatedDevice>`: the simulated device's memory is host memory, so its kernels
/// are the host kernels, run after the copies issued earlier on the same stream (as a GPU kernel
/// would run after them). The math functions count them as device work.

#include <cstdint>

#include "../memory/simulated_device.hpp"
#include "device_kernels.hpp"
#include "host_kernels.hpp"

SYNCBLOB_BEGIN_NAMESPACE

template <>
struct DeviceKernels<SimulatedDevice> {
    using stream_type = SimulatedDevice::stream_type;

    template <FloatingElement T>
    static accumulator_t<T> asum(const T* x, std::int64_t n, stream_type stream) {
        wait_for(stream);
        return math::asum(x, n);
    }
    template <FloatingElement T>
    static accumulator_t<T> sumsq(const T* x, std::int64_t n, stream_type stream) {
        wait_for(stream);
        return math::sumsq(x, n);
    }
    template <FloatingElement T>
    static accumulator_t<T> dot(const T* x, const T* y, std::int64_t n, stream_type stream) {
        wait_for(stream);
        return math::dot(x, y, n);
    }
    template <FloatingElement T>
    static void sub(T* y, const T* x, std::int64_t n, stream_type stream) {
        wait_for(stream);
        math::sub(y, x, n);
    }
    template <FloatingElement T>
    static void scale(T* x, accumulator_t<T> alpha, std::int64_t n, stream_type stream) {
        wait_for(stream);
        math::scale(x, alpha, n);
    }

private:
    // A kernel on `stream` runs after everything issued on it before.
    static void wait_for(stream_type stream) {
        auto event = SimulatedDevice::record(stream);
        SimulatedDevice::wait(event);
    }
};

SYNCBLOB_END_NAMESPACE
