// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// All-reduce and broadcast of a `ParameterArena` through MPI (target `syncblob::mpi`): the diff of
/// every blob in one call per run of the arena (`MPI_IN_PLACE`), blocking or bucketed and
/// non-blocking. MPI's own collectives do the work; syncblob adds the flat layout, averaging,
/// staging of device memory and the checks.
///
/// Where the bytes are: host-fresh diffs are reduced in the arena's host memory directly. Diffs
/// fresh on the device only are staged through the arena's host memory (pinned for
/// `cuda::Allocator`): copied D→H, reduced, copied back H→D, so they end synced; each copy is
/// counted in its blob's stats. With a device-aware MPI (detected, or set through `Options`) a sum
/// over diffs all fresh on the device runs on device memory instead, with no copy. MPI has no
/// averaging operation, and averaging needs a kernel, so `Reduce::mean` is always reduced and
/// divided on the host; to keep it on the device, use NCCL (`ncclAvg`) or sum and fold 1/n into
/// the learning rate.

#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../arena.hpp"
#include "../core/error.hpp"
#include "detail/bucket_plan.hpp"
#include "detail/mpi_agree.hpp"
#include "detail/mpi_call.hpp"
#include "detail/mpi_wait.hpp"
#include "error.hpp"
#include "reduce.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace mpi {

/// Choices for a call.
struct Options {
    /// Let MPI read and write device memory directly (a CUDA-aware MPI). Unset: detected once, see
    /// device_aware(). Set it to true only if the MPI library really is device-aware.
    std::optional<bool> device_aware{};
    /// `allreduce_diff` reduces the arena in consecutive pieces of this many bytes (whole elements;
    /// 0: one call per `INT_MAX` elements), each averaged right after its reduction while it is
    /// still in cache; the bucketed form starts one request per piece of each bucket. Pieces of a few MiB also keep
    /// Open MPI's shared-memory transport in cache: on 2 ranks here a 256 MiB arena reduces 2.5–3× faster in 4 MiB
    /// pieces than in one call (see docs/scaling-out.md). Every rank must pass the same value (checked with the arena).
    std::size_t piece_bytes = std::size_t{4} << 20;
    /// How long a call waits for the other ranks before it gives up with TimeoutError: unset, as long
    /// as MPI's blocking calls do. Set, the agreement and the collectives are MPI's non-blocking
    /// ones, tested in a loop until they complete or the time has passed (from the start of the
    /// call; for a BucketedAllreduce, of its construction, of `wait()` and of its destruction).
    /// What a timeout leaves behind: docs/scaling-out.md. Ranks may wait for different times, but
    /// `allreduce_diff` and `broadcast_data` need it set on every rank or on none (a blocking and a
    /// non-blocking collective never match): otherwise every rank throws the same StateError.
    std::optional<std::chrono::milliseconds> timeout{};
};

/// Operations of this process given up on at a timeout that MPI has not completed yet (it
/// completes them if the missing ranks join later; until then syncblob keeps the memory they use).
/// Tests each of them first, letting MPI progress.
inline std::size_t abandoned_operations() noexcept {
    return detail::Graveyard::reap();
}

/// Whether the MPI library is taken as device-aware when `Options` does not say: the environment
/// variable `SYNCBLOB_MPI_DEVICE_AWARE` (`1` or `0`) if set, else Open MPI's
/// `MPIX_Query_cuda_support()`, else false. Decided at the first call (after MPI_Init).
inline bool device_aware() {
    static const bool aware = detail::detect_device_aware();
    return aware;
}

namespace detail {

inline bool use_device(const Options& options) {
    return options.device_aware.value_or(mpi::device_aware());
}

// Waits until the work queued on `stream` is done: MPI reads and writes device memory outside it.
template <class Device>
void wait_stream(typename Device::stream_type stream) {
    auto done = Device::record(stream);
    Device::wait(done);
}

// The blobs in [first, end) whose `part` is fresh on the device only: their result goes back there.
template <class Buffers>
std::vector<std::size_t> device_only(const Buffers& buffers, std::size_t first, std::size_t end) {
    std::vector<std::size_t> out;
    for (std::size_t i = first; i < end; ++i) {
        if (buffers[i]->size() != 0 && buffers[i]->head() == Head::at_device) {
            out.push_back(i);
        }
    }
    return out;
}

template <class Buffers>
void push_back_to_device(const Buffers& buffers, const std::vector<std::size_t>& blobs) {
    for (const std::size_t i : blobs) {
        buffers[i]->push_to_device_async();
    }
}

// x / ranks for each element. For a power of two, multiplying by the reciprocal gives the same
// bits and runs at memory speed; otherwise a division (a serial sum / n, bit for bit).
template <class T>
void divide(T* p, std::size_t n, int ranks) {
    if ((ranks & (ranks - 1)) == 0) {
        const T r = T(1) / static_cast<T>(ranks);
        for (std::size_t i = 0; i < n; ++i) {
            p[i] *= r;
        }
        return;
    }
    const T d = static_cast<T>(ranks);
    for (std::size_t i = 0; i < n; ++i) {
        p[i] /= d;
    }
}

inline int comm_size(MPI_Comm comm, std::string_view op) {
    int size = 0;
    check(MPI_Comm_size(comm, &size), op, "MPI_Comm_size");
    return size;
}

}  // namespace detail

