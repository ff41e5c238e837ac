// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// All-reduce and broadcast of a `ParameterArena` on CUDA devices through NCCL (target
/// `syncblob::nccl`; NCCL comes with the CUDA toolkit). The same calls as `syncblob/comm/mpi.hpp`,
/// over an `ncclComm_t`, queued on the arena's stream: the diff is reduced in device memory (slices
/// fresh on the host only are copied H→D first, counted in their blobs' stats), averaged by NCCL
/// itself (`ncclAvg`), and each blob's diff ends at_device. The calls return once the work is
/// queued; every later access through syncblob is ordered after it on the stream.
///
/// As with NCCL itself, one thread (or process) drives each communicator: several communicators
/// driven from one thread need NCCL's group calls around them and are not supported here.
///
/// Waits (the agreement, `BucketedAllreduce::wait`) take an optional timeout (`Options`): the host
/// polls the stream and `ncclCommGetAsyncError` until the work is done or the time has passed, then
/// throws TimeoutError. The kernels of a collective that a rank never joined keep waiting on the
/// GPU: NCCL's only way to end them is `ncclCommAbort`, which the owner of the communicator calls
/// (syncblob never aborts a communicator it was lent). See docs/scaling-out.md.

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "../arena/parameter_arena.hpp"
#include "../core/error.hpp"
#include "../core/half.hpp"
#include "../core/sync_audit.hpp"
#include "../cuda/async_pool.hpp"
#include "../cuda/device.hpp"
#include "detail/agreement.hpp"
#include "detail/bucket_plan.hpp"
#include "error.hpp"
#include "reduce.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace nccl {

/// Element types NCCL reduces natively.
template <class T>
concept NcclElement =
    std::same_as<T, float> || std::same_as<T, double> || std::same_as<T, half> || std::same_as<T, bfloat16> ||
    std::same_as<T, std::int8_t> || std::same_as<T, std::uint8_t> || std::same_as<T, std::int32_t> ||
    std::same_as<T, std::uint32_t> || std::same_as<T, std::int64_t> || std::same_as<T, std::uint64_t>;

/// An arena NCCL can reach: its device memory is CUDA's (`cuda::Allocator`, or the stream-ordered
/// pool of `cuda::AsyncAllocator`).
template <class A>
concept NcclAllocator = SyncedAllocator<A> &&(std::same_as<typename A::device_backend, cuda::Device> ||
                                              std::same_as<typename A::device_backend, cuda::AsyncPool>);

/// Choices for a call.
struct Options {
    /// How long the host waits for the other ranks (in the agreement, in `BucketedAllreduce::wait`)
    /// before it throws TimeoutError; unset, as long as the work takes. Ranks may differ. A timeout
    /// that is not positive is an OptionError on every rank, before anything of the arena is sent.
    std::optional<std::chrono::milliseconds> timeout{};
};

