// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// An nlohmann/json document built from the streaming reader's events, in time linear in the
/// text (nlohmann's own parser with a callback rescans an object at the end of each member that
/// is an object: quadratic), refusing duplicate keys (nlohmann would keep the last) and charging
/// what it builds against a byte limit.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "format_error.hpp"
#include "json_reader.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace detail::json_io {

/// The reader's handler that builds the document.
class DomBuilder {
public:
    using json = nlohmann::json;

    /// `used`: bytes already charged (the text); `max_bytes`: the limit of the total.
    DomBuilder(std::string_view source, std::uint64_t used, std::uint64_t max_bytes)
        : source_(source), used_(used), max_bytes_(max_bytes) {}

    void begin_object(std::uint64_t) { stack_.push_back(place(json::object())); }
    void begin_array(std::uint64_t) { stack_.push_back(place(json::array())); }
    void end_object() { stack_.pop_back(); }
    void end_array() { stack_.pop_back(); }
    void key(std::string_view key, std::uint64_t) {
        charge(key.size());
        key_.assign(key);
        if (stack_.back()->contains(key_)) {
            io::throw_format_error(source_, "field \"" + key_ + "\"", "duplicate key");
        }
    }
    void scalar(const json_stream::Scalar& v) {
        using json_stream::ScalarKind;
        switch (v.kind) {
            case ScalarKind::null:
                (void)place(json());
                break;
            case ScalarKind::boolean:
                (void)place(json(v.boolean));
                break;
            case ScalarKind::integer:
                (void)place(json(v.integer));
                break;
            case ScalarKind::unsigned_integer:
                (void)place(json(v.unsigned_integer));
                break;
            case ScalarKind::floating:
                (void)place(json(v.floating));
                break;
            case ScalarKind::string:
                charge(v.text.size());
                (void)place(json(std::string(v.text)));
                break;
        }
    }

    [[nodiscard]] json take() { return std::move(root_); }

private:
    // Puts `value` where the next value goes (the root, the end of an array, or under the last key).
    json* place(json&& value) {
        charge(sizeof(json));
        if (stack_.empty()) {
            root_ = std::move(value);
            return &root_;
        }
        json& parent = *stack_.back();
        if (parent.is_array()) {
            parent.push_back(std::move(value));
            return &parent.back();
        }
        return &(parent[key_] = std::move(value));
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
    std::vector<json*> stack_;  // the open containers; a parent never grows while a child is open
    std::string key_;
};

}  // namespace detail::json_io

SYNCBLOB_END_NAMESPACE