/// All-reduces the diff of every blob of `arena` across `comm`, in place, on every rank: the sum,
/// or the mean (sum / ranks). A collective call: every rank of `comm` calls it with an arena of the
/// same layout and the same `reduce`, otherwise every rank throws the same StateError before any
/// data moves. Runs over `INT_MAX` elements are split into several calls.
/// \throws StateError (arenas or calls that differ, a `reduce` that is not a Reduce, an unsealed or
/// altered arena, MPI not initialized, a communicator given up on earlier); CommError when an MPI
/// call fails; DeviceError from staging copies; TimeoutError when `options.timeout` passes.
template <MpiElement T, SyncedAllocator A>
CommStats allreduce_diff(ParameterArena<T, A>& arena, MPI_Comm comm, Reduce reduce, Options options = {}) {
    using Device = typename A::device_backend;
    constexpr std::string_view op = "mpi::allreduce_diff";
    const detail::Deadline deadline(options.timeout);
    detail::ErrorsReturn errors(comm, op);
    const int ranks = detail::comm_size(comm, op);
    CommStats stats;
    std::size_t n = 0;
    T* p = nullptr;
    std::vector<std::size_t> staged;
    std::optional<ArenaBuffer<T, A>> view;  // outlives the preparation: `p` points into it
    // What this rank does on its own (the staging copy, waiting for its stream) comes before the
    // agreement, so that a failure here reaches every rank as an exception instead of leaving the
    // others waiting in the collective.
    const auto failure = syncblob::detail::prepare(arena, op, [&] {
        auto& diff = view.emplace(arena.diff_buffer());
        n = diff.elements();
        stats.bytes = diff.bytes();
        if constexpr (Device::has_device) {
            if (reduce == Reduce::sum && n != 0 && detail::use_device(options) && diff.fresh_on_device() &&
                !diff.fresh_on_host()) {
                p = diff.mutable_device_data();
                detail::wait_stream<Device>(arena.stream());
                stats.on_device = true;
                return;
            }
        }
        staged = detail::device_only(diff.buffers(), 0, diff.buffers().size());
        p = diff.mutable_host_data().data();
    });
    detail::agree(arena, comm, op,
                  {syncblob::detail::CommOperation::allreduce, static_cast<std::uint64_t>(reduce), 0, 0,
                   options.piece_bytes, deadline.bounded()},
                  deadline, failure);
    // Reduces in pieces; a mean scales each piece right after its reduction, while it is in cache.
    const bool average = reduce == Reduce::mean && !stats.on_device;
    const std::size_t piece = options.piece_bytes == 0 ? n : std::max<std::size_t>(options.piece_bytes / sizeof(T), 1);
    for (std::size_t first = 0; first < n; first += piece) {
        const std::size_t m = std::min(piece, n - first);
        stats.calls += detail::in_pieces(m, [&](std::size_t offset, int count) {
            T* q = p + first + offset;
            detail::collective(
                deadline, comm, op, "MPI_Allreduce", "MPI_Iallreduce", "the all-reduce",
                [&] { return MPI_Allreduce(MPI_IN_PLACE, q, count, detail::datatype<T>(), MPI_SUM, comm); },
                [&](MPI_Request* r) {
                    return MPI_Iallreduce(MPI_IN_PLACE, q, count, detail::datatype<T>(), MPI_SUM, comm, r);
                },
                [&] { return detail::hold(view->buffers()); });
        });
        if (average) {
            detail::divide(p + first, m, ranks);
        }
    }
    if (!staged.empty()) {
        detail::push_back_to_device(view->buffers(), staged);
    }
    stats.staged_blobs = staged.size();
    return stats;
}

