// SPDX-License-Identifier: BSD-2-Clause
#pragma once
// The backend-generic SyncedBuffer suite. A .cpp defines `SuiteAllocators`, a std::tuple of
// allocator bundles (types with `host_allocator` and `device_backend`, like syncblob::Simulated),
// then includes this header:
//
//     using SuiteAllocators = std::tuple<syncblob::Simulated>;
//     #include "buffer_suite.hpp"
//
// Every test runs on SyncedBuffer<CountingHost<bundle's host allocator>, bundle's backend>, so host
// allocations are counted and fresh host blocks hold garbage. Device memory is only ever looked
// at through syncblob_test::read_device / write_device: it need not be host-addressable.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <syncblob/memory/synced_buffer.hpp>

#include "counting_allocator.hpp"
#include "device_guard.hpp"

namespace syncblob_suite {

using syncblob::Head;
using Stats = syncblob::TransferStats;
using Bytes = std::vector<unsigned char>;

template <class Bundle>
using Host = syncblob_test::CountingHost<typename Bundle::host_allocator>;
template <class Bundle>
using Buffer = syncblob::SyncedBuffer<Host<Bundle>, typename Bundle::device_backend>;

/// Bytes in most test buffers: not a multiple of 64, so nothing lines up by accident.
inline constexpr std::size_t n = 100;

/// A recognisable byte pattern; different seeds give patterns that differ in every byte.
inline Bytes pattern(unsigned seed, std::size_t bytes = n) {
    Bytes out(bytes);
    for (std::size_t i = 0; i < bytes; ++i) {
        out[i] = static_cast<unsigned char>(seed * 31u + i * 7u + 1u);
    }
    return out;
}
inline Bytes zeros(std::size_t bytes = n) {
    return Bytes(bytes, 0);
}

inline Bytes host_bytes(const void* p, std::size_t bytes = n) {
    Bytes out(bytes);
    if (bytes != 0) {
        std::memcpy(out.data(), p, bytes);
    }
    return out;
}

template <class Backend>
Bytes device_bytes(const void* p, std::size_t bytes = n) {
    return syncblob_test::read_device<Backend>(p, bytes);
}

/// How a test buffer is prepared before the call under test. The "stale" variants also hold a
/// block on the other side, with different (stale) bytes in it.
enum class Start {
    uninitialized,
    at_host,               // host block only
    at_host_stale_device,  // host fresh, device block holds other bytes
    at_device,             // device block only
    at_device_stale_host,  // device fresh, host block holds other bytes
    synced,                // both blocks hold the same bytes
};

inline constexpr Start all_starts[] = {Start::uninitialized,        Start::at_host,
                                       Start::at_host_stale_device, Start::at_device,
                                       Start::at_device_stale_host, Start::synced};

inline const char* start_name(Start s) {
    switch (s) {
        case Start::uninitialized:
            return "uninitialized";
        case Start::at_host:
            return "at_host";
        case Start::at_host_stale_device:
            return "at_host (stale device block)";
        case Start::at_device:
            return "at_device";
        case Start::at_device_stale_host:
            return "at_device (stale host block)";
        case Start::synced:
            return "synced";
    }
    return "?";
}

inline Head start_head(Start s) {
    switch (s) {
        case Start::uninitialized:
            return Head::uninitialized;
        case Start::at_host:
        case Start::at_host_stale_device:
            return Head::at_host;
        case Start::at_device:
        case Start::at_device_stale_host:
            return Head::at_device;
        case Start::synced:
            return Head::synced;
    }
    return Head::uninitialized;
}

inline bool has_host_block(Start s) {
    return s == Start::at_host || s == Start::at_host_stale_device || s == Start::at_device_stale_host ||
           s == Start::synced;
}
inline bool has_device_block(Start s) {
    return s == Start::at_device || s == Start::at_host_stale_device || s == Start::at_device_stale_host ||
           s == Start::synced;
}

/// Writes `bytes` as the buffer's fresh host contents (head → at_host).
template <class B>
void write_host(B& buffer, const Bytes& bytes) {
    std::memcpy(buffer.mutable_host_data(), bytes.data(), bytes.size());
}

/// Writes `bytes` as the buffer's fresh device contents (head → at_device).
template <class B>
void write_device(B& buffer, const Bytes& bytes) {
    syncblob_test::write_device<typename B::device_backend>(buffer.mutable_device_data(), bytes.data(), bytes.size());
}

/// Brings a new buffer to `start` with fresh contents `fresh` (stale sides hold other bytes), then
/// clears its stats.
template <class B>
void prepare(B& buffer, Start start, const Bytes& fresh) {
    const Bytes stale = pattern(99, fresh.size());
    switch (start) {
        case Start::uninitialized:
            break;
        case Start::at_host:
            write_host(buffer, fresh);
            break;
        case Start::at_host_stale_device:
            write_device(buffer, stale);
            write_host(buffer, fresh);
            break;
        case Start::at_device:
            write_device(buffer, fresh);
            break;
        case Start::at_device_stale_host:
            write_host(buffer, stale);
            write_device(buffer, fresh);
            break;
        case Start::synced:
            write_host(buffer, fresh);
            (void)buffer.device_data();
            break;
    }
    REQUIRE(buffer.head() == start_head(start));
    buffer.reset_stats();
}

/// The expected result of one cell of the state table.
struct Cell {
    Start start;
    Head head;
    Stats stats;
};

/// Checks that a synced buffer's other side holds `expected` without copying anything.
template <class B>
void check_synced(const B& buffer, const Bytes& expected) {
    using Backend = typename B::device_backend;
    const Stats before = buffer.stats();
    CHECK(host_bytes(buffer.host_data(), expected.size()) == expected);
    CHECK(device_bytes<Backend>(buffer.device_data(), expected.size()) == expected);
    CHECK(buffer.stats() == before);
    CHECK(buffer.head() == Head::synced);
}

}  // namespace syncblob_suite

// ---- every cell of the state table ---------------------------------------------------------------

