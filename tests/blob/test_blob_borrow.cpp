// SPDX-License-Identifier: BSD-2-Clause
// Blob::set_host_data / set_device_data never borrow memory a buffer of the blob owns: the buffer
// would free it (now, or on reshape, share_* or destruction) and leave the borrow dangling.

#include <catch2/catch.hpp>

#include <cstddef>
#include <memory>
#include <string_view>
#include <vector>

#include <syncblob/blob.hpp>
#include <syncblob/memory/no_device.hpp>
#include <syncblob/sim/device.hpp>

using syncblob::Blob;
using syncblob::Head;

namespace {

// A blob of 8 elements reshaped to 4: its buffers keep a capacity of 8, above the count.
template <class A = syncblob::HostOnly>
Blob<float, A> shrunk_blob() {
    Blob<float, A> b{8};
    b.reshape({4});
    REQUIRE(b.capacity() == 8);
    for (std::size_t i = 0; i < 4; ++i) {
        b.mutable_host_data()[i] = static_cast<float>(i + 1);
        b.mutable_host_diff()[i] = static_cast<float>(10 * (i + 1));
    }
    return b;
}

template <class A>
void check_unchanged(const Blob<float, A>& b) {
    CHECK(b.capacity() == 8);
    CHECK_FALSE(b.data_buffer()->host_borrowed());
    for (std::size_t i = 0; i < 4; ++i) {
        CHECK(b.host_data()[i] == static_cast<float>(i + 1));
        CHECK(b.host_diff()[i] == static_cast<float>(10 * (i + 1)));
    }
}

}  // namespace

TEST_CASE("Blob set_host_data refuses the data's own block when the capacity exceeds the count",
          "[blob][hostile][borrow]") {
    // Used to be accepted: the data moved to a new buffer borrowing the old block, which was then
    // freed (ASan: heap-use-after-free on the next read).
    auto b = shrunk_blob();
    float* own = b.mutable_host_data().data();
    CHECK_THROWS_AS(b.set_host_data(own, 4), syncblob::StateError);
    CHECK_THROWS_WITH(b.set_host_data(own, 4),
                      Catch::Contains("Blob::set_host_data") && Catch::Contains("belongs to this blob's data"));
    // any offset inside the block, the tail past count() included, and the read-only overload
    CHECK_THROWS_AS(b.set_host_data(own + 1, 4), syncblob::StateError);
    CHECK_THROWS_AS(b.set_host_data(own + 4, 4), syncblob::StateError);
    CHECK_THROWS_AS(b.set_host_data(static_cast<const float*>(own + 2), 4), syncblob::StateError);
    check_unchanged(b);
}

TEST_CASE("Blob set_host_data refuses the diff's own block at any offset when the capacity exceeds the count",
          "[blob][hostile][borrow]") {
    auto b = shrunk_blob();
    float* diff = b.mutable_host_diff().data();
    CHECK_THROWS_WITH(b.set_host_data(diff, 4), Catch::Contains("belongs to this blob's diff"));
    CHECK_THROWS_AS(b.set_host_data(diff + 4, 4), syncblob::StateError);
    check_unchanged(b);
}

TEST_CASE("Blob set_host_data refuses a data buffer shared with another blob", "[blob][hostile][borrow]") {
    // `b` shares `owner`'s buffer of capacity 8 with a count of 4: lending that buffer's block to
    // `b` would leave `b` borrowing memory that `owner` frees when it lets go of it.
    auto owner = shrunk_blob();
    Blob<float> b{4};
    b.share_data(owner);
    float* shared = owner.mutable_host_data().data();
    CHECK_THROWS_AS(b.set_host_data(shared, 4), syncblob::StateError);
    CHECK(b.data_buffer() == owner.data_buffer());
    check_unchanged(owner);
}

TEST_CASE("Blob set_device_data refuses the data's own device block when the capacity exceeds the count",
          "[blob][hostile][borrow][simulated]") {
    const syncblob::SimulatedDevice::Scope scope{syncblob::SimulatedDevice::Settings{}};
    auto b = shrunk_blob<syncblob::Simulated>();
    float* device = b.mutable_device_data();
    CHECK_THROWS_AS(b.set_device_data(device, 4), syncblob::StateError);
    CHECK_THROWS_AS(b.set_device_data(device + 3, 4), syncblob::StateError);
    float* device_diff = b.mutable_device_diff();
    CHECK_THROWS_AS(b.set_device_data(device_diff + 1, 4), syncblob::StateError);
    CHECK(b.data_head() == Head::at_device);
    check_unchanged(b);
}

TEST_CASE("Blob set_host_data still lends foreign memory to a blob whose capacity exceeds the count",
          "[blob][borrow]") {
    auto b = shrunk_blob();
    std::vector<float> theirs{7, 8, 9, 10};
    b.set_host_data(theirs.data(), theirs.size());
    CHECK(b.host_data().data() == theirs.data());
    CHECK(b.capacity() == 4);
    CHECK(b.host_diff()[3] == 40.0f);
}

namespace {

// Hands out blocks 64 bytes into a static arena (reporting `reported` bytes for a request of
// `bytes`), so a test can borrow memory that starts before an owned block and runs into it.
struct ArenaAllocator {
    static constexpr std::string_view name = "ArenaAllocator";
    alignas(64) static inline std::byte arena[512]{};
    static inline std::size_t extra = 0;  // bytes reported beyond the request
    static syncblob::HostBlock allocate(std::size_t bytes) { return {arena + 64, bytes + extra, 0}; }
    static void deallocate(syncblob::HostBlock) noexcept {}
};
static_assert(syncblob::HostAllocator<ArenaAllocator>);
using ArenaBuffer = syncblob::SyncedBuffer<ArenaAllocator, syncblob::NoDevice>;

}  // namespace

TEST_CASE("SyncedBuffer refuses a borrow that overlaps its own block from either side", "[memory][hostile][borrow]") {
    ArenaAllocator::extra = 0;
    ArenaBuffer buffer(64);
    std::byte* block = static_cast<std::byte*>(buffer.mutable_host_data());
    REQUIRE(block == ArenaAllocator::arena + 64);
    // starts 32 bytes before the block: its last 32 bytes are the block's first
    CHECK_THROWS_AS(buffer.set_host_data(block - 32, 64), syncblob::StateError);
    CHECK_THROWS_WITH(buffer.set_host_data(block - 32, 64), Catch::Contains("SyncedBuffer::set_host_data"));
    CHECK(buffer.owns(block - 1, 2));
    CHECK_FALSE(buffer.owns(block - 64, 64));  // ends right before the block
    CHECK_FALSE(buffer.owns(block + 64, 64));  // starts right after it
    CHECK_FALSE(buffer.host_borrowed());
    buffer.set_host_data(block - 64, 64);  // adjacent, not overlapping: lent
    CHECK(buffer.host_borrowed());
}

TEST_CASE("SyncedBuffer counts the whole block its allocator reports as its own", "[memory][hostile][borrow]") {
    ArenaAllocator::extra = 64;  // a block of 128 bytes for a buffer of 64
    ArenaBuffer buffer(64);
    std::byte* block = static_cast<std::byte*>(buffer.mutable_host_data());
    CHECK_THROWS_AS(buffer.set_host_data(block + 96, 64), syncblob::StateError);
    CHECK(buffer.owns(block + 127));
    CHECK_FALSE(buffer.owns(block + 128));
    ArenaAllocator::extra = 0;
}
