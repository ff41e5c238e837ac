// SPDX-License-Identifier: BSD-2-Clause
// ParameterArena: layout, one allocation per buffer, sealing, fixed shapes, buckets.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <syncblob/arena.hpp>

#include <syncblob/sim/device.hpp>

#include "../io/peak_memory.hpp"
#include "../memory/counting_allocator.hpp"
#include "device_guard.hpp"

using syncblob::Blob;
using syncblob::Bucket;
using syncblob::HostOnly;
using syncblob::ParameterArena;
using syncblob::Shape;
using syncblob::Simulated;
using syncblob::SimulatedDevice;

namespace {

using CountingHost = syncblob_test::CountingHost<syncblob::AlignedAllocator>;
struct CountingSimulated {
    using host_allocator = CountingHost;
    using device_backend = SimulatedDevice;
};

template <class Arena>
void add_model(Arena& arena) {  // uneven blobs, one of them empty
    arena.add({3});
    arena.add({0});
    arena.add({2, 5});
    arena.add({100});
    arena.add({1});
}

}  // namespace

TEMPLATE_TEST_CASE("ParameterArena lays its blobs out as aligned slices of one data and one diff block", "[arena]",
                   HostOnly, Simulated) {
    SimulatedDevice::Scope scope({.checking = true});
    ParameterArena<float, TestType> arena;
    add_model(arena);
    CHECK_FALSE(arena.sealed());
    CHECK(arena.bytes() == 0);
    arena.seal();
    REQUIRE(arena.sealed());
    REQUIRE(arena.size() == 5);
    CHECK(arena.count() == 3 + 0 + 10 + 100 + 1);

    const std::vector<std::size_t> offsets{0, 256, 256, 512, 1024};
    const std::vector<std::size_t> bytes{12, 0, 40, 400, 4};
    for (std::size_t i = 0; i < arena.size(); ++i) {
        CHECK(arena.slice(i).offset == offsets[i]);
        CHECK(arena.slice(i).bytes == bytes[i]);
    }
    CHECK(arena.bytes() == 1280);

    const auto data = arena.flat_data().host_data();
    const auto diff = arena.flat_diff().host_data();
    REQUIRE(data.size() == 1280 / sizeof(float));
    CHECK(reinterpret_cast<std::uintptr_t>(data.data()) % ParameterArena<float, TestType>::alignment == 0);
    CHECK(reinterpret_cast<std::uintptr_t>(diff.data()) % ParameterArena<float, TestType>::alignment == 0);
    CHECK(std::all_of(data.begin(), data.end(), [](float x) { return x == 0.0f; }));
    CHECK(std::all_of(diff.begin(), diff.end(), [](float x) { return x == 0.0f; }));
    for (std::size_t i = 0; i < arena.size(); ++i) {
        auto& blob = arena[i];
        CHECK(blob.data_head() == (blob.count() == 0 ? syncblob::Head::uninitialized : syncblob::Head::at_host));
        if (blob.count() != 0) {
            CHECK(blob.host_data().data() == data.data() + offsets[i] / sizeof(float));
            CHECK(blob.mutable_host_diff().data() == diff.data() + offsets[i] / sizeof(float));
        }
    }
    // Writing one blob touches its slice only.
    std::ranges::fill(arena[3].mutable_host_data(), 2.5f);
    const auto after = arena.flat_data().host_data();
    CHECK(std::count(after.begin(), after.end(), 2.5f) == 100);
    CHECK(std::all_of(arena[2].host_data().begin(), arena[2].host_data().end(), [](float x) { return x == 0.0f; }));
}

TEST_CASE("ParameterArena makes one allocation per buffer and side, and nothing more", "[arena]") {
    SimulatedDevice::Scope scope({});
    auto& counters = CountingHost::counters();
    const auto host_before = counters.allocations.load();
    const auto device_before = SimulatedDevice::live_blocks();
    {
        ParameterArena<double, CountingSimulated> arena;
        add_model(arena);
        CHECK(counters.allocations.load() == host_before);  // nothing before seal
        arena.seal();
        CHECK(counters.allocations.load() == host_before + 2);       // data and diff, host
        CHECK(SimulatedDevice::live_blocks() == device_before + 2);  // data and diff, device
        for (auto& blob : arena.blobs()) {
            blob.fill(1.0);
            (void)blob.device_data();
            (void)blob.mutable_device_diff();
            (void)blob.host_diff();
            CHECK(blob.data_stats().host_allocations == 0);
            CHECK(blob.data_stats().device_allocations == 0);
            CHECK(blob.diff_stats().host_allocations == 0);
            CHECK(blob.diff_stats().device_allocations == 0);
        }
        CHECK(counters.allocations.load() == host_before + 2);
        CHECK(SimulatedDevice::live_blocks() == device_before + 2);
    }
    CHECK(CountingHost::live() == 0);
    CHECK(SimulatedDevice::live_blocks() == device_before);
}

