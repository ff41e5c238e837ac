// SPDX-License-Identifier: BSD-2-Clause
// The GPU test suite, one CUDA translation unit built by nvcc for sm_75 and sm_90:
// - the backend-generic SyncedBuffer and math suites (the same bodies the SimulatedDevice runs
//   check) on cuda::Allocator;
// - every custom kernel (fill and conversion for every element type, math for every floating type)
//   and every DeviceKernels<cuda::Device> dispatch path (cuBLAS and custom), instantiated and,
//   where a device exists, run against the host bodies of the same functors.
// Without a usable device each test prints "skipped: no CUDA device (<driver message>)".
#if !defined(__CUDACC__)
#error "test_device.cu is a CUDA translation unit: build it with nvcc (SYNCBLOB_ENABLE_CUDA=ON)"
#endif

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <memory>
#include <tuple>
#include <vector>

#include <syncblob/cuda/allocator.hpp>
#include <syncblob/cuda/kernels.cuh>
#include <syncblob/cuda/math.hpp>

#include "cuda_test_device.hpp"
#include "kernel_test_values.hpp"
#include "stream_delay.cuh"

static_assert(__cplusplus >= 202002L,
              "nvcc compiles this file as C++17 or older: pass -std=c++20 (CMake 3.25 does not for nvcc 13)");

TEST_CASE("nvcc compiles syncblob's CUDA translation units as C++20", "[cuda][nvcc]") {
    CHECK(__cplusplus >= 202002L);
    CHECK(syncblob::FloatingElement<syncblob::half>);  // a concept: a syntax error before C++20
    CHECK(SYNCBLOB_NVCC == 1);
}

// ---- the shared suites, on the GPU backend ---------------------------------------------------------

using SuiteAllocators = std::tuple<syncblob::cuda::Allocator>;
#include "../memory/buffer_suite.hpp"

using MathSuiteAllocators = std::tuple<syncblob::cuda::Allocator>;
#include "../math/math_suite.hpp"

// ---- the custom kernels ----------------------------------------------------------------------------

namespace {

using syncblob::accumulator_t;
using syncblob::cuda::Device;
using namespace syncblob_cuda_test;
namespace sd = syncblob::cuda::detail;
namespace sm = syncblob::math::detail;

/// n elements of T in device memory, freed with the object.
template <class T>
class DeviceArray {
public:
    explicit DeviceArray(std::size_t n) : n_(n), p_(static_cast<T*>(Device::allocate(n * sizeof(T)))) {}
    explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) { upload(host); }
    DeviceArray(const DeviceArray&) = delete;
    DeviceArray& operator=(const DeviceArray&) = delete;
    ~DeviceArray() { Device::deallocate(p_, n_ * sizeof(T)); }

    // (through a plain array: std::vector<bool> has no contiguous storage)
    void upload(const std::vector<T>& host) {
        const auto staging = std::make_unique<T[]>(n_);
        std::copy(host.begin(), host.end(), staging.get());
        Device::copy(p_, staging.get(), n_ * sizeof(T), syncblob::CopyKind::host_to_device, nullptr);
    }
    [[nodiscard]] std::vector<T> download() const {
        const auto staging = std::make_unique<T[]>(n_);
        Device::copy(staging.get(), p_, n_ * sizeof(T), syncblob::CopyKind::device_to_host, nullptr);
        return std::vector<T>(staging.get(), staging.get() + n_);
    }
    [[nodiscard]] T* get() const noexcept { return p_; }

private:
    std::size_t n_;
    T* p_;
};

template <class To, class From>
void check_device_conversion() {
    const std::vector<From> source = conversion_sources<From>();
    const auto n = static_cast<std::int64_t>(source.size());
    const DeviceArray<From> src(source);
    DeviceArray<To> dst(source.size());
    syncblob::cuda::convert(dst.get(), src.get(), n, nullptr);
    const std::vector<To> got = dst.download();
    for (std::size_t i = 0; i < source.size(); ++i) {
        INFO(syncblob::element_name<From>()
             << " -> " << syncblob::element_name<To>() << " of " << as_double(source[i]));
        REQUIRE(same_value(got[i], syncblob::detail::convert_checked<To>(source[i]).value));
    }
}

template <class T>
double relative_bound(std::int64_t n) {
    return (static_cast<double>(n) + 1) * unit_roundoff<T>();
}

