// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The AVX2+FMA and AVX-512F paths: their lane types (operations.hpp) and kernel entries, compiled
/// through `[[gnu::target]]` attributes whatever the consumer's `-march`, and the run-time processor
/// checks that choose them. The loops are lane_loops.hpp's, the arithmetic the operations'.
///
/// Configuration: `SYNCBLOB_X86_DISPATCH`, defined to 0 before syncblob's headers (in every
/// translation unit of a program), compiles the host math without these paths: the portable kernels
/// then run on every processor. Undefined, the paths are compiled wherever they can be: x86-64 with
/// g++ or clang, not under nvcc, not on MSVC. Where they are not, the portable kernels stand in and
/// the checks say no.

#include <concepts>
#include <cstddef>
#include <cstdint>

#include "../../core/config.hpp"
#include "../../core/element.hpp"
#include "lane_loops.hpp"
#include "portable_kernels.hpp"

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__) && \
    !defined(_MSC_VER) && (!defined(SYNCBLOB_X86_DISPATCH) || SYNCBLOB_X86_DISPATCH)
#define SYNCBLOB_X86_PATHS 1
#include <cpuid.h>
#include <immintrin.h>
#else
#define SYNCBLOB_X86_PATHS 0
#endif

SYNCBLOB_BEGIN_NAMESPACE

