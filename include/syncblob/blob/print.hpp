// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Printing a blob: its element type and shape, then its values (a large blob's first and last few).

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <span>

#include "../core/convert.hpp"
#include "../core/element.hpp"
#include "../memory/head.hpp"
#include "fwd.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace detail {

// One element as a reader expects it: 8-bit integers as numbers, bool as true/false, half,
// bfloat16 and the 8-bit floats as float.
template <Element T>
void print_value(std::ostream& os, T v) {
    if constexpr (FloatStorage<T>) {
        os << static_cast<float>(v);
    } else if constexpr (std::same_as<T, std::int8_t> || std::same_as<T, std::uint8_t>) {
        os << static_cast<int>(v);
    } else if constexpr (std::same_as<T, bool>) {
        os << (v ? "true" : "false");
    } else {
        os << v;
    }
}

// Where a device blob's data lives: ", device 0" once it has a device block, ", stream 3" on a
// stream other than the default (when the backend's streams print), ", async copy pending" while
// an asynchronous copy of data or diff has not been waited for. Read before the values are printed
// (printing them synchronises the data to the host).
template <class B>
void print_device_state(std::ostream& os, const B& b) {
    const auto& data = b.data_buffer();
    if (!data) {
        return;
    }
    if (const int device = data->device_id(); device >= 0) {
        os << ", device " << device;
    }
    using Stream = typename B::stream_type;
    if constexpr (requires(std::ostream & out, Stream s) { out << s; }) {
        if (!(b.stream() == B::device_backend::default_stream())) {
            os << ", stream " << b.stream();
        }
    }
    if (data->async_pending() || b.diff_buffer()->async_pending()) {
        os << ", async copy pending";
    }
}

}  // namespace detail

/// Blobs of at most this many elements print every value; larger ones print `print_edge_items`
/// values at each end with "..." between, as NumPy and PyTorch summarise large arrays.
inline constexpr std::size_t print_all_up_to = 64;
inline constexpr std::size_t print_edge_items = 3;

/// Prints "Blob<F32>(2 3 (6))", then the data values: all of them up to 64 elements,
/// "Blob<F32>(2 3 (6)) [0, 1, 2, 3, 4, 5]", and the first and last three of a larger blob,
/// "Blob<F32>(1000 (1000)) [0, 1, 2, ..., 997, 998, 999]" (8-bit integers as numbers, bool as
/// true/false, half, bfloat16 and the 8-bit floats as float). A blob with a device backend also
/// shows its device, stream and pending asynchronous copies: "Blob<F32>(2 3 (6), device 0, stream 3,
/// async copy pending)". Printing values synchronises the data to the host.
template <Element T, SyncedAllocator A>
std::ostream& operator<<(std::ostream& os, const Blob<T, A>& b) {
    os << "Blob<" << element_name<T>() << ">(" << b.shape_string();
    if constexpr (A::device_backend::has_device) {
        detail::print_device_state(os, b);
    }
    os << ')';
    if (b.count() > 0) {
        os << " [";
        // Data never touched reads as zeros: printed as such, nothing allocated for it.
        const bool untouched = b.data_head() == Head::uninitialized;
        const std::span<const T> values = untouched ? std::span<const T>{} : b.host_data();
        const auto n = static_cast<std::size_t>(b.count());
        const bool all = n <= print_all_up_to;
        for (std::size_t i = 0; i < n; ++i) {
            if (!all && i == print_edge_items) {
                os << ", ...";
                i = n - print_edge_items;
            }
            os << (i == 0 ? "" : ", ");
            detail::print_value(os, untouched ? T{} : values[i]);
        }
        os << ']';
    }
    return os;
}

SYNCBLOB_END_NAMESPACE
