// SPDX-License-Identifier: BSD-2-Clause
// syncblob/interop/dlpack.hpp without a foreign library: the ABI layout (against the DLPack header
// libtorch ships, when installed), dtype codes both ways, export of data and diff, host and
// (simulated) device side, lifetimes, read-only, and import of hand-made tensors whose deleters
// count their calls, including every kind of bad input.

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <syncblob/core/sync_audit.hpp>
#include <syncblob/interop/dlpack.hpp>
#include <syncblob/sim/async_device.hpp>
#include <utility>
#include <vector>

#include "../blob/blob_test_support.hpp"
#include "dlpack_fake.hpp"

#if __has_include(<ATen/dlpack.h>)
#include <ATen/dlpack.h>  // another declaration of the legacy ABI, as a user's <dlpack/dlpack.h>
#define SYNCBLOB_TEST_FOREIGN_DLPACK 1
#endif

using namespace syncblob;
namespace dl = syncblob::dlpack;
using blob_test::make;
using blob_test::pattern;
using blob_test::values;
using blob_test::write_pattern;
using Catch::Matchers::Contains;
using dl::abi_cast;
using dl::abi_version;
using dl::DeviceType;
using dl::dl_data_type;
using dl::dtype_from;
using dl::dtype_string;
using dl::flag_is_copied;
using dl::flag_read_only;
using dl::from_dlpack;
using dl::Part;
using dl::Side;
using dl::to_dlpack;
using dl::to_dlpack_legacy;
using dl::TypeCode;
using dl::UniqueTensor;
using dlpack_test::Fake;
using dlpack_test::Legacy;
using dlpack_test::make_tensor;
using dlpack_test::Spec;
using dlpack_test::Versioned;

namespace {

// How many exported tensors (or other holders) share the blob's data buffer, besides the blob.
template <class B>
long extra_owners(const B& blob) {
    return blob.data_buffer().use_count() - 1;
}

}  // namespace

// ---- ABI --------------------------------------------------------------------------------------

TEST_CASE("dlpack: ABI constants are the specification's", "[interop][dlpack]") {
    CHECK(static_cast<int>(DeviceType::cpu) == 1);
    CHECK(static_cast<int>(DeviceType::cuda) == 2);
    CHECK(static_cast<int>(DeviceType::cuda_host) == 3);
    CHECK(static_cast<int>(DeviceType::ext_dev) == 12);
    CHECK(static_cast<int>(DeviceType::cuda_managed) == 13);
    CHECK(flag_read_only == 1);
    CHECK(flag_is_copied == 2);
    CHECK(abi_version.major == 1);
}

#ifdef SYNCBLOB_TEST_FOREIGN_DLPACK
TEST_CASE("dlpack: the ABI coexists with another declaration of it, and abi_cast converts", "[interop][dlpack]") {
    static_assert(sizeof(::DLManagedTensor) == sizeof(dlpack::DLManagedTensor));
    static_assert(offsetof(::DLManagedTensor, deleter) == offsetof(dlpack::DLManagedTensor, deleter));
    static_assert(offsetof(::DLTensor, byte_offset) == offsetof(dlpack::DLTensor, byte_offset));
    static_assert(static_cast<int>(::kDLCUDAManaged) == static_cast<int>(DeviceType::cuda_managed));
    static_assert(static_cast<int>(::kDLBfloat) == static_cast<int>(TypeCode::bfloat));

    Blob<float> blob{2, 3};
    write_pattern(blob.mutable_host_data());
    ::DLManagedTensor* foreign = abi_cast<::DLManagedTensor>(to_dlpack_legacy(blob));
    CHECK(foreign->dl_tensor.device.device_type == ::kDLCPU);
    CHECK(foreign->dl_tensor.dtype.code == static_cast<int>(::kDLFloat));
    CHECK(foreign->dl_tensor.ndim == 2);
    CHECK(foreign->dl_tensor.data == blob.host_data().data());
    // Imported through the foreign declaration: from_dlpack accepts any layout-identical struct.
    Blob<float> back = from_dlpack<float>(foreign);
    CHECK(back.host_data().data() == blob.host_data().data());
    CHECK(extra_owners(blob) == 1);
    back = Blob<float>{};
    CHECK(extra_owners(blob) == 0);
}
#endif