/// Copies the data of every blob of `root`'s arena into the arenas of the other ranks of `comm`.
/// The root's data is read where it is fresh; on the other ranks each blob ends fresh on the side
/// it was fresh on before (device-fresh blobs receive on the host and are copied H→D, unless the
/// MPI is device-aware and every blob is fresh on the device). A collective call, checked as
/// allreduce_diff; `root` is checked there too, on every rank alike. \throws IndexError (on every
/// rank, with the same message) when some rank's `root` is not a rank of `comm`; as allreduce_diff.
template <MpiElement T, SyncedAllocator A>
CommStats broadcast_data(ParameterArena<T, A>& arena, MPI_Comm comm, int root, Options options = {}) {
    using Device = typename A::device_backend;
    constexpr std::string_view op = "mpi::broadcast_data";
    const detail::Deadline deadline(options.timeout);
    detail::ErrorsReturn errors(comm, op);
    int rank = 0;
    detail::check(MPI_Comm_rank(comm, &rank), op, "MPI_Comm_rank");
    // `root` is checked in the agreement, on every rank: a rank that threw here, before it, would
    // leave the others waiting there. Until then a root outside the communicator is no rank's.
    CommStats stats;
    std::size_t n = 0;
    T* p = nullptr;
    std::vector<std::size_t> staged;
    // The root's staging copy and every rank's wait for its stream come before the agreement (see
    // allreduce_diff); the other ranks mark their data as about to be overwritten only after it, so
    // a refused call leaves their data as it was.
    bool device = false;
    std::optional<ArenaBuffer<T, A>> view;  // outlives the preparation: `p` points into it
    const auto failure = syncblob::detail::prepare(arena, op, [&] {
        auto& data = view.emplace(arena.data_buffer());
        n = data.elements();
        stats.bytes = data.bytes();
        if constexpr (Device::has_device) {
            device = n != 0 && detail::use_device(options) && data.fresh_on_device() && !data.fresh_on_host();
            if (device) {
                if (rank == root) {
                    p = const_cast<T*>(data.device_data());
                }
                detail::wait_stream<Device>(arena.stream());
                return;
            }
        }
        if (rank == root) {
            p = const_cast<T*>(data.host_data().data());  // read only: MPI_Bcast does not write at the root
        }
    });
    detail::agree(arena, comm, op,
                  {syncblob::detail::CommOperation::broadcast, static_cast<std::uint64_t>(std::int64_t{root}), 0, 0, 0,
                   deadline.bounded()},
                  deadline, failure);
    stats.on_device = device;
    if (rank != root) {
        auto& data = *view;
        if (device) {
            p = data.mutable_device_data_for_overwrite();
        } else {
            staged = detail::device_only(data.buffers(), 0, data.buffers().size());
            p = data.mutable_host_data_for_overwrite().data();
        }
    }
    stats.calls = detail::in_pieces(n, [&](std::size_t first, int count) {
        detail::collective(
            deadline, comm, op, "MPI_Bcast", "MPI_Ibcast", "the broadcast",
            [&] { return MPI_Bcast(p + first, count, detail::datatype<T>(), root, comm); },
            [&](MPI_Request* r) { return MPI_Ibcast(p + first, count, detail::datatype<T>(), root, comm, r); },
            [&] { return detail::hold(view->buffers()); });
    });
    if (!staged.empty()) {
        detail::push_back_to_device(view->buffers(), staged);
    }
    stats.staged_blobs = staged.size();
    return stats;
}

