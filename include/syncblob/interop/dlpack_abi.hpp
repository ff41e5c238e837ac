// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The DLPack 1.x ABI, declared by syncblob from the DLPack specification in `syncblob::dlpack`:
/// the same layout as the structures of `<dlpack/dlpack.h>`, under other names, so this header and
/// a user's `<dlpack/dlpack.h>` (or a library's copy of it, such as `<ATen/dlpack.h>`) can be
/// included together. `abi_cast` converts between the two declarations of one structure; the
/// static_asserts below pin sizes and offsets to the specification's.

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <type_traits>

#include "../core/config.hpp"
#include "../core/element.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace dlpack {

/// The DLPack ABI version (`DLPackVersion`): a consumer must not read past the deleter of a
/// tensor whose major version it does not know.
struct DLPackVersion {
    std::uint32_t major;
    std::uint32_t minor;
};

/// The version of the DLPack ABI syncblob declares, reads and writes: 1.1.
inline constexpr DLPackVersion abi_version{1, 1};

/// `DLDeviceType`: the kind of memory a tensor's data pointer points into.
enum class DeviceType : std::int32_t {
    cpu = 1,            ///< host memory (`kDLCPU`)
    cuda = 2,           ///< CUDA device memory (`kDLCUDA`)
    cuda_host = 3,      ///< pinned host memory from `cudaMallocHost` (`kDLCUDAHost`)
    opencl = 4,         ///< `kDLOpenCL`
    vulkan = 7,         ///< `kDLVulkan`
    metal = 8,          ///< `kDLMetal`
    vpi = 9,            ///< `kDLVPI`
    rocm = 10,          ///< `kDLROCM`
    rocm_host = 11,     ///< `kDLROCMHost`
    ext_dev = 12,       ///< an extension device for testing (`kDLExtDev`): syncblob's SimulatedDevice
    cuda_managed = 13,  ///< CUDA managed memory, host-accessible (`kDLCUDAManaged`)
    oneapi = 14,        ///< `kDLOneAPI`
    webgpu = 15,        ///< `kDLWebGPU`
    hexagon = 16,       ///< `kDLHexagon`
    maia = 17,          ///< `kDLMAIA`
    trn = 18,           ///< `kDLTrn`
};

/// `DLDevice`: a device type and an index (0 for host, pinned and managed memory).
struct DLDevice {
    DeviceType device_type;
    std::int32_t device_id;
};

/// `DLDataTypeCode`: the values of `DLDataType::code`.
enum class TypeCode : std::uint8_t {
    signed_int = 0,    ///< `kDLInt`
    unsigned_int = 1,  ///< `kDLUInt`
    floating = 2,      ///< IEEE floating point (`kDLFloat`)
    opaque_handle = 3,
    bfloat = 4,  ///< bfloat16 (`kDLBfloat`)
    complex = 5,
    boolean = 6,  ///< one byte per element (`kDLBool`)
    // 7 … 17: the 8-, 6- and 4-bit floating-point formats of DLPack 1.1; the codes of those syncblob
    // holds (the 8-bit floats of OCP) are columns of the element table (core/element.hpp)
};

/// `DLDataType`: code, bits per lane and lanes (syncblob's element types have one lane).
struct DLDataType {
    std::uint8_t code;
    std::uint8_t bits;
    std::uint16_t lanes;

    friend constexpr bool operator==(DLDataType, DLDataType) noexcept = default;
};

/// `DLTensor`: a plain description of a strided array; owns nothing.
struct DLTensor {
    void* data;
    DLDevice device;
    std::int32_t ndim;
    DLDataType dtype;
    std::int64_t* shape;
    std::int64_t* strides;  ///< in elements; null means C-contiguous
    std::uint64_t byte_offset;
};

/// `DLManagedTensor`, the legacy (pre-1.0) managed tensor: no version and no flags.
struct DLManagedTensor {
    DLTensor dl_tensor;
    void* manager_ctx;
    void (*deleter)(DLManagedTensor* self);
};

/// `DLPACK_FLAG_BITMASK_READ_ONLY`: the consumer must not write the memory.
inline constexpr std::uint64_t flag_read_only = 1U << 0U;
/// `DLPACK_FLAG_BITMASK_IS_COPIED`: the producer made a copy the consumer owns alone.
inline constexpr std::uint64_t flag_is_copied = 1U << 1U;
/// `DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED`: sub-byte elements are padded, not packed.
inline constexpr std::uint64_t flag_is_subbyte_type_padded = 1U << 2U;

