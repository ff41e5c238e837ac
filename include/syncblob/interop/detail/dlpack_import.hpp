// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The checks `dlpack::from_dlpack` makes of a producer's fields before it trusts them: the shape
/// and strides, the byte range that data, byte_offset and the extents describe, and the bytes of a
/// bool tensor. Each throws a typed error naming the field and the values.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "../../core/error.hpp"
#include "../../core/shape.hpp"
#include "../dlpack_abi.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace dlpack::detail {

inline constexpr const char* import_op = "dlpack::from_dlpack";

// The fields of a DLTensor declared by anyone, as syncblob's.
template <class Foreign>
DLTensor as_tensor(const Foreign& t) noexcept {
    DLTensor view{};
    view.data = t.data;
    view.device = DLDevice{static_cast<DeviceType>(static_cast<std::int32_t>(t.device.device_type)),
                           static_cast<std::int32_t>(t.device.device_id)};
    view.ndim = static_cast<std::int32_t>(t.ndim);
    view.dtype = DLDataType{static_cast<std::uint8_t>(t.dtype.code), static_cast<std::uint8_t>(t.dtype.bits),
                            static_cast<std::uint16_t>(t.dtype.lanes)};
    view.shape = t.shape;
    view.strides = t.strides;
    view.byte_offset = static_cast<std::uint64_t>(t.byte_offset);
    return view;
}

// "(2, 3, 4)"
inline std::string extents_string(const std::int64_t* values, std::int32_t n) {
    std::string s = "(";
    for (std::int32_t i = 0; i < n; ++i) {
        s += (i == 0 ? "" : ", ") + std::to_string(values[i]);
    }
    return s + ")";
}

// The tensor's shape, checked: rank, extents, and C-contiguous strides.
inline Shape import_shape(const DLTensor& t) {
    const std::string op = import_op;
    if (t.ndim < 0 || static_cast<std::size_t>(t.ndim) > Shape::max_axes) {
        throw ShapeError(op + ": ndim is " + std::to_string(t.ndim) + ", a blob has 0 to " +
                         std::to_string(Shape::max_axes) + " axes");
    }
    if (t.ndim > 0 && t.shape == nullptr) {
        throw FormatError(op + ": shape is null for a tensor of " + std::to_string(t.ndim) + " axes");
    }
    Shape shape;
    try {
        shape = Shape(std::span<const std::int64_t>(t.shape, static_cast<std::size_t>(t.ndim)));
    } catch (const ShapeError& e) {
        throw ShapeError(op + ": shape " + extents_string(t.shape, t.ndim) + ": " + e.what());
    }
    if (t.strides != nullptr && shape.count() != 0) {
        std::int64_t expected = 1;
        for (std::size_t i = shape.rank(); i-- > 0;) {
            if (shape[i] != 1 && t.strides[i] != expected) {
                throw ShapeError(op + ": strides " + extents_string(t.strides, t.ndim) + " of shape " +
                                 extents_string(t.shape, t.ndim) + " are not C-contiguous (axis " + std::to_string(i) +
                                 " has stride " + std::to_string(t.strides[i]) + " where " + std::to_string(expected) +
                                 " is needed); a blob imports only C-contiguous tensors, so make the tensor "
                                 "contiguous first");
            }
            expected *= shape[i];
        }
    }
    return shape;
}

// The address of the first element of a tensor of `count` (> 0) elements of `element_bytes`
// bytes each: `data + byte_offset`, once the whole byte range [data + byte_offset, ... + count *
// element_bytes) is known to be addressable. No pointer is formed before that (forming one past
// the address space is undefined behaviour, and reading it a crash).
// \throws ShapeError when the extents' bytes exceed the addressable size; FormatError when
// data + byte_offset + those bytes run past the end of the address space, or past PTRDIFF_MAX from data.
inline std::uintptr_t first_element(const DLTensor& t, std::int64_t count, std::size_t element_bytes) {
    const std::string op = import_op;
    const auto n = static_cast<std::uint64_t>(count);
    constexpr auto limit = static_cast<std::uint64_t>(PTRDIFF_MAX);
    if (n > limit / element_bytes) {
        throw ShapeError(op + ": " + std::to_string(count) + " elements of " + std::to_string(element_bytes) +
                         " bytes exceed the addressable size");
    }
    const std::uint64_t bytes = n * element_bytes;
    const auto base = reinterpret_cast<std::uintptr_t>(t.data);
    if (t.byte_offset > limit - bytes || base > UINTPTR_MAX - t.byte_offset - bytes) {
        throw FormatError(op + ": byte_offset " + std::to_string(t.byte_offset) + " with " + std::to_string(bytes) +
                          " bytes of elements runs past the end of the address space from data " +
                          std::to_string(base) + "; the tensor's fields are inconsistent");
    }
    return base + t.byte_offset;
}

// The index of the first byte of `bytes` that is neither 0 nor 1, or `bytes.size()` when there is none.
inline std::size_t first_non_bool(std::span<const unsigned char> bytes) noexcept {
    std::size_t i = 0;
    for (; i + 8 <= bytes.size(); i += 8) {  // eight at a time while they are all valid
        unsigned char any = 0;
        for (std::size_t k = 0; k < 8; ++k) {
            any = static_cast<unsigned char>(any | bytes[i + k]);
        }
        if ((any & 0xFE) != 0) {
            break;
        }
    }
    for (; i < bytes.size(); ++i) {
        if ((bytes[i] & 0xFE) != 0) {
            return i;
        }
    }
    return bytes.size();
}

// Throws FormatError when `bytes`, elements `first`... of a bool tensor, hold a byte other than 0 or 1.
inline void check_bool_bytes(std::span<const unsigned char> bytes, std::size_t first) {
    const std::size_t bad = first_non_bool(bytes);
    if (bad != bytes.size()) {
        throw FormatError(std::string(import_op) + ": element " + std::to_string(first + bad) +
                          " of a bool tensor holds the byte " + std::to_string(bytes[bad]) +
                          "; a bool is 0 or 1 (import the tensor as uint8 and compare with 0 to convert it)");
    }
}

}  // namespace dlpack::detail

SYNCBLOB_END_NAMESPACE