/// The custom kernels (every floating type; half and bfloat16's only path) sum in the order the
/// host replays: the same bits, not merely close.
template <class T>
void check_custom_reductions(const DeviceArray<T>& x, const DeviceArray<T>& y, const std::vector<T>& hx,
                             const std::vector<T>& hy) {
    const auto n = static_cast<std::int64_t>(hx.size());
    CHECK(syncblob::cuda::kernels::asum(x.get(), n, nullptr) ==
          sd::emulate_reduce(sd::reduce_at(sm::Asum{}, hx.data()), n));
    CHECK(syncblob::cuda::kernels::sumsq(x.get(), n, nullptr) ==
          sd::emulate_reduce(sd::reduce_at(sm::Sumsq{}, hx.data()), n));
    CHECK(syncblob::cuda::kernels::dot(x.get(), y.get(), n, nullptr) ==
          sd::emulate_reduce(sd::reduce_at(sm::Dot{}, hx.data(), hy.data()), n));
    // a reduction is deterministic: the same call gives the same bits
    const auto first = syncblob::cuda::kernels::asum(x.get(), n, nullptr);
    CHECK(syncblob::cuda::kernels::asum(x.get(), n, nullptr) == first);
}

template <class T>
void check_reductions(std::int64_t n) {
    using Kernels = syncblob::DeviceKernels<Device>;
    using A = accumulator_t<T>;
    const auto hx = test_values<T>(n, 5);
    const auto hy = test_values<T>(n, 6);
    const DeviceArray<T> x(hx);
    const DeviceArray<T> y(hy);
    // the device sums the same terms as the host, in an order the host replays (bound: any order)
    const A host_abs = sd::emulate_reduce(sd::reduce_at(sm::Asum{}, hx.data()), n);
    const A host_sq = sd::emulate_reduce(sd::reduce_at(sm::Sumsq{}, hx.data()), n);
    const A host_dot = sd::emulate_reduce(sd::reduce_at(sm::Dot{}, hx.data(), hy.data()), n);
    double abs_dot = 0;
    for (std::size_t i = 0; i < hx.size(); ++i) {
        abs_dot += std::fabs(as_double(hx[i]) * as_double(hy[i]));
    }
    // cuBLAS (float and double) sums in an order of its own: bounded by the error of any order
    const double b = 2 * relative_bound<T>(n);
    CHECK(std::fabs(Kernels::reduce(sm::Asum{}, n, nullptr, x.get()) - host_abs) <= b * host_abs);
    CHECK(std::fabs(Kernels::reduce(sm::Sumsq{}, n, nullptr, x.get()) - host_sq) <= b * host_sq);
    CHECK(std::fabs(Kernels::reduce(sm::Dot{}, n, nullptr, x.get(), y.get()) - host_dot) <= b * abs_dot);
    check_custom_reductions(x, y, hx, hy);
}

