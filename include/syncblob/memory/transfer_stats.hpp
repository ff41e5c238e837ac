// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// `TransferStats`: what a buffer allocated and copied, so tests and users see every copy.

#include <array>
#include <cstdint>
#include <ostream>

#include "../core/config.hpp"

SYNCBLOB_BEGIN_NAMESPACE

/// Counts of allocations, copies (and their bytes) in each direction, and math kernels run on each side.
struct TransferStats {
    std::uint64_t host_allocations = 0;        ///< owned host blocks allocated
    std::uint64_t device_allocations = 0;      ///< owned device blocks allocated
    std::uint64_t host_to_device = 0;          ///< H→D copies
    std::uint64_t host_to_device_bytes = 0;    ///< bytes copied H→D
    std::uint64_t device_to_host = 0;          ///< D→H copies
    std::uint64_t device_to_host_bytes = 0;    ///< bytes copied D→H
    std::uint64_t device_to_device = 0;        ///< D→D copies
    std::uint64_t device_to_device_bytes = 0;  ///< bytes copied D→D
    std::uint64_t host_to_host = 0;            ///< H→H copies (copy on write, copy_from on the host)
    std::uint64_t host_to_host_bytes = 0;      ///< bytes copied H→H
    /// Math kernels run on the host side (recorded by the math layer; without a lock, so math racing
    /// on one buffer from several threads may be undercounted).
    std::uint64_t host_kernels = 0;
    std::uint64_t device_kernels = 0;  ///< math kernels run on the device side (as host_kernels)

    /// Copies between host and device, both directions.
    [[nodiscard]] constexpr std::uint64_t transfers() const noexcept { return host_to_device + device_to_host; }

    /// Every counter, in declaration order.
    [[nodiscard]] static constexpr auto counters() noexcept {
        return std::array{&TransferStats::host_allocations, &TransferStats::device_allocations,
                          &TransferStats::host_to_device,   &TransferStats::host_to_device_bytes,
                          &TransferStats::device_to_host,   &TransferStats::device_to_host_bytes,
                          &TransferStats::device_to_device, &TransferStats::device_to_device_bytes,
                          &TransferStats::host_to_host,     &TransferStats::host_to_host_bytes,
                          &TransferStats::host_kernels,     &TransferStats::device_kernels};
    }

    constexpr TransferStats& operator+=(const TransferStats& o) noexcept {
        for (const auto counter : counters()) {
            this->*counter += o.*counter;
        }
        return *this;
    }

    friend constexpr TransferStats operator+(TransferStats a, const TransferStats& b) noexcept { return a += b; }
    friend constexpr bool operator==(const TransferStats&, const TransferStats&) = default;

    /// One line: "alloc h/d 1/1, H→D 1 (64 B), D→H 0 (0 B), D→D 0 (0 B), H→H 0 (0 B), kernels h/d 0/0".
    friend std::ostream& operator<<(std::ostream& os, const TransferStats& s) {
        return os << "alloc h/d " << s.host_allocations << '/' << s.device_allocations << ", H->D " << s.host_to_device
                  << " (" << s.host_to_device_bytes << " B), D->H " << s.device_to_host << " ("
                  << s.device_to_host_bytes << " B), D->D " << s.device_to_device << " (" << s.device_to_device_bytes
                  << " B), H->H " << s.host_to_host << " (" << s.host_to_host_bytes << " B), kernels h/d "
                  << s.host_kernels << '/' << s.device_kernels;
    }
};

static_assert(sizeof(TransferStats) == TransferStats::counters().size() * sizeof(std::uint64_t),
              "TransferStats::counters() names every counter");

namespace detail {

/// What a `SyncedBuffer` counts under its lock: every counter of `TransferStats` but the two
/// kernel counts, which the buffer keeps beside its hot members (SyncedBuffer::record_kernel).
struct CopyCounts {
    std::uint64_t host_allocations = 0;
    std::uint64_t device_allocations = 0;
    std::uint64_t host_to_device = 0;
    std::uint64_t host_to_device_bytes = 0;
    std::uint64_t device_to_host = 0;
    std::uint64_t device_to_host_bytes = 0;
    std::uint64_t device_to_device = 0;
    std::uint64_t device_to_device_bytes = 0;
    std::uint64_t host_to_host = 0;
    std::uint64_t host_to_host_bytes = 0;

    [[nodiscard]] TransferStats with_kernels(std::uint64_t host_kernels, std::uint64_t device_kernels) const noexcept {
        return {host_allocations, device_allocations,   host_to_device,   host_to_device_bytes,
                device_to_host,   device_to_host_bytes, device_to_device, device_to_device_bytes,
                host_to_host,     host_to_host_bytes,   host_kernels,     device_kernels};
    }
};

static_assert(sizeof(CopyCounts) + 2 * sizeof(std::uint64_t) == sizeof(TransferStats),
              "CopyCounts holds every counter of TransferStats but the kernels");

}  // namespace detail

SYNCBLOB_END_NAMESPACE
