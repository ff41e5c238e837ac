// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// A streaming JSON reader (RFC 8259) for every JSON text syncblob reads: blob documents and
/// safetensors headers. It reads its input once, front to back, and reports what it finds to a
/// handler as events (`begin_object`, `key`, `end_object`, `begin_array`, `end_array`, `scalar`).
/// Work is linear in the input and memory is bounded whatever the input holds: the reader keeps
/// only the current string (at most `JsonLimits::max_string` bytes), the current number (at most
/// `json_max_number` characters) and one byte per open container (at most `max_depth`). Whitespace,
/// however long, costs nothing. Every error is a `FormatError` naming the byte offset and what was
/// expected there. Strings must be valid UTF-8 (what serde_json, the safetensors reference, and
/// nlohmann/json require too).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "../detail/format_error.hpp"
#include "json_input.hpp"
#include "json_lexer.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace io::parse {

/// Reads one JSON value (and only whitespace after it) from `Input`, reporting it to `Handler`.
/// `where` prefixes byte offsets in messages ("byte", "header byte") and `base` is added to them.
template <class Input, class Handler>
class JsonReader {
public:
    JsonReader(Input& in, Handler& handler, JsonLimits limits, std::string_view source, std::string_view where,
               std::uint64_t base = 0)
        : in_(in), handler_(handler), limits_(limits), lexer_(in, limits.max_string, source, where, base) {}

    void read() {
        if (limits_.allow_bom) {
            skip_bom();
        }
        for (;;) {
            if (value()) {  // a container was opened: read its first member
                continue;
            }
            while (after_value()) {
            }
            if (stack_.empty()) {
                return;
            }
        }
    }

private:
    void skip_bom() {
        if (in_.peek() == 0xEF) {
            const std::string_view run = in_.run(3);
            if (run.size() >= 3 && run.substr(0, 3) == "\xEF\xBB\xBF") {
                in_.skip(3);
            }
        }
    }

    void skip_space() {
        for (;;) {
            const std::string_view run = in_.run(1);
            std::size_t n = 0;
            while (n < run.size() && (run[n] == ' ' || run[n] == '\n' || run[n] == '\r' || run[n] == '\t')) {
                ++n;
            }
            in_.skip(n);
            if (n < run.size() || run.empty()) {
                return;
            }
        }
    }

    // Reads a value; true when it opened a non-empty container (its first member comes next).
    bool value() {
        skip_space();
        const int c = in_.peek();
        const std::uint64_t at = in_.offset();
        if (c != '{' && c != '[') {
            scalar(c, at);
            return false;
        }
        if (stack_.size() >= limits_.max_depth) {
            fail(at, "nested deeper than " + std::to_string(limits_.max_depth) + " levels");
        }
        in_.skip(1);
        const bool object = c == '{';
        object ? handler_.begin_object(at) : handler_.begin_array(at);
        skip_space();
        if (in_.peek() == (object ? '}' : ']')) {
            in_.skip(1);
            object ? handler_.end_object() : handler_.end_array();
            return false;
        }
        stack_.push_back(object);
        if (object) {
            member_key();
        }
        return true;
    }

    // After a value: true when it closed a container (and another "after a value" follows), false
    // when a next member follows or the document is complete (the stack is empty).
    bool after_value() {
        skip_space();
        const int c = in_.peek();
        if (stack_.empty()) {
            if (c >= 0) {
                fail(in_.offset(), "expected the end of the input after the value, found " + describe(c));
            }
            return false;
        }
        const bool object = stack_.back();
        if (c == ',') {
            in_.skip(1);
            if (object) {
                member_key();
            }
            return false;
        }
        if (c == (object ? '}' : ']')) {
            in_.skip(1);
            stack_.pop_back();
            object ? handler_.end_object() : handler_.end_array();
            return true;
        }
        fail(in_.offset(), object ? "expected ',' or '}' after an object member, found " + describe(c)
                                  : "expected ',' or ']' after an array element, found " + describe(c));
    }

    void member_key() {
        skip_space();
        const std::uint64_t at = in_.offset();
        if (in_.peek() != '"') {
            fail(at, "expected a string key, found " + describe(in_.peek()));
        }
        handler_.key(lexer_.string(at), at);
        skip_space();
        if (in_.peek() != ':') {
            fail(in_.offset(), "expected ':' after an object key, found " + describe(in_.peek()));
        }
        in_.skip(1);
    }

    void scalar(int c, std::uint64_t at) {
        Scalar s;
        s.offset = at;
        if (c == '"') {
            s.kind = ScalarKind::string;
            s.text = lexer_.string(at);
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            lexer_.number(at, s);
        } else if (c == 't' || c == 'f' || c == 'n') {
            const std::string_view word = c == 't' ? "true" : c == 'f' ? "false" : "null";
            for (const char w : word) {
                if (in_.peek() != static_cast<unsigned char>(w)) {
                    fail(at, "expected '" + std::string(word) + "'");
                }
                in_.skip(1);
            }
            s.kind = c == 'n' ? ScalarKind::null : ScalarKind::boolean;
            s.boolean = c == 't';
        } else {
            fail(at, "expected a value, found " + describe(c));
        }
        handler_.scalar(s);
    }

    [[noreturn]] void fail(std::uint64_t at, const std::string& what) const { lexer_.fail(at, what); }
    static std::string describe(int c) { return JsonLexer<Input>::describe(c); }

    Input& in_;
    Handler& handler_;
    JsonLimits limits_;
    JsonLexer<Input> lexer_;
    std::vector<bool> stack_;  // true: an object
};

/// Reads one JSON value from `in` into `handler` (see JsonReader).
template <class Input, class Handler>
void read_json(Input& in, Handler& handler, const JsonLimits& limits, std::string_view source,
               std::string_view where = "byte", std::uint64_t base = 0) {
    JsonReader<Input, Handler>(in, handler, limits, source, where, base).read();
}

}  // namespace io::parse

SYNCBLOB_END_NAMESPACE
