// SPDX-License-Identifier: BSD-2-Clause
// The dtype table: names, sizes, parsing, and the element type each tag stands for.

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include <syncblob/core/element.hpp>

using syncblob::Dtype;

TEST_CASE("Every dtype has the safetensors name and its size", "[core][dtype]") {
    struct Row {
        Dtype dtype;
        std::string_view name;
        std::size_t size;
    };
    // Written out from the safetensors format description, not from the library.
    const Row table[] = {
        {Dtype::F64, "F64", 8},   {Dtype::F32, "F32", 4}, {Dtype::F16, "F16", 2}, {Dtype::BF16, "BF16", 2},
        {Dtype::I64, "I64", 8},   {Dtype::I32, "I32", 4}, {Dtype::I16, "I16", 2}, {Dtype::I8, "I8", 1},
        {Dtype::U64, "U64", 8},   {Dtype::U32, "U32", 4}, {Dtype::U16, "U16", 2}, {Dtype::U8, "U8", 1},
        {Dtype::BOOL, "BOOL", 1},
    };
    REQUIRE(std::size(table) == syncblob::all_dtypes.size());
    std::set<std::string_view> names;
    for (const Row& row : table) {
        INFO(row.name);
        CHECK(syncblob::dtype_name(row.dtype) == row.name);
        CHECK(syncblob::dtype_size(row.dtype) == row.size);
        CHECK(syncblob::parse_dtype(row.name) == row.dtype);
        names.insert(syncblob::dtype_name(row.dtype));
    }
    CHECK(names.size() == std::size(table));
    // round trip over the library's own list
    for (const Dtype d : syncblob::all_dtypes) {
        CHECK(syncblob::parse_dtype(syncblob::dtype_name(d)) == d);
    }
}

TEST_CASE("parse_dtype rejects what is not a dtype name", "[core][dtype]") {
    for (const std::string_view bad : {"", "f32", "F 32", "F32 ", "FLOAT", "F128", "bool", "?", "BF"}) {
        INFO('"' << std::string(bad) << '"');
        CHECK_FALSE(syncblob::parse_dtype(bad).has_value());
    }
    CHECK(syncblob::dtype_name(static_cast<Dtype>(200)) == "?");
    CHECK(syncblob::dtype_size(static_cast<Dtype>(200)) == 0);
}

TEMPLATE_TEST_CASE("Each element type maps to the dtype of its size", "[core][dtype]", float, double, syncblob::half,
                   syncblob::bfloat16, std::int64_t, std::int32_t, std::int16_t, std::int8_t, std::uint64_t,
                   std::uint32_t, std::uint16_t, std::uint8_t, bool) {
    STATIC_REQUIRE(syncblob::Element<TestType>);
    const Dtype d = syncblob::dtype_of<TestType>;
    CHECK(syncblob::dtype_size(d) == sizeof(TestType));
    CHECK(syncblob::element_name<TestType>() == syncblob::dtype_name(d));
}

TEST_CASE("The element concepts", "[core][dtype]") {
    CHECK(syncblob::dtype_of<float> == Dtype::F32);
    CHECK(syncblob::dtype_of<syncblob::bfloat16> == Dtype::BF16);
    CHECK(syncblob::dtype_of<bool> == Dtype::BOOL);
    CHECK(syncblob::dtype_of<std::int8_t> == Dtype::I8);
    CHECK(syncblob::dtype_of<std::uint64_t> == Dtype::U64);
    STATIC_REQUIRE_FALSE(syncblob::Element<char>);
    STATIC_REQUIRE_FALSE(syncblob::Element<long double>);
    STATIC_REQUIRE_FALSE(syncblob::Element<int*>);
    STATIC_REQUIRE(syncblob::FloatingElement<syncblob::half>);
    STATIC_REQUIRE(syncblob::FloatingElement<double>);
    STATIC_REQUIRE_FALSE(syncblob::FloatingElement<std::int32_t>);
    STATIC_REQUIRE_FALSE(syncblob::FloatingElement<bool>);
}
