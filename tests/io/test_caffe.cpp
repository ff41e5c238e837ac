// SPDX-License-Identifier: BSD-2-Clause
// Caffe's protobuf files against a real protobuf implementation: fixtures made by `protoc --encode`
// from tests/io/proto/caffe_min.proto are read, and files syncblob writes are decoded by
// `protoc --decode` (when protoc is installed) and compared byte for byte with protoc's encoding.

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include <syncblob/io/caffe.hpp>

#include "files.hpp"
#include "strong_guarantee.hpp"
#include "tempfile.hpp"

namespace io = syncblob::io;
using Catch::Matchers::Contains;
using syncblob::Blob;
using syncblob::FormatError;
using syncblob::Shape;
using syncblob::ShapeError;

using test::slurp;
using test::spit;

namespace {

const std::filesystem::path proto_dir = SYNCBLOB_PROTO_DIR;

// protoc's path, or "" when it is not installed.
std::string protoc() {
    return SYNCBLOB_PROTOC;
}

// Runs `protoc <mode>=caffe.<message>` on `input`; returns its standard output.
std::string run_protoc(const std::string& mode, const std::string& message, const std::string& input) {
    test::TempDir dir;
    const auto in = dir.path() / "in";
    const auto out = dir.path() / "out";
    spit(in, input);
    const std::string command = protoc() + " " + mode + "=caffe." + message + " --proto_path=" + proto_dir.string() +
                                " " + (proto_dir / "caffe_min.proto").string() + " < " + in.string() + " > " +
                                out.string();
    REQUIRE(std::system(command.c_str()) == 0);
    return slurp(out);
}

template <class T>
std::vector<T> values(const Blob<T>& b) {
    const auto v = b.host_data();
    return {v.begin(), v.end()};
}
template <class T>
std::vector<T> diffs(const Blob<T>& b) {
    const auto v = b.host_diff();
    return {v.begin(), v.end()};
}

// Bit-exact comparison (NaN == NaN, -0 != +0).
template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

}  // namespace

TEST_CASE("protoc-made BlobProto with packed data loads with its shape and values", "[io][caffe]") {
    const std::string bytes = slurp(proto_dir / "mean.pb");
    Blob<float> b;
    io::parse_blob_proto(bytes, b);
    CHECK(b.shape() == Shape{1, 3, 2, 2});
    CHECK(values(b) ==
          std::vector<float>{104.0f, 117.0f, 123.0f, 0.5f, -1.25f, 3e-05f, 1e+30f, -0.0f, 1.5f, 2.5f, 3.5f, 4.5f});
    CHECK(std::signbit(b.host_data()[7]));
    CHECK(b.diff_head() == syncblob::Head::uninitialized);  // no diff in the file: diff untouched
    // Written back, the bytes are protoc's own.
    CHECK(io::serialize_blob_proto(b) == bytes);
}

TEST_CASE("legacy num/channels/height/width give the shape and diff is read", "[io][caffe]") {
    Blob<float> b;
    io::load_binaryproto(proto_dir / "legacy.pb", b);
    CHECK(b.shape() == Shape{1, 2, 1, 3});
    CHECK(values(b) == std::vector<float>{1, 2, 3, 4, 5, 6});
    CHECK(diffs(b) == std::vector<float>{-1, -2, -3, -4, -5, -6});
}

TEST_CASE("double_data and double_diff load into a Blob<double> exactly", "[io][caffe]") {
    const std::string bytes = slurp(proto_dir / "double.pb");
    Blob<double> b;
    io::parse_blob_proto(bytes, b);
    CHECK(b.shape() == Shape{2, 2});
    CHECK(values(b) == std::vector<double>{0.1, -2.5, 1e-300, 12345678.901234567});
    CHECK(diffs(b) == std::vector<double>{1, 2, 3, 4});
    CHECK(io::serialize_blob_proto(b, true) == bytes);

    SECTION("into a Blob<float> only when asked to convert") {
        Blob<float> f{3};
        f.fill(7.0f);
        CHECK_THAT(test::message_of<FormatError>([&] { io::parse_blob_proto(bytes, f); }),
                   Contains("BlobProto.double_data (field 8)") && Contains("LoadOptions::convert"));
        CHECK(f.shape() == Shape{3});
        CHECK(values(f) == std::vector<float>{7, 7, 7});
        io::LoadOptions convert;
        convert.convert = true;
        io::parse_blob_proto(bytes, f, convert);
        CHECK(values(f) == std::vector<float>{0.1f, -2.5f, 0.0f, 12345679.0f});
        CHECK(diffs(f) == std::vector<float>{1, 2, 3, 4});
    }
}