TEST_CASE("ParameterArena keeps what a blob was given before seal", "[arena]") {
    SimulatedDevice::Scope scope({});
    ParameterArena<float, Simulated> arena;
    auto& a = arena.add({4});
    auto& b = arena.add({2});
    {
        auto s = a.mutable_host_data();
        std::iota(s.begin(), s.end(), 1.0f);
    }
    float* device = b.mutable_device_diff();  // fresh on the device only: seal copies it back
    const std::vector<float> values{7.0f, 8.0f};
    syncblob_test::write_device<SimulatedDevice>(device, values.data(), sizeof(float) * 2);
    arena.seal();
    CHECK(std::ranges::equal(a.host_data(), std::vector<float>{1, 2, 3, 4}));
    CHECK(std::ranges::equal(b.host_diff(), values));
    CHECK(std::ranges::equal(a.host_data(), arena.flat_data().host_data().subspan(0, 4)));
    CHECK(b.host_diff().data() == arena.flat_diff().host_data().data() + 64);
}

TEST_CASE("ParameterArena lays out the shapes its blobs have at seal, a blob reshaped before it included", "[arena]") {
    SimulatedDevice::Scope scope({});
    ParameterArena<float, Simulated> arena;
    auto& a = arena.add({2});
    auto& b = arena.add({3});
    b.reshape({2, 40});  // before seal a blob is the caller's to shape
    b.fill(5.0f);
    a.reshape({0});
    arena.seal();
    CHECK(a.shape() == Shape{0});
    CHECK(b.shape() == Shape{2, 40});
    CHECK(arena.slice(0).bytes == 0);
    CHECK(arena.slice(1).bytes == 80 * sizeof(float));
    CHECK(arena.bytes() == 512);  // 320 bytes of b, padded to the alignment
    CHECK(std::ranges::all_of(b.host_data(), [](float v) { return v == 5.0f; }));
    CHECK(b.host_data().data() == arena.flat_data().host_data().data());
    CHECK(b.mutable_device_data() == arena.flat_data().mutable_device_data());
    CHECK(arena[1].shape() == Shape{2, 40});
    CHECK(std::ranges::equal(arena.shapes()[1], std::vector<std::int64_t>{2, 40}));
    CHECK_NOTHROW(arena.flat());
}

