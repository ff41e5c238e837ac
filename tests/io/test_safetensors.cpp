// SPDX-License-Identifier: BSD-2-Clause
// safetensors: round trips (copying and memory-mapped) for every element type and rank, the
// reference writer's exact bytes, borrowing without copies, and a corpus of malformed files each
// rejected with its message.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <syncblob/io/safetensors.hpp>
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
using test::spit;

namespace {

// A file from a header text (not padded: the reader must not care) and data bytes.
std::string st_bytes(const std::string& header, const std::string& data) {
    std::string out(8, '\0');
    for (std::size_t i = 0; i < 8; ++i) {
        out[i] = static_cast<char>((header.size() >> (8 * i)) & 0xFF);
    }
    return out + header + data;
}

std::string open_error(const std::string& bytes, io::LoadOptions options = {}) {
    return test::message_of<FormatError>(
        [&] { (void)io::SafetensorsFile::from_memory(as_bytes(bytes), "bad.safetensors", options); });
}

// The read system calls of `file.load_all<float>()`, its tensors "t0".."t<n-1>" (two elements, the
// second k) and "large" (`large` elements, the last -1) checked.
std::uint64_t load_all_reads(const io::SafetensorsFile& file, std::size_t n, std::size_t large) {
    const auto reads = *test::io_calls("syscr:");
    const auto all = file.load_all<float>();
    const std::uint64_t read_calls = *test::io_calls("syscr:") - reads;
    REQUIRE(all.size() == n + 1);
    for (std::size_t k = 0; k < n; k += 499) {
        CHECK(all.at("t" + std::to_string(k)).host_data()[1] == static_cast<float>(k));
    }
    CHECK(all.at("large").host_data()[large - 1] == -1.0f);
    return read_calls;
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("safetensors round trip of every element type and rank, copying and mapped",
                        "[io][safetensors]", syncblob::ElementTypes) {
    const test::TempDir dir;
    const auto shapes = test::round_trip_shapes();
    std::map<std::string, Blob<TestType>> blobs;
    for (std::size_t i = 0; i < shapes.size(); ++i) {
        auto& b = blobs["t" + std::to_string(i)];
        b.reshape(Shape(std::span<const std::int64_t>(shapes[i])));
        test::fill_values(b);
    }
    for (const bool with_diff : {false, true}) {
        CAPTURE(with_diff);
        const fs::path file = dir.path() / "all.safetensors";
        io::save_safetensors(file, blobs, {{"format", "syncblob"}}, with_diff);
        for (const auto mode : {io::LoadMode::copy, io::LoadMode::map}) {
            const auto f = io::SafetensorsFile::open(file, {}, mode);
            CHECK(f.metadata() == io::Metadata{{"format", "syncblob"}});
            CHECK(f.tensors().size() == blobs.size() * (with_diff ? 2 : 1));
            const auto loaded = f.template load_all<TestType>();
            REQUIRE(loaded.size() == blobs.size());
            for (const auto& [name, blob] : blobs) {
                CAPTURE(name);
                const auto& got = loaded.at(name);
                CHECK(got.shape() == blob.shape());
                CHECK(test::same_bytes(got.host_data(), blob.host_data()));
                if (with_diff) {
                    CHECK(test::same_bytes(got.host_diff(), blob.host_diff()));
                }
            }
        }
    }
}

TEST_CASE("safetensors files are byte for byte what the reference writer writes", "[io][safetensors]") {
    const test::TempDir dir;
    Blob<std::uint8_t> a{3};
    a.fill(7);
    Blob<float> b{2};
    b.fill(1.0f);
    Blob<double> c{Shape{}};
    c.fill(2.0);
    Blob<float> aa{1};
    aa.fill(-1.0f);
    io::SafetensorsWriter w;
    w.add("b", b);
    w.add("a", a);
    w.add("c", c);
    w.add("aa", aa);
    w.metadata() = {{"format", "pt"}, {"author", "\"q\"\n"}};
    w.save(dir.path() / "ref.safetensors");
    // Order: the dtype enum descending (F64, F32, U8), then name; metadata first, keys sorted.
    const std::string json =
        "{\"__metadata__\":{\"author\":\"\\\"q\\\"\\n\",\"format\":\"pt\"},"
        "\"c\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[0,8]},"
        "\"aa\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[12,20]},"
        "\"a\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[20,23]}}";
    const std::string padded = json + std::string((8 - json.size() % 8) % 8, ' ');
    std::string expected(8, '\0');
    expected[0] = static_cast<char>(padded.size() & 0xFF);
    expected[1] = static_cast<char>(padded.size() >> 8);
    const double two = 2.0;
    const float values[] = {-1.0f, 1.0f, 1.0f};
    expected += padded + std::string(reinterpret_cast<const char*>(&two), 8) +
                std::string(reinterpret_cast<const char*>(values), 12) + "\x07\x07\x07";
    CHECK(slurp(dir.path() / "ref.safetensors") == expected);
}

TEST_CASE("a file of many small tensors is written, and loaded whole, in a few system calls, not one a tensor",
          "[io][safetensors]") {
    const test::TempDir dir;
    constexpr std::size_t n = 3000;
    std::vector<Blob<float>> blobs;
    blobs.reserve(n);
    io::SafetensorsWriter w;
    for (std::size_t k = 0; k < n; ++k) {
        blobs.emplace_back(Shape{2}).fill(static_cast<float>(k));
        w.add("t" + std::to_string(k), blobs.back());
    }
    blobs.emplace_back(Shape{1 << 15}).fill(-1.0f);  // 128 KiB: written on its own, in order with the rest
    w.add("large", blobs.back());
    const auto before = test::io_calls("syscw:");
    if (!before) {
        std::cout << "skipped: the kernel does not count this process's writes (/proc/self/io)" << std::endl;
        return;
    }
    w.save(dir.path() / "many.safetensors");
    const std::uint64_t calls = *test::io_calls("syscw:") - *before;
    CAPTURE(calls);
    // The header and the small tensors gathered, the large one, a flush: one call a tensor made 3004.
    CHECK(calls <= 8);
    const auto file = io::SafetensorsFile::open(dir.path() / "many.safetensors");
    // A call per run of 1024 tensors at most, and the large one: one each made 3002.
    CHECK(load_all_reads(file, n, 1 << 15) <= 8);
}

TEST_CASE("a file of many small tensors is loaded whole, converted, in a few system calls, not one a tensor",
          "[io][safetensors][convert]") {
    const test::TempDir dir;
    constexpr std::size_t n = 3000;
    std::map<std::string, Blob<double>> blobs;
    for (std::size_t k = 0; k < n; ++k) {
        blobs.emplace("t" + std::to_string(k), Shape{2}).first->second.fill(static_cast<double>(k));
    }
    blobs.emplace("large", Shape{1 << 12}).first->second.fill(-1.0);  // 32 KiB: converted on its own
    io::save_safetensors(dir.path() / "f64.safetensors", blobs);
    const auto before = test::io_calls("syscr:");
    if (!before) {
        std::cout << "skipped: the kernel does not count this process's reads (/proc/self/io)" << std::endl;
        return;
    }
    io::LoadOptions options;
    options.convert = true;
    const auto file = io::SafetensorsFile::open(dir.path() / "f64.safetensors", options);
    // 512 staged at a time (16 bytes each), then converted; the large one on its own: 3001 tensors in
    // 8 calls. One call a tensor made 3002.
    CHECK(load_all_reads(file, n, 1 << 12) <= n / 256 + 2);
}

TEST_CASE("a converting load_all names the first tensor in name order whose value it refuses",
          "[io][safetensors][convert]") {
    const test::TempDir dir;
    std::map<std::string, Blob<double>> blobs;
    for (std::size_t k = 0; k < 300; ++k) {
        blobs.emplace("t" + std::to_string(1000 + k), Shape{2}).first->second.fill(1.0);
    }
    blobs.at("t1120").mutable_host_data()[1] = 1e300;
    blobs.at("t1200").mutable_host_data()[0] = -1e300;
    const bool cut = GENERATE(false, true);  // and the file cut short after both
    CAPTURE(cut);
    const auto path = dir.path() / "f64.safetensors";
    io::save_safetensors(path, blobs);
    io::LoadOptions options;
    options.convert = true;
    const auto file = io::SafetensorsFile::open(path, options);
    if (cut) {
        fs::resize_file(path, fs::file_size(path) - 16);  // the last tensor's bytes
    }
    CHECK_THAT(test::message_of<FormatError>([&] { (void)file.load_all<float>(); }),
               Contains("tensor \"t1120\" at byte ") && Contains("element 1: value 1e+300 (F64) overflows F32"));
}

TEST_CASE("safetensors F8 tensors: every bit pattern written under its dtype name and loaded back bit-exact",
          "[io][safetensors][float8]") {
    const test::TempDir dir;
    Blob<float8_e4m3fn> e4m3{16, 16};
    Blob<float8_e5m2> e5m2{256};
    Blob<float8_e8m0fnu> e8m0{2, 128};
    std::string patterns;
    for (unsigned b = 0; b < 256; ++b) {
        patterns += static_cast<char>(b);
        e4m3.mutable_host_data()[b] = float8_e4m3fn::from_bits(static_cast<std::uint8_t>(b));
        e5m2.mutable_host_data()[b] = float8_e5m2::from_bits(static_cast<std::uint8_t>(b));
        e8m0.mutable_host_data()[b] = float8_e8m0fnu::from_bits(static_cast<std::uint8_t>(b));
    }
    io::SafetensorsWriter w;
    w.add("a", e4m3);
    w.add("b", e5m2);
    w.add("c", e8m0);
    const fs::path file = dir.path() / "f8.safetensors";
    w.save(file);
    // The reference orders by its dtype enum, later first: F8_E8M0, F8_E4M3, F8_E5M2.
    const std::string json =
        "{\"c\":{\"dtype\":\"F8_E8M0\",\"shape\":[2,128],\"data_offsets\":[0,256]},"
        "\"a\":{\"dtype\":\"F8_E4M3\",\"shape\":[16,16],\"data_offsets\":[256,512]},"
        "\"b\":{\"dtype\":\"F8_E5M2\",\"shape\":[256],\"data_offsets\":[512,768]}}";
    const std::string padded = json + std::string((8 - json.size() % 8) % 8, ' ');
    CHECK(slurp(file) == st_bytes(padded, patterns + patterns + patterns));
    for (const auto mode : {io::LoadMode::copy, io::LoadMode::map}) {
        const auto f = io::SafetensorsFile::open(file, {}, mode);
        CHECK(test::same_bytes(f.load<float8_e4m3fn>("a").host_data(), e4m3.host_data()));
        CHECK(test::same_bytes(f.load<float8_e5m2>("b").host_data(), e5m2.host_data()));
        CHECK(test::same_bytes(f.load<float8_e8m0fnu>("c").host_data(), e8m0.host_data()));
        // a dtype is not another: E5M2 bytes are not read as E4M3 unless converting
        CHECK_THROWS_WITH(f.load<float8_e4m3fn>("b"), Contains("the file holds F8_E5M2, the blob F8_E4M3"));
    }
}

TEST_CASE("safetensors F8 tensors written by hand load as the OCP values; converting loads round to nearest even",
          "[io][safetensors][float8]") {
    // 0x38 = 1.0 (E4M3), 0x7E = 448, 0xB9 = -1.125, 0x01 = 2^-9; for E5M2 0x3C = 1.0, 0x7B = 57344, 0x7C = inf, 0
    const std::string bytes = st_bytes(
        "{\"e4\":{\"dtype\":\"F8_E4M3\",\"shape\":[4],\"data_offsets\":[0,4]},"
        "\"e5\":{\"dtype\":\"F8_E5M2\",\"shape\":[4],\"data_offsets\":[4,8]},"
        "\"f\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[8,20]}}",
        std::string("\x38\x7E\xB9\x01\x3C\x7B\x7C\0", 8) + std::string(12, '\0'));
    std::string with_floats = bytes;
    const float floats[] = {1.0625f, 1000.0f, -0.0f};  // a tie (to 1.0, even), beyond 448, negative zero
    std::memcpy(with_floats.data() + with_floats.size() - 12, floats, 12);
    const io::LoadOptions convert{.convert = true};
    const auto f = io::SafetensorsFile::from_memory(as_bytes(with_floats), "f8.safetensors", convert);
    const auto e4 = f.load<float>("e4");
    CHECK(std::vector<float>(e4.host_data().begin(), e4.host_data().end()) ==
          std::vector<float>{1.0f, 448.0f, -1.125f, 0x1p-9f});
    const auto e5 = f.load<float>("e5");
    CHECK(e5.host_data()[1] == 57344.0f);
    CHECK(std::isinf(e5.host_data()[2]));
    // float -> E4M3FN: 1000 is beyond its range: refused, or 448 with saturate
    CHECK_THROWS_WITH(f.load<float8_e4m3fn>("f"), Contains("overflows F8_E4M3"));
    const auto saturating =
        io::SafetensorsFile::from_memory(as_bytes(with_floats), "f8.safetensors", {.convert = true, .saturate = true});
    const auto e4m3 = saturating.load<float8_e4m3fn>("f");
    CHECK(e4m3.host_data()[0].bits == 0x38);
    CHECK(e4m3.host_data()[1].bits == 0x7E);
    CHECK(e4m3.host_data()[2].bits == 0x80);
}

TEST_CASE("safetensors reads the reference's documented example", "[io][safetensors]") {
    // From the reference implementation's documentation: a 60-byte header, not padded.
    const std::string file =
        st_bytes("{\"test\":{\"dtype\":\"I32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}", std::string(16, '\0'));
    const auto f = io::SafetensorsFile::from_memory(as_bytes(file), "example");
    const auto blob = f.load<std::int32_t>("test");
    CHECK(blob.shape() == Shape{2, 2});
    CHECK(blob.host_data()[3] == 0);
    CHECK(f.metadata().empty());
}

TEST_CASE("safetensors memory-mapped loading borrows the file's pages without copying", "[io][safetensors]") {
    const test::TempDir dir;
    const fs::path file = dir.path() / "w.safetensors";
    Blob<float> weights{256, 64};
    test::fill_values(weights);
    io::SafetensorsWriter w;
    w.add("w", weights, true);
    w.save(file);
    const std::string before = slurp(file);

    Blob<float> blob;
    {
        const auto f = io::SafetensorsFile::open(file, {}, io::LoadMode::map);
        f.load("w", blob);
    }                  // the file object is gone; the mapping lives on in the blob
    fs::remove(file);  // so is the file's name
    CHECK(blob.data_buffer()->host_borrowed());
    CHECK(blob.diff_buffer()->host_borrowed());
    CHECK(test::same_bytes(blob.host_data(), weights.host_data()));
    CHECK(test::same_bytes(blob.host_diff(), weights.host_diff()));
    CHECK(blob.data_stats().host_allocations == 0);
    CHECK(blob.data_stats().host_to_host == 0);
    CHECK(blob.diff_stats().host_allocations == 0);

    // A mutable access copies first, so the file is never written through the mapping.
    spit(file, before);
    Blob<float> again;
    io::SafetensorsFile::open(file, {}, io::LoadMode::map).load("w", again);
    again.mutable_host_data()[0] = 12345.0f;
    CHECK(again.data_stats().host_allocations == 1);
    CHECK(again.data_stats().host_to_host == 1);
    CHECK_FALSE(again.data_buffer()->host_borrowed());
    CHECK(slurp(file) == before);
    CHECK(again.host_data()[1] == weights.host_data()[1]);
}

TEST_CASE("safetensors mapped load onto a simulated device, and copying where borrowing cannot work",
          "[io][safetensors]") {
    const test::TempDir dir;
    const SimulatedDevice::Scope scope{SimulatedDevice::Settings{}};
    const fs::path file = dir.path() / "m.safetensors";
    Blob<float> small{4};
    test::fill_values(small);
    io::save_safetensors(file, std::map<std::string, Blob<float>>{}, {});  // an empty file is valid
    CHECK(io::load_safetensors<float>(file).empty());
    io::SafetensorsWriter w;
    w.add("s", small);
    w.save(file);
    const auto f = io::SafetensorsFile::open(file, {}, io::LoadMode::map);

    Blob<float, Simulated> on_device;
    f.load("s", on_device);
    (void)on_device.device_data();
    CHECK(on_device.data_stats().host_to_device == 1);
    CHECK(on_device.data_stats().host_allocations == 0);

    Blob<float> roomy{100};  // capacity larger than the tensor: a load builds new storage, which borrows too
    roomy.fill(1.0f);
    f.load("s", roomy);
    CHECK(roomy.data_buffer()->host_borrowed());
    CHECK(roomy.count() == 4);
    CHECK(test::same_bytes(roomy.host_data(), small.host_data()));

    Blob<double> converted;  // another dtype: converted into owned memory
    io::SafetensorsFile::open(file, io::LoadOptions{.convert = true}, io::LoadMode::map).load("s", converted);
    CHECK(converted.host_data()[2] == static_cast<double>(small.host_data()[2]));
}

TEST_CASE("safetensors load some by name, conversion, shape rules and limits", "[io][safetensors]") {
    const test::TempDir dir;
    const fs::path file = dir.path() / "m.safetensors";
    Blob<double> x{16, 16};
    test::fill_values(x);
    Blob<std::int32_t> y{3};
    test::fill_values(y);
    io::SafetensorsWriter w;
    w.add("x", x);
    w.add("y", y);
    w.save(file);

    const auto f = io::SafetensorsFile::open(file);
    CHECK(f.contains("x"));
    CHECK_FALSE(f.contains("z"));
    const std::vector<std::string> names{"y"};
    const auto some = f.load_some<std::int32_t>(names);
    REQUIRE(some.size() == 1);
    CHECK(test::same_bytes(some.at("y").host_data(), y.host_data()));

    Blob<float> blob;
    CHECK_THAT(test::message_of<FormatError>([&] { f.load("x", blob); }),
               Contains("m.safetensors: tensor \"x\": dtype: the file holds F64, the blob F32 (set "
                        "LoadOptions::convert to convert)"));
    CHECK_THAT(test::message_of<FormatError>([&] { f.load("z", blob); }),
               Contains("m.safetensors: tensor \"z\": not in the file"));
    const auto converting = io::SafetensorsFile::open(file, io::LoadOptions{.convert = true});
    converting.load("x", blob);
    CHECK(blob.host_data()[3] == static_cast<float>(x.host_data()[3]));

    Blob<double> fixed{256};
    fixed.fill(5.0);
    CHECK_THAT(test::message_of<ShapeError>(
                   [&] { io::SafetensorsFile::open(file, io::LoadOptions{.reshape = false}).load("x", fixed); }),
               Contains("holds \"x\" of shape 16 16 (256), the blob has 256 (256)"));
    CHECK(fixed.host_data()[0] == 5.0);

    CHECK_THAT(test::message_of<FormatError>([&] {
                   (void)io::SafetensorsFile::open(file, io::LoadOptions{.max_bytes = 2047}).load<double>("x");
               }),
               Contains("tensor \"x\": loading needs 2048 bytes, more than the limit of 2047"));
    CHECK_THAT(test::message_of<FormatError>([&] {
                   (void)io::SafetensorsFile::open(file, io::LoadOptions{.max_bytes = 2060, .convert = true})
                       .load_all<double>();
               }),
               Contains("tensors: loading needs 2072 bytes, more than the limit of 2060"));
}

TEST_CASE("safetensors writer rejects taken and reserved names", "[io][safetensors]") {
    Blob<float> b{1};
    io::SafetensorsWriter w;
    w.add("w", b, true);
    CHECK_THAT(test::message_of<FormatError>([&] { w.add("w", b); }), Contains("tensor \"w\": added twice"));
    CHECK_THAT(test::message_of<FormatError>([&] { w.add("w.__diff__", b); }),
               Contains("tensor \"w.__diff__\": names ending in \".__diff__\" are reserved for diffs"));
    CHECK_THAT(test::message_of<FormatError>([&] { w.add("__metadata__", b); }), Contains("the name is reserved"));
    w.metadata()["bad"] = "\xFF\xFE";
    CHECK_THAT(test::message_of<FormatError>([&] { (void)w.header(); }), Contains("is not valid UTF-8"));
}

TEST_CASE("safetensors corpus of malformed files, each rejected with its message", "[io][safetensors][malformed]") {
    const std::string f32x2 = std::string(8, '\0');
    const auto one = [](const std::string& entry) { return "{\"w\":" + entry + "}"; };
    struct Case {
        const char* name;
        std::string bytes;
        const char* message;
    };
    std::string huge(8, '\0');
    huge[7] = '\x7F';
    std::string over(8, '\0');
    over[3] = '\x10';  // 268435456 > 100 MB
    const Case cases[] = {
        {"empty", "", "bad.safetensors: header length: expected an 8-byte header length, the input holds 0 bytes"},
        {"truncated length", std::string("\x10\x00\x00", 3),
         "expected an 8-byte header length, the input holds 3 bytes (truncated)"},
        {"huge header length", huge + "{}",
         "bad.safetensors: header length: 9151314442816847872 bytes exceed the limit of 100000000 (the format's 100 "
         "MB)"},
        {"header over 100 MB", over + "{}", "268435456 bytes exceed the limit of 100000000"},
        {"header longer than the file", st_bytes(one("{}"), "").substr(0, 12),
         "bad.safetensors: header length: 8 header bytes expected, the input holds only 4 after the length "
         "(truncated)"},
        {"header not JSON", st_bytes("{\"w\": nope}", ""),
         "bad.safetensors: header byte 14: not valid JSON: expected 'null'"},
        {"header not an object", st_bytes("[1, 2]", ""),
         "bad.safetensors: header byte 8: expected '{' opening the JSON header"},
        {"header with a leading space", st_bytes(" {}", ""), "expected '{' opening the JSON header"},
        {"duplicate tensor",
         st_bytes("{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},\"w\":{\"dtype\":\"U8\",\"shape\":[1]"
                  ",\"data_offsets\":[1,2]}}",
                  "ab"),
         "bad.safetensors: header: duplicate key \"w\""},
        {"duplicate field",
         st_bytes(one("{\"dtype\":\"U8\",\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}"), f32x2),
         "bad.safetensors: header entry: duplicate key \"dtype\""},
        {"duplicate metadata key", st_bytes("{\"__metadata__\":{\"a\":\"1\",\"a\":\"2\"}}", ""), "duplicate key \"a\""},
        {"too deep", st_bytes(one("{\"dtype\":{\"x\":{}},\"shape\":[],\"data_offsets\":[0,0]}"), ""),
         "objects nested deeper than a tensor's entry"},
        {"nested arrays", st_bytes(one("{\"dtype\":\"U8\",\"shape\":[[1]],\"data_offsets\":[0,1]}"), "a"),
         "arrays nested inside arrays"},
        {"metadata not strings", st_bytes("{\"__metadata__\":{\"epoch\":3}}", ""),
         "bad.safetensors: __metadata__: expected string values, \"epoch\" holds a number"},
        {"metadata not an object", st_bytes("{\"__metadata__\":[\"a\"]}", ""),
         "__metadata__: expected an object of strings, found array"},
        {"entry not an object", st_bytes(one("3"), ""),
         "tensor \"w\": expected an object with dtype, shape and data_offsets, found number"},
        {"unknown field", st_bytes(one("{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"extra\":1}"), f32x2),
         "tensor \"w\": unexpected key \"extra\""},
        {"missing field", st_bytes(one("{\"dtype\":\"F32\",\"shape\":[2]}"), f32x2),
         "tensor \"w\": missing \"data_offsets\""},
        {"bad dtype", st_bytes(one("{\"dtype\":\"F31\",\"shape\":[2],\"data_offsets\":[0,8]}"), f32x2),
         "bad.safetensors: tensor \"w\": dtype: \"F31\" is not a safetensors dtype"},
        {"unsupported dtype", st_bytes(one("{\"dtype\":\"F4\",\"shape\":[8],\"data_offsets\":[0,4]}"), f32x2),
         "\"F4\" is a safetensors dtype syncblob does not support"},
        {"dtype not a string", st_bytes(one("{\"dtype\":4,\"shape\":[2],\"data_offsets\":[0,8]}"), f32x2),
         "dtype: expected a string, found number"},
        {"negative extent", st_bytes(one("{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}"), f32x2),
         "tensor \"w\": shape: expected non-negative integer extents, found -2"},
        {"fractional extent", st_bytes(one("{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}"), f32x2),
         "found 2.0"},
        {"count overflow",
         st_bytes(one("{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}"), f32x2),
         "tensor \"w\": shape: element count overflows int64 at axis 1"},
        {"byte size overflow",
         st_bytes(one("{\"dtype\":\"F64\",\"shape\":[4611686018427387904],\"data_offsets\":[0,8]}"), f32x2),
         "the byte size of the shape overflows"},
        {"33 axes",
         st_bytes(one("{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],"
                      "\"data_offsets\":[0,1]}"),
                  "a"),
         "tensor \"w\": shape: 33 axes, at most 32 supported"},
        {"offsets not a pair", st_bytes(one("{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}"), f32x2),
         "tensor \"w\": data_offsets: expected [begin, end] as two non-negative integers, found [0]"},
        {"negative offset", st_bytes(one("{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[-8,0]}"), f32x2),
         "found [-8,0]"},
        {"end before begin",
         st_bytes(one("{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]},\"v\":{\"dtype\":\"U8\",\"shape\":[1],"
                      "\"data_offsets\":[8,1]}"),
                  ""),
         "end before begin"},
        {"not from 0", st_bytes(one("{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}"), f32x2),
         "bad.safetensors: tensor \"w\": data_offsets [4, 8]: gap: data bytes [0, 4) belong to no tensor"},
        {"gapped offsets",
         st_bytes("{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},\"b\":{\"dtype\":\"U8\",\"shape\":[2]"
                  ",\"data_offsets\":[4,6]}}",
                  "abcdef"),
         "tensor \"b\": data_offsets [4, 6]: gap: data bytes [2, 4) belong to no tensor (offsets must be contiguous "
         "from 0)"},
        {"overlapping offsets",
         st_bytes("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},\"b\":{\"dtype\":\"U8\",\"shape\":[4]"
                  ",\"data_offsets\":[2,6]}}",
                  "abcdef"),
         "tensor \"b\": data_offsets [2, 6]: overlaps tensor \"a\", which ends at data byte 4"},
        {"shape and size mismatch", st_bytes(one("{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}"), f32x2),
         "tensor \"w\": data_offsets [0, 8]: hold 8 bytes, shape [3] of F32 needs 12"},
        {"data truncated", st_bytes(one("{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}"), "abc"),
         "data_offsets [0, 8]: past the end of the data (3 bytes; truncated)"},
        {"trailing bytes", st_bytes(one("{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}"), f32x2 + "x"),
         "bad.safetensors: data: the tensors end at data byte 8, the data holds 9 bytes (trailing bytes)"},
        {"invalid UTF-8 name", st_bytes("{\"\xC3\x28\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}}", ""),
         "not valid JSON"},
        {"truncated JSON", st_bytes("{\"w\":{\"dtype\":", ""), "not valid JSON"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.name);
        CHECK_THAT(open_error(c.bytes), Contains(c.message));
    }
    CHECK_THAT(open_error(st_bytes("{}", ""), io::LoadOptions{.max_bytes = 1}),
               Contains("header length: 2 bytes exceed the limit of 1 (LoadOptions::max_bytes)"));
}

TEST_CASE("safetensors diff tensor that does not match its data", "[io][safetensors][malformed]") {
    const std::string file = st_bytes(
        "{\"w\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},\"w.__diff__\":{\"dtype\":\"U8\",\"shape\":[1],"
        "\"data_offsets\":[2,3]}}",
        "abc");
    const auto f = io::SafetensorsFile::from_memory(as_bytes(file), "d.safetensors");
    Blob<std::uint8_t> blob;
    CHECK_THAT(test::message_of<FormatError>([&] { f.load("w", blob); }),
               Contains("d.safetensors: tensor \"w.__diff__\": a diff must have the dtype and shape of \"w\""));
    CHECK_FALSE(blob.has_shape());
}

TEST_CASE("safetensors BOOL bytes other than 0 and 1 are read as true, copied rather than borrowed",
          "[io][safetensors]") {
    const test::TempDir dir;
    const fs::path file = dir.path() / "b.safetensors";
    spit(file, st_bytes("{\"b\":{\"dtype\":\"BOOL\",\"shape\":[4],\"data_offsets\":[0,4]}}",
                        std::string("\x00\x01\x07\xFF", 4)));
    for (const auto mode : {io::LoadMode::copy, io::LoadMode::map}) {
        const auto blob = io::SafetensorsFile::open(file, {}, mode).load<bool>("b");
        CHECK_FALSE(blob.data_buffer()->host_borrowed());
        const auto v = blob.host_data();
        unsigned char raw[4];
        std::memcpy(raw, v.data(), 4);
        CHECK(raw[0] == 0);
        CHECK(raw[1] == 1);
        CHECK(raw[2] == 1);  // normalised, so reading it as bool is defined
        CHECK(raw[3] == 1);
    }
    spit(file,
         st_bytes("{\"b\":{\"dtype\":\"BOOL\",\"shape\":[2],\"data_offsets\":[0,2]}}", std::string("\x01\x00", 2)));
    const auto normal = io::SafetensorsFile::open(file, {}, io::LoadMode::map).load<bool>("b");
    CHECK(normal.data_buffer()->host_borrowed());
    CHECK(normal.host_data()[0]);
    CHECK_FALSE(normal.host_data()[1]);
}

TEST_CASE("safetensors writer adds a blob and its diff both or neither", "[io][safetensors][hostile]") {
    Blob<float> b{2};
    b.fill(1.0f);
    b.fill_diff(2.0f);
    io::SafetensorsWriter w;
    w.add_bytes("w", Dtype::F32, {1}, std::as_bytes(b.host_data().first(1)));
    const std::string before = w.header();
    CHECK_THROWS_AS(w.add("w", b, true), FormatError);  // "w" is taken: "w.__diff__" must not stay behind
    CHECK_THROWS_AS(w.add("__metadata__", b, true), FormatError);
    CHECK(w.header() == before);
    CHECK(w.header().find("__diff__") == std::string::npos);
    w.add("v", b, true);
    CHECK(w.header().find("\"v.__diff__\"") != std::string::npos);
}

TEST_CASE("safetensors load is all or nothing: a failed allocation leaves the blob as it was",
          "[io][safetensors][strong]") {
    Blob<float> source{3, 4};
    test::fill_values(source);
    source.fill_diff(7.0f);
    io::SafetensorsWriter w;
    w.add("p", source, true);
    const test::TempDir dir;
    const fs::path file = dir.path() / "p.safetensors";
    w.save(file);
    const auto f = io::SafetensorsFile::open(file);
    auto blob = test::target_with_values<float>();
    int failures = 0;
    CHECK(test::fail_each_allocation(
              blob, [&](auto& b) { f.load("p", b); }, failures) == "");
    CHECK(failures >= 2);  // the data, then the diff after the data was read
    REQUIRE(blob.shape() == Shape{3, 4});
    CHECK(test::same_bytes(blob.host_data(), source.host_data()));
    CHECK(blob.host_diff()[11] == 7.0f);
}

TEST_CASE("safetensors load from a file cut short under an open reader leaves the blob as it was",
          "[io][safetensors][strong]") {
    const test::TempDir dir;
    const fs::path file = dir.path() / "t.safetensors";
    Blob<double> source{64};
    test::fill_values(source);
    source.fill_diff(3.0);
    io::SafetensorsWriter w;
    w.add("t", source, true);
    w.save(file);
    const auto f = io::SafetensorsFile::open(file);  // the header is read and validated now
    fs::resize_file(file, fs::file_size(file) - 100);

    Blob<double> blob{2};
    blob.fill(1.0);
    blob.fill_diff(2.0);
    const auto before = test::BlobSnapshot(blob);
    CHECK_THAT(test::message_of<FormatError>([&] { f.load("t", blob); }),
               Contains("t.safetensors") && Contains("truncated"));
    CHECK(before.differences(blob) == "");
}

TEST_CASE("load_all from a file cut short inside a run of small tensors names the tensor whose bytes it cut",
          "[io][safetensors]") {
    const test::TempDir dir;
    const fs::path file = dir.path() / "t.safetensors";
    std::vector<Blob<float>> blobs;
    blobs.reserve(100);
    io::SafetensorsWriter w;
    for (int k = 0; k < 100; ++k) {
        blobs.emplace_back(Shape{2}).fill(static_cast<float>(k));
        w.add("t" + std::to_string(100 + k), blobs.back(), k % 2 == 0);  // "t100".."t199", in the file's order
    }
    w.save(file);
    const auto f = io::SafetensorsFile::open(file);
    const std::string bytes = slurp(file);
    std::uint64_t header = 0;
    std::memcpy(&header, bytes.data(), 8);  // little-endian, as this machine
    // Each tensor holds 8 bytes, in name order: before "t150" lie t100..t149 and the diffs of the 25 even ones.
    const std::uint64_t t150 = 8 + header + 75 * 8;
    const std::uint64_t cut = GENERATE(std::uint64_t{0}, std::uint64_t{4});  // at its first byte, or inside it
    CAPTURE(cut);
    fs::resize_file(file, t150 + cut);
    CHECK_THAT(test::message_of<FormatError>([&] { (void)f.load_all<float>(); }),
               Contains("t.safetensors: tensor \"t150\": file ends at byte " + std::to_string(t150 + cut)) &&
                   Contains("(truncated)"));
}

TEST_CASE("safetensors max_bytes bounds a mapped load as it bounds a copying one", "[io][safetensors][hostile]") {
    const test::TempDir dir;
    const fs::path file = dir.path() / "big.safetensors";
    Blob<float> x{256};
    test::fill_values(x);
    io::SafetensorsWriter w;
    w.add("x", x);
    w.save(file);
    for (const auto mode : {io::LoadMode::copy, io::LoadMode::map}) {
        const auto f = io::SafetensorsFile::open(file, io::LoadOptions{.max_bytes = 1023}, mode);
        Blob<float> blob;
        CHECK_THAT(test::message_of<FormatError>([&] { f.load("x", blob); }),
                   Contains("tensor \"x\": loading needs 1024 bytes, more than the limit of 1023"));
        CHECK_THAT(test::message_of<FormatError>([&] { (void)f.load_all<float>(); }),
                   Contains("loading needs 1024 bytes"));
        CHECK_FALSE(blob.has_shape());
    }
}

TEST_CASE("safetensors saving over a mapped file leaves the mapped blob's values intact",
          "[io][safetensors][hostile]") {
    const test::TempDir dir;
    const fs::path file = dir.path() / "m.safetensors";
    Blob<float> first{1024};
    test::fill_values(first);
    io::SafetensorsWriter w;
    w.add("m", first);
    w.save(file);
    Blob<float> mapped;
    io::SafetensorsFile::open(file, {}, io::LoadMode::map).load("m", mapped);
    REQUIRE(mapped.data_buffer()->host_borrowed());

    Blob<float> second{1024};
    second.fill(-1.0f);
    io::SafetensorsWriter w2;
    w2.add("m", second);
    w2.save(file);  // replaces the file (a new inode); the mapping keeps the old one
    CHECK(test::same_bytes(mapped.host_data(), first.host_data()));
    CHECK(io::SafetensorsFile::open(file).load<float>("m").host_data()[0] == -1.0f);
}

TEST_CASE("safetensors shape with a zero extent is still checked as a whole", "[io][safetensors][hostile]") {
    const std::string file =
        st_bytes(R"({"z":{"dtype":"F32","shape":[0,1099511627776,1099511627776],"data_offsets":[0,0]}})", "");
    CHECK_THAT(open_error(file), Contains("bad.safetensors") && Contains("tensor \"z\"") && Contains("shape") &&
                                     Contains("overflows int64"));
}

namespace {

// A valid file of `n` one-byte U8 tensors named "t0", "t1", ... in data order, its header built by
// hand (each name in one entry), so making it costs nothing the reader is being tested for.
std::string many_tensors(std::size_t n) {
    std::string header = "{";
    for (std::size_t i = 0; i < n; ++i) {
        header += (i == 0 ? "\"t" : ",\"t") + std::to_string(i) +
                  "\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[" + std::to_string(i) + "," +
                  std::to_string(i + 1) + "]}";
    }
    header += "}";
    std::string data(n, '\0');
    for (std::size_t i = 0; i < n; ++i) {
        data[i] = static_cast<char>(i % 251);
    }
    return st_bytes(header, data);
}

}  // namespace

// Issue 34, case 2. Before: the header parser scanned the whole root object at the end of every
// tensor's entry and load_all found each name by a linear search, so 100 000 tensors took minutes
// (the test did not finish in 120 s); both are linear now (see benchmarks/bench_parse.cpp).
TEST_CASE("safetensors with 100 000 tensors opens and loads every one in linear time",
          "[io][safetensors][hostile][linear]") {
    constexpr std::size_t n = 100'000;
    const std::string bytes = many_tensors(n);
    const auto f = io::SafetensorsFile::from_memory(as_bytes(bytes), "many.safetensors");
    REQUIRE(f.tensors().size() == n);
    CHECK(f.contains("t99999"));
    CHECK_FALSE(f.contains("t100000"));
    const auto all = f.load_all<std::uint8_t>();
    REQUIRE(all.size() == n);
    for (const std::size_t i : {std::size_t{0}, std::size_t{12345}, n - 1}) {
        CHECK(all.at("t" + std::to_string(i)).host_data()[0] == i % 251);
    }
}

// load_all fills its map in name order through name_order, which sorts on eight bytes kept beside
// each position and compares whole names only where those tie: it must order exactly as
// std::string's < does, whatever the bytes (NUL, bytes over 0x7F, names that extend others, long
// shared prefixes, empty names).
TEST_CASE("name_order sorts names exactly as std::string does, whatever their bytes", "[io][safetensors][linear]") {
    std::mt19937 rng(GENERATE(1u, 2u, 3u, 4u, 5u));
    const std::string alphabet("ab\0\x7f\x80\xff.", 7);
    const std::vector<std::string> prefixes{"", "model.layers.", "model.layers.1"};
    std::vector<std::string> names(std::uniform_int_distribution<std::size_t>(0, 300)(rng));
    for (auto& name : names) {
        name = prefixes[rng() % prefixes.size()];
        const std::size_t length = rng() % 12;
        for (std::size_t k = 0; k < length; ++k) {
            name += alphabet[rng() % alphabet.size()];
        }
    }
    if (!names.empty() && rng() % 2 == 0) {  // every name shares a prefix (one of them may be just that)
        for (auto& name : names) {
            name.insert(0, "shared.");
        }
    }
    const auto order =
        io::detail::name_order(names.size(), [&](std::size_t i) -> std::string_view { return names[i]; });
    REQUIRE(order.size() == names.size());
    std::vector<std::string> sorted;
    for (const std::size_t i : order) {
        sorted.push_back(names.at(i));
    }
    auto expected = names;
    std::sort(expected.begin(), expected.end());
    CHECK(sorted == expected);
    auto positions = order;
    std::sort(positions.begin(), positions.end());
    CHECK(std::adjacent_find(positions.begin(), positions.end()) == positions.end());  // each position once
}

// The writer puts its tensors in the reference's order (dtype enum descending, then name) by sorting
// their positions (name_order, then a stable pass by dtype) and moving each entry once; entries
// already in order are left. Whatever the names, dtypes and order of adding, the file must hold
// them in that order, each tensor's bytes at its offsets, after header() was asked for before.
TEST_CASE("safetensors writer lays out any names and dtypes in the reference's order", "[io][safetensors][linear]") {
    std::mt19937 rng(GENERATE(1u, 2u, 3u, 4u, 5u));
    const std::vector<std::string> pieces{"a", "b", ".", std::string(1, '\0'), "\xc3\xa9", "z", "layers.1"};
    const std::vector<Dtype> dtypes{Dtype::U8, Dtype::F32, Dtype::F64, Dtype::BF16, Dtype::I64};
    std::map<std::string, Dtype> want;
    for (std::size_t n = rng() % 400; n > 0; --n) {
        std::string name = rng() % 2 == 0 ? "model." : "";
        for (std::size_t k = rng() % 6; k > 0; --k) {
            name += pieces[rng() % pieces.size()];
        }
        want.emplace(name, rng() % 4 == 0 ? dtypes[rng() % dtypes.size()] : Dtype::F32);
    }
    std::vector<std::pair<std::string, Dtype>> added(want.begin(), want.end());
    if (rng() % 3 != 0) {  // added in name order now and then, else shuffled
        std::shuffle(added.begin(), added.end(), rng);
    }
    io::SafetensorsWriter w;
    std::map<std::string, std::vector<std::byte>> bytes;
    for (const auto& [name, dtype] : added) {
        auto& b = bytes[name];
        for (std::size_t k = 0; k < dtype_size(dtype); ++k) {
            b.push_back(static_cast<std::byte>(rng()));
        }
        w.add_bytes(name, dtype, {1}, b);
    }
    (void)w.header();  // orders the entries; save orders them again
    const test::TempDir dir;
    w.save(dir.path() / "o.safetensors");

    auto expected = added;
    std::sort(expected.begin(), expected.end(), [](const auto& a, const auto& b) {
        const int ra = io::detail::safetensors_rank(a.second);
        const int rb = io::detail::safetensors_rank(b.second);
        return ra != rb ? ra > rb : a.first < b.first;
    });
    const std::string file = slurp(dir.path() / "o.safetensors");
    std::uint64_t header = 0;
    for (int i = 7; i >= 0; --i) {
        header = (header << 8) | static_cast<unsigned char>(file[static_cast<std::size_t>(i)]);
    }
    auto tensors = io::SafetensorsFile::open(dir.path() / "o.safetensors").tensors();
    std::sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) { return a.data_begin < b.data_begin; });
    REQUIRE(tensors.size() == expected.size());
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        CAPTURE(i);
        REQUIRE(tensors[i].name == expected[i].first);
        CHECK(tensors[i].dtype == expected[i].second);
        const auto& b = bytes.at(tensors[i].name);
        REQUIRE(tensors[i].data_end - tensors[i].data_begin == b.size());
        CHECK(std::memcmp(file.data() + 8 + header + tensors[i].data_begin, b.data(), b.size()) == 0);
    }
}

