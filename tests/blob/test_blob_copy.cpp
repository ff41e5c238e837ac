// SPDX-License-Identifier: BSD-2-Clause
// Blob: copy_from (where the source is fresh), share_data / share_diff, move-only, clone.

#include <cstdint>
#include <new>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <syncblob/blob.hpp>

#include "blob_test_support.hpp"
#include "checks.hpp"

using namespace blob_test;
using syncblob::Head;
using syncblob::Shape;
using syncblob::ShapeError;
using syncblob::SimulatedDevice;

namespace {
// Checking mode: a side made stale is overwritten, so a copy through a stale side shows.
SimulatedDevice::Settings checking() {
    SimulatedDevice::Settings s;
    s.checking = true;
    return s;
}

template <class To, class From>
concept can_copy_from = requires(To& to, const From& from) {
    to.copy_from(from);
};
}  // namespace

TEMPLATE_LIST_TEST_CASE("Blob copy_from copies where the source is fresh", "[blob]", SimulatedCases) {
    using B = typename TestType::blob;
    using T = typename TestType::element;
    const SimulatedDevice::Scope scope(checking());
    Checks checks;
    {  // a device-fresh source: device to device, no host transfer on either side
        B src{2, 3};
        write_pattern(src.mutable_host_data(), 0);
        (void)src.mutable_device_data();
        src.reset_stats();
        B dst{2, 3};
        write_pattern(dst.mutable_host_data(), 40);
        dst.reset_stats();
        dst.copy_from(src);
        BLOB_EQ(dst.data_stats().device_to_device, 1);
        BLOB_EQ(dst.data_stats().device_to_device_bytes, 6 * sizeof(T));
        BLOB_EQ(dst.data_stats().transfers(), 0);
        BLOB_EQ(dst.data_stats().host_to_host, 0);
        BLOB_EQ(src.data_stats().transfers(), 0);
        BLOB_EQ(dst.data_head(), Head::at_device);
        BLOB_TRUE(no_activity(dst.diff_stats()));
        BLOB_EQ((device_values<T, SimulatedDevice>(dst.device_data(), 6)), pattern<T>(6));
        BLOB_EQ(values(dst.host_data()), pattern<T>(6));
    }
    {  // Part::diff: the diff only
        B src{4};
        write_pattern(src.mutable_host_diff(), 10);
        (void)src.mutable_device_diff();
        write_pattern(src.mutable_host_data(), 70);
        B dst{4};
        write_pattern(dst.mutable_host_data(), 30);
        dst.reset_stats();
        src.reset_stats();
        dst.copy_from(src, syncblob::Part::diff);
        BLOB_EQ(dst.diff_stats().device_to_device, 1);
        BLOB_EQ(dst.diff_stats().transfers(), 0);
        BLOB_EQ(src.diff_stats().transfers(), 0);
        BLOB_TRUE(no_activity(dst.data_stats()));
        BLOB_TRUE(no_activity(src.data_stats()));
        BLOB_EQ(values(dst.host_data()), pattern<T>(4, 30));
        BLOB_EQ(values(dst.host_diff()), pattern<T>(4, 10));
    }
    {  // a host-fresh source: host to host, no device memory
        B src{3};
        write_pattern(src.mutable_host_data(), 5);
        B dst{3};
        dst.copy_from(src);
        BLOB_EQ(dst.data_stats().host_to_host, 1);
        BLOB_EQ(dst.data_stats().device_allocations, 0);
        BLOB_EQ(dst.data_stats().transfers(), 0);
        BLOB_EQ(values(dst.host_data()), pattern<T>(3, 5));
    }
    {  // a shape mismatch without reshape throws and leaves the target as it was; with reshape adopts it
        B src{2, 3};
        write_pattern(src.mutable_host_data(), 0);
        B dst{3, 2};
        write_pattern(dst.mutable_host_data(), 50);
        const auto before = dst.data_stats();
        BLOB_THROWS(ShapeError, dst.copy_from(src), "Blob::copy_from", "2 3 (6)", "3 2 (6)", "reshape");
        BLOB_EQ(dst.shape(), (Shape{3, 2}));
        BLOB_EQ(dst.capacity(), 6);
        BLOB_EQ(dst.data_stats(), before);
        BLOB_EQ(values(dst.host_data()), pattern<T>(6, 50));
        B big{4, 4};
        write_pattern(big.mutable_host_data(), 5);
        (void)big.mutable_device_data();
        dst.copy_from(big, syncblob::Reshape::allowed);
        BLOB_EQ(dst.shape(), (Shape{4, 4}));
        BLOB_EQ(dst.capacity(), 16);
        BLOB_EQ(values(dst.host_data()), pattern<T>(16, 5));
        const B none;
        BLOB_THROWS(ShapeError, dst.copy_from(none), "(0)");
        dst.copy_from(none, syncblob::Reshape::allowed);
        BLOB_EQ(dst.has_shape(), false);
    }
    {  // from a HostOnly blob into a Simulated blob, and back
        syncblob::Blob<T, syncblob::HostOnly> host{5};
        write_pattern(host.mutable_host_data(), 0);
        write_pattern(host.mutable_host_diff(), 20);
        B sim{5};
        sim.copy_from(host);
        sim.copy_from(host, syncblob::Part::diff);
        BLOB_EQ(values(sim.host_data()), pattern<T>(5, 0));
        BLOB_EQ(values(sim.host_diff()), pattern<T>(5, 20));
        BLOB_EQ(sim.data_stats().device_allocations, 0);
        write_pattern(sim.mutable_host_data(), 60);
        (void)sim.mutable_device_data();  // fresh on the device only
        host.copy_from(sim);
        BLOB_EQ(values(host.host_data()), pattern<T>(5, 60));
        syncblob::Blob<T, syncblob::HostOnly> adopted;
        adopted.copy_from(sim, syncblob::Reshape::allowed);
        BLOB_EQ(adopted.shape_string(), "5 (5)");
        BLOB_EQ(values(adopted.host_data()), pattern<T>(5, 60));
    }
    verify(checks);
}

