// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The tokens of JSON text that carry values: strings (escapes decoded, UTF-8 checked as RFC 3629
/// requires: no overlong forms, no surrogates, nothing past U+10FFFF; unpaired surrogate escapes
/// refused) and numbers (RFC 8259's grammar; integers exactly when they fit 64 bits, other numbers
/// as the nearest double, a number beyond a double's range refused, one that underflows read as
/// zero, as strtod reads it). Used by `JsonReader`; every error is a `FormatError` naming the byte.

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <system_error>

#include "../detail/format_error.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace io::parse {

/// What a scalar JSON value is. Integers without a fraction or an exponent are `unsigned_integer`
/// when non-negative and `integer` when negative (as nlohmann/json reads them); other numbers and
/// integers beyond 64 bits are `floating`.
enum class ScalarKind : std::uint8_t { null, boolean, integer, unsigned_integer, floating, string };

/// One scalar value, valid until the reader moves on.
struct Scalar {
    ScalarKind kind = ScalarKind::null;
    bool boolean = false;
    std::int64_t integer = 0;
    std::uint64_t unsigned_integer = 0;
    double floating = 0;
    std::string_view text;     ///< a string's value, or a number's characters as written
    std::uint64_t offset = 0;  ///< of its first character

    [[nodiscard]] bool is_number() const noexcept {
        return kind == ScalarKind::integer || kind == ScalarKind::unsigned_integer || kind == ScalarKind::floating;
    }
    /// "null", "boolean", "number" or "string" (nlohmann's type names).
    [[nodiscard]] const char* type_name() const noexcept {
        return kind == ScalarKind::null      ? "null"
               : kind == ScalarKind::boolean ? "boolean"
               : is_number()                 ? "number"
                                             : "string";
    }
    /// The value as written: a number's characters (formatted from its value when `text` is
    /// empty), a quoted string, true, false or null; cut to about 40 characters.
    [[nodiscard]] std::string literal() const {
        std::string out;
        if (kind == ScalarKind::null || kind == ScalarKind::boolean) {
            return kind == ScalarKind::null ? "null" : boolean ? "true" : "false";
        }
        if (kind == ScalarKind::string) {
            out = "\"" + std::string(text.substr(0, 40)) + (text.size() > 40 ? "...\"" : "\"");
        } else if (!text.empty()) {
            out = std::string(text.substr(0, 40)) + (text.size() > 40 ? "..." : "");
        } else if (kind == ScalarKind::integer) {
            out = std::to_string(integer);
        } else if (kind == ScalarKind::unsigned_integer) {
            out = std::to_string(unsigned_integer);
        } else {
            char buf[32];
            out.assign(buf, std::to_chars(buf, buf + sizeof buf, floating).ptr);
        }
        return out;
    }
    /// "number 1.5", "string \"abc\"", "boolean true", "null".
    [[nodiscard]] std::string describe() const {
        return kind == ScalarKind::null ? "null" : std::string(type_name()) + " " + literal();
    }
};

/// The longest number accepted, in characters (a double needs at most 767 significant digits).
inline constexpr std::size_t json_max_number = 4096;

/// Limits of one read.
struct JsonLimits {
    std::size_t max_depth = 64;                                        ///< nested objects and arrays
    std::size_t max_string = std::numeric_limits<std::size_t>::max();  ///< bytes of one decoded string
    bool allow_bom = true;                                             ///< skip a leading UTF-8 byte order mark
};

/// Reads strings and numbers from `Input` (see json_input.hpp) and reports errors for a reader:
/// `where` prefixes byte offsets ("byte", "header byte") and `base` is added to them.
template <class Input>
class JsonLexer {
public:
    JsonLexer(Input& in, std::size_t max_string, std::string_view source, std::string_view where, std::uint64_t base)
        : in_(in), max_string_(max_string), source_(source), where_(where), base_(base) {}

    /// Throws FormatError("<source>: <where> <base + at>: not valid JSON: <what>").
    [[noreturn]] void fail(std::uint64_t at, const std::string& what) const {
        io::throw_format_error(source_, std::string(where_) + " " + std::to_string(base_ + at),
                               "not valid JSON: " + what);
    }

    /// A byte for messages: 'x', byte 0xNN, or the end of the input.
    static std::string describe(int c) {
        if (c < 0) {
            return "the end of the input";
        }
        if (c >= 0x20 && c < 0x7F) {
            return std::string("'") + static_cast<char>(c) + "'";
        }
        constexpr char hex[] = "0123456789abcdef";
        return std::string("byte 0x") + hex[(c >> 4) & 15] + hex[c & 15];
    }

