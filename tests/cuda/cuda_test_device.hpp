// SPDX-License-Identifier: BSD-2-Clause
#pragma once
// The test hooks of cuda::Device for the backend-generic suites (tests/memory/buffer_suite.hpp,
// tests/math/math_suite.hpp): where no usable CUDA device exists, each suite test prints
// "skipped: no CUDA device (<the driver's message>)" and ctest counts it as skipped.

#include <optional>
#include <string>

#include <cuda_runtime_api.h>

#include <syncblob/cuda/allocator.hpp>
#include <syncblob/cuda/runtime.hpp>

#include "device_guard.hpp"

namespace syncblob_test {

template <>
struct TestDevice<syncblob::cuda::Device> {
    /// A real machine has the devices it has (the setup's device count is not simulated); the scope
    /// makes the device that was current when the test began current again when it ends.
    class Scope {
    public:
        explicit Scope(TestSetup) noexcept {
            int device = -1;
            if (cudaGetDevice(&device) == cudaSuccess) {
                previous_ = device;
            }
            (void)cudaGetLastError();
        }
        ~Scope() {
            if (previous_ >= 0) {
                (void)cudaSetDevice(previous_);
            }
        }
        Scope(const Scope&) = delete;
        Scope& operator=(const Scope&) = delete;

    private:
        int previous_ = -1;
    };

    static std::optional<std::string> unavailable() {
        if (auto reason = syncblob::cuda::no_device_reason()) {
            return "no CUDA device (" + *reason + ")";
        }
        return std::nullopt;
    }
    static int count() { return syncblob::cuda::device_count(); }
    static void set_device(int id) { syncblob::cuda::set_device(id); }
    static constexpr bool host_addressable = false;
};

}  // namespace syncblob_test
