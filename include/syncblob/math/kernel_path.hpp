// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Which instruction set the host kernels run on: the kernel paths (portable, AVX2, AVX-512), the
/// switch that forces one, and the rule that picks one per call. A header-only library cannot count
/// on the consumer's `-march`: the AVX2 and AVX-512 paths are compiled through `[[gnu::target]]`
/// attributes and chosen at run time with `__builtin_cpu_supports` (math/detail/x86_kernels.hpp), so
/// a default Release build (`-O3`, no `-march`) still runs at the width of the machine.
/// `set_kernel_path` forces one path (tests cover each).

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "../core/config.hpp"
#include "../core/error.hpp"
#include "detail/x86_kernels.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace math {

/// Which implementation the host kernels use.
enum class KernelPath : std::uint8_t {
    automatic,  ///< the widest this processor supports (the default; see `wide_stream_bytes`)
    portable,   ///< Eigen maps, vectorised as the consumer's flags allow
    avx2,       ///< AVX2 + FMA (+ F16C for half), chosen at run time
    avx512,     ///< AVX-512F, chosen at run time
};

/// "automatic", "portable", "avx2" or "avx512".
[[nodiscard]] constexpr std::string_view kernel_path_name(KernelPath p) noexcept {
    switch (p) {
        case KernelPath::automatic:
            return "automatic";
        case KernelPath::portable:
            return "portable";
        case KernelPath::avx2:
            return "avx2";
        case KernelPath::avx512:
            return "avx512";
    }
    return "?";
}

/// True when this build and this processor can run `p` (automatic and portable always can).
[[nodiscard]] inline bool kernel_path_supported(KernelPath p) noexcept {
    switch (p) {
        case KernelPath::automatic:
        case KernelPath::portable:
            return true;
        case KernelPath::avx2:
            return detail::x86::cpu_has_avx2();
        case KernelPath::avx512:
            return detail::x86::cpu_has_avx512();
    }
    return false;
}

/// The concrete paths this build and processor support, narrowest first (portable always).
[[nodiscard]] inline std::vector<KernelPath> supported_kernel_paths() {
    std::vector<KernelPath> paths{KernelPath::portable};
    for (const auto p : {KernelPath::avx2, KernelPath::avx512}) {
        if (kernel_path_supported(p)) {
            paths.push_back(p);
        }
    }
    return paths;
}

namespace detail {
inline std::atomic<KernelPath>& requested_path() noexcept {
    static std::atomic<KernelPath> path{KernelPath::automatic};
    return path;
}
inline KernelPath best_path() noexcept {
    static const KernelPath best = kernel_path_supported(KernelPath::avx512) ? KernelPath::avx512
                                   : kernel_path_supported(KernelPath::avx2) ? KernelPath::avx2
                                                                             : KernelPath::portable;
    return best;
}
inline KernelPath resolve(KernelPath p) noexcept {
    return p == KernelPath::automatic ? best_path() : p;
}
// The path the kernels run on, `automatic` resolved: what a kernel call reads (one relaxed load).
// It holds `automatic` only until the first kernel call or set_kernel_path resolves it.
inline std::atomic<KernelPath>& resolved_path() noexcept {
    static std::atomic<KernelPath> path{KernelPath::automatic};
    return path;
}
inline void request_path(KernelPath p) noexcept {
    requested_path().store(p, std::memory_order_relaxed);
    resolved_path().store(resolve(p), std::memory_order_relaxed);
}
// First kernel call: resolves the requested path, unless a concurrent set_kernel_path already did.
SYNCBLOB_NOINLINE inline KernelPath resolve_path() noexcept {
    KernelPath unresolved = KernelPath::automatic;
    resolved_path().compare_exchange_strong(unresolved, resolve(requested_path().load(std::memory_order_relaxed)),
                                            std::memory_order_relaxed);
    return resolved_path().load(std::memory_order_relaxed);
}
}  // namespace detail