namespace detail {

template <NcclElement T>
constexpr ncclDataType_t datatype() noexcept {
    if constexpr (std::same_as<T, float>) {
        return ncclFloat32;
    } else if constexpr (std::same_as<T, double>) {
        return ncclFloat64;
    } else if constexpr (std::same_as<T, half>) {
        return ncclFloat16;
    } else if constexpr (std::same_as<T, bfloat16>) {
        return ncclBfloat16;
    } else if constexpr (std::same_as<T, std::int8_t>) {
        return ncclInt8;
    } else if constexpr (std::same_as<T, std::uint8_t>) {
        return ncclUint8;
    } else if constexpr (std::same_as<T, std::int32_t>) {
        return ncclInt32;
    } else if constexpr (std::same_as<T, std::uint32_t>) {
        return ncclUint32;
    } else if constexpr (std::same_as<T, std::int64_t>) {
        return ncclInt64;
    } else {
        return ncclUint64;
    }
}

/// Throws CommError for a status other than ncclSuccess: "<op>: <call> failed: <ncclGetErrorString>
/// (<ncclGetLastError>)".
inline void check(ncclResult_t status, std::string_view op, const char* call, ncclComm_t comm = nullptr) {
    if (status == ncclSuccess) {
        return;
    }
    std::string message = std::string(op) + ": " + call + " failed: " + ncclGetErrorString(status);
    const char* last = ncclGetLastError(comm);
    if (last != nullptr && *last != '\0') {
        message += " (" + std::string(last) + ")";
    }
    throw CommError(message, call, static_cast<int>(status));
}

// Device scratch blocks of agreements given up on: NCCL kernels queued before them may still write
// them until the communicator is aborted, and cudaFree would wait for those kernels. Kept, never freed.
inline void keep_forever(void* block) {
    static std::mutex mutex;
    static std::vector<void*> blocks;
    std::lock_guard lock(mutex);
    blocks.push_back(block);
}

// Blocks until the work queued on `stream` so far is done; with a timeout, polls it and `comm`'s
// asynchronous error until then. \throws CommError for an asynchronous NCCL error, TimeoutError
// (naming `op` and `what` it waited for) when the time passes first.
inline void finish(cudaStream_t stream, ncclComm_t comm, std::optional<std::chrono::milliseconds> timeout,
                   std::string_view op, std::string_view what) {
    auto done = cuda::Device::record(stream);
    audit::note(audit::Wait::collective);  // the event's wait below is this one wait, not another
    if (!timeout) {
        SYNCBLOB_CUDA_CHECK(cudaEventSynchronize(done.get()), std::string(op) + ": " + std::string(what));
        return;
    }
    const auto deadline = std::chrono::steady_clock::now() + *timeout;
    while (!cuda::Device::query(done)) {
        ncclResult_t async = ncclSuccess;
        check(ncclCommGetAsyncError(comm, &async), op, "ncclCommGetAsyncError", comm);
        check(async, op, "an asynchronous NCCL operation", comm);
        if (std::chrono::steady_clock::now() >= deadline) {
            throw TimeoutError(std::string(op) + ": timed out after " + std::to_string(timeout->count()) +
                                   " ms waiting for " + std::string(what) +
                                   ": a rank has not joined; its kernels keep waiting on the GPU until the "
                                   "communicator is aborted (ncclCommAbort)",
                               std::string(op), "cudaEventQuery", *timeout);
        }
        std::this_thread::yield();
    }
}

inline std::pair<int, int> rank_and_size(ncclComm_t comm, std::string_view op) {
    if (comm == nullptr) {
        throw StateError(std::string(op) + ": the communicator is null");
    }
    int rank = 0;
    int size = 0;
    check(ncclCommUserRank(comm, &rank), op, "ncclCommUserRank", comm);
    check(ncclCommCount(comm, &size), op, "ncclCommCount", comm);
    return {rank, size};
}

/// Gathers every rank's descriptor through NCCL (on device memory, on `stream`) and settles them on
/// every rank alike (comm::detail::settle): a rank's wrong argument (a root outside the
/// communicator, a bucket limit of 0) is the same typed error on every rank, arenas or calls that
/// differ the same StateError; when some rank's own preparation failed (`local_failure`), that
/// rank rethrows it and the others throw a StateError naming it. Nothing of the arena has been
/// sent yet. \throws TimeoutError when `timeout` passes first (the scratch block is then kept).
template <class T, class A>
void agree(const ParameterArena<T, A>& arena, ncclComm_t comm, cudaStream_t stream, std::string_view op,
           comm::detail::CommOperation what, std::uint64_t argument, std::uint64_t first_bucket, std::uint64_t bucket,
           std::optional<std::chrono::milliseconds> timeout, const std::exception_ptr& local_failure = nullptr) {
    using Descriptor = comm::detail::ArenaDescriptor;
    const audit::Operation audited("nccl agreement");  // waits no caller asks for
    std::string problem;
    Descriptor mine = comm::detail::describe(arena, op, what, argument, problem, first_bucket, bucket);
    mine.failed = local_failure ? 1 : 0;
    comm::detail::note_timeout(mine, timeout);
    const auto [rank, size] = rank_and_size(comm, op);
    const std::size_t bytes = sizeof(Descriptor) * static_cast<std::size_t>(size);
    std::vector<Descriptor> all(static_cast<std::size_t>(size));
    void* scratch = cuda::Device::allocate(bytes + sizeof(Descriptor));
    try {
        auto* mine_on_device = static_cast<std::byte*>(scratch) + bytes;
        cuda::Device::copy(mine_on_device, &mine, sizeof(Descriptor), CopyKind::host_to_device, stream);
        check(ncclAllGather(mine_on_device, scratch, sizeof(Descriptor), ncclUint8, comm, stream), op, "ncclAllGather",
              comm);
        try {
            finish(stream, comm, comm::detail::usable_timeout(timeout) ? timeout : std::nullopt, op,
                   "every rank to join the agreement (ncclAllGather)");
        } catch (const TimeoutError&) {
            keep_forever(scratch);  // the gather may still write it
            throw;
        }
        cuda::Device::copy(all.data(), scratch, bytes, CopyKind::device_to_host, stream);
    } catch (const TimeoutError&) {
        throw;
    } catch (...) {
        cuda::Device::deallocate(scratch, bytes + sizeof(Descriptor));
        throw;
    }
    cuda::Device::deallocate(scratch, bytes + sizeof(Descriptor));
    comm::detail::settle(all, op, rank, problem, local_failure);
}

// The blobs in [first, end) fresh on the host only: they are copied H→D before NCCL runs.
template <class Buffers>
std::uint64_t host_only(const Buffers& buffers, std::size_t first, std::size_t end) {
    std::uint64_t n = 0;
    for (std::size_t i = first; i < end; ++i) {
        if (buffers[i]->size() != 0 && buffers[i]->head() == Head::at_host) {
            ++n;
        }
    }
    return n;
}

}  // namespace detail