// json_quote writes printable ASCII without " and \ itself, and hands everything else to nlohmann:
// for any bytes it must write what nlohmann's strict dump writes, and refuse what it refuses.
TEST_CASE("json_quote writes every string as nlohmann's strict dump does, and refuses what it refuses",
          "[io][safetensors][json]") {
    std::mt19937 rng(GENERATE(1u, 2u, 3u));
    const std::string alphabet("az09 ~.\"\\/\x7f\x1f\n\0\xc3\xa9\xff", 17);
    for (int round = 0; round < 2000; ++round) {
        std::string text;
        const bool printable = round % 2 == 0;  // half of them from the characters written as they are
        for (std::size_t k = rng() % 10; k > 0; --k) {
            text += alphabet[rng() % (printable ? 6 : alphabet.size())];
        }
        CAPTURE(text);
        std::string expected;
        bool refused = false;
        try {
            expected = nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::strict);
        } catch (const nlohmann::json::exception&) {
            refused = true;
        }
        std::string out = "x";
        if (refused) {
            CHECK_THROWS_AS(io::parse::append_json_quoted(out, text, "name"), FormatError);
            CHECK(out == "x");
        } else {
            io::parse::append_json_quoted(out, text, "name");
            CHECK(out == "x" + expected);
            CHECK(io::parse::json_quote(text, "name") == expected);
        }
    }
}

