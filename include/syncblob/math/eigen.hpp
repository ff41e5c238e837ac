// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Eigen views of a blob's host memory (target `syncblob::eigen`), without copying.
///
/// Each view is obtained through the matching Blob accessor, so the state machine stays right:
/// `data_vector` / `data_matrix` call `host_data()` (copying from the device if the host is stale),
/// `mutable_data_vector` / `mutable_data_matrix` call `mutable_host_data()` (the device copy becomes
/// stale), and the same four for diff. A view is valid until the next access that moves the head.
///
/// The maps are unaligned (memory borrowed with `set_host_data` may have any alignment; on AVX
/// hardware an unaligned load of aligned memory costs the same). `with_alignment(map, f)` calls `f`
/// with an `Eigen::Aligned64` map of the same memory when it is 64-byte aligned (owned memory
/// always is) and with the unaligned map otherwise, for code that wants Eigen's aligned paths.
///
/// half and bfloat16 map as `Eigen::half` / `Eigen::bfloat16` (bit-identical; checked at compile time).

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include <Eigen/Core>

#include "../blob/blob.hpp"
#include "../core/element.hpp"
#include "../core/error.hpp"
#include "../core/shape.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace detail {
template <class T>
struct eigen_scalar {
    using type = T;
};
template <>
struct eigen_scalar<half> {
    using type = Eigen::half;
};
template <>
struct eigen_scalar<bfloat16> {
    using type = Eigen::bfloat16;
};
}  // namespace detail

static_assert(sizeof(Eigen::half) == sizeof(half) && alignof(Eigen::half) == alignof(half) &&
                  std::is_trivially_copyable_v<Eigen::half> && std::is_standard_layout_v<Eigen::half>,
              "syncblob::half must be bit-identical to Eigen::half");
static_assert(sizeof(Eigen::bfloat16) == sizeof(bfloat16) && alignof(Eigen::bfloat16) == alignof(bfloat16) &&
                  std::is_trivially_copyable_v<Eigen::bfloat16> && std::is_standard_layout_v<Eigen::bfloat16>,
              "syncblob::bfloat16 must be bit-identical to Eigen::bfloat16");

/// Eigen's scalar for a syncblob element type: `T`, or Eigen::half / Eigen::bfloat16.
template <Element T>
using eigen_scalar_t = typename detail::eigen_scalar<T>::type;

/// A column vector view of `count()` elements.
template <Element T>
using EigenVectorMap = Eigen::Map<Eigen::Matrix<eigen_scalar_t<T>, Eigen::Dynamic, 1>, Eigen::Unaligned>;
template <Element T>
using ConstEigenVectorMap = Eigen::Map<const Eigen::Matrix<eigen_scalar_t<T>, Eigen::Dynamic, 1>, Eigen::Unaligned>;
/// A row-major matrix view.
template <Element T>
using EigenRowMajorMatrix = Eigen::Matrix<eigen_scalar_t<T>, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <Element T>
using EigenMatrixMap = Eigen::Map<EigenRowMajorMatrix<T>, Eigen::Unaligned>;
template <Element T>
using ConstEigenMatrixMap = Eigen::Map<const EigenRowMajorMatrix<T>, Eigen::Unaligned>;

namespace detail {

template <Element T>
auto* eigen_ptr(T* p) noexcept {
    return reinterpret_cast<eigen_scalar_t<T>*>(p);
}
template <Element T>
const auto* eigen_ptr(const T* p) noexcept {
    return reinterpret_cast<const eigen_scalar_t<T>*>(p);
}

// rows × cols of a matrix view: given, or (shape(0), count / shape(0)) for a blob with axes, (1, count) otherwise.
template <Element T, SyncedAllocator A>
std::pair<std::int64_t, std::int64_t> matrix_extents(const char* op, const Blob<T, A>& blob, std::int64_t rows,
                                                     std::int64_t cols) {
    if (rows < 0 && cols < 0) {
        rows = blob.num_axes() == 0 ? 1 : blob.shape(0);
        cols = rows == 0 ? 0 : blob.count() / rows;
    }
    const auto covered = rows < 0 || cols < 0 ? std::nullopt : multiply_extents(rows, cols);
    if (!covered || *covered != blob.count()) {
        throw ShapeError(std::string(op) + ": a " + std::to_string(rows) + " x " + std::to_string(cols) +
                         " view does not cover blob " + blob.shape_string());
    }
    return {rows, cols};
}

}  // namespace detail

// ---- vectors --------------------------------------------------------------------------------------