template <class T>
void check_updates(std::int64_t n, bool custom) {
    using Kernels = syncblob::DeviceKernels<Device>;
    using A = accumulator_t<T>;
    const auto hx = test_values<T>(n, 7);
    const auto hy = test_values<T>(n, 8);
    const DeviceArray<T> x(hx);
    DeviceArray<T> y(hy);
    auto expected = hy;
    sd::for_each_on_host(sd::transform_at(sm::Sub{}, expected.data(), hx.data()), n);
    if (custom) {
        syncblob::cuda::kernels::sub(y.get(), x.get(), n, nullptr);
    } else {
        Kernels::transform(sm::Sub{}, n, nullptr, y.get(), x.get());
    }
    std::vector<T> got = y.download();
    for (std::size_t i = 0; i < got.size(); ++i) {
        REQUIRE(same_value(got[i], expected[i]));
    }
    sd::for_each_on_host(sd::transform_at(sm::Scale<A>{A(-1.5)}, expected.data()), n);
    if (custom) {
        syncblob::cuda::kernels::scale(y.get(), A(-1.5), n, nullptr);
    } else {
        Kernels::transform(sm::Scale<A>{A(-1.5)}, n, nullptr, y.get());
    }
    got = y.download();
    for (std::size_t i = 0; i < got.size(); ++i) {
        REQUIRE(same_value(got[i], expected[i]));
    }
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("cuda::fill writes its value to every element on the device", "[cuda][kernels]", AllElements) {
    using T = TestType;
    SYNCBLOB_REQUIRE_DEVICE(Device);
    const std::int64_t n = GENERATE(as<std::int64_t>{}, 1, 1000, 70000);
    const T zero = syncblob::detail::convert_checked<T>(std::int8_t{0}).value;
    const T value = syncblob::detail::convert_checked<T>(std::int8_t{1}).value;
    DeviceArray<T> a(std::vector<T>(static_cast<std::size_t>(n) + 1, zero));
    syncblob::cuda::fill(a.get(), value, n, nullptr);
    const std::vector<T> got = a.download();
    for (std::int64_t i = 0; i < n; ++i) {
        REQUIRE(got[static_cast<std::size_t>(i)] == value);
    }
    CHECK(got.back() == zero);  // nothing past n
}

TEMPLATE_LIST_TEST_CASE("cuda::convert converts every pair of element types as the host does", "[cuda][kernels]",
                        AllElements) {
    using From = TestType;
    SYNCBLOB_REQUIRE_DEVICE(Device);
    std::apply([](auto... to) { (check_device_conversion<decltype(to), From>(), ...); }, AllElements{});
}

TEST_CASE("cuda::convert_checked reports the first element that is not exact", "[cuda][kernels]") {
    SYNCBLOB_REQUIRE_DEVICE(Device);
    // 300 and -1 do not fit U8; 1e30 does not fit F8_E4M3 (448 at most): the first index of each
    const DeviceArray<std::int32_t> ints(std::vector<std::int32_t>{7, 255, 300, -1});
    DeviceArray<std::uint8_t> bytes(4);
    CHECK(syncblob::cuda::convert_checked(bytes.get(), ints.get(), 4, nullptr) == 2);
    CHECK(bytes.download() == std::vector<std::uint8_t>{7, 255, 255, 0});
    CHECK(syncblob::cuda::convert_checked(bytes.get(), ints.get(), 2, nullptr) == 2);
    const DeviceArray<float> floats(std::vector<float>{0.5f, 448.0f, 1e30f});
    DeviceArray<syncblob::float8_e4m3fn> fp8(3);
    CHECK(syncblob::cuda::convert_checked(fp8.get(), floats.get(), 3, nullptr) == 2);
    const std::vector<syncblob::float8_e4m3fn> got = fp8.download();
    CHECK(got[0].bits == 0x30);
    CHECK(got[1].bits == 0x7E);
    CHECK(got[2].bits == 0x7E);  // saturated, as LoadOptions::saturate loads it
}

TEMPLATE_LIST_TEST_CASE("device reductions match the host on both paths", "[cuda][kernels][math]", FloatingTypes) {
    SYNCBLOB_REQUIRE_DEVICE(Device);
    const std::int64_t n = GENERATE(as<std::int64_t>{}, 0, 1, 7, 1001, 300000);
    CAPTURE(n);
    check_reductions<TestType>(n);
}

// Small sizes, one block and a few, of the custom reductions alone (their block tree is the only
// shared memory syncblob's kernels use): what scripts/gpu-check runs under compute-sanitizer's racecheck.
TEMPLATE_LIST_TEST_CASE("the custom reductions on one block and on a few", "[cuda][kernels][math][sanitize]",
                        FloatingTypes) {
    using T = TestType;
    SYNCBLOB_REQUIRE_DEVICE(Device);
    const std::int64_t n = GENERATE(as<std::int64_t>{}, 1, 255, 256, 257, 5000);
    CAPTURE(n);
    const auto hx = test_values<T>(n, 9);
    const auto hy = test_values<T>(n, 10);
    check_custom_reductions(DeviceArray<T>(hx), DeviceArray<T>(hy), hx, hy);
}

TEST_CASE("device reductions reuse their scratch from call to call", "[cuda][kernels][math]") {
    SYNCBLOB_REQUIRE_DEVICE(Device);
    const auto values = test_values<float>(1001, 3);
    const DeviceArray<float> x(values);
    const float first = syncblob::cuda::kernels::asum(x.get(), 1001, nullptr);
    const int device = syncblob::cuda::current_device();
    const sd::ReductionScratch& scratch = sd::ReductionScratch::of_thread(device);
    const float* partials = scratch.device<float>();
    CHECK(syncblob::cuda::kernels::asum(x.get(), 1001, nullptr) == first);
    CHECK(&sd::ReductionScratch::of_thread(device) == &scratch);  // the same scratch, not a new one
    CHECK(scratch.device<float>() == partials);
}

TEST_CASE("a reduction into a device scalar matches the host's and frees its partials in stream order",
          "[cuda][kernels][math]") {
    SYNCBLOB_REQUIRE_DEVICE(Device);
    constexpr std::int64_t n = 300000;
    const DeviceArray<syncblob::half> x(test_values<syncblob::half>(n, 3));
    DeviceArray<float> out(1);
    int device = 0;
    REQUIRE(cudaGetDevice(&device) == cudaSuccess);
    cudaMemPool_t pool = nullptr;
    REQUIRE(cudaDeviceGetDefaultMemPool(&pool, device) == cudaSuccess);
    const auto used = [pool] {
        std::uint64_t bytes = 0;
        REQUIRE(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &bytes) == cudaSuccess);
        return bytes;
    };
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    const std::uint64_t before = used();
    for (int i = 0; i < 100; ++i) {
        syncblob::cuda::kernels::reduce_into(syncblob::math::detail::Asum{}, n, nullptr, out.get(), x.get());
    }
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(used() == before);  // every call's partials went back to the pool
    CHECK(out.download()[0] == syncblob::cuda::kernels::asum(x.get(), n, nullptr));
}