namespace math::detail {

namespace x86 {
/// AVX2, FMA and F16C (all three are used by the avx2 path), with OS support for the registers.
inline bool cpu_has_avx2() noexcept {
#if SYNCBLOB_X86_PATHS
    static const bool has = [] {
        __builtin_cpu_init();
#if defined(__clang__)  // clang's __builtin_cpu_supports has no "f16c"; every AVX2 processor has it
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
#endif
    }();
    return has;
#else
    return false;
#endif
}
/// AVX-512F with OS support for the registers.
inline bool cpu_has_avx512() noexcept {
#if SYNCBLOB_X86_PATHS
    static const bool has = [] {
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx512f") != 0;
    }();
    return has;
#else
    return false;
#endif
}
/// True on processors that execute 512-bit operations as two 256-bit halves and have AVX-512:
/// AMD family 19h (Zen 4), the one family of that vendor with AVX-512 and 256-bit units.
inline bool cpu_runs_512_bits_in_halves() noexcept {
#if SYNCBLOB_X86_PATHS
    static const bool halves = [] {
        unsigned a = 0;
        unsigned b = 0;
        unsigned c = 0;
        unsigned d = 0;
        if (__get_cpuid(0, &a, &b, &c, &d) == 0) {
            return false;
        }
        const bool amd = b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u;  // "AuthenticAMD"
        if (!amd || __get_cpuid(1, &a, &b, &c, &d) == 0) {
            return false;
        }
        const unsigned family = ((a >> 8) & 0xfu) + ((a >> 20) & 0xffu);
        return family == 0x19u && cpu_has_avx512();
    }();
    return halves;
#else
    return false;
#endif
}

#if SYNCBLOB_X86_PATHS
// Vector registers as classes. The operations, compiled without a path's instruction set and
// inlined into its kernel, take them by reference and return them by value, which the compilers
// accept for a class but not for a bare `__m256`, whose calling convention depends on the
// instruction set.
struct F32x8 {
    __m256 v;
};
struct F64x4 {
    __m256d v;
};
struct F32x16 {
    __m512 v;
};
struct F64x8 {
    __m512d v;
};

// How a kernel's instructions are scheduled: with g++, for a generic x86-64 whatever the consumer's
// `-mtune`/`-march`, so a `-march=native` build runs the same instruction sequence as a default
// build, the one the benchmark measures in both (docs/benchmarks.md, "Code placement"). Clang 14
// has no `tune=` in the target attribute.
#if defined(__clang__)
#define SYNCBLOB_KERNEL_TUNE ""
#else
#define SYNCBLOB_KERNEL_TUNE ",tune=generic"
#endif

// The sum of a 256-bit register's lanes in a fixed tree (lane i plus lane i + 4, then i + 2, i + 1
// for float; i + 2, then i + 1 for double), shared by both paths: AVX is part of each. Its tuning is
// the kernels': g++ inlines no function of another tuning, so under a consumer's `-march=native` (or
// any `-mtune`) every reduction called it out of line, its stack frame realigned to 64 bytes for the
// register passed in memory (docs/benchmarks.md, "`asum` in L1").
__attribute__((target("avx" SYNCBLOB_KERNEL_TUNE))) inline float hsum(const F32x8& a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a.v), _mm256_extractf128_ps(a.v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
__attribute__((target("avx" SYNCBLOB_KERNEL_TUNE))) inline double hsum(const F64x4& a) {
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(a.v), _mm256_extractf128_pd(a.v, 1));
    s = _mm_add_sd(s, _mm_unpackhi_pd(s, s));
    return _mm_cvtsd_f64(s);
}
#endif
}  // namespace x86

#if SYNCBLOB_X86_PATHS

// Where a kernel's code sits: its entry on a 64-byte boundary and, with g++, its loops too, so a hot
// loop starts on a line of code whatever the consumer's flags and the code around it (clang has no
// per-function loop alignment; its entries are aligned all the same). Measured on the benchmark's
// small sizes, where one call lasts tens of nanoseconds (docs/benchmarks.md, "Code placement").
#if defined(__clang__)
#define SYNCBLOB_KERNEL_PLACEMENT aligned(64)
#else
#define SYNCBLOB_KERNEL_PLACEMENT aligned(64), optimize("align-loops=64")
#endif

// A path's two kernel entries: the loops of lane_loops.hpp on its `Simd<T>`, compiled for its
// instruction set (SYNCBLOB_SIMD_ENTRY) and placed as SYNCBLOB_KERNEL_PLACEMENT says.
#define SYNCBLOB_SIMD_KERNELS                                                                         \
    template <class Op, FloatingElement T, std::same_as<T>... In>                                     \
    SYNCBLOB_SIMD_ENTRY accumulator_t<T> reduce(Op op, std::int64_t n, const T* x, const In*... in) { \
        return reduce_lanes<Simd<T>>(op, n, x, in...);                                                \
    }                                                                                                 \
    template <class Op, FloatingElement T, std::same_as<T>... In>                                     \
    SYNCBLOB_SIMD_ENTRY void transform(Op op, std::int64_t n, T* y, const In*... in) {                \
        transform_lanes<Simd<T>>(op, n, y, in...);                                                    \
    }

// ---- AVX2 + FMA + F16C ------------------------------------------------------------------------
namespace avx2 {

#define SYNCBLOB_SIMD_FN __attribute__((target("avx2,fma,f16c" SYNCBLOB_KERNEL_TUNE))) inline
#define SYNCBLOB_SIMD_ENTRY \
    __attribute__((target("avx2,fma,f16c" SYNCBLOB_KERNEL_TUNE), SYNCBLOB_KERNEL_PLACEMENT)) inline

template <class T>
struct Simd;

struct SimdF32Ops {
    using vec = x86::F32x8;
    static constexpr int width = 8;
    SYNCBLOB_SIMD_FN static vec zero() { return {_mm256_setzero_ps()}; }
    SYNCBLOB_SIMD_FN static vec set1(float a) { return {_mm256_set1_ps(a)}; }
    SYNCBLOB_SIMD_FN static vec add(vec a, vec b) { return {_mm256_add_ps(a.v, b.v)}; }
    SYNCBLOB_SIMD_FN static vec sub(vec a, vec b) { return {_mm256_sub_ps(a.v, b.v)}; }
    SYNCBLOB_SIMD_FN static vec mul(vec a, vec b) { return {_mm256_mul_ps(a.v, b.v)}; }
    SYNCBLOB_SIMD_FN static vec madd(vec a, vec b, vec c) { return {_mm256_fmadd_ps(a.v, b.v, c.v)}; }
    SYNCBLOB_SIMD_FN static vec abs(vec a) { return {_mm256_andnot_ps(_mm256_set1_ps(-0.0f), a.v)}; }
    SYNCBLOB_SIMD_FN static float hsum(vec a) { return x86::hsum(a); }
};

template <>
struct Simd<float> : SimdF32Ops {
    SYNCBLOB_SIMD_FN static vec load(const float* p) { return {_mm256_loadu_ps(p)}; }
    SYNCBLOB_SIMD_FN static void store(float* p, vec v) { _mm256_storeu_ps(p, v.v); }
};

template <>
struct Simd<half> : SimdF32Ops {
    SYNCBLOB_SIMD_FN static vec load(const half* p) {
        return {_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))};
    }
    SYNCBLOB_SIMD_FN static void store(half* p, vec v) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                         _mm256_cvtps_ph(v.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
};

template <>
struct Simd<bfloat16> : SimdF32Ops {
    SYNCBLOB_SIMD_FN static vec load(const bfloat16* p) {
        const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        return {_mm256_castsi256_ps(_mm256_slli_epi32(wide, 16))};
    }
    // Round to nearest even; NaN stays a quiet NaN (as float_to_bfloat16_bits does).
    SYNCBLOB_SIMD_FN static void store(bfloat16* p, vec v) {
        const __m256i bits = _mm256_castps_si256(v.v);
        const __m256i high = _mm256_srli_epi32(bits, 16);
        const __m256i lsb = _mm256_and_si256(high, _mm256_set1_epi32(1));
        const __m256i rounded =
            _mm256_srli_epi32(_mm256_add_epi32(bits, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF))), 16);
        const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v.v, v.v, _CMP_UNORD_Q));
        const __m256i quiet = _mm256_or_si256(high, _mm256_set1_epi32(0x40));
        const __m256i r = _mm256_blendv_epi8(rounded, quiet, nan);
        const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(packed));
    }
};