TEST_CASE("ParameterArena::seal refuses a blob moved out before it, and leaves every blob as it was", "[arena]") {
    SimulatedDevice::Scope scope({});
    ParameterArena<float, Simulated> arena;
    auto& a = arena.add({4});
    (void)arena.add({3});
    (void)arena.add({2});
    a.fill(1.0f);
    const float* own = a.host_data().data();
    Blob<float, Simulated> taken = std::move(arena[1]);
    CHECK_THROWS_WITH(arena.seal(),
                      Catch::Contains("ParameterArena::seal: blob 1 has no shape") && Catch::Contains("of 3 blobs"));
    CHECK_FALSE(arena.sealed());
    CHECK_FALSE(a.layout_fixed());  // blob 0, before the bad one, was not lent its slices
    CHECK(a.host_data().data() == own);
    CHECK_THROWS_AS(arena.flat(), syncblob::StateError);
    arena[1] = std::move(taken);
    arena.seal();
    CHECK(a.layout_fixed());
    CHECK(arena[1].layout_fixed());
    CHECK(a.host_data()[3] == 1.0f);
    CHECK(arena.slice(2).offset == 512);
}
TEST_CASE("ParameterArena refuses changes after seal, before any data moves", "[arena]") {
    ParameterArena<float> arena;
    auto& w = arena.add({2, 3});
    arena.add({4});
    CHECK_THROWS_AS(arena.slice(0), syncblob::StateError);
    CHECK_THROWS_WITH(arena.flat_diff(), Catch::Contains("not sealed"));
    CHECK_THROWS_AS(arena.buckets(), syncblob::StateError);
    arena.seal();
    CHECK_THROWS_AS(arena.seal(), syncblob::StateError);
    CHECK_THROWS_WITH(arena.add({5}), Catch::Contains("sealed") && Catch::Contains("2 blobs"));
    CHECK(arena.size() == 2);
    CHECK_THROWS_AS(arena.slice(2), syncblob::IndexError);

    SECTION("a reshape to another shape is refused at once; the same shape is allowed") {
        w.mutable_host_data()[4] = 7.0F;
        const float* slice = w.host_data().data();
        CHECK_THROWS_WITH(w.reshape({3, 2}), Catch::Contains("Blob::reshape") &&
                                                 Catch::Contains("fixed by ParameterArena::seal") &&
                                                 Catch::Contains("2 3 (6)") && Catch::Contains("3 2 (6)"));
        CHECK_THROWS_AS(w.reshape({12}), syncblob::StateError);
        CHECK_THROWS_AS(w.reshape_like(syncblob::Blob<float>({1})), syncblob::StateError);
        CHECK_THROWS_AS(w.reserve(100), syncblob::StateError);
        CHECK(w.shape() == Shape{2, 3});
        CHECK(w.host_data().data() == slice);
        CHECK(w.host_data()[4] == 7.0F);
        w.reshape({2, 3});  // what a layer does on every forward pass
        w.reserve(6);
        w.shrink_to_fit();
        CHECK(w.host_data().data() == slice);
        CHECK_NOTHROW(arena.flat_diff());
    }
    SECTION("other buffers are refused at once") {
        syncblob::Blob<float> other({4});
        std::vector<float> lent(4, 1.0F);
        CHECK_THROWS_WITH(arena[1].share_diff(other),
                          Catch::Contains("Blob::share_diff") && Catch::Contains("fixed by ParameterArena::seal"));
        CHECK_THROWS_AS(arena[1].share_data(other), syncblob::StateError);
        CHECK_THROWS_AS(arena[1].set_host_data(lent.data(), lent.size()), syncblob::StateError);
        CHECK_THROWS_AS(arena[1].copy_from(syncblob::Blob<float>({5}), syncblob::Reshape::allowed),
                        syncblob::StateError);
        CHECK(arena[1].shape() == Shape{4});
        CHECK_NOTHROW(arena.flat_data());
        arena[1].copy_from(other);  // same shape: a copy into the slice
        CHECK_NOTHROW(arena.flat_data());
        CHECK(arena[1].layout_fixed());
        CHECK_FALSE(other.layout_fixed());
    }
    SECTION("a blob of another shape in a blob's place, with its slices' buffers but not seal's mark") {
        syncblob::Blob<float> other({3, 2});
        other.share_data(w);  // the same count: both buffers shared, the shape another
        other.share_diff(w);
        syncblob::Blob<float> taken = std::move(w);
        w = std::move(other);
        CHECK(w.data_buffer() == taken.data_buffer());
        CHECK_FALSE(w.layout_fixed());
        CHECK_THROWS_WITH(arena.flat(), Catch::Contains("blob 0 (6 elements at seal, 3 2 (6) now) no longer uses"));
        w = std::move(taken);
        CHECK(w.shape() == Shape{2, 3});
        CHECK_NOTHROW(arena.flat());
    }
    SECTION("a blob moved out") {
        syncblob::Blob<float> taken = std::move(w);
        CHECK_THROWS_AS(arena.flat_data(), syncblob::StateError);
        CHECK_THROWS_WITH(arena.seal(), Catch::Contains("already sealed"));
        CHECK_THROWS_WITH(arena.flat("a load"),
                          Catch::Contains("a load: blob 0 (6 elements at seal) has no shape now: it was moved out"));
    }
}

TEST_CASE("ParameterArena::flat is flat_data() and flat_diff() together, checked as they are", "[arena]") {
    ParameterArena<float> arena;
    (void)arena.add({3});
    (void)arena.add({5});
    CHECK_THROWS_WITH(arena.flat(), Catch::Contains("ParameterArena::flat: the arena is not sealed"));
    arena.seal();
    arena[1].fill(2.0f);
    arena[1].fill_diff(-1.0f);
    auto both = arena.flat();
    CHECK(both.data.host_data().data() == arena.flat_data().host_data().data());
    CHECK(both.diff.host_data().data() == arena.flat_diff().host_data().data());
    CHECK(both.data.host_data()[arena.slice(1).offset / sizeof(float)] == 2.0f);
    CHECK(both.diff.host_data()[arena.slice(1).offset / sizeof(float)] == -1.0f);
}

