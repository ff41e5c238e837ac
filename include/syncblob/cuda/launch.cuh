// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Internal, shared beyond its folder: used by the checkpoint loader's CUDA conversion (checkpoint/cuda.cuh),
/// so it sits outside detail/; its names stay in a detail namespace and are no user API.
///
/// The custom kernels and their launchers: a grid-stride element-wise kernel (a body that can load
/// ahead takes k elements a thread at once, 16 bytes of each array) and a two-stage
/// deterministic reduction (fixed grid per size, block tree in shared memory, block partials added
/// on the host in order). The bodies are the functors of functors.hpp. Needs nvcc.

#if !defined(__CUDACC__)
#error "syncblob/cuda/launch.cuh holds CUDA kernels and needs nvcc: include syncblob/cuda/kernels.cuh from a .cu file"
#else  // the rest of the file: only nvcc sees it, so the error above is the only one

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <new>
#include <string>
#include <string_view>
#include <utility>

#include "../core/sync_audit.hpp"
#include "detail/functors.hpp"
#include "error.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace cuda::detail {

template <class Op>
__global__ void for_each_kernel(Op op, std::int64_t n) {
    const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * block_threads;
    std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * block_threads + threadIdx.x;
    if constexpr (LoadsAhead<Op>) {  // k elements a thread at once, each load coalesced across the warp
        constexpr int k = Op::loads_ahead;
        for (; i + (k - 1) * stride < n; i += k * stride) {
            op.template many<k>(i, stride);
        }
    }
    for (; i < n; i += stride) {
        op(i);
    }
}

template <class Term>
__global__ void reduce_kernel(Term term, std::int64_t n, term_value_t<Term>* partials) {
    __shared__ term_value_t<Term> cache[block_threads];
    const int t = static_cast<int>(threadIdx.x);
    const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * block_threads;
    cache[t] = strided_sum(term, n, static_cast<std::int64_t>(blockIdx.x) * block_threads + t, stride);
    __syncthreads();
    for (int s = block_threads / 2; s > 0; s >>= 1) {
        if (t < s) {
            cache[t] += cache[t + s];
        }
        __syncthreads();
    }
    if (t == 0) {
        partials[blockIdx.x] = cache[0];
    }
}

/// "<operation><dtype> on <n> elements" (or "<from to to>"), built only when a call fails.
[[nodiscard]] inline std::string launch_context(std::string_view operation, std::string_view dtype, std::int64_t n,
                                                std::string_view to_dtype = {}) {
    std::string text = std::string(operation) + "<" + std::string(dtype);
    if (!to_dtype.empty()) {
        text += " to " + std::string(to_dtype);
    }
    return text + "> on " + std::to_string(n) + " elements";
}

/// Forgets an error left by an earlier call that was not checked (a release, say), so that the
/// `cudaGetLastError` after a launch reports the launch's own error and not a stale one.
inline void clear_stale_error() noexcept {
    (void)cudaGetLastError();
}

/// Runs `op(i)` for i in [0, n) on `stream` (issued; not waited for).
template <class Op>
void launch_for_each(const Op& op, std::int64_t n, cudaStream_t stream, std::string_view operation,
                     std::string_view dtype, std::string_view to_dtype = {}) {
    if (n <= 0) {
        return;
    }
    std::int64_t per_thread = 1;  // a grid small enough that each thread gets its k elements at once
    if constexpr (LoadsAhead<Op>) {
        per_thread = Op::loads_ahead;
    }
    const auto blocks = static_cast<unsigned int>(blocks_for((n + per_thread - 1) / per_thread, max_for_each_blocks));
    clear_stale_error();
    for_each_kernel<<<blocks, block_threads, 0, stream>>>(op, n);
    SYNCBLOB_CUDA_CHECK(cudaGetLastError(), launch_context(operation, dtype, n, to_dtype));
}

/// The bytes a reduction's block partials take at most (every accumulator is at most a double).
inline constexpr std::size_t reduction_scratch_bytes = static_cast<std::size_t>(max_reduce_blocks) * sizeof(double);

/// A reduction's scratch, reused from call to call: the block partials on the device, a pinned
/// host copy of them (pageable when page-locked memory cannot be had), and the event the host waits
/// on for that copy. Allocating them per call cost a device allocation and a pageable (so
/// synchronous, staged) copy every time.
class ReductionScratch {
public:
    ReductionScratch() {
        audit::note(audit::Wait::system_allocation);  // once per thread and device: a warm-up cost
        SYNCBLOB_CUDA_CHECK(cudaMalloc(&device_, reduction_scratch_bytes), "cuda reduction scratch");
        if (cudaMallocHost(&host_, reduction_scratch_bytes) == cudaSuccess) {
            pinned_ = true;
        } else {
            clear_stale_error();
            host_ = ::operator new(reduction_scratch_bytes);
        }
        SYNCBLOB_CUDA_CHECK(cudaEventCreateWithFlags(&copied_, cudaEventDisableTiming), "cuda reduction scratch");
    }
    ReductionScratch(ReductionScratch&& other) noexcept
        : device_(std::exchange(other.device_, nullptr)),
          host_(std::exchange(other.host_, nullptr)),
          pinned_(other.pinned_),
          copied_(std::exchange(other.copied_, nullptr)) {}
    ReductionScratch(const ReductionScratch&) = delete;
    ReductionScratch& operator=(const ReductionScratch&) = delete;
    ReductionScratch& operator=(ReductionScratch&&) = delete;
    ~ReductionScratch() {
        if (copied_ != nullptr) {
            (void)cudaEventDestroy(copied_);
        }
        if (device_ != nullptr) {
            audit::note_nothrow(audit::Wait::blocking_free);
            (void)cudaFree(device_);
        }
        if (host_ != nullptr) {
            if (pinned_) {
                (void)cudaFreeHost(host_);
            } else {
                ::operator delete(host_);
            }
        }
        clear_stale_error();
    }