TEMPLATE_LIST_TEST_CASE("SyncedBuffer state table: host_data()", "[memory][buffer][state]", SuiteAllocators) {
    using namespace syncblob_suite;
    using Backend = typename TestType::device_backend;
    SYNCBLOB_REQUIRE_DEVICE(Backend);
    const Cell cells[] = {
        {Start::uninitialized, Head::at_host, Stats{.host_allocations = 1}},
        {Start::at_host, Head::at_host, Stats{}},
        {Start::at_host_stale_device, Head::at_host, Stats{}},
        {Start::at_device, Head::synced, Stats{.host_allocations = 1, .device_to_host = 1, .device_to_host_bytes = n}},
        {Start::at_device_stale_host, Head::synced, Stats{.device_to_host = 1, .device_to_host_bytes = n}},
        {Start::synced, Head::synced, Stats{}},
    };
    for (const Cell& cell : cells) {
        INFO("from " << start_name(cell.start));
        Buffer<TestType> buffer(n);
        const Bytes fresh = pattern(1);
        prepare(buffer, cell.start, fresh);
        const void* p = buffer.host_data();
        CHECK(buffer.head() == cell.head);
        CHECK(buffer.stats() == cell.stats);
        const Bytes expected = cell.start == Start::uninitialized ? zeros() : fresh;
        CHECK(host_bytes(p) == expected);
        if (cell.head == Head::synced) {
            check_synced(buffer, expected);
        }
    }
}

TEMPLATE_LIST_TEST_CASE("SyncedBuffer state table: mutable_host_data()", "[memory][buffer][state]", SuiteAllocators) {
    using namespace syncblob_suite;
    using Backend = typename TestType::device_backend;
    SYNCBLOB_REQUIRE_DEVICE(Backend);
    const Cell cells[] = {
        {Start::uninitialized, Head::at_host, Stats{.host_allocations = 1}},
        {Start::at_host, Head::at_host, Stats{}},
        {Start::at_host_stale_device, Head::at_host, Stats{}},
        {Start::at_device, Head::at_host, Stats{.host_allocations = 1, .device_to_host = 1, .device_to_host_bytes = n}},
        {Start::at_device_stale_host, Head::at_host, Stats{.device_to_host = 1, .device_to_host_bytes = n}},
        {Start::synced, Head::at_host, Stats{}},
    };
    for (const Cell& cell : cells) {
        INFO("from " << start_name(cell.start));
        Buffer<TestType> buffer(n);
        const Bytes fresh = pattern(2);
        prepare(buffer, cell.start, fresh);
        void* p = buffer.mutable_host_data();
        CHECK(buffer.head() == cell.head);
        CHECK(buffer.stats() == cell.stats);
        CHECK(host_bytes(p) == (cell.start == Start::uninitialized ? zeros() : fresh));
        // The device copy is stale now: a write on the host reaches the device only through a copy.
        const Bytes written = pattern(3);
        std::memcpy(p, written.data(), n);
        const Stats before = buffer.stats();
        CHECK(device_bytes<Backend>(buffer.device_data()) == written);
        CHECK(buffer.stats().host_to_device == before.host_to_device + 1);
    }
}

TEMPLATE_LIST_TEST_CASE("SyncedBuffer host_data_if_fresh() and mutable_host_data_if_fresh() never copy or change state",
                        "[memory][buffer][state]", SuiteAllocators) {
    using namespace syncblob_suite;
    using Backend = typename TestType::device_backend;
    SYNCBLOB_REQUIRE_DEVICE(Backend);
    for (const Start start : all_starts) {
        INFO("from " << start_name(start));
        Buffer<TestType> buffer(n);
        const Bytes fresh = pattern(4);
        prepare(buffer, start, fresh);
        const Head head = buffer.head();
        const void* read = std::as_const(buffer).host_data_if_fresh();
        void* write = buffer.mutable_host_data_if_fresh();
        CHECK(buffer.head() == head);
        CHECK(buffer.stats() == Stats{});  // no allocation, no copy
        const bool readable = head == Head::at_host || head == Head::synced;
        CHECK((read != nullptr) == readable);
        CHECK((write != nullptr) == (head == Head::at_host));
        if (readable) {
            CHECK(host_bytes(read) == fresh);
            CHECK(read == buffer.host_data());  // the block the full accessor returns, with nothing to do
            CHECK(buffer.stats() == Stats{});
        }
        if (write != nullptr) {
            CHECK(write == read);
        }
    }
    SECTION("a read-only borrow is fresh for reading only") {
        const Bytes lent = pattern(5);
        Buffer<TestType> buffer(n);
        buffer.set_host_data(static_cast<const void*>(lent.data()), n);
        CHECK(buffer.host_data_if_fresh() == lent.data());
        CHECK(buffer.mutable_host_data_if_fresh() == nullptr);
        CHECK(buffer.head() == Head::at_host);
        CHECK(buffer.stats() == Stats{});
    }
}

TEMPLATE_LIST_TEST_CASE("SyncedBuffer state table: device_data()", "[memory][buffer][state]", SuiteAllocators) {
    using namespace syncblob_suite;
    using Backend = typename TestType::device_backend;
    SYNCBLOB_REQUIRE_DEVICE(Backend);
    const Cell cells[] = {
        {Start::uninitialized, Head::at_device, Stats{.device_allocations = 1}},
        {Start::at_host, Head::synced, Stats{.device_allocations = 1, .host_to_device = 1, .host_to_device_bytes = n}},
        {Start::at_host_stale_device, Head::synced, Stats{.host_to_device = 1, .host_to_device_bytes = n}},
        {Start::at_device, Head::at_device, Stats{}},
        {Start::at_device_stale_host, Head::at_device, Stats{}},
        {Start::synced, Head::synced, Stats{}},
    };
    for (const Cell& cell : cells) {
        INFO("from " << start_name(cell.start));
        Buffer<TestType> buffer(n);
        const Bytes fresh = pattern(4);
        prepare(buffer, cell.start, fresh);
        const void* p = buffer.device_data();
        CHECK(buffer.head() == cell.head);
        CHECK(buffer.stats() == cell.stats);
        const Bytes expected = cell.start == Start::uninitialized ? zeros() : fresh;
        CHECK(device_bytes<Backend>(p) == expected);
        if (cell.head == Head::synced) {
            check_synced(buffer, expected);
        }
    }
}