// ---- dtypes -----------------------------------------------------------------------------------

TEST_CASE("dlpack: dtype codes of every element type, both ways", "[interop][dlpack]") {
    CHECK(dl_data_type<float> == dl::DLDataType{2, 32, 1});
    CHECK(dl_data_type<double> == dl::DLDataType{2, 64, 1});
    CHECK(dl_data_type<half> == dl::DLDataType{2, 16, 1});
    CHECK(dl_data_type<bfloat16> == dl::DLDataType{4, 16, 1});
    CHECK(dl_data_type<std::int8_t> == dl::DLDataType{0, 8, 1});
    CHECK(dl_data_type<std::int16_t> == dl::DLDataType{0, 16, 1});
    CHECK(dl_data_type<std::int32_t> == dl::DLDataType{0, 32, 1});
    CHECK(dl_data_type<std::int64_t> == dl::DLDataType{0, 64, 1});
    CHECK(dl_data_type<std::uint8_t> == dl::DLDataType{1, 8, 1});
    CHECK(dl_data_type<std::uint16_t> == dl::DLDataType{1, 16, 1});
    CHECK(dl_data_type<std::uint32_t> == dl::DLDataType{1, 32, 1});
    CHECK(dl_data_type<std::uint64_t> == dl::DLDataType{1, 64, 1});
    CHECK(dl_data_type<bool> == dl::DLDataType{6, 8, 1});
    // DLPack 1.1: kDLFloat8_e4m3fn 10, kDLFloat8_e5m2 12, kDLFloat8_e8m0fnu 14
    CHECK(dl_data_type<float8_e4m3fn> == dl::DLDataType{10, 8, 1});
    CHECK(dl_data_type<float8_e5m2> == dl::DLDataType{12, 8, 1});
    CHECK(dl_data_type<float8_e8m0fnu> == dl::DLDataType{14, 8, 1});

    for (Dtype d : all_dtypes) {
        INFO(dtype_name(d));
        bool found = false;
        for (int code = 0; code < 20; ++code) {
            for (int bits : {1, 8, 16, 32, 64, 128}) {
                const dl::DLDataType t{static_cast<std::uint8_t>(code), static_cast<std::uint8_t>(bits), 1};
                if (dtype_from(t) == d) {
                    CHECK_FALSE(found);  // one DLPack type per dtype
                    found = true;
                }
            }
        }
        CHECK(found);
    }
    CHECK(dtype_from(dl::DLDataType{2, 32, 4}) == std::nullopt);  // lanes
    CHECK(dtype_from(dl::DLDataType{5, 64, 1}) == std::nullopt);  // complex
    CHECK(dtype_from(dl::DLDataType{8, 8, 1}) == std::nullopt);   // float8_e4m3 (with infinities): not E4M3FN
    CHECK(dtype_from(dl::DLDataType{11, 8, 1}) == std::nullopt);  // float8_e4m3fnuz
    CHECK(dtype_from(dl::DLDataType{10, 8, 1}) == Dtype::F8_E4M3);
    CHECK(dtype_from(dl::DLDataType{10, 16, 1}) == std::nullopt);
    CHECK(dtype_string(dl::DLDataType{12, 8, 1}) == "F8_E5M2 (code 12, 8-bit)");
    CHECK(dtype_string(dl::DLDataType{2, 32, 4}) == "float32x4");
    CHECK(dtype_string(dl::DLDataType{9, 8, 1}) == "code 9 8-bit");
}