TEST_CASE("float data into a Blob<double> needs LoadOptions::convert", "[io][caffe]") {
    const std::string bytes = slurp(proto_dir / "legacy.pb");
    Blob<double> d;
    CHECK_THROWS_AS(io::parse_blob_proto(bytes, d), FormatError);
    CHECK_FALSE(d.has_shape());
    io::LoadOptions convert;
    convert.convert = true;
    io::parse_blob_proto(bytes, d, convert);
    CHECK(values(d) == std::vector<double>{1, 2, 3, 4, 5, 6});
    CHECK(diffs(d) == std::vector<double>{-1, -2, -3, -4, -5, -6});
}

TEST_CASE("unpacked repeated floats and dims are read like packed ones", "[io][caffe]") {
    Blob<float> b;
    io::parse_blob_proto(slurp(proto_dir / "unpacked.pb"), b);
    CHECK(b.shape() == Shape{3, 1});
    CHECK(values(b) == std::vector<float>{1.5f, -2.5f, 3.25f});
    CHECK(diffs(b) == std::vector<float>{0.5f, 0.25f, 0.125f});
}

TEST_CASE("protoc-made BlobProtoVector loads every blob, including 0-d and zero-size", "[io][caffe]") {
    const auto blobs = io::load_blob_proto_vector<float>(proto_dir / "vector.pb");
    REQUIRE(blobs.size() == 3);
    CHECK(blobs[0].shape() == Shape{2});
    CHECK(values(blobs[0]) == std::vector<float>{1, 2});
    CHECK(blobs[1].shape() == Shape{});
    CHECK(blobs[1].count() == 1);
    CHECK(values(blobs[1]) == std::vector<float>{42});
    CHECK(blobs[2].shape() == Shape{0, 5});
    CHECK(blobs[2].count() == 0);
}

TEST_CASE("a caffemodel's learned blobs by layer name, new layout", "[io][caffe]") {
    const auto layers = io::load_caffemodel<float>(proto_dir / "net.pb");
    REQUIRE(layers.size() == 2);  // relu1 has no blobs
    CHECK_FALSE(layers.contains("relu1"));
    const auto& conv = layers.at("conv1");
    REQUIRE(conv.size() == 2);
    CHECK(conv[0].shape() == Shape{2, 1, 1, 1});
    CHECK(values(conv[0]) == std::vector<float>{0.5f, -0.5f});
    CHECK(values(conv[1]) == std::vector<float>{0.25f, 0.75f});
    const auto& fc = layers.at("fc");
    REQUIRE(fc.size() == 1);
    CHECK(fc[0].shape() == Shape{1, 2});
    CHECK(values(fc[0]) == std::vector<float>{3, 4});
}

TEST_CASE("a caffemodel's learned blobs by layer name, V1 layout", "[io][caffe]") {
    const auto layers = io::load_caffemodel<double>(proto_dir / "net_v1.pb", [] {
        io::LoadOptions o;
        o.convert = true;
        return o;
    }());
    REQUIRE(layers.size() == 1);
    const auto& conv = layers.at("conv1");
    REQUIRE(conv.size() == 2);
    CHECK(conv[0].shape() == Shape{1, 1, 2, 2});
    CHECK(values(conv[0]) == std::vector<double>{1, 2, 3, 4});
    CHECK(conv[1].shape() == Shape{1, 1, 1, 1});
    CHECK(values(conv[1]) == std::vector<double>{9});
}

TEST_CASE("the committed fixtures are protoc's encoding of their text", "[io][caffe][protoc]") {
    if (protoc().empty()) {
        std::cout << "skipped: protoc not found (install protobuf-compiler)\n";
        return;
    }
    const std::vector<std::pair<std::string, std::string>> fixtures{
        {"mean", "BlobProto"},         {"legacy", "BlobProto"},
        {"double", "BlobProto"},       {"unpacked", "UnpackedBlobProto"},
        {"vector", "BlobProtoVector"}, {"net", "NetParameter"},
        {"net_v1", "NetParameter"}};
    for (const auto& [name, message] : fixtures) {
        INFO(name);
        CHECK(run_protoc("--encode", message, slurp(proto_dir / (name + ".txt"))) == slurp(proto_dir / (name + ".pb")));
    }
}