TEMPLATE_LIST_TEST_CASE("SyncedBuffer state table: mutable_device_data()", "[memory][buffer][state]", SuiteAllocators) {
    using namespace syncblob_suite;
    using Backend = typename TestType::device_backend;
    SYNCBLOB_REQUIRE_DEVICE(Backend);
    const Cell cells[] = {
        {Start::uninitialized, Head::at_device, Stats{.device_allocations = 1}},
        {Start::at_host, Head::at_device,
         Stats{.device_allocations = 1, .host_to_device = 1, .host_to_device_bytes = n}},
        {Start::at_host_stale_device, Head::at_device, Stats{.host_to_device = 1, .host_to_device_bytes = n}},
        {Start::at_device, Head::at_device, Stats{}},
        {Start::at_device_stale_host, Head::at_device, Stats{}},
        {Start::synced, Head::at_device, Stats{}},
    };
    for (const Cell& cell : cells) {
        INFO("from " << start_name(cell.start));
        Buffer<TestType> buffer(n);
        const Bytes fresh = pattern(5);
        prepare(buffer, cell.start, fresh);
        void* p = buffer.mutable_device_data();
        CHECK(buffer.head() == cell.head);
        CHECK(buffer.stats() == cell.stats);
        CHECK(device_bytes<Backend>(p) == (cell.start == Start::uninitialized ? zeros() : fresh));
        // The host copy is stale now: a write on the device reaches the host only through a copy.
        const Bytes written = pattern(6);
        syncblob_test::write_device<Backend>(p, written.data(), n);
        const Stats before = buffer.stats();
        CHECK(host_bytes(buffer.host_data()) == written);
        CHECK(buffer.stats().device_to_host == before.device_to_host + 1);
    }
}

TEMPLATE_LIST_TEST_CASE("SyncedBuffer state table: set_host_data()", "[memory][buffer][state][borrow]",
                        SuiteAllocators) {
    using namespace syncblob_suite;
    using Backend = typename TestType::device_backend;
    SYNCBLOB_REQUIRE_DEVICE(Backend);
    auto& counters = Host<TestType>::counters();
    for (const Start start : all_starts) {
        INFO("from " << start_name(start));
        Bytes borrowed = pattern(7);
        auto buffer = std::make_unique<Buffer<TestType>>(n);
        prepare(*buffer, start, pattern(8));
        const auto freed_before = counters.deallocations.load();
        const auto allocated_before = counters.allocations.load();
        buffer->set_host_data(borrowed.data(), borrowed.size());
        CHECK(buffer->head() == Head::at_host);
        CHECK(buffer->stats() == Stats{});
        CHECK(buffer->host_borrowed());
        // the owned host block it replaces is freed, once
        CHECK(counters.deallocations.load() - freed_before == (has_host_block(start) ? 1u : 0u));
        CHECK(counters.allocations.load() == allocated_before);
        CHECK(buffer->host_data() == borrowed.data());
        CHECK(buffer->mutable_host_data() == borrowed.data());
        CHECK(buffer->stats() == Stats{});
        // the device side is stale: reading it copies the borrowed bytes
        CHECK(device_bytes<Backend>(buffer->device_data()) == pattern(7));
        CHECK(buffer->stats() == Stats{.device_allocations = has_device_block(start) ? 0u : 1u,
                                       .host_to_device = 1,
                                       .host_to_device_bytes = n});
        const auto freed_before_destruction = counters.deallocations.load();
        buffer.reset();
        // destroying the buffer frees nothing on the host: its host side was borrowed
        CHECK(counters.deallocations.load() == freed_before_destruction);
        CHECK(borrowed == pattern(7));  // never freed (ASan would see a double free) and intact
    }
}

TEMPLATE_LIST_TEST_CASE("SyncedBuffer state table: set_device_data()", "[memory][buffer][state][borrow]",
                        SuiteAllocators) {
    using namespace syncblob_suite;
    using Backend = typename TestType::device_backend;
    SYNCBLOB_REQUIRE_DEVICE(Backend);
    auto& counters = Host<TestType>::counters();
    for (const Start start : all_starts) {
        INFO("from " << start_name(start));
        void* borrowed = Backend::allocate(n);
        const Bytes content = pattern(9);
        syncblob_test::write_device<Backend>(borrowed, content.data(), n);
        {
            Buffer<TestType> buffer(n);
            prepare(buffer, start, pattern(10));
            const auto freed_before = counters.deallocations.load();
            buffer.set_device_data(borrowed, n);
            CHECK(buffer.head() == Head::at_device);
            CHECK(buffer.stats() == Stats{});
            CHECK(counters.deallocations.load() == freed_before);  // the host block stays (stale)
            CHECK(buffer.device_data() == borrowed);
            CHECK(buffer.mutable_device_data() == borrowed);
            CHECK(buffer.stats() == Stats{});
            // the host side is stale: reading it copies the borrowed bytes
            CHECK(host_bytes(buffer.host_data()) == content);
            CHECK(buffer.stats() == Stats{.host_allocations = has_host_block(start) ? 0u : 1u,
                                          .device_to_host = 1,
                                          .device_to_host_bytes = n});
        }
        // the buffer did not free it (a double free here would be caught) and did not change it
        CHECK(device_bytes<Backend>(borrowed) == content);
        Backend::deallocate(borrowed, n);
    }
}