TEMPLATE_LIST_TEST_CASE("dlpack: every element type round-trips through export and import", "[interop][dlpack]",
                        blob_test::ZipCases) {
    using T = typename TestType::element;
    using A = typename TestType::allocator;
    Blob<T, A> blob{3, 4};
    write_pattern(blob.mutable_host_data());
    Blob<T, A> view = from_dlpack<T, A>(to_dlpack(blob));
    CHECK(view.shape() == blob.shape());
    CHECK(view.host_data().data() == blob.host_data().data());
    CHECK(values(view.host_data()) == pattern<T>(12));
    view.mutable_host_data()[5] = make<T>(40);
    CHECK(blob_test::to_double(blob.host_data()[5]) == blob_test::to_double(make<T>(40)));
}

// ---- export -----------------------------------------------------------------------------------

TEST_CASE("dlpack: export describes the host data and shares it both ways", "[interop][dlpack]") {
    Blob<float> blob{2, 3, 4};
    write_pattern(blob.mutable_host_data());
    UniqueTensor<Versioned> tensor(to_dlpack(blob));
    const dl::DLTensor& t = tensor->dl_tensor;
    CHECK(tensor->version.major == 1);
    CHECK(tensor->flags == 0);
    CHECK(t.device.device_type == DeviceType::cpu);
    CHECK(t.device.device_id == 0);
    CHECK(t.ndim == 3);
    CHECK(std::vector<std::int64_t>(t.shape, t.shape + 3) == std::vector<std::int64_t>{2, 3, 4});
    REQUIRE(t.strides != nullptr);
    CHECK(std::vector<std::int64_t>(t.strides, t.strides + 3) == std::vector<std::int64_t>{12, 4, 1});
    CHECK(t.byte_offset == 0);
    CHECK(t.dtype == dl_data_type<float>);
    CHECK(t.data == blob.host_data().data());

    static_cast<float*>(t.data)[7] = 99.0F;  // the consumer writes
    CHECK(blob.host_data()[7] == 99.0F);
    blob.mutable_host_data()[8] = -1.0F;  // the blob writes
    CHECK(static_cast<const float*>(t.data)[8] == -1.0F);

    CHECK(extra_owners(blob) == 1);
    tensor.reset();  // the deleter
    CHECK(extra_owners(blob) == 0);
}

TEST_CASE("dlpack: export of the diff, and a legacy export", "[interop][dlpack]") {
    Blob<double> blob{5};
    write_pattern(blob.mutable_host_diff(), 10);
    UniqueTensor<Legacy> tensor(to_dlpack_legacy(blob, Side::host, Part::diff));
    CHECK(tensor->dl_tensor.data == blob.host_diff().data());
    CHECK(tensor->dl_tensor.dtype == dl_data_type<double>);
    CHECK(static_cast<const double*>(tensor->dl_tensor.data)[0] == blob_test::to_double(make<double>(10)));
    CHECK(blob.diff_buffer().use_count() == 2);
    tensor.reset();
    CHECK(blob.diff_buffer().use_count() == 1);
}

TEST_CASE("dlpack: export through a const blob is flagged read-only and moves no head", "[interop][dlpack]") {
    Blob<float, Simulated> blob{4};
    write_pattern(blob.mutable_host_data());
    (void)blob.device_data();
    REQUIRE(blob.data_head() == Head::synced);
    const auto& const_blob = blob;
    UniqueTensor<Versioned> tensor(to_dlpack(const_blob));
    CHECK(tensor->flags == flag_read_only);
    CHECK(blob.data_head() == Head::synced);                    // a const export reads only
    UniqueTensor<Legacy> legacy(to_dlpack_legacy(const_blob));  // no flags to carry it
    CHECK(legacy->dl_tensor.data == tensor->dl_tensor.data);
    UniqueTensor<Versioned> mutable_tensor(to_dlpack(blob));
    CHECK(mutable_tensor->flags == 0);
    CHECK(blob.data_head() == Head::at_host);  // exported for writing: the host is the fresh side
}