/// Forces the host kernels onto one path (process-wide), or back to `automatic`.
/// \throws StateError when this build or processor cannot run `p`; the path is then unchanged.
inline void set_kernel_path(KernelPath p) {
    if (!kernel_path_supported(p)) {
        throw StateError("math::set_kernel_path: path " + std::string(kernel_path_name(p)) +
                         " is not supported by this build or processor (supported: portable" +
                         (kernel_path_supported(KernelPath::avx2) ? ", avx2" : "") +
                         (kernel_path_supported(KernelPath::avx512) ? ", avx512" : "") + ")");
    }
    detail::request_path(p);
}

/// The path set with `set_kernel_path` (`automatic` unless forced).
[[nodiscard]] inline KernelPath kernel_path() noexcept {
    return detail::requested_path().load(std::memory_order_relaxed);
}

/// The concrete path the kernels run on now (`automatic` resolved).
[[nodiscard]] inline KernelPath active_kernel_path() noexcept {
    const KernelPath p = detail::resolved_path().load(std::memory_order_relaxed);
    return p != KernelPath::automatic ? p : detail::resolve_path();
}

/// Restores the previous kernel path when it goes out of scope.
class ScopedKernelPath {
public:
    /// \throws StateError when `p` is not supported.
    explicit ScopedKernelPath(KernelPath p) : previous_(kernel_path()) { set_kernel_path(p); }
    ~ScopedKernelPath() { detail::request_path(previous_); }
    ScopedKernelPath(const ScopedKernelPath&) = delete;
    ScopedKernelPath& operator=(const ScopedKernelPath&) = delete;

private:
    KernelPath previous_;
};

/// How an operation uses memory, which decides from what size a second thread pays for itself.
enum class SplitKind : std::uint8_t {
    reduction,  ///< reads and sums: asum, sumsq, dot
    update,     ///< reads two arrays and writes one of them: update (y -= x)
    scale,      ///< reads and writes one array: scale
};

/// Bytes (all arrays of a call together) from which a reduction or an update on the automatic path
/// runs the AVX2 kernels instead of the AVX-512 ones, on a processor that executes 512-bit
/// operations in two 256-bit halves (AMD Zen 4). Measured there on one thread, the 256-bit kernels
/// of `asum`, `sumsq`, `dot` and `update` ran at 0.99-1.22 times the speed of the 512-bit ones
/// (median 1.11) from 32 MiB of data, 0.96-1.11 (median 1.06) at 16 MiB and 0.93-1.11 (median 0.99)
/// below; `scale`'s at 0.94-1.04 at every size, so it stays on 512 bits (docs/benchmarks.md,
/// "Vector width for long streams"). A path forced with `set_kernel_path` is used at every size.
inline constexpr std::int64_t wide_stream_bytes = std::int64_t{16} << 20;

namespace detail {
// kernel_path_for with the processor's answers as arguments (tested on their own).
constexpr KernelPath path_for(KernelPath active, KernelPath requested, SplitKind kind, std::int64_t bytes,
                              bool halves) noexcept {
    return active == KernelPath::avx512 && requested == KernelPath::automatic && halves && kind != SplitKind::scale &&
                   bytes >= wide_stream_bytes
               ? KernelPath::avx2
               : active;
}
}  // namespace detail

/// The concrete path an operation of `kind` that touches `bytes` bytes runs on:
/// `active_kernel_path()`, except that on the automatic path a long reduction or update on a
/// processor that runs 512-bit operations in halves takes AVX2 (`wide_stream_bytes`).
[[nodiscard]] inline KernelPath kernel_path_for(SplitKind kind, std::int64_t bytes) noexcept {
    const KernelPath active = active_kernel_path();
    if (bytes < wide_stream_bytes || active != KernelPath::avx512) {  // most calls: nothing more to ask
        return active;
    }
    return detail::path_for(active, kernel_path(), kind, bytes,
                            detail::x86::cpu_runs_512_bits_in_halves() && kernel_path_supported(KernelPath::avx2));
}

}  // namespace math

SYNCBLOB_END_NAMESPACE
