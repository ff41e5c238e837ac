// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The bookkeeping of `PinnedPool`'s memory: segments obtained from its upstream allocator, the
/// blocks carved from them, and the free blocks by size for a best fit. Not thread-safe: the pool
/// holds its lock around every call.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "../host_allocator.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace detail {

/// Where a pool block is.
enum class BlockState : unsigned char {
    in_use,     ///< handed out
    pending,    ///< given back, waiting for device work that still uses it
    free,       ///< in a free set: can be handed out, split and merged
    abandoned,  ///< given back with no way to know when its work is done: never reused nor freed
};

/// Segments and the blocks carved from them. A segment is one block when it is obtained; a block
/// taken for a smaller request is split, the rest staying free as a block of its own; a block that
/// becomes free merges with the free blocks beside it in its segment. Blocks of `LargeFrom` bytes
/// and more come from other segments than smaller ones, so small blocks never split a large segment.
/// `Uses` is a vector of what gates a block's reuse (the pool's events); every block reserves room
/// for one, so recording a use when a block is given back does not allocate.
template <class Uses, std::size_t LargeFrom>
class PoolSegments {
public:
    struct Block;

private:
    struct FreeKey {  // by size, then address: the first block that fits is the best fit
        std::size_t size;
        Block* block;
        bool operator<(const FreeKey& o) const noexcept {
            return size != o.size ? size < o.size : std::less<Block*>{}(block, o.block);
        }
    };
    using FreeSet = std::set<FreeKey>;

public:
    struct Block {
        std::byte* data = nullptr;
        std::size_t size = 0;       // a multiple of the size classes' step
        std::size_t requested = 0;  // what the present owner asked for
        BlockState state = BlockState::in_use;
        HostBlock upstream{};    // the segment's, in its first block (prev == nullptr)
        std::uint32_t kind = 0;  // the segment's kind
        Block* prev = nullptr;   // the blocks beside it in its segment, by address
        Block* next = nullptr;
        std::uint64_t last_used = 0;       // when it was last given back, for eviction order
        typename FreeSet::node_type node;  // its node of the free set while it is not in it
        Uses uses;

        [[nodiscard]] bool whole_segment() const noexcept { return prev == nullptr && next == nullptr; }
        [[nodiscard]] bool contains(const void* p) const noexcept {
            const auto* q = static_cast<const std::byte*>(p);
            return std::less_equal<>{}(data, q) && std::less<>{}(q, data + size);
        }
    };

    /// Blocks there are (in every state).
    [[nodiscard]] std::size_t blocks() const noexcept { return index_.size(); }

    /// The block that starts at `p`, or null.
    [[nodiscard]] Block* find(const void* p) const noexcept {
        const auto it = index_.find(p);
        return it == index_.end() ? nullptr : it->second.get();
    }

    /// The block `p` points into, or null.
    [[nodiscard]] Block* containing(const void* p) const noexcept {
        auto it = index_.upper_bound(p);
        if (it == index_.begin()) {
            return nullptr;
        }
        Block* b = std::prev(it)->second.get();
        return b->contains(p) ? b : nullptr;
    }

    /// The smallest free block of at least `size` bytes among the blocks of `size`'s kind (small or
    /// large), or null.
    [[nodiscard]] Block* best_fit(std::size_t size) const noexcept {
        const FreeSet& free = free_set(size);
        const auto it = free.lower_bound(FreeKey{size, nullptr});
        return it == free.end() ? nullptr : it->block;
    }

    /// Takes free block `b` (from `best_fit(size)`) for a request of `size` bytes: what is left of
    /// it stays free as a block of its own. Allocates first; on failure nothing has changed.
    void take(Block& b, std::size_t size) {
        FreeSet& free = free_set(size);
        if (b.size > size) {
            auto rest = make_block();
            Block& r = *rest;
            r.data = b.data + size;
            index_.emplace(r.data, std::move(rest));  // the last step that can throw
            r.size = b.size - size;
            r.state = BlockState::free;
            r.last_used = b.last_used;
            r.kind = b.kind;
            r.prev = &b;
            r.next = b.next;
            if (b.next != nullptr) {
                b.next->prev = &r;
            }
            b.next = &r;
            r.node.value() = FreeKey{r.size, &r};
            free.insert(std::move(r.node));
        }
        b.node = free.extract(FreeKey{b.size, &b});
        b.size = size;
        b.state = BlockState::in_use;
        b.uses.clear();
    }

