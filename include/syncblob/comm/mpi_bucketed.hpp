// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The bucketed, non-blocking all-reduce of an arena's diff through MPI (`mpi::BucketedAllreduce`,
/// `mpi::iallreduce_diff`); part of `syncblob/comm/mpi.hpp`, which includes it.

#include <mpi.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../arena/parameter_arena.hpp"
#include "../core/error.hpp"
#include "../core/sync_audit.hpp"
#include "detail/bucket_plan.hpp"
#include "detail/mpi_agree.hpp"
#include "detail/mpi_call.hpp"
#include "detail/mpi_private_comm.hpp"
#include "detail/mpi_ring.hpp"
#include "detail/mpi_staging.hpp"
#include "detail/mpi_wait.hpp"
#include "error.hpp"
#include "mpi_options.hpp"
#include "reduce.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace mpi {

template <MpiElement T, SyncedAllocator A>
class BucketedAllreduce;

/// Starts a bucketed non-blocking all-reduce of every bucket at once (buckets of at most
/// `bucket_bytes`); call `wait()` on the result. For a bucket-by-bucket start as gradients become
/// ready, construct a BucketedAllreduce and call `ready(i)` with each blob's index in the arena.
/// \throws as BucketedAllreduce's constructor.
template <MpiElement T, SyncedAllocator A>
BucketedAllreduce<T, A> iallreduce_diff(ParameterArena<T, A>& arena, MPI_Comm comm, Reduce reduce,
                                        std::size_t bucket_bytes, Options options = {});

/// A bucketed, non-blocking all-reduce of an arena's diff: the buckets (`ParameterArena::buckets`,
/// in reverse order of addition) start in bucket order, each as soon as every blob in it is `ready`,
/// so the last layers' gradients travel while backward still computes the first ones. Do not touch
/// a started bucket's diffs before `wait()`. MPI moves the data only inside MPI calls: `test()` now
/// and then, during backward, lets it progress.
///
/// How: in host memory (every rank's case with Debian's Open MPI), the buckets' bytes go through
/// syncblob's own all-reduce over MPI's point-to-point messages, `ring_pieces_in_flight` pieces of
/// `Options::piece_bytes` at a time, and a mean divides in the last addition of each element, at no
/// cost of its own. When some rank may sum in device memory (a device-aware MPI), every rank starts
/// one `MPI_Iallreduce` per piece of each bucket instead.
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
        const audit::Operation audited(op);
        const detail::Deadline deadline(options.timeout);
        detail::ErrorsReturn errors(comm, op);
        agree_and_plan(first_bytes, bucket_bytes, deadline);
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
            plan_ = std::move(other.plan_);
            staged_ = std::move(other.staged_);
            ring_ = std::exchange(other.ring_, std::nullopt);
            requests_ = std::exchange(other.requests_, {});
            waited_ = std::exchange(other.waited_, true);
            stats_ = other.stats_;
        }
        return *this;
    }
    ~BucketedAllreduce() { abandon(); }

    [[nodiscard]] const std::vector<Bucket>& buckets() const noexcept { return plan_.buckets(); }
    /// Buckets started so far (their all-reduce issued, or queued behind the pieces in flight).
    [[nodiscard]] std::size_t started() const noexcept { return plan_.started(); }

    /// Begins the next step on the same buckets, without agreeing again: the arena's layout and the
    /// call's arguments were agreed at construction, and a sealed arena keeps its layout. So a
    /// training loop agrees once (DDP's reducer does the same) and each step sends nothing but its
    /// buckets. Every rank must restart its handle for the same step, as every rank must make the
    /// same collective calls. \throws StateError unless the last step was waited for, or when a blob
    /// of the arena was replaced or reshaped since (checked on this rank, before anything is sent).
    void restart() {
        if (!waited_) {
            throw StateError(std::string(op) + "::restart: the last step was not waited for (call wait() first)");
        }
        arena_->check("mpi::iallreduce_diff::restart");
        plan_.reset();
        for (auto& s : staged_) {
            s.clear();
        }
        if (ring_) {
            ring_->clear();
        }
        stats_ = CommStats{};
        stats_.bytes = arena_->bytes();
        waited_ = false;
    }

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
        const bool ring_done = !ring_ || ring_->test();
        return done != 0 && ring_done && plan_.started() == plan_.buckets().size();
    }

    /// Starts what is not started yet, waits for every bucket and copies the staged blobs' results
    /// back to the device. \throws StateError when called twice; CommError; TimeoutError when
    /// `Options::timeout` passes (from this call) before every bucket is done: the buckets are then
    /// given up (see mpi::Options::timeout), and the diffs are unspecified.
    CommStats wait() {
        const audit::Operation audited("mpi::BucketedAllreduce::wait", audit::Waits{audit::Wait::collective});
        start_all();
        const detail::Deadline deadline(options_.timeout);
        detail::ErrorsReturn errors(comm_, op);
        waited_ = true;
        complete_started(deadline);
        auto diff = arena_->flat_diff();
        for (std::size_t b = 0; b < plan_.buckets().size(); ++b) {
            detail::push_back_to_device(diff.buffers(), staged_[b]);
            stats_.staged_blobs += staged_[b].size();
        }
        return stats_;
    }