TEMPLATE_LIST_TEST_CASE("SyncedBuffer state table: push_to_device_async()", "[memory][buffer][state][async]",
                        SuiteAllocators) {
    using namespace syncblob_suite;
    using Backend = typename TestType::device_backend;
    SYNCBLOB_REQUIRE_DEVICE(Backend);
    for (const Start start : all_starts) {
        INFO("from " << start_name(start));
        Buffer<TestType> buffer(n);
        const Bytes fresh = pattern(11);
        prepare(buffer, start, fresh);
        const Head head = start_head(start);
        if (head == Head::uninitialized || head == Head::at_device) {
            CHECK_THROWS_AS(buffer.push_to_device_async(), syncblob::StateError);
            CHECK_THROWS_WITH(
                buffer.push_to_device_async(),
                Catch::Contains("push_to_device_async") && Catch::Contains(std::string(syncblob::head_name(head))));
            CHECK(buffer.head() == head);
            CHECK(buffer.stats() == Stats{});
            CHECK_FALSE(buffer.async_pending());
            continue;
        }
        buffer.push_to_device_async();
        CHECK(buffer.head() == Head::synced);
        if (head == Head::synced) {
            CHECK(buffer.stats() == Stats{});  // no-op
            CHECK_FALSE(buffer.async_pending());
        } else {
            CHECK(buffer.stats() == Stats{.device_allocations = has_device_block(start) ? 0u : 1u,
                                          .host_to_device = 1,
                                          .host_to_device_bytes = n});
            CHECK(buffer.async_pending());
        }
        check_synced(buffer, fresh);
        CHECK_FALSE(buffer.async_pending());  // the host access waited
    }
}

TEMPLATE_LIST_TEST_CASE("SyncedBuffer state table: pull_to_host_async()", "[memory][buffer][state][async]",
                        SuiteAllocators) {
    using namespace syncblob_suite;
    using Backend = typename TestType::device_backend;
    SYNCBLOB_REQUIRE_DEVICE(Backend);
    for (const Start start : all_starts) {
        INFO("from " << start_name(start));
        Buffer<TestType> buffer(n);
        const Bytes fresh = pattern(12);
        prepare(buffer, start, fresh);
        const Head head = start_head(start);
        if (head == Head::uninitialized) {
            CHECK_THROWS_AS(buffer.pull_to_host_async(), syncblob::StateError);
            CHECK_THROWS_WITH(buffer.pull_to_host_async(),
                              Catch::Contains("pull_to_host_async") && Catch::Contains("uninitialized"));
            CHECK(buffer.head() == head);
            CHECK(buffer.stats() == Stats{});
            continue;
        }
        buffer.pull_to_host_async();
        if (head == Head::at_device) {
            CHECK(buffer.head() == Head::synced);
            CHECK(buffer.stats() == Stats{.host_allocations = has_host_block(start) ? 0u : 1u,
                                          .device_to_host = 1,
                                          .device_to_host_bytes = n});
            CHECK(buffer.async_pending());
            check_synced(buffer, fresh);
        } else {  // at_host and synced: nothing to do
            CHECK(buffer.head() == head);
            CHECK(buffer.stats() == Stats{});
            CHECK_FALSE(buffer.async_pending());
            CHECK(host_bytes(buffer.host_data()) == fresh);
        }
        CHECK_FALSE(buffer.async_pending());
    }
}

// ---- Caffe's copy sequence -----------------------------------------------------------------------

TEMPLATE_LIST_TEST_CASE("SyncedBuffer follows Caffe's nine-call copy sequence", "[memory][buffer][caffe]",
                        SuiteAllocators) {
    using namespace syncblob_suite;
    using Backend = typename TestType::device_backend;
    SYNCBLOB_REQUIRE_DEVICE(Backend);
    Buffer<TestType> buffer(n);
    write_host(buffer, pattern(20));  // fresh data on the host
    buffer.reset_stats();
    struct Expect {
        Head head;
        std::uint64_t to_device;
        std::uint64_t to_host;
    };
    auto check = [&](const char* call, Expect e) {
        INFO("after " << call);
        const Stats s = buffer.stats();
        CHECK(buffer.head() == e.head);
        CHECK(s.host_to_device == e.to_device);
        CHECK(s.device_to_host == e.to_host);
        CHECK(s.host_to_device_bytes == e.to_device * n);
        CHECK(s.device_to_host_bytes == e.to_host * n);
        CHECK(s.device_to_device == 0);
        CHECK(s.host_to_host == 0);
        CHECK(s.host_allocations == 0);    // the host block exists from the start
        CHECK(s.device_allocations == 1);  // allocated once, by the first call
    };
    CHECK(device_bytes<Backend>(buffer.device_data()) == pattern(20));
    check("device_data (copies H->D)", {Head::synced, 1, 0});
    CHECK(host_bytes(buffer.host_data()) == pattern(20));
    check("host_data (no copy)", {Head::synced, 1, 0});
    (void)buffer.mutable_device_data();
    check("mutable_device_data (no copy)", {Head::at_device, 1, 0});
    syncblob_test::write_device<Backend>(buffer.mutable_device_data(), pattern(21).data(), n);
    check("mutable_device_data again (no copy)", {Head::at_device, 1, 0});
    CHECK(host_bytes(buffer.host_data()) == pattern(21));
    check("host_data (copies D->H)", {Head::synced, 1, 1});
    CHECK(device_bytes<Backend>(buffer.device_data()) == pattern(21));
    check("device_data (no copy)", {Head::synced, 1, 1});
    std::memcpy(buffer.mutable_host_data(), pattern(22).data(), n);
    check("mutable_host_data (no copy)", {Head::at_host, 1, 1});
    void* d = buffer.mutable_device_data();
    check("mutable_device_data (copies H->D)", {Head::at_device, 2, 1});
    CHECK(device_bytes<Backend>(d) == pattern(22));
    syncblob_test::write_device<Backend>(d, pattern(23).data(), n);
    CHECK(host_bytes(buffer.mutable_host_data()) == pattern(23));
    check("mutable_host_data (copies D->H)", {Head::at_host, 2, 2});
}

// ---- first access ----------------------------------------------------------------------------------

