// syncblob: host/device mirrored tensor storage.
// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Version, namespace and portability macros shared by every syncblob header.
///
/// Configuration macros a consumer may define before including syncblob (each keeps its default
/// otherwise): `SYNCBLOB_HOST_DEVICE`, `SYNCBLOB_NOINLINE`, `SYNCBLOB_ALWAYS_INLINE` (for example
/// `inline` alone, to profile without forced inlining, or the spellings of a compiler not listed
/// here). The version macros, the namespace macros and `SYNCBLOB_NVCC` (what the compiler is) are
/// not settings. Macros a header uses internally are undefined at its end.

#define SYNCBLOB_VERSION_MAJOR 0
#define SYNCBLOB_VERSION_MINOR 2
#define SYNCBLOB_VERSION_PATCH 0

/// Everything lives in `syncblob::v0`: two versions in one program fail to link
/// instead of silently mixing layouts.
#define SYNCBLOB_BEGIN_NAMESPACE \
    namespace syncblob {         \
    inline namespace v0 {
#define SYNCBLOB_END_NAMESPACE \
    }                          \
    }

/// Marks code callable from kernels: `__host__ __device__` under a CUDA
/// compiler, nothing otherwise.
#ifndef SYNCBLOB_HOST_DEVICE
#if defined(__CUDACC__) || defined(__HIPCC__)
#define SYNCBLOB_HOST_DEVICE __host__ __device__
#else
#define SYNCBLOB_HOST_DEVICE
#endif
#endif

/// Keeps a rarely taken or long path (an accessor's locking and copying, math on many blocks) out
/// of the inlined fast path around it, so the fast path stays a few instructions without a stack
/// frame.
#ifndef SYNCBLOB_NOINLINE
#if defined(__GNUC__) || defined(__clang__)
#define SYNCBLOB_NOINLINE __attribute__((noinline))
#elif defined(_MSC_VER)
#define SYNCBLOB_NOINLINE __declspec(noinline)
#else
#define SYNCBLOB_NOINLINE
#endif
#endif

/// Inlines a fast path of a few instructions (an accessor's state check and pointer, the kernel
/// count) into every caller whatever the compiler's size heuristics, which kept the accessors out of
/// line for the sake of the slow call they end in; the math's small calls then run without a call,
/// a stack frame or spilled arguments.
#ifndef SYNCBLOB_ALWAYS_INLINE
#if defined(__GNUC__) || defined(__clang__)
#define SYNCBLOB_ALWAYS_INLINE __attribute__((always_inline)) inline
#elif defined(_MSC_VER)
#define SYNCBLOB_ALWAYS_INLINE __forceinline
#else
#define SYNCBLOB_ALWAYS_INLINE inline
#endif
#endif

#if defined(__CUDACC__)
#define SYNCBLOB_NVCC 1
#else
#define SYNCBLOB_NVCC 0
#endif

#if __cplusplus < 202002L && !(defined(_MSVC_LANG) && _MSVC_LANG >= 202002L)
#error "syncblob needs C++20 (with nvcc, pass -std=c++20 explicitly: CMake 3.25 does not)"
#endif
