// SPDX-License-Identifier: BSD-2-Clause
// SYNCBLOB_X86_DISPATCH is a configuration macro: defined to 0 before syncblob's headers, the host
// math compiles without its AVX2 and AVX-512 paths and runs the portable kernels on any processor.
// A program of its own: every translation unit of a program must see the same setting.
#define SYNCBLOB_X86_DISPATCH 0

#include <syncblob/math.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

TEST_CASE("with SYNCBLOB_X86_DISPATCH 0 only the portable path exists, and it runs the math", "[math]") {
    using syncblob::math::KernelPath;
    CHECK(syncblob::math::supported_kernel_paths() == std::vector<KernelPath>{KernelPath::portable});
    CHECK_FALSE(syncblob::math::kernel_path_supported(KernelPath::avx2));
    CHECK_FALSE(syncblob::math::kernel_path_supported(KernelPath::avx512));
    CHECK(syncblob::math::active_kernel_path() == KernelPath::portable);
    CHECK_THROWS_AS(syncblob::math::set_kernel_path(KernelPath::avx2), syncblob::StateError);

    // every operation, with a tail past any packet width
    syncblob::Blob<float> b({37});
    auto data = b.mutable_host_data();
    auto diff = b.mutable_host_diff();
    double asum = 0;
    double sumsq = 0;
    for (std::size_t i = 0; i < data.size(); ++i) {
        data[i] = static_cast<float>(i) - 18.0f;
        diff[i] = 0.5f;
        asum += std::fabs(static_cast<double>(data[i]));
        sumsq += static_cast<double>(data[i]) * static_cast<double>(data[i]);
    }
    CHECK(static_cast<double>(syncblob::asum_data(b)) == asum);
    CHECK(static_cast<double>(syncblob::sumsq_data(b)) == sumsq);
    CHECK(static_cast<double>(syncblob::dot(b, b)) == sumsq);
    syncblob::update(b);
    syncblob::scale_data(b, 2.0f);
    const auto back = b.host_data();
    for (std::size_t i = 0; i < back.size(); ++i) {
        REQUIRE(back[i] == (static_cast<float>(i) - 18.5f) * 2.0f);
    }
    CHECK(b.data_stats().host_kernels == 5);
}