/// All-reduces the diff of every blob of `arena` across `comm` in device memory, in place, on the
/// arena's stream: the sum, or the mean (`ncclAvg`). A collective call: every rank calls it with an
/// arena of the same layout and the same `reduce`, otherwise every rank throws the same StateError
/// before any data moves. \throws StateError; CommError when an NCCL call fails; DeviceError.
template <NcclElement T, NcclAllocator A>
CommStats allreduce_diff(ParameterArena<T, A>& arena, ncclComm_t comm, Reduce reduce, Options options = {}) {
    constexpr std::string_view op = "nccl::allreduce_diff";
    CommStats stats;
    stats.on_device = true;
    std::optional<ArenaBuffer<T, A>> view;  // outlives the preparation: `p` points into it
    T* p = nullptr;
    // The staging copies H->D come before the agreement, so a failure on one rank reaches every rank.
    const auto failure = comm::detail::prepare(arena, op, [&] {
        auto& diff = view.emplace(arena.flat_diff());
        stats.bytes = diff.bytes();
        stats.staged_blobs = detail::host_only(diff.buffers(), 0, diff.buffers().size());
        if (diff.elements() != 0) {
            p = diff.mutable_device_data();
        }
    });
    detail::agree(arena, comm, arena.stream(), op, comm::detail::CommOperation::allreduce,
                  static_cast<std::uint64_t>(reduce), 0, 0, options.timeout, failure);
    if (p != nullptr) {
        detail::check(ncclAllReduce(p, p, view->elements(), detail::datatype<T>(),
                                    reduce == Reduce::mean ? ncclAvg : ncclSum, comm, arena.stream()),
                      op, "ncclAllReduce", comm);
        stats.calls = 1;
    }
    return stats;
}

/// Copies the data of every blob of `root`'s arena into the arenas of the other ranks, in device
/// memory, on the arena's stream. \throws IndexError (on every rank, with the same message) when
/// some rank's `root` is not a rank of `comm`, checked in the agreement; as allreduce_diff.
template <NcclElement T, NcclAllocator A>
CommStats broadcast_data(ParameterArena<T, A>& arena, ncclComm_t comm, int root, Options options = {}) {
    constexpr std::string_view op = "nccl::broadcast_data";
    // Plain variables, not a structured binding: the lambda below captures `rank` (clang 14 cannot).
    const auto rank_size = detail::rank_and_size(comm, op);
    const int rank = rank_size.first;
    // `root` is checked in the agreement, on every rank: a rank that threw here, before it, would
    // leave the others waiting there. Until then a root outside the communicator is no rank's.
    CommStats stats;
    stats.on_device = true;
    std::optional<ArenaBuffer<T, A>> view;  // outlives the preparation: `p` points into it
    T* p = nullptr;
    // The root's staging copies come before the agreement; the other ranks mark their data as about
    // to be overwritten only after it, so a refused call leaves it as it was.
    const auto failure = comm::detail::prepare(arena, op, [&] {
        auto& data = view.emplace(arena.flat_data());
        stats.bytes = data.bytes();
        if (rank == root && data.elements() != 0) {
            stats.staged_blobs = detail::host_only(data.buffers(), 0, data.buffers().size());
            p = const_cast<T*>(data.device_data());
        }
    });
    detail::agree(arena, comm, arena.stream(), op, comm::detail::CommOperation::broadcast,
                  static_cast<std::uint64_t>(std::int64_t{root}), 0, 0, options.timeout, failure);
    if (view->elements() != 0) {
        if (rank != root) {
            p = view->mutable_device_data_for_overwrite();
        }
        detail::check(ncclBroadcast(p, p, view->elements(), detail::datatype<T>(), root, comm, arena.stream()), op,
                      "ncclBroadcast", comm);
        stats.calls = 1;
    }
    return stats;
}