TEST_CASE("a blob changed anywhere in an arena of many blobs is found, the first one named", "[arena]") {
    // Enough blobs that ParameterArena::check splits its pass among the threads. With two parts,
    // the part that finds its changed blob last may hold the first one (blobs 0 and n - 1) or the
    // second one (blobs half - 1 and half); the error names the first blob either way.
    constexpr std::size_t n = 70'000;
    constexpr std::size_t half = n / 2;
    ParameterArena<float> arena;
    for (std::size_t i = 0; i < n; ++i) {
        (void)arena.add({1});
    }
    arena.seal();
    CHECK_NOTHROW(arena.flat());
    Blob<float> last = std::move(arena[n - 1]);
    CHECK_THROWS_WITH(arena.flat(),
                      Catch::Contains("blob " + std::to_string(n - 1) + " (1 element at seal) has no shape"));
    Blob<float> first = std::move(arena[0]);
    CHECK_THROWS_WITH(arena.flat(), Catch::Contains("blob 0 (1 element at seal) has no shape"));
    arena[0] = std::move(first);
    arena[n - 1] = std::move(last);
    CHECK_NOTHROW(arena.flat());

    Blob<float> other({1});
    arena[half].swap(other);  // the same shape, a buffer of its own
    CHECK_THROWS_WITH(arena.flat_data(), Catch::Contains("blob " + std::to_string(half) +
                                                         " (1 element at seal, 1 (1) now) no longer uses"));
    const Blob<float> before_half = std::move(arena[half - 1]);
    CHECK_THROWS_WITH(arena.flat_diff(), Catch::Contains("blob " + std::to_string(half - 1) + " (1 element at seal)"));
}

TEST_CASE("ParameterArena of empty blobs only, or of none", "[arena]") {
    ParameterArena<float, Simulated> none;
    none.seal();
    CHECK(none.bytes() == 0);
    CHECK(none.buckets().empty());
    CHECK(none.flat_diff().host_data().empty());

    ParameterArena<float, Simulated> empty;
    empty.add({0});
    empty.add({3, 0});
    empty.seal();
    CHECK(empty.bytes() == 0);
    CHECK(empty[1].host_diff().empty());
    const auto buckets = empty.buckets();
    REQUIRE(buckets.size() == 1);
    CHECK(buckets[0] == Bucket{0, 2, 0, 0});
}

TEST_CASE("ParameterArena::buckets: contiguous runs of whole blobs in reverse order of addition", "[arena]") {
    ParameterArena<float> arena;
    for (std::int64_t n : {64, 0, 64, 64, 640, 64}) {  // 256 B blobs, an empty one, a 2560 B one
        arena.add({n});
    }
    arena.seal();
    CHECK(arena.bytes() == 256 * 4 + 2560);

    const auto check_partition = [&](const std::vector<Bucket>& buckets) {
        std::size_t expected_end = arena.size();
        for (const auto& b : buckets) {
            CHECK(b.end == expected_end);
            CHECK(b.first < b.end);
            CHECK(b.offset == arena.slice(b.first).offset);
            CHECK(b.bytes == arena.slice(b.end - 1).offset + arena.slice(b.end - 1).bytes - b.offset);
            expected_end = b.first;
        }
        CHECK(expected_end == 0);
    };

    const auto two = arena.buckets(512);  // two 256 B blobs per run (the empty one joins in); the large blob alone
    check_partition(two);
    CHECK(two == std::vector<Bucket>{{5, 6, 3328, 256}, {4, 5, 768, 2560}, {1, 4, 256, 512}, {0, 1, 0, 256}});

    const auto first_small = arena.buckets(256, 1 << 20);  // the first run 256 B, then all the rest
    check_partition(first_small);
    CHECK(first_small == std::vector<Bucket>{{5, 6, 3328, 256}, {0, 5, 0, 3328}});

    const auto defaults = arena.buckets();  // 1 MiB first: everything in one run
    CHECK(defaults == std::vector<Bucket>{{0, 6, 0, 3584}});

    CHECK_THROWS_AS(arena.buckets(0), syncblob::ShapeError);
    CHECK_THROWS_AS(arena.buckets(1, 0), syncblob::ShapeError);
}

