// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Bounded waits for `syncblob/comm/mpi.hpp`: a deadline, the polling of non-blocking requests until
/// it passes, what becomes of an operation given up on (its requests and the memory MPI may still
/// write are kept until MPI completes them), and the mark a communicator gets on a rank where that
/// happened, so that the rank starts no new collective on it out of step with the others.

#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "../../core/error.hpp"
#include "../../core/sync_audit.hpp"
#include "../error.hpp"
#include "mpi_call.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace mpi::detail {

/// When a call stops waiting for the other ranks: never (no timeout), or `timeout` after it began.
class Deadline {
public:
    using clock = std::chrono::steady_clock;
    Deadline() = default;
    /// A timeout that is not positive never passes: the agreement refuses it on every rank (an
    /// OptionError), and this rank must still take part in that agreement to say so.
    explicit Deadline(std::optional<std::chrono::milliseconds> timeout) : timeout_(timeout) {
        if (timeout_) {
            at_ = timeout_->count() > 0 ? clock::now() + *timeout_ : clock::time_point::max();
        }
    }
    [[nodiscard]] bool bounded() const noexcept { return timeout_.has_value(); }
    [[nodiscard]] bool passed() const noexcept { return timeout_ && clock::now() >= at_; }
    [[nodiscard]] std::chrono::milliseconds timeout() const noexcept {
        return timeout_.value_or(std::chrono::milliseconds{0});
    }

private:
    std::optional<std::chrono::milliseconds> timeout_;
    clock::time_point at_{};
};

/// An operation given up on at its deadline: its requests, which no MPI call can cancel (a
/// collective's cannot be cancelled or freed), and the memory they read and write.
struct Abandoned {
    std::vector<MPI_Request> requests;
    std::vector<std::shared_ptr<void>> memory;
};

/// The abandoned operations of this process, kept until MPI completes them (which it does if the
/// missing ranks join later): reachable from here, so no memory MPI may still write is freed.
class Graveyard {
public:
    static void add(Abandoned a) {
        std::lock_guard lock(mutex());
        all().push_back(std::move(a));
    }
    /// Tests each abandoned operation (letting MPI progress), drops those MPI has completed, and
    /// returns how many remain.
    static std::size_t reap() noexcept {
        std::lock_guard lock(mutex());
        auto& ops = all();
        std::erase_if(ops, [](Abandoned& a) {
            int done = 0;
            const int status =
                MPI_Testall(static_cast<int>(a.requests.size()), a.requests.data(), &done, MPI_STATUSES_IGNORE);
            return status == MPI_SUCCESS && done != 0;
        });
        return ops.size();
    }

private:
    static std::mutex& mutex() {
        static std::mutex m;
        return m;
    }
    static std::vector<Abandoned>& all() {
        static std::vector<Abandoned> ops;
        return ops;
    }
};

/// The attribute that marks a communicator on which this rank gave an operation up (its value: the
/// operation's name, a string literal).
inline int out_of_step_key() {
    static const int key = [] {
        int k = MPI_KEYVAL_INVALID;
        (void)MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &k, nullptr);
        return k;
    }();
    return key;
}

/// Marks `comm`: on this rank its collectives are out of step with the other ranks' (`op`, whose
/// characters are a string literal's, was given up on, or left buckets unstarted).
inline void mark_out_of_step(MPI_Comm comm, std::string_view op) noexcept {
    (void)MPI_Comm_set_attr(comm, out_of_step_key(), const_cast<char*>(op.data()));
}

/// \throws StateError when `comm` is marked on this rank: a new collective would be matched with
/// one the other ranks gave up on, or left waiting.
inline void require_in_step(MPI_Comm comm, std::string_view op) {
    void* value = nullptr;
    int found = 0;
    check(MPI_Comm_get_attr(comm, out_of_step_key(), &value, &found), op, "MPI_Comm_get_attr");
    if (found != 0) {
        throw StateError(std::string(op) + ": an earlier " + static_cast<const char*>(value) +
                         " on this communicator was given up on this rank (a timeout, or buckets left "
                         "unstarted), so its collectives are out of step with the other ranks'; nothing was "
                         "sent (use a new communicator)");
    }
}