TEST_CASE("what syncblob writes, protoc decodes and encodes to the same bytes", "[io][caffe][protoc]") {
    if (protoc().empty()) {
        std::cout << "skipped: protoc not found (install protobuf-compiler)\n";
        return;
    }
    SECTION("float blob with diff") {
        Blob<float> b{2, 2};
        const float v[] = {1.5f, -2.0f, 0.1f, 1e10f};
        std::copy(std::begin(v), std::end(v), b.mutable_host_data().begin());
        b.fill_diff(0.25f);
        const std::string bytes = io::serialize_blob_proto(b, true);
        const std::string text = run_protoc("--decode", "BlobProto", bytes);
        CHECK(text ==
              "data: 1.5\ndata: -2\ndata: 0.1\ndata: 1e+10\ndiff: 0.25\ndiff: 0.25\ndiff: 0.25\ndiff: 0.25\n"
              "shape {\n  dim: 2\n  dim: 2\n}\n");
        CHECK(run_protoc("--encode", "BlobProto", text) == bytes);
    }
    SECTION("double blob, 0-d") {
        Blob<double> b{std::span<const std::int64_t>{}};
        b.fill(-0.125);
        const std::string bytes = io::serialize_blob_proto(b);
        const std::string text = run_protoc("--decode", "BlobProto", bytes);
        CHECK(text == "shape {\n}\ndouble_data: -0.125\n");
        CHECK(run_protoc("--encode", "BlobProto", text) == bytes);
    }
    SECTION("vector of blobs with large extents") {
        std::vector<Blob<float>> blobs;
        blobs.emplace_back(Shape{300, 0, 1});
        blobs.emplace_back(Shape{1});
        blobs.back().fill(3.0f);
        const std::string bytes = io::serialize_blob_proto_vector(blobs);
        CHECK(bytes == io::serialize_blob_proto_vector(std::span<const Blob<float>>(blobs)));
        const std::string text = run_protoc("--decode", "BlobProtoVector", bytes);
        CHECK(text ==
              "blobs {\n  shape {\n    dim: 300\n    dim: 0\n    dim: 1\n  }\n}\n"
              "blobs {\n  data: 3\n  shape {\n    dim: 1\n  }\n}\n");
        CHECK(run_protoc("--encode", "BlobProtoVector", text) == bytes);
    }
}

TEMPLATE_TEST_CASE("binaryproto files round-trip every rank, with and without diff", "[io][caffe]", float, double) {
    test::TempDir dir;
    const auto file = dir.path() / "blob.binaryproto";
    const bool with_diff = GENERATE(false, true);
    const std::vector<std::int64_t> extents =
        GENERATE(std::vector<std::int64_t>{}, std::vector<std::int64_t>{0}, std::vector<std::int64_t>{3, 0, 2},
                 std::vector<std::int64_t>{2, 3, 4}, std::vector<std::int64_t>(32, 1));
    Blob<TestType> b{Shape(std::span<const std::int64_t>(extents))};
    auto data = b.mutable_host_data();
    auto diff = b.mutable_host_diff();
    for (std::size_t i = 0; i < data.size(); ++i) {
        data[i] = static_cast<TestType>(i) / TestType{3} - TestType{1};
        diff[i] = -static_cast<TestType>(i) * TestType{7};
    }
    if (!data.empty()) {
        data[0] = std::numeric_limits<TestType>::quiet_NaN();
        data[data.size() - 1] = -std::numeric_limits<TestType>::infinity();
    }
    io::save_binaryproto(file, b, with_diff);
    Blob<TestType> back{5};
    back.fill_diff(TestType{9});
    io::load_binaryproto(file, back);
    CHECK(back.shape() == b.shape());
    CHECK(same_bits(values(back), values(b)));
    if (with_diff) {
        CHECK(same_bits(diffs(back), diffs(b)));
    }
    std::vector<Blob<TestType>> many;
    many.push_back(b.clone());
    many.emplace_back(Shape{2});
    many.back().fill(TestType{4});
    io::save_blob_proto_vector(file, many, with_diff);
    const auto loaded = io::load_blob_proto_vector<TestType>(file);
    REQUIRE(loaded.size() == 2);
    CHECK(loaded[0].shape() == b.shape());
    CHECK(same_bits(values(loaded[0]), values(b)));
    CHECK(values(loaded[1]) == std::vector<TestType>{4, 4});
}

