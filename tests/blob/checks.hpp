// SPDX-License-Identifier: BSD-2-Clause
#pragma once
// Cheap expectations for heavily typed tests. A Catch2 assertion expands to a lot of code, and a
// test case instantiated for 26 (element, allocator) pairs multiplies it: the Blob suites would take
// minutes to compile. So typed test bodies record each expectation here (a plain function call:
// the expression text, its line, the actual and the expected value as text), and `verify` turns
// each record into one Catch2 assertion, in code compiled once.

#include <catch2/catch.hpp>

#include <cstdint>
#include <exception>
#include <initializer_list>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <syncblob/blob.hpp>

namespace blob_test {

/// Text of a value for comparison and for the failure message.
template <class V>
std::string text(const V& v) {
    std::ostringstream os;
    os.precision(17);
    if constexpr (std::is_same_v<V, bool>) {
        os << (v ? "true" : "false");
    } else if constexpr (requires { V::from_bits(0); }) {  // half, bfloat16, the 8-bit floats
        os << static_cast<float>(v);
    } else if constexpr (std::is_same_v<V, std::int8_t> || std::is_same_v<V, std::uint8_t>) {
        os << static_cast<int>(v);
    } else if constexpr (std::is_same_v<V, syncblob::Head>) {
        os << syncblob::head_name(v);
    } else if constexpr (std::is_same_v<V, std::vector<double>>) {
        os << '[';
        for (std::size_t i = 0; i < v.size(); ++i) {
            os << (i == 0 ? "" : ", ") << v[i];
        }
        os << ']';
    } else {
        os << v;
    }
    return os.str();
}

class Checks {
public:
    struct Record {
        int line;
        std::string expression;
        std::string actual;
        std::string expected;
        bool ok;
    };

    /// actual == expected (compared as values when comparable, else as text).
    template <class A, class E>
    void equal(const char* expression, int line, const A& actual, const E& expected) {
        bool ok = false;
        if constexpr (std::is_integral_v<A> && std::is_integral_v<E> && !std::is_same_v<A, bool> &&
                      !std::is_same_v<E, bool>) {
            ok = std::cmp_equal(actual, expected);
        } else if constexpr (requires { static_cast<bool>(actual == expected); }) {
            ok = static_cast<bool>(actual == expected);
        } else {
            ok = text(actual) == text(expected);
        }
        records_.push_back({line, expression, text(actual), text(expected), ok});
    }

    void that(const char* expression, int line, bool condition) {
        records_.push_back({line, expression, condition ? "true" : "false", "true", condition});
    }

    /// `f()` throws `Exception`, and its message contains each of `parts` (an exact message when `exact`).
    /// Only the try/catch is instantiated per use; the rest is compiled once (checks.cpp).
    template <class Exception, class F>
    void throws(const char* expression, int line, F&& f, std::initializer_list<std::string_view> parts = {},
                bool exact = false) {
        try {
            std::forward<F>(f)();
        } catch (const Exception& e) {
            thrown(expression, line, e.what(), true, parts, exact);
            return;
        } catch (const std::exception& e) {
            thrown(expression, line, e.what(), false, parts, exact);
            return;
        }
        thrown(expression, line, nullptr, false, parts, exact);
    }

    [[nodiscard]] const std::vector<Record>& records() const noexcept { return records_; }

private:
    // Records a throws() outcome: `what` is null when nothing was thrown; `expected_type` says
    // whether the exception was of the expected type.
    void thrown(const char* expression, int line, const char* what, bool expected_type,
                std::initializer_list<std::string_view> parts, bool exact);

    std::vector<Record> records_;
};

/// One Catch2 assertion per record (compiled once, in checks.cpp).
void verify(const Checks& checks);

}  // namespace blob_test

/// Records `actual == expected`.
#define BLOB_EQ(actual, expected) checks.equal(#actual " == " #expected, __LINE__, (actual), (expected))
/// Records that a condition holds.
#define BLOB_TRUE(condition) checks.that(#condition, __LINE__, static_cast<bool>(condition))
/// Records that `expr` throws `Exception` whose message contains every string in the braces.
#define BLOB_THROWS(Exception, expr, ...) \
    checks.throws<Exception>(#expr, __LINE__, [&] { (void)(expr); }, {__VA_ARGS__})
/// Records that `expr` throws `Exception` with exactly `message`.
#define BLOB_THROWS_EXACT(Exception, expr, message) \
    checks.throws<Exception>(                       \
        #expr, __LINE__, [&] { (void)(expr); }, {message}, true)
