// SPDX-License-Identifier: BSD-2-Clause
// Element conversion (io/convert.hpp): the one rule table, checked over every pair of element
// types (the 8-bit floats included) against a reference computed here in long double, through every
// format that converts (.npy, safetensors, JSON, and Caffe's float and double), under both rules.

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include <syncblob/io/caffe.hpp>
#include <syncblob/io/convert.hpp>
#include <syncblob/io/json.hpp>
#include <syncblob/io/npy.hpp>
#include <syncblob/io/safetensors.hpp>

#include "blob_file_values.hpp"
#include "tempfile.hpp"

using namespace syncblob;
using Catch::Matchers::Contains;

namespace {

template <class T>
inline constexpr bool is_float16 = std::same_as<T, half> || std::same_as<T, bfloat16>;
template <class T>
inline constexpr bool is_float8 =
    std::same_as<T, float8_e4m3fn> || std::same_as<T, float8_e5m2> || std::same_as<T, float8_e8m0fnu>;

// The exact value of an element (long double holds every element type's values exactly).
template <class T>
long double exact_value(T v) {
    if constexpr (std::same_as<T, bool>) {
        return v ? 1.0L : 0.0L;
    } else if constexpr (is_float16<T> || is_float8<T>) {
        return static_cast<long double>(static_cast<float>(v));
    } else {
        return static_cast<long double>(v);
    }
}

template <class To>
To largest() {
    if constexpr (std::same_as<To, half>) {
        return half(65504.0f);
    } else if constexpr (std::same_as<To, bfloat16>) {
        return bfloat16::from_bits(0x7F7F);
    } else {
        return std::numeric_limits<To>::max();
    }
}

// What the table says for the value x into To: whether it is exact, and what saturating gives.
template <class To>
struct Expected {
    bool exact;
    To value;
};

// An 8-bit float's reference, from its values (each decoded as the specification tables say: the
// test of core/float8.hpp checks all 256 of each format against them), not from its encoder: x rounded
// to the nearest value of the format as if its exponent range went on, ties to the even code
// (F8_E8M0, only powers of two, rounds 1.5 · 2^k up); a rounding past the largest finite value, an
// infinity the format lacks, or for F8_E8M0 a value not above zero is inexact and saturates.
template <class To>
Expected<To> reference_float8(long double x) {
    if (std::isnan(x)) {
        return {true, To::from_bits(0xFF)};  // a NaN of every format
    }
    if constexpr (std::same_as<To, float8_e8m0fnu>) {
        const To least = To::from_bits(0x00);
        const To top = To::from_bits(0xFE);
        if (x <= 0) {
            return {false, least};
        }
        if (std::isinf(x)) {
            return {false, top};
        }
        int e = 0;
        const long double m = std::frexp(x, &e);  // x = m · 2^e, m in [0.5, 1)
        const int k = m >= 0.75L ? e : e - 1;     // 1.5 · 2^(e-1) rounds up to 2^e
        if (k > 127) {
            return {false, top};
        }
        return {true, To::from_bits(static_cast<std::uint8_t>(std::max(k, -127) + 127))};
    } else {
        const bool negative = std::signbit(x);
        const auto with_sign = [&](int code) {
            return To::from_bits(static_cast<std::uint8_t>(negative ? code | 0x80 : code));
        };
        // the largest finite code, and the value of the code past it (NaN in E4M3FN, infinity in E5M2)
        constexpr int max_code = std::same_as<To, float8_e4m3fn> ? 0x7E : 0x7B;
        constexpr long double past = std::same_as<To, float8_e4m3fn> ? 480.0L : 65536.0L;
        const long double a = std::fabs(x);
        if (std::isinf(a)) {
            return std::same_as<To, float8_e5m2> ? Expected<To>{true, with_sign(0x7C)}
                                                 : Expected<To>{false, with_sign(max_code)};
        }
        if (a >= past) {  // (and far above it, where the distances below would round alike)
            return {false, with_sign(max_code)};
        }
        int best = 0;
        long double best_distance = std::numeric_limits<long double>::infinity();
        for (int code = 0; code <= max_code + 1; ++code) {
            const long double value =
                code > max_code
                    ? past
                    : static_cast<long double>(static_cast<float>(To::from_bits(static_cast<std::uint8_t>(code))));
            const long double distance = std::fabs(value - a);
            if (distance < best_distance || (distance == best_distance && code % 2 == 0)) {
                best = code;
                best_distance = distance;
            }
        }
        if (best > max_code) {
            return {false, with_sign(max_code)};
        }
        return {true, with_sign(best)};
    }
}

template <class To>
Expected<To> reference(long double x) {
    if constexpr (is_float8<To>) {
        return reference_float8<To>(x);
    } else if constexpr (std::same_as<To, bool>) {
        return {x == 0 || x == 1, x != 0};  // NaN != 0: true, as C++ and NumPy convert it
    } else if constexpr (std::integral<To>) {
        constexpr auto lo = std::numeric_limits<To>::min();
        constexpr auto hi = std::numeric_limits<To>::max();
        if (std::isnan(x)) {
            return {false, To{0}};
        }
        if (x > static_cast<long double>(hi)) {
            return {false, hi};
        }
        if (x < static_cast<long double>(lo)) {
            return {false, lo};
        }
        const auto t = static_cast<To>(x);  // truncated toward zero
        return {static_cast<long double>(t) == x, t};
    } else {
        To r{};
        if constexpr (is_float16<To>) {
            r = To(static_cast<float>(static_cast<double>(x)));
        } else {
            r = static_cast<To>(x);
        }
        const long double out = exact_value(r);
        if (std::isfinite(x) && std::isinf(out)) {
            const To top = largest<To>();
            if constexpr (is_float16<To>) {
                return {false, x > 0 ? top : To::from_bits(static_cast<std::uint16_t>(top.bits | 0x8000))};
            } else {
                return {false, x > 0 ? top : -top};
            }
        }
        return {true, r};
    }
}

template <class T>
bool same_value(T a, T b) {
    if constexpr (std::same_as<T, bool> || std::integral<T>) {
        return a == b;
    } else {
        const long double x = exact_value(a);
        const long double y = exact_value(b);
        return (std::isnan(x) && std::isnan(y)) || (x == y && std::signbit(x) == std::signbit(y));
    }
}

// Values of From that probe every rule: both ends of each type's range and one past them,
// fractions, NaN, infinities, signed zeros, the float16 limits, 2^53 + 1, the 8-bit floats' largest
// values and the midpoints past them; for an 8-bit float, all 256 of its values.
template <class From>
std::vector<From> probes() {
    if constexpr (std::same_as<From, bool>) {
        return {false, true};
    } else if constexpr (is_float8<From>) {
        std::vector<From> out;
        for (int bits = 0; bits < 256; ++bits) {
            out.push_back(From::from_bits(static_cast<std::uint8_t>(bits)));
        }
        return out;
    } else {
        const long double inf = std::numeric_limits<long double>::infinity();
        const std::vector<long double> xs{0.0L,
                                          -0.0L,
                                          1,
                                          -1,
                                          2,
                                          0.5L,
                                          -0.5L,
                                          2.5L,
                                          -2.75L,
                                          127,
                                          128,
                                          -128,
                                          -129,
                                          255,
                                          256,
                                          32767,
                                          32768,
                                          -32768,
                                          -32769,
                                          448,
                                          464,
                                          465,
                                          57344,
                                          61439,
                                          61440,
                                          0x1p-130L,
                                          0x1.7ffffep-127L,
                                          0x1.8p-127L,
                                          0x1p127L,
                                          0x1.8p127L,
                                          65504,
                                          65519,
                                          65520,
                                          65535,
                                          65536,
                                          2147483647.0L,
                                          2147483648.0L,
                                          -2147483648.0L,
                                          -2147483649.0L,
                                          4294967295.0L,
                                          4294967296.0L,
                                          9007199254740993.0L,
                                          9223372036854775807.0L,
                                          9223372036854775808.0L,
                                          -9223372036854775808.0L,
                                          -9223372036854775809.0L,
                                          18446744073709551615.0L,
                                          18446744073709551616.0L,
                                          1e10L,
                                          3e38L,
                                          3.5e38L,
                                          -1e300L,
                                          1e300L,
                                          1e-300L,
                                          std::numeric_limits<long double>::quiet_NaN(),
                                          inf,
                                          -inf};
        std::vector<From> out;
        for (const long double x : xs) {
            if constexpr (std::integral<From>) {
                if (std::isfinite(x) && x == std::trunc(x) &&
                    x >= static_cast<long double>(std::numeric_limits<From>::min()) &&
                    x <= static_cast<long double>(std::numeric_limits<From>::max()) && !(x == 0 && std::signbit(x))) {
                    out.push_back(static_cast<From>(x));
                }
            } else if constexpr (is_float16<From>) {
                out.push_back(From(static_cast<float>(x)));
            } else {
                out.push_back(static_cast<From>(x));
            }
        }
        return out;
    }
}

template <class T>
std::string raw_bytes(const std::vector<T>& v) {
    std::string s(v.size() * sizeof(T), '\0');
    for (std::size_t i = 0; i < v.size(); ++i) {
        const T x = v[i];
        std::memcpy(s.data() + i * sizeof(T), &x, sizeof(T));
    }
    return s;
}

std::span<const std::byte> as_bytes(const std::string& s) {
    return std::as_bytes(std::span(s.data(), s.size()));
}

template <class From>
std::string npy_of(const std::vector<From>& v) {
    std::string header = "{'descr': '" + std::string(io::detail::npy_descr(dtype_of<From>)) +
                         "', 'fortran_order': False, 'shape': (" + std::to_string(v.size()) + ",), }";
    header.append(64 - (10 + header.size() + 1) % 64, ' ');
    header += '\n';
    std::string out = "\x93NUMPY";
    out += '\x01';
    out += '\0';
    out += static_cast<char>(header.size() & 0xFF);
    out += static_cast<char>(header.size() >> 8);
    return out + header + raw_bytes(v);
}

template <class From>
std::string safetensors_of(const std::vector<From>& v) {
    io::SafetensorsWriter w;
    const std::string data = raw_bytes(v);
    w.add_bytes("x", dtype_of<From>, {static_cast<std::int64_t>(v.size())}, as_bytes(data));
    return w.header() + data;
}

template <class From>
std::string json_of(const std::vector<From>& v) {
    Blob<From> b{static_cast<std::int64_t>(v.size())};
    std::copy(v.begin(), v.end(), b.mutable_host_data().begin());
    return io::to_json(b, io::WriteDiff::never).dump();
}

template <class From>
std::string proto_of(const std::vector<From>& v) {
    Blob<From> b{static_cast<std::int64_t>(v.size())};
    std::copy(v.begin(), v.end(), b.mutable_host_data().begin());
    return io::serialize_blob_proto(b);
}

enum class Format { npy, safetensors, json, caffe };

const char* name_of(Format f) {
    return f == Format::npy ? "npy" : f == Format::safetensors ? "safetensors" : f == Format::json ? "JSON" : "Caffe";
}

// Whether `format` stores `from` and converts it into `to`.
bool format_converts(Dtype from, Dtype to, Format format) {
    const auto caffe_type = [](Dtype d) { return d == Dtype::F32 || d == Dtype::F64; };
    const auto float8 = [](Dtype d) { return d == Dtype::F8_E4M3 || d == Dtype::F8_E5M2 || d == Dtype::F8_E8M0; };
    switch (format) {
        case Format::caffe:
            return caffe_type(from) && caffe_type(to);
        case Format::npy:
            if (float8(from) || float8(to)) {
                return false;  // .npy has no standard descriptor for the 8-bit floats
            }
            // .npy stores bfloat16 as raw 2-byte values ('<V2'), which convert to nothing else.
            return from == to || (from != Dtype::BF16 && to != Dtype::BF16);
        case Format::safetensors:
        case Format::json:
            break;
    }
    return true;
}

// `v` as the bytes of a file in `format` (empty for Caffe, which holds only float and double).
template <class From>
std::string written(Format format, const std::vector<From>& v) {
    switch (format) {
        case Format::npy:
            return npy_of(v);
        case Format::safetensors:
            return safetensors_of(v);
        case Format::json:
            return json_of(v);
        case Format::caffe:
            if constexpr (std::same_as<From, float> || std::same_as<From, double>) {
                return proto_of(v);
            }
            break;
    }
    return {};
}

// One source type's probes and how to write any of them in any format: all that the check of a
// pair needs of its source type, so that the check is compiled once per destination type.
struct Source {
    Dtype dtype;
    std::vector<long double> values;                                            // each probe's exact value
    std::function<std::string(Format, const std::vector<std::size_t>&)> write;  // the probes at these indices