// Before: each add compared the name with every name added so far (quadratic in the count).
TEST_CASE("safetensors writer takes 100 000 tensors in linear time and still refuses a taken name",
          "[io][safetensors][hostile][linear]") {
    constexpr std::size_t n = 100'000;
    const std::byte one{1};
    io::SafetensorsWriter w;
    for (std::size_t i = 0; i < n; ++i) {
        w.add_bytes("t" + std::to_string(i), Dtype::U8, {1}, std::span(&one, 1));
    }
    CHECK_THAT(test::message_of<FormatError>([&] { w.add_bytes("t77777", Dtype::U8, {1}, std::span(&one, 1)); }),
               Contains("tensor \"t77777\": added twice"));
    CHECK(w.header().size() > n * 50);
}

// Issue 34, case 4. Before: a tensor "m.__diff__" without "m" was saved, then skipped by load_all
// and load_safetensors without a word (the map came back empty).
TEST_CASE("safetensors: every tensor loads or is an error, a diff without its blob included",
          "[io][safetensors][diff]") {
    const std::string orphan =
        st_bytes("{\"m.__diff__\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", std::string(1, '\x05'));
    const auto f = io::SafetensorsFile::from_memory(as_bytes(orphan), "o.safetensors");
    CHECK_THAT(test::message_of<FormatError>([&] { (void)f.load_all<std::uint8_t>(); }),
               Contains("o.safetensors: tensor \"m.__diff__\"") && Contains("no tensor \"m\""));
    // Asked for by name, it loads as a tensor of its own.
    CHECK(f.load<std::uint8_t>("m.__diff__").host_data()[0] == 5);

    const test::TempDir dir;
    const fs::path file = dir.path() / "o.safetensors";
    spit(file, orphan);
    CHECK_THAT(test::message_of<FormatError>([&] { (void)io::load_safetensors<std::uint8_t>(file); }),
               Contains("tensor \"m.__diff__\""));

    // The diff of a diff has no blob to load into either.
    const std::string nested = st_bytes(
        "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},\"a.__diff__\":{\"dtype\":\"U8\",\"shape\":[1],"
        "\"data_offsets\":[1,2]},\"a.__diff__.__diff__\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[2,3]}}",
        "abc");
    CHECK_THAT(test::message_of<FormatError>([&] {
                   (void)io::SafetensorsFile::from_memory(as_bytes(nested), "n.safetensors").load_all<std::uint8_t>();
               }),
               Contains("tensor \"a.__diff__.__diff__\""));
}