TEST_CASE("dlpack: a mutable export makes its side fresh, so the consumer's writes are what the blob reads",
          "[interop][dlpack]") {
    SimulatedDevice::Scope scope({.checking = true});
    Blob<float, Simulated> blob{6};
    write_pattern(blob.mutable_host_data());
    SECTION("host side of a blob fresh on the device") {
        (void)blob.mutable_device_data();  // host stale (and poisoned)
        UniqueTensor<Versioned> tensor(to_dlpack(blob, Side::host));
        CHECK(std::vector<float>(static_cast<float*>(tensor->dl_tensor.data),
                                 static_cast<float*>(tensor->dl_tensor.data) + 6) ==
              std::vector<float>{1, 2, 3, 4, 5, 6});
        static_cast<float*>(tensor->dl_tensor.data)[0] = 42.0F;
        CHECK(blob.device_data() != nullptr);  // copies H→D: the consumer's write goes along
        CHECK(blob.data_stats().host_to_device == 2);
        CHECK(blob_test::device_values<float, SimulatedDevice>(blob.device_data(), 6)[0] == 42.0);
    }
    SECTION("device side: ext_dev memory on the blob's device") {
        UniqueTensor<Versioned> tensor(to_dlpack(blob, Side::device));
        CHECK(tensor->dl_tensor.device.device_type == DeviceType::ext_dev);
        CHECK(tensor->dl_tensor.device.device_id == 0);
        CHECK(tensor->dl_tensor.data == blob.device_data());
        CHECK(blob.data_head() == Head::at_device);
        static_cast<float*>(tensor->dl_tensor.data)[1] = 43.0F;  // simulated device memory is host memory
        CHECK(blob.host_data()[1] == 43.0F);                     // D→H brings it over
    }
    CHECK(SimulatedDevice::faults().empty());
}

TEST_CASE("dlpack: the exported memory outlives the blob and whatever the blob does next", "[interop][dlpack]") {
    SECTION("the blob is destroyed first") {
        auto blob = std::make_unique<Blob<float>>(Shape{3});
        write_pattern(blob->mutable_host_data());
        UniqueTensor<Versioned> tensor(to_dlpack(*blob));
        blob.reset();
        CHECK(static_cast<float*>(tensor->dl_tensor.data)[2] == 3.0F);  // ASan: no use after free
    }
    SECTION("the blob grows into new buffers") {
        Blob<float> blob{3};
        write_pattern(blob.mutable_host_data());
        UniqueTensor<Versioned> tensor(to_dlpack(blob));
        blob.reshape({1000});
        blob.fill(0.0F);
        CHECK(static_cast<float*>(tensor->dl_tensor.data)[2] == 3.0F);
    }
    SECTION("the blob's buffer is given other memory") {
        Blob<float> blob{3};
        write_pattern(blob.mutable_host_data());
        UniqueTensor<Versioned> tensor(to_dlpack(blob));
        std::vector<float> other(3, 7.0F);
        blob.set_host_data(other.data(), other.size());  // the owned block is handed to the tensor
        CHECK(blob.host_data()[0] == 7.0F);
        CHECK(static_cast<float*>(tensor->dl_tensor.data)[2] == 3.0F);
    }
    SECTION("a read-only borrow is copied on write while exported") {
        const std::vector<float> source{1, 2, 3};
        auto keep = std::make_shared<int>(0);
        Blob<float> blob{3};
        blob.set_host_data(source.data(), source.size(), keep);
        UniqueTensor<Versioned> tensor(to_dlpack(std::as_const(blob)));
        CHECK(keep.use_count() == 2);
        blob.mutable_host_data()[0] = 9.0F;  // copy on write: the borrow's keep-alive moves to the tensor
        CHECK(keep.use_count() == 2);
        CHECK(tensor->dl_tensor.data == source.data());
        tensor.reset();
        CHECK(keep.use_count() == 1);
    }
    SECTION("the device side is given other memory") {
        Blob<float, Simulated> blob{3};
        write_pattern(blob.mutable_host_data());
        UniqueTensor<Versioned> tensor(to_dlpack(blob, Side::device));
        const auto live = SimulatedDevice::live_blocks();
        Blob<float, Simulated> other{3};
        blob.set_device_data(other.mutable_device_data(), 3);
        CHECK(SimulatedDevice::live_blocks() == live + 1);  // other's block; the exported one lives on
        CHECK(static_cast<float*>(tensor->dl_tensor.data)[2] == 3.0F);
        tensor.reset();
        CHECK(SimulatedDevice::live_blocks() == live);  // freed with the tensor
    }
}