TEST_CASE("Blob copy_from needs the same element type", "[blob]") {
    using F = syncblob::Blob<float, syncblob::Simulated>;
    using D = syncblob::Blob<double, syncblob::Simulated>;
    STATIC_REQUIRE(can_copy_from<F, F>);
    STATIC_REQUIRE(can_copy_from<F, syncblob::Blob<float>>);
    STATIC_REQUIRE_FALSE(can_copy_from<F, D>);
}

TEMPLATE_LIST_TEST_CASE("Blob share_data and share_diff", "[blob]", ZipCases) {
    using B = typename TestType::blob;
    using T = typename TestType::element;
    Checks checks;
    {  // the shared buffer outlives the blob it came from
        B a{2, 3};
        {
            B other{3, 2};
            write_pattern(other.mutable_host_data(), 0);
            a.share_data(other);
            BLOB_TRUE(a.data_buffer() == other.data_buffer());
        }
        BLOB_EQ(a.shape(), (Shape{2, 3}));  // sharing keeps the shape
        BLOB_EQ(values(a.host_data()), pattern<T>(6));
    }
    {  // writes through one are visible in the other; data and diff are shared separately
        B a{4};
        B b{4};
        a.share_data(b);
        write_pattern(a.mutable_host_data(), 9);
        BLOB_EQ(values(b.host_data()), pattern<T>(4, 9));
        write_pattern(a.mutable_host_diff(), 1);
        BLOB_EQ(values(b.host_diff()), zeros<T>(4));
        a.share_diff(b);
        write_pattern(b.mutable_host_diff(), 2);
        BLOB_EQ(values(a.host_diff()), pattern<T>(4, 2));
        a.reshape({8});  // growing gives a its own buffers
        BLOB_TRUE(a.data_buffer() != b.data_buffer());
        BLOB_EQ(values(b.host_data()), pattern<T>(4, 9));
    }
    {  // counts must match; a failed share changes nothing
        B a{4};
        B c{5};
        const auto* own = a.data_buffer().get();
        BLOB_THROWS(ShapeError, a.share_data(c), "Blob::share_data", "counts differ", "5 (5)", "4 (4)");
        BLOB_THROWS(ShapeError, a.share_diff(c), "Blob::share_diff", "counts differ");
        BLOB_TRUE(a.data_buffer().get() == own);
        const B none;
        BLOB_THROWS(ShapeError, a.share_data(none), "need a shape");
    }
    verify(checks);
}

