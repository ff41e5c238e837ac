// SPDX-License-Identifier: BSD-2-Clause
// .npy: round trips for every element type and rank, diff, conversion, shape rules, and a corpus of
// malformed files each rejected with its message.

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <syncblob/arena.hpp>
#include <syncblob/io/npy.hpp>
#include <syncblob/sim/device.hpp>
#include <vector>

#include "blob_file_values.hpp"
#include "files.hpp"
#include "strong_guarantee.hpp"
#include "tempfile.hpp"

namespace fs = std::filesystem;
using namespace syncblob;
using Catch::Matchers::Contains;

using test::as_bytes;
using test::slurp;

namespace {

// A .npy file from a header dict (padded as NumPy pads it) and raw data bytes.
std::string npy_bytes(const std::string& dict, const std::string& data, int major = 1) {
    std::string header = dict;
    const std::size_t prefix = major == 1 ? 10 : 12;
    header.append(64 - (prefix + header.size() + 1) % 64, ' ');
    header += '\n';
    std::string out = "\x93NUMPY";
    out += static_cast<char>(major);
    out += '\0';
    const std::size_t n = header.size();
    out += static_cast<char>(n & 0xFF);
    out += static_cast<char>((n >> 8) & 0xFF);
    if (major != 1) {
        out += static_cast<char>((n >> 16) & 0xFF);
        out += static_cast<char>((n >> 24) & 0xFF);
    }
    return out + header + data;
}

std::string f32_data(std::initializer_list<float> values) {
    std::string s(values.size() * 4, '\0');
    std::memcpy(s.data(), std::data(values), s.size());
    return s;
}

template <class T>
std::string load_error(const std::string& bytes, io::LoadOptions options = {}) {
    Blob<T> blob{2, 2};
    blob.fill(T(1));
    const auto message =
        test::message_of<FormatError>([&] { io::load_npy(as_bytes(bytes), "bad.npy", blob, options); });
    // the blob is unchanged by a rejected file
    CHECK(blob.shape() == Shape{2, 2});
    CHECK(blob.host_data()[3] == T(1));
    return message;
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("npy round trip of every element type and rank, data and diff", "[io][npy]",
                        test::AllElements) {
    const test::TempDir dir;
    for (const auto& extents : test::round_trip_shapes()) {
        CAPTURE(extents);
        Blob<TestType> blob{Shape(std::span<const std::int64_t>(extents))};
        test::fill_values(blob);
        const fs::path data_file = dir.path() / "data.npy";
        const fs::path diff_file = dir.path() / "diff.npy";
        io::save_npy(data_file, blob);
        io::save_npy(diff_file, blob, {}, io::Part::diff);

        auto loaded = io::load_npy<TestType>(data_file);
        CHECK(loaded.shape() == blob.shape());
        CHECK(test::same_bytes(loaded.host_data(), blob.host_data()));
        io::load_npy(diff_file, loaded, {}, io::Part::diff);
        CHECK(test::same_bytes(loaded.host_diff(), blob.host_diff()));
        CHECK(test::same_bytes(loaded.host_data(), blob.host_data()));  // same shape: data kept
    }
}

TEST_CASE("npy files are laid out as np.save lays them out", "[io][npy]") {
    const test::TempDir dir;
    Blob<float> blob{2, 3};
    io::save_npy(dir.path() / "a.npy", blob);
    const std::string bytes = slurp(dir.path() / "a.npy");
    REQUIRE(bytes.size() == 128 + 24);
    CHECK(bytes.substr(0, 8) == std::string("\x93NUMPY\x01\x00", 8));
    CHECK(bytes[8] == 118);  // header length 118: prefix + header = 128, a multiple of 64
    const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    CHECK(bytes.substr(10, dict.size()) == dict);
    CHECK(bytes[127] == '\n');
}

TEST_CASE("npy load into a blob on a simulated device and from a device-fresh blob", "[io][npy]") {
    const test::TempDir dir;
    const SimulatedDevice::Scope scope{SimulatedDevice::Settings{}};
    Blob<double, Simulated> source{4, 5};
    test::fill_values(source);
    (void)source.mutable_device_data();  // fresh on the device only: saving syncs to the host
    io::save_npy(dir.path() / "d.npy", source);
    Blob<double, Simulated> target;
    io::load_npy(dir.path() / "d.npy", target);
    CHECK(test::same_bytes(target.host_data(), source.host_data()));
    CHECK(target.data_stats().host_allocations == 1);
    CHECK(target.data_stats().host_to_host == 0);
}

TEST_CASE("npy load into a sealed arena's blob copies into its slice, and refuses another shape", "[io][npy][arena]") {
    const test::TempDir dir;
    const SimulatedDevice::Scope scope{SimulatedDevice::Settings{}};
    Blob<float> saved{2, 3};
    test::fill_values(saved);
    io::save_npy(dir.path() / "w.npy", saved);
    Blob<float> other{3, 2};
    io::save_npy(dir.path() / "other.npy", other);

    syncblob::ParameterArena<float, Simulated> arena;
    auto& w = arena.add({2, 3});
    arena.add({4});
    arena.seal();
    w.fill(9.0f);
    (void)w.mutable_device_data();  // fresh on the device: the load overwrites it
    const float* slice = w.host_data().data();
    CHECK_THAT(test::message_of<syncblob::StateError>([&] { io::load_npy(dir.path() / "other.npy", w); }),
               Contains("3 2 (6)") && Contains("fixed by ParameterArena::seal"));
    CHECK(w.shape() == Shape{2, 3});
    CHECK(w.host_data()[0] == 9.0f);

    io::load_npy(dir.path() / "w.npy", w);
    CHECK(w.host_data().data() == slice);  // still the arena's slice
    CHECK(test::same_bytes(w.host_data(), saved.host_data()));
    CHECK(arena.flat_data().host_data().data() == slice);  // the arena still sees the blob in its slice
    CHECK(SimulatedDevice::faults().empty());
}

TEST_CASE("npy conversion is explicit", "[io][npy]") {
    const std::string file =
        npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", f32_data({1.5f, -2.0f, 300.0f}));
    Blob<std::int8_t> blob;
    CHECK_THAT(test::message_of<FormatError>([&] { io::load_npy(as_bytes(file), "f.npy", blob); }),
               Contains("f.npy: descr: the file holds F32, the blob I8 (set LoadOptions::convert to convert)"));
    CHECK_THAT(test::message_of<FormatError>(
                   [&] { io::load_npy(as_bytes(file), "f.npy", blob, io::LoadOptions{.convert = true}); }),
               Contains("f.npy: data at byte 128, element 0: value 1.5 (F32) is not a whole number, which I8 needs"));
    CHECK_FALSE(blob.has_shape());
    io::load_npy(as_bytes(file), "f.npy", blob, io::LoadOptions{.convert = true, .saturate = true});
    REQUIRE(blob.count() == 3);
    CHECK(blob.host_data()[0] == 1);
    CHECK(blob.host_data()[1] == -2);
    CHECK(blob.host_data()[2] == 127);
}

TEST_CASE("npy without reshape demands the blob's shape", "[io][npy]") {
    const std::string file =
        npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3), }", f32_data({1.0f, 2.0f, 3.0f}));
    Blob<float> blob{3, 1};
    blob.fill(9.0f);
    CHECK_THAT(test::message_of<ShapeError>(
                   [&] { io::load_npy(as_bytes(file), "s.npy", blob, io::LoadOptions{.reshape = false}); }),
               Contains("s.npy holds shape 1 3 (3), the blob has 3 1 (3)"));
    CHECK(blob.shape() == Shape{3, 1});
    CHECK(blob.host_data()[0] == 9.0f);
    Blob<float> same{1, 3};
    io::load_npy(as_bytes(file), "s.npy", same, io::LoadOptions{.reshape = false});
    CHECK(same.host_data()[2] == 3.0f);
}

