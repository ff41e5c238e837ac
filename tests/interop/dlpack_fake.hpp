// SPDX-License-Identifier: BSD-2-Clause
#pragma once
// A producer's DLPack tensors made by hand for the import tests: any field, and a deleter that
// counts its calls.

#include <cstdint>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include <syncblob/interop/dlpack.hpp>

namespace dlpack_test {

namespace dl = syncblob::dlpack;

// A producer's tensor over memory the test owns; its deleter counts its calls.
template <class Managed>
struct Fake {
    Managed managed{};
    std::vector<std::int64_t> shape;
    std::vector<std::int64_t> strides;
    int* deletions = nullptr;

    static void deleter(Managed* self) noexcept {
        auto* fake = static_cast<Fake*>(self->manager_ctx);
        ++*fake->deletions;
        delete fake;
    }
};

struct Spec {
    void* data = nullptr;
    dl::DLDataType dtype = dl::dl_data_type<float>;
    std::vector<std::int64_t> shape;
    std::optional<std::vector<std::int64_t>> strides = std::nullopt;
    dl::DLDevice device{dl::DeviceType::cpu, 0};
    std::uint64_t byte_offset = 0;
    std::uint64_t flags = 0;
    dl::DLPackVersion version = dl::abi_version;
};

template <class Managed>
Managed* make_tensor(int& deletions, Spec spec) {
    auto* fake = new Fake<Managed>;
    fake->deletions = &deletions;
    fake->shape = std::move(spec.shape);
    dl::DLTensor& t = fake->managed.dl_tensor;
    t.data = spec.data;
    t.device = spec.device;
    t.ndim = static_cast<std::int32_t>(fake->shape.size());
    t.dtype = spec.dtype;
    t.shape = fake->shape.data();
    if (spec.strides) {
        fake->strides = *spec.strides;
        t.strides = fake->strides.data();
    }
    t.byte_offset = spec.byte_offset;
    fake->managed.manager_ctx = fake;
    fake->managed.deleter = &Fake<Managed>::deleter;
    if constexpr (std::is_same_v<Managed, dl::DLManagedTensorVersioned>) {
        fake->managed.version = spec.version;
        fake->managed.flags = spec.flags;
    }
    return &fake->managed;
}

using Versioned = dl::DLManagedTensorVersioned;
using Legacy = dl::DLManagedTensor;

}  // namespace dlpack_test