TEMPLATE_LIST_TEST_CASE("device sub and scale match the host bodies exactly on both paths", "[cuda][kernels][math]",
                        FloatingTypes) {
    SYNCBLOB_REQUIRE_DEVICE(Device);
    const std::int64_t n = GENERATE(as<std::int64_t>{}, 0, 1, 1001, 300000);
    const bool custom = GENERATE(false, true);
    CAPTURE(n, custom);
    check_updates<TestType>(n, custom);
}

TEST_CASE("a GPU blob goes to the device, is scaled there, and comes back", "[cuda][blob]") {
    SYNCBLOB_REQUIRE_DEVICE(Device);
    syncblob::Blob<syncblob::half, syncblob::cuda::Allocator> blob({3, 5});
    auto data = blob.mutable_host_data();
    for (std::size_t i = 0; i < data.size(); ++i) {
        data[i] = syncblob::half(static_cast<float>(i) - 7.0f);
    }
    syncblob::DeviceKernels<Device>::transform(sm::Scale<float>{0.5f}, blob.count(), blob.stream(),
                                               blob.mutable_device_data());
    const auto back = blob.host_data();
    for (std::size_t i = 0; i < back.size(); ++i) {
        REQUIRE(static_cast<float>(back[i]) == (static_cast<float>(i) - 7.0f) * 0.5f);
    }
    CHECK(blob.data_stats().host_to_device == 1);
    CHECK(blob.data_stats().device_to_host == 1);
}

TEST_CASE("cuda: math on two devices uses each device's cuBLAS handle", "[cuda][devices]") {
    SYNCBLOB_REQUIRE_DEVICE(Device);
    if (syncblob::cuda::device_count() < 2) {
        std::cout << "skipped: needs two CUDA devices, this machine has " << syncblob::cuda::device_count()
                  << std::endl;
        return;
    }
    const int before = syncblob::cuda::current_device();
    for (const int device : {0, 1}) {
        syncblob::cuda::set_device(device);
        syncblob::Blob<float, syncblob::cuda::Allocator> blob{1024};
        blob.fill(0.5f);
        (void)blob.device_data();  // on `device`
        syncblob::cuda::set_device(1 - device);
        CHECK(syncblob::asum_data(blob) == 512.0f);  // runs on `device`, with its own handle
        syncblob::scale_data(blob, 2.0f);
        CHECK(syncblob::dot(blob, blob) == 1024.0f);
        CHECK(syncblob::cuda::current_device() == 1 - device);
        syncblob::cuda::set_device(device);
    }
    syncblob::cuda::set_device(before);
}

// ---- ordering that only a real GPU can get wrong ----------------------------------------------------
// Each test holds a stream back with a kernel that spins for tens of milliseconds, so work issued on
// another stream without the wait syncblob owes it runs first, on tens of MiB: a missing wait gives
// stale values here, not a lucky pass on a 100-byte copy that finished before anyone looked.

namespace {

constexpr std::int64_t big = std::int64_t{8} << 20;  // 8 Mi floats: 32 MiB

/// True when `bytes` more bytes of device memory can be had, else prints why the test is skipped.
bool device_memory_for(std::size_t bytes) {
    std::size_t free = 0;
    std::size_t total = 0;
    if (cudaMemGetInfo(&free, &total) != cudaSuccess || free < bytes + (std::size_t{256} << 20)) {
        std::cout << "skipped: needs " << (bytes >> 20) << " MiB of free device memory, has " << (free >> 20) << " MiB"
                  << std::endl;
        return false;
    }
    return true;
}

}  // namespace

