// SPDX-License-Identifier: BSD-2-Clause
// Blob: fill, printing, device accessors of a host-only blob, bool blobs under checking mode.

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include <syncblob/blob.hpp>

#include "blob_test_support.hpp"
#include "checks.hpp"

using namespace blob_test;
using syncblob::Blob;
using syncblob::Head;
using syncblob::NoDeviceError;
using syncblob::Shape;
using syncblob::SimulatedDevice;

namespace {
template <class B>
std::string printed(const B& b) {
    std::ostringstream os;
    os << b;
    return os.str();
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("Blob fill and fill_diff", "[blob]", ZipCases) {
    using B = typename TestType::blob;
    using T = typename TestType::element;
    Checks checks;
    B b{3, 2};
    b.fill(make<T>(5));
    BLOB_EQ(values(b.host_data()), constant(6, make<T>(5)));
    BLOB_EQ(values(b.host_diff()), zeros<T>(6));
    b.fill_diff(make<T>(2));
    BLOB_EQ(values(b.host_diff()), constant(6, make<T>(2)));
    BLOB_EQ(values(b.host_data()), constant(6, make<T>(5)));
    if constexpr (has_device<typename TestType::allocator>) {  // fill overwrites: no copy from the device first
        (void)b.mutable_device_data();
        b.reset_stats();
        b.fill(make<T>(7));
        BLOB_EQ(b.data_stats().device_to_host, 0);
        BLOB_EQ(b.data_head(), Head::at_host);
        BLOB_EQ(values(b.host_data()), constant(6, make<T>(7)));
    }
    verify(checks);
}

TEMPLATE_LIST_TEST_CASE("Blob operator<< prints the shape and the values of small blobs", "[blob]", HostOnlyCases) {
    using B = typename TestType::blob;
    using T = typename TestType::element;
    Checks checks;
    const std::string name(expected_dtype<T>());
    B b{2, 3};
    write_pattern(b.mutable_host_data(), 0);
    if constexpr (std::is_same_v<T, bool>) {
        BLOB_EQ(printed(b), "Blob<BOOL>(2 3 (6)) [false, true, true, false, true, true]");
    } else if constexpr (sizeof(T) == 1 && std::is_class_v<T>) {  // an 8-bit float: make<T> gives its first patterns
        std::ostringstream want;
        want << "Blob<" << name << ">(2 3 (6)) [";
        for (int i = 0; i < 6; ++i) {
            want << (i == 0 ? "" : ", ") << static_cast<float>(make<T>(i));
        }
        BLOB_EQ(printed(b), want.str() + "]");
    } else {
        BLOB_EQ(printed(b), "Blob<" + name + ">(2 3 (6)) [1, 2, 3, 4, 5, 6]");
    }
    BLOB_EQ(printed(B{}), "Blob<" + name + ">((0))");
    B big{65};
    write_pattern(big.mutable_host_data(), 0);
    const auto edge = [&](std::size_t i) {  // element i as printed alone
        std::ostringstream one;
        syncblob::detail::print_value(one, big.host_data()[i]);
        return one.str();
    };
    // too big: the first and last three, as NumPy prints a large array
    BLOB_EQ(printed(big), "Blob<" + name + ">(65 (65)) [" + edge(0) + ", " + edge(1) + ", " + edge(2) + ", ..., " +
                              edge(62) + ", " + edge(63) + ", " + edge(64) + "]");
    big.reshape({64});
    const auto text64 = printed(big);
    BLOB_TRUE(text64.starts_with("Blob<" + name + ">(64 (64)) [" + edge(0) + ", "));  // small enough: every value
    BLOB_TRUE(text64.find("...") == std::string::npos);
    BLOB_TRUE(text64.ends_with(", " + edge(63) + "]"));
    // Data never touched prints as the zeros it reads as, and printing allocates nothing for it.
    const B untouched{1000};
    std::ostringstream zero;
    syncblob::detail::print_value(zero, T{});
    const std::string z = zero.str();
    BLOB_EQ(printed(untouched),
            "Blob<" + name + ">(1000 (1000)) [" + z + ", " + z + ", " + z + ", ..., " + z + ", " + z + ", " + z + "]");
    BLOB_TRUE(no_activity(untouched.data_stats()));
    verify(checks);
}

TEST_CASE("Blob operator<< prints 8-bit integers as numbers, bool as words, 16-bit floats as float", "[blob]") {
    Blob<std::int8_t> i8{3};
    i8.mutable_host_data()[0] = 65;
    i8.mutable_host_data()[1] = -7;
    CHECK(printed(i8) == "Blob<I8>(3 (3)) [65, -7, 0]");
    Blob<std::uint8_t, syncblob::Simulated> u8{2};
    u8.fill(200);
    CHECK(printed(u8) == "Blob<U8>(2 (2)) [200, 200]");
    Blob<bool> flags{2};
    flags.mutable_host_data()[1] = true;
    CHECK(printed(flags) == "Blob<BOOL>(2 (2)) [false, true]");
    Blob<syncblob::half> h{2};
    h.mutable_host_data()[0] = syncblob::half(1.5f);
    h.mutable_host_data()[1] = syncblob::half(-0.25f);
    CHECK(printed(h) == "Blob<F16>(2 (2)) [1.5, -0.25]");
    Blob<syncblob::bfloat16> bf{1};
    bf.fill(syncblob::bfloat16(-2.25f));
    CHECK(printed(bf) == "Blob<BF16>(1 (1)) [-2.25]");
    Blob<syncblob::float8_e4m3fn> e4m3{2};
    e4m3.mutable_host_data()[0] = syncblob::float8_e4m3fn::from_bits(0x3C);  // 1.5
    e4m3.mutable_host_data()[1] = syncblob::float8_e4m3fn::from_bits(0xA8);  // -0.25
    CHECK(printed(e4m3) == "Blob<F8_E4M3>(2 (2)) [1.5, -0.25]");
    Blob<syncblob::float8_e8m0fnu> e8m0{1};
    e8m0.fill(syncblob::float8_e8m0fnu::from_bits(0x81));  // 2^2
    CHECK(printed(e8m0) == "Blob<F8_E8M0>(1 (1)) [4]");
    Blob<double> scalar{Shape{}};
    scalar.fill(0.5);
    CHECK(printed(scalar) == "Blob<F64>((1)) [0.5]");
    Blob<std::int64_t> i64{1, 2};
    i64.mutable_host_data()[1] = -9000000000LL;
    CHECK(printed(i64) == "Blob<I64>(1 2 (2)) [0, -9000000000]");
}

TEMPLATE_LIST_TEST_CASE("Blob device accessors of a host-only blob throw NoDeviceError", "[blob]", HostOnlyCases) {
    using B = typename TestType::blob;
    Checks checks;
    B b{3};
    const B& cb = b;
    BLOB_THROWS(NoDeviceError, cb.device_data(), "host-only");
    BLOB_THROWS(NoDeviceError, b.mutable_device_data(), "host-only");
    BLOB_THROWS(NoDeviceError, cb.device_diff(), "host-only");
    BLOB_THROWS(NoDeviceError, b.mutable_device_diff(), "host-only");
    B none;
    const B& cnone = none;
    BLOB_THROWS(NoDeviceError, cnone.device_data(), "host-only");
    BLOB_THROWS(NoDeviceError, none.mutable_device_diff(), "host-only");
    BLOB_EQ(b.data_head(), Head::uninitialized);  // the failed accesses changed nothing
    BLOB_TRUE(no_activity(b.data_stats()));
    verify(checks);
}

namespace {
// The raw bytes at `p`, read without interpreting them as T (a poisoned bool must not be loaded as bool).
std::vector<unsigned> raw_bytes(const void* p, std::size_t n) {
    std::vector<unsigned char> bytes(n);
    std::memcpy(bytes.data(), p, n);
    return {bytes.begin(), bytes.end()};
}

// Fills a blob, makes each side stale in turn under checking mode, and returns the stale bytes seen.
template <class T>
std::vector<unsigned> stale_bytes(Blob<T, syncblob::Simulated>& b) {
    const auto n = static_cast<std::size_t>(b.count()) * sizeof(T);
    write_pattern(b.mutable_host_data(), 0);
    const T* device = b.device_data();  // synced
    (void)b.mutable_host_data();        // the device side is now stale and poisoned (in stream order)
    SimulatedDevice::synchronize();     // the poison has run
    auto seen = raw_bytes(device, n);   // SimulatedDevice memory is host-addressable
    const T* host = b.host_data().data();
    (void)b.mutable_device_data();  // the host side is now stale and poisoned
    const auto host_seen = raw_bytes(host, n);
    seen.insert(seen.end(), host_seen.begin(), host_seen.end());
    return seen;
}
}  // namespace

TEST_CASE("Blob<bool> under SimulatedDevice checking mode keeps valid bools on the stale side", "[blob]") {
    SimulatedDevice::Settings settings;
    settings.checking = true;
    const SimulatedDevice::Scope scope(settings);

    Blob<bool, syncblob::Simulated> flags{16};
    for (unsigned byte : stale_bytes(flags)) {
        REQUIRE(byte <= 1u);
    }
    CHECK(values(flags.host_data()) == pattern<bool>(16));  // the fresh data survived the round trip

    // Buffers made later (growth, shrink_to_fit, clone) poison with a valid bool too.
    flags.reshape({40});
    flags.reshape({20});
    flags.shrink_to_fit();
    auto copy = flags.clone();
    for (unsigned byte : stale_bytes(flags)) {
        REQUIRE(byte <= 1u);
    }
    for (unsigned byte : stale_bytes(copy)) {
        REQUIRE(byte <= 1u);
    }

    // The same sequence on bytes that may hold anything shows the poison: checking mode is on.
    Blob<std::uint8_t, syncblob::Simulated> bytes{16};
    const auto seen = stale_bytes(bytes);
    CHECK(seen == std::vector<unsigned>(32, 0xFFu));
}

TEST_CASE("Blob for_overwrite accessors skip the zero-fill and the copy, but never leave an invalid tail",
          "[blob][overwrite]") {
    SECTION("device data: no host-to-device copy for bytes about to be overwritten") {
        Blob<float, syncblob::Simulated> b{4};
        b.fill(1.0f);
        b.reset_stats();
        float* d = b.mutable_device_data_for_overwrite();
        REQUIRE(d != nullptr);
        CHECK(b.data_head() == Head::at_device);
        CHECK(b.data_stats().host_to_device == 0);
        CHECK(b.data_stats().device_allocations == 1);
        for (int i = 0; i < 4; ++i) {
            d[i] = static_cast<float>(i);  // SimulatedDevice memory is host-addressable
        }
        CHECK(b.host_data()[3] == 3.0f);
        (void)b.mutable_device_diff_for_overwrite();
        CHECK(b.diff_head() == Head::at_device);
        CHECK(b.diff_stats().host_to_device == 0);
    }
    SECTION("host data of a device-fresh blob: no device-to-host copy") {
        Blob<float, syncblob::Simulated> b{4};
        b.fill(2.0f);
        (void)b.mutable_device_data();
        b.reset_stats();
        (void)b.mutable_host_data_for_overwrite();
        CHECK(b.data_head() == Head::at_host);
        CHECK(b.data_stats().device_to_host == 0);
    }
    SECTION("capacity past count: the tail stays valid (zeros) after a reshape up to the capacity") {
        Blob<bool, syncblob::Simulated> b{8};
        b.reshape({2});
        auto host = b.mutable_host_data_for_overwrite();
        host[0] = true;
        host[1] = true;
        b.reshape({8});
        const auto all = b.host_data();
        CHECK(all[1]);
        for (std::size_t i = 2; i < all.size(); ++i) {
            unsigned char byte = 0;
            std::memcpy(&byte, &all[i], 1);
            CHECK(byte == 0);
        }
        Blob<bool, syncblob::Simulated> d{8};
        d.reshape({2});
        (void)d.mutable_device_data_for_overwrite();
        d.reshape({8});
        unsigned char tail = 1;
        std::memcpy(&tail, &d.host_data()[7], 1);
        CHECK(tail == 0);
    }
    SECTION("capacity past count, device-fresh: only the tail past count() is copied to the host") {
        Blob<float, syncblob::Simulated> b{8};
        b.fill(1.0f);
        (void)b.mutable_device_data();
        b.reshape({2});
        b.reset_stats();
        auto host = b.mutable_host_data_for_overwrite();
        CHECK(b.data_head() == Head::at_host);
        CHECK(b.data_stats().device_to_host == 1);
        CHECK(b.data_stats().device_to_host_bytes == 6 * sizeof(float));  // the tail, not the 2 overwritten
        host[0] = 5.0f;
        host[1] = 6.0f;
        b.reshape({8});
        CHECK(std::vector<float>(b.host_data().begin(), b.host_data().end()) ==
              std::vector<float>{5.0f, 6.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f});
    }
    SECTION("a host-only blob has no device side") {
        Blob<float> b{4};
        CHECK_THROWS_AS(b.mutable_device_data_for_overwrite(), NoDeviceError);
        CHECK_THROWS_WITH(b.mutable_device_diff_for_overwrite(), Catch::Contains("host-only"));
    }
}

TEST_CASE("Blob set_host_data and set_device_data lend memory without copying, as Caffe's set_cpu_data", "[blob]") {
    SECTION("read-write host memory: used in place, never freed") {
        std::vector<float> mine{1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f};
        Blob<float, syncblob::Simulated> b{2, 3};
        b.set_host_data(mine.data(), mine.size());
        CHECK(b.host_data().data() == mine.data());
        CHECK(b.data_stats().host_allocations == 0);
        b.mutable_host_data()[0] = 10.0f;
        CHECK(mine[0] == 10.0f);
        CHECK(b.device_data() != nullptr);
        CHECK(b.data_stats().host_to_device == 1);
        CHECK(b.diff_head() == Head::uninitialized);  // the diff is untouched
    }
    SECTION("read-only host memory: the first write copies it") {
        const std::vector<float> theirs(4, 7.0f);
        Blob<float> b{4};
        b.set_host_data(theirs.data(), theirs.size());
        CHECK(b.host_data().data() == theirs.data());
        b.mutable_host_data()[0] = 1.0f;
        CHECK(theirs[0] == 7.0f);
        CHECK(b.host_data()[0] == 1.0f);
        CHECK(b.host_data()[3] == 7.0f);
        CHECK(b.data_stats().host_to_host == 1);
    }
    SECTION("capacity past count: the data is refitted to count(), the diff keeps its contents") {
        Blob<float> b{8};
        b.fill_diff(0.5f);
        b.reshape({3});
        std::vector<float> mine(3, 2.0f);
        b.set_host_data(mine.data(), mine.size());
        CHECK(b.host_data().data() == mine.data());
        CHECK(b.capacity() == 3);
        CHECK(b.host_diff()[2] == 0.5f);
        // growing again reallocates both buffers and no longer uses the lent memory
        b.reshape({5});
        CHECK(b.host_data().data() != mine.data());
    }
    SECTION("too few elements, no shape or no device: typed errors, nothing changes") {
        std::vector<float> small(3, 1.0f);
        Blob<float> b{2, 2};
        b.fill(4.0f);
        CHECK_THROWS_AS(b.set_host_data(small.data(), small.size()), syncblob::ShapeError);
        CHECK_THROWS_WITH(b.set_host_data(small.data(), small.size()),
                          Catch::Contains("set_host_data") && Catch::Contains("3 elements") && Catch::Contains("4"));
        CHECK_THROWS_AS(b.set_host_data(static_cast<float*>(nullptr), 4), syncblob::ShapeError);
        CHECK(b.host_data()[0] == 4.0f);
        CHECK(b.host_data().data() != small.data());
        Blob<float> shapeless;
        CHECK_THROWS_AS(shapeless.set_host_data(small.data(), small.size()), syncblob::StateError);
        CHECK_THROWS_AS(b.set_device_data(small.data(), small.size()), NoDeviceError);
        Blob<float> empty{Shape{0}};
        empty.set_host_data(static_cast<float*>(nullptr), 0);
        CHECK(empty.count() == 0);
    }
    SECTION("device memory on the simulated device") {
        Blob<float, syncblob::Simulated> source{4};
        source.fill(3.0f);
        float* device = source.mutable_device_data();  // device memory owned by another blob
        Blob<float, syncblob::Simulated> b{4};
        b.set_device_data(device, 4);
        CHECK(b.device_data() == device);
        CHECK(b.data_head() == Head::at_device);
        CHECK(b.host_data()[2] == 3.0f);
        CHECK(b.data_stats().device_to_host == 1);
        CHECK(b.data_stats().device_allocations == 0);
    }
}

TEST_CASE("Blob set_host_data refuses memory its own buffers own, which they would free under it", "[blob][hostile]") {
    // Lending the diff's block to the data, then dropping the diff (share_diff, reshape, destruction)
    // would leave the data pointing at freed memory.
    Blob<float> b{4};
    b.fill(1.0f);
    b.fill_diff(2.0f);
    Blob<float> other{4};
    const auto diff = b.mutable_host_diff();
    CHECK_THROWS_WITH(b.set_host_data(diff.data(), diff.size()),
                      Catch::Contains("Blob::set_host_data") && Catch::Contains("belongs to this blob's diff"));
    CHECK_THROWS_AS(b.set_host_data(diff.data() + 1, 4), syncblob::StateError);
    // the buffer's own block, not only at its start
    const auto data = b.mutable_host_data();
    CHECK_THROWS_AS(b.set_host_data(data.data() + 1, 4), syncblob::StateError);
    b.share_diff(other);
    CHECK(b.host_data()[3] == 1.0f);
    CHECK_FALSE(b.data_buffer()->host_borrowed());
}

TEST_CASE("Blob set_device_data refuses memory of the blob's own diff on the simulated device", "[blob][hostile]") {
    Blob<float, syncblob::Simulated> b{4};
    b.fill_diff(2.0f);
    float* device_diff = b.mutable_device_diff();
    CHECK_THROWS_AS(b.set_device_data(device_diff, 4), syncblob::StateError);
    CHECK(b.data_head() == Head::uninitialized);
}

TEST_CASE("Blob operator<< shows a device blob's device, stream and pending copies", "[blob][simulated]") {
    const SimulatedDevice::Scope scope{SimulatedDevice::Settings{}};
    Blob<float, syncblob::Simulated> b{2};
    b.fill(1.0f);
    CHECK(printed(b) == "Blob<F32>(2 (2)) [1, 1]");  // no device block yet
    (void)b.device_data();
    CHECK(printed(b) == "Blob<F32>(2 (2), device 0) [1, 1]");
    const auto stream = SimulatedDevice::create_stream();
    b.set_stream(stream);
    b.fill(2.0f);
    b.data_buffer()->push_to_device_async();
    std::ostringstream expected;
    expected << "Blob<F32>(2 (2), device 0, stream " << stream.id << ", async copy pending) [2, 2]";
    CHECK(printed(b) == expected.str());
    CHECK_FALSE(b.data_buffer()->async_pending());  // printing the values waited for the copy
}