TEST_CASE("dlpack: 0-d and zero-size blobs export", "[interop][dlpack]") {
    Blob<float> scalar;
    scalar.reshape(Shape{});
    scalar.fill(5.0F);
    UniqueTensor<Versioned> s(to_dlpack(scalar));
    CHECK(s->dl_tensor.ndim == 0);
    CHECK(*static_cast<float*>(s->dl_tensor.data) == 5.0F);

    Blob<float> empty{2, 0, 3};
    UniqueTensor<Versioned> e(to_dlpack(empty));
    CHECK(e->dl_tensor.ndim == 3);
    CHECK(e->dl_tensor.data != nullptr);  // not null: libtorch 1.13 leaks tensors whose data is null
    CHECK(e->dl_tensor.shape[1] == 0);
}

TEST_CASE("dlpack: what cannot be exported throws and changes nothing", "[interop][dlpack]") {
    Blob<float> shapeless;
    CHECK_THROWS_AS(to_dlpack(shapeless), StateError);
    Blob<float> host{2};
    CHECK_THROWS_AS(to_dlpack(host, Side::device), NoDeviceError);
    CHECK(host.data_head() == Head::uninitialized);
    CHECK(extra_owners(host) == 0);
}

// ---- import -----------------------------------------------------------------------------------

TEMPLATE_TEST_CASE("dlpack: an import borrows the memory and calls the deleter once, when the last user goes",
                   "[interop][dlpack]", Versioned, Legacy) {
    std::vector<float> storage{1, 2, 3, 4, 5, 6};
    int deletions = 0;
    auto* tensor = make_tensor<TestType>(deletions, {.data = storage.data(), .shape = {2, 3}});
    {
        Blob<float> blob = from_dlpack<float>(tensor);
        CHECK(blob.shape() == Shape{2, 3});
        CHECK(blob.host_data().data() == storage.data());
        blob.mutable_host_data()[0] = 10.0F;
        CHECK(storage[0] == 10.0F);
        Blob<float> moved = std::move(blob);
        Blob<float> sharer{3, 2};
        sharer.share_data(moved);
        moved = Blob<float>{};
        CHECK(deletions == 0);
        {
            UniqueTensor<Versioned> again(to_dlpack(sharer));  // exported again: it holds the memory too
            sharer = Blob<float>{};
            CHECK(deletions == 0);
            CHECK(static_cast<float*>(again->dl_tensor.data)[1] == 2.0F);
        }
        CHECK(deletions == 1);
    }
    CHECK(deletions == 1);
}

TEST_CASE("dlpack: a null deleter is allowed", "[interop][dlpack]") {
    std::vector<float> storage{1, 2};
    int deletions = 0;
    auto* tensor = make_tensor<Versioned>(deletions, {.data = storage.data(), .shape = {2}});
    auto* fake = static_cast<Fake<Versioned>*>(tensor->manager_ctx);
    tensor->deleter = nullptr;
    {
        Blob<float> blob = from_dlpack<float>(tensor);
        CHECK(blob.host_data()[1] == 2.0F);
    }
    CHECK(deletions == 0);
    delete fake;
}