TEMPLATE_LIST_TEST_CASE("Blob is move-only and clone is deep", "[blob]", AllCases) {
    using B = typename TestType::blob;
    using T = typename TestType::element;
    STATIC_REQUIRE_FALSE(std::is_copy_constructible_v<B>);
    STATIC_REQUIRE_FALSE(std::is_copy_assignable_v<B>);
    STATIC_REQUIRE(std::is_nothrow_move_constructible_v<B>);
    STATIC_REQUIRE(std::is_nothrow_move_assignable_v<B>);
    Checks checks;
    B a{2, 2};
    write_pattern(a.mutable_host_data(), 0);
    write_pattern(a.mutable_host_diff(), 50);
    const auto* memory = a.host_data().data();
    B m = std::move(a);  // moves the buffers, copies nothing
    BLOB_EQ(m.shape(), (Shape{2, 2}));
    BLOB_TRUE(m.host_data().data() == memory);
    BLOB_EQ(a.has_shape(), false);  // NOLINT(bugprone-use-after-move): moved-from blobs are empty
    BLOB_EQ(a.count(), 0);
    B n;
    n = std::move(m);
    BLOB_EQ(values(n.host_data()), pattern<T>(4));
    swap(n, m);
    BLOB_EQ(values(m.host_data()), pattern<T>(4));

    B c = m.clone();
    BLOB_EQ(c.shape(), m.shape());
    BLOB_EQ(values(c.host_data()), pattern<T>(4));
    BLOB_EQ(values(c.host_diff()), pattern<T>(4, 50));
    BLOB_TRUE(c.host_data().data() != m.host_data().data());
    write_pattern(c.mutable_host_data(), 80);
    write_pattern(m.mutable_host_diff(), 90);
    BLOB_EQ(values(m.host_data()), pattern<T>(4));
    BLOB_EQ(values(c.host_diff()), pattern<T>(4, 50));
    BLOB_EQ(B{}.clone().has_shape(), false);
    if constexpr (has_device<typename TestType::allocator>) {  // a device-fresh blob clones device to device
        (void)m.mutable_device_data();
        const auto d = m.clone();
        BLOB_EQ(d.data_stats().device_to_device, 1);
        BLOB_EQ(d.data_stats().transfers(), 0);
        BLOB_EQ((device_values<T, SimulatedDevice>(d.device_data(), 4)), pattern<T>(4));
    }
    verify(checks);
}

TEST_CASE("Blob share_data and share_diff refuse a shapeless blob even after reserve", "[blob][hostile]") {
    syncblob::Blob<float> a;
    a.reserve(4);  // buffers, but no shape and no elements
    syncblob::Blob<float> b;
    b.reserve(4);
    CHECK_THROWS_WITH(a.share_data(b), Catch::Contains("Blob::share_data") && Catch::Contains("need a shape"));
    CHECK_THROWS_AS(a.share_diff(b), syncblob::ShapeError);
    CHECK(a.data_buffer() != b.data_buffer());
    syncblob::Blob<float> shaped{0};
    CHECK_THROWS_AS(shaped.share_data(a), syncblob::ShapeError);
    CHECK_THROWS_AS(a.share_data(shaped), syncblob::ShapeError);
}