    /// Reads a string (its opening quote is next); valid until the next string.
    std::string_view string(std::uint64_t at) {
        text_.clear();
        in_.skip(1);
        for (;;) {
            const std::string_view run = in_.run(1);
            std::size_t n = 0;
            while (n < run.size()) {
                const auto b = static_cast<unsigned char>(run[n]);
                if (b == '"' || b == '\\' || b < 0x20 || b >= 0x80) {
                    break;
                }
                ++n;
            }
            text_.append(run.data(), n);
            in_.skip(n);
            check_string_size(at);
            const int c = in_.peek();
            if (c < 0) {
                fail(at, "unterminated string");
            }
            if (c == '"') {
                in_.skip(1);
                return text_;
            }
            if (c == '\\') {
                escape();
            } else if (c < 0x20) {
                fail(in_.offset(), "control character " + describe(c) + " in a string (it must be escaped)");
            } else if (c >= 0x80) {
                utf8(c);
            }
        }
    }

    /// Reads a number (its first character is next) into `s`; its text is valid until the next number.
    void number(std::uint64_t at, Scalar& s) {
        number_.clear();
        number_start_ = at;
        const bool negative = in_.peek() == '-';
        if (negative) {
            take();
        }
        expect_digit(negative ? "after '-'" : "");
        if (in_.peek() == '0') {
            take();
        } else {
            take_digits();
        }
        bool integral = true;
        if (in_.peek() == '.') {
            take();
            expect_digit("after the decimal point");
            take_digits();
            integral = false;
        }
        if (in_.peek() == 'e' || in_.peek() == 'E') {
            take();
            if (in_.peek() == '+' || in_.peek() == '-') {
                take();
            }
            expect_digit("in the exponent");
            take_digits();
            integral = false;
        }
        s.text = number_;
        const char* first = number_.data();
        const char* last = first + number_.size();
        if (integral && negative && std::from_chars(first, last, s.integer).ec == std::errc{}) {
            s.kind = ScalarKind::integer;
            return;
        }
        if (integral && !negative && std::from_chars(first, last, s.unsigned_integer).ec == std::errc{}) {
            s.kind = ScalarKind::unsigned_integer;
            return;
        }
        s.kind = ScalarKind::floating;
        const auto r = std::from_chars(first, last, s.floating);
        if (r.ec == std::errc::result_out_of_range && decimal_magnitude(number_) < 0) {
            s.floating = negative ? -0.0 : 0.0;  // underflows to zero, as strtod rounds it
        } else if (r.ec != std::errc{} || r.ptr != last) {
            fail(at, "number " + std::string(number_.substr(0, 40)) + " is out of the range of a double");
        }
    }

private:
    void check_string_size(std::uint64_t at) const {
        if (text_.size() > max_string_) {
            fail(at, "a string longer than " + std::to_string(max_string_) + " bytes");
        }
    }

