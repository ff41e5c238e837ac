// SPDX-License-Identifier: BSD-2-Clause
#pragma once
// CountingHost<Base>: a host allocator that wraps another, counts what it hands out and takes back,
// fills fresh blocks with garbage (so a missing zero-fill shows) and can fail the k-th allocation.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <string_view>

#include <syncblob/memory/host_allocator.hpp>

namespace syncblob_test {

/// The byte a fresh CountingHost block is filled with.
inline constexpr unsigned char host_garbage_byte = 0xA5;

template <syncblob::HostAllocator Base>
struct CountingHost {
    static constexpr std::string_view name = "CountingHost";

    struct Counters {
        std::atomic<std::uint64_t> calls{0};          // allocate() calls, failed ones included
        std::atomic<std::uint64_t> allocations{0};    // non-empty blocks handed out
        std::atomic<std::uint64_t> deallocations{0};  // non-empty blocks taken back
        std::atomic<std::uint64_t> fail_at{0};        // fail the call with this number (1-based); 0: never
    };

    static Counters& counters() {
        static Counters c;
        return c;
    }

    /// Blocks handed out and not yet returned.
    static std::uint64_t live() { return counters().allocations.load() - counters().deallocations.load(); }

    [[nodiscard]] static syncblob::HostBlock allocate(std::size_t bytes) {
        auto& c = counters();
        const std::uint64_t call = ++c.calls;
        if (c.fail_at.load() != 0 && call == c.fail_at.load()) {
            throw std::bad_alloc();
        }
        syncblob::HostBlock block = Base::allocate(bytes);
        if (block.data != nullptr) {
            ++c.allocations;
            std::memset(block.data, host_garbage_byte, bytes);
        }
        return block;
    }

    static void deallocate(syncblob::HostBlock block) noexcept {
        if (block.data != nullptr) {
            ++counters().deallocations;
        }
        Base::deallocate(block);
    }
};

/// Makes the `k`-th host allocation from now on (1-based) fail, for its lifetime.
template <class Counting>
class FailHostAllocation {
public:
    explicit FailHostAllocation(std::uint64_t k) {
        auto& c = Counting::counters();
        c.fail_at = k == 0 ? 0 : c.calls.load() + k;
    }
    ~FailHostAllocation() { Counting::counters().fail_at = 0; }
    FailHostAllocation(const FailHostAllocation&) = delete;
    FailHostAllocation& operator=(const FailHostAllocation&) = delete;
};

}  // namespace syncblob_test