/// A bucketed, non-blocking all-reduce of an arena's diff: one `MPI_Iallreduce` per bucket
/// (`ParameterArena::buckets`, in reverse order of addition), each started as soon as every blob
/// in it is `ready`, in bucket order, so the last layers' gradients travel while backward still
/// computes the first ones. Do not touch a started bucket's diffs before `wait()`. Open MPI
/// progresses non-blocking collectives inside MPI calls: `test()` now and then helps.
///
/// Move-only. Destroying a handle before `wait()` waits for the buckets it started (within
/// `Options::timeout` from the destruction, when set; then they are given up as `wait()` gives them
/// up) and starts no other: the other ranks' waits for a bucket this one never started end in their
/// own TimeoutError (or never, without a timeout). When it had started some buckets but not all, or
/// gave any up, the communicator is marked out of step on this rank: the next syncblob call on it
/// throws StateError instead of being matched with the other ranks' buckets. docs/scaling-out.md
/// says more.
template <MpiElement T, SyncedAllocator A>
class BucketedAllreduce {
public:
    /// Plans the buckets (the first at most `first_bytes`, the others at most `bucket_bytes`) and
    /// checks, collectively, that every rank plans the same; starts nothing.
    /// \throws as allreduce_diff; ShapeError (on every rank) when some rank's bucket limit is 0.
    BucketedAllreduce(ParameterArena<T, A>& arena, MPI_Comm comm, Reduce reduce, std::size_t first_bytes,
                      std::size_t bucket_bytes, Options options = {})
        : arena_(&arena), comm_(comm), reduce_(reduce), options_(options) {
        const detail::Deadline deadline(options.timeout);
        detail::ErrorsReturn errors(comm, op);
        detail::agree(arena, comm, op,
                      {syncblob::detail::CommOperation::bucketed_allreduce, static_cast<std::uint64_t>(reduce),
                       first_bytes, bucket_bytes, options.piece_bytes},
                      deadline);
        ranks_ = detail::comm_size(comm, op);
        plan_ = syncblob::detail::BucketPlan(arena.buckets(first_bytes, bucket_bytes), arena.size());
        staged_.resize(plan_.buckets().size());
        on_host_.assign(plan_.buckets().size(), true);
        stats_.bytes = arena.bytes();
    }
    BucketedAllreduce(const BucketedAllreduce&) = delete;
    BucketedAllreduce& operator=(const BucketedAllreduce&) = delete;
    BucketedAllreduce(BucketedAllreduce&& other) noexcept { *this = std::move(other); }
    BucketedAllreduce& operator=(BucketedAllreduce&& other) noexcept {
        if (this != &other) {
            abandon();
            arena_ = other.arena_;
            comm_ = other.comm_;
            reduce_ = other.reduce_;
            options_ = other.options_;
            ranks_ = other.ranks_;
            plan_ = std::move(other.plan_);
            staged_ = std::move(other.staged_);
            on_host_ = std::move(other.on_host_);
            requests_ = std::move(other.requests_);
            waited_ = std::exchange(other.waited_, true);
            stats_ = other.stats_;
            other.requests_.clear();
        }
        return *this;
    }
    ~BucketedAllreduce() { abandon(); }

    [[nodiscard]] const std::vector<Bucket>& buckets() const noexcept { return plan_.buckets(); }
    /// Buckets whose MPI_Iallreduce has been issued.
    [[nodiscard]] std::size_t started() const noexcept { return plan_.started(); }

    /// Blob `i`'s diff is complete: starts, in bucket order, every bucket all of whose blobs are.
    /// \throws IndexError when `i` is out of range; StateError after wait(); CommError.
    void ready(std::size_t i) {
        require_not_waited("ready");
        plan_.ready(i, "mpi::iallreduce_diff::ready");
        start_complete();
    }
    /// Every blob is ready: starts every bucket not started yet.
    void start_all() {
        require_not_waited("start_all");
        plan_.all_ready();
        start_complete();
    }

    /// Lets MPI progress; true when every bucket has been started and has finished.
    bool test() {
        detail::ErrorsReturn errors(comm_, op);
        int done = 0;
        detail::check(MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done, MPI_STATUSES_IGNORE), op,
                      "MPI_Testall");
        return done != 0 && plan_.started() == plan_.buckets().size();
    }

    /// Starts what is not started yet, waits for every bucket, divides for a mean, and copies the
    /// staged blobs' results back to the device. \throws StateError when called twice; CommError;
    /// TimeoutError when `Options::timeout` passes (from this call) before every bucket is done:
    /// the buckets are then given up (see mpi::Options::timeout), and the diffs are unspecified.
    CommStats wait() {
        start_all();
        const detail::Deadline deadline(options_.timeout);
        detail::ErrorsReturn errors(comm_, op);
        waited_ = true;
        complete_requests(deadline);
        auto diff = arena_->diff_buffer();
        for (std::size_t b = 0; b < plan_.buckets().size(); ++b) {
            const Bucket& bucket = plan_.buckets()[b];
            if (on_host_[b] && reduce_ == Reduce::mean) {
                T* host = diff.mutable_host_data(bucket.first, bucket.end).data();
                detail::divide(host + bucket.offset / sizeof(T), bucket.bytes / sizeof(T), ranks_);
            }
            detail::push_back_to_device(diff.buffers(), staged_[b]);
            stats_.staged_blobs += staged_[b].size();
        }
        return stats_;
    }

