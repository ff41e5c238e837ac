// SPDX-License-Identifier: BSD-2-Clause
// The dtype table: names, sizes, parsing, and the element type each tag stands for.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

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
        {Dtype::F64, "F64", 8},         {Dtype::F32, "F32", 4},         {Dtype::F16, "F16", 2},
        {Dtype::BF16, "BF16", 2},       {Dtype::I64, "I64", 8},         {Dtype::I32, "I32", 4},
        {Dtype::I16, "I16", 2},         {Dtype::I8, "I8", 1},           {Dtype::U64, "U64", 8},
        {Dtype::U32, "U32", 4},         {Dtype::U16, "U16", 2},         {Dtype::U8, "U8", 1},
        {Dtype::BOOL, "BOOL", 1},       {Dtype::F8_E4M3, "F8_E4M3", 1}, {Dtype::F8_E5M2, "F8_E5M2", 1},
        {Dtype::F8_E8M0, "F8_E8M0", 1},
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
                   std::uint32_t, std::uint16_t, std::uint8_t, bool, syncblob::float8_e4m3fn, syncblob::float8_e5m2,
                   syncblob::float8_e8m0fnu) {
    STATIC_REQUIRE(syncblob::Element<TestType>);
    const Dtype d = syncblob::dtype_of<TestType>;
    CHECK(syncblob::dtype_size(d) == sizeof(TestType));
    CHECK(syncblob::element_name<TestType>() == syncblob::dtype_name(d));
    STATIC_REQUIRE(std::same_as<syncblob::element_t<syncblob::dtype_of<TestType>>, TestType>);
}

TEST_CASE("ElementTypes lists every row of the table, in Dtype order", "[core][dtype]") {
    REQUIRE(std::tuple_size_v<syncblob::ElementTypes> == syncblob::all_dtypes.size());
    std::vector<Dtype> listed;
    std::apply([&](auto... t) { (listed.push_back(syncblob::dtype_of<decltype(t)>), ...); }, syncblob::ElementTypes{});
    CHECK(std::equal(listed.begin(), listed.end(), syncblob::all_dtypes.begin(), syncblob::all_dtypes.end()));
    STATIC_REQUIRE(std::same_as<std::tuple_element_t<0, syncblob::ElementTypes>, double>);
}

TEST_CASE("The table's file-format codes", "[core][dtype]") {
    struct Row {
        Dtype dtype;
        std::string_view numpy;
        int safetensors;
        int dlpack;
    };
    // Written out from NumPy's type codes, the safetensors reference's Dtype enum (safetensors/src/
    // tensor.rs: BOOL, F4, F6_E2M3, F6_E3M2, U8, I8, F8_E5M2, F8_E4M3, F8_E8M0, F8_E4M3FNUZ,
    // F8_E5M2FNUZ, I16, U16, F16, BF16, I32, U32, F32, C64, F64, I64, U64) and dlpack.h's
    // DLDataTypeCode (kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4, kDLBool 6, kDLFloat8_e4m3fn 10,
    // kDLFloat8_e5m2 12, kDLFloat8_e8m0fnu 14).
    const Row table[] = {
        {Dtype::F64, "f8", 19, 2},   {Dtype::F32, "f4", 17, 2},   {Dtype::F16, "f2", 13, 2},
        {Dtype::BF16, "V2", 14, 4},  {Dtype::I64, "i8", 20, 0},   {Dtype::I32, "i4", 15, 0},
        {Dtype::I16, "i2", 11, 0},   {Dtype::I8, "i1", 5, 0},     {Dtype::U64, "u8", 21, 1},
        {Dtype::U32, "u4", 16, 1},   {Dtype::U16, "u2", 12, 1},   {Dtype::U8, "u1", 4, 1},
        {Dtype::BOOL, "b1", 0, 6},   {Dtype::F8_E4M3, "", 7, 10}, {Dtype::F8_E5M2, "", 6, 12},
        {Dtype::F8_E8M0, "", 8, 14},
    };
    REQUIRE(std::size(table) == syncblob::all_dtypes.size());
    for (const Row& row : table) {
        INFO(syncblob::dtype_name(row.dtype));
        const syncblob::DtypeInfo* info = syncblob::dtype_info(row.dtype);
        REQUIRE(info != nullptr);
        CHECK(info->dtype == row.dtype);
        CHECK(info->numpy_code == row.numpy);
        CHECK(info->safetensors_position == row.safetensors);
        CHECK(info->dlpack_code == row.dlpack);
    }
    CHECK(syncblob::dtype_info(static_cast<Dtype>(200)) == nullptr);
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
    // the 8-bit floats are storage: no math (and so no accumulator)
    STATIC_REQUIRE(syncblob::Element<syncblob::float8_e4m3fn>);
    STATIC_REQUIRE_FALSE(syncblob::FloatingElement<syncblob::float8_e4m3fn>);
    STATIC_REQUIRE_FALSE(syncblob::FloatingElement<syncblob::float8_e5m2>);
    STATIC_REQUIRE_FALSE(syncblob::FloatingElement<syncblob::float8_e8m0fnu>);
    STATIC_REQUIRE(std::same_as<syncblob::accumulator_t<double>, double>);
    STATIC_REQUIRE(std::same_as<syncblob::accumulator_t<float>, float>);
    STATIC_REQUIRE(std::same_as<syncblob::accumulator_t<syncblob::half>, float>);
    STATIC_REQUIRE(std::same_as<syncblob::accumulator_t<syncblob::bfloat16>, float>);
}