/// `DLManagedTensorVersioned` (DLPack 1.x): a version, flags, and the tensor.
struct DLManagedTensorVersioned {
    DLPackVersion version;
    void* manager_ctx;
    void (*deleter)(DLManagedTensorVersioned* self);
    std::uint64_t flags;
    DLTensor dl_tensor;
};

// The specification's layout, on 64-bit targets.
static_assert(sizeof(DLPackVersion) == 8 && offsetof(DLPackVersion, minor) == 4);
static_assert(sizeof(DLDevice) == 8 && offsetof(DLDevice, device_id) == 4);
static_assert(sizeof(DLDataType) == 4 && offsetof(DLDataType, bits) == 1 && offsetof(DLDataType, lanes) == 2);
static_assert(sizeof(void*) != 8 ||
              (sizeof(DLTensor) == 48 && offsetof(DLTensor, device) == 8 && offsetof(DLTensor, ndim) == 16 &&
               offsetof(DLTensor, dtype) == 20 && offsetof(DLTensor, shape) == 24 &&
               offsetof(DLTensor, strides) == 32 && offsetof(DLTensor, byte_offset) == 40));
static_assert(sizeof(void*) != 8 || (sizeof(DLManagedTensor) == 64 && offsetof(DLManagedTensor, manager_ctx) == 48 &&
                                     offsetof(DLManagedTensor, deleter) == 56));
static_assert(sizeof(void*) != 8 ||
              (sizeof(DLManagedTensorVersioned) == 80 && offsetof(DLManagedTensorVersioned, manager_ctx) == 8 &&
               offsetof(DLManagedTensorVersioned, deleter) == 16 && offsetof(DLManagedTensorVersioned, flags) == 24 &&
               offsetof(DLManagedTensorVersioned, dl_tensor) == 32));

namespace detail {

// A managed tensor struct of either kind, whoever declared it: it has the members the DLPack
// specification names.
template <class M>
concept AnyManagedTensor = std::is_standard_layout_v<M> && requires(M m) {
    m.dl_tensor;
    m.manager_ctx;
    m.deleter;
};

template <class M>
concept AnyVersionedTensor = AnyManagedTensor<M> && requires(M m) {
    m.version;
    m.flags;
};

template <class A, class B>
constexpr bool same_tensor_layout() {
    using TA = decltype(A::dl_tensor);
    using TB = decltype(B::dl_tensor);
    return sizeof(TA) == sizeof(TB) && offsetof(TA, data) == offsetof(TB, data) &&
           offsetof(TA, device) == offsetof(TB, device) && offsetof(TA, ndim) == offsetof(TB, ndim) &&
           offsetof(TA, dtype) == offsetof(TB, dtype) && offsetof(TA, shape) == offsetof(TB, shape) &&
           offsetof(TA, strides) == offsetof(TB, strides) && offsetof(TA, byte_offset) == offsetof(TB, byte_offset);
}

template <class A, class B>
constexpr bool same_managed_layout() {
    if constexpr (AnyVersionedTensor<A> != AnyVersionedTensor<B>) {
        return false;
    } else if constexpr (AnyVersionedTensor<A>) {
        return sizeof(A) == sizeof(B) && alignof(A) == alignof(B) && same_tensor_layout<A, B>() &&
               offsetof(A, version) == offsetof(B, version) && offsetof(A, manager_ctx) == offsetof(B, manager_ctx) &&
               offsetof(A, deleter) == offsetof(B, deleter) && offsetof(A, flags) == offsetof(B, flags) &&
               offsetof(A, dl_tensor) == offsetof(B, dl_tensor);
    } else {
        return sizeof(A) == sizeof(B) && alignof(A) == alignof(B) && same_tensor_layout<A, B>() &&
               offsetof(A, manager_ctx) == offsetof(B, manager_ctx) && offsetof(A, deleter) == offsetof(B, deleter) &&
               offsetof(A, dl_tensor) == offsetof(B, dl_tensor);
    }
}

}  // namespace detail