/// Gives up an operation at its deadline: its `requests` and `memory` go to the Graveyard, `comm` is
/// marked out of step, and TimeoutError names `op`, `what` it waited for, `call` and the timeout.
[[noreturn]] inline void give_up(std::vector<MPI_Request>& requests, std::vector<std::shared_ptr<void>> memory,
                                 MPI_Comm comm, const Deadline& deadline, std::string_view op, const char* call,
                                 std::string_view what) {
    int rank = 0;
    int size = 0;
    (void)MPI_Comm_rank(comm, &rank);
    (void)MPI_Comm_size(comm, &size);
    Graveyard::add({std::move(requests), std::move(memory)});
    requests.clear();
    mark_out_of_step(comm, op);
    throw TimeoutError(
        std::string(op) + ": timed out after " + std::to_string(deadline.timeout().count()) + " ms on rank " +
            std::to_string(rank) + " of " + std::to_string(size) + " waiting for " + std::string(what) + " (" + call +
            "): a rank has not joined, or its messages stopped arriving (it failed before the call, stopped "
            "calling, or the network or the host it runs on failed); the "
            "communicator is out of step on this rank, and the memory the operation uses is kept "
            "until MPI completes it",
        std::string(op), call, deadline.timeout());
}

/// Completes `requests` (issued by `op` on `comm`): without a deadline as MPI_Waitall; with one,
/// polling MPI_Testall until they complete or it passes, then gives them up (give_up) with the
/// memory `keep()` returns. With `poll`, it polls either way and calls `poll()` between tests (work
/// of the caller's that can move while it waits). \throws CommError when MPI reports a failure.
/// The caller reports the wait (`audit::note(audit::Wait::collective)`) before it posts the
/// requests, or in an operation that asks for the wait: in `audit::Mode::error` a report the
/// operation did not ask for throws, and a request posted before it would be left to write memory
/// the exception frees (so did the agreement's gathering, which the next call on 8 ranks waited for).
template <class Keep, class Poll = std::nullptr_t>
void complete(std::vector<MPI_Request>& requests, MPI_Comm comm, const Deadline& deadline, std::string_view op,
              const char* call, std::string_view what, Keep keep, Poll poll = nullptr) {
    if (requests.empty()) {
        return;
    }
    const int n = static_cast<int>(requests.size());
    if (!deadline.bounded() && std::is_null_pointer_v<Poll>) {
        check(MPI_Waitall(n, requests.data(), MPI_STATUSES_IGNORE), op, "MPI_Waitall");
        requests.clear();
        return;
    }
    for (;;) {
        int done = 0;
        check(MPI_Testall(n, requests.data(), &done, MPI_STATUSES_IGNORE), op, "MPI_Testall");
        if (done != 0) {
            requests.clear();
            return;
        }
        if (deadline.passed()) {
            break;
        }
        if constexpr (!std::is_null_pointer_v<Poll>) {
            poll();
            if (!deadline.bounded()) {
                // As MPI_Waitall would: each MPI call progresses, and Open MPI yields the core when
                // idle if its ranks oversubscribe the host. A yield here on every pass gave the core
                // away while messages were arriving: 2 ranks sharing 2 busy cores, a 4 MiB mean took
                // 3.2-3.4 ms instead of 1.0-1.8.
                continue;
            }
        }
        std::this_thread::yield();  // Open MPI progresses the requests only inside MPI calls: keep testing
    }
    std::vector<std::shared_ptr<void>> memory;
    try {
        memory = keep();
    } catch (...) {  // the requests are kept all the same; their memory is then the caller's to keep
    }
    give_up(requests, std::move(memory), comm, deadline, op, call, what);
}

// Keeps the memory of every slice of `buffers`, host and device side, valid while the handles live
// (for an operation given up on, which MPI may still complete).
template <class Buffers>
std::vector<std::shared_ptr<void>> hold(const Buffers& buffers) {
    std::vector<std::shared_ptr<void>> out;
    for (const auto& b : buffers) {
        out.push_back(b->hold_host());
        out.push_back(b->hold_device());
    }
    return out;
}

// One collective on `comm`: `blocking()` without a deadline; with one, `start(&request)` (its
// non-blocking form) polled until the deadline (see complete); `keep()` holds the memory it uses.
template <class Blocking, class Start, class Keep>
void collective(const Deadline& deadline, MPI_Comm comm, std::string_view op, const char* blocking_call,
                const char* call, std::string_view what, Blocking blocking, Start start, Keep keep) {
    audit::note(audit::Wait::collective);
    if (!deadline.bounded()) {
        check(blocking(), op, blocking_call);
        return;
    }
    std::vector<MPI_Request> request(1, MPI_REQUEST_NULL);
    check(start(request.data()), op, call);
    complete(request, comm, deadline, op, call, what, keep);
}

}  // namespace mpi::detail

SYNCBLOB_END_NAMESPACE