TEST_CASE("npy big-endian data, version 2 and 3 headers, byte orders", "[io][npy]") {
    std::string be(8, '\0');
    const unsigned char raw[] = {0x3F, 0xC0, 0x00, 0x00, 0xC0, 0x20, 0x00, 0x00};  // 1.5, -2.5 big-endian
    std::memcpy(be.data(), raw, 8);
    Blob<float> blob;
    io::load_npy(as_bytes(npy_bytes("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", be)), "be.npy", blob);
    CHECK(blob.host_data()[0] == 1.5f);
    CHECK(blob.host_data()[1] == -2.5f);
    Blob<double> converted;
    io::load_npy(as_bytes(npy_bytes("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", be)), "be.npy",
                 converted, io::LoadOptions{.convert = true});
    CHECK(converted.host_data()[1] == -2.5);
    for (const int major : {2, 3}) {
        io::load_npy(as_bytes(npy_bytes("{\"shape\": (1, 2), \"descr\": \"<f4\", \"fortran_order\": False}",
                                        f32_data({4.0f, 5.0f}), major)),
                     "v2.npy", blob);
        CHECK(blob.shape() == Shape{1, 2});
        CHECK(blob.host_data()[1] == 5.0f);
    }
    Blob<bool> flags;
    io::load_npy(as_bytes(npy_bytes("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }",
                                    std::string("\x00\x01\x07", 3))),
                 "b.npy", flags);
    CHECK_FALSE(flags.host_data()[0]);
    CHECK(flags.host_data()[1]);
    CHECK(flags.host_data()[2]);  // any nonzero byte is true
}

