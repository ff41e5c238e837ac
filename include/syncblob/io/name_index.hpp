// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Internal, shared beyond its folder: used by the checkpoint loader (checkpoint/), so it sits outside
/// detail/; its names stay in a detail namespace and are no user API.
///
/// Finding names fast whatever names a file chooses: a table from a name to its position in a
/// sequence (open addressing), hashed with SipHash-1-3 under a key drawn at random once per
/// process. A fixed, public hash lets a file pick a million names that collide and turn every
/// lookup into a scan of them all; a keyed hash leaves it nothing to aim at. Insert and find
/// take constant expected time; the table is at most half full.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "../core/config.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace io::detail {

/// SipHash-1-3 (one compression round, three finalization rounds) of `bytes` under the key `k`.
[[nodiscard]] inline std::uint64_t siphash13(std::string_view bytes, const std::array<std::uint64_t, 2>& k) noexcept {
    std::uint64_t v0 = k[0] ^ 0x736f6d6570736575ULL;
    std::uint64_t v1 = k[1] ^ 0x646f72616e646f6dULL;
    std::uint64_t v2 = k[0] ^ 0x6c7967656e657261ULL;
    std::uint64_t v3 = k[1] ^ 0x7465646279746573ULL;
    const auto rotl = [](std::uint64_t x, int b) { return (x << b) | (x >> (64 - b)); };
    const auto round = [&] {
        v0 += v1;
        v1 = rotl(v1, 13) ^ v0;
        v0 = rotl(v0, 32);
        v2 += v3;
        v3 = rotl(v3, 16) ^ v2;
        v0 += v3;
        v3 = rotl(v3, 21) ^ v0;
        v2 += v1;
        v1 = rotl(v1, 17) ^ v2;
        v2 = rotl(v2, 32);
    };
    const auto load = [](const char* p, std::size_t n) {
        unsigned char b[8] = {};
        std::memcpy(b, p, n);
        std::uint64_t m = 0;
        for (int i = 7; i >= 0; --i) {
            m = (m << 8) | b[i];
        }
        return m;
    };
    std::size_t i = 0;
    for (; i + 8 <= bytes.size(); i += 8) {
        const std::uint64_t m = load(bytes.data() + i, 8);
        v3 ^= m;
        round();
        v0 ^= m;
    }
    const std::uint64_t last = load(bytes.data() + i, bytes.size() - i) | (std::uint64_t{bytes.size() & 0xFF} << 56);
    v3 ^= last;
    round();
    v0 ^= last;
    v2 ^= 0xFF;
    round();
    round();
    round();
    return v0 ^ v1 ^ v2 ^ v3;
}

/// The process's hash key, drawn from `std::random_device` at first use.
[[nodiscard]] inline const std::array<std::uint64_t, 2>& name_hash_key() {
    static const std::array<std::uint64_t, 2> key = [] {
        std::random_device device;
        std::array<std::uint64_t, 2> k{};
        for (auto& word : k) {
            word = (std::uint64_t{device()} << 32) ^ device();
        }
        return k;
    }();
    return key;
}

/// Positions 0, 1, 2, ... of a sequence of names, found by name. The names stay in the caller's
/// sequence: `build`, `insert` and `find` take a function that returns the name at a position. A
/// slot is 8 bytes (32 bits of the hash, the position), so a million names take 16 MiB.
class NameIndex {
public:
    static constexpr std::size_t npos = static_cast<std::size_t>(-1);
    /// The most positions an index holds.
    static constexpr std::size_t max_size = std::size_t{0xFFFFFFFE};

    /// Indexes positions [0, n) at once and returns the first position whose name an earlier one
    /// has (then the index is incomplete), or npos. Positions are placed in the order of their
    /// home slots, so building touches the table front to back: one pass over memory, however
    /// large the table, instead of a cache miss per name.
    template <class NameAt>
    std::size_t build(std::size_t n, NameAt&& name_at) {
        check_size(n);
        slots_.assign(slots_for(n), Slot{});
        count_ = 0;
        const std::size_t mask = slots_.size() - 1;
        std::vector<std::uint64_t> hashes(n);
        for (std::size_t i = 0; i < n; ++i) {
            hashes[i] = siphash13(name_at(i), name_hash_key());
        }
        // A counting sort of the positions by home slot, in groups of 16 slots (two cache lines).
        const std::size_t groups = slots_.size() / 16;
        std::vector<std::uint32_t> start(groups + 1, 0);
        for (const std::uint64_t h : hashes) {
            ++start[((h & mask) >> 4) + 1];
        }
        for (std::size_t g = 0; g < groups; ++g) {
            start[g + 1] += start[g];
        }
        std::vector<std::uint32_t> order(n);
        for (std::size_t i = 0; i < n; ++i) {
            order[start[(hashes[i] & mask) >> 4]++] = static_cast<std::uint32_t>(i);
        }
        for (const std::uint32_t i : order) {
            if (const std::size_t d = place(hashes[i], i, name_at(i), name_at); d != npos) {
                return std::max<std::size_t>(i, d);
            }
        }
        return npos;
    }

    /// Makes room for `n` names without growing.
    template <class NameAt>
    void reserve(std::size_t n, NameAt&& name_at) {
        check_size(n);
        if (slots_for(n) > slots_.size()) {
            rehash(slots_for(n), name_at);
        }
    }

    /// Adds `position`, whose name is `name`, unless a position with that name is there: then
    /// returns that one and adds nothing; returns npos when added.
    template <class NameAt>
    std::size_t insert(std::string_view name, std::size_t position, NameAt&& name_at) {
        reserve(count_ + 1, name_at);
        return place(siphash13(name, name_hash_key()), position, name, name_at);
    }

