// SPDX-License-Identifier: BSD-2-Clause
// Host tests of the CUDA layer: checked calls, the pinned allocator's fallback, and the behaviour of
// cuda::Device and a cuda::Allocator blob where the runtime finds no usable driver (this machine).
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <limits>
#include <new>
#include <string>
#include <vector>

#include <syncblob/blob.hpp>
#include <syncblob/cuda/allocator.hpp>
#include <syncblob/cuda/cublas.hpp>
#include <syncblob/cuda/error.hpp>
#include <syncblob/cuda/math.hpp>
#include <syncblob/cuda/runtime.hpp>
#include <syncblob/memory/synced_buffer.hpp>

#include "cuda_test_device.hpp"
#include "sanitizers.hpp"

// Under AddressSanitizer on a machine with a GPU, the CUDA driver needs the address range ASan
// protects by default (every allocation would fail with cudaErrorMemoryAllocation), and it keeps
// allocations from cuInit for the life of the process. These are the sanitizer's documented hooks.
#if SYNCBLOB_TEST_ASAN
extern "C" const char* __asan_default_options();
extern "C" const char* __asan_default_options() {
    return "protect_shadow_gap=0";
}
extern "C" const char* __lsan_default_suppressions();
extern "C" const char* __lsan_default_suppressions() {
    return "leak:libcuda.so\nleak:libcublas.so\n";
}
#endif

