// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// An nlohmann/json document built from the streaming reader's events (nlohmann's own parser with
/// a callback rescans an object at the end of each member that is an object: quadratic). An
/// object's members are collected as they come, then sorted by key (a radix sort of the keys'
/// first 8 bytes, then a comparison sort of keys that share them) and handed to the object's map
/// in order, so the map is built front to back instead of searched once per member; duplicate keys
/// (nlohmann would keep the last) are then neighbours and refused. For keys that differ in their
/// first 8 bytes the whole build is linear in the text. What is built is charged against a limit.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "../parse/json_reader.hpp"
#include "format_error.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace io::detail::json_io {

/// The reader's handler that builds the document.
class DomBuilder {
public:
    using json = nlohmann::json;

    /// `used`: bytes already charged (the text); `max_bytes`: the limit of the total.
    DomBuilder(std::string_view source, std::uint64_t used, std::uint64_t max_bytes)
        : source_(source), used_(used), max_bytes_(max_bytes) {}

    void begin_object(std::uint64_t) { open(true); }
    void begin_array(std::uint64_t) { open(false); }
    void end_array() { add(close()); }
    void end_object() {
        Frame& f = frames_[depth_ - 1];
        const std::vector<std::uint32_t> order = key_order(f.members);
        json object(json::value_t::object);
        auto& map = object.get_ref<json::object_t&>();
        for (std::size_t k = 0; k < order.size(); ++k) {
            Member& m = f.members[order[k]];
            if (!map.empty() && map.rbegin()->first == m.first) {  // sorted: a duplicate follows its twin
                io::throw_format_error(source_, "field \"" + m.first + "\"", "duplicate key");
            }
            map.emplace_hint(map.end(), std::move(m.first), std::move(m.second));
        }
        f.members.clear();
        (void)close();
        add(std::move(object));
    }
    void key(std::string_view key, std::uint64_t) {
        charge(key.size());
        frames_[depth_ - 1].key.assign(key);
    }
    void scalar(const parse::Scalar& v) {
        using parse::ScalarKind;
        switch (v.kind) {
            case ScalarKind::null:
                add(json());
                break;
            case ScalarKind::boolean:
                add(json(v.boolean));
                break;
            case ScalarKind::integer:
                add(json(v.integer));
                break;
            case ScalarKind::unsigned_integer:
                add(json(v.unsigned_integer));
                break;
            case ScalarKind::floating:
                add(json(v.floating));
                break;
            case ScalarKind::string:
                charge(v.text.size());
                add(json(std::string(v.text)));
                break;
        }
    }

    [[nodiscard]] json take() { return std::move(root_); }

private:
    using Member = std::pair<std::string, json>;

    // An open container: an array's values, or an object's members (in text order until it
    // closes) and the key of the member whose value comes next. (Its implicit noexcept move runs
    // nlohmann::json's, whose invariant check clang-tidy cannot prove does not throw.)
    struct Frame {  // NOLINT(bugprone-exception-escape)
        bool object = false;
        json array;
        std::vector<Member> members;
        std::string key;
    };

    // The first 8 bytes of a key as a number that orders as the keys do (big-endian, 0-padded).
    static std::uint64_t key_prefix(const std::string& key) noexcept {
        std::uint64_t v = 0;
        for (std::size_t i = 0; i < 8; ++i) {
            v = (v << 8) | (i < key.size() ? static_cast<unsigned char>(key[i]) : 0u);
        }
        return v;
    }

    // The positions of `members` in key order: a radix sort of the key prefixes (one counting
    // pass per byte in which they differ), then a comparison sort of each run of equal prefixes.
    static std::vector<std::uint32_t> key_order(const std::vector<Member>& members) {
        using Item = std::pair<std::uint64_t, std::uint32_t>;
        const std::size_t n = members.size();
        std::vector<Item> a(n);
        for (std::size_t i = 0; i < n; ++i) {
            a[i] = {key_prefix(members[i].first), static_cast<std::uint32_t>(i)};
        }
        if (n <= 64) {
            std::sort(a.begin(), a.end());
        } else {
            std::vector<Item> b(n);
            for (int shift = 0; shift < 64; shift += 8) {
                std::size_t start[257] = {};
                for (const Item& e : a) {
                    ++start[((e.first >> shift) & 0xFF) + 1];
                }
                if (std::find(std::begin(start), std::end(start), n) != std::end(start)) {
                    continue;  // every prefix has the same byte here
                }
                for (std::size_t d = 0; d < 256; ++d) {
                    start[d + 1] += start[d];
                }
                for (const Item& e : a) {
                    b[start[(e.first >> shift) & 0xFF]++] = e;
                }
                a.swap(b);
            }
        }
        for (std::size_t i = 0; i < n;) {
            std::size_t j = i + 1;
            while (j < n && a[j].first == a[i].first) {
                ++j;
            }
            if (j - i > 1) {
                std::sort(
                    a.begin() + static_cast<std::ptrdiff_t>(i), a.begin() + static_cast<std::ptrdiff_t>(j),
                    [&](const Item& x, const Item& y) { return members[x.second].first < members[y.second].first; });
            }
            i = j;
        }
        std::vector<std::uint32_t> order(n);
        for (std::size_t i = 0; i < n; ++i) {
            order[i] = a[i].second;
        }
        return order;
    }

    void open(bool object) {
        charge(sizeof(json));
        if (depth_ == frames_.size()) {
            frames_.emplace_back();
        }
        Frame& f = frames_[depth_++];
        f.object = object;
        f.array = object ? json() : json::array();
    }

    // Pops the innermost frame and returns its array (an object's map is built by end_object).
    json close() { return std::move(frames_[--depth_].array); }

    // Puts `value` where the next value goes: the root, the end of an array, or under the key.
    void add(json&& value) {
        charge(sizeof(json));
        if (depth_ == 0) {
            root_ = std::move(value);
            return;
        }
        Frame& f = frames_[depth_ - 1];
        if (f.object) {
            f.members.emplace_back(std::move(f.key), std::move(value));
        } else {
            f.array.push_back(std::move(value));
        }
    }

    void charge(std::uint64_t bytes) {
        used_ += bytes;
        if (used_ > max_bytes_) {
            io::throw_format_error(
                source_, "document",
                "parsing needs more than " + std::to_string(max_bytes_) + " bytes (LoadOptions::max_bytes)");
        }
    }

    std::string_view source_;
    std::uint64_t used_;
    std::uint64_t max_bytes_;
    json root_;
    std::vector<Frame> frames_;  // frames_[0, depth_) are open; the rest are kept for reuse
    std::size_t depth_ = 0;
};

}  // namespace io::detail::json_io

SYNCBLOB_END_NAMESPACE