TEST_CASE("load_binaryproto<T>(path) gives a new blob, as load_npy<T>(path) does", "[io][caffe]") {
    test::TempDir dir;
    const auto file = dir.path() / "mean.binaryproto";
    Blob<float> b{2, 3};
    float next = 0.25f;
    for (float& v : b.mutable_host_data()) {
        v = next++;
    }
    io::save_binaryproto(file, b);
    const Blob<float> back = io::load_binaryproto<float>(file);
    CHECK(back.shape() == Shape{2, 3});
    CHECK(back.host_data()[5] == 5.25f);
    CHECK_THROWS_AS(io::load_binaryproto<double>(file), FormatError);  // float values: convert is not asked
    io::LoadOptions convert;
    convert.convert = true;
    CHECK(io::load_binaryproto<double>(file, convert).host_data()[1] == 1.25);
    io::LoadOptions small;
    small.max_bytes = 8;
    CHECK_THROWS_AS(io::load_binaryproto<float>(file, small), FormatError);
}

TEST_CASE("a strict load refuses another shape and leaves the blob unchanged", "[io][caffe]") {
    const std::string bytes = slurp(proto_dir / "mean.pb");
    Blob<float> b{2, 6};
    b.fill(1.0f);
    io::LoadOptions strict;
    strict.reshape = false;
    CHECK_THAT(test::message_of<ShapeError>([&] { io::parse_blob_proto(bytes, b, strict); }),
               Contains("1 3 2 2 (12)") && Contains("2 6 (12)"));
    CHECK(b.shape() == Shape{2, 6});
    CHECK(values(b) == std::vector<float>(12, 1.0f));
    b.reshape({1, 3, 2, 2});
    io::parse_blob_proto(bytes, b, strict);
    CHECK(b.host_data()[0] == 104.0f);
}

TEST_CASE("LoadOptions::max_bytes bounds what a load allocates", "[io][caffe]") {
    const std::string bytes = slurp(proto_dir / "mean.pb");
    io::LoadOptions small;
    small.max_bytes = 12 * sizeof(float) - 1;
    Blob<float> b;
    CHECK_THAT(test::message_of<FormatError>([&] { io::parse_blob_proto(bytes, b, small); }),
               Contains("LoadOptions::max_bytes"));
    CHECK_FALSE(b.has_shape());
    small.max_bytes = 12 * sizeof(float);
    io::parse_blob_proto(bytes, b, small);
    CHECK(b.count() == 12);
    // Many zero-size blobs cost their overhead.
    std::string zero_size;
    for (int i = 0; i < 2000; ++i) {
        zero_size += std::string("\x0a\x05\x3a\x03\x0a\x01\x00", 7);  // blobs { shape { dim: 0 } }
    }
    CHECK(io::parse_blob_proto_vector<float>(zero_size).size() == 2000);
    small.max_bytes = 1000 * syncblob::io::detail::caffe::blob_overhead_bytes;
    CHECK_THAT(test::message_of<FormatError>([&] { (void)io::parse_blob_proto_vector<float>(zero_size, small); }),
               Contains("LoadOptions::max_bytes"));
}

TEST_CASE("duplicate layer names in a caffemodel are refused", "[io][caffe]") {
    // layer { name: "a" blobs { shape { dim: 1 } data: 1 } } twice.
    const std::string blob("\x2d\x00\x00\x80\x3f\x3a\x03\x0a\x01\x01", 10);
    const std::string layer = std::string("\x0a\x01", 2) + "a" + "\x3a" + static_cast<char>(blob.size()) + blob;
    const std::string one = std::string("\xa2\x06", 2) + static_cast<char>(layer.size()) + layer;
    CHECK(io::parse_caffemodel<float>(one).at("a").size() == 1);
    CHECK_THAT(test::message_of<FormatError>([&] { (void)io::parse_caffemodel<float>(one + one); }),
               Contains("second layer named \"a\""));
}

