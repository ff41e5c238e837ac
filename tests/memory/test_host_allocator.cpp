// SPDX-License-Identifier: BSD-2-Clause
// AlignedAllocator: every block aligned to 64 bytes and writable to its end, whatever its size, and
// small blocks made without leaving free fragments in the C library's heap.

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <syncblob/memory/host_allocator.hpp>

#include "sanitizers.hpp"

using syncblob::AlignedAllocator;
using syncblob::HostBlock;

TEST_CASE("AlignedAllocator: every size aligned to 64 bytes, writable to its end, freed as made", "[memory]") {
    std::vector<HostBlock> blocks;
    for (std::size_t bytes = 1; bytes <= 300; ++bytes) {
        blocks.push_back(AlignedAllocator::allocate(bytes));
    }
    constexpr std::size_t small_below = AlignedAllocator::small_below;  // each side of the two ways
    for (const std::size_t bytes :
         {std::size_t{4096}, small_below - 1, small_below, std::size_t{1} << 20, (std::size_t{33} << 20) + 3}) {
        blocks.push_back(AlignedAllocator::allocate(bytes));
    }
    for (const HostBlock& b : blocks) {
        REQUIRE(b.data != nullptr);
        CHECK(reinterpret_cast<std::uintptr_t>(b.data) % AlignedAllocator::alignment == 0);
        std::memset(b.data, 0xA5, b.bytes);  // ASan: every byte is the block's
    }
    for (const HostBlock& b : blocks) {
        AlignedAllocator::deallocate(b);  // ASan: each freed as it was made
    }
    const HostBlock empty = AlignedAllocator::allocate(0);
    CHECK(empty.data == nullptr);
    AlignedAllocator::deallocate(empty);
    CHECK_THROWS_AS(AlignedAllocator::allocate(SIZE_MAX - 8), std::bad_alloc);
}

// Where the C library's own allocator runs (not a sanitizer's): glibc's aligned allocation splits
// the block it finds and frees the pieces before and after the aligned one, which fill its fast
// bins; a later large request merges them one by one (with a million small blobs, a quarter of a
// load's time). AlignedAllocator asks for a plain block with room to align instead, under
// `small_below` bytes.
TEST_CASE("AlignedAllocator: small blocks leave no free fragments behind", "[memory]") {
#if defined(__GLIBC__) && !SYNCBLOB_TEST_ASAN && !SYNCBLOB_TEST_TSAN
    std::vector<HostBlock> blocks;
    blocks.reserve(4000);
    const struct mallinfo2 before = mallinfo2();
    for (std::size_t i = 0; i < 4000; ++i) {
        blocks.push_back(AlignedAllocator::allocate(1 + i % 60));
    }
    const struct mallinfo2 after = mallinfo2();
    for (const HostBlock& b : blocks) {
        AlignedAllocator::deallocate(b);
    }
    INFO("bytes in fast-bin fragments: " << before.fsmblks << " before, " << after.fsmblks << " after");
    INFO("free chunks: " << before.ordblks << " before, " << after.ordblks << " after");
    // Nothing was freed between the two counts: any new free fragment is the allocator's own.
    CHECK(after.fsmblks <= before.fsmblks);
    CHECK(after.ordblks <= before.ordblks);
#else
    WARN("skipped: a sanitizer's allocator, or not glibc's, replaces the heap this test reads");
#endif
}