TEST_CASE("Blob keeps its whole state through a failed copy_from, and swap and move carry all of it", "[blob][state]") {
    using B = syncblob::Blob<float, syncblob::Simulated>;
    const SimulatedDevice::Scope scope({});
    const auto stream = SimulatedDevice::create_stream();
    B source{3};
    source.fill(4.0f);
    (void)source.mutable_device_data();  // device-fresh: the copy allocates the target's device side

    B target{2};
    target.fill(1.0f);
    target.set_stream(stream);
    target.fix_layout("the test's arena");
    const auto data = target.data_buffer();
    const auto stats = target.data_stats();
    {  // the same shape, so the fixed layout allows the copy, which then fails to allocate
        B same{2};
        same.fill(2.0f);
        (void)same.mutable_device_data();
        const SimulatedDevice::Scope failing({.fail_allocation = 1});
        CHECK_THROWS_AS(target.copy_from(same), std::bad_alloc);
    }
    CHECK(target.stream() == stream);
    CHECK(target.layout_owner() == std::string("the test's arena"));
    CHECK(target.data_buffer() == data);
    CHECK(target.data_buffer()->stream() == stream);
    CHECK(target.data_stats() == stats);
    CHECK(target.host_data()[1] == 1.0f);

    B free_target{2};
    free_target.set_stream(stream);
    (void)free_target.mutable_host_data();
    free_target.reshape({2, 2});  // a new buffer: the old one's allocation is retired
    (void)free_target.mutable_host_data();
    free_target.reshape({2});
    const auto history = free_target.data_stats();
    REQUIRE(history.host_allocations == 2);
    B wide{6};  // more than the capacity: the copy replaces the buffers, retiring the current ones, then fails
    wide.fill(3.0f);
    (void)wide.mutable_device_data();
    {  // a copy that reshapes first, then fails: the old shape, buffers, stream and counts come back
        const SimulatedDevice::Scope failing({.fail_allocation = 1});
        CHECK_THROWS_AS(free_target.copy_from(source, syncblob::Reshape::allowed), std::bad_alloc);
    }
    {
        const SimulatedDevice::Scope failing({.fail_allocation = 1});
        CHECK_THROWS_AS(free_target.copy_from(wide, syncblob::Reshape::allowed), std::bad_alloc);
    }
    CHECK(free_target.data_stats() == history);  // the retired counts were the snapshot's own, not shared
    CHECK(free_target.shape_string() == "2 (2)");
    CHECK(free_target.stream() == stream);
    CHECK(free_target.data_buffer()->stream() == stream);
    CHECK_FALSE(free_target.layout_fixed());

    // swap and move exchange every member, the stream and the layout mark included
    B other{5};
    swap(target, other);
    CHECK(other.stream() == stream);
    CHECK(other.layout_owner() == std::string("the test's arena"));
    CHECK(target.stream() == SimulatedDevice::default_stream());
    CHECK_FALSE(target.layout_fixed());
    CHECK(target.shape_string() == "5 (5)");
    B moved = std::move(other);
    CHECK(moved.stream() == stream);
    CHECK(moved.layout_fixed());
    CHECK(moved.data_buffer() == data);
    CHECK_FALSE(other.layout_fixed());  // NOLINT(bugprone-use-after-move): a moved-from blob is empty and free
    CHECK(other.stream() == SimulatedDevice::default_stream());
}

TEST_CASE("the counts of replaced buffers: allocations inline, any other count or a large one in a block",
          "[blob][stats]") {
    using syncblob::TransferStats;
    using syncblob::detail::RetiredCounts;
    TransferStats allocated;
    allocated.host_allocations = 1;
    allocated.device_allocations = 2;
    RetiredCounts counts;
    CHECK(counts.get() == TransferStats{});
    counts.add(TransferStats{});
    CHECK(counts.get() == TransferStats{});
    counts.add(allocated);
    counts.add(allocated);
    CHECK_FALSE(counts.in_block());  // a blob loaded again and again makes no block
    TransferStats want = allocated + allocated;
    CHECK(counts.get() == want);

    RetiredCounts copy = counts;  // an inline copy is the same word
    TransferStats copied;
    copied.host_to_host = 3;
    copied.host_to_host_bytes = 12;
    counts.add(copied);  // another count: a block, which keeps the allocations counted inline
    CHECK(counts.in_block());
    want += copied;
    CHECK(counts.get() == want);
    CHECK(copy.get() == allocated + allocated);  // the copy did not change with it

    RetiredCounts block_copy = counts;  // a block is copied, not shared
    block_copy.add(allocated);
    CHECK(counts.get() == want);
    CHECK(block_copy.get() == want + allocated);
    block_copy = counts;  // assigned over a block of its own
    CHECK(block_copy.get() == want);
    auto& self = block_copy;
    block_copy = self;
    CHECK(block_copy.get() == want);
    RetiredCounts moved = std::move(block_copy);
    CHECK(moved.get() == want);
    CHECK(block_copy.get() == TransferStats{});  // NOLINT(bugprone-use-after-move): a moved-from count is empty
    moved.reset();
    CHECK(moved.get() == TransferStats{});
    CHECK_FALSE(moved.in_block());

    // Allocation counts past their inline bits take a block, exactly.
    TransferStats many;
    many.host_allocations = std::uint64_t{1} << 31;
    RetiredCounts large;
    large.add(allocated);
    large.add(many);
    CHECK(large.in_block());
    CHECK(large.get() == allocated + many);
    TransferStats most;
    most.host_allocations = (std::uint64_t{1} << 31) - 1;
    most.device_allocations = (std::uint64_t{1} << 32) - 1;
    RetiredCounts full;
    full.add(most);
    CHECK_FALSE(full.in_block());
    CHECK(full.get() == most);
    TransferStats devices;
    devices.device_allocations = std::uint64_t{1} << 32;
    RetiredCounts wide;
    wide.add(devices);
    CHECK(wide.in_block());
    CHECK(wide.get() == devices);
}
