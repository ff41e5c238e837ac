// SPDX-License-Identifier: BSD-2-Clause
// The bodies of the custom CUDA kernels, run on the host against host references: the reduction
// terms, the element-wise updates, fill, conversion between every pair of element types, and the
// reduction order (launch geometry, block tree, partials) the device follows.
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <tuple>
#include <type_traits>
#include <vector>

#include <syncblob/core/convert.hpp>
#include <syncblob/cuda/detail/functors.hpp>

#include "kernel_test_values.hpp"

namespace sd = syncblob::cuda::detail;
namespace sm = syncblob::math::detail;
using syncblob::accumulator_t;
using syncblob::bfloat16;
using syncblob::half;
using namespace syncblob_cuda_test;

TEST_CASE("reduction launch geometry depends on the element count only", "[cuda][functors]") {
    CHECK(sd::blocks_for(0, sd::max_reduce_blocks) == 1);
    CHECK(sd::blocks_for(1, sd::max_reduce_blocks) == 1);
    CHECK(sd::blocks_for(256, sd::max_reduce_blocks) == 1);
    CHECK(sd::blocks_for(257, sd::max_reduce_blocks) == 2);
    CHECK(sd::blocks_for(1024 * 256, sd::max_reduce_blocks) == 1024);
    CHECK(sd::blocks_for(1024 * 256 + 1, sd::max_reduce_blocks) == 1024);
    CHECK(sd::blocks_for(std::int64_t{1} << 40, sd::max_for_each_blocks) == 65535);
}

TEST_CASE("the block tree reduction adds every value once", "[cuda][functors]") {
    std::vector<double> values(sd::block_threads);
    for (int i = 0; i < sd::block_threads; ++i) {
        values[static_cast<std::size_t>(i)] = i + 1;
    }
    sd::tree_reduce(values.data());
    CHECK(values[0] == 256.0 * 257.0 / 2.0);
    // and it pairs values in the device's order: 1 followed by 255 terms of 2^-25 (a quarter of float's
    // spacing at 1). Added one by one they all vanish; in the tree, the small terms meet each other
    // first and 63 of their 63.75 spacings survive (worked out step by step: 0, 0, 1, 2, 4, 8, 16, 32).
    std::vector<float> tiny(sd::block_threads, std::ldexp(1.0f, -25));
    tiny[0] = 1.0f;
    sd::tree_reduce(tiny.data());
    CHECK(tiny[0] == 1.0f + 63.0f * std::ldexp(1.0f, -23));
}

TEMPLATE_LIST_TEST_CASE("reduction terms and their device-order sum match the host reference", "[cuda][functors]",
                        FloatingTypes) {
    using T = TestType;
    using A = accumulator_t<T>;
    const std::int64_t n = GENERATE(as<std::int64_t>{}, 0, 1, 7, 255, 256, 257, 1001, 300000);
    CAPTURE(n);
    const auto x = test_values<T>(n, 1);
    const auto y = test_values<T>(n, 2);
    // each operation's body as the kernels run it: term(sum, i) adds element i's term to sum
    const auto abs_term = sd::reduce_at(sm::Asum{}, x.data());
    const auto square_term = sd::reduce_at(sm::Sumsq{}, x.data());
    const auto product_term = sd::reduce_at(sm::Dot{}, x.data(), y.data());
    static_assert(std::same_as<sd::term_value_t<decltype(abs_term)>, A>);

    double abs_ref = 0, square_ref = 0, product_ref = 0, abs_terms = 0, product_terms = 0;
    for (std::int64_t i = 0; i < n; ++i) {
        const double xi = as_double(x[static_cast<std::size_t>(i)]);
        const double yi = as_double(y[static_cast<std::size_t>(i)]);
        // each term is exact
        REQUIRE(static_cast<double>(abs_term(A{0}, i)) == std::fabs(xi));
        REQUIRE(static_cast<double>(square_term(A{0}, i)) == xi * xi);
        REQUIRE(static_cast<double>(product_term(A{0}, i)) == xi * yi);
        abs_ref += std::fabs(xi);
        square_ref += xi * xi;
        product_ref += xi * yi;
        abs_terms += std::fabs(xi);
        product_terms += std::fabs(xi * yi);
    }
    // the sum, in the device's order, within the bound of any summation order: (n + 1) u Σ|t|
    const double bound = (static_cast<double>(n) + 1) * unit_roundoff<T>();
    CHECK(std::fabs(static_cast<double>(sd::emulate_reduce(abs_term, n)) - abs_ref) <= bound * abs_terms);
    CHECK(std::fabs(static_cast<double>(sd::emulate_reduce(square_term, n)) - square_ref) <= bound * square_ref);
    CHECK(std::fabs(static_cast<double>(sd::emulate_reduce(product_term, n)) - product_ref) <= bound * product_terms);
    if (n > 0) {
        CHECK(sd::emulate_reduce(abs_term, n) > A{0});
    }
}