    /// The calling thread's scratch on `device`. One per thread and device: a reduction waits for
    /// its partials' copy before it returns, so the next reduction of the thread finds the scratch free,
    /// and no other thread uses it.
    [[nodiscard]] static ReductionScratch& of_thread(int device) {
        thread_local std::map<int, ReductionScratch> scratch;
        auto it = scratch.find(device);
        if (it == scratch.end()) {
            it = scratch.emplace(device, ReductionScratch()).first;
        }
        return it->second;
    }

    template <class V>
    [[nodiscard]] V* device() const noexcept {
        static_assert(sizeof(V) <= sizeof(double), "reduction partials are at most a double");
        return static_cast<V*>(device_);
    }
    template <class V>
    [[nodiscard]] V* host() const noexcept {
        return static_cast<V*>(host_);
    }
    /// Recorded after the partials' copy to the host: what the host waits for.
    [[nodiscard]] cudaEvent_t copied() const noexcept { return copied_; }

private:
    void* device_ = nullptr;
    void* host_ = nullptr;
    bool pinned_ = false;
    cudaEvent_t copied_ = nullptr;
};

/// Σ term(i) for i in [0, n) on `stream`. The host waits for the partials' copy only (an event
/// recorded right after it), not for work other threads queue on the stream meanwhile.
/// Deterministic: the grid depends on n only.
template <class Term>
[[nodiscard]] term_value_t<Term> launch_reduce(const Term& term, std::int64_t n, cudaStream_t stream,
                                               std::string_view operation, std::string_view dtype) {
    using V = term_value_t<Term>;
    if (n <= 0) {
        return V{0};
    }
    const std::int64_t blocks = blocks_for(n, max_reduce_blocks);
    const auto count = static_cast<std::size_t>(blocks);
    int device = 0;
    SYNCBLOB_CUDA_CHECK(cudaGetDevice(&device), launch_context(operation, dtype, n));
    const ReductionScratch& scratch = ReductionScratch::of_thread(device);
    clear_stale_error();
    reduce_kernel<<<static_cast<unsigned int>(blocks), block_threads, 0, stream>>>(term, n, scratch.device<V>());
    SYNCBLOB_CUDA_CHECK(cudaGetLastError(), launch_context(operation, dtype, n));
    SYNCBLOB_CUDA_CHECK(
        cudaMemcpyAsync(scratch.host<V>(), scratch.device<V>(), count * sizeof(V), cudaMemcpyDeviceToHost, stream),
        launch_context(operation, dtype, n));
    SYNCBLOB_CUDA_CHECK(cudaEventRecord(scratch.copied(), stream), launch_context(operation, dtype, n));
    audit::note(audit::Wait::host_result);
    SYNCBLOB_CUDA_CHECK(cudaEventSynchronize(scratch.copied()), launch_context(operation, dtype, n));
    return sum_partials(scratch.host<V>(), blocks);
}

// Adds the `blocks` partials into `*out` in block order, as the host does (one thread: at most
// max_reduce_blocks values), converting to `R`.
template <class V, class R>
__global__ void sum_partials_kernel(const V* partials, std::int64_t blocks, R* out) {
    *out = static_cast<R>(sum_partials(partials, blocks));
}

/// Σ term(i) for i in [0, n) on `stream`, left in device memory at `out`: the partials live in a
/// stream-ordered block (`cudaMallocAsync`, freed after the second kernel), so nothing waits.
template <class Term, class R>
void launch_reduce_into(const Term& term, std::int64_t n, cudaStream_t stream, R* out, std::string_view operation,
                        std::string_view dtype) {
    using V = term_value_t<Term>;
    if (n <= 0) {
        SYNCBLOB_CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(R), stream), launch_context(operation, dtype, n));
        return;
    }
    const std::int64_t blocks = blocks_for(n, max_reduce_blocks);
    void* partials = nullptr;
    SYNCBLOB_CUDA_CHECK(cudaMallocAsync(&partials, static_cast<std::size_t>(blocks) * sizeof(V), stream),
                        launch_context(operation, dtype, n));
    clear_stale_error();
    reduce_kernel<<<static_cast<unsigned int>(blocks), block_threads, 0, stream>>>(term, n, static_cast<V*>(partials));
    sum_partials_kernel<<<1, 1, 0, stream>>>(static_cast<const V*>(partials), blocks, out);
    const cudaError_t launched = cudaGetLastError();
    (void)cudaFreeAsync(partials, stream);
    SYNCBLOB_CUDA_CHECK(launched, launch_context(operation, dtype, n));
}

}  // namespace cuda::detail

SYNCBLOB_END_NAMESPACE

#endif  // defined(__CUDACC__)