/// The bucketed form: one `ncclAllReduce` per bucket (in reverse order of addition), each queued as
/// soon as all its blobs are `ready`, in bucket order. NCCL's calls are asynchronous already;
/// `wait()` blocks the host until the stream has run them (within `Options::timeout`, when set)
/// and reports NCCL's asynchronous errors. Destroying the handle queues nothing more; what it
/// queued stays queued on the arena's stream, and a bucket some rank never queued keeps that
/// stream waiting until the communicator is aborted (`ncclCommAbort`).
template <NcclElement T, NcclAllocator A>
class BucketedAllreduce {
public:
    /// Plans the buckets and checks, collectively, that every rank plans the same; queues nothing.
    BucketedAllreduce(ParameterArena<T, A>& arena, ncclComm_t comm, Reduce reduce, std::size_t first_bytes,
                      std::size_t bucket_bytes, Options options = {})
        : arena_(&arena), comm_(comm), reduce_(reduce), options_(options) {
        detail::agree(arena, comm, arena.stream(), op, comm::detail::CommOperation::bucketed_allreduce,
                      static_cast<std::uint64_t>(reduce), first_bytes, bucket_bytes, options.timeout);
        plan_ = comm::detail::BucketPlan(arena.buckets(first_bytes, bucket_bytes), arena.size());
        stats_.bytes = arena.bytes();
        stats_.on_device = true;
    }

    [[nodiscard]] const std::vector<Bucket>& buckets() const noexcept { return plan_.buckets(); }
    [[nodiscard]] std::size_t started() const noexcept { return plan_.started(); }

    /// Begins the next step on the same buckets, without agreeing again (see
    /// `mpi::BucketedAllreduce::restart`): every bucket of the last step must have been queued
    /// (`wait()` or `start_all()` does that). \throws StateError when a bucket of the last step was
    /// not queued, or when a blob of the arena was replaced or reshaped since.
    void restart() {
        if (plan_.started() != plan_.buckets().size()) {
            throw StateError(std::string(op) +
                             "::restart: " + std::to_string(plan_.buckets().size() - plan_.started()) +
                             " buckets of the last step were not queued (call wait() or start_all() first)");
        }
        arena_->check("nccl::iallreduce_diff::restart");
        plan_.reset();
        stats_.calls = 0;
        stats_.staged_blobs = 0;
    }

    /// Blob `i`'s diff is complete (its kernels are queued on the arena's stream).
    void ready(std::size_t i) {
        plan_.ready(i, "nccl::iallreduce_diff::ready");
        start_complete();
    }
    void start_all() {
        plan_.all_ready();
        start_complete();
    }

    /// Queues what is left, then blocks until the stream has run every bucket.
    /// \throws CommError for an asynchronous NCCL error; DeviceError; TimeoutError when
    /// `Options::timeout` passes (from this call) first.
    CommStats wait() {
        const audit::Operation audited("nccl::BucketedAllreduce::wait", audit::Waits{audit::Wait::collective});
        start_all();
        detail::finish(arena_->stream(), comm_, options_.timeout, op, "the buckets' ncclAllReduce");
        ncclResult_t async = ncclSuccess;
        detail::check(ncclCommGetAsyncError(comm_, &async), op, "ncclCommGetAsyncError", comm_);
        detail::check(async, op, "ncclAllReduce (asynchronous)", comm_);
        return stats_;
    }

private:
    static constexpr std::string_view op = "nccl::iallreduce_diff";

    void start_complete() {
        auto diff = arena_->flat_diff();
        plan_.start_ready([&](std::size_t index) {
            const Bucket& b = plan_.buckets()[index];
            if (b.bytes == 0) {
                return;
            }
            stats_.staged_blobs += detail::host_only(diff.buffers(), b.first, b.end);
            T* p = diff.mutable_device_data(b.first, b.end) + b.offset / sizeof(T);
            detail::check(ncclAllReduce(p, p, b.bytes / sizeof(T), detail::datatype<T>(),
                                        reduce_ == Reduce::mean ? ncclAvg : ncclSum, comm_, arena_->stream()),
                          op, "ncclAllReduce", comm_);
            ++stats_.calls;
        });
    }

    ParameterArena<T, A>* arena_;
    ncclComm_t comm_;
    Reduce reduce_;
    Options options_;
    comm::detail::BucketPlan plan_;
    CommStats stats_{};
};

/// Queues a bucketed all-reduce of every bucket at once (buckets of at most `bucket_bytes`).
template <NcclElement T, NcclAllocator A>
BucketedAllreduce<T, A> iallreduce_diff(ParameterArena<T, A>& arena, ncclComm_t comm, Reduce reduce,
                                        std::size_t bucket_bytes, Options options = {}) {
    BucketedAllreduce<T, A> handle(arena, comm, reduce, bucket_bytes, bucket_bytes, options);
    handle.start_all();
    return handle;
}

}  // namespace nccl

SYNCBLOB_END_NAMESPACE