// Before: the writer saved a user's tensor under the name reserved for diffs, which a load then
// took for (or dropped as) the diff of another tensor.
TEST_CASE("safetensors writer refuses a tensor name ending in the diff suffix", "[io][safetensors][diff]") {
    const std::byte one{1};
    io::SafetensorsWriter w;
    CHECK_THAT(test::message_of<FormatError>([&] { w.add_bytes("m.__diff__", Dtype::U8, {1}, std::span(&one, 1)); }),
               Contains("tensor \"m.__diff__\"") && Contains("reserved"));
    Blob<float> b{1};
    CHECK_THAT(test::message_of<FormatError>([&] { w.add("x.__diff__", b); }), Contains("reserved"));
    CHECK_THAT(test::message_of<FormatError>([&] { w.add("y.__diff__", b, true); }), Contains("reserved"));
    w.add("y", b, true);  // the writer's own diff name is fine
    CHECK_THAT(w.header(), Contains("\"y.__diff__\""));
}

// Issue 34, case 10. Before: add_bytes trusted the caller's bytes to match the shape and wrote a
// file its own reader refuses.
TEST_CASE("safetensors writer checks raw bytes against the shape before taking them", "[io][safetensors][hostile]") {
    const std::array<std::byte, 12> bytes{};
    io::SafetensorsWriter w;
    CHECK_THAT(test::message_of<FormatError>([&] { w.add_bytes("x", Dtype::F32, {2}, bytes); }),
               Contains("tensor \"x\"") && Contains("12 bytes") && Contains("needs 8"));
    CHECK_THAT(test::message_of<FormatError>([&] { w.add_bytes("y", Dtype::F32, {-3}, bytes); }),
               Contains("tensor \"y\"") && Contains("negative"));
    w.add_bytes("x", Dtype::F32, {3}, bytes);  // the name was not taken by the refused call
}

// Issue 34, case 8. Before: I64 -1 loaded into a U8 blob as 255.
TEST_CASE("a converting safetensors load refuses a value the blob cannot hold", "[io][safetensors][convert]") {
    const std::int64_t v[] = {7, -1};
    const std::string file = st_bytes("{\"w\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,16]}}",
                                      std::string(reinterpret_cast<const char*>(v), sizeof v));
    const auto f = io::SafetensorsFile::from_memory(as_bytes(file), "c.safetensors", io::LoadOptions{.convert = true});
    Blob<std::uint8_t> u;
    CHECK_THAT(test::message_of<FormatError>([&] { f.load("w", u); }),
               Contains("c.safetensors: tensor \"w\"") && Contains("element 1") && Contains("-1") && Contains("U8"));
    CHECK_FALSE(u.has_shape());
}
