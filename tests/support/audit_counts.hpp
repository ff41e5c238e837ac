// SPDX-License-Identifier: BSD-2-Clause
#pragma once
// What the sync audit (syncblob/core/sync_audit.hpp) counted, looked up the way tests assert it.

#include <cstdint>
#include <optional>
#include <string>

#include <syncblob/core/sync_audit.hpp>

namespace test {

/// The waits of kind `wait` counted in `operation`: those asked for (`asked` true), those not
/// (false), or both (no `asked`).
inline std::uint64_t audit_calls(const std::string& operation, syncblob::audit::Wait wait,
                                 std::optional<bool> asked = std::nullopt) {
    std::uint64_t n = 0;
    for (const auto& c : syncblob::audit::counts()) {
        if (c.operation == operation && c.wait == wait && (!asked || c.asked == *asked)) {
            n += c.calls;
        }
    }
    return n;
}

}  // namespace test