TEST_CASE("saving a blob without a shape is a ShapeError", "[io][caffe]") {
    Blob<float> none;
    CHECK_THROWS_AS(io::serialize_blob_proto(none), ShapeError);
    test::TempDir dir;
    CHECK_THROWS_AS(io::save_binaryproto(dir.path() / "x", none), ShapeError);
    CHECK_FALSE(std::filesystem::exists(dir.path() / "x"));
}

TEST_CASE("every malformed BlobProto is a FormatError naming the offset and field", "[io][caffe]") {
    struct Case {
        const char* name;
        std::string bytes;
        std::vector<std::string> expected;
    };
    using namespace std::string_literals;
    const std::vector<Case> cases{
        {"truncated tag varint", "\x80"s, {"offset 0", "truncated varint"}},
        {"field number 0", "\x00\x01"s, {"offset 0", "field number 0"}},
        {"wire type 7", "\x0f"s, {"offset 0", "wire type 7"}},
        {"wire type 6", "\x2e"s, {"wire type 6"}},
        {"varint over 64 bits", "\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02"s, {"offset 1", "overflows 64 bits"}},
        {"varint of 11 bytes", "\x08\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01"s, {"overflows 64 bits"}},
        {"length past the end",
         "\x2a\x08\x00\x00\x80\x3f"s,
         {"offset 0", "BlobProto.data (field 5)", "runs past the end"}},
        {"huge length", "\x2a\xff\xff\xff\xff\xff\xff\xff\xff\x7f"s, {"BlobProto.data (field 5)", "runs past the end"}},
        {"packed floats not a multiple of 4", "\x2a\x03\x00\x00\x80"s, {"BlobProto.data (field 5)", "multiple of 4"}},
        {"packed doubles not a multiple of 8",
         "\x42\x04\x00\x00\x80\x3f"s,
         {"BlobProto.double_data (field 8)", "multiple of 8"}},
        {"truncated 32-bit value", "\x2d\x00\x00"s, {"32-bit value", "needs 4 bytes"}},
        {"truncated 64-bit value", "\x41\x00\x00"s, {"64-bit value", "needs 8 bytes"}},
        {"data as a varint", "\x28\x01"s, {"BlobProto.data (field 5)", "wire type varint (0)"}},
        {"shape as a varint", "\x38\x01"s, {"BlobProto.shape (field 7)", "expected length-delimited"}},
        {"legacy num as 32-bit", "\x0d\x01\x00\x00\x00"s, {"BlobProto.num (field 1)", "expected varint"}},
        {"negative legacy extent",
         "\x10\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"s,
         {"BlobProto.channels (field 2)", "negative"}},
        {"negative dim",
         "\x3a\x0c\x0a\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"s,
         {"BlobShape.dim (field 1)", "negative"}},
        {"dim as 32-bit", "\x3a\x05\x0d\x01\x00\x00\x00"s, {"BlobShape.dim (field 1)", "wire type 32-bit (5)"}},
        {"packed dims truncated", "\x3a\x03\x0a\x01\x80"s, {"offset 4", "BlobShape.dim (field 1)", "truncated varint"}},
        {"33 axes", "\x3a\x23\x0a\x21" + std::string(33, '\x01'), {"BlobShape.dim (field 1)", "more than 32 axes"}},
        {"count overflows int64",
         "\x3a\x16\x0a\x14" + std::string("\x80\x80\x80\x80\x80\x80\x80\x80\x40", 9) +
             std::string("\x80\x80\x80\x80\x80\x80\x80\x80\x40", 9) + "\x02\x02"s,
         {"BlobProto.shape", "overflows int64"}},
        {"fewer values than the shape",
         "\x2a\x04\x00\x00\x80\x3f\x3a\x03\x0a\x01\x02"s,
         {"BlobProto.data (field 5)", "1 values", "needs 2"}},
        {"more values than the shape", "\x2d\x00\x00\x80\x3f\x2d\x00\x00\x80\x3f"s, {"2 values", "shape (1) needs 1"}},
        {"diff of another size",
         "\x2d\x00\x00\x80\x3f\x35\x00\x00\x80\x3f\x35\x00\x00\x80\x3f"s,
         {"BlobProto.diff (field 6)", "2 values"}},
        {"legacy with too few values",
         "\x08\x02\x10\x02\x18\x01\x20\x01\x2d\x00\x00\x80\x3f"s,
         {"1 values", "shape 2 2 1 1 (4) needs 4"}},
        {"unmatched end-group", "\x7c"s, {"field 15", "wire type 4"}},
        {"group without end", "\x7b\x08\x01"s, {"field 15", "no end-group tag"}},
        {"mismatched end-group", "\x7b\x84\x01"s, {"end-group tag does not match"}},
        {"groups nested too deep", std::string(101, '\x7b'), {"groups nest deeper than 100"}},
        {"field number past 2^29", "\xf8\xff\xff\xff\x7f\x00"s, {"outside [1, 2^29 - 1]"}},
    };
    for (const auto& c : cases) {
        INFO(c.name);
        Blob<float> b{2};
        b.fill(5.0f);
        const std::string message =
            test::message_of<FormatError>([&] { io::parse_blob_proto(c.bytes, b, {}, "m.pb"); });
        CHECK_THAT(message, Contains("m.pb: "));
        for (const auto& part : c.expected) {
            CHECK_THAT(message, Contains(part));
        }
        CHECK(b.shape() == Shape{2});
        CHECK(values(b) == std::vector<float>{5, 5});
    }
}