template <>
struct Simd<double> {
    using vec = x86::F64x4;
    static constexpr int width = 4;
    SYNCBLOB_SIMD_FN static vec load(const double* p) { return {_mm256_loadu_pd(p)}; }
    SYNCBLOB_SIMD_FN static void store(double* p, vec v) { _mm256_storeu_pd(p, v.v); }
    SYNCBLOB_SIMD_FN static vec zero() { return {_mm256_setzero_pd()}; }
    SYNCBLOB_SIMD_FN static vec set1(double a) { return {_mm256_set1_pd(a)}; }
    SYNCBLOB_SIMD_FN static vec add(vec a, vec b) { return {_mm256_add_pd(a.v, b.v)}; }
    SYNCBLOB_SIMD_FN static vec sub(vec a, vec b) { return {_mm256_sub_pd(a.v, b.v)}; }
    SYNCBLOB_SIMD_FN static vec mul(vec a, vec b) { return {_mm256_mul_pd(a.v, b.v)}; }
    SYNCBLOB_SIMD_FN static vec madd(vec a, vec b, vec c) { return {_mm256_fmadd_pd(a.v, b.v, c.v)}; }
    SYNCBLOB_SIMD_FN static vec abs(vec a) { return {_mm256_andnot_pd(_mm256_set1_pd(-0.0), a.v)}; }
    SYNCBLOB_SIMD_FN static double hsum(vec a) { return x86::hsum(a); }
};

SYNCBLOB_SIMD_KERNELS

#undef SYNCBLOB_SIMD_FN
#undef SYNCBLOB_SIMD_ENTRY
}  // namespace avx2

// ---- AVX-512F ---------------------------------------------------------------------------------
namespace avx512 {

#define SYNCBLOB_SIMD_FN __attribute__((target("avx512f" SYNCBLOB_KERNEL_TUNE))) inline
#define SYNCBLOB_SIMD_ENTRY __attribute__((target("avx512f" SYNCBLOB_KERNEL_TUNE), SYNCBLOB_KERNEL_PLACEMENT)) inline

// GCC 12's _mm512_reduce_add_*, _mm512_cast*512_*256 and the unmasked conversions read
// _mm512_undefined_*(), which -Wuninitialized flags in sanitizer builds, so the masked forms are used.

template <class T>
struct Simd;

struct SimdF32Ops {
    using vec = x86::F32x16;
    static constexpr int width = 16;
    SYNCBLOB_SIMD_FN static vec zero() { return {_mm512_setzero_ps()}; }
    SYNCBLOB_SIMD_FN static vec set1(float a) { return {_mm512_set1_ps(a)}; }
    SYNCBLOB_SIMD_FN static vec add(vec a, vec b) { return {_mm512_add_ps(a.v, b.v)}; }
    SYNCBLOB_SIMD_FN static vec sub(vec a, vec b) { return {_mm512_sub_ps(a.v, b.v)}; }
    SYNCBLOB_SIMD_FN static vec mul(vec a, vec b) { return {_mm512_mul_ps(a.v, b.v)}; }
    SYNCBLOB_SIMD_FN static vec madd(vec a, vec b, vec c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
    SYNCBLOB_SIMD_FN static vec abs(vec a) { return {_mm512_abs_ps(a.v)}; }
    // A fixed tree in registers: lane i plus lane i + 8, then i + 4, i + 2, i + 1.
    SYNCBLOB_SIMD_FN static float hsum(vec a) {
        const __m512d bits = _mm512_castps_pd(a.v);
        const __m256 low = _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xF, bits, 0));
        const __m256 high = _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xF, bits, 1));
        return x86::hsum(x86::F32x8{_mm256_add_ps(low, high)});
    }
};