/// The same managed tensor seen through another declaration of its structure: syncblob's
/// `dlpack::DLManagedTensor` as the global `DLManagedTensor` of `<dlpack/dlpack.h>` (for
/// `at::fromDLPack`), or back. Both must be the same kind (legacy or versioned) with the same
/// layout, checked at compile time. The deleter is then called through the other declaration's
/// function pointer type, as every DLPack exchange between libraries does.
template <class To, class From>
requires detail::AnyManagedTensor<To> && detail::AnyManagedTensor<std::remove_const_t<From>>
[[nodiscard]] To* abi_cast(From* tensor) noexcept {
    static_assert(detail::same_managed_layout<To, std::remove_const_t<From>>(),
                  "abi_cast: the two structures are not the same DLPack structure (legacy DLManagedTensor and "
                  "DLManagedTensorVersioned differ; so do other layouts)");
    static_assert(!std::is_const_v<From>, "abi_cast: a managed tensor is handed over, not viewed: pass it non-const");
    return reinterpret_cast<To*>(tensor);
}

/// The DLPack data type of a syncblob dtype: the element table's DLPack code (F64, F32 and F16
/// `floating`, BF16 `bfloat`, the integers `signed_int` / `unsigned_int`, BOOL `boolean`, the 8-bit
/// floats DLPack 1.1's `kDLFloat8_e4m3fn`, `kDLFloat8_e5m2` and `kDLFloat8_e8m0fnu`), 8 bits per
/// byte of the element, one lane.
[[nodiscard]] constexpr DLDataType dl_data_type_of(Dtype d) noexcept {
    if (!is_dtype(d)) {
        return DLDataType{static_cast<std::uint8_t>(TypeCode::opaque_handle), 0, 1};
    }
    const syncblob::DtypeInfo& row = dtype_table[static_cast<std::size_t>(d)];
    return DLDataType{row.dlpack_code, static_cast<std::uint8_t>(row.size * 8), 1};
}

/// The DLPack data type of an element type (see `dl_data_type_of`).
template <Element T>
inline constexpr DLDataType dl_data_type = dl_data_type_of(dtype_of<T>);

/// The syncblob dtype of a DLPack data type, or nothing when no element type matches.
[[nodiscard]] constexpr std::optional<Dtype> dtype_from(DLDataType t) noexcept {
    for (Dtype d : all_dtypes) {
        if (dl_data_type_of(d) == t) {
            return d;
        }
    }
    return std::nullopt;
}

/// A DLPack data type for messages: "float32", "bfloat16", "uint8", "bool8", "float32x4" (four
/// lanes), "F8_E4M3 (code 10, 8-bit)" (a code of DLPack 1.1's 8-bit floats, by the element table's
/// name), "code 9 8-bit" (a code syncblob does not name).
[[nodiscard]] inline std::string dtype_string(DLDataType t) {
    constexpr const char* names[] = {"int", "uint", "float", "opaque", "bfloat", "complex", "bool"};
    std::string s;
    if (t.code < std::size(names)) {
        s = std::string(names[t.code]) + std::to_string(t.bits);
    } else if (const auto d = dtype_from(DLDataType{t.code, t.bits, 1})) {
        s = std::string(dtype_name(*d)) + " (code " + std::to_string(t.code) + ", " + std::to_string(t.bits) + "-bit)";
    } else {
        s = "code " + std::to_string(t.code) + " " + std::to_string(t.bits) + "-bit";
    }
    if (t.lanes != 1) {
        s += "x" + std::to_string(t.lanes);
    }
    return s;
}

/// A device type for messages: "CPU", "CUDA", "CUDAHost", … as the specification names them
/// without the `kDL` prefix, or the number.
[[nodiscard]] inline std::string device_type_string(DeviceType type) {
    switch (type) {
        case DeviceType::cpu:
            return "CPU";
        case DeviceType::cuda:
            return "CUDA";
        case DeviceType::cuda_host:
            return "CUDAHost";
        case DeviceType::opencl:
            return "OpenCL";
        case DeviceType::vulkan:
            return "Vulkan";
        case DeviceType::metal:
            return "Metal";
        case DeviceType::vpi:
            return "VPI";
        case DeviceType::rocm:
            return "ROCM";
        case DeviceType::rocm_host:
            return "ROCMHost";
        case DeviceType::ext_dev:
            return "ExtDev";
        case DeviceType::cuda_managed:
            return "CUDAManaged";
        case DeviceType::oneapi:
            return "OneAPI";
        case DeviceType::webgpu:
            return "WebGPU";
        case DeviceType::hexagon:
            return "Hexagon";
        case DeviceType::maia:
            return "MAIA";
        case DeviceType::trn:
            return "Trn";
    }
    return "device type " + std::to_string(static_cast<std::int32_t>(type));
}

}  // namespace dlpack

SYNCBLOB_END_NAMESPACE