TEMPLATE_LIST_TEST_CASE("element-wise bodies match the host reference", "[cuda][functors]", FloatingTypes) {
    using T = TestType;
    using A = accumulator_t<T>;
    const std::int64_t n = GENERATE(as<std::int64_t>{}, 0, 1, 1001);
    const auto x = test_values<T>(n, 3);
    const auto y0 = test_values<T>(n, 4);

    auto y = y0;
    sd::for_each_on_host(sd::transform_at(sm::Sub{}, y.data(), x.data()), n);
    for (std::size_t i = 0; i < y.size(); ++i) {
        // the difference is exact in double; rounding it to T is the reference
        const T expected = static_cast<T>(static_cast<A>(as_double(y0[i]) - as_double(x[i])));
        REQUIRE(as_double(y[i]) == as_double(expected));
    }
    for (const double alpha : {0.5, -1.5, 3.0, 0.0}) {
        auto z = x;
        sd::for_each_on_host(sd::transform_at(sm::Scale<A>{static_cast<A>(alpha)}, z.data()), n);
        for (std::size_t i = 0; i < z.size(); ++i) {
            const T expected = static_cast<T>(static_cast<A>(as_double(x[i]) * alpha));
            REQUIRE(as_double(z[i]) == as_double(expected));
        }
    }
}

TEMPLATE_LIST_TEST_CASE("a reduction term that loads ahead adds in the order of one term at a time", "[cuda][functors]",
                        FloatingTypes) {
    using T = TestType;
    using A = accumulator_t<T>;
    const std::int64_t n = GENERATE(as<std::int64_t>{}, 1, 7, 64, 1001, 300000);
    const std::int64_t stride = GENERATE(as<std::int64_t>{}, 1, 3, 256, 1024 * 256);
    CAPTURE(n, stride);
    const auto x = test_values<T>(n, 5);
    const auto y = test_values<T>(n, 6);
    const auto abs_term = sd::reduce_at(sm::Asum{}, x.data());
    const auto product_term = sd::reduce_at(sm::Dot{}, x.data(), y.data());
    static_assert(sd::LoadsAhead<decltype(abs_term)> && decltype(abs_term)::loads_ahead == 16 / sizeof(T));
    for (const std::int64_t start : {std::int64_t{0}, std::int64_t{1}, stride - 1}) {
        A abs_one = 0, product_one = 0;
        for (std::int64_t i = start; i < n; i += stride) {
            abs_one = abs_term(abs_one, i);
            product_one = product_term(product_one, i);
        }
        // the same bits: the same terms added in the same order
        const A abs_ahead = sd::strided_sum(abs_term, n, start, stride);
        const A product_ahead = sd::strided_sum(product_term, n, start, stride);
        REQUIRE(std::memcmp(&abs_ahead, &abs_one, sizeof(A)) == 0);
        REQUIRE(std::memcmp(&product_ahead, &product_one, sizeof(A)) == 0);
    }
}

TEMPLATE_LIST_TEST_CASE("element-wise bodies that load ahead write what one element at a time writes",
                        "[cuda][functors]", FloatingTypes) {
    using T = TestType;
    using A = accumulator_t<T>;
    const std::int64_t n = GENERATE(as<std::int64_t>{}, 1, 7, 1001, 40000);
    const std::int64_t stride = GENERATE(as<std::int64_t>{}, 1, 5, 256);
    CAPTURE(n, stride);
    const auto x = test_values<T>(n, 7);
    const auto y0 = test_values<T>(n, 8);
    // the element-wise kernel's loop, one thread after another: k elements at a time, then one
    const auto as_the_kernel = [&](const auto& body) {
        constexpr int k = std::remove_cvref_t<decltype(body)>::loads_ahead;
        for (std::int64_t t = 0; t < stride && t < n; ++t) {
            std::int64_t i = t;
            for (; i + (k - 1) * stride < n; i += k * stride) {
                body.template many<k>(i, stride);
            }
            for (; i < n; i += stride) {
                body(i);
            }
        }
    };
    auto ahead = y0;
    auto one = y0;
    as_the_kernel(sd::transform_at(sm::Sub{}, ahead.data(), x.data()));
    sd::for_each_on_host(sd::transform_at(sm::Sub{}, one.data(), x.data()), n);
    REQUIRE(std::memcmp(ahead.data(), one.data(), one.size() * sizeof(T)) == 0);
    as_the_kernel(sd::transform_at(sm::Scale<A>{static_cast<A>(-1.5)}, ahead.data()));
    sd::for_each_on_host(sd::transform_at(sm::Scale<A>{static_cast<A>(-1.5)}, one.data()), n);
    REQUIRE(std::memcmp(ahead.data(), one.data(), one.size() * sizeof(T)) == 0);
    REQUIRE(std::memcmp(ahead.data(), y0.data(), one.size() * sizeof(T)) != 0);  // it did write
}

