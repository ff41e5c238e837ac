// SPDX-License-Identifier: BSD-2-Clause
// The protobuf wire-format reader and writer on their own: varint limits, every wire type, and
// what the writer emits read back by the reader.

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include <syncblob/io/parse/protobuf.hpp>

#include "tempfile.hpp"

namespace pb = syncblob::io::parse::protobuf;
using Catch::Matchers::Contains;
using namespace std::string_literals;

namespace {

std::vector<pb::Field> read_all(std::string_view bytes) {
    pb::Reader r(bytes, 0, "t", "Msg");
    std::vector<pb::Field> fields;
    pb::Field f;
    while (r.next(f)) {
        fields.push_back(f);
    }
    return fields;
}

}  // namespace

TEST_CASE("varints of every length are written in the fewest bytes and read back", "[io][protobuf]") {
    const std::vector<std::pair<std::uint64_t, std::size_t>> cases{
        {0, 1},           {1, 1},     {127, 1}, {128, 2}, {16383, 2}, {16384, 3}, {(1ull << 35) - 1, 5},
        {1ull << 63, 10}, {~0ull, 10}};
    for (const auto& [value, size] : cases) {
        INFO(value);
        CHECK(pb::varint_size(value) == size);
        std::string out;
        pb::StringSink sink{out};
        pb::Writer w(sink);
        w.tag(3, pb::WireType::varint);
        w.varint(value);
        CHECK(out.size() == 1 + size);
        const auto fields = read_all(out);
        REQUIRE(fields.size() == 1);
        CHECK(fields[0].number == 3);
        CHECK(fields[0].type == pb::WireType::varint);
        CHECK(fields[0].value == value);
    }
    // The encoding of 300 from protobuf's documentation: ac 02.
    std::string out;
    pb::StringSink sink{out};
    pb::Writer(sink).varint(300);
    CHECK(out == "\xac\x02"s);
}

TEST_CASE("fixed, length-delimited and group fields are read with their offsets", "[io][protobuf]") {
    // field 1 fixed32 = 0x01020304, field 2 fixed64, field 3 "abc", group 4 { field 1 = 5 }, field 5 = 7
    const std::string bytes = "\x0d\x04\x03\x02\x01"s + "\x11\x08\x07\x06\x05\x04\x03\x02\x01"s +
                              "\x1a\x03"
                              "abc"s +
                              "\x23\x08\x05\x24"s + "\x28\x07"s;
    const auto fields = read_all(bytes);
    REQUIRE(fields.size() == 5);
    CHECK(fields[0].value == 0x01020304u);
    CHECK(fields[0].offset == 0);
    CHECK(fields[1].value == 0x0102030405060708ull);
    CHECK(fields[1].offset == 5);
    CHECK(fields[2].bytes == "abc");
    CHECK(fields[2].bytes_offset == 16);
    CHECK(fields[3].type == pb::WireType::start_group);
    CHECK(fields[4].number == 5);
    CHECK(fields[4].value == 7);
}

TEST_CASE("packed varints are split, and a truncated one is refused", "[io][protobuf]") {
    const std::string bytes = "\x0a\x04\x01\xac\x02\x00"s;
    pb::Reader r(bytes, 100, "t", "Msg");
    pb::Field f;
    REQUIRE(r.next(f));
    std::vector<std::pair<std::uint64_t, std::size_t>> seen;
    pb::for_each_packed_varint(r, f, "Msg.x", [&](std::uint64_t v, std::size_t at) { seen.emplace_back(v, at); });
    CHECK(seen == std::vector<std::pair<std::uint64_t, std::size_t>>{{1, 102}, {300, 103}, {0, 105}});
    const std::string truncated = "\x0a\x02\x01\xac"s;
    pb::Reader r2(truncated, 0, "t", "Msg");
    REQUIRE(r2.next(f));
    CHECK_THAT(test::message_of<syncblob::FormatError>(
                   [&] { pb::for_each_packed_varint(r2, f, "Msg.x", [](std::uint64_t, std::size_t) {}); }),
               Contains("t: offset 3, Msg.x: truncated varint"));
}

TEST_CASE("packed floats and strings written by the writer read back", "[io][protobuf]") {
    std::string out;
    pb::StringSink sink{out};
    pb::Writer w(sink);
    const float f[] = {1.0f, -2.5f};
    const double d[] = {0.1};
    w.packed_fixed(5, f, 2);
    w.packed_fixed(6, f, 0);  // empty: omitted
    w.packed_fixed(8, d, 1);
    w.string_field(1, "name");
    CHECK(out ==
          "\x2a\x08\x00\x00\x80\x3f\x00\x00\x20\xc0"s + "\x42\x08\x9a\x99\x99\x99\x99\x99\xb9\x3f"s + "\x0a\x04name"s);
    const auto fields = read_all(out);
    REQUIRE(fields.size() == 3);
    CHECK(pb::load_le<float>(fields[0].bytes.data() + 4) == -2.5f);
    CHECK(pb::load_le<double>(fields[1].bytes.data()) == 0.1);
    CHECK(fields[2].bytes == "name");
}

TEST_CASE("offsets in errors are absolute in the input", "[io][protobuf]") {
    const std::string bytes = "\x08\x01\x10"s;  // field 2's varint is missing
    pb::Reader r(bytes, 40, "file.pb", "Msg");
    pb::Field f;
    REQUIRE(r.next(f));
    CHECK_THAT(test::message_of<syncblob::FormatError>([&] { (void)r.next(f); }),
               Contains("file.pb: offset 43, Msg varint value: truncated varint"));
}
