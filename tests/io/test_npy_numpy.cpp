// SPDX-License-Identifier: BSD-2-Clause
// .npy against a real NumPy (the interpreter CMake found that can `import numpy`): files syncblob
// writes load in NumPy with equal values and byte-identical headers; files NumPy writes (little-
// and big-endian, version 2 and 3 headers, 0-d, empty) load in syncblob; Fortran-order and object
// arrays are rejected.

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <syncblob/io/npy.hpp>
#include <vector>

#include "blob_file_values.hpp"
#include "files.hpp"
#include "tempfile.hpp"

#ifndef SYNCBLOB_NUMPY_PYTHON
#define SYNCBLOB_NUMPY_PYTHON ""
#endif
#ifndef SYNCBLOB_NPY_SCRIPT
#define SYNCBLOB_NPY_SCRIPT ""
#endif

namespace fs = std::filesystem;
using namespace syncblob;
using Catch::Matchers::Contains;

using test::slurp;

namespace {

bool have_numpy() {
    if (std::string(SYNCBLOB_NUMPY_PYTHON).empty()) {
        std::cout << "skipped: no Python interpreter with NumPy was found at configure time\n";
        return false;
    }
    return true;
}

// Runs the NumPy side; returns its standard output. A failing script fails the test.
std::string numpy(const std::string& args, const fs::path& folder) {
    const fs::path out = folder / "stdout.txt";
    const std::string cmd = std::string("'") + SYNCBLOB_NUMPY_PYTHON + "' '" + SYNCBLOB_NPY_SCRIPT + "' " + args +
                            " > '" + out.string() + "'";
    const int rc = std::system(cmd.c_str());
    INFO(cmd);
    REQUIRE(rc == 0);
    return slurp(out);
}

template <class T>
std::string expected_descr() {
    if constexpr (std::is_same_v<T, bfloat16>) {
        return "<u2";  // NumPy reads '<V2' as void; the script views it as uint16
    } else {
        std::string d(io::detail::npy_descr(dtype_of<T>));
        return d;
    }
}

std::string shape_csv(const Shape& s) {
    std::string out;
    for (std::size_t i = 0; i < s.rank(); ++i) {
        out += (i == 0 ? "" : ",") + std::to_string(s[i]);
    }
    return out;
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("files syncblob writes load in NumPy with equal values", "[io][npy][numpy]",
                        test::AllElements) {
    if (!have_numpy()) {
        return;
    }
    const test::TempDir dir;
    for (const auto& extents : test::round_trip_shapes()) {
        CAPTURE(extents);
        Blob<TestType> blob{Shape(std::span<const std::int64_t>(extents))};
        test::fill_values(blob);
        const fs::path file = dir.path() / "s.npy";
        io::save_npy(file, blob);
        std::istringstream reply(
            numpy("load '" + file.string() + "' '" + (dir.path() / "s.raw").string() + "'", dir.path()));
        std::string descr;
        std::string shape;
        reply >> descr >> shape;
        CHECK(descr == expected_descr<TestType>());
        CHECK(shape == shape_csv(blob.shape()));
        const std::string raw = slurp(dir.path() / "s.raw");
        const auto values = blob.host_data();
        REQUIRE(raw.size() == values.size_bytes());
        CHECK((values.empty() || std::memcmp(raw.data(), values.data(), raw.size()) == 0));
    }
}

TEST_CASE("syncblob's .npy headers are byte-identical to np.save's", "[io][npy][numpy]") {
    if (!have_numpy()) {
        return;
    }
    const test::TempDir dir;
    const auto check = [&](auto zero, const std::string& descr, const std::vector<std::int64_t>& extents) {
        using T = decltype(zero);
        std::string args = "header '" + (dir.path() / "np.npy").string() + "' '" + descr + "'";
        for (const auto n : extents) {
            args += " " + std::to_string(n);
        }
        (void)numpy(args, dir.path());
        Blob<T> blob{Shape(std::span<const std::int64_t>(extents))};
        blob.fill(T{});
        io::save_npy(dir.path() / "sb.npy", blob);
        CAPTURE(descr, extents);
        CHECK(slurp(dir.path() / "sb.npy") == slurp(dir.path() / "np.npy"));
    };
    check(float{}, "<f4", {2, 3});
    check(double{}, "<f8", {});
    check(std::int8_t{}, "|i1", {5});
    check(bool{}, "|b1", {0, 4});
    check(half{}, "<f2", {1234567, 0});
    check(std::uint64_t{}, "<u8", test::round_trip_shapes().back());
}

TEST_CASE("files NumPy writes load in syncblob", "[io][npy][numpy]") {
    if (!have_numpy()) {
        return;
    }
    const test::TempDir dir;
    (void)numpy("save '" + dir.path().string() + "'", dir.path());
    const auto check = [&](auto zero, const std::string& name) {
        using T = decltype(zero);
        CAPTURE(name);
        const auto blob = io::load_npy<T>(dir.path() / (name + ".npy"));
        std::istringstream extents(slurp(dir.path() / (name + ".shape")));
        std::vector<std::int64_t> shape;
        for (std::int64_t n = 0; extents >> n;) {
            shape.push_back(n);
        }
        CHECK(blob.shape() == Shape(std::span<const std::int64_t>(shape)));
        const std::string raw = slurp(dir.path() / (name + ".raw"));
        const auto values = blob.host_data();
        REQUIRE(raw.size() == values.size_bytes());
        CHECK((values.empty() || std::memcmp(raw.data(), values.data(), raw.size()) == 0));
    };
    check(float{}, "f4_le");
    check(double{}, "f8_be");
    check(std::int32_t{}, "i4_be");
    check(std::uint16_t{}, "u2_be");
    check(half{}, "f2_be");
    check(std::int64_t{}, "i8_le");
    check(std::uint64_t{}, "u8_be");
    check(std::int8_t{}, "i1");
    check(std::uint8_t{}, "u1");
    check(bool{}, "b1");
    check(double{}, "scalar");
    check(float{}, "empty");
    check(float{}, "v2");
    check(float{}, "v3");
    check(float{}, "sliced");
    CHECK(slurp(dir.path() / "v2.npy")[6] == 2);
    CHECK(slurp(dir.path() / "v3.npy")[6] == 3);

    Blob<float> blob;
    CHECK_THAT(
        test::message_of<FormatError>([&] { io::load_npy(dir.path() / "fortran.npy", blob); }),
        Contains("fortran.npy: header byte") && Contains("Fortran-order (column-major) arrays are not supported"));
    CHECK_THAT(test::message_of<FormatError>([&] { io::load_npy(dir.path() / "object.npy", blob); }),
               Contains("object.npy: header byte 20: object arrays ('descr': '|O') are not supported"));
    // converted on request: big-endian doubles into float
    Blob<float> narrowed;
    io::load_npy(dir.path() / "f8_be.npy", narrowed, io::LoadOptions{.convert = true});
    const auto wide = io::load_npy<double>(dir.path() / "f8_be.npy");
    CHECK(narrowed.host_data()[5] == static_cast<float>(wide.host_data()[5]));
}
