// SPDX-License-Identifier: BSD-2-Clause
// The sync audit on its own: what each mode counts and refuses, how operations name the waits in
// them and say which they ask for, the caller's own waits, and waits that must never throw.

#include <catch2/catch.hpp>

#include <string>
#include <thread>

#include <syncblob/core/sync_audit.hpp>

#include "audit_counts.hpp"

namespace audit = syncblob::audit;
using audit::Wait;
using Catch::Matchers::Contains;
using test::audit_calls;

namespace {

// A fresh count in `mode` for the test's lifetime.
struct Fresh {
    explicit Fresh(audit::Mode mode) : scope(mode) { audit::reset(); }
    ~Fresh() { audit::reset(); }
    audit::ModeScope scope;
};

}  // namespace

TEST_CASE("audit off counts nothing", "[core][audit]") {
    const Fresh fresh(audit::Mode::off);
    const audit::Operation op("library op");
    audit::note(Wait::device_synchronize);
    audit::note_nothrow(Wait::blocking_free);
    CHECK(audit::counts().empty());
    CHECK(audit::mode() == audit::Mode::off);
}

TEST_CASE("audit counts each wait by the innermost operation, asked or not", "[core][audit]") {
    const Fresh fresh(audit::Mode::count);
    {
        const audit::Operation read("SyncedBuffer::host_data", audit::host_read);
        audit::note(Wait::synchronous_copy);  // asked
        {
            const audit::Operation inner("SyncedBuffer::device_data");
            audit::note(Wait::system_allocation);  // in the inner one, not asked
        }
        audit::note(Wait::blocking_free);  // back in the outer one: a free is never asked for
    }
    audit::note(Wait::stream_synchronize);  // outside every operation: the caller's own
    CHECK(audit_calls("SyncedBuffer::host_data", Wait::synchronous_copy, true) == 1);
    CHECK(audit_calls("SyncedBuffer::device_data", Wait::system_allocation, false) == 1);
    CHECK(audit_calls("SyncedBuffer::host_data", Wait::blocking_free, false) == 1);
    CHECK(audit_calls("caller", Wait::stream_synchronize, true) == 1);
    CHECK(audit::unasked() == 2);
    CHECK(audit::total(Wait::synchronous_copy) == 1);
    CHECK_THAT(audit::table(), Contains("| `SyncedBuffer::device_data` | system_allocation | no | 1 |"));
    audit::reset();
    CHECK(audit::counts().empty());
}

TEST_CASE("audit: the use docs/waits.md shows counts a step's waits into the table", "[core][audit]") {
    const Fresh fresh(audit::Mode::off);
    const auto train_one_step = [] {
        const audit::Operation read("SyncedBuffer::host_data", audit::host_read);
        audit::note(Wait::synchronous_copy);
        audit::note(Wait::blocking_free);
    };
    // [audit-use]
    namespace audit = syncblob::audit;
    audit::set_mode(audit::Mode::count);  // or audit::ModeScope scope(audit::Mode::error);
    train_one_step();
    const std::string table = audit::table();  // one row per operation and kind of wait
    audit::reset();
    // [audit-use]
    CHECK_THAT(table, Contains("| `SyncedBuffer::host_data` | synchronous_copy | yes | 1 |"));
    CHECK_THAT(table, Contains("| `SyncedBuffer::host_data` | blocking_free | no | 1 |"));
    CHECK(audit::counts().empty());
}

TEST_CASE("audit error mode refuses a wait the operation did not ask for, before it happens", "[core][audit]") {
    const Fresh fresh(audit::Mode::error);
    const audit::Operation op("nccl agreement");
    bool waited = false;
    const auto wait = [&] {
        audit::note(Wait::event_synchronize);
        waited = true;
    };
    try {
        wait();
        FAIL("no SyncError");
    } catch (const syncblob::SyncError& e) {
        CHECK(e.wait() == Wait::event_synchronize);
        CHECK(e.operation() == "nccl agreement");
        CHECK_THAT(std::string(e.what()), Contains("nccl agreement: a wait it did not ask for (event_synchronize;"));
    }
    CHECK_FALSE(waited);
    CHECK(audit_calls("nccl agreement", Wait::event_synchronize, false) == 1);  // counted too
    {
        const audit::Operation asked("math::asum", audit::Waits{Wait::host_result});
        audit::note(Wait::host_result);  // asked: no error
    }
    {
        const audit::CountOnly release;  // a release must wait whatever the mode
        audit::note(Wait::event_synchronize);
    }
    audit::note_nothrow(Wait::blocking_free);
    CHECK(audit_calls("nccl agreement", Wait::event_synchronize, false) == 2);
    CHECK(audit_calls("nccl agreement", Wait::blocking_free, false) == 1);
}

TEST_CASE("audit operations are per thread", "[core][audit]") {
    const Fresh fresh(audit::Mode::count);
    const audit::Operation mine("main thread op");
    std::thread other([] { audit::note(Wait::collective); });
    other.join();
    audit::note(Wait::collective);
    CHECK(audit_calls("caller", Wait::collective, true) == 1);
    CHECK(audit_calls("main thread op", Wait::collective, false) == 1);
}

TEST_CASE("audit wait kinds have names and sets of them work", "[core][audit]") {
    for (const Wait w : audit::all_waits) {
        CHECK(audit::wait_name(w) != "?");
    }
    constexpr audit::Waits some{Wait::host_result, Wait::collective};
    STATIC_REQUIRE(some.contains(Wait::collective));
    STATIC_REQUIRE_FALSE(some.contains(Wait::blocking_free));
    STATIC_REQUIRE(audit::host_read.contains(Wait::synchronous_copy));
}