TEMPLATE_LIST_TEST_CASE("SyncedBuffer zero-fills the first allocation of each side for reading", "[memory][buffer]",
                        SuiteAllocators) {
    using namespace syncblob_suite;
    using Backend = typename TestType::device_backend;
    SYNCBLOB_REQUIRE_DEVICE(Backend);
    for (const std::size_t bytes : {std::size_t{1}, std::size_t{63}, std::size_t{4096}, std::size_t{100000}}) {
        INFO(bytes << " bytes");
        Buffer<TestType> host_first(bytes);
        CHECK(host_bytes(host_first.host_data(), bytes) == zeros(bytes));
        CHECK(device_bytes<Backend>(host_first.device_data(), bytes) == zeros(bytes));
        Buffer<TestType> device_first(bytes);
        CHECK(device_bytes<Backend>(device_first.device_data(), bytes) == zeros(bytes));
        CHECK(host_bytes(device_first.host_data(), bytes) == zeros(bytes));
        Buffer<TestType> host_write(bytes);
        CHECK(host_bytes(host_write.mutable_host_data(), bytes) == zeros(bytes));
        Buffer<TestType> device_write(bytes);
        CHECK(device_bytes<Backend>(device_write.mutable_device_data(), bytes) == zeros(bytes));
    }
}

// ---- borrowing -------------------------------------------------------------------------------------

TEMPLATE_LIST_TEST_CASE("SyncedBuffer never frees borrowed host memory", "[memory][buffer][borrow]", SuiteAllocators) {
    using namespace syncblob_suite;
    using Backend = typename TestType::device_backend;
    SYNCBLOB_REQUIRE_DEVICE(Backend);
    auto& counters = Host<TestType>::counters();
    const auto allocated = counters.allocations.load();
    const auto freed = counters.deallocations.load();
    Bytes first = pattern(30);
    Bytes second = pattern(31);
    {
        Buffer<TestType> buffer(n);
        (void)buffer.host_data();  // an owned block
        CHECK(counters.allocations.load() - allocated == 1);
        buffer.set_host_data(first.data(), first.size());
        CHECK(counters.deallocations.load() - freed == 1);  // the owned block, once
        buffer.set_host_data(second.data(), second.size());
        CHECK(counters.deallocations.load() - freed == 1);  // a borrow is never freed
        CHECK(host_bytes(buffer.host_data()) == pattern(31));
    }
    CHECK(counters.allocations.load() - allocated == 1);
    CHECK(counters.deallocations.load() - freed == 1);
    CHECK(first == pattern(30));
    CHECK(second == pattern(31));
}

TEMPLATE_LIST_TEST_CASE("SyncedBuffer holds a borrow's keep-alive while it uses the memory", "[memory][buffer][borrow]",
                        SuiteAllocators) {
    using namespace syncblob_suite;
    using Backend = typename TestType::device_backend;
    SYNCBLOB_REQUIRE_DEVICE(Backend);
    auto storage = std::make_shared<Bytes>(pattern(32));
    std::weak_ptr<Bytes> watch = storage;
    Buffer<TestType> buffer(n);
    buffer.set_host_data(storage->data(), storage->size(), syncblob::Borrow{storage, false});
    storage.reset();
    CHECK_FALSE(watch.expired());  // the buffer keeps it alive
    CHECK(host_bytes(buffer.host_data()) == pattern(32));
    // replacing the host side releases it
    Bytes other = pattern(33);
    buffer.set_host_data(other.data(), other.size());
    CHECK(watch.expired());
    // a read-only borrow's keep-alive is released by the copy on write
    auto readonly = std::make_shared<Bytes>(pattern(34));
    std::weak_ptr<Bytes> watch_readonly = readonly;
    buffer.set_host_data(static_cast<const void*>(readonly->data()), readonly->size(), readonly);
    readonly.reset();
    CHECK_FALSE(watch_readonly.expired());
    CHECK(host_bytes(buffer.mutable_host_data()) == pattern(34));
    CHECK(watch_readonly.expired());
}

TEMPLATE_LIST_TEST_CASE("SyncedBuffer rejects a borrow smaller than the buffer", "[memory][buffer][borrow]",
                        SuiteAllocators) {
    using namespace syncblob_suite;
    using Backend = typename TestType::device_backend;
    SYNCBLOB_REQUIRE_DEVICE(Backend);
    Buffer<TestType> buffer(n);
    write_host(buffer, pattern(35));
    buffer.reset_stats();
    Bytes small = pattern(36, n - 1);
    CHECK_THROWS_AS(buffer.set_host_data(small.data(), small.size()), syncblob::ShapeError);
    CHECK_THROWS_WITH(buffer.set_host_data(small.data(), small.size()),
                      Catch::Contains("set_host_data") && Catch::Contains("99") && Catch::Contains("100"));
    CHECK_THROWS_AS(buffer.set_host_data(static_cast<void*>(nullptr), n), syncblob::ShapeError);
    void* device_block = Backend::allocate(n - 1);
    CHECK_THROWS_AS(buffer.set_device_data(device_block, n - 1), syncblob::ShapeError);
    CHECK_THROWS_WITH(buffer.set_device_data(device_block, n - 1),
                      Catch::Contains("set_device_data") && Catch::Contains("99") && Catch::Contains("100"));
    Backend::deallocate(device_block, n - 1);
    // nothing changed
    CHECK(buffer.head() == Head::at_host);
    CHECK_FALSE(buffer.host_borrowed());
    CHECK(buffer.stats() == Stats{});
    CHECK(host_bytes(buffer.host_data()) == pattern(35));
    CHECK(small == pattern(36, n - 1));
}

TEMPLATE_LIST_TEST_CASE("SyncedBuffer refuses to borrow its own blocks", "[memory][buffer][borrow]", SuiteAllocators) {
    using namespace syncblob_suite;
    using Backend = typename TestType::device_backend;
    SYNCBLOB_REQUIRE_DEVICE(Backend);
    Buffer<TestType> buffer(n);
    write_host(buffer, pattern(37));
    void* host = buffer.mutable_host_data();
    CHECK_THROWS_AS(buffer.set_host_data(host, n), syncblob::StateError);
    CHECK_THROWS_WITH(buffer.set_host_data(host, n), Catch::Contains("set_host_data") && Catch::Contains("own"));
    CHECK(buffer.head() == Head::at_host);
    CHECK_FALSE(buffer.host_borrowed());
    CHECK(host_bytes(buffer.host_data()) == pattern(37));
    void* device = buffer.mutable_device_data();
    buffer.reset_stats();
    CHECK_THROWS_AS(buffer.set_device_data(device, n), syncblob::StateError);
    CHECK(buffer.head() == Head::at_device);
    CHECK(buffer.stats() == Stats{});
    CHECK(device_bytes<Backend>(buffer.device_data()) == pattern(37));
}