/// The data as a const vector (through `host_data()`).
template <Element T, SyncedAllocator A>
[[nodiscard]] ConstEigenVectorMap<T> data_vector(const Blob<T, A>& blob) {
    const auto s = blob.host_data();
    return ConstEigenVectorMap<T>(detail::eigen_ptr(s.data()), static_cast<Eigen::Index>(s.size()));
}
/// The data as a mutable vector (through `mutable_host_data()`).
template <Element T, SyncedAllocator A>
[[nodiscard]] EigenVectorMap<T> mutable_data_vector(Blob<T, A>& blob) {
    const auto s = blob.mutable_host_data();
    return EigenVectorMap<T>(detail::eigen_ptr(s.data()), static_cast<Eigen::Index>(s.size()));
}
/// The diff as a const vector (through `host_diff()`).
template <Element T, SyncedAllocator A>
[[nodiscard]] ConstEigenVectorMap<T> diff_vector(const Blob<T, A>& blob) {
    const auto s = blob.host_diff();
    return ConstEigenVectorMap<T>(detail::eigen_ptr(s.data()), static_cast<Eigen::Index>(s.size()));
}
/// The diff as a mutable vector (through `mutable_host_diff()`).
template <Element T, SyncedAllocator A>
[[nodiscard]] EigenVectorMap<T> mutable_diff_vector(Blob<T, A>& blob) {
    const auto s = blob.mutable_host_diff();
    return EigenVectorMap<T>(detail::eigen_ptr(s.data()), static_cast<Eigen::Index>(s.size()));
}

// ---- row-major matrices ---------------------------------------------------------------------------
// Without extents: shape(0) rows of count / shape(0) columns (1 × count for a scalar).
// \throws ShapeError when rows × cols is not count(); the blob is then not accessed.

template <Element T, SyncedAllocator A>
[[nodiscard]] ConstEigenMatrixMap<T> data_matrix(const Blob<T, A>& blob, std::int64_t rows = -1,
                                                 std::int64_t cols = -1) {
    const auto [r, c] = detail::matrix_extents("data_matrix", blob, rows, cols);
    return ConstEigenMatrixMap<T>(detail::eigen_ptr(blob.host_data().data()), r, c);
}
template <Element T, SyncedAllocator A>
[[nodiscard]] EigenMatrixMap<T> mutable_data_matrix(Blob<T, A>& blob, std::int64_t rows = -1, std::int64_t cols = -1) {
    const auto [r, c] = detail::matrix_extents("mutable_data_matrix", blob, rows, cols);
    return EigenMatrixMap<T>(detail::eigen_ptr(blob.mutable_host_data().data()), r, c);
}
template <Element T, SyncedAllocator A>
[[nodiscard]] ConstEigenMatrixMap<T> diff_matrix(const Blob<T, A>& blob, std::int64_t rows = -1,
                                                 std::int64_t cols = -1) {
    const auto [r, c] = detail::matrix_extents("diff_matrix", blob, rows, cols);
    return ConstEigenMatrixMap<T>(detail::eigen_ptr(blob.host_diff().data()), r, c);
}
template <Element T, SyncedAllocator A>
[[nodiscard]] EigenMatrixMap<T> mutable_diff_matrix(Blob<T, A>& blob, std::int64_t rows = -1, std::int64_t cols = -1) {
    const auto [r, c] = detail::matrix_extents("mutable_diff_matrix", blob, rows, cols);
    return EigenMatrixMap<T>(detail::eigen_ptr(blob.mutable_host_diff().data()), r, c);
}

// ---- alignment ------------------------------------------------------------------------------------

/// True when `p` is 64-byte aligned (owned host memory always is; borrowed memory may not be).
[[nodiscard]] inline bool is_aligned64(const void* p) noexcept {
    return reinterpret_cast<std::uintptr_t>(p) % 64 == 0;
}

/// Calls `f` with an `Eigen::Aligned64` map of the same memory when `map.data()` is 64-byte aligned,
/// otherwise with `map` itself; returns what `f` returns (both calls must return the same type).
template <class PlainObject, class F>
decltype(auto) with_alignment(Eigen::Map<PlainObject, Eigen::Unaligned> map, F&& f) {
    if (is_aligned64(map.data())) {
        using Aligned = Eigen::Map<PlainObject, Eigen::Aligned64>;
        if constexpr (PlainObject::IsVectorAtCompileTime) {
            return std::forward<F>(f)(Aligned(map.data(), map.size()));
        } else {
            return std::forward<F>(f)(Aligned(map.data(), map.rows(), map.cols()));
        }
    }
    return std::forward<F>(f)(map);
}

SYNCBLOB_END_NAMESPACE