// The calls that promise the host waited: each behind a 50 ms kernel, then the stream must be idle.
TEST_CASE(
    "cuda::Stream::synchronize, cuda::Event::synchronize and Device's copy return when done; a fill does not wait",
    "[cuda][streams]") {
    SYNCBLOB_REQUIRE_DEVICE(Device);
    const syncblob::cuda::Stream stream;
    const auto idle = [&] { return cudaStreamQuery(stream) == cudaSuccess; };
    void* block = Device::allocate(1 << 20);
    const syncblob::HostBlock pinned =
        syncblob::cuda::PinnedAllocator::allocate(1 << 20);  // a copy the host need not wait for
    auto* host = static_cast<unsigned char*>(pinned.data);
    std::fill_n(host, 1 << 20, 7);
    delay(stream, 50);
    REQUIRE_FALSE(idle());  // the delay holds the stream back
    stream.synchronize();
    CHECK(idle());
    delay(stream, 50);
    auto event = syncblob::cuda::Event::record(stream);
    event.synchronize();
    CHECK(idle());
    delay(stream, 50);
    Device::fill(block, 0, 1 << 20, stream);  // DeviceBackend: issued in stream order, no host wait
    CHECK_FALSE(idle());
    delay(stream, 50);
    Device::copy(host, block, 1 << 20, syncblob::CopyKind::device_to_host, stream);
    CHECK(idle());
    CHECK(std::count(host, host + (1 << 20), 0) == 1 << 20);
    syncblob::cuda::PinnedAllocator::deallocate(pinned);
    Device::deallocate(block, 1 << 20);
}

TEST_CASE("a pull on another stream waits for device math still queued on the blob's stream", "[cuda][streams]") {
    SYNCBLOB_REQUIRE_DEVICE(Device);
    const syncblob::cuda::Stream compute;
    const syncblob::cuda::Stream copies;
    syncblob::Blob<float, syncblob::cuda::Allocator> blob({big});
    blob.set_stream(compute);
    std::fill_n(blob.mutable_host_data().data(), big, 1.0f);
    (void)blob.mutable_device_data();  // uploaded (synchronously): the device side is fresh
    warm_up(compute);
    delay(compute, 50);
    syncblob::scale_data(blob, 3.0f);  // queued on `compute` behind the delay
    blob.data_buffer()->pull_to_host_async(copies);
    const auto host = blob.host_data();
    CHECK(std::count(host.begin(), host.end(), 3.0f) == big);
}

TEST_CASE("device math waits for a push still queued on another stream", "[cuda][streams]") {
    SYNCBLOB_REQUIRE_DEVICE(Device);
    const syncblob::cuda::Stream compute;
    const syncblob::cuda::Stream copies;
    syncblob::Blob<float, syncblob::cuda::Allocator> blob({big});
    blob.set_stream(compute);
    (void)blob.mutable_device_data();  // a zero-filled device block
    std::fill_n(blob.mutable_host_data().data(), big, 2.0f);
    warm_up(compute);
    delay(copies, 50);
    blob.data_buffer()->push_to_device_async(copies);  // lands after the delay
    syncblob::scale_data(blob, 5.0f);                  // must wait for it, or it scales the zeros
    const auto host = blob.host_data();
    CHECK(std::count(host.begin(), host.end(), 10.0f) == big);
}

TEST_CASE("a device copy between blobs on two streams waits for the source's stream", "[cuda][streams]") {
    SYNCBLOB_REQUIRE_DEVICE(Device);
    const syncblob::cuda::Stream first;
    const syncblob::cuda::Stream second;
    syncblob::Blob<float, syncblob::cuda::Allocator> source({big});
    syncblob::Blob<float, syncblob::cuda::Allocator> target({big});
    source.set_stream(first);
    target.set_stream(second);
    std::fill_n(source.mutable_host_data().data(), big, 1.0f);
    (void)source.mutable_device_data();
    (void)target.mutable_device_data();  // allocated before the delay
    warm_up(first);
    delay(first, 50);
    syncblob::scale_data(source, 7.0f);
    target.copy_from(source);  // device to device, on `second`
    const auto host = target.host_data();
    CHECK(std::count(host.begin(), host.end(), 7.0f) == big);
}