TEMPLATE_LIST_TEST_CASE("fill writes its value to every element and nothing past them", "[cuda][functors]",
                        AllElements) {
    using T = TestType;
    std::array<T, 9> v{};
    v.fill(syncblob::detail::convert_checked<T>(std::int8_t{0}).value);
    const T value = syncblob::detail::convert_checked<T>(std::int8_t{1}).value;
    sd::for_each_on_host(sd::FillAt<T>{v.data(), value}, 8);
    for (std::size_t i = 0; i < 8; ++i) {
        REQUIRE(v[i] == value);
    }
    CHECK_FALSE(v[8] == value);
}

namespace {

template <class From, class To>
void check_conversions() {
    for (const From v : conversion_sources<From>()) {
        // the kernels' body converts exactly as files are converted on load (convert_elements)
        const syncblob::detail::Converted<To> expected = syncblob::detail::convert_checked<To>(v);
        INFO(syncblob::element_name<From>() << " -> " << syncblob::element_name<To>() << " of " << as_double(v));
        std::array<To, 6> out{};
        std::array<From, 6> in{};
        in.fill(v);
        unsigned long long first = ~0ULL;
        sd::ConvertAt<To, From>{out.data(), in.data(), &first}(5);
        REQUIRE(same_value(out[5], expected.value));
        REQUIRE(first == (expected.exact ? ~0ULL : 5ULL));
    }
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("conversion between every pair of element types follows the load rules",
                        "[cuda][functors][convert]", AllElements) {
    using From = TestType;
    std::apply([](auto... to) { (check_conversions<From, decltype(to)>(), ...); }, AllElements{});
}

TEST_CASE("conversion rules on chosen values", "[cuda][functors][convert]") {
    // the saturated values of docs/file-safety.md's table, written out
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const float inf = std::numeric_limits<float>::infinity();
    const auto convert = [](auto to, auto from) {
        using To = decltype(to);
        To out{};
        sd::ConvertAt<To, decltype(from)>{&out, &from}(0);
        return out;
    };
    CHECK(convert(std::int32_t{}, nan) == 0);
    CHECK(convert(std::int32_t{}, -2.75f) == -2);
    CHECK(convert(std::int32_t{}, 3e9f) == 2147483647);
    CHECK(convert(std::int8_t{}, -inf) == -128);
    CHECK(convert(std::uint8_t{}, -5.0) == 0);
    CHECK(convert(std::uint8_t{}, 300.0) == 255);
    CHECK(convert(std::int64_t{}, 1e19) == std::numeric_limits<std::int64_t>::max());
    CHECK(convert(std::uint64_t{}, 1e20f) == std::numeric_limits<std::uint64_t>::max());
    CHECK(convert(std::uint8_t{}, std::int32_t{300}) == 255);  // saturated, not wrapped
    CHECK(convert(std::uint16_t{}, std::int64_t{-1}) == 0);
    CHECK(convert(std::int32_t{}, std::int64_t{(1LL << 40) + 5}) == 2147483647);
    CHECK(convert(bool{}, nan));
    CHECK_FALSE(convert(bool{}, -0.0));
    CHECK(convert(bool{}, half(0.5f)));
    CHECK(convert(float{}, true) == 1.0f);
    CHECK(convert(half{}, std::int32_t{70000}).bits == 0x7BFFu);  // past 65504: its largest finite value
    CHECK(convert(half{}, inf).bits == 0x7C00u);                  // infinity stays infinity
    CHECK(convert(bfloat16{}, half(1.5f)).bits == 0x3FC0u);
    CHECK(convert(std::int16_t{}, bfloat16(-3.9f)) == -3);
    CHECK(convert(syncblob::float8_e4m3fn{}, 1000.0f).bits == 0x7Eu);  // 448
    CHECK(convert(syncblob::float8_e4m3fn{}, -inf).bits == 0xFEu);     // no infinity: -448
    CHECK(convert(syncblob::float8_e5m2{}, inf).bits == 0x7Cu);
    CHECK(convert(syncblob::float8_e8m0fnu{}, -1.0f).bits == 0x00u);  // positive only: 2^-127
    CHECK(convert(float{}, syncblob::float8_e5m2::from_bits(0x7B)) == 57344.0f);
}
