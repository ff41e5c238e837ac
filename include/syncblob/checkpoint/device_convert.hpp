// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Element conversion on the device during a checkpoint load: the customisation point
/// `DeviceConvert<Backend>` (specialised once per device backend, as `DeviceKernels` is for math:
/// SimulatedDevice's in `checkpoint/sim.hpp`, cuda::Device's in `checkpoint/cuda.cuh`), and which
/// conversions may run there at all. A load converts
/// on the device only what can never be refused (`always_exact`: BF16 or F16 into float, F32 into
/// double, an integer into a wider one…), so the device gives exactly what the one element
/// conversion of the host gives; a conversion that can refuse a value (F64 into F32, I64 into I32)
/// runs on the host while staging, where the refused element is reported by name and index.

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include "../core/element.hpp"
#include "../io/convert.hpp"
#include "../memory/device_backend.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace checkpoint::detail {
template <class>
inline constexpr bool always_false = false;

// The largest value of S (for a floating S, its largest finite one), as a double.
template <class S>
constexpr double largest() noexcept {
    if constexpr (std::integral<S>) {
        return static_cast<double>(std::numeric_limits<S>::max());
    } else {
        return syncblob::detail::as_double(syncblob::detail::largest_finite<S>());
    }
}
}  // namespace checkpoint::detail

namespace checkpoint {

/// True when every value of dtype `from` converts into a `To` without being refused by the one
/// element conversion (`syncblob::detail::convert_checked`): the same type; BOOL into anything; a floating or
/// integer type into a floating type whose range holds all its values (a floating target rounds,
/// which the conversion allows); an integer into an integer type whose range holds all its values.
template <Element To>
[[nodiscard]] constexpr bool always_exact(Dtype from) noexcept {
    return syncblob::detail::visit_dtype(from, []<class S>(std::type_identity<S>) {
        // One branch per kind of pair of types: equal bodies are equal verdicts, not a copy.
        // NOLINTBEGIN(bugprone-branch-clone)
        if constexpr (std::same_as<S, To> || std::same_as<S, bool>) {
            return true;
        } else if constexpr (std::same_as<To, bool>) {
            return false;
        } else if constexpr (std::floating_point<To> || syncblob::detail::FloatStorage<To>) {
            return detail::largest<S>() <= detail::largest<To>();
        } else if constexpr (std::integral<S>) {
            return std::in_range<To>(std::numeric_limits<S>::min()) && std::in_range<To>(std::numeric_limits<S>::max());
        } else {
            return false;  // a floating value into an integer type: fractions, NaN
        }
        // NOLINTEND(bugprone-branch-clone)
    });
}

}  // namespace checkpoint

namespace checkpoint::detail {
/// Whether a device load stages a tensor of dtype `from` raw and converts it into `T` by a kernel:
/// when the dtypes differ and the conversion can refuse nothing (BOOL, normalised on the host, aside).
template <Element T>
[[nodiscard]] constexpr bool converts_on_device(Dtype from) noexcept {
    return from != dtype_of<T> && from != Dtype::BOOL && always_exact<T>(from);
}
}  // namespace checkpoint::detail

namespace checkpoint {

/// Device conversion for backend `Backend`. Not defined for a backend whose header was not
/// included: a specialisation provides, for every element type `T`, a function that queues on
/// `stream` the conversion of `n` little-endian elements of dtype `from` at device address `src`
/// (256-byte aligned) into `dst` (device memory), by the one element conversion:
///
///     template <Element T>
///     static void convert(T* dst, Dtype from, const void* src, std::size_t n, stream_type stream);
///
/// The loader calls it only for conversions `always_exact` allows, from dtypes other than BOOL.
template <DeviceBackend Backend>
struct DeviceConvert {
    static_assert(detail::always_false<Backend>,
                  "syncblob: no device conversion for this backend. For cuda::Device, #include "
                  "<syncblob/checkpoint/cuda.cuh> from a .cu file (target syncblob::cuda); SimulatedDevice's "
                  "(<syncblob/checkpoint/sim.hpp>) comes with the loader.");
};

}  // namespace checkpoint

SYNCBLOB_END_NAMESPACE
