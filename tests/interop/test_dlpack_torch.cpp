// SPDX-License-Identifier: BSD-2-Clause
// DLPack with a real client: Debian's libtorch (1.13, which speaks the legacy DLManagedTensor).
// A blob exported to at::fromDLPack is the same memory (writes go both ways) and is released when
// the last tensor over it goes; a tensor from at::toDLPack imports into a blob that shares its
// storage and gives it back (the tensor's reference count drops) when the blob goes, also when
// the import is refused. One translation unit: libtorch's headers are heavy.

#include <ATen/ATen.h>
#include <ATen/DLConvertor.h>

#include <catch2/catch.hpp>

#include <cstdint>
#include <memory>
#include <syncblob/interop/dlpack.hpp>
#include <vector>

using namespace syncblob;
namespace dl = syncblob::dlpack;

namespace {

// [to-torch]
// libtorch 1.13 takes the legacy struct, in its own declaration: abi_cast converts (checking at
// compile time that the two layouts are the same).
template <Element T, SyncedAllocator A>
at::Tensor to_torch(Blob<T, A>& blob) {
    return at::fromDLPack(dl::abi_cast<::DLManagedTensor>(dl::to_dlpack_legacy(blob)));
}
// [to-torch]

template <class B>
long exports_of(const B& blob) {
    return blob.data_buffer().use_count() - 1;
}

}  // namespace

TEST_CASE("torch: at::fromDLPack of an exported blob is the blob's memory", "[interop][torch]") {
    Blob<float> blob{2, 3};
    auto host = blob.mutable_host_data();
    for (std::size_t i = 0; i < host.size(); ++i) {
        host[i] = static_cast<float>(i);
    }
    {
        at::Tensor t = to_torch(blob);
        CHECK(t.sizes() == at::IntArrayRef{2, 3});
        CHECK(t.scalar_type() == at::kFloat);
        CHECK(t.device().is_cpu());
        CHECK(t.is_contiguous());
        CHECK(t.data_ptr<float>() == blob.host_data().data());
        CHECK(exports_of(blob) == 1);

        t.index_put_({1, 2}, 50.0F);  // a write through the tensor
        CHECK(blob.host_data()[5] == 50.0F);
        t.mul_(2.0F);
        CHECK(std::vector<float>(blob.host_data().begin(), blob.host_data().end()) ==
              std::vector<float>{0, 2, 4, 6, 8, 100});
        blob.mutable_host_data()[0] = -1.0F;  // and one through the blob
        CHECK(t.index({0, 0}).item<float>() == -1.0F);

        at::Tensor view = t.view({3, 2});  // a second tensor over the same storage
        t = at::Tensor();
        CHECK(exports_of(blob) == 1);
        CHECK(view.index({2, 1}).item<float>() == 100.0F);
    }
    CHECK(exports_of(blob) == 0);  // libtorch called the deleter
}

TEST_CASE("torch: the tensor outlives the blob", "[interop][torch]") {
    at::Tensor t;
    {
        Blob<double> blob{4};
        blob.fill(2.5);
        t = to_torch(blob);
    }
    CHECK(t.scalar_type() == at::kDouble);
    CHECK(t.sum().item<double>() == 10.0);  // ASan: the memory is still the tensor's
}

TEST_CASE("torch: at::toDLPack of a tensor imports into a blob that shares its storage", "[interop][torch]") {
    at::Tensor t = at::arange(12, at::kFloat).reshape({3, 4});
    const auto before = t.storage().use_count();
    {
        // [from-torch]
        // from_dlpack takes libtorch's struct as it is (any layout-identical declaration).
        Blob<float> blob = dl::from_dlpack<float>(at::toDLPack(t));
        // [from-torch]
        CHECK(t.storage().use_count() == before + 1);  // the managed tensor holds the storage
        CHECK(blob.shape() == Shape{3, 4});
        CHECK(blob.host_data().data() == t.data_ptr<float>());
        CHECK(blob.host_data()[7] == 7.0F);
        blob.mutable_host_data()[7] = 70.0F;
        CHECK(t.index({1, 3}).item<float>() == 70.0F);
        t.index_put_({2, 0}, -8.0F);
        CHECK(blob.host_data()[8] == -8.0F);
    }
    CHECK(t.storage().use_count() == before);  // the blob called the deleter
}