template <>
struct Simd<float> : SimdF32Ops {
    SYNCBLOB_SIMD_FN static vec load(const float* p) { return {_mm512_loadu_ps(p)}; }
    SYNCBLOB_SIMD_FN static void store(float* p, vec v) { _mm512_storeu_ps(p, v.v); }
};

template <>
struct Simd<half> : SimdF32Ops {
    SYNCBLOB_SIMD_FN static vec load(const half* p) {
        return {_mm512_maskz_cvtph_ps(0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)))};
    }
    SYNCBLOB_SIMD_FN static void store(half* p, vec v) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                            _mm512_maskz_cvtps_ph(0xFFFF, v.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
};

template <>
struct Simd<bfloat16> : SimdF32Ops {
    SYNCBLOB_SIMD_FN static vec load(const bfloat16* p) {
        const __m512i wide =
            _mm512_maskz_cvtepu16_epi32(0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
        return {_mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, wide, 16))};
    }
    // Round to nearest even; NaN stays a quiet NaN (as float_to_bfloat16_bits does).
    SYNCBLOB_SIMD_FN static void store(bfloat16* p, vec v) {
        const __m512i bits = _mm512_castps_si512(v.v);
        const __m512i high = _mm512_maskz_srli_epi32(0xFFFF, bits, 16);
        const __m512i lsb = _mm512_and_si512(high, _mm512_set1_epi32(1));
        const __m512i rounded = _mm512_maskz_srli_epi32(
            0xFFFF, _mm512_add_epi32(bits, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF))), 16);
        const __mmask16 nan = _mm512_cmp_ps_mask(v.v, v.v, _CMP_UNORD_Q);
        const __m512i quiet = _mm512_or_si512(high, _mm512_set1_epi32(0x40));
        const __m512i r = _mm512_mask_blend_epi32(nan, rounded, quiet);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_maskz_cvtepi32_epi16(0xFFFF, r));
    }
};

template <>
struct Simd<double> {
    using vec = x86::F64x8;
    static constexpr int width = 8;
    SYNCBLOB_SIMD_FN static vec load(const double* p) { return {_mm512_loadu_pd(p)}; }
    SYNCBLOB_SIMD_FN static void store(double* p, vec v) { _mm512_storeu_pd(p, v.v); }
    SYNCBLOB_SIMD_FN static vec zero() { return {_mm512_setzero_pd()}; }
    SYNCBLOB_SIMD_FN static vec set1(double a) { return {_mm512_set1_pd(a)}; }
    SYNCBLOB_SIMD_FN static vec add(vec a, vec b) { return {_mm512_add_pd(a.v, b.v)}; }
    SYNCBLOB_SIMD_FN static vec sub(vec a, vec b) { return {_mm512_sub_pd(a.v, b.v)}; }
    SYNCBLOB_SIMD_FN static vec mul(vec a, vec b) { return {_mm512_mul_pd(a.v, b.v)}; }
    SYNCBLOB_SIMD_FN static vec madd(vec a, vec b, vec c) { return {_mm512_fmadd_pd(a.v, b.v, c.v)}; }
    SYNCBLOB_SIMD_FN static vec abs(vec a) { return {_mm512_abs_pd(a.v)}; }
    // Lane i plus lane i + 4, then i + 2, i + 1.
    SYNCBLOB_SIMD_FN static double hsum(vec a) {
        return x86::hsum(x86::F64x4{
            _mm256_add_pd(_mm512_maskz_extractf64x4_pd(0xF, a.v, 0), _mm512_maskz_extractf64x4_pd(0xF, a.v, 1))});
    }
};

SYNCBLOB_SIMD_KERNELS

#undef SYNCBLOB_SIMD_FN
#undef SYNCBLOB_SIMD_ENTRY
}  // namespace avx512

#undef SYNCBLOB_SIMD_KERNELS
#undef SYNCBLOB_KERNEL_PLACEMENT
#undef SYNCBLOB_KERNEL_TUNE

#else  // no x86 paths: the portable kernels stand in (never chosen: the checks say no)

namespace avx2 = portable;
namespace avx512 = portable;

#endif

}  // namespace math::detail

SYNCBLOB_END_NAMESPACE

#undef SYNCBLOB_X86_PATHS