TEMPLATE_LIST_TEST_CASE("SyncedBuffer never writes a read-only host borrow", "[memory][buffer][borrow]",
                        SuiteAllocators) {
    using namespace syncblob_suite;
    using Backend = typename TestType::device_backend;
    SYNCBLOB_REQUIRE_DEVICE(Backend);
    const Bytes borrowed = pattern(40);
    SECTION("the first mutable host access copies into owned memory") {
        Buffer<TestType> buffer(n);
        buffer.set_host_data(static_cast<const void*>(borrowed.data()), borrowed.size());
        CHECK(buffer.host_data() == borrowed.data());  // reading needs no copy
        CHECK(buffer.stats() == Stats{});
        void* p = buffer.mutable_host_data();
        CHECK(p != borrowed.data());
        CHECK(buffer.stats() == Stats{.host_allocations = 1, .host_to_host = 1, .host_to_host_bytes = n});
        CHECK(host_bytes(p) == pattern(40));
        std::memset(p, 0x11, n);
        CHECK(buffer.mutable_host_data() == p);  // owned now: no second copy
        CHECK(buffer.stats().host_to_host == 1);
    }
    SECTION("from synced too") {
        Buffer<TestType> buffer(n);
        buffer.set_host_data(static_cast<const void*>(borrowed.data()), borrowed.size());
        CHECK(device_bytes<Backend>(buffer.device_data()) == pattern(40));
        buffer.reset_stats();
        void* p = buffer.mutable_host_data();
        CHECK(p != borrowed.data());
        CHECK(buffer.stats() == Stats{.host_allocations = 1, .host_to_host = 1, .host_to_host_bytes = n});
        std::memset(p, 0x12, n);
    }
    SECTION("an overwrite goes to owned memory, without a copy of the borrow") {
        Buffer<TestType> buffer(n);
        buffer.set_host_data(static_cast<const void*>(borrowed.data()), borrowed.size());
        REQUIRE(buffer.head() == Head::at_host);
        void* p = buffer.mutable_host_data_for_overwrite();
        CHECK(p != borrowed.data());
        CHECK(buffer.stats() == Stats{.host_allocations = 1});
        std::memset(p, 0x13, n);
        CHECK(buffer.mutable_host_data_for_overwrite() == p);  // owned now
        CHECK(buffer.stats().host_allocations == 1);
    }
    SECTION("a device-to-host copy goes to owned memory, not into the borrow") {
        Buffer<TestType> buffer(n);
        buffer.set_host_data(static_cast<const void*>(borrowed.data()), borrowed.size());
        write_device(buffer, pattern(41));
        buffer.reset_stats();
        const void* p = buffer.host_data();
        CHECK(p != borrowed.data());
        CHECK(host_bytes(p) == pattern(41));
        CHECK(buffer.stats() == Stats{.host_allocations = 1, .device_to_host = 1, .device_to_host_bytes = n});
    }
    CHECK(borrowed == pattern(40));
}

TEMPLATE_LIST_TEST_CASE("SyncedBuffer never writes a read-only device borrow", "[memory][buffer][borrow]",
                        SuiteAllocators) {
    using namespace syncblob_suite;
    using Backend = typename TestType::device_backend;
    SYNCBLOB_REQUIRE_DEVICE(Backend);
    void* borrowed = Backend::allocate(n);
    syncblob_test::write_device<Backend>(borrowed, pattern(42).data(), n);
    SECTION("the first mutable device access copies into owned memory") {
        Buffer<TestType> buffer(n);
        buffer.set_device_data(borrowed, n, syncblob::Borrow{{}, true});
        CHECK(buffer.device_data() == borrowed);
        void* p = buffer.mutable_device_data();
        CHECK(p != borrowed);
        CHECK(buffer.stats() == Stats{.device_allocations = 1, .device_to_device = 1, .device_to_device_bytes = n});
        CHECK(device_bytes<Backend>(p) == pattern(42));
        syncblob_test::write_device<Backend>(p, pattern(43).data(), n);
        CHECK(host_bytes(buffer.host_data()) == pattern(43));
    }
    SECTION("a host-to-device copy goes to owned memory, not into the borrow") {
        Buffer<TestType> buffer(n);
        buffer.set_device_data(borrowed, n, syncblob::Borrow{{}, true});
        write_host(buffer, pattern(44));
        buffer.reset_stats();
        const void* p = buffer.device_data();
        CHECK(p != borrowed);
        CHECK(device_bytes<Backend>(p) == pattern(44));
        CHECK(buffer.stats() == Stats{.device_allocations = 1, .host_to_device = 1, .host_to_device_bytes = n});
    }
    CHECK(device_bytes<Backend>(borrowed) == pattern(42));
    Backend::deallocate(borrowed, n);
}

// ---- asynchronous copies -----------------------------------------------------------------------------