TEST_CASE("npy corpus of malformed files, each rejected with its message", "[io][npy][malformed]") {
    const std::string ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }";
    const std::string data = f32_data({1, 2, 3, 4});
    const std::string good = npy_bytes(ok, data);
    struct Case {
        const char* name;
        std::string bytes;
        const char* message;
    };
    std::string huge_length = good;
    huge_length[8] = '\xFF';
    huge_length[9] = '\xFF';
    std::string v2_huge = npy_bytes(ok, data, 2);
    v2_huge[11] = '\x7F';
    std::string bad_version = good;
    bad_version[6] = '\x04';
    std::string no_newline = good;
    no_newline[127] = ' ';
    const Case cases[] = {
        {"empty", "", "bad.npy: byte 0: expected at least 10 bytes of .npy prefix, the input holds 0 (truncated)"},
        {"not npy", "PK\x03\x04 this is a zip file", "bad.npy: byte 0: expected the magic string"},
        {"truncated prefix", good.substr(0, 9), "bad.npy: byte 0: expected at least 10 bytes"},
        {"bad version", bad_version, "bad.npy: byte 6: unsupported .npy version 4.0"},
        {"huge header length", huge_length,
         "bad.npy: header length: 65535 header bytes expected, the input holds only"},
        {"header over the limit", v2_huge, "bad.npy: header length: 2130706548 bytes exceed the limit of 1048576"},
        {"truncated header", good.substr(0, 60), "bad.npy: header length: 118 header bytes expected"},
        {"truncated data", good.substr(0, good.size() - 1),
         "bad.npy: data at byte 128: the shape and descr need 16 bytes, the input holds 15 (truncated)"},
        {"trailing bytes", good + "xyz",
         "bad.npy: data at byte 128: the shape and descr need 16 bytes, the input holds 19 (trailing bytes)"},
        {"header without newline", no_newline, "bad.npy: header byte 127: expected the header to end with a newline"},
        {"not a dict", npy_bytes("['descr', '<f4']", data),
         "bad.npy: header byte 10: expected '{' opening the header dict"},
        {"missing descr", npy_bytes("{'fortran_order': False, 'shape': (2, 2), }", data),
         "bad.npy: header byte 53: expected 'descr' key"},
        {"missing shape", npy_bytes("{'descr': '<f4', 'fortran_order': False}", data), "expected 'shape' key"},
        {"duplicate key", npy_bytes("{'descr': '<f4', 'descr': '<f8', 'fortran_order': False, 'shape': (2, 2)}", data),
         "bad.npy: header byte 27: duplicate key 'descr'"},
        {"unknown key", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), 'x': 1}", data),
         "unexpected key 'x'"},
        {"code instead of a value", npy_bytes("{'descr': __import__('os').system('true'), 'shape': (4,)}", data),
         "bad.npy: header byte 20: expected a quoted dtype string for 'descr'"},
        {"fortran order", npy_bytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", data),
         "bad.npy: header byte 44: Fortran-order (column-major) arrays are not supported"},
        {"object array", npy_bytes("{'descr': '|O', 'fortran_order': False, 'shape': (2, 2), }", data),
         "object arrays ('descr': '|O') are not supported"},
        {"structured dtype", npy_bytes("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (4,), }", data),
         "structured dtypes (a list 'descr') are not supported"},
        {"bad dtype", npy_bytes("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", data),
         "'descr' '<c8' is not a dtype syncblob reads"},
        {"negative extent", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (-4,), }", data),
         "expected a non-negative integer extent in 'shape'"},
        {"one axis without comma", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (4), }", data),
         "a one-axis 'shape' needs a trailing comma"},
        {"extent overflow",
         npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", data),
         "extent does not fit in int64"},
        {"count overflow",
         npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", data),
         "'shape': element count overflows int64 at axis 1"},
        {"size overflow",
         npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904,), }", data),
         "bad.npy: shape: the data size overflows"},
        {"shape and size mismatch", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", data),
         "the shape and descr need 24 bytes, the input holds 16 (truncated)"},
        {"33 axes",
         npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,"
                   "1,1,1,1,1,1,1,1,4), }",
                   data),
         "more than 32 axes"},
        {"garbage after dict", npy_bytes(ok + " x", data), "expected only spaces and a newline after the header dict"},
        {"unterminated string", npy_bytes("{'descr: False", data), "unterminated string literal"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.name);
        CHECK_THAT(load_error<float>(c.bytes), Contains(c.message));
    }
}