    [[nodiscard]] std::string_view name() const { return dtype_name(dtype); }
};

template <class From>
Source source_of(const std::vector<From>& probes) {
    Source source{dtype_of<From>, {}, {}};
    for (const From v : probes) {
        source.values.push_back(exact_value(v));
    }
    source.write = [probes](Format format, const std::vector<std::size_t>& which) {
        std::vector<From> v;
        for (const std::size_t i : which) {
            v.push_back(probes[i]);
        }
        return written(format, v);
    };
    return source;
}

// Loads the bytes of a file in `format` into a Blob<To> by `options`.
template <class To>
void load_as(Format format, const std::string& bytes, Blob<To>& blob, const io::LoadOptions& options) {
    switch (format) {
        case Format::npy:
            io::load_npy(as_bytes(bytes), "p.npy", blob, options);
            return;
        case Format::safetensors:
            io::SafetensorsFile::from_memory(as_bytes(bytes), "p.safetensors", options).load("x", blob);
            return;
        case Format::json:
            io::parse_json(bytes, blob, options, "p.json");
            return;
        case Format::caffe:
            if constexpr (std::same_as<To, float> || std::same_as<To, double>) {
                io::parse_blob_proto(bytes, blob, options, "p.pb");
            }
            return;
    }
}

// Loads `values`, written in `format`, into a Blob<To> by `options`.
template <class To, class From>
void load_as(Format format, const std::vector<From>& values, Blob<To>& blob, const io::LoadOptions& options) {
    load_as(format, written(format, values), blob, options);
}

// Whether convert_checked calls each probe of From exact in To.
template <class To, class From>
std::vector<bool> checked_exact(const std::vector<From>& probes) {
    std::vector<bool> exact;
    for (const From v : probes) {
        exact.push_back(detail::convert_checked<To>(v).exact);
    }
    return exact;
}

// Every probe of a source type into To, in every format: saturating, all at once; exact, the probes
// that convert exactly all at once, and those that do not, all at once (refused) and, through .npy
// (safetensors for bfloat16), one by one: each refused, naming its type, the blob's type and the
// saturating option. `checked` is convert_checked's exactness of each probe.
template <class To>
void check_into(const Source& from, const std::vector<bool>& checked) {
    std::vector<std::size_t> all;
    std::vector<std::size_t> exact;
    std::vector<std::size_t> inexact;
    for (std::size_t i = 0; i < from.values.size(); ++i) {
        const Expected<To> want = reference<To>(from.values[i]);
        INFO(from.name() << " -> " << element_name<To>() << " of " << static_cast<double>(from.values[i]));
        REQUIRE(checked[i] == want.exact);
        all.push_back(i);
        (want.exact ? exact : inexact).push_back(i);
    }
    const auto expect_values = [&](const Blob<To>& blob, const std::vector<std::size_t>& which) {
        REQUIRE(blob.count() == static_cast<std::int64_t>(which.size()));
        for (std::size_t k = 0; k < which.size(); ++k) {
            INFO("value " << static_cast<double>(from.values[which[k]]));
            REQUIRE(same_value(blob.host_data()[k], reference<To>(from.values[which[k]]).value));
        }
    };
    for (const Format format : {Format::npy, Format::safetensors, Format::json, Format::caffe}) {
        if (!format_converts(from.dtype, dtype_of<To>, format)) {
            continue;
        }
        INFO(from.name() << " -> " << element_name<To>() << " through " << name_of(format));
        Blob<To> saturated;
        load_as(format, from.write(format, all), saturated, io::LoadOptions{.convert = true, .saturate = true});
        expect_values(saturated, all);
        if (!exact.empty()) {
            Blob<To> some;
            load_as(format, from.write(format, exact), some, io::LoadOptions{.convert = true});
            expect_values(some, exact);
        }
        const auto refused = [&](const std::vector<std::size_t>& which) {
            Blob<To> none;
            const std::string bytes = from.write(format, which);
            const std::string message =
                test::message_of<FormatError>([&] { load_as(format, bytes, none, io::LoadOptions{.convert = true}); });
            REQUIRE_THAT(message, Contains(std::string(from.name())) && Contains(std::string(element_name<To>())) &&
                                      Contains("LoadOptions::saturate"));
            REQUIRE_FALSE(none.has_shape());
        };
        if (!inexact.empty()) {
            refused(inexact);
        }
        const bool one_by_one = format == Format::npy || (format == Format::safetensors &&
                                                          !format_converts(from.dtype, dtype_of<To>, Format::npy));
        for (std::size_t k = 0; one_by_one && k < inexact.size(); ++k) {
            INFO("value " << static_cast<double>(from.values[inexact[k]]));
            refused({inexact[k]});
        }
    }
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("every pair of element types converts by the one rule table, in every format", "[io][convert]",
                        ElementTypes) {
    using From = TestType;
    const std::vector<From> values = probes<From>();
    const Source source = source_of(values);
    std::apply([&](auto... to) { (check_into<decltype(to)>(source, checked_exact<decltype(to)>(values)), ...); },
               ElementTypes{});
}

TEST_CASE("a refused conversion names the element, its value and what saturating would give", "[io][convert]") {
    const std::vector<std::int64_t> v{5, 7, -1};
    Blob<std::uint8_t> u;
    CHECK(test::message_of<FormatError>([&] { load_as(Format::npy, v, u, io::LoadOptions{.convert = true}); }) ==
          "p.npy: data at byte 128, element 2: value -1 (I64) is out of the range of U8 [0, 255]; "
          "LoadOptions::saturate would load it as 0");
    CHECK_THAT(test::message_of<FormatError>(
                   [&] { load_as(Format::json, std::vector<double>{0.5}, u, io::LoadOptions{.convert = true}); }),
               Contains("p.json: data[0]: value 0.5 (F64) is not a whole number, which U8 needs"));
    Blob<std::int32_t> i;
    CHECK_THAT(test::message_of<FormatError>([&] {
                   load_as(Format::safetensors, std::vector<float>{1.0f, std::numeric_limits<float>::quiet_NaN()}, i,
                           io::LoadOptions{.convert = true});
               }),
               Contains("p.safetensors: tensor \"x\" at byte") && Contains("element 1: value nan (F32) is NaN"));
    Blob<float> f;
    CHECK_THAT(test::message_of<FormatError>([&] {
                   load_as(Format::caffe, std::vector<double>{1, -1e300}, f, io::LoadOptions{.convert = true});
               }),
               Contains("p.pb: offset") && Contains("BlobProto.double_data (field 8) value 1") &&
                   Contains("value -1e+300 (F64) overflows F32") && Contains("would load it as -3.4028235e+38"));
    Blob<bool> b;
    CHECK_THAT(test::message_of<FormatError>([&] {
                   load_as(Format::npy, std::vector<std::int8_t>{1, 0, 2}, b, io::LoadOptions{.convert = true});
               }),
               Contains("element 2: value 2 (I8) is neither 0 nor 1, which BOOL needs"));
}

TEST_CASE("convert_elements stops at the first refused element and reads unaligned input", "[io][convert]") {
    unsigned char raw[1 + 3 * 8];
    const std::int64_t values[] = {3, 0x1'0000'0005, -1};
    std::memcpy(raw + 1, values, sizeof values);
    std::uint32_t out[3] = {9, 9, 9};
    CHECK(io::detail::convert_elements(Dtype::I64, raw + 1, 3, out, io::detail::ConvertRule::exact) == 1);
    CHECK(out[0] == 3u);
    CHECK(out[1] == 9u);  // not written
    CHECK(io::detail::convert_elements(Dtype::I64, raw + 1, 3, out, io::detail::ConvertRule::saturate) == 3);
    CHECK(out[1] == 0xFFFFFFFFu);
    CHECK(out[2] == 0u);
}

TEST_CASE("the rule table is constexpr", "[io][convert]") {
    static_assert(detail::convert_checked<std::uint8_t>(std::int64_t{-1}).value == 0);
    static_assert(!detail::convert_checked<std::uint8_t>(std::int64_t{-1}).exact);
    static_assert(detail::convert_checked<std::int32_t>(2.0).exact);
    static_assert(detail::convert_checked<std::int32_t>(-2.75f).value == -2);
    static_assert(detail::convert_checked<std::int64_t>(1e19).value == std::numeric_limits<std::int64_t>::max());
    static_assert(detail::convert_checked<half>(1e300).value.bits == 0x7BFF);
    static_assert(detail::convert_checked<float>(half(0.5f)).value == 0.5f);
    static_assert(detail::convert_checked<bool>(std::uint16_t{2}).value);
    static_assert(!detail::convert_checked<bool>(std::uint16_t{2}).exact);
    SUCCEED("checked at compile time");
}