TEST_CASE("torch: views, 0-d and zero-size tensors, and other dtypes", "[interop][torch]") {
    SECTION("a contiguous slice: the data pointer carries the storage offset") {
        at::Tensor base = at::arange(20, at::kLong).reshape({5, 4});
        Blob<std::int64_t> blob = dl::from_dlpack<std::int64_t>(at::toDLPack(base.narrow(0, 2, 2)));
        CHECK(blob.shape() == Shape{2, 4});
        CHECK(blob.host_data()[0] == 8);
        CHECK(blob.host_data()[7] == 15);
    }
    SECTION("an axis of extent 1 with an odd stride") {
        at::Tensor base = at::arange(12, at::kFloat);
        at::Tensor odd = base.as_strided({1, 4}, {99, 1}, 4);
        Blob<float> blob = dl::from_dlpack<float>(at::toDLPack(odd));
        CHECK(blob.shape() == Shape{1, 4});
        CHECK(std::vector<float>(blob.host_data().begin(), blob.host_data().end()) == std::vector<float>{4, 5, 6, 7});
    }
    SECTION("0-d, both ways") {
        Blob<float> blob = dl::from_dlpack<float>(at::toDLPack(at::scalar_tensor(4.5, at::kFloat)));
        CHECK(blob.shape().rank() == 0);
        CHECK(blob.host_data()[0] == 4.5F);
        at::Tensor back = to_torch(blob);
        CHECK(back.dim() == 0);
        CHECK(back.item<float>() == 4.5F);
    }
    SECTION("zero-size, both ways") {
        Blob<float> blob = dl::from_dlpack<float>(at::toDLPack(at::empty({2, 0, 3}, at::kFloat)));
        CHECK(blob.shape() == Shape{2, 0, 3});
        Blob<float> empty{0, 5};
        at::Tensor back = to_torch(empty);
        CHECK(back.sizes() == at::IntArrayRef{0, 5});
        CHECK(back.numel() == 0);
        back = at::Tensor();
        CHECK(exports_of(empty) == 0);  // released: libtorch drops the deleter of a null data pointer
    }
    SECTION("half, bfloat16 and the integers map to libtorch's dtypes") {
        Blob<half> h{3};
        h.fill(half(1.5F));
        CHECK(to_torch(h).scalar_type() == at::kHalf);
        CHECK(to_torch(h).sum().item<float>() == 4.5F);
        Blob<bfloat16> bf{2};
        CHECK(to_torch(bf).scalar_type() == at::kBFloat16);
        Blob<std::uint8_t> u8{2};
        CHECK(to_torch(u8).scalar_type() == at::kByte);
        Blob<std::int8_t> i8{2};
        CHECK(to_torch(i8).scalar_type() == at::kChar);
        Blob<std::int16_t> i16{2};
        CHECK(to_torch(i16).scalar_type() == at::kShort);
        Blob<std::int32_t> i32{2};
        CHECK(to_torch(i32).scalar_type() == at::kInt);
        Blob<bfloat16> from = dl::from_dlpack<bfloat16>(at::toDLPack(at::full({2}, 3.0, at::kBFloat16)));
        CHECK(static_cast<float>(from.host_data()[1]) == 3.0F);
        Blob<half> from_half = dl::from_dlpack<half>(at::toDLPack(at::full({2}, 0.25, at::kHalf)));
        CHECK(static_cast<float>(from_half.host_data()[0]) == 0.25F);
    }
}

TEST_CASE("torch: refused imports release the tensor", "[interop][torch]") {
    at::Tensor t = at::arange(12, at::kFloat).reshape({3, 4});
    const auto before = t.storage().use_count();
    SECTION("not C-contiguous") {
        CHECK_THROWS_AS(dl::from_dlpack<float>(at::toDLPack(t.t())), ShapeError);
    }
    SECTION("another dtype") {
        CHECK_THROWS_AS(dl::from_dlpack<double>(at::toDLPack(t)), FormatError);
    }
    SECTION("a step slice") {
        CHECK_THROWS_WITH(dl::from_dlpack<float>(at::toDLPack(t.slice(1, 0, 4, 2))),
                          Catch::Matchers::Contains("not C-contiguous"));
    }
    CHECK(t.storage().use_count() == before);
}