// ---- sizes past the first grid and past 32-bit indices ----------------------------------------------

TEST_CASE("element-wise kernels reach every element past the first grid (the grid-stride loop)", "[cuda][kernels]") {
    SYNCBLOB_REQUIRE_DEVICE(Device);
    // one full grid of threads, each taking its elements loaded ahead, then a second partial pass
    const std::int64_t n =
        sd::max_for_each_blocks * sd::block_threads * sd::TransformAt<sm::Scale<float>, float, 0>::loads_ahead + 4097;
    DeviceArray<float> a(static_cast<std::size_t>(n) + 1);
    syncblob::cuda::fill(a.get(), 0.0f, n + 1, nullptr);
    syncblob::cuda::fill(a.get(), 2.0f, n, nullptr);
    syncblob::cuda::kernels::scale(a.get(), 1.5f, n, nullptr);
    const std::vector<float> got = a.download();
    CHECK(std::count(got.begin(), got.end() - 1, 3.0f) == n);
    CHECK(got.back() == 0.0f);  // nothing past n
    // a reduction's threads stride too: exact against the host's replay of its order
    CHECK(syncblob::cuda::kernels::asum(a.get(), n, nullptr) ==
          sd::emulate_reduce(sd::reduce_at(sm::Asum{}, got.data()), n));
}

// Exact results past 2^31 elements, where an index or a count held in 32 bits would wrap: the
// custom kernels on ones (every partial sum is an integer float holds exactly), cuBLAS's 64-bit entry
// points on zeros but for a few elements on both sides of 2^31 (exact in any order of summation).
TEST_CASE("kernels index past 2^31 elements with 64-bit indices", "[cuda][kernels][large]") {
    SYNCBLOB_REQUIRE_DEVICE(Device);
    const std::int64_t n = (std::int64_t{1} << 31) + 512;  // 4 GiB of half an array
    if (!device_memory_for(2 * static_cast<std::size_t>(n) * sizeof(syncblob::half))) {
        return;
    }
    DeviceArray<syncblob::half> a(static_cast<std::size_t>(n));
    DeviceArray<syncblob::half> b(static_cast<std::size_t>(n));
    syncblob::cuda::fill(a.get(), syncblob::half(1.0f), n, nullptr);
    syncblob::cuda::fill(b.get(), syncblob::half(1.0f), n, nullptr);
    CHECK(syncblob::cuda::kernels::asum(a.get(), n, nullptr) == static_cast<float>(n));
    syncblob::cuda::kernels::scale(a.get(), 3.0f, n, nullptr);
    CHECK(syncblob::cuda::kernels::asum(a.get(), n, nullptr) == 3.0f * static_cast<float>(n));
    syncblob::cuda::kernels::sub(a.get(), b.get(), n, nullptr);  // 3 - 1
    CHECK(syncblob::cuda::kernels::dot(a.get(), b.get(), n, nullptr) == 2.0f * static_cast<float>(n));
    CHECK(syncblob::cuda::kernels::sumsq(a.get(), n, nullptr) == 4.0f * static_cast<float>(n));
    syncblob::half last{};
    Device::copy(&last, a.get() + (n - 1), sizeof(last), syncblob::CopyKind::device_to_host, nullptr);
    CHECK(static_cast<float>(last) == 2.0f);
}