private:
    static constexpr std::string_view op = "mpi::iallreduce_diff";

    void require_not_waited(const char* what) const {
        if (waited_) {
            throw StateError(std::string(op) + "::" + what + ": already waited for");
        }
    }

    void start_complete() {
        detail::ErrorsReturn errors(comm_, op);
        plan_.start_ready([this](std::size_t b) { start(b); });
    }

    void start(std::size_t b) {
        using Device = typename A::device_backend;
        auto diff = arena_->diff_buffer();
        const Bucket& bucket = plan_.buckets()[b];
        T* p = nullptr;
        bool device = false;
        if constexpr (Device::has_device) {
            device = reduce_ == Reduce::sum && bucket.bytes != 0 && detail::use_device(options_) &&
                     diff.fresh_on_device(bucket.first, bucket.end) && !diff.fresh_on_host(bucket.first, bucket.end);
            if (device) {
                p = diff.mutable_device_data(bucket.first, bucket.end);
                detail::wait_stream<Device>(arena_->stream());
                stats_.on_device = true;
            }
        }
        if (!device) {
            staged_[b] = detail::device_only(diff.buffers(), bucket.first, bucket.end);
            p = diff.mutable_host_data(bucket.first, bucket.end).data();
        }
        on_host_[b] = !device;
        p += bucket.offset / sizeof(T);
        // One request per piece (Options::piece_bytes), as allreduce_diff reduces.
        const std::size_t n = bucket.bytes / sizeof(T);
        const std::size_t piece =
            options_.piece_bytes == 0 ? n : std::max<std::size_t>(options_.piece_bytes / sizeof(T), 1);
        for (std::size_t start = 0; start < n; start += piece) {
            stats_.calls += detail::in_pieces(std::min(piece, n - start), [&](std::size_t first, int count) {
                MPI_Request request = MPI_REQUEST_NULL;
                detail::check(MPI_Iallreduce(MPI_IN_PLACE, p + start + first, count, detail::datatype<T>(), MPI_SUM,
                                             comm_, &request),
                              op, "MPI_Iallreduce");
                requests_.push_back(request);
            });
        }
    }

    void complete_requests(const detail::Deadline& deadline) {
        // (The blobs' own buffers, not arena.diff_buffer(), which refuses an arena changed meanwhile.)
        detail::complete(requests_, comm_, deadline, op, "MPI_Iallreduce", "the buckets' all-reduces", [&] {
            std::vector<std::shared_ptr<typename ParameterArena<T, A>::buffer_type>> diffs;
            for (const auto& blob : arena_->blobs()) {
                diffs.push_back(blob.diff_buffer());
            }
            return detail::hold(diffs);
        });
    }

    // Waits for what was started, within the timeout; ignores errors (a destructor cannot report
    // them). A sequence of buckets left unfinished marks the communicator (see the class comment).
    void abandon() noexcept {
        if (arena_ == nullptr || waited_) {
            return;
        }
        try {
            detail::ErrorsReturn errors(comm_, op);
            if (plan_.started() != 0 && plan_.started() != plan_.buckets().size()) {
                detail::mark_out_of_step(comm_, op);
            }
            if (!requests_.empty()) {
                complete_requests(detail::Deadline(options_.timeout));
            }
        } catch (...) {  // MPI finalized, a failing MPI call, or a timeout (which marked the communicator)
        }
        requests_.clear();
        waited_ = true;
    }

    ParameterArena<T, A>* arena_ = nullptr;
    MPI_Comm comm_ = MPI_COMM_NULL;
    Reduce reduce_ = Reduce::sum;
    Options options_{};
    int ranks_ = 1;
    syncblob::detail::BucketPlan plan_;
    std::vector<std::vector<std::size_t>> staged_;  // per bucket: blobs staged from the device
    std::vector<bool> on_host_;                     // per bucket: reduced in host memory
    std::vector<MPI_Request> requests_;
    bool waited_ = false;
    CommStats stats_{};
};

/// Starts a bucketed non-blocking all-reduce of every bucket at once (buckets of at most
/// `bucket_bytes`); call `wait()` on the result. For a bucket-by-bucket start as gradients become
/// ready, construct a BucketedAllreduce and call `ready(blob)`.
template <MpiElement T, SyncedAllocator A>
BucketedAllreduce<T, A> iallreduce_diff(ParameterArena<T, A>& arena, MPI_Comm comm, Reduce reduce,
                                        std::size_t bucket_bytes, Options options = {}) {
    BucketedAllreduce<T, A> handle(arena, comm, reduce, bucket_bytes, bucket_bytes, options);
    handle.start_all();
    return handle;
}

}  // namespace mpi

SYNCBLOB_END_NAMESPACE