TEST_CASE("dlpack: strides, byte_offset, 0-d and zero-size tensors", "[interop][dlpack]") {
    std::vector<float> storage(24);
    for (std::size_t i = 0; i < storage.size(); ++i) {
        storage[i] = static_cast<float>(i);
    }
    int deletions = 0;
    SECTION("explicit C-contiguous strides") {
        auto blob = from_dlpack<float>(
            make_tensor<Versioned>(deletions, {.data = storage.data(), .shape = {2, 3, 4}, .strides = {{12, 4, 1}}}));
        CHECK(blob.count() == 24);
    }
    SECTION("size-1 axes may carry any stride") {
        auto blob = from_dlpack<float>(make_tensor<Versioned>(
            deletions, {.data = storage.data(), .shape = {1, 6, 1, 4}, .strides = {{0, 4, 77, 1}}}));
        CHECK(blob.shape() == Shape{1, 6, 1, 4});
    }
    SECTION("byte_offset points into the memory") {
        auto blob = from_dlpack<float>(make_tensor<Legacy>(
            deletions, {.data = storage.data(), .shape = {2, 2}, .byte_offset = 8 * sizeof(float)}));
        CHECK(std::vector<float>(blob.host_data().begin(), blob.host_data().end()) == std::vector<float>{8, 9, 10, 11});
    }
    SECTION("0-d") {
        auto blob = from_dlpack<float>(make_tensor<Versioned>(deletions, {.data = storage.data() + 3, .shape = {}}));
        CHECK(blob.shape().rank() == 0);
        CHECK(blob.count() == 1);
        CHECK(blob.host_data()[0] == 3.0F);
    }
    SECTION("zero-size, null data, strides of any value") {
        auto blob = from_dlpack<float>(
            make_tensor<Versioned>(deletions, {.data = nullptr, .shape = {3, 0, 2}, .strides = {{0, 0, 5}}}));
        CHECK(blob.shape() == Shape{3, 0, 2});
        CHECK(blob.host_data().empty());
        CHECK(deletions == 0);
    }
    CHECK(deletions == 1);
}

TEST_CASE("dlpack: read-only imports refuse writes unless asked to copy", "[interop][dlpack]") {
    std::vector<float> storage{1, 2, 3};
    int deletions = 0;
    SECTION("flagged read-only: StateError, memory and blob unchanged") {
        Blob<float, Simulated> blob = from_dlpack<float, Simulated>(
            make_tensor<Versioned>(deletions, {.data = storage.data(), .shape = {3}, .flags = flag_read_only}));
        CHECK(blob.host_data()[2] == 3.0F);
        CHECK(blob.device_data() != nullptr);  // reading on the device is fine
        CHECK_THROWS_AS(blob.mutable_host_data(), StateError);
        CHECK_THROWS_WITH(blob.mutable_device_data(), Contains("read-only"));
        CHECK_THROWS_AS(blob.fill(0.0F), StateError);
        CHECK_THROWS_AS(blob.mutable_device_data_for_overwrite(), StateError);
        CHECK_THROWS_AS(to_dlpack(blob), StateError);  // exporting for writing is writing
        CHECK(blob.data_head() == Head::synced);
        CHECK(storage == std::vector<float>{1, 2, 3});
        UniqueTensor<Versioned> view(to_dlpack(std::as_const(blob)));  // a read-only export is fine
        CHECK(view->flags == flag_read_only);
        Blob<float, Simulated> copy = blob.clone();  // the way to a writable copy
        copy.mutable_host_data()[0] = 7.0F;
        CHECK(storage[0] == 1.0F);
    }
    SECTION("copy on write when asked: the producer's memory is released at the first write") {
        Blob<float> blob = from_dlpack<float>(
            make_tensor<Versioned>(deletions, {.data = storage.data(), .shape = {3}, .flags = flag_read_only}),
            {.copy_on_write = true});
        blob.mutable_host_data()[0] = 9.0F;
        CHECK(deletions == 1);
        CHECK(storage[0] == 1.0F);
        CHECK(blob.host_data()[0] == 9.0F);
    }
    SECTION("a legacy tensor made read-only by the caller") {
        Blob<float> blob = from_dlpack<float>(make_tensor<Legacy>(deletions, {.data = storage.data(), .shape = {3}}),
                                              {.read_only = true});
        CHECK_THROWS_AS(blob.mutable_host_data(), StateError);
    }
    SECTION("not flagged: writable") {
        Blob<float> blob =
            from_dlpack<float>(make_tensor<Versioned>(deletions, {.data = storage.data(), .shape = {3}}));
        blob.mutable_host_data()[0] = 5.0F;
        CHECK(storage[0] == 5.0F);
    }
    CHECK(deletions == 1);
}