TEST_CASE("cuBLAS's 64-bit calls reach the elements past 2^31", "[cuda][kernels][large]") {
    using Kernels = syncblob::DeviceKernels<Device>;
    SYNCBLOB_REQUIRE_DEVICE(Device);
    const std::int64_t n = (std::int64_t{1} << 31) + 512;  // 8 GiB of float an array
    if (!device_memory_for(2 * static_cast<std::size_t>(n) * sizeof(float))) {
        return;
    }
    DeviceArray<float> x(static_cast<std::size_t>(n));
    DeviceArray<float> y(static_cast<std::size_t>(n));
    syncblob::cuda::fill(x.get(), 0.0f, n, nullptr);
    syncblob::cuda::fill(y.get(), 0.0f, n, nullptr);
    const std::int64_t two31 = std::int64_t{1} << 31;
    const std::vector<std::int64_t> at{0, two31 - 1, two31, two31 + 100, n - 1};
    const std::vector<float> xs{1, 2, 4, 8, 16};
    const std::vector<float> ys{32, 64, 128, 256, 512};
    for (std::size_t k = 0; k < at.size(); ++k) {
        Device::copy(x.get() + at[k], &xs[k], sizeof(float), syncblob::CopyKind::host_to_device, nullptr);
        Device::copy(y.get() + at[k], &ys[k], sizeof(float), syncblob::CopyKind::host_to_device, nullptr);
    }
    const auto element = [](const DeviceArray<float>& a, std::int64_t i) {
        float v = 0;
        Device::copy(&v, a.get() + i, sizeof(v), syncblob::CopyKind::device_to_host, nullptr);
        return v;
    };
    CHECK(Kernels::reduce(sm::Asum{}, n, nullptr, x.get()) == 31.0f);
    CHECK(Kernels::reduce(sm::Sumsq{}, n, nullptr, x.get()) == 341.0f);
    CHECK(Kernels::reduce(sm::Dot{}, n, nullptr, x.get(), y.get()) == 10912.0f);
    Kernels::transform(sm::Scale<float>{-2.0f}, n, nullptr, x.get());  // x = -2, -4, -8, -16, -32
    Kernels::transform(sm::Sub{}, n, nullptr, y.get(), x.get());       // y = 34, 68, 136, 272, 544
    for (std::size_t k = 0; k < at.size(); ++k) {
        CAPTURE(at[k]);
        CHECK(element(x, at[k]) == -2.0f * xs[k]);
        CHECK(element(y, at[k]) == ys[k] + 2.0f * xs[k]);
    }
    CHECK(Kernels::reduce(sm::Asum{}, n, nullptr, y.get()) == 1054.0f);
}

TEST_CASE("borrowed host memory registered with the driver while a GPU blob uses it", "[cuda][register]") {
    SYNCBLOB_REQUIRE_DEVICE(Device);
    std::vector<float> user(1 << 20, 2.0f);
    unsigned int flags = 0;
    {
        syncblob::Blob<float, syncblob::cuda::Allocator> blob({static_cast<std::int64_t>(user.size())});
        syncblob::Borrow borrow;
        borrow.register_memory = true;
        blob.set_host_data(user.data(), user.size(), borrow);
        CHECK(cudaHostGetFlags(&flags, user.data()) == cudaSuccess);  // page-locked now
        blob.data_buffer()->push_to_device_async();
        syncblob::scale_data(blob, 0.5f);
        CHECK(syncblob::asum_data(blob) == static_cast<float>(user.size()));
    }
    CHECK(cudaHostGetFlags(&flags, user.data()) != cudaSuccess);  // unregistered with the blob
    (void)cudaGetLastError();
}

TEST_CASE("cuda::PinnedPool hands a block out again only after the copy that reads it has run",
          "[cuda][pinned_pool][streams]") {
    SYNCBLOB_REQUIRE_DEVICE(Device);
    using Pool = syncblob::cuda::PinnedPool;
    constexpr std::size_t bytes = std::size_t{32} << 20;
    const syncblob::cuda::Stream copies;
    void* device = Device::allocate(bytes);
    const syncblob::HostBlock old_block = Pool::allocate(bytes);
    CHECK(old_block.kind == syncblob::cuda::PinnedAllocator::pinned);
    std::memset(old_block.data, 0x11, bytes);
    delay(copies, 50);  // the copy below runs in about 50 ms, long after the host goes on
    REQUIRE(cudaMemcpyAsync(device, old_block.data, bytes, cudaMemcpyHostToDevice, copies) == cudaSuccess);
    Pool::deallocate(old_block, copies);

    const syncblob::HostBlock new_block = Pool::allocate(bytes);  // the same class; the cached block is busy
    CHECK(new_block.data != old_block.data);
    std::memset(new_block.data, 0x22, bytes);  // the new owner writes its block

    REQUIRE(cudaStreamSynchronize(copies) == cudaSuccess);
    std::vector<unsigned char> delivered(bytes);
    REQUIRE(cudaMemcpy(delivered.data(), device, bytes, cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(std::count(delivered.begin(), delivered.end(), static_cast<unsigned char>(0x11)) ==
          static_cast<std::ptrdiff_t>(bytes));

    const syncblob::HostBlock again = Pool::allocate(bytes);  // its event is reached now
    CHECK(again.data == old_block.data);
    Pool::deallocate(new_block);
    Pool::deallocate(again);
    Device::deallocate(device, bytes);
    (void)Pool::empty_cache();
}