TEMPLATE_LIST_TEST_CASE("SyncedBuffer async copies are waited for by the next access", "[memory][buffer][async]",
                        SuiteAllocators) {
    using namespace syncblob_suite;
    using Backend = typename TestType::device_backend;
    SYNCBLOB_REQUIRE_DEVICE(Backend);
    SECTION("push, then read on the device") {
        Buffer<TestType> buffer(n);
        write_host(buffer, pattern(50));
        buffer.push_to_device_async();
        CHECK(device_bytes<Backend>(buffer.device_data()) == pattern(50));
    }
    SECTION("push, then write on the host") {
        Buffer<TestType> buffer(n);
        write_host(buffer, pattern(51));
        buffer.push_to_device_async();
        write_host(buffer, pattern(52));
        CHECK(buffer.head() == Head::at_host);
        CHECK_FALSE(buffer.async_pending());
        CHECK(device_bytes<Backend>(buffer.device_data()) == pattern(52));
        CHECK(buffer.stats().host_to_device == 2);
    }
    SECTION("pull, then read on the host") {
        Buffer<TestType> buffer(n);
        write_device(buffer, pattern(53));
        buffer.pull_to_host_async();
        CHECK(host_bytes(buffer.host_data()) == pattern(53));
        CHECK_FALSE(buffer.async_pending());
    }
    SECTION("pull, then write on the device, then read on the host") {
        Buffer<TestType> buffer(n);
        write_device(buffer, pattern(54));
        buffer.pull_to_host_async();
        write_device(buffer, pattern(55));
        CHECK(buffer.head() == Head::at_device);
        CHECK(host_bytes(buffer.host_data()) == pattern(55));
        CHECK(buffer.stats().device_to_host == 2);
    }
    SECTION("pull, then the buffer dies with the copy pending") {
        auto buffer = std::make_unique<Buffer<TestType>>(n);
        write_device(*buffer, pattern(56));
        buffer->pull_to_host_async();
        buffer.reset();  // waits before freeing (ASan sees a late copy into freed memory otherwise)
        CHECK_FALSE(buffer);
    }
}

// ---- zero-size buffers ---------------------------------------------------------------------------------

TEMPLATE_LIST_TEST_CASE("SyncedBuffer of zero bytes is valid and copies nothing", "[memory][buffer][empty]",
                        SuiteAllocators) {
    using namespace syncblob_suite;
    using Backend = typename TestType::device_backend;
    SYNCBLOB_REQUIRE_DEVICE(Backend);
    Buffer<TestType> buffer(0);
    CHECK(buffer.size() == 0);
    CHECK(buffer.head() == Head::uninitialized);
    (void)buffer.host_data();
    CHECK(buffer.head() == Head::at_host);
    (void)buffer.device_data();
    CHECK(buffer.head() == Head::synced);
    (void)buffer.mutable_device_data();
    CHECK(buffer.head() == Head::at_device);
    (void)buffer.host_data();
    CHECK(buffer.head() == Head::synced);
    (void)buffer.mutable_host_data();
    CHECK(buffer.head() == Head::at_host);
    buffer.push_to_device_async();
    CHECK(buffer.head() == Head::synced);
    (void)buffer.mutable_device_data();
    buffer.pull_to_host_async();
    CHECK(buffer.head() == Head::synced);
    buffer.set_host_data(static_cast<void*>(nullptr), 0);
    CHECK(buffer.head() == Head::at_host);
    buffer.set_device_data(nullptr, 0);
    CHECK(buffer.head() == Head::at_device);
    Buffer<TestType> other(0);
    other.copy_from(buffer);
    buffer.copy_from(other);
    CHECK(buffer.stats() == Stats{});
    CHECK(other.stats() == Stats{});
    CHECK(Host<TestType>::live() == 0);
}

// ---- copy_from -------------------------------------------------------------------------------------------

TEMPLATE_LIST_TEST_CASE("SyncedBuffer::copy_from copies on the side where the source is fresh",
                        "[memory][buffer][copy]", SuiteAllocators) {
    using namespace syncblob_suite;
    using Backend = typename TestType::device_backend;
    SYNCBLOB_REQUIRE_DEVICE(Backend);
    for (const Start start : {Start::at_device, Start::synced, Start::at_host}) {
        for (const Start target_start : all_starts) {
            INFO("source " << start_name(start) << ", target " << start_name(target_start));
            Buffer<TestType> source(n);
            prepare(source, start, pattern(60));
            Buffer<TestType> target(n);
            prepare(target, target_start, pattern(61));
            target.copy_from(source);
            CHECK(source.stats() == Stats{});  // the source had its fresh side: no copy there
            if (start == Start::at_host) {
                CHECK(target.head() == Head::at_host);
                CHECK(target.stats() == Stats{.host_allocations = has_host_block(target_start) ? 0u : 1u,
                                              .host_to_host = 1,
                                              .host_to_host_bytes = n});
                CHECK(host_bytes(target.host_data()) == pattern(60));
            } else {
                CHECK(target.head() == Head::at_device);
                CHECK(target.stats() == Stats{.device_allocations = has_device_block(target_start) ? 0u : 1u,
                                              .device_to_device = 1,
                                              .device_to_device_bytes = n});
                CHECK(device_bytes<Backend>(target.device_data()) == pattern(60));
                CHECK(host_bytes(target.host_data()) == pattern(60));
            }
        }
    }
}

TEMPLATE_LIST_TEST_CASE("SyncedBuffer::copy_from rejects a size mismatch and changes nothing", "[memory][buffer][copy]",
                        SuiteAllocators) {
    using namespace syncblob_suite;
    using Backend = typename TestType::device_backend;
    SYNCBLOB_REQUIRE_DEVICE(Backend);
    Buffer<TestType> source(n + 1);
    write_device(source, pattern(62, n + 1));
    Buffer<TestType> target(n);
    write_host(target, pattern(63));
    target.reset_stats();
    CHECK_THROWS_AS(target.copy_from(source), syncblob::ShapeError);
    CHECK_THROWS_WITH(target.copy_from(source),
                      Catch::Contains("copy_from") && Catch::Contains("101") && Catch::Contains("100"));
    CHECK_THROWS_AS(target.copy_from(source, n + 1), syncblob::ShapeError);
    CHECK(target.head() == Head::at_host);
    CHECK(target.stats() == Stats{});
    CHECK(host_bytes(target.host_data()) == pattern(63));
    // a prefix is fine
    target.copy_from(source, n);
    CHECK(device_bytes<Backend>(target.device_data()) == pattern(62, n));
}