TEST_CASE("dlpack: device tensors import into the device side", "[interop][dlpack]") {
    Blob<float, Simulated> source{4};
    write_pattern(source.mutable_host_data());
    Blob<float, Simulated> blob = from_dlpack<float, Simulated>(to_dlpack(source, Side::device));
    CHECK(blob.data_head() == Head::at_device);
    CHECK(blob.device_data() == source.device_data());
    CHECK(values(blob.host_data()) == pattern<float>(4));
    CHECK(blob.data_stats().device_allocations == 0);
    CHECK(SimulatedDevice::faults().empty());
}

TEST_CASE("dlpack: a blob of a stream-ordered pool exports and imports its device side", "[interop][dlpack]") {
    static_assert(dl::HasDeviceType<SimulatedAsyncDevice>);
    Blob<float, SimulatedAsync> source{4};
    write_pattern(source.mutable_host_data());
    {
        UniqueTensor<Versioned> tensor(to_dlpack(source, Side::device));
        CHECK(tensor->dl_tensor.device.device_type == DeviceType::ext_dev);
        CHECK(tensor->dl_tensor.data == source.device_data());
    }
    Blob<float, SimulatedAsync> blob = from_dlpack<float, SimulatedAsync>(to_dlpack(source, Side::device));
    CHECK(blob.data_head() == Head::at_device);
    CHECK(blob.device_data() == source.device_data());
    CHECK(values(blob.host_data()) == pattern<float>(4));
    SimulatedAsyncDevice::synchronize();
    CHECK(SimulatedDevice::faults().empty());
}

TEST_CASE("dlpack: a consumer stream is for the device side; the host side refuses one", "[interop][dlpack]") {
    Blob<float, Simulated> blob{4};
    blob.fill(1.0F);
    const auto c = SimulatedDevice::create_stream();
    CHECK_THROWS_AS(to_dlpack(blob, Side::host, Part::data, c), OptionError);
    CHECK_THROWS_WITH(dl::to_dlpack_legacy(blob, Side::host, Part::diff, c),
                      Contains("dlpack::to_dlpack_legacy") && Contains("consumer stream") && Contains("host side"));
    CHECK(blob.data_stats().device_to_host == 0);  // refused before anything was touched
    UniqueTensor<Versioned> tensor(to_dlpack(blob, Side::device, Part::data, c));
    CHECK(tensor->dl_tensor.data == blob.device_data());
    UniqueTensor<dl::DLManagedTensor> legacy(dl::to_dlpack_legacy(std::as_const(blob), Side::device, Part::data, c));
    CHECK(legacy->dl_tensor.data == blob.device_data());
    tensor.reset();
    legacy.reset();
    SimulatedDevice::synchronize();
    CHECK(SimulatedDevice::faults().empty());
}

TEST_CASE("dlpack: the sync audit names the export's wait, asked for only without a consumer stream",
          "[interop][dlpack][audit]") {
    namespace audit = syncblob::audit;
    Blob<float, SimulatedAsync> blob{4};
    blob.fill(1.0F);
    (void)blob.device_data();
    const auto c = SimulatedDevice::create_stream();
    const audit::ModeScope error(audit::Mode::error);
    audit::reset();
    { UniqueTensor<Versioned> tensor(to_dlpack(blob, Side::device)); }
    const std::vector<audit::Count> waited{{"dlpack::to_dlpack", audit::Wait::event_synchronize, true, 1}};
    CHECK(audit::counts() == waited);
    audit::reset();
    { UniqueTensor<Versioned> tensor(to_dlpack(blob, Side::device, Part::data, c)); }
    CHECK(audit::counts().empty());
    SimulatedDevice::synchronize();
    CHECK(SimulatedDevice::faults().empty());
}