private:
    static constexpr std::string_view op = "mpi::iallreduce_diff";

    friend BucketedAllreduce iallreduce_diff<T, A>(ParameterArena<T, A>&, MPI_Comm, Reduce, std::size_t, Options);
    struct StartAll {};

    // iallreduce_diff's: plans buckets of at most `bucket_bytes` and starts them all. A call whose
    // pieces an earlier agreement on `comm` fixed (detail::early_start) starts them before its
    // agreement, sending the first messages of the pieces the engine's window holds: the
    // agreement's round and theirs then wait for the other ranks together. So does a mean, and a
    // sum that this rank may not reduce in device memory (an arena without device memory, or an
    // MPI that is not device-aware: its diffs are staged and summed in host memory). A refused
    // call takes them back (mpi_agree.hpp) and throws as the constructor above; when some other
    // rank may sum in device memory, they are taken back too, and the buckets start again in
    // MPI_Iallreduce. A sum after such an agreement on `comm` agrees first: a rank that sums in
    // device memory every step would make the others send and take back every step.
    BucketedAllreduce(StartAll, ParameterArena<T, A>& arena, MPI_Comm comm, Reduce reduce, std::size_t bucket_bytes,
                      Options options)
        : arena_(&arena), comm_(comm), reduce_(reduce), options_(options) {
        const audit::Operation audited(op);
        const detail::Deadline deadline(options.timeout);
        detail::ErrorsReturn errors(comm, op);
        const bool engine = reduce == Reduce::mean || (!may_use_device() && !detail::last_chose_device(comm));
        const auto early =
            engine && bucket_bytes != 0 ? detail::early_start(comm, options.piece_bytes, op) : std::nullopt;
        if (!early) {
            agree_and_plan(bucket_bytes, bucket_bytes, deadline);
            start_all();
            return;
        }
        options_.piece_bytes = early->piece_bytes;
        ring_.emplace(early->mine, reduce == Reduce::mean, detail::piece_elements<T>(early->piece_bytes),
                      ring_pieces_in_flight, op);
        before_agreement_ = true;
        const auto failure = comm::detail::prepare(arena, op, [&] {
            plan_ = comm::detail::BucketPlan(arena.buckets(bucket_bytes, bucket_bytes), arena.size());
            staged_.resize(plan_.buckets().size());
            stats_.bytes = arena.bytes();
            plan_.all_ready();
            start_complete();
        });
        before_agreement_ = false;
        const auto keep = [&] { return hold_diffs(); };
        const detail::Agreement agreed = detail::agree(
            arena, comm, op,
            {comm::detail::CommOperation::bucketed_allreduce, static_cast<std::uint64_t>(reduce), bucket_bytes,
             bucket_bytes, detail::requested_piece(options.piece_bytes), false, false, ring_->sent_early()},
            deadline, failure, detail::EarlyMessages<T, decltype(keep)>{*ring_, comm, deadline, keep});
        if (agreed.device) {  // the engine's messages are taken back: every rank starts MPI_Iallreduce instead
            ring_.reset();
            stats_.calls = 0;
            plan_.reset();
            plan_.all_ready();
            start_complete();
            return;
        }
        ring_->accept();
    }

    // The constructor's agreement, then the plan of the buckets.
    void agree_and_plan(std::size_t first_bytes, std::size_t bucket_bytes, const detail::Deadline& deadline) {
        const detail::Agreement agreed = detail::agree(
            *arena_, comm_, op,
            {comm::detail::CommOperation::bucketed_allreduce, static_cast<std::uint64_t>(reduce_), first_bytes,
             bucket_bytes, detail::requested_piece(options_.piece_bytes), false, may_use_device()},
            deadline);
        options_.piece_bytes = agreed.piece_bytes(options_.piece_bytes);  // the same on every rank
        if (!agreed.device) {
            ring_.emplace(detail::private_comm(comm_, deadline, op), reduce_ == Reduce::mean,
                          detail::piece_elements<T>(*options_.piece_bytes), ring_pieces_in_flight, op);
        }
        plan_ = comm::detail::BucketPlan(arena_->buckets(first_bytes, bucket_bytes), arena_->size());
        staged_.resize(plan_.buckets().size());
        stats_.bytes = arena_->bytes();
    }

    // Whether this rank may sum some bucket in device memory.
    [[nodiscard]] bool may_use_device() const {
        return A::device_backend::has_device && reduce_ == Reduce::sum && detail::use_device(options_);
    }

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
        auto diff = arena_->flat_diff();
        const Bucket& bucket = plan_.buckets()[b];
        T* p = nullptr;
        bool device = false;
        if constexpr (Device::has_device) {
            device = !ring_ && reduce_ == Reduce::sum && bucket.bytes != 0 && detail::use_device(options_) &&
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
        p += bucket.offset / sizeof(T);
        const std::size_t n = bucket.bytes / sizeof(T);
        if (ring_) {
            stats_.calls += before_agreement_ ? ring_->add_before_agreement(p, n) : ring_->add(p, n);
            return;
        }
        // One request per piece (Options::piece_bytes), as allreduce_diff reduces a sum.
        const std::size_t piece = detail::piece_elements<T>(options_.piece_bytes.value_or(0));  // set at construction
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

    // Keeps the blobs' own buffers (not arena.flat_diff(), which refuses an arena changed
    // meanwhile) for an operation given up on.
    [[nodiscard]] std::vector<std::shared_ptr<void>> hold_diffs() const {
        std::vector<std::shared_ptr<typename ParameterArena<T, A>::buffer_type>> diffs;
        for (const auto& blob : arena_->blobs()) {
            diffs.push_back(blob.diff_buffer());
        }
        return detail::hold(diffs);
    }

    void complete_started(const detail::Deadline& deadline) {
        constexpr std::string_view what = "the buckets' all-reduces";
        if (ring_) {
            ring_->wait(comm_, deadline, what, [&] { return hold_diffs(); });
        }
        if (!requests_.empty()) {
            audit::note(audit::Wait::collective);  // asked for by wait(); abandon() only counts it
        }
        detail::complete(requests_, comm_, deadline, op, "MPI_Iallreduce", what, [&] { return hold_diffs(); });
    }

    // Waits for what was started, within the timeout; ignores errors (a destructor cannot report
    // them). A sequence of buckets left unfinished marks the communicator (see the class comment).
    void abandon() noexcept {
        if (arena_ == nullptr || waited_) {
            return;
        }
        try {
            // A destructor's wait, in whatever operation the caller is in: counted, never thrown (a
            // SyncError here would leave the started buckets unreduced).
            const audit::CountOnly counted;
            detail::ErrorsReturn errors(comm_, op);
            if (plan_.started() != 0 && plan_.started() != plan_.buckets().size()) {
                detail::mark_out_of_step(comm_, op);
            }
            complete_started(detail::Deadline(options_.timeout));
        } catch (...) {  // MPI finalized, a failing MPI call, or a timeout (which marked the communicator)
        }
        requests_.clear();
        waited_ = true;
    }

    ParameterArena<T, A>* arena_ = nullptr;
    MPI_Comm comm_ = MPI_COMM_NULL;
    Reduce reduce_ = Reduce::sum;
    Options options_{};
    comm::detail::BucketPlan plan_;
    std::vector<std::vector<std::size_t>> staged_;  // per bucket: blobs staged from the device
    std::optional<detail::Allreduce<T>> ring_;      // the engine, unless some rank may reduce device memory
    std::vector<MPI_Request> requests_;             // MPI_Iallreduce's, without the engine
    bool waited_ = false;
    bool before_agreement_ = false;  // while iallreduce_diff's early mean starts its buckets
    CommStats stats_{};
};

// A mean on a communicator an earlier call has agreed on sends its first messages before the
// agreement, as allreduce_diff's does (BucketedAllreduce's private constructor).
template <MpiElement T, SyncedAllocator A>
BucketedAllreduce<T, A> iallreduce_diff(ParameterArena<T, A>& arena, MPI_Comm comm, Reduce reduce,
                                        std::size_t bucket_bytes, Options options) {
    return BucketedAllreduce<T, A>(typename BucketedAllreduce<T, A>::StartAll{}, arena, comm, reduce, bucket_bytes,
                                   options);
}

}  // namespace mpi

SYNCBLOB_END_NAMESPACE