TEMPLATE_LIST_TEST_CASE("SyncedBuffer::copy_from of a prefix keeps the rest of the target", "[memory][buffer][copy]",
                        SuiteAllocators) {
    using namespace syncblob_suite;
    using Backend = typename TestType::device_backend;
    SYNCBLOB_REQUIRE_DEVICE(Backend);
    Buffer<TestType> source(n);
    if constexpr (Backend::has_device) {
        write_device(source, pattern(66));
    } else {
        write_host(source, pattern(66));
    }
    const Bytes prefix = pattern(66);
    const auto with_prefix = [&prefix](Bytes rest) {
        std::copy(prefix.begin(), prefix.begin() + n / 2, rest.begin());
        return rest;
    };

    // a target fresh on the host: the copy runs where the source is fresh, and the tail survives
    Buffer<TestType> target(n);
    write_host(target, pattern(67));
    target.copy_from(source, n / 2);
    CHECK(host_bytes(target.host_data()) == with_prefix(pattern(67)));
    if constexpr (Backend::has_device) {
        CHECK(device_bytes<Backend>(target.device_data()) == with_prefix(pattern(67)));
        // the stale device side was brought up to date first: one H->D copy, then D->D
        CHECK(target.stats().host_to_device == 1);
        CHECK(target.stats().device_to_device == 1);
    }

    // a new target: the tail is zeros, never uninitialized memory
    Buffer<TestType> fresh(n);
    fresh.copy_from(source, n / 2);
    CHECK(host_bytes(fresh.host_data()) == with_prefix(zeros()));
}

// ---- overwriting a prefix -----------------------------------------------------------------------------------

TEMPLATE_LIST_TEST_CASE("SyncedBuffer overwrite of a prefix copies only the rest from the fresh side",
                        "[memory][buffer][overwrite]", SuiteAllocators) {
    using namespace syncblob_suite;
    using Backend = typename TestType::device_backend;
    SYNCBLOB_REQUIRE_DEVICE(Backend);
    if constexpr (Backend::has_device) {
        constexpr std::size_t prefix = 40;
        const auto with_prefix = [](Bytes rest, unsigned char byte) {
            std::fill(rest.begin(), rest.begin() + prefix, byte);
            return rest;
        };
        // host prefix over a stale host side: D->H of the n - prefix bytes after the prefix only
        Buffer<TestType> host(n);
        write_device(host, pattern(80));
        host.reset_stats();
        std::memset(host.mutable_host_data_for_overwrite(prefix), 0xAB, prefix);
        CHECK(host.head() == Head::at_host);
        CHECK(host.stats() == Stats{.host_allocations = 1, .device_to_host = 1, .device_to_host_bytes = n - prefix});
        CHECK(host_bytes(host.host_data()) == with_prefix(pattern(80), 0xAB));

        // device prefix over a stale device side: the mirror image
        Buffer<TestType> device(n);
        write_host(device, pattern(81));
        device.reset_stats();
        const Bytes written(prefix, 0xCD);
        syncblob_test::write_device<Backend>(device.mutable_device_data_for_overwrite(prefix), written.data(), prefix);
        CHECK(device.head() == Head::at_device);
        CHECK(device.stats() ==
              Stats{.device_allocations = 1, .host_to_device = 1, .host_to_device_bytes = n - prefix});
        CHECK(device_bytes<Backend>(device.device_data()) == with_prefix(pattern(81), 0xCD));
    }
    // a first touch: zeros after the prefix; a fresh writable side: nothing to do
    Buffer<TestType> fresh(n);
    std::memset(fresh.mutable_host_data_for_overwrite(n / 2), 0x11, n / 2);
    Bytes expected = zeros();
    std::fill(expected.begin(), expected.begin() + n / 2, 0x11);
    CHECK(host_bytes(fresh.host_data()) == expected);
    fresh.reset_stats();
    (void)fresh.mutable_host_data_for_overwrite(n / 2);
    CHECK(fresh.stats() == Stats{});
}

// ---- the device-id check ---------------------------------------------------------------------------------

TEMPLATE_LIST_TEST_CASE("SyncedBuffer refuses to touch its device block from another device",
                        "[memory][buffer][device-id]", SuiteAllocators) {
    using namespace syncblob_suite;
    using Backend = typename TestType::device_backend;
    using Device = syncblob_test::TestDevice<Backend>;
    SYNCBLOB_REQUIRE_DEVICE(Backend);
    const auto scope = syncblob_test::scoped_setup<Backend>({.device_count = 2});
    if (Device::count() < 2) {
        std::cout << "skipped: the device-id check needs two devices, this machine has " << Device::count()
                  << std::endl;
        return;
    }
    Device::set_device(0);
    Buffer<TestType> buffer(n);
    write_device(buffer, pattern(70));
    CHECK(buffer.device_id() == 0);
    buffer.reset_stats();
    Device::set_device(1);
    // every call that copies to or from the device block checks the current device
    CHECK_THROWS_AS(buffer.host_data(), syncblob::DeviceError);
    CHECK_THROWS_WITH(buffer.host_data(),
                      Catch::Contains("host_data") && Catch::Contains("device 0") && Catch::Contains("device 1"));
    CHECK_THROWS_AS(buffer.mutable_host_data(), syncblob::DeviceError);
    CHECK_THROWS_AS(buffer.pull_to_host_async(), syncblob::DeviceError);
    CHECK(buffer.head() == Head::at_device);
    CHECK(buffer.stats() == Stats{});
    Device::set_device(0);
    CHECK(host_bytes(buffer.host_data()) == pattern(70));
    write_host(buffer, pattern(71));
    buffer.reset_stats();
    Device::set_device(1);
    CHECK_THROWS_AS(buffer.device_data(), syncblob::DeviceError);
    CHECK_THROWS_AS(buffer.mutable_device_data(), syncblob::DeviceError);
    CHECK_THROWS_AS(buffer.push_to_device_async(), syncblob::DeviceError);
    CHECK_THROWS_WITH(buffer.push_to_device_async(), Catch::Contains("push_to_device_async") &&
                                                         Catch::Contains("device 0") && Catch::Contains("device 1"));
    CHECK(buffer.head() == Head::at_host);
    CHECK(buffer.stats() == Stats{});
    Device::set_device(0);
    CHECK(device_bytes<Backend>(buffer.device_data()) == pattern(71));
}
