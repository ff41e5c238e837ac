// SPDX-License-Identifier: BSD-2-Clause
#pragma once
// Backend hooks for the backend-generic test suites (tests/memory/buffer_suite.hpp,
// tests/math/math_suite.hpp). A suite body starts with SYNCBLOB_REQUIRE_DEVICE(Backend): where the
// backend has no usable device it prints "skipped: ..." (which ctest counts as skipped) and returns.
// Backends specialise TestDevice; SimulatedDevice's is here, cuda::Device's in tests/cuda.

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <syncblob/memory/device_backend.hpp>
#include <syncblob/sim/async_device.hpp>
#include <syncblob/sim/device.hpp>

namespace syncblob_test {

/// What a suite may ask a backend to provide for one test (only backends that can simulate it need
/// to honour it; real devices report what they have through `count()`).
struct TestSetup {
    int device_count = 1;  ///< devices the test would like to exist
};

/// A do-nothing stand-in for backends without a `Scope` hook.
struct NoTestScope {
    explicit NoTestScope(TestSetup) noexcept {}
};

/// What the suites need to know about a backend beyond the DeviceBackend concept.
template <class Backend>
struct TestDevice;

/// Optional hook: `TestDevice<B>::Scope`, an RAII type constructed from a `TestSetup`, sets the
/// backend up for one test and restores it after (SimulatedDevice: device_count). A suite calls
/// `scoped_setup<Backend>(setup)` and keeps the result alive for the test; for a backend without
/// the hook it does nothing.
template <class Backend>
auto scoped_setup(TestSetup setup) {
    if constexpr (requires { typename TestDevice<Backend>::Scope; }) {
        return typename TestDevice<Backend>::Scope(setup);
    } else {
        return NoTestScope(setup);
    }
}

template <>
struct TestDevice<syncblob::SimulatedDevice> {
    /// Installs SimulatedDevice settings with `device_count` simulated devices, and makes device 0
    /// current again when the test ends.
    class Scope {
    public:
        explicit Scope(TestSetup setup)
            : scope_(syncblob::SimulatedDevice::Settings{.device_count = setup.device_count}) {}
        ~Scope() { syncblob::SimulatedDevice::set_device(0); }
        Scope(const Scope&) = delete;
        Scope& operator=(const Scope&) = delete;

    private:
        syncblob::SimulatedDevice::Scope scope_;
    };

    /// Why the backend cannot run here, or nothing when it can.
    static std::optional<std::string> unavailable() { return std::nullopt; }
    /// Devices the backend offers (SimulatedDevice: what the scope's settings say).
    static int count() { return syncblob::SimulatedDevice::settings().device_count; }
    static void set_device(int id) { syncblob::SimulatedDevice::set_device(id); }
    /// True when device pointers are host-addressable (tests may then look at them directly).
    static constexpr bool host_addressable = true;
};

/// The stream-ordered simulator has the same hooks.
template <>
struct TestDevice<syncblob::SimulatedAsyncDevice> : TestDevice<syncblob::SimulatedDevice> {};

/// Bytes of device memory, read through the backend (works whether or not device memory is host-addressable).
template <class Backend>
std::vector<unsigned char> read_device(const void* device_ptr, std::size_t bytes) {
    std::vector<unsigned char> out(bytes);
    if (bytes != 0) {
        Backend::copy(out.data(), device_ptr, bytes, syncblob::CopyKind::device_to_host, Backend::default_stream());
    }
    return out;
}

/// Writes bytes into device memory through the backend.
template <class Backend>
void write_device(void* device_ptr, const void* host, std::size_t bytes) {
    if (bytes != 0) {
        Backend::copy(device_ptr, host, bytes, syncblob::CopyKind::host_to_device, Backend::default_stream());
    }
}

}  // namespace syncblob_test

namespace syncblob_test {

/// True when the environment says a usable GPU must exist (`SYNCBLOB_REQUIRE_GPU=1`, for a GPU
/// machine's CI): "no usable device" is then a failure, not a skip, so a broken driver cannot turn
/// the GPU suite into a row of skips.
inline bool gpu_required() {
    const char* v = std::getenv("SYNCBLOB_REQUIRE_GPU");
    return v != nullptr && std::string_view(v) == "1";
}

/// Why a test of `Backend` is skipped here, or nothing when the backend can run it.
/// \throws std::runtime_error (the test fails) when it would be skipped but SYNCBLOB_REQUIRE_GPU=1.
template <class Backend>
std::optional<std::string> skip_reason() {
    auto reason = TestDevice<Backend>::unavailable();
    if (reason && gpu_required()) {
        throw std::runtime_error("SYNCBLOB_REQUIRE_GPU=1, but " + *reason);
    }
    return reason;
}

}  // namespace syncblob_test

/// Returns from the current test, reporting it skipped, when `Backend` has no usable device here
/// (fails it instead when SYNCBLOB_REQUIRE_GPU=1).
#define SYNCBLOB_REQUIRE_DEVICE(Backend)                                             \
    do {                                                                             \
        if (const auto syncblob_reason_ = ::syncblob_test::skip_reason<Backend>()) { \
            std::cout << "skipped: " << *syncblob_reason_ << std::endl;              \
            return;                                                                  \
        }                                                                            \
    } while (false)
