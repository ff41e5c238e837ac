// SPDX-License-Identifier: BSD-2-Clause
// The shared file layer: atomic saving, bounded whole-file reads, the FormatError convention and
// element conversion.

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <string>
#include <syncblob/io/detail/convert.hpp>
#include <syncblob/io/file.hpp>
#include <vector>

#include "tempfile.hpp"

namespace fs = std::filesystem;
using namespace syncblob;

namespace {

std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void spit(const fs::path& p, const std::string& text) {
    std::ofstream out(p, std::ios::binary);
    out << text;
}

std::size_t entries(const fs::path& folder) {
    return static_cast<std::size_t>(std::distance(fs::directory_iterator(folder), fs::directory_iterator()));
}

}  // namespace

TEST_CASE("save_atomic writes the file and leaves no temporary behind", "[io][file]") {
    const test::TempDir dir;
    const fs::path target = dir.path() / "out.bin";
    io::save_atomic(target, {}, [](io::FileWriter& w) {
        w.write("hello ", 6);
        w.write("world", 5);
        CHECK(w.bytes_written() == 11);
    });
    CHECK(slurp(target) == "hello world");
    CHECK(entries(dir.path()) == 1);
}

TEST_CASE("save_atomic with fsync and a reservation larger than what is written", "[io][file]") {
    const test::TempDir dir;
    const fs::path target = dir.path() / "out.bin";
    io::save_atomic(target, io::SaveOptions{.fsync = true}, [](io::FileWriter& w) {
        w.reserve(1 << 20);
        w.write("abc", 3);
    });
    CHECK(fs::file_size(target) == 3);
    CHECK(slurp(target) == "abc");
}

TEST_CASE("save_atomic leaves the old file intact when the writer throws midway", "[io][file]") {
    const test::TempDir dir;
    const fs::path target = dir.path() / "weights.bin";
    spit(target, "old contents");
    const std::vector<char> big(1 << 20, 'x');
    CHECK_THROWS_WITH(io::save_atomic(target, {},
                                      [&](io::FileWriter& w) {
                                          w.reserve(4 << 20);
                                          w.write(big.data(), big.size());
                                          throw std::runtime_error("writer failed");
                                      }),
                      "writer failed");
    CHECK(slurp(target) == "old contents");
    CHECK(entries(dir.path()) == 1);  // the temporary is gone
}

TEST_CASE("save_atomic into a missing folder is an IOError naming the target", "[io][file]") {
    const test::TempDir dir;
    const fs::path target = dir.path() / "no" / "such" / "file.bin";
    bool called = false;
    CHECK_THAT(test::message_of<IOError>([&] { io::save_atomic(target, {}, [&](io::FileWriter&) { called = true; }); }),
               Catch::Matchers::Contains("file.bin") && Catch::Matchers::Contains("No such file"));
    CHECK_FALSE(called);
}

TEST_CASE("read_file reads everything and enforces the byte limit", "[io][file]") {
    const test::TempDir dir;
    const fs::path file = dir.path() / "data.txt";
    spit(file, std::string(100, 'a') + "end");
    CHECK(io::read_file(file, 103) == std::string(100, 'a') + "end");
    CHECK_THAT(test::message_of<FormatError>([&] { (void)io::read_file(file, 102); }),
               Catch::Matchers::Contains("data.txt: file size: 103 bytes exceed the limit of 102 bytes"));
    CHECK_THAT(test::message_of<IOError>([&] { (void)io::read_file(dir.path() / "missing.txt", 10); }),
               Catch::Matchers::Contains("missing.txt") && Catch::Matchers::Contains("No such file"));
    CHECK_THROWS_AS(io::read_file(dir.path(), 10), IOError);  // a folder is not a regular file
}

TEST_CASE("throw_format_error formats source, where and what", "[io][file]") {
    CHECK(test::message_of<FormatError>([] {
              io::throw_format_error("w.npy", "header byte 10", "expected 'descr' key");
          }) == "w.npy: header byte 10: expected 'descr' key");
}

TEST_CASE("convert_elements between dtypes", "[io][file][convert]") {
    SECTION("floating to integers saturates and maps NaN to 0") {
        const double src[] = {1.9, -1.9, 1e300, -1e300, std::numeric_limits<double>::quiet_NaN(), 200.0};
        std::int8_t out[6];
        detail::convert_elements(Dtype::F64, src, 6, out);
        CHECK(out[0] == 1);
        CHECK(out[1] == -1);
        CHECK(out[2] == 127);
        CHECK(out[3] == -128);
        CHECK(out[4] == 0);
        CHECK(out[5] == 127);
        std::uint64_t big[2];
        const double edge[] = {1.8446744073709552e19, -5.0};
        detail::convert_elements(Dtype::F64, edge, 2, big);
        CHECK(big[0] == std::numeric_limits<std::uint64_t>::max());
        CHECK(big[1] == 0);
    }
    SECTION("half and bfloat16 go through float") {
        const std::uint16_t h[] = {0x3C00, 0xC000, 0x7C00};  // 1, -2, +inf as binary16
        float f[3];
        detail::convert_elements(Dtype::F16, h, 3, f);
        CHECK(f[0] == 1.0f);
        CHECK(f[1] == -2.0f);
        CHECK(std::isinf(f[2]));
        const std::uint16_t b[] = {0x3F80, 0x4040};  // 1, 3 as bfloat16
        std::int32_t i[2];
        detail::convert_elements(Dtype::BF16, b, 2, i);
        CHECK(i[0] == 1);
        CHECK(i[1] == 3);
        const float to_half[] = {0.5f};
        half hh[1];
        detail::convert_elements(Dtype::F32, to_half, 1, hh);
        CHECK(hh[0].bits == 0x3800);
    }
    SECTION("bool is nonzero both ways") {
        const unsigned char raw[] = {0, 1, 2, 255};
        float f[4];
        detail::convert_elements(Dtype::BOOL, raw, 4, f);
        CHECK(f[0] == 0.0f);
        CHECK(f[1] == 1.0f);
        CHECK(f[2] == 1.0f);
        CHECK(f[3] == 1.0f);
        const float src[] = {0.0f, -0.0f, 0.25f, std::numeric_limits<float>::quiet_NaN()};
        bool b[4];
        detail::convert_elements(Dtype::F32, src, 4, b);
        CHECK_FALSE(b[0]);
        CHECK_FALSE(b[1]);
        CHECK(b[2]);
        CHECK(b[3]);
    }
    SECTION("integers wrap modulo 2^N and read unaligned little-endian input") {
        unsigned char raw[1 + 2 * 8];
        const std::int64_t values[] = {-1, 0x1'0000'0005};
        std::memcpy(raw + 1, values, sizeof values);
        std::uint32_t out[2];
        detail::convert_elements(Dtype::I64, raw + 1, 2, out);
        CHECK(out[0] == 0xFFFFFFFFu);
        CHECK(out[1] == 5u);
        double d[2];
        detail::convert_elements(Dtype::I64, raw + 1, 2, d);
        CHECK(d[0] == -1.0);
        CHECK(d[1] == 4294967301.0);
    }
}