    void escape() {
        const std::uint64_t at = in_.offset();
        in_.skip(1);
        const int c = in_.peek();
        in_.skip(c < 0 ? 0 : 1);
        switch (c) {
            case '"':
            case '\\':
            case '/':
                text_.push_back(static_cast<char>(c));
                return;
            case 'b':
                text_.push_back('\b');
                return;
            case 'f':
                text_.push_back('\f');
                return;
            case 'n':
                text_.push_back('\n');
                return;
            case 'r':
                text_.push_back('\r');
                return;
            case 't':
                text_.push_back('\t');
                return;
            case 'u':
                break;
            default:
                fail(at, "invalid escape '\\' followed by " + describe(c));
        }
        std::uint32_t cp = hex4(at);
        if (cp >= 0xDC00 && cp <= 0xDFFF) {
            fail(at, "a low surrogate \\u escape without a high surrogate before it");
        }
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (in_.peek() != '\\' || (in_.skip(1), in_.peek() != 'u')) {
                fail(at, "a high surrogate \\u escape without a low surrogate after it");
            }
            in_.skip(1);
            const std::uint32_t low = hex4(at);
            if (low < 0xDC00 || low > 0xDFFF) {
                fail(at, "a high surrogate \\u escape without a low surrogate after it");
            }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        }
        append_utf8(cp);
    }

    std::uint32_t hex4(std::uint64_t at) {
        std::uint32_t v = 0;
        for (int i = 0; i < 4; ++i) {
            const int c = in_.peek();
            const int d = c >= '0' && c <= '9'   ? c - '0'
                          : c >= 'a' && c <= 'f' ? c - 'a' + 10
                          : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                                 : -1;
            if (d < 0) {
                fail(at, "expected four hexadecimal digits after '\\u', found " + describe(c));
            }
            v = v * 16 + static_cast<std::uint32_t>(d);
            in_.skip(1);
        }
        return v;
    }

    void append_utf8(std::uint32_t cp) {
        if (cp < 0x80) {
            text_.push_back(static_cast<char>(cp));
        } else if (cp < 0x800) {
            text_.push_back(static_cast<char>(0xC0 | (cp >> 6)));
            text_.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
        } else if (cp < 0x10000) {
            text_.push_back(static_cast<char>(0xE0 | (cp >> 12)));
            text_.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
            text_.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
        } else {
            text_.push_back(static_cast<char>(0xF0 | (cp >> 18)));
            text_.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
            text_.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
            text_.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
        }
    }

    // One UTF-8 sequence (RFC 3629: no overlong forms, no surrogates, at most U+10FFFF).
    void utf8(int lead) {
        const std::uint64_t at = in_.offset();
        int length = 0;
        int low = 0x80;
        int high = 0xBF;
        if (lead >= 0xC2 && lead <= 0xDF) {
            length = 2;
        } else if (lead >= 0xE0 && lead <= 0xEF) {
            length = 3;
            low = lead == 0xE0 ? 0xA0 : 0x80;
            high = lead == 0xED ? 0x9F : 0xBF;
        } else if (lead >= 0xF0 && lead <= 0xF4) {
            length = 4;
            low = lead == 0xF0 ? 0x90 : 0x80;
            high = lead == 0xF4 ? 0x8F : 0xBF;
        } else {
            fail(at, "invalid UTF-8 (" + describe(lead) + " cannot start a character)");
        }
        text_.push_back(static_cast<char>(lead));
        in_.skip(1);
        for (int i = 1; i < length; ++i) {
            const int c = in_.peek();
            if (c < low || c > high) {
                fail(at, "invalid UTF-8 (" + describe(c) + " cannot continue the character that " + describe(lead) +
                             " starts)");
            }
            text_.push_back(static_cast<char>(c));
            in_.skip(1);
            low = 0x80;
            high = 0xBF;
        }
    }

    void take_digits() {
        while (in_.peek() >= '0' && in_.peek() <= '9') {
            take();
        }
    }

    void take() {
        number_.push_back(static_cast<char>(in_.peek()));
        in_.skip(1);
        if (number_.size() > json_max_number) {
            fail(number_start_, "a number longer than " + std::to_string(json_max_number) + " characters");
        }
    }

    void expect_digit(const char* what) {
        if (in_.peek() < '0' || in_.peek() > '9') {
            fail(in_.offset(), std::string("expected a digit ") + what + ", found " + describe(in_.peek()));
        }
    }

    // The power of ten of a decimal's leading nonzero digit, roughly (sign is all that matters).
    static long long decimal_magnitude(std::string_view n) {
        long long digits_before_point = 0;
        long long leading_zeros_after_point = 0;
        bool point = false;
        bool nonzero = false;
        std::size_t i = n[0] == '-' ? 1 : 0;
        for (; i < n.size() && n[i] != 'e' && n[i] != 'E'; ++i) {
            if (n[i] == '.') {
                point = true;
            } else if (!nonzero && n[i] == '0') {
                leading_zeros_after_point += point ? 1 : 0;
            } else {
                nonzero = true;
                digits_before_point += point ? 0 : 1;
            }
        }
        long long exponent = 0;
        if (i < n.size()) {
            const bool minus = n[i + 1] == '-';
            for (std::size_t j = i + 1 + ((n[i + 1] == '-' || n[i + 1] == '+') ? 1 : 0); j < n.size(); ++j) {
                exponent = exponent < 1'000'000'000'000 ? exponent * 10 + (n[j] - '0') : exponent;
            }
            exponent = minus ? -exponent : exponent;
        }
        return (digits_before_point > 0 ? digits_before_point : -leading_zeros_after_point) + exponent;
    }

    Input& in_;
    std::size_t max_string_;
    std::string_view source_;
    std::string_view where_;
    std::uint64_t base_;
    std::string text_;
    std::string number_;
    std::uint64_t number_start_ = 0;
};

}  // namespace io::parse

SYNCBLOB_END_NAMESPACE
