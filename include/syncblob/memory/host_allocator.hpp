// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The `HostAllocator` policy and the default `AlignedAllocator`.

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <new>
#include <string_view>

#include "../core/config.hpp"
#include "device_backend.hpp"

SYNCBLOB_BEGIN_NAMESPACE

/// A block of host memory as an allocator handed it out. `kind` is the allocator's own
/// record of how the block was obtained (pinned or pageable, say), so it is freed the same way.
struct HostBlock {
    void* data = nullptr;
    std::size_t bytes = 0;
    std::uint32_t kind = 0;
};

/// A host allocation policy: static `allocate(bytes) -> HostBlock` (throws `std::bad_alloc` on
/// failure; a zero-byte request may return an empty block) and `deallocate(HostBlock) noexcept`.
template <class A>
concept HostAllocator = requires(std::size_t bytes, HostBlock block) {
    { A::name } -> std::convertible_to<std::string_view>;
    { A::allocate(bytes) } -> std::same_as<HostBlock>;
    { A::deallocate(block) }
    noexcept;
};

/// Host memory aligned to 64 bytes (a cache line, and an AVX-512 vector), from `operator new`.
struct AlignedAllocator {
    static constexpr std::string_view name = "AlignedAllocator";
    static constexpr std::size_t alignment = 64;

    /// \throws std::bad_alloc when the memory is not available or `bytes` is absurd.
    [[nodiscard]] static HostBlock allocate(std::size_t bytes) {
        if (bytes == 0) {
            return {};
        }
        // Aligned operator new rounds the size up to the alignment, which wraps for sizes near
        // SIZE_MAX (libstdc++ then hands out a tiny block), and sanitizers abort rather than throw
        // on absurd sizes: refuse anything no object can have.
        if (bytes > static_cast<std::size_t>(PTRDIFF_MAX) - alignment) {
            throw std::bad_alloc();
        }
        return {::operator new (bytes, std::align_val_t{alignment}), bytes, 0};
    }

    static void deallocate(HostBlock block) noexcept {
        if (block.data != nullptr) {
            ::operator delete (block.data, std::align_val_t{alignment});
        }
    }
};

static_assert(HostAllocator<AlignedAllocator>);

/// A host allocator that also takes a block back "after the work issued so far on `stream`"
/// (`deallocate(block, stream)`) and learns of other streams that use a block (`record_use`), so
/// it hands the block out again only when that work is done instead of making the caller wait.
template <class A, class Device>
concept StreamAwareHostAllocator = HostAllocator<A> && DeviceBackend<Device> &&
    requires(HostBlock block, const void* p, typename Device::stream_type stream) {
    { A::deallocate(block, stream) }
    noexcept;
    A::record_use(p, stream);
};

SYNCBLOB_END_NAMESPACE