TEST_CASE("npy max_bytes bounds what a load allocates", "[io][npy]") {
    const std::string file =
        npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", f32_data({1, 2, 3, 4}));
    CHECK_THAT(load_error<float>(file, io::LoadOptions{.max_bytes = 15}),
               Contains("bad.npy: shape: loading needs 16 bytes, more than the limit of 15"));
    CHECK_THAT(load_error<double>(file, io::LoadOptions{.max_bytes = 20, .convert = true}),
               Contains("loading needs 32 bytes"));
}

TEST_CASE("npy bfloat16 is written as raw 2-byte values and read back only as bfloat16", "[io][npy]") {
    const test::TempDir dir;
    Blob<bfloat16> blob{3};
    test::fill_values(blob);
    io::save_npy(dir.path() / "b.npy", blob);
    CHECK(slurp(dir.path() / "b.npy").substr(10, 16) == "{'descr': '<V2',");
    Blob<float> other;
    CHECK_THAT(test::message_of<FormatError>(
                   [&] { io::load_npy(dir.path() / "b.npy", other, io::LoadOptions{.convert = true}); }),
               Contains("'<V2' raw 2-byte values load only into a bfloat16 blob, not F32"));
}

TEMPLATE_LIST_TEST_CASE("npy refuses the 8-bit floats: NumPy has no standard dtype for them", "[io][npy][float8]",
                        test::Float8Elements) {
    const test::TempDir dir;
    Blob<TestType> blob{4};
    const fs::path file = dir.path() / "f8.npy";
    CHECK_THAT(test::message_of<FormatError>([&] { io::save_npy(file, blob); }),
               Contains("f8.npy: descr: ") && Contains(std::string(element_name<TestType>())) &&
                   Contains("has no NumPy dtype"));
    CHECK_FALSE(fs::exists(file));
    // A NumPy file of another dtype still loads into such a blob, by the conversion rule.
    const std::string f32 =
        npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", f32_data({0.25f, 4.0f}));
    Blob<TestType> loaded;
    io::load_npy(as_bytes(f32), "f.npy", loaded, io::LoadOptions{.convert = true});
    CHECK(static_cast<float>(loaded.host_data()[0]) == 0.25f);
    CHECK(static_cast<float>(loaded.host_data()[1]) == 4.0f);
}