namespace {

using syncblob::cuda::PinnedAllocator;

// Stand-ins for failing calls: the macro sees a call expression, as in real use.
cudaError_t runtime_returns(cudaError_t status) {
    return status;
}
cublasStatus_t cublas_returns(cublasStatus_t status) {
    return status;
}

void check_runtime(cudaError_t status) {
    SYNCBLOB_CUDA_CHECK(runtime_returns(status), "test::operation(42)");
}
void check_cublas(cublasStatus_t status) {
    SYNCBLOB_CUDA_CHECK(cublas_returns(status));
}

template <class Exception, class F>
Exception caught(F&& f) {
    try {
        f();
    } catch (const Exception& e) {
        return e;
    }
    FAIL("no exception of the expected type");
    throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE("SYNCBLOB_CUDA_CHECK throws DeviceError carrying the call, the code and its name", "[cuda][error]") {
    CHECK_NOTHROW(check_runtime(cudaSuccess));
    CHECK_NOTHROW(check_cublas(CUBLAS_STATUS_SUCCESS));

    const auto e = caught<syncblob::DeviceError>([] { check_runtime(cudaErrorInvalidValue); });
    CHECK(e.code() == static_cast<int>(cudaErrorInvalidValue));
    const std::string what = e.what();
    CHECK_THAT(what, Catch::StartsWith("test::operation(42): runtime_returns(status) failed with "));
    CHECK_THAT(what, Catch::Contains("cudaErrorInvalidValue (" + std::to_string(int{cudaErrorInvalidValue}) + ")"));
    CHECK_THAT(what, Catch::EndsWith(cudaGetErrorString(cudaErrorInvalidValue)));
    CHECK_THROWS_MATCHES(
        check_runtime(cudaErrorInvalidValue), syncblob::DeviceError,
        Catch::Predicate<syncblob::DeviceError>(
            [](const auto& error) { return dynamic_cast<const syncblob::NoDeviceError*>(&error) == nullptr; },
            "is not a NoDeviceError"));

    const auto b = caught<syncblob::DeviceError>([] { check_cublas(CUBLAS_STATUS_INVALID_VALUE); });
    CHECK(b.code() == static_cast<int>(CUBLAS_STATUS_INVALID_VALUE));
    CHECK_THAT(std::string(b.what()),
               Catch::StartsWith("cublas_returns(status) failed with CUBLAS_STATUS_INVALID_VALUE"));
}

TEST_CASE("SYNCBLOB_CUDA_CHECK evaluates its context only when the call fails", "[cuda][error]") {
    int built = 0;
    auto context = [&] {
        ++built;
        return std::string("context");
    };
    SYNCBLOB_CUDA_CHECK(runtime_returns(cudaSuccess), context());
    CHECK(built == 0);
    CHECK_THROWS_AS([&] { SYNCBLOB_CUDA_CHECK(runtime_returns(cudaErrorInvalidValue), context()); }(),
                    syncblob::DeviceError);
    CHECK(built == 1);
}

TEST_CASE("no driver or no device is a NoDeviceError with the driver's message", "[cuda][error]") {
    for (const cudaError_t status : {cudaErrorInsufficientDriver, cudaErrorNoDevice, cudaErrorStubLibrary}) {
        CAPTURE(static_cast<int>(status));
        const auto e = caught<syncblob::NoDeviceError>([&] { check_runtime(status); });
        CHECK(e.code() == static_cast<int>(status));
        CHECK_THAT(std::string(e.what()), Catch::Contains(cudaGetErrorString(status)) &&
                                              Catch::Contains(cudaGetErrorName(status)) &&
                                              Catch::Contains("test::operation(42)"));
    }
}

TEST_CASE("running out of device memory is a std::bad_alloc naming the call", "[cuda][error]") {
    CHECK_THROWS_AS(check_runtime(cudaErrorMemoryAllocation), std::bad_alloc);
    CHECK_THROWS_WITH(check_runtime(cudaErrorMemoryAllocation),
                      Catch::Contains("test::operation(42)") && Catch::Contains("cudaErrorMemoryAllocation"));
    CHECK_THROWS_AS(check_cublas(CUBLAS_STATUS_ALLOC_FAILED), syncblob::cuda::OutOfMemoryError);
}

TEST_CASE("PinnedAllocator falls back to aligned pageable memory without a driver and frees each block its way",
          "[cuda][pinned]") {
    const auto reason = syncblob::cuda::no_device_reason();
    CHECK(PinnedAllocator::allocate(0).data == nullptr);
    for (const std::size_t bytes : {std::size_t{1}, std::size_t{100}, std::size_t{1} << 20}) {
        CAPTURE(bytes);
        syncblob::HostBlock block = PinnedAllocator::allocate(bytes);
        REQUIRE(block.data != nullptr);
        CHECK(block.bytes == bytes);
        CHECK(reinterpret_cast<std::uintptr_t>(block.data) % PinnedAllocator::alignment == 0);
        cudaPointerAttributes attributes{};
        const bool known = cudaPointerGetAttributes(&attributes, block.data) == cudaSuccess;
        (void)cudaGetLastError();
        if (reason) {
            CHECK(block.kind == PinnedAllocator::pageable);
            CHECK(PinnedAllocator::falls_back());
        } else {
            CHECK(block.kind == PinnedAllocator::pinned);
            CHECK(known);
            CHECK(attributes.type == cudaMemoryTypeHost);
        }
        // the whole block is usable (AddressSanitizer checks the bounds, and that the matching free is used)
        std::vector<unsigned char> pattern(bytes);
        for (std::size_t i = 0; i < bytes; ++i) {
            pattern[i] = static_cast<unsigned char>(i * 13 + 5);
        }
        std::memcpy(block.data, pattern.data(), bytes);
        CHECK(std::memcmp(block.data, pattern.data(), bytes) == 0);
        PinnedAllocator::deallocate(block);
    }
    PinnedAllocator::deallocate({});  // an empty block is ignored
}

TEST_CASE("PinnedAllocator refuses absurd sizes with bad_alloc on either path, never a wrapped block",
          "[cuda][pinned]") {
    // Aligned operator new rounds the size up to the alignment, which wraps near SIZE_MAX: the
    // pageable fallback must refuse such sizes as AlignedAllocator does, not hand out a tiny block.
    for (const std::size_t bytes : {std::numeric_limits<std::size_t>::max() - 8,
                                    static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max())}) {
        INFO(bytes << " bytes");
        CHECK_THROWS_AS(PinnedAllocator::allocate(bytes), std::bad_alloc);
    }
}

TEST_CASE("without a usable driver every device call throws NoDeviceError with the driver's message",
          "[cuda][no-device]") {
    const auto reason = syncblob::cuda::no_device_reason();
    if (!reason) {
        std::cout << "skipped: a CUDA device is present; this test checks machines without one" << std::endl;
        return;
    }
    INFO("driver says: " << *reason);
    const auto says_why = Catch::Contains(*reason);
    CHECK_THROWS_AS(syncblob::cuda::device_count(), syncblob::NoDeviceError);
    CHECK_THROWS_WITH(syncblob::cuda::device_count(), says_why && Catch::Contains("cuda::device_count"));
    CHECK_THROWS_AS(syncblob::cuda::current_device(), syncblob::NoDeviceError);
    CHECK_THROWS_AS(syncblob::cuda::set_device(0), syncblob::NoDeviceError);
    CHECK_THROWS_WITH(syncblob::cuda::Stream(), says_why);
    CHECK_THROWS_AS(syncblob::cuda::Event::record(nullptr), syncblob::NoDeviceError);
    CHECK_THROWS_AS(syncblob::cuda::Device::allocate(64), syncblob::NoDeviceError);
    CHECK_THROWS_WITH(syncblob::cuda::Device::allocate(64),
                      says_why && Catch::Contains("cuda::Device::allocate(64 bytes)") && Catch::Contains("cudaMalloc"));
    CHECK_THROWS_AS(syncblob::cuda::cublas_handle(), syncblob::NoDeviceError);
    CHECK_THROWS_WITH(syncblob::cuda::blas::asum(static_cast<const float*>(nullptr), 3, nullptr), says_why);
    // device math for float and double dispatches to cuBLAS from any compiler
    using Kernels = syncblob::DeviceKernels<syncblob::cuda::Device>;
    namespace sm = syncblob::math::detail;
    CHECK_THROWS_AS(Kernels::reduce(sm::Asum{}, 2, nullptr, static_cast<const double*>(nullptr)),
                    syncblob::NoDeviceError);
    CHECK_THROWS_AS(Kernels::reduce(sm::Sumsq{}, 2, nullptr, static_cast<const float*>(nullptr)),
                    syncblob::NoDeviceError);
    CHECK_THROWS_AS(
        Kernels::reduce(sm::Dot{}, 2, nullptr, static_cast<const float*>(nullptr), static_cast<const float*>(nullptr)),
        syncblob::NoDeviceError);
    CHECK_THROWS_AS(
        Kernels::transform(sm::Sub{}, 2, nullptr, static_cast<double*>(nullptr), static_cast<const double*>(nullptr)),
        syncblob::NoDeviceError);
    CHECK_THROWS_WITH(Kernels::transform(sm::Scale<float>{2.0f}, 2, nullptr, static_cast<float*>(nullptr)), says_why);
    // zero-length work needs no device and does nothing
    CHECK(syncblob::cuda::blas::asum(static_cast<const float*>(nullptr), 0, nullptr) == 0.0f);
    // an empty event is reached already; releasing nothing is fine
    syncblob::cuda::Event empty;
    CHECK(empty.empty());
    CHECK_NOTHROW(syncblob::cuda::Device::wait(empty));
    syncblob::cuda::Device::deallocate(nullptr, 0);
}

TEST_CASE("a cuda::Allocator blob works on the host and its first device access throws NoDeviceError",
          "[cuda][blob][no-device]") {
    using GpuBlob = syncblob::Blob<float, syncblob::cuda::Allocator>;
    GpuBlob blob({2, 3});
    auto data = blob.mutable_host_data();
    for (std::size_t i = 0; i < data.size(); ++i) {
        data[i] = static_cast<float>(i) * 1.5f;
    }
    GpuBlob other({2, 3});
    other.copy_from(blob);
    REQUIRE(other.host_data().size() == 6);
    CHECK(other.host_data()[5] == 7.5f);
    blob.mutable_host_diff()[0] = -1.0f;

    const auto reason = syncblob::cuda::no_device_reason();
    if (!reason) {  // with a GPU: the same blob goes to the device and back
        (void)blob.mutable_device_data();
        CHECK(blob.host_data()[4] == 6.0f);
        CHECK(blob.data_stats().host_to_device == 1);
        CHECK(blob.data_stats().device_to_host == 1);
        return;
    }
    blob.reset_stats();
    CHECK_THROWS_AS(blob.device_data(), syncblob::NoDeviceError);
    CHECK_THROWS_WITH(blob.mutable_device_data(),
                      Catch::Contains(*reason) && Catch::Contains("cuda::Device::allocate"));
    CHECK_THROWS_AS(blob.device_diff(), syncblob::NoDeviceError);
    // the failed accesses changed nothing: the data is still fresh on the host, nothing was copied
    CHECK(blob.host_data()[4] == 6.0f);
    CHECK(blob.host_diff()[0] == -1.0f);
    CHECK(blob.data_stats().device_allocations == 0);
    CHECK(blob.data_stats().host_to_device == 0);
    blob.fill(2.0f);
    CHECK(blob.host_data()[5] == 2.0f);
}

TEST_CASE("a SyncedBuffer over PinnedAllocator frees its host block the way it was allocated", "[cuda][pinned]") {
    for (int round = 0; round < 3; ++round) {
        syncblob::SyncedBuffer<PinnedAllocator, syncblob::cuda::Device> buffer(4096);
        auto* p = static_cast<unsigned char*>(buffer.mutable_host_data());
        std::memset(p, round, 4096);
        CHECK(static_cast<const unsigned char*>(buffer.host_data())[4095] == round);
        CHECK(buffer.stats().host_allocations == 1);
    }
}

TEST_CASE("cuda::Device's checking mode is off by default and switchable", "[cuda][device]") {
    CHECK_FALSE(syncblob::cuda::Device::poisons_stale_side());
    syncblob::cuda::Device::set_checking(true);
    CHECK(syncblob::cuda::Device::poisons_stale_side());
    syncblob::cuda::Device::set_checking(false);
    CHECK_FALSE(syncblob::cuda::Device::poisons_stale_side());
}

TEST_CASE("SYNCBLOB_REQUIRE_GPU=1 turns a missing device into a failure instead of a skip", "[cuda][gpu-required]") {
    using syncblob_test::skip_reason;
    const bool has_device = !syncblob::cuda::no_device_reason().has_value();
    ::unsetenv("SYNCBLOB_REQUIRE_GPU");
    CHECK(skip_reason<syncblob::cuda::Device>().has_value() == !has_device);  // skipped where there is none
    ::setenv("SYNCBLOB_REQUIRE_GPU", "1", 1);
    if (has_device) {
        CHECK_FALSE(skip_reason<syncblob::cuda::Device>().has_value());
    } else {
        CHECK_THROWS_WITH(skip_reason<syncblob::cuda::Device>(),
                          Catch::Contains("SYNCBLOB_REQUIRE_GPU=1, but no CUDA device"));
    }
    CHECK_FALSE(skip_reason<syncblob::SimulatedDevice>().has_value());  // the simulator is always there
    ::setenv("SYNCBLOB_REQUIRE_GPU", "0", 1);
    CHECK(skip_reason<syncblob::cuda::Device>().has_value() == !has_device);
    ::unsetenv("SYNCBLOB_REQUIRE_GPU");
}

TEST_CASE("A cuda blob's stream is the legacy default stream, named explicitly", "[cuda][streams]") {
    // A null cudaStream_t would mean the legacy or the per-thread default stream depending on each
    // translation unit's --default-stream: the same blob could be on two streams in one program.
    syncblob::Blob<float, syncblob::cuda::Allocator> b{4};
    CHECK(b.stream() == cudaStreamLegacy);
    CHECK(b.data_buffer()->stream() == cudaStreamLegacy);
    CHECK(b.diff_buffer()->stream() == cudaStreamLegacy);
    CHECK(syncblob::cuda::Device::default_stream() == cudaStreamLegacy);
}

TEST_CASE("cuda::PinnedPool without a driver: pageable blocks cached and reused; a stream free abandons the block",
          "[cuda][pinned_pool][no-device]") {
    if (!syncblob::cuda::no_device_reason()) {
        std::cout << "skipped: a CUDA device is present; this test checks machines without one" << std::endl;
        return;
    }
    using Pool = syncblob::cuda::PinnedPool;
    (void)Pool::empty_cache();
    const auto start = Pool::stats();
    const syncblob::HostBlock a = Pool::allocate(1000);
    CHECK(a.kind == PinnedAllocator::pageable);
    Pool::deallocate(a);
    const syncblob::HostBlock b = Pool::allocate(900);  // the same 1 KiB class
    CHECK(b.data == a.data);
    CHECK(Pool::stats().cache_hits == start.cache_hits + 1);
    // No event can be recorded without a driver: the block cannot be proven free, so it is never reused.
    const auto abandoned = Pool::abandoned_blocks();
    Pool::deallocate(b, syncblob::cuda::Device::default_stream());
    CHECK(Pool::abandoned_blocks() == abandoned + 1);
    const auto s = Pool::stats();
    CHECK(s.in_use_bytes == start.in_use_bytes);
    CHECK(s.reserved_bytes == start.reserved_bytes);
    const syncblob::HostBlock c = Pool::allocate(1000);
    CHECK(c.data != a.data);  // a new block
    CHECK(Pool::stats().in_use_bytes == start.in_use_bytes + 1024);
    Pool::deallocate(c);
}

TEST_CASE("a cuda::PooledHostAllocator blob takes its host block from cuda::PinnedPool and gives it back",
          "[cuda][pinned_pool][blob]") {
    using Pool = syncblob::cuda::PinnedPool;
    const auto start = Pool::stats();
    const void* first = nullptr;
    {
        syncblob::Blob<float, syncblob::cuda::PooledHostAllocator> blob({300});
        first = blob.mutable_host_data().data();
        CHECK(Pool::stats().in_use_bytes == start.in_use_bytes + 1536);  // 1200 bytes, class 1536
    }
    CHECK(Pool::stats().in_use_bytes == start.in_use_bytes);
    syncblob::Blob<float, syncblob::cuda::PooledHostAllocator> again({300});
    CHECK(again.host_data().data() == first);
    CHECK(Pool::stats().cache_hits == start.cache_hits + 1);
}