    /// The position whose name is `name`, or npos.
    template <class NameAt>
    [[nodiscard]] std::size_t find(std::string_view name, NameAt&& name_at) const {
        if (slots_.empty()) {
            return npos;
        }
        const std::uint64_t h = siphash13(name, name_hash_key());
        const auto tag = static_cast<std::uint32_t>(h >> 32);
        for (std::size_t s = static_cast<std::size_t>(h) & (slots_.size() - 1); slots_[s].position != 0;
             s = (s + 1) & (slots_.size() - 1)) {
            if (slots_[s].tag == tag && name_at(slots_[s].position - 1) == name) {
                return slots_[s].position - 1;
            }
        }
        return npos;
    }

    [[nodiscard]] std::size_t size() const noexcept { return count_; }

private:
    struct Slot {
        std::uint32_t tag = 0;       // the high half of the name's hash
        std::uint32_t position = 0;  // position + 1; 0: empty
    };

    static void check_size(std::size_t n) {
        if (n > max_size) {
            throw std::length_error("NameIndex: more than " + std::to_string(max_size) + " names");
        }
    }

    // A power of two at least twice n: the table is never more than half full.
    static std::size_t slots_for(std::size_t n) {
        std::size_t slots = 16;
        while (slots < 2 * n) {
            slots *= 2;
        }
        return slots;
    }

    // Puts `position` (hash h, name `name`) in the first free slot from its home, unless a slot on
    // the way holds the same name: then returns that slot's position.
    template <class NameAt>
    std::size_t place(std::uint64_t h, std::size_t position, std::string_view name, NameAt& name_at) {
        const auto tag = static_cast<std::uint32_t>(h >> 32);
        std::size_t s = static_cast<std::size_t>(h) & (slots_.size() - 1);
        for (; slots_[s].position != 0; s = (s + 1) & (slots_.size() - 1)) {
            if (slots_[s].tag == tag && name_at(slots_[s].position - 1) == name) {
                return slots_[s].position - 1;
            }
        }
        slots_[s] = {tag, static_cast<std::uint32_t>(position + 1)};
        ++count_;
        return npos;
    }

    template <class NameAt>
    void rehash(std::size_t slots, NameAt& name_at) {
        std::vector<Slot> old(slots, Slot{});
        old.swap(slots_);
        for (const Slot& e : old) {
            if (e.position != 0) {
                std::size_t s =
                    static_cast<std::size_t>(siphash13(name_at(e.position - 1), name_hash_key())) & (slots_.size() - 1);
                while (slots_[s].position != 0) {
                    s = (s + 1) & (slots_.size() - 1);
                }
                slots_[s] = e;
            }
        }
    }

    std::vector<Slot> slots_;
    std::size_t count_ = 0;
};

/// The positions 0..n-1 of the names `name_at(i)` in name order (bytes compared unsigned, as
/// `std::string`'s `<`; equal names keep no particular order). Each position is sorted beside the
/// eight bytes that follow the prefix every name shares, so most comparisons read only the array
/// being sorted; names whose eight bytes tie are compared whole. At a million names a comparison
/// through each name's own memory is a cache miss, and a sort makes twenty of them per name.
template <class NameAt>
[[nodiscard]] std::vector<std::size_t> name_order(std::size_t n, NameAt name_at) {
    std::size_t shared = n == 0 ? 0 : name_at(0).size();  // the prefix every name shares
    for (std::size_t i = 1; i < n && shared != 0; ++i) {
        const std::string_view first = name_at(0).substr(0, shared);
        const std::string_view name = name_at(i);
        const auto rest = std::min(first.size(), name.size());
        shared = static_cast<std::size_t>(
            std::mismatch(first.begin(), first.begin() + static_cast<std::ptrdiff_t>(rest), name.begin()).first -
            first.begin());
    }
    struct Key {
        std::uint64_t head;  // the eight bytes after the shared prefix, big-endian, zero-padded
        std::size_t position;
    };
    std::vector<Key> keys(n);
    for (std::size_t i = 0; i < n; ++i) {
        const std::string_view rest = name_at(i).substr(shared);
        std::uint64_t head = 0;
        for (std::size_t b = 0; b < 8; ++b) {
            head = (head << 8) | (b < rest.size() ? static_cast<unsigned char>(rest[b]) : 0U);
        }
        keys[i] = {head, i};
    }
    // Heads that differ order their names (a zero byte of padding only ever ties with a zero byte
    // of a name, or sorts a name before its own extensions, as `<` does); equal heads say nothing.
    std::sort(keys.begin(), keys.end(), [&](const Key& a, const Key& b) {
        if (a.head != b.head) {
            return a.head < b.head;
        }
        return name_at(a.position).substr(shared) < name_at(b.position).substr(shared);
    });
    std::vector<std::size_t> order(n);
    for (std::size_t i = 0; i < n; ++i) {
        order[i] = keys[i].position;
    }
    return order;
}

/// Puts the elements of `v` in the order `order` (a permutation of its positions, such as
/// name_order's): element `order[k]` becomes element k, moved once; nothing is compared.
/// \throws std::bad_alloc (`v` unchanged).
template <class E>
void apply_order(std::vector<E>& v, const std::vector<std::size_t>& order) {
    static_assert(std::is_nothrow_move_constructible_v<E>, "apply_order moves every element after its one allocation");
    std::vector<E> out;
    out.reserve(order.size());
    for (const std::size_t i : order) {
        out.push_back(std::move(v[i]));
    }
    v = std::move(out);
}

}  // namespace io::detail

SYNCBLOB_END_NAMESPACE