TEST_CASE("dlpack: bad tensors are refused with a typed error, and released", "[interop][dlpack]") {
    std::vector<float> storage(16, 1.0F);
    int deletions = 0;
    const auto refuse = [&]<class E>(Spec spec, const std::string& words, E*) {
        INFO(words);
        Spec again = spec;
        CHECK_THROWS_AS(from_dlpack<float>(make_tensor<Versioned>(deletions, std::move(spec))), E);
        CHECK_THROWS_WITH(from_dlpack<float>(make_tensor<Legacy>(deletions, std::move(again))), Contains(words));
        CHECK(deletions == 2);
        deletions = 0;
    };
    void* p = storage.data();
    refuse(Spec{.data = p, .dtype = dl_data_type<double>, .shape = {2}}, "dtype is float64, the blob holds F32",
           static_cast<FormatError*>(nullptr));
    refuse(Spec{.data = p, .dtype = dl::DLDataType{2, 32, 4}, .shape = {2}}, "float32x4",
           static_cast<FormatError*>(nullptr));
    refuse(Spec{.data = p, .dtype = dl_data_type<float8_e4m3fn>, .shape = {2}},
           "dtype is F8_E4M3 (code 10, 8-bit), the blob holds F32", static_cast<FormatError*>(nullptr));
    refuse(Spec{.data = p, .shape = {2, 3}, .strides = {{1, 2}}},
           "strides (1, 2) of shape (2, 3) are not C-contiguous (axis 1 has stride 2 where 1 is needed)",
           static_cast<ShapeError*>(nullptr));
    refuse(Spec{.data = p, .shape = {4, 2}, .strides = {{1, 4}}}, "not C-contiguous",
           static_cast<ShapeError*>(nullptr));
    refuse(Spec{.data = p, .shape = {2, -3}}, "shape (2, -3)", static_cast<ShapeError*>(nullptr));
    refuse(Spec{.data = p, .shape = std::vector<std::int64_t>(33, 1)}, "ndim is 33", static_cast<ShapeError*>(nullptr));
    refuse(Spec{.data = nullptr, .shape = {2}}, "data is null for a tensor of 2 elements",
           static_cast<FormatError*>(nullptr));
    refuse(Spec{.data = p, .shape = {2}, .byte_offset = 2}, "not aligned for F32", static_cast<FormatError*>(nullptr));
    refuse(Spec{.data = p, .shape = {2}, .device = {DeviceType::ext_dev, 0}},
           "ExtDev memory cannot be imported into a host-only blob", static_cast<NoDeviceError*>(nullptr));
    refuse(Spec{.data = p, .shape = {2}, .device = {DeviceType::cuda, 0}}, "CUDA memory",
           static_cast<NoDeviceError*>(nullptr));

    SECTION("a shape pointer that is null") {
        auto* t = make_tensor<Versioned>(deletions, {.data = p, .shape = {2}});
        t->dl_tensor.shape = nullptr;
        CHECK_THROWS_WITH(from_dlpack<float>(t), Contains("shape is null"));
    }
    SECTION("an unknown major version: the deleter, and nothing else, is used") {
        auto* t = make_tensor<Versioned>(deletions, {.data = p, .shape = {2}, .version = {2, 0}});
        CHECK_THROWS_WITH(from_dlpack<float>(t), Contains("DLPack ABI version 2.0, syncblob reads 1.x"));
    }
    SECTION("device memory of another kind for a device backend") {
        auto* t = make_tensor<Versioned>(deletions, {.data = p, .shape = {2}, .device = {DeviceType::opencl, 0}});
        CHECK_THROWS_WITH((from_dlpack<float, Simulated>(t)),
                          Contains("OpenCL memory cannot be imported into a blob with device backend SimulatedDevice"));
    }
    SECTION("a device id that is not the memory's") {
        Blob<float, Simulated> source{2};
        auto* t = make_tensor<Versioned>(
            deletions, {.data = source.mutable_device_data(), .shape = {2}, .device = {DeviceType::ext_dev, 1}});
        CHECK_THROWS_AS((from_dlpack<float, Simulated>(t)), DeviceError);
    }
    CHECK(deletions == 1);
    CHECK_THROWS_AS(from_dlpack<float>(static_cast<Versioned*>(nullptr)), FormatError);
    CHECK(storage == std::vector<float>(16, 1.0F));
}