TEST_CASE("unknown fields, groups and repeated shapes follow protobuf's rules", "[io][caffe]") {
    using namespace std::string_literals;
    Blob<float> b;
    // An unknown varint (field 20), an unknown group (field 15) holding fields, then data and a
    // shape given in two parts that protobuf merges into 1 x 2.
    const std::string bytes = "\xa0\x01\x05"s + "\x7b\x08\x01\x12\x01x\x7c"s +
                              "\x2a\x08\x00\x00\x80\x3f\x00\x00\x00\x40"s + "\x3a\x03\x0a\x01\x01"s +
                              "\x3a\x02\x08\x02"s;
    io::parse_blob_proto(bytes, b);
    CHECK(b.shape() == Shape{1, 2});
    CHECK(values(b) == std::vector<float>{1, 2});
    // The legacy fields take precedence over shape, as in Caffe's Blob::FromProto.
    io::parse_blob_proto("\x08\x02\x10\x01\x18\x01\x20\x01\x2a\x08\x00\x00\x80\x3f\x00\x00\x00\x40\x3a\x02\x08\x09"s,
                         b);
    CHECK(b.shape() == Shape{2, 1, 1, 1});
}

TEST_CASE("malformed caffemodels and vectors name the layer or blob", "[io][caffe]") {
    using namespace std::string_literals;
    CHECK_THAT(test::message_of<FormatError>([] { (void)io::parse_caffemodel<float>("\xa0\x06\x01"s, {}, "n"); }),
               Contains("NetParameter.layer (field 100)") && Contains("expected length-delimited"));
    CHECK_THAT(test::message_of<FormatError>([] { (void)io::parse_caffemodel<float>("\x12\x02\x20\x01"s, {}, "n"); }),
               Contains("V1LayerParameter.name (field 4)"));
    // layers { name: "x" blobs { data: 1 } }: count 1 (no shape) matches one value.
    const std::string ok = "\x12\x0a\x22\x01x\x32\x05\x2d\x00\x00\x80\x3f"s;
    CHECK(io::parse_caffemodel<float>(ok).at("x")[0].shape() == Shape{});
    // layers { name: "x" blobs { data: packed of 3 bytes } }
    const std::string bad = "\x12\x0a\x22\x01x\x32\x05\x2a\x03\x00\x00\x00"s;
    CHECK_THAT(test::message_of<FormatError>([&] { (void)io::parse_caffemodel<float>(bad, {}, "n"); }),
               Contains("V1LayerParameter \"x\" blobs[0].data (field 5)") && Contains("multiple of 4") &&
                   Contains("offset 7"));
    CHECK_THAT(test::message_of<FormatError>([] { (void)io::parse_blob_proto_vector<float>("\x08\x01"s, {}, "v"); }),
               Contains("BlobProtoVector.blobs (field 1)"));
    CHECK_THAT(test::message_of<FormatError>(
                   [] { (void)io::parse_blob_proto_vector<float>("\x0a\x00\x0a\x02\x28\x01"s, {}, "v"); }),
               Contains("BlobProtoVector.blobs[0]"));
}

