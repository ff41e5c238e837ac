// SPDX-License-Identifier: BSD-2-Clause
// Blobs as JSON: exact round trips of every dtype and rank, NaN and infinities, legacy fields,
// strict and converting reads, files, and a corpus of malformed documents.

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <syncblob/io/json.hpp>

#include "peak_memory.hpp"
#include "strong_guarantee.hpp"
#include "tempfile.hpp"

namespace io = syncblob::io;
using Catch::Matchers::Contains;
using nlohmann::json;
using syncblob::bfloat16;
using syncblob::Blob;
using syncblob::FormatError;
using syncblob::half;
using syncblob::Shape;
using syncblob::ShapeError;

namespace {

// A value of T for element i that exercises the type: extremes, fractions, negatives.
template <class T>
T sample(std::size_t i) {
    if constexpr (std::same_as<T, bool>) {
        return i % 3 == 1;
    } else if constexpr (std::same_as<T, half> || std::same_as<T, bfloat16>) {
        return T(static_cast<float>(i) * 0.3f - 2.0f);
    } else if constexpr (std::is_class_v<T>) {  // an 8-bit float: its bit patterns in turn, a NaN's as 0x01
        const T v = T::from_bits(static_cast<std::uint8_t>(i * 37 % 256));
        return std::isnan(static_cast<float>(v)) ? T::from_bits(1) : v;
    } else if constexpr (std::floating_point<T>) {
        const T special[] = {std::numeric_limits<T>::max(), std::numeric_limits<T>::denorm_min(), T(0.1), T(-0.0)};
        return i < 4 ? special[i] : static_cast<T>(i) / T(7) - T(3);
    } else {
        const T special[] = {std::numeric_limits<T>::max(), std::numeric_limits<T>::min()};
        return i < 2 ? special[i] : static_cast<T>(i * 3);
    }
}

template <class T>
bool same_bits(std::span<const T> a, std::span<const T> b) {
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

json parse(const char* text) {
    return json::parse(text);
}

}  // namespace

TEMPLATE_TEST_CASE("every dtype and rank round-trips exactly, with and without diff", "[io][json]", float, double, half,
                   bfloat16, std::int64_t, std::int32_t, std::int16_t, std::int8_t, std::uint64_t, std::uint32_t,
                   std::uint16_t, std::uint8_t, bool, syncblob::float8_e4m3fn, syncblob::float8_e5m2,
                   syncblob::float8_e8m0fnu) {
    const bool with_diff = GENERATE(false, true);
    const std::vector<std::int64_t> extents =
        GENERATE(std::vector<std::int64_t>{}, std::vector<std::int64_t>{0}, std::vector<std::int64_t>{2, 0, 3},
                 std::vector<std::int64_t>{2, 3, 4}, std::vector<std::int64_t>(32, 1));
    Blob<TestType> b{Shape(std::span<const std::int64_t>(extents))};
    auto data = b.mutable_host_data_for_overwrite();
    for (std::size_t i = 0; i < data.size(); ++i) {
        data[i] = sample<TestType>(i);
    }
    if (with_diff) {
        auto diff = b.mutable_host_diff_for_overwrite();
        for (std::size_t i = 0; i < diff.size(); ++i) {
            diff[i] = sample<TestType>(i + 5);
        }
    }
    const json j = b;  // ADL to_json: diff only when it holds values
    CHECK(j.at("dtype") == std::string(syncblob::element_name<TestType>()));
    CHECK(j.at("shape") == json(extents));
    CHECK(j.contains("diff") == (with_diff && b.count() > 0));  // a zero-size diff never holds values
    // Through text, as a file would.
    Blob<TestType> back{7};
    back.fill_diff(TestType{});
    io::parse_json(j.dump(), back);
    CHECK(back.shape() == b.shape());
    CHECK(same_bits(back.host_data(), b.host_data()));
    if (with_diff) {
        CHECK(same_bits(back.host_diff(), b.host_diff()));
    }
    // And through nlohmann's get_to.
    Blob<TestType> again;
    j.get_to(again);
    CHECK(same_bits(again.host_data(), b.host_data()));
}

TEST_CASE("NaN and infinities are the strings NaN, Infinity and -Infinity", "[io][json]") {
    Blob<float> b{4};
    auto d = b.mutable_host_data();
    d[0] = std::numeric_limits<float>::quiet_NaN();
    d[1] = std::numeric_limits<float>::infinity();
    d[2] = -std::numeric_limits<float>::infinity();
    d[3] = 0.1f;
    const json j = io::to_json(b, io::WriteDiff::never);
    CHECK(j.at("data") == parse(R"(["NaN", "Infinity", "-Infinity", 0.1])"));
    CHECK(j.dump() == R"({"data":["NaN","Infinity","-Infinity",0.1],"dtype":"F32","shape":[4]})");
    Blob<double> back;
    io::from_json(parse(R"({"dtype": "F64", "shape": [3], "data": ["NaN", "-Infinity", 1e308]})"), back, {});
    CHECK(std::isnan(back.host_data()[0]));
    CHECK(back.host_data()[1] == -std::numeric_limits<double>::infinity());
    CHECK(back.host_data()[2] == 1e308);
    Blob<half> h;
    io::from_json(parse(R"({"dtype": "F16", "shape": [2], "data": ["Infinity", 65504]})"), h, {});
    CHECK(static_cast<float>(h.host_data()[0]) == std::numeric_limits<float>::infinity());
    CHECK(static_cast<float>(h.host_data()[1]) == 65504.0f);
}

TEST_CASE("8-bit floats in JSON: values as numbers, what the format cannot hold refused", "[io][json][float8]") {
    Blob<syncblob::float8_e5m2> e5;
    io::from_json(parse(R"({"dtype": "F8_E5M2", "shape": [4], "data": ["Infinity", 57344, 0.3, "NaN"]})"), e5, {});
    CHECK(e5.host_data()[0].bits == 0x7C);
    CHECK(e5.host_data()[1].bits == 0x7B);
    CHECK(e5.host_data()[2].bits == 0x35);  // 0.3 rounds to 0.3125 = 1.25 * 2^-2
    CHECK(std::isnan(static_cast<float>(e5.host_data()[3])));
    CHECK(io::to_json(e5, io::WriteDiff::never).at("data") == parse(R"(["Infinity", 57344.0, 0.3125, "NaN"])"));
    Blob<syncblob::float8_e4m3fn> e4;
    CHECK_THROWS_WITH(io::from_json(parse(R"({"dtype": "F8_E4M3", "shape": [1], "data": ["Infinity"]})"), e4, {}),
                      Contains("data[0]") && Contains("out of range for F8_E4M3"));
    CHECK_THROWS_WITH(io::from_json(parse(R"({"dtype": "F8_E4M3", "shape": [1], "data": [1000]})"), e4, {}),
                      Contains("out of range for F8_E4M3"));
    Blob<syncblob::float8_e8m0fnu> e8;
    CHECK_THROWS_WITH(io::from_json(parse(R"({"dtype": "F8_E8M0", "shape": [1], "data": [0]})"), e8, {}),
                      Contains("out of range for F8_E8M0"));
}

TEST_CASE("64-bit integers and bools are exact JSON values", "[io][json]") {
    Blob<std::int64_t> i{2};
    i.mutable_host_data()[0] = std::numeric_limits<std::int64_t>::min();
    i.mutable_host_data()[1] = (std::int64_t{1} << 53) + 1;
    CHECK(json(i).at("data").dump() == "[-9223372036854775808,9007199254740993]");
    Blob<std::uint64_t> u{1};
    u.fill(std::numeric_limits<std::uint64_t>::max());
    CHECK(json(u).at("data").dump() == "[18446744073709551615]");
    Blob<bool> flags{2};
    flags.mutable_host_data()[0] = true;
    flags.mutable_host_data()[1] = false;
    CHECK(json(flags).at("data").dump() == "[true,false]");
}

TEST_CASE("the legacy num/channels/height/width fields give a 4-D shape", "[io][json]") {
    Blob<float> b;
    io::from_json(parse(R"({"dtype": "F32", "num": 2, "channels": 1, "height": 1, "width": 2, "data": [1, 2, 3, 4]})"),
                  b, {});
    CHECK(b.shape() == Shape{2, 1, 1, 2});
    CHECK(b.data_at(1, 0, 0, 1) == 4.0f);
    io::from_json(parse(R"({"dtype": "F32", "channels": 3, "data": [1, 2, 3]})"), b, {});
    CHECK(b.shape() == Shape{1, 3, 1, 1});
}

TEST_CASE("the strict reader refuses another shape and leaves the blob unchanged", "[io][json]") {
    Blob<float> b{3};
    b.fill(2.0f);
    const json doc = parse(R"({"dtype": "F32", "shape": [1, 3], "data": [7, 8, 9]})");
    CHECK_THAT(test::message_of<ShapeError>([&] { io::from_json_strict(doc, b); }),
               Contains("1 3 (3)") && Contains("3 (3)") && Contains("reshape is false"));
    CHECK(b.shape() == Shape{3});
    CHECK(b.host_data()[0] == 2.0f);
    b.reshape({1, 3});
    io::from_json_strict(doc, b);
    CHECK(b.host_data()[2] == 9.0f);
}

TEST_CASE("another dtype is refused unless conversion is asked", "[io][json]") {
    const json doc = parse(R"({"dtype": "F64", "shape": [3], "data": [1.5, -300, "NaN"], "diff": [1, 2, 3]})");
    Blob<std::int8_t> b{1};
    b.fill(5);
    CHECK_THAT(test::message_of<FormatError>([&] { io::from_json(doc, b, {}); }),
               Contains("JSON: dtype: the document holds F64, the blob I8") && Contains("LoadOptions::convert"));
    CHECK(b.shape() == Shape{1});
    CHECK(b.host_data()[0] == 5);
    io::LoadOptions convert;
    convert.convert = true;
    // The file layer's conversion rule: a value I8 cannot hold is refused, unless saturating.
    CHECK_THAT(test::message_of<FormatError>([&] { io::from_json(doc, b, convert); }),
               Contains("JSON: data[0]: value 1.5 (F64) is not a whole number"));
    CHECK(b.shape() == Shape{1});
    convert.saturate = true;
    io::from_json(doc, b, convert);
    CHECK(std::vector<std::int8_t>(b.host_data().begin(), b.host_data().end()) == std::vector<std::int8_t>{1, -128, 0});
    CHECK(b.host_diff()[2] == 3);
}

TEST_CASE("JSON files save atomically and load with a limit", "[io][json]") {
    test::TempDir dir;
    const auto file = dir.path() / "blob.json";
    Blob<double> b{2, 2};
    b.fill(0.25);
    io::save_json(file, b, io::WriteDiff::always);
    Blob<double> back;
    io::load_json(file, back);
    CHECK(back.shape() == Shape{2, 2});
    CHECK(back.host_diff()[3] == b.host_diff()[3]);
    io::LoadOptions small;
    small.max_bytes = 16;
    CHECK_THAT(test::message_of<FormatError>([&] { io::load_json(file, back, small); }),
               Contains(file.string()) && Contains("LoadOptions::max_bytes"));
    // The limit also bounds the blob itself.
    small.max_bytes = 4 * sizeof(double) * 2 - 1;
    const std::string text = io::to_json(b, io::WriteDiff::always).dump();
    CHECK_THAT(test::message_of<FormatError>([&] { io::from_json(json::parse(text), back, small); }),
               Contains("LoadOptions::max_bytes"));
    Blob<double> none;
    CHECK_THROWS_AS(io::save_json(dir.path() / "none.json", none), ShapeError);
    CHECK_FALSE(std::filesystem::exists(dir.path() / "none.json"));
}

TEST_CASE("load_json<T>(path) gives a new blob, as load_npy<T>(path) does", "[io][json]") {
    test::TempDir dir;
    const auto file = dir.path() / "blob.json";
    Blob<float> b{3, 2};
    float next = -1.5f;
    for (float& v : b.mutable_host_data()) {
        v = next++;
    }
    io::save_json(file, b);
    const Blob<float> back = io::load_json<float>(file);
    CHECK(back.shape() == Shape{3, 2});
    CHECK(back.host_data()[5] == 3.5f);
    io::LoadOptions convert;
    convert.convert = true;
    const auto wide = io::load_json<double>(file, convert);
    CHECK(wide.host_data()[0] == -1.5);
    CHECK_THROWS_AS(io::load_json<double>(file), FormatError);  // another dtype, not asked to convert
}

TEST_CASE("every malformed document is a FormatError naming the field and what was expected", "[io][json]") {
    struct Case {
        const char* text;
        std::vector<const char*> expected;
    };
    const std::vector<Case> cases{
        {R"([1, 2])", {"document", "expected an object"}},
        {R"({"shape": [1], "data": [1]})", {"dtype", "missing"}},
        {R"({"dtype": "F33", "shape": [1], "data": [1]})", {"dtype", "expected one of F64", "F33"}},
        {R"({"dtype": 3, "shape": [1], "data": [1]})", {"dtype", "expected one of"}},
        {R"({"dtype": "F32", "data": [1]})", {"shape", "missing"}},
        {R"({"dtype": "F32", "shape": 3, "data": [1]})", {"shape", "expected an array of at most 32 extents"}},
        {R"({"dtype": "F32", "shape": [-1], "data": []})", {"shape[0]", "non-negative integer"}},
        {R"({"dtype": "F32", "shape": [1.5], "data": [1]})", {"shape[0]", "non-negative integer"}},
        {R"({"dtype": "F32", "shape": [1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1], "data": [1]})",
         {"shape", "at most 32", "of 33"}},
        {R"({"dtype": "F32", "shape": [4294967296, 4294967296], "data": []})", {"shape", "overflows int64"}},
        {R"({"dtype": "F32", "shape": [1], "num": 1, "data": [1]})", {"shape", "legacy"}},
        {R"({"dtype": "F32", "num": -2, "data": [1]})", {"num", "non-negative"}},
        {R"({"dtype": "F32", "shape": [2]})", {"data", "missing"}},
        {R"({"dtype": "F32", "shape": [2], "data": [1]})", {"data", "expected an array of 2 values", "of 1"}},
        {R"({"dtype": "F32", "shape": [2], "data": {"a": 1}})", {"data", "expected an array of 2 values", "object"}},
        {R"({"dtype": "F32", "shape": [1], "data": [1], "diff": [1, 2]})", {"diff", "expected an array of 1 values"}},
        {R"({"dtype": "F32", "shape": [2], "data": [1, null]})", {"data[1]", "expected a number for F32", "null"}},
        {R"({"dtype": "F32", "shape": [1], "data": ["nan"]})", {"data[0]", "\"NaN\"", "string \"nan\""}},
        {R"({"dtype": "F32", "shape": [1], "data": [1e39]})", {"data[0]", "out of range for F32"}},
        {R"({"dtype": "F16", "shape": [1], "data": [70000]})", {"data[0]", "out of range for F16"}},
        {R"({"dtype": "I8", "shape": [1], "data": [128]})", {"data[0]", "[-128, 127] for I8", "128"}},
        {R"({"dtype": "U8", "shape": [1], "data": [-1]})", {"data[0]", "[0, 255] for U8", "-1"}},
        {R"({"dtype": "I64", "shape": [1], "data": [9223372036854775808]})", {"data[0]", "for I64"}},
        {R"({"dtype": "I32", "shape": [1], "data": [1.0]})", {"data[0]", "expected an integer", "number 1.0"}},
        {R"({"dtype": "BOOL", "shape": [1], "data": [1]})", {"data[0]", "expected true or false"}},
        {R"({"dtype": "F32", "shape": [1], "data": [[1]]})", {"data[0]", "found array"}},
        {R"({"dtype": "F32", "shape": [1], "data": [1], "extra": 1})", {"field \"extra\"", "unexpected field"}},
        {R"({"dtype": "F32", "shape": [1], "data": [1], "data": [2]})", {"field \"data\"", "duplicate key"}},
        {R"({"dtype": "F32", "shape": [1], "data": [1])", {"byte 42", "not valid JSON", "expected ',' or '}'"}},
        {R"({"dtype": "F32", "shape": [1], "data": [NaN]})",
         {"byte 40", "not valid JSON", "expected a value, found 'N'"}},
        {R"({"dtype": "F32", "shape": [1], "data": [3.4e22835]})", {"byte 40", "out of the range of a double"}},
        {R"({"dtype": "F32", "shape": [1], "data": ["\ud800"]})", {"byte", "not valid JSON", "surrogate"}},
        {"{\"dtype\": \"F32\", \"shape\": [1], \"data\": [1]} x", {"byte 44", "expected the end of the input"}},
        {"", {"byte 0", "not valid JSON", "found the end of the input"}},
        {"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]"
         "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
         {"document", "expected an object"}},
    };
    for (const auto& c : cases) {
        INFO(c.text);
        Blob<float> b{2};
        b.fill(3.0f);
        io::LoadOptions options;
        options.convert = true;
        const std::string message =
            test::message_of<FormatError>([&] { io::parse_json(c.text, b, options, "doc.json"); });
        CHECK_THAT(message, Contains("doc.json: "));
        for (const char* part : c.expected) {
            CHECK_THAT(message, Contains(part));
        }
        CHECK(b.shape() == Shape{2});
        CHECK(b.host_data()[1] == 3.0f);
    }
}

TEST_CASE("parse_json_text refuses duplicate keys, deep nesting and a document over its limit", "[io][json]") {
    CHECK_THAT(test::message_of<FormatError>(
                   [&] { (void)io::parse_json_text(R"({"a": 1, "b": {"a": 2, "a": 3}})", 1000, "d.json"); }),
               Contains("d.json: field \"a\": duplicate key"));
    const std::string deep = std::string(65, '[') + std::string(65, ']');
    CHECK_THAT(test::message_of<FormatError>([&] { (void)io::parse_json_text(deep, 100000, "d.json"); }),
               Contains("d.json: byte 64: not valid JSON: nested deeper than 64 levels"));
    CHECK(io::parse_json_text(deep.substr(1, 128), 100000, "d.json").is_array());
    CHECK_THAT(
        test::message_of<FormatError>([&] { (void)io::parse_json_text(R"(["abcdefgh", 1, 2, 3])", 80, "d.json"); }),
        Contains("d.json: document: parsing needs more than 80 bytes (LoadOptions::max_bytes)"));
    // The document equals nlohmann's own parse of the same text.
    const std::string text =
        R"({"x": [1, -2, 3.5, 1e400000, -0, 18446744073709551615, true, null, "\u00e9\ud83d\ude00"], "y": {}})";
    const std::string finite =
        R"({"x": [1, -2, 3.5, -0, 18446744073709551615, true, null, "\u00e9\ud83d\ude00"], "y": {}})";
    CHECK_THAT(test::message_of<FormatError>([&] { (void)io::parse_json_text(text, 100000); }),
               Contains("out of the range of a double"));
    CHECK(io::parse_json_text(finite, 100000) == json::parse(finite));
}

TEST_CASE("a JSON load is all or nothing: a failed allocation leaves the blob as it was", "[io][json][strong]") {
    json doc = parse(R"({"dtype": "F32", "shape": [3, 4], "data": [1,2,3,4,5,6,7,8,9,10,11,12]})");
    doc["diff"] = doc["data"];
    auto blob = test::target_with_values<float>();
    int failures = 0;
    CHECK(test::fail_each_allocation(
              blob, [&](auto& b) { io::from_json(doc, b, io::LoadOptions{}); }, failures) == "");
    CHECK(failures >= 2);  // the data, then the diff after the data was decoded
    REQUIRE(blob.shape() == Shape{3, 4});
    CHECK(blob.host_data()[11] == 12.0f);
    CHECK(blob.host_diff()[0] == 1.0f);
}

TEST_CASE("a JSON value that cannot be decoded leaves the blob as it was, diff included", "[io][json][strong]") {
    Blob<std::int8_t> blob{2};
    blob.fill(1);
    blob.fill_diff(2);
    const json doc = parse(R"({"dtype": "I8", "shape": [3], "data": [1, 2, 3], "diff": [4, 5, 1000]})");
    CHECK_THROWS_AS(io::from_json(doc, blob, io::LoadOptions{}), FormatError);
    CHECK(blob.shape() == Shape{2});
    CHECK(blob.host_data()[1] == 1);
    CHECK(blob.host_diff()[1] == 2);
}

TEST_CASE("a JSON shape with a zero extent is still checked as a whole", "[io][json][hostile]") {
    Blob<float> b{2};
    b.fill(3.0f);
    const json doc = parse(R"({"dtype": "F32", "shape": [0, 1099511627776, 1099511627776], "data": []})");
    CHECK_THAT(test::message_of<FormatError>([&] { io::from_json(doc, b, io::LoadOptions{}, "z.json"); }),
               Contains("z.json: shape: element count overflows int64"));
    CHECK(b.shape() == Shape{2});
    CHECK(b.host_data()[0] == 3.0f);
}

// Issue 34, case 2. Before: parsing with nlohmann's callback parser scanned the whole enclosing
// object at the end of every member that is an object, so an object of 100 000 members {"kN":{}}
// took minutes (the test did not finish in 120 s). The reader is linear now.
TEST_CASE("JSON objects of 100 000 members parse in linear time", "[io][json][hostile][linear]") {
    constexpr int n = 100'000;
    std::string text = "{";
    for (int i = 0; i < n; ++i) {
        text += (i == 0 ? "\"k" : ",\"k") + std::to_string(i) + "\":{}";
    }
    text += "}";
    const json doc = io::parse_json_text(text, io::default_max_bytes, "many.json");
    REQUIRE(doc.size() == static_cast<std::size_t>(n));
    CHECK(doc.at("k99999").is_object());
    Blob<float> b{2};
    b.fill(3.0f);
    CHECK_THAT(test::message_of<FormatError>([&] { io::parse_json(text, b, {}, "many.json"); }),
               Contains("many.json: field \"k0\": unexpected field"));
    CHECK(b.host_data()[0] == 3.0f);
}

// Issue 34, case 8. Before: an integer document converted into a narrower integer blob wrapped
// (I64 -1 became U8 255, INT64_MIN became I32 0).
TEST_CASE("a converting JSON load refuses a value the blob cannot hold", "[io][json][convert]") {
    io::LoadOptions convert;
    convert.convert = true;
    Blob<std::uint8_t> u{1};
    u.fill(9);
    CHECK_THAT(test::message_of<FormatError>(
                   [&] { io::parse_json(R"({"dtype": "I64", "shape": [2], "data": [3, -1]})", u, convert, "c.json"); }),
               Contains("c.json: data[1]") && Contains("-1") && Contains("U8"));
    CHECK(u.shape() == Shape{1});
    CHECK(u.host_data()[0] == 9);
    Blob<std::int32_t> i;
    CHECK_THAT(test::message_of<FormatError>([&] {
                   io::parse_json(R"({"dtype": "I64", "shape": [1], "data": [-9223372036854775808]})", i, convert);
               }),
               Contains("data[0]") && Contains("-9223372036854775808") && Contains("I32"));
    Blob<half> h;
    CHECK_THAT(test::message_of<FormatError>(
                   [&] { io::parse_json(R"({"dtype": "F64", "shape": [1], "data": [1e300]})", h, convert); }),
               Contains("data[0]") && Contains("F16"));
}

// Issue 34, case 9. Before: the whole text was read, then parsed into a document (nlohmann's lexer
// keeps every byte of a run of whitespace for its messages: 32 MiB of spaces cost 96 MiB), and
// only then checked against max_bytes.
TEST_CASE("a JSON load holds no more than the blob and a small buffer", "[io][json][hostile][memory]") {
    test::TempDir dir;
    const auto file = dir.path() / "spaces.json";
    {
        std::ofstream out(file, std::ios::binary);
        const std::string spaces(1 << 20, ' ');
        for (int i = 0; i < 32; ++i) {
            out << spaces;
        }
        out << R"({"dtype": "U8", "shape": [3], "data": [7, 8, 9]})";
    }
    const auto growth = test::peak_growth_bytes([&] {
        Blob<std::uint8_t> b;
        io::load_json(file, b);
        if (b.host_data()[2] != 9) {
            throw std::runtime_error("wrong value");
        }
    });
    REQUIRE(growth);
    CHECK(*growth < std::uint64_t{8} << 20);
}

TEST_CASE("a JSON load refuses a shape over max_bytes before it reads the data", "[io][json][hostile]") {
    // The data after the shape is not even valid JSON: the load must stop at the shape.
    const std::string text = R"({"dtype": "F64", "shape": [1000000], "data": [1, 2, !!!)";
    Blob<double> b;
    io::LoadOptions small;
    small.max_bytes = 1 << 20;
    CHECK_THAT(test::message_of<FormatError>([&] { io::parse_json(text, b, small, "big.json"); }),
               Contains("big.json: shape") && Contains("8000000 bytes") && Contains("LoadOptions::max_bytes"));
    CHECK_FALSE(b.has_shape());
}
