// SPDX-License-Identifier: BSD-2-Clause
#include "checks.hpp"

namespace blob_test {

void verify(const Checks& checks) {
    REQUIRE_FALSE(checks.records().empty());
    for (const auto& r : checks.records()) {
        INFO("line " << r.line << ": " << r.expression << "\n  actual:   " << r.actual
                     << "\n  expected: " << r.expected);
        CHECK(r.ok);
    }
}

}  // namespace blob_test
