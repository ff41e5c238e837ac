// SPDX-License-Identifier: BSD-2-Clause
#include "checks.hpp"

namespace blob_test {

void Checks::thrown(const char* expression, int line, const char* what, bool expected_type,
                    std::initializer_list<std::string_view> parts, bool exact) {
    std::string got;
    bool ok = false;
    if (what == nullptr) {
        got = "no exception";
    } else if (!expected_type) {
        got = std::string("threw another exception: ") + what;
    } else {
        const std::string message = what;
        ok = true;
        for (auto part : parts) {
            ok = ok && (exact ? message == part : message.find(part) != std::string::npos);
        }
        got = "threw: " + message;
    }
    std::string wanted = exact ? "exactly " : "containing ";
    for (auto part : parts) {
        wanted += '"';
        wanted += part;
        wanted += "\" ";
    }
    records_.push_back({line, expression, got, wanted, ok});
}

void verify(const Checks& checks) {
    REQUIRE_FALSE(checks.records().empty());
    for (const auto& r : checks.records()) {
        INFO("line " << r.line << ": " << r.expression << "\n  actual:   " << r.actual
                     << "\n  expected: " << r.expected);
        CHECK(r.ok);
    }
}

}  // namespace blob_test