TEST_CASE("a BlobProto load is all or nothing: a failed allocation leaves the blob as it was", "[io][caffe][strong]") {
    Blob<float> source{3, 4};
    for (std::size_t i = 0; i < 12; ++i) {
        source.mutable_host_data()[i] = static_cast<float>(i);
        source.mutable_host_diff()[i] = -static_cast<float>(i);
    }
    const std::string bytes = io::serialize_blob_proto(source, true);
    auto blob = test::target_with_values<float>();
    int failures = 0;
    CHECK(test::fail_each_allocation(
              blob, [&](auto& b) { io::parse_blob_proto(bytes, b); }, failures) == "");
    CHECK(failures >= 2);  // the data, then the diff after the data was read
    REQUIRE(blob.shape() == Shape{3, 4});
    CHECK(blob.host_data()[11] == 11.0f);
    CHECK(blob.host_diff()[11] == -11.0f);
}

TEST_CASE("a BlobProto shape with a zero extent is still checked as a whole", "[io][caffe][hostile]") {
    // BlobProto.shape (field 7) = BlobShape{dim: [0, 2^40, 2^40]} (packed varints).
    const std::string big = "\x80\x80\x80\x80\x80\x20";
    const std::string dims = std::string(1, '\0') + big + big;
    const std::string shape = "\x0A" + std::string(1, static_cast<char>(dims.size())) + dims;
    const std::string bytes = "\x3A" + std::string(1, static_cast<char>(shape.size())) + shape;
    Blob<float> b{2};
    b.fill(4.0f);
    CHECK_THAT(test::message_of<FormatError>([&] { io::parse_blob_proto(bytes, b, {}, "z.binaryproto"); }),
               Contains("z.binaryproto") && Contains("shape") && Contains("overflows int64"));
    CHECK(b.shape() == Shape{2});
    CHECK(b.host_data()[1] == 4.0f);
}

TEST_CASE("a BlobProtoVector cut short at a blob boundary is caught by an expected count", "[io][caffe][hostile]") {
    std::vector<Blob<float>> blobs;
    blobs.emplace_back(Shape{2}).fill(1.0f);
    blobs.emplace_back(Shape{3}).fill(2.0f);
    const std::string whole = io::serialize_blob_proto_vector(blobs);
    const std::string first = io::serialize_blob_proto_vector(std::span<const Blob<float>>(blobs.data(), 1));
    REQUIRE(whole.substr(0, first.size()) == first);               // the first blob's bytes are a prefix of the whole
    CHECK(io::parse_blob_proto_vector<float>(first).size() == 1);  // protobuf alone cannot tell
    CHECK_THAT(test::message_of<FormatError>(
                   [&] { (void)io::parse_blob_proto_vector<float>(first, {}, "v.binaryproto", std::size_t{2}); }),
               Contains("v.binaryproto: BlobProtoVector.blobs: 1 blobs, 2 expected"));
    CHECK(io::parse_blob_proto_vector<float>(whole, {}, "v", std::size_t{2}).size() == 2);
    const test::TempDir dir;
    spit(dir.path() / "v.pb", first);
    CHECK_THROWS_AS(io::load_blob_proto_vector<float>(dir.path() / "v.pb", {}, std::size_t{2}), FormatError);
}

// Issue 34, case 8. Before: double_data beyond float's range became infinity in a float blob.
TEST_CASE("a converting BlobProto load refuses a double a float blob cannot hold", "[io][caffe][convert]") {
    using namespace std::string_literals;
    const double big = 1e300;
    std::string value(8, '\0');
    std::memcpy(value.data(), &big, 8);
    // double_data [0, 1e300] (packed), shape (2)
    const std::string message = "\x42\x10"s + std::string(8, '\0') + value + "\x3a\x03\x0a\x01\x02"s;
    Blob<float> f{1};
    f.fill(4.0f);
    io::LoadOptions convert;
    convert.convert = true;
    CHECK_THAT(
        test::message_of<FormatError>([&] { io::parse_blob_proto(message, f, convert, "big.pb"); }),
        Contains("big.pb") && Contains("BlobProto.double_data (field 8)") && Contains("1e+300") && Contains("F32"));
    CHECK(f.shape() == Shape{1});
    CHECK(values(f) == std::vector<float>{4});
}