TEST_CASE("ParameterArena::buckets: the defaults are 1 MiB first, then 25 MiB", "[arena]") {
    ParameterArena<float> arena;
    constexpr std::int64_t mib = (1 << 20) / 4;  // floats per MiB
    for (int i = 0; i < 30; ++i) {
        arena.add({mib});
    }
    arena.seal();
    const auto buckets = arena.buckets();
    REQUIRE(buckets.size() == 3);
    CHECK(buckets[0].first == 29);
    CHECK(buckets[0].bytes == (std::size_t{1} << 20));
    CHECK(buckets[1].end == 29);
    CHECK(buckets[1].end - buckets[1].first == 25);
    CHECK(buckets[2].first == 0);
    CHECK(buckets[2].end == 4);
}

TEST_CASE("ParameterArena: a large arena's zeros take no memory until its blobs are written", "[arena]") {
    // 2 x 64 MiB of zeros from fresh pages: seal must not write them (each page would then be
    // touched twice, by the fill and by the first real write, and all of it resident at once).
    constexpr std::int64_t elements = std::int64_t{16} << 20;
    const auto growth = test::peak_growth_bytes([] {
        ParameterArena<float> arena;
        arena.add({elements});
        arena.add({3});
        arena.seal();
        const auto data = arena[0].host_data();
        const auto diff = arena[1].host_diff();
        if (data[0] != 0.0f || data[static_cast<std::size_t>(elements) - 1] != 0.0f || diff[2] != 0.0f) {
            throw std::runtime_error("an arena's blob is not zero");
        }
        arena[1].mutable_host_data()[0] = 1.0f;
    });
    REQUIRE(growth);
    // Written zeros would make all 128 MiB resident (134 MB measured); untouched, what remains is
    // the test's own pages and, under AddressSanitizer, the blocks' shadow (an eighth: 16 MiB).
    CHECK(*growth < std::uint64_t{40} << 20);
}

TEST_CASE("AlignedAllocator::allocate_zeroed: zeros, aligned, from fresh pages when large", "[arena][memory]") {
    using syncblob::AlignedAllocator;
    for (const std::size_t bytes :
         {std::size_t{0}, std::size_t{1}, std::size_t{1000}, AlignedAllocator::fresh_pages_from - 1,
          AlignedAllocator::fresh_pages_from, AlignedAllocator::fresh_pages_from + 4097}) {
        CAPTURE(bytes);
        const syncblob::HostBlock block = AlignedAllocator::allocate_zeroed(bytes);
        if (bytes == 0) {
            CHECK(block.data == nullptr);
            continue;
        }
        REQUIRE(block.data != nullptr);
        CHECK(block.bytes == bytes);
        CHECK(reinterpret_cast<std::uintptr_t>(block.data) % AlignedAllocator::alignment == 0);
        CHECK(((block.kind & AlignedAllocator::zeroed) != 0) == (bytes >= AlignedAllocator::fresh_pages_from));
        const auto* p = static_cast<const unsigned char*>(block.data);
        CHECK(std::all_of(p, p + std::min<std::size_t>(bytes, 4096), [](unsigned char c) { return c == 0; }));
        CHECK(p[bytes - 1] == 0);
        CHECK(p[bytes / 2] == 0);
        std::memset(block.data, 0x5A, bytes);  // the whole block is writable
        AlignedAllocator::deallocate(block);   // and freed the way it was obtained (ASan checks)
    }
    CHECK_THROWS_AS(AlignedAllocator::allocate_zeroed(SIZE_MAX - 8), std::bad_alloc);
}

// The names flat_data and flat_diff had before 0.2, deprecated: a user sees the warning; this test is
// the one place that uses them.
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif
TEST_CASE("an arena's data_buffer() and diff_buffer() are its flat_data() and flat_diff()", "[arena][moved]") {
    ParameterArena<float> arena;
    (void)arena.add({3});
    (void)arena.add({5});
    arena.seal();
    arena[1].fill(2.0f);
    CHECK(arena.data_buffer().host_data().data() == arena.flat_data().host_data().data());
    CHECK(arena.diff_buffer().host_data().data() == arena.flat_diff().host_data().data());
    CHECK(arena.data_buffer().host_data()[arena.slice(1).offset / sizeof(float)] == 2.0f);
    ParameterArena<float> unsealed;
    (void)unsealed.add({1});
    CHECK_THROWS_AS(unsealed.data_buffer(), syncblob::StateError);  // the same checks, under the old name
}
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