    /// Adds a segment the upstream allocator gave, as one block in use. On failure nothing has
    /// changed (and `fresh` is the caller's to free).
    Block& add_segment(HostBlock fresh, std::size_t size) {
        auto block = make_block();
        Block& b = *block;
        b.upstream = fresh;
        b.kind = fresh.kind;
        b.data = static_cast<std::byte*>(fresh.data);
        b.size = size;
        index_.emplace(b.data, std::move(block));
        return b;
    }

    /// Block `given` (not in a free set, its work done) becomes free, merged with the free blocks
    /// beside it.
    void make_free(Block& given) noexcept {
        FreeSet& free = free_set(given.size);
        Block* b = &given;
        b->uses.clear();
        b->state = BlockState::free;
        if (Block* next = b->next; next != nullptr && next->state == BlockState::free) {
            (void)free.extract(FreeKey{next->size, next});
            absorb(*b, *next);
        }
        if (Block* prev = b->prev; prev != nullptr && prev->state == BlockState::free) {
            prev->node = free.extract(FreeKey{prev->size, prev});
            absorb(*prev, *b);
            b = prev;
        }
        b->node.value() = FreeKey{b->size, b};
        free.insert(std::move(b->node));
    }

    /// Removes whole free segments, least recently used first, until at least `wanted` bytes are
    /// gone (fewer when there are not as many), handing each one's upstream block to `release`.
    /// Returns the bytes removed.
    template <class Release>
    std::size_t release_whole(std::size_t wanted, const Release& release) {
        if (wanted >= whole_free_bytes()) {  // all of them: no order to find, nothing to allocate
            std::size_t released = 0;
            for (FreeSet* free : {&small_, &large_}) {
                for (auto it = free->begin(); it != free->end();) {
                    Block* const b = it->block;
                    ++it;
                    if (b->whole_segment()) {
                        released += remove_whole(*b, release);
                    }
                }
            }
            return released;
        }
        std::vector<Block*> whole;
        for (FreeSet* free : {&small_, &large_}) {
            for (const FreeKey& k : *free) {
                if (k.block->whole_segment()) {
                    whole.push_back(k.block);
                }
            }
        }
        std::sort(whole.begin(), whole.end(),
                  [](const Block* a, const Block* b) { return a->last_used < b->last_used; });
        std::size_t released = 0;
        for (Block* b : whole) {
            if (released >= wanted) {
                break;
            }
            released += remove_whole(*b, release);
        }
        return released;
    }

    /// Bytes of whole free segments.
    [[nodiscard]] std::size_t whole_free_bytes() const noexcept {
        std::size_t bytes = 0;
        for (const FreeSet* free : {&small_, &large_}) {
            for (const FreeKey& k : *free) {
                bytes += k.block->whole_segment() ? k.size : 0;
            }
        }
        return bytes;
    }

private:
    FreeSet& free_set(std::size_t size) noexcept { return size < LargeFrom ? small_ : large_; }
    const FreeSet& free_set(std::size_t size) const noexcept { return size < LargeFrom ? small_ : large_; }

    // A block with its free-set node and room for one use, made before it is needed, so that giving
    // it back later allocates nothing.
    static std::unique_ptr<Block> make_block() {
        auto block = std::make_unique<Block>();
        FreeSet scratch;
        scratch.insert(FreeKey{0, nullptr});
        block->node = scratch.extract(scratch.begin());
        block->uses.reserve(1);
        return block;
    }

    // Removes whole free segment `b`, handing its upstream block to `release`; returns its size.
    template <class Release>
    std::size_t remove_whole(Block& b, const Release& release) {
        const std::size_t size = b.size;
        (void)free_set(size).extract(FreeKey{size, &b});
        release(b.upstream, size);
        index_.erase(b.data);
        return size;
    }

    // `into` takes over `next`, the block after it (out of the free set by now), which is destroyed.
    void absorb(Block& into, Block& next) noexcept {
        into.size += next.size;
        into.last_used = std::max(into.last_used, next.last_used);
        into.next = next.next;
        if (next.next != nullptr) {
            next.next->prev = &into;
        }
        index_.erase(next.data);
    }

    std::map<const void*, std::unique_ptr<Block>> index_;  // every block, by address
    FreeSet small_;                                        // free blocks of segments under LargeFrom
    FreeSet large_;
};

}  // namespace detail

SYNCBLOB_END_NAMESPACE
