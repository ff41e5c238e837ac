// SPDX-License-Identifier: BSD-2-Clause
// The import rules of docs/interop.md: the byte range that data, byte_offset and the extents
// describe is checked before any pointer is formed; a bool tensor's bytes are 0 or 1 or the
// import is refused; a deleter that throws is caught and counted, never the end of the program.

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <syncblob/interop/dlpack.hpp>
#include <vector>

#include "dlpack_fake.hpp"

using namespace syncblob;
namespace dl = syncblob::dlpack;
using Catch::Matchers::Contains;
using dl::from_dlpack;
using dlpack_test::Legacy;
using dlpack_test::make_tensor;
using dlpack_test::Spec;
using dlpack_test::Versioned;

namespace {

constexpr std::uint64_t two_to_the_63 = std::uint64_t{1} << 63;

// A producer whose deleter throws after counting its call (and freeing its struct).
template <class Managed>
struct ThrowingFake {
    Managed managed{};
    std::int64_t extent = 2;
    int* deletions = nullptr;
    static void deleter(Managed* self) {
        auto* fake = static_cast<ThrowingFake*>(self->manager_ctx);
        ++*fake->deletions;
        delete fake;
        throw std::runtime_error("the producer's deleter failed");
    }
};

template <class Managed>
Managed* throwing_tensor(int& deletions, float* data, dl::DLDataType dtype = dl::dl_data_type<float>) {
    auto* fake = new ThrowingFake<Managed>;
    fake->deletions = &deletions;
    dl::DLTensor& t = fake->managed.dl_tensor;
    t.data = data;
    t.device = {dl::DeviceType::cpu, 0};
    t.ndim = 1;
    t.dtype = dtype;
    t.shape = &fake->extent;
    fake->managed.manager_ctx = fake;
    fake->managed.deleter = &ThrowingFake<Managed>::deleter;
    if constexpr (std::is_same_v<Managed, Versioned>) {
        fake->managed.version = dl::abi_version;
    }
    return &fake->managed;
}

}  // namespace

TEST_CASE("dlpack import rules: a byte_offset whose byte range overflows is refused before any pointer is formed",
          "[interop][dlpack][hostile]") {
    std::vector<float> storage(16, 1.0F);
    void* p = storage.data();
    int deletions = 0;
    // 2^63 used to be accepted: data + 2^63 is past the address space and the first read crashed.
    CHECK_THROWS_AS(
        from_dlpack<float>(make_tensor<Versioned>(deletions, {.data = p, .shape = {2}, .byte_offset = two_to_the_63})),
        FormatError);
    CHECK_THROWS_WITH(
        from_dlpack<float>(make_tensor<Legacy>(deletions, {.data = p, .shape = {2}, .byte_offset = two_to_the_63})),
        Contains("dlpack::from_dlpack: byte_offset 9223372036854775808 with 8 bytes of elements runs past"));
    // An offset that wraps round to just before data (data - 16 as an address).
    CHECK_THROWS_AS(from_dlpack<float>(make_tensor<Versioned>(
                        deletions, {.data = p, .shape = {2}, .byte_offset = ~std::uint64_t{15}})),
                    FormatError);
    // Extents that are addressable alone, but not past such an offset: 2^60 floats (2^62 bytes) at 2^62.
    CHECK_THROWS_AS(
        from_dlpack<float>(make_tensor<Versioned>(
            deletions, {.data = p, .shape = {std::int64_t{1} << 60}, .byte_offset = std::uint64_t{1} << 62})),
        FormatError);
    // Extents whose bytes overflow on their own: 2^62 floats.
    CHECK_THROWS_WITH(
        from_dlpack<float>(make_tensor<Versioned>(deletions, {.data = p, .shape = {std::int64_t{1} << 62}})),
        Contains("4611686018427387904 elements of 4 bytes exceed the addressable size"));
    CHECK(deletions == 5);  // each refused tensor was released
    // An offset inside the memory still works, and an empty tensor's offset addresses nothing.
    auto inside = from_dlpack<float>(make_tensor<Versioned>(deletions, {.data = p, .shape = {2}, .byte_offset = 56}));
    CHECK(inside.host_data().data() == storage.data() + 14);
    auto empty =
        from_dlpack<float>(make_tensor<Versioned>(deletions, {.data = p, .shape = {0}, .byte_offset = two_to_the_63}));
    CHECK(empty.count() == 0);
}