TEST_CASE("npy file errors", "[io][npy]") {
    const test::TempDir dir;
    Blob<float> blob;
    CHECK_THAT(test::message_of<IOError>([&] { io::load_npy(dir.path() / "missing.npy", blob); }),
               Contains("missing.npy") && Contains("No such file"));
}

TEST_CASE("npy load is all or nothing: a failed allocation leaves the blob as it was", "[io][npy][strong]") {
    const std::string file = npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }",
                                       f32_data({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}));
    for (const auto part : {io::Part::data, io::Part::diff}) {
        auto blob = test::target_with_values<float>();
        int failures = 0;
        CHECK(test::fail_each_allocation(
                  blob, [&](auto& b) { io::load_npy(as_bytes(file), "g.npy", b, {}, part); }, failures) == "");
        CHECK(failures >= 1);
        REQUIRE(blob.shape() == Shape{3, 4});
        CHECK((part == io::Part::data ? blob.host_data() : blob.host_diff())[11] == 12.0f);
    }
}

TEST_CASE("npy shape with a zero extent is still checked as a whole: a FormatError naming the field",
          "[io][npy][hostile]") {
    // (0, 2^40, 2^40): the count is 0, but the other extents multiply past int64.
    const std::string file =
        npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 1099511627776, 1099511627776), }", "");
    Blob<float> blob{2};
    blob.fill(5.0f);
    CHECK_THAT(load_error<float>(file), Contains("bad.npy") && Contains("'shape'") && Contains("overflows int64"));
    CHECK_THAT(test::message_of<FormatError>([&] { io::load_npy(as_bytes(file), "z.npy", blob); }),
               Contains("z.npy: header byte"));
    CHECK(blob.shape() == Shape{2});
    CHECK(blob.host_data()[1] == 5.0f);
}

// Issue 34, case 8. Before: a converting load wrapped integers (I64 -1 became U8 255, INT64_MIN
// became I32 0) and turned 1e300 into infinity in half, without a word.
TEST_CASE("a converting npy load refuses a value the blob cannot hold, naming it", "[io][npy][convert]") {
    const auto i64 = [](std::initializer_list<std::int64_t> v) {
        std::string s(v.size() * 8, '\0');
        std::memcpy(s.data(), std::data(v), s.size());
        return npy_bytes("{'descr': '<i8', 'fortran_order': False, 'shape': (" + std::to_string(v.size()) + ",), }", s);
    };
    const io::LoadOptions convert{.convert = true};
    Blob<std::uint8_t> u{1};
    u.fill(9);
    CHECK_THAT(test::message_of<FormatError>([&] {
                   io::load_npy(as_bytes(i64({3, -1})), "i.npy", u, convert);
               }),
               Contains("i.npy: data at byte 128, element 1") && Contains("-1") && Contains("U8"));
    CHECK(u.shape() == Shape{1});
    CHECK(u.host_data()[0] == 9);
    Blob<std::int32_t> i;
    CHECK_THAT(test::message_of<FormatError>([&] {
                   io::load_npy(as_bytes(i64({std::numeric_limits<std::int64_t>::min()})), "i.npy", i, convert);
               }),
               Contains("element 0") && Contains("-9223372036854775808") && Contains("I32"));
    CHECK_FALSE(i.has_shape());
    const double big = 1e300;
    std::string f8(8, '\0');
    std::memcpy(f8.data(), &big, 8);
    Blob<half> h;
    CHECK_THAT(test::message_of<FormatError>([&] {
                   io::load_npy(as_bytes(npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", f8)),
                                "d.npy", h, convert);
               }),
               Contains("element 0") && Contains("1e+300") && Contains("F16"));
}
