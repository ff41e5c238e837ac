// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The `HostAllocator` policy and the default `AlignedAllocator`.

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
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
    /// Blocks under this size come from a plain `operator new` (see `allocate`); larger ones from
    /// the aligned form: a program makes few of them, so the pieces it frees beside each do not pile
    /// up, and from glibc's mapping threshold (128 KiB, rising to the largest mapped block freed)
    /// glibc maps each on its own and frees no piece.
    static constexpr std::size_t small_below = std::size_t{64} << 10;

    /// \throws std::bad_alloc when the memory is not available or `bytes` is absurd.
    [[nodiscard]] static HostBlock allocate(std::size_t bytes) {
        if (bytes == 0) {
            return {};
        }
        // The size with its room to align must not wrap (near SIZE_MAX it would, and a tiny block
        // come back), and sanitizers abort rather than throw on absurd sizes: refuse anything no
        // object can have.
        if (bytes > static_cast<std::size_t>(PTRDIFF_MAX) - alignment) {
            throw std::bad_alloc();
        }
        if (bytes >= small_below) {
            return {::operator new (bytes, std::align_val_t{alignment}), bytes, 0};
        }
        // A small block: a plain `operator new` with room to align, the block's distance from what
        // it returned (1 to 64 bytes) kept in the byte before the block. The aligned form (glibc's
        // memalign) splits each block it hands out from the heap and frees the pieces before and
        // after it, which fill glibc's fast bins with fragments that a later large request merges
        // one by one (a million one-element blobs loaded: a quarter of the load's time). `kind` is
        // left to the caller: wrappers mark their blocks there.
        auto* base = static_cast<std::byte*>(::operator new(bytes + alignment));
        const std::size_t offset = alignment - reinterpret_cast<std::uintptr_t>(base) % alignment;
        std::byte* data = base + offset;
        data[-1] = static_cast<std::byte>(offset);
        return {data, bytes, 0};
    }

    /// `HostBlock::kind` of a block from `allocate_zeroed`: this bit, with the block's offset from
    /// what `std::calloc` returned in the bits below it.
    static constexpr std::uint32_t zeroed = 0x1000;

    /// Blocks from this size on come zeroed from `std::calloc`, which takes them from fresh pages
    /// (glibc maps every block of 32 MiB or more on its own).
    static constexpr std::size_t fresh_pages_from = std::size_t{32} << 20;

    /// `bytes` of zeros. A block of `fresh_pages_from` bytes or more comes from fresh pages the
    /// system zeroes when they are first touched, so nothing is written now and no page is touched
    /// twice; a smaller one is `allocate`d and filled (it may be memory the program used before,
    /// already in the caches). \throws std::bad_alloc as `allocate`.
    [[nodiscard]] static HostBlock allocate_zeroed(std::size_t bytes) {
        if (bytes < fresh_pages_from) {
            HostBlock block = allocate(bytes);
            if (block.data != nullptr) {
                std::memset(block.data, 0, bytes);
            }
            return block;
        }
        if (bytes > static_cast<std::size_t>(PTRDIFF_MAX) - alignment) {
            throw std::bad_alloc();
        }
        void* base = std::calloc(bytes + alignment - 1, 1);
        if (base == nullptr) {
            throw std::bad_alloc();
        }
        const auto offset = (alignment - reinterpret_cast<std::uintptr_t>(base) % alignment) % alignment;
        return {static_cast<std::byte*>(base) + offset, bytes, zeroed | static_cast<std::uint32_t>(offset)};
    }

    static void deallocate(HostBlock block) noexcept {
        if (block.data == nullptr) {
            return;
        }
        auto* data = static_cast<std::byte*>(block.data);
        if ((block.kind & zeroed) != 0) {
            std::free(data - (block.kind & (zeroed - 1)));
        } else if (block.bytes >= small_below) {
            ::operator delete (data, std::align_val_t{alignment});
        } else {
            ::operator delete(data - std::to_integer<std::size_t>(data[-1]));
        }
    }
};

static_assert(HostAllocator<AlignedAllocator>);

/// A host allocator that can also hand out memory already zero (`allocate_zeroed(bytes)`, freed by
/// `deallocate` like any other block) more cheaply than allocating and filling it.
template <class A>
concept ZeroingHostAllocator = HostAllocator<A> && requires(std::size_t bytes) {
    { A::allocate_zeroed(bytes) } -> std::same_as<HostBlock>;
};

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