TEST_CASE("dlpack import rules: a bool tensor holding a byte other than 0 and 1 is refused",
          "[interop][dlpack][hostile]") {
    int deletions = 0;
    SECTION("host memory, the bad byte anywhere") {
        const std::size_t at = GENERATE(std::size_t{0}, std::size_t{7}, std::size_t{8}, std::size_t{36});
        std::vector<unsigned char> bytes(37, 1);
        bytes[at] = GENERATE(std::uint8_t{2}, std::uint8_t{0x80}, std::uint8_t{0xFF});
        INFO("byte " << int(bytes[at]) << " at " << at);
        const Spec spec{.data = bytes.data(), .dtype = dl::dl_data_type<bool>, .shape = {37}};
        CHECK_THROWS_AS(from_dlpack<bool>(make_tensor<Versioned>(deletions, spec)), FormatError);
        CHECK_THROWS_WITH(from_dlpack<bool>(make_tensor<Legacy>(deletions, spec)),
                          Contains("element " + std::to_string(at) + " of a bool tensor holds the byte " +
                                   std::to_string(int(bytes[at]))));
        CHECK(deletions == 2);
    }
    SECTION("device memory, read through host chunks") {
        Blob<std::uint8_t, Simulated> source{5};
        for (std::size_t i = 0; i < 5; ++i) {
            source.mutable_host_data()[i] = static_cast<std::uint8_t>(i == 3 ? 9 : i % 2);
        }
        const Spec spec{.data = source.mutable_device_data(),
                        .dtype = dl::dl_data_type<bool>,
                        .shape = {5},
                        .device = {dl::DeviceType::ext_dev, 0}};
        CHECK_THROWS_WITH((from_dlpack<bool, Simulated>(make_tensor<Versioned>(deletions, spec))),
                          Contains("element 3 of a bool tensor holds the byte 9"));
        CHECK(deletions == 1);
        source.mutable_host_data()[3] = 1;
        auto blob =
            from_dlpack<bool, Simulated>(make_tensor<Versioned>(deletions, {.data = source.mutable_device_data(),
                                                                            .dtype = dl::dl_data_type<bool>,
                                                                            .shape = {5},
                                                                            .device = {dl::DeviceType::ext_dev, 0}}));
        CHECK(blob.host_data()[3]);
        CHECK(SimulatedDevice::faults().empty());
    }
    SECTION("0 and 1 only: borrowed as they are, without a copy") {
        std::vector<unsigned char> bytes{0, 1, 1, 0, 1, 0, 0, 1, 1};
        auto blob = from_dlpack<bool>(
            make_tensor<Versioned>(deletions, {.data = bytes.data(), .dtype = dl::dl_data_type<bool>, .shape = {9}}));
        CHECK(static_cast<const void*>(blob.host_data().data()) == bytes.data());
        CHECK(blob.host_data()[2]);
        CHECK_FALSE(blob.host_data()[3]);
    }
}

TEST_CASE("dlpack import rules: a deleter that throws is caught and counted, and runs once",
          "[interop][dlpack][hostile]") {
    std::vector<float> storage{1, 2};
    int deletions = 0;
    const std::uint64_t before = dl::deleter_exceptions();
    SECTION("when the last user of an imported blob goes") {
        {
            auto blob = from_dlpack<float>(throwing_tensor<Versioned>(deletions, storage.data()));
            CHECK(blob.host_data()[1] == 2.0F);
        }  // used to end the program: the exception left a noexcept deleter call
        CHECK(deletions == 1);
        CHECK(dl::deleter_exceptions() == before + 1);
    }
    SECTION("when the import is refused: the refusal is what the caller sees") {
        CHECK_THROWS_WITH(
            from_dlpack<float>(throwing_tensor<Legacy>(deletions, storage.data(), dl::dl_data_type<double>)),
            Contains("dtype is float64"));
        CHECK(deletions == 1);
        CHECK(dl::deleter_exceptions() == before + 1);
    }
    SECTION("through UniqueTensor") {
        { dl::UniqueTensor<Versioned> owned(throwing_tensor<Versioned>(deletions, storage.data())); }
        CHECK(deletions == 1);
        CHECK(dl::deleter_exceptions() == before + 1);
    }
}
