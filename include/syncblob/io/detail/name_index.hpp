// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Finding names fast whatever names a file chooses: a table from a name to its position in a
/// sequence (open addressing), hashed with SipHash-1-3 under a key drawn at random once per
/// process. A fixed, public hash lets a file pick a million names that collide and turn every
/// lookup into a scan of them all; a keyed hash leaves it nothing to aim at. Insert and find
/// take constant expected time; the table holds two words per slot and at most half its slots.

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string_view>
#include <utility>
#include <vector>

#include "../../core/config.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace detail {

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
/// sequence: `insert` and `find` take a function that returns the name at a position.
class NameIndex {
public:
    static constexpr std::size_t npos = static_cast<std::size_t>(-1);

    /// Makes room for `n` names without growing.
    void reserve(std::size_t n) {
        std::size_t slots = 16;
        while (slots < 2 * n) {
            slots *= 2;
        }
        if (slots > slots_.size()) {
            rehash(slots);
        }
    }

    /// Adds `position`, whose name is `name`, unless a position with that name is there: then
    /// returns that one and adds nothing; returns npos when added.
    template <class NameAt>
    std::size_t insert(std::string_view name, std::size_t position, NameAt&& name_at) {
        if (2 * (count_ + 1) > slots_.size()) {
            rehash(slots_.empty() ? 16 : 2 * slots_.size());
        }
        const std::uint64_t h = siphash13(name, name_hash_key());
        std::size_t s = static_cast<std::size_t>(h) & (slots_.size() - 1);
        for (; slots_[s].position != npos; s = (s + 1) & (slots_.size() - 1)) {
            if (slots_[s].hash == h && name_at(slots_[s].position) == name) {
                return slots_[s].position;
            }
        }
        slots_[s] = {h, position};
        ++count_;
        return npos;
    }

    /// The position whose name is `name`, or npos.
    template <class NameAt>
    [[nodiscard]] std::size_t find(std::string_view name, NameAt&& name_at) const {
        if (slots_.empty()) {
            return npos;
        }
        const std::uint64_t h = siphash13(name, name_hash_key());
        for (std::size_t s = static_cast<std::size_t>(h) & (slots_.size() - 1); slots_[s].position != npos;
             s = (s + 1) & (slots_.size() - 1)) {
            if (slots_[s].hash == h && name_at(slots_[s].position) == name) {
                return slots_[s].position;
            }
        }
        return npos;
    }

    [[nodiscard]] std::size_t size() const noexcept { return count_; }

private:
    struct Slot {
        std::uint64_t hash = 0;
        std::size_t position = npos;
    };

    void rehash(std::size_t slots) {
        std::vector<Slot> old(slots, Slot{});
        old.swap(slots_);
        for (const Slot& e : old) {
            if (e.position != npos) {
                std::size_t s = static_cast<std::size_t>(e.hash) & (slots_.size() - 1);
                while (slots_[s].position != npos) {
                    s = (s + 1) & (slots_.size() - 1);
                }
                slots_[s] = e;
            }
        }
    }

    std::vector<Slot> slots_;
    std::size_t count_ = 0;
};

}  // namespace detail

SYNCBLOB_END_NAMESPACE
