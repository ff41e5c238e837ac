// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// A non-blocking all-reduce of host memory over MPI's point-to-point messages, for what MPI's
/// own collectives do slowly or cannot do: averaging (MPI has no mean), and non-blocking reductions
/// of large buffers (Open MPI 4.1's MPI_Iallreduce reduces an MPI_IN_PLACE buffer, or any buffer on
/// fewer than 4 ranks, through one rank and back: 0.5–0.9 of the blocking call).
///
/// The buffer is reduced in consecutive pieces, a few at a time. Each piece is cut into one chunk
/// per rank and reduced in two phases: a reduce-scatter, after which each rank holds one chunk summed
/// over every rank, and an all-gather that gives every rank the others' summed chunks. Two schedules:
/// - **halving and doubling**, when the number of ranks is a power of two: in step k of the
///   reduce-scatter each rank exchanges half of the chunks it still holds with rank `rank ^ 2^k`,
///   keeps the half its bit k names and adds what it received into it; the all-gather retraces the
///   steps backwards, each rank sending all it holds and receiving the partner's half. 2·log2(ranks)
///   steps, the nearest ranks first (with ranks numbered host by host, the farthest pairs exchange
///   the fewest bytes).
/// - **the ring**, otherwise: in ranks − 1 steps each rank sends a chunk to the next rank and adds the
///   chunk it receives from the previous one into its own, after which rank r holds chunk r + 1
///   summed over every rank; in ranks − 1 more steps the summed chunks go round.
/// Both send each rank the same bytes, (ranks − 1) / ranks of the piece each way in each phase; the
/// first makes fewer rounds of messages, each of which waits for the slowest rank of its pair (on
/// 4 ranks sharing 2 busy cores, 6 rounds took 21 ms for 4 MiB where 4 took 16: docs/scaling-out.md).
/// Before the agreement (mpi_agree.hpp), a mean, or iallreduce_diff's sum on an arena without
/// device memory, may send the first step of the pieces it starts (`add_before_agreement`), so that
/// the agreement's round of messages and the data's first round share their wait for the other
/// ranks. Their receives are posted while the agreement is waited for only for a message a probe
/// has shown to have the size expected (`receive_early`), the others once the call is agreed
/// (`accept`), when every rank's sizes are known to be the same: a receive of a guessed size could
/// meet a longer message, which Open MPI 4.1's shared-memory transport writes past the end of the
/// receive buffer whole (reporting MPI_ERR_TRUNCATE only after). A call the agreement refuses takes
/// its early messages back: each rank consumes those sent to it that it has not received, sized as
/// they come (`consume_early`), and waits for its own (`take_back`); so does a sum whose agreement
/// chooses MPI's collectives (some rank may sum in device memory).
/// For a mean, the last addition of each chunk also divides it by the number of ranks: the quotient
/// costs no pass of its own. Every element is summed once, on one rank, and copied to the others: every
/// rank ends with the same bits.

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "../../core/sync_audit.hpp"
#include "mpi_call.hpp"
#include "mpi_wait.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace mpi::detail {

/// `a[i] = a[i] + b[i]`, or with `ranks` given, `(a[i] + b[i]) / ranks` rounded once: a power of two
/// multiplies by its reciprocal, which is exact, so the result is the same bits as the division.
template <MpiElement T>
void add_into(T* __restrict a, const T* __restrict b, std::size_t n, int ranks = 0) {
    if (ranks == 0) {
        for (std::size_t i = 0; i < n; ++i) {
            a[i] += b[i];
        }
    } else if ((ranks & (ranks - 1)) == 0) {
        const T reciprocal = T(1) / static_cast<T>(ranks);
        for (std::size_t i = 0; i < n; ++i) {
            a[i] = (a[i] + b[i]) * reciprocal;
        }
    } else {
        const T d = static_cast<T>(ranks);
        for (std::size_t i = 0; i < n; ++i) {
            a[i] = (a[i] + b[i]) / d;
        }
    }
}

/// The tag of piece `piece`'s messages: distinct among the pieces in flight (at most the window
/// apart), and within MPI_TAG_UB's least value, 32767.
inline int piece_tag(std::size_t piece) noexcept {
    return static_cast<int>(piece % 32768);
}

/// The rank whose first message of a piece goes to `rank`, in the schedule `Schedule::automatic`
/// chooses for `ranks` ranks (halving and doubling: its partner; the ring: the previous rank), or
/// −1 when there are no messages (one rank).
inline int first_sender(int rank, int ranks) noexcept {
    if (ranks < 2) {
        return -1;
    }
    return (ranks & (ranks - 1)) == 0 ? rank ^ 1 : (rank + ranks - 1) % ranks;
}

/// The all-reduce of the runs `add` queues, on `comm` (syncblob's private communicator: see
/// mpi_private_comm.hpp). Move-only. A handle destroyed with messages in flight leaves them, and
/// the scratch memory they use, to the Graveyard.
template <MpiElement T>
class Allreduce {
public:
    /// The order of the messages: halving and doubling where the ranks are a power of two, else the
    /// ring (`automatic`), or the ring always (for comparing the two).
    enum class Schedule { automatic, ring };

    /// Pieces of consecutive runs of `piece` elements (each split again at `max_count`), at most
    /// `in_flight` of them at a time; `mean`: divide by the number of ranks.
    Allreduce(MPI_Comm comm, bool mean, std::size_t piece, std::size_t in_flight, std::string_view op,
              Schedule schedule = Schedule::automatic)
        : comm_(comm), mean_(mean), piece_(std::max<std::size_t>(piece, 1)), op_(op) {
        check(MPI_Comm_size(comm, &ranks_), op, "MPI_Comm_size");
        check(MPI_Comm_rank(comm, &rank_), op, "MPI_Comm_rank");
        if (schedule == Schedule::automatic && (ranks_ & (ranks_ - 1)) == 0) {
            for (int r = ranks_; r > 1; r >>= 1) {
                ++levels_;
            }
        }
        slots_.resize(std::max<std::size_t>(in_flight, 1));
        requests_.assign(2 * slots_.size(), MPI_REQUEST_NULL);
    }
    Allreduce(const Allreduce&) = delete;
    Allreduce& operator=(const Allreduce&) = delete;
    Allreduce(Allreduce&& other) noexcept { *this = std::move(other); }
    Allreduce& operator=(Allreduce&& other) noexcept {
        if (this != &other) {
            leave_to_graveyard();
            comm_ = other.comm_;
            ranks_ = other.ranks_;
            rank_ = other.rank_;
            mean_ = other.mean_;
            accepted_ = other.accepted_;
            levels_ = other.levels_;
            piece_ = other.piece_;
            op_ = other.op_;
            pieces_ = std::exchange(other.pieces_, {});
            slots_ = std::exchange(other.slots_, {});
            requests_ = std::exchange(other.requests_, {});
            next_ = std::exchange(other.next_, 0);
            finished_ = std::exchange(other.finished_, 0);
        }
        return *this;
    }
    ~Allreduce() { leave_to_graveyard(); }

    /// Queues [p, p + n) and starts what the window allows; returns the number of pieces (each
    /// one all-reduce). \throws CommError.
    std::uint64_t add(T* p, std::size_t n) {
        std::uint64_t count = 0;
        for (std::size_t first = 0; first < n; first += piece_) {
            count += in_pieces(std::min(piece_, n - first), [&](std::size_t offset, int m) {
                pieces_.push_back({p + first + offset, static_cast<std::size_t>(m)});
            });
        }
        fill_slots();
        return count;
    }

    /// As add, before the call is agreed: of the pieces the window starts, only the first step's
    /// sends are posted, and nothing is received or reduced until `accept` (or `take_back`).
    std::uint64_t add_before_agreement(T* p, std::size_t n) {
        accepted_ = false;
        return add(p, n);
    }

    /// The pieces whose first messages were sent before the agreement (their tags: 0 to this − 1).
    [[nodiscard]] std::size_t sent_early() const noexcept { return accepted_ || steps() == 0 ? 0 : next_; }

    /// While the agreement is waited for: posts the receive of each early piece whose first message
    /// has arrived with the size this rank expects (seen by MPI_Iprobe, which the receive then
    /// matches: nothing else receives on the private communicator meanwhile), so that it is copied
    /// before the call is agreed. A message of another size is left where it is: the agreement
    /// refuses that call, and consume_early takes the message.
    void receive_early() {
        for (std::size_t s = 0; s < slots_.size() && !accepted_; ++s) {
            if (slots_[s].step != 0 || requests_[2 * s] != MPI_REQUEST_NULL) {
                continue;
            }
            const Piece& piece = pieces_[slots_[s].piece];
            const Message in = messages(0).second;
            int arrived = 0;
            MPI_Status status{};
            check(MPI_Iprobe(in.rank, piece_tag(slots_[s].piece), comm_, &arrived, &status), op_, "MPI_Iprobe");
            int bytes = -1;
            if (arrived != 0) {
                check(MPI_Get_count(&status, MPI_BYTE, &bytes), op_, "MPI_Get_count");
            }
            if (bytes >= 0 &&
                static_cast<std::size_t>(bytes) == (lo(piece, in.last) - lo(piece, in.first)) * sizeof(T)) {
                post_receive(s);
            }
        }
    }

    /// The tags (as bits) of the early pieces whose first message receive_early is receiving: a
    /// refused call's consume_early leaves those to this handle.
    [[nodiscard]] std::uint64_t received_early() const noexcept {
        std::uint64_t tags = 0;
        for (std::size_t s = 0; s < slots_.size() && !accepted_; ++s) {
            if (slots_[s].step == 0 && requests_[2 * s] != MPI_REQUEST_NULL && slots_[s].piece < 64) {
                tags |= std::uint64_t{1} << slots_[s].piece;
            }
        }
        return tags;
    }

    /// The call is agreed, so every rank sends what this one expects: posts the receives the early
    /// pieces still wait for. wait() and test() come after this (or after take_back).
    void accept() {
        if (accepted_) {
            return;
        }
        accepted_ = true;
        for (std::size_t s = 0; s < slots_.size(); ++s) {
            if (slots_[s].step == 0 && requests_[2 * s] == MPI_REQUEST_NULL) {
                post_receive(s);
            }
        }
    }

    /// The call was refused: waits until the rank each early message went to has consumed it
    /// (consume_early, which every rank runs on the same refusal) and for the receives
    /// receive_early posted, within `deadline` (then as wait()); nothing was reduced. The handle is
    /// then done.
    template <class Keep>
    void take_back(MPI_Comm user_comm, const Deadline& deadline, Keep keep) {
        std::vector<std::shared_ptr<void>> memory;
        std::vector<MPI_Request> early = take_in_flight(memory);
        accepted_ = true;
        if (!early.empty()) {
            // Counted, never thrown: the messages were sent before this wait, and must be waited for.
            const audit::CountOnly counted;
            audit::note(audit::Wait::collective);
        }
        complete(early, user_comm, deadline, op_, "MPI_Isend", "the refused call's early messages to be taken back",
                 [&] {
                     auto kept = keep();
                     kept.insert(kept.end(), memory.begin(), memory.end());
                     return kept;
                 });
    }

    /// Every queued piece is reduced.
    [[nodiscard]] bool done() const noexcept { return finished_ == pieces_.size(); }

    /// Forgets the pieces reduced, for the next step's (only when done(): every rank's ring is then
    /// at the same point, so the pieces' numbers, and their tags, start over together).
    void clear() noexcept {
        if (done()) {
            pieces_.clear();
            next_ = 0;
            finished_ = 0;
        }
    }

    /// Lets the messages progress without blocking; true when every queued piece is reduced.
    bool test() {
        progress(false);
        return done();
    }

    /// Reduces every queued piece: without a deadline in MPI_Waitsome; with one, testing until it
    /// passes, when the messages in flight, their scratch memory and what `keep()` returns are given
    /// up (give_up: `user_comm` is marked, TimeoutError names `what`).
    template <class Keep>
    void wait(MPI_Comm user_comm, const Deadline& deadline, std::string_view what, Keep keep) {
        if (!done()) {
            audit::note(audit::Wait::collective);
        }
        while (!done()) {
            if (progress(!deadline.bounded())) {
                continue;
            }
            if (deadline.passed()) {
                std::vector<std::shared_ptr<void>> memory;
                try {
                    memory = keep();
                } catch (...) {  // the requests are kept all the same
                }
                auto requests = take_in_flight(memory);
                give_up(requests, std::move(memory), user_comm, deadline, op_, "MPI_Isend/MPI_Irecv", what);
            }
            std::this_thread::yield();  // Open MPI moves the messages only inside MPI calls: test again soon
        }
    }

private:
    struct Piece {
        T* p = nullptr;
        std::size_t n = 0;
    };
    struct Slot {
        std::size_t piece = 0;
        int step = -1;  // -1: free
        std::shared_ptr<T[]> scratch;
        std::size_t scratch_size = 0;
    };

    [[nodiscard]] std::size_t lo(const Piece& piece, int chunk) const noexcept {
        return piece.n * static_cast<std::size_t>(chunk) / static_cast<std::size_t>(ranks_);
    }
    [[nodiscard]] int wrap(int c) const noexcept { return ((c % ranks_) + ranks_) % ranks_; }

    void fill_slots() {
        for (std::size_t s = 0; s < slots_.size(); ++s) {
            while (slots_[s].step < 0 && next_ < pieces_.size()) {  // (on one rank a piece is done at once)
                slots_[s].piece = next_++;
                slots_[s].step = 0;
                post(s);
            }
        }
    }

    // The steps of each phase.
    [[nodiscard]] int steps() const noexcept { return levels_ > 0 ? levels_ : ranks_ - 1; }

    // Halving and doubling: the chunks [first, last) this rank holds after `halvings` steps of the
    // reduce-scatter (step k keeps the upper half of the range where bit k of the rank is set).
    [[nodiscard]] std::pair<int, int> held(int halvings) const noexcept {
        int first = 0;
        int last = ranks_;
        for (int k = 0; k < halvings; ++k) {
            const int middle = first + (last - first) / 2;
            ((rank_ >> k) & 1) != 0 ? first = middle : last = middle;
        }
        return {first, last};
    }

    // One message of a step: to or from `rank`, chunks [first, last) of the piece.
    struct Message {
        int rank = 0;
        int first = 0;
        int last = 0;
    };
    // What slot step `step` (of 2 * steps()) sends, and receives (into scratch while reducing).
    [[nodiscard]] std::pair<Message, Message> messages(int step) const noexcept {
        const int n = steps();
        const bool scatter = step < n;
        if (levels_ > 0) {
            const int k = scatter ? step : 2 * n - 1 - step;  // the all-gather retraces the reduce-scatter
            const int partner = rank_ ^ (1 << k);
            const auto [first, last] = held(k);
            const int middle = first + (last - first) / 2;
            const bool upper = ((rank_ >> k) & 1) != 0;
            const Message keep{partner, upper ? middle : first, upper ? last : middle};
            const Message give{partner, upper ? first : middle, upper ? middle : last};
            // reduce-scatter: give half, receive the partner's of the half kept; all-gather: the reverse
            return scatter ? std::pair{give, keep} : std::pair{keep, give};
        }
        const int k = scatter ? step : step - n;
        const int send = wrap(scatter ? rank_ - k : rank_ + 1 - k);
        const int receive = wrap(rank_ - k - 1 + (scatter ? 0 : 1));
        return {Message{wrap(rank_ + 1), send, send + 1}, Message{wrap(rank_ - 1), receive, receive + 1}};
    }

    // Posts the current step of slot `s` (its receive only once the call is accepted), or frees the
    // slot when its piece is done.
    void post(std::size_t s) {
        Slot& slot = slots_[s];
        const Piece& piece = pieces_[slot.piece];
        if (slot.step >= 2 * steps()) {
            slot.step = -1;
            ++finished_;
            return;
        }
        if (accepted_) {
            post_receive(s);
        }
        const Message out = messages(slot.step).first;
        check(MPI_Isend(piece.p + lo(piece, out.first), static_cast<int>(lo(piece, out.last) - lo(piece, out.first)),
                        datatype<T>(), out.rank, piece_tag(slot.piece), comm_, &requests_[2 * s + 1]),
              op_, "MPI_Isend");
    }

    // Posts the receive of slot `s`'s current step (into scratch while reducing).
    void post_receive(std::size_t s) {
        Slot& slot = slots_[s];
        const Piece& piece = pieces_[slot.piece];
        const Message in = messages(slot.step).second;
        T* into = piece.p + lo(piece, in.first);
        const std::size_t count = lo(piece, in.last) - lo(piece, in.first);
        if (slot.step < steps()) {
            if (slot.scratch_size < count) {
                slot.scratch = std::shared_ptr<T[]>(new T[count]);
                slot.scratch_size = count;
            }
            into = slot.scratch.get();
        }
        check(MPI_Irecv(into, static_cast<int>(count), datatype<T>(), in.rank, piece_tag(slot.piece), comm_,
                        &requests_[2 * s]),
              op_, "MPI_Irecv");
    }

    // Slot `s`'s messages of this step have both arrived: add what it received (reduce-scatter),
    // then post the next step.
    void finish_step(std::size_t s) {
        Slot& slot = slots_[s];
        const Piece& piece = pieces_[slot.piece];
        if (slot.step < steps()) {
            const Message in = messages(slot.step).second;
            const bool last = slot.step == steps() - 1;
            add_into(piece.p + lo(piece, in.first), slot.scratch.get(), lo(piece, in.last) - lo(piece, in.first),
                     last && mean_ ? ranks_ : 0);
        }
        ++slot.step;
        post(s);
    }

    // Tests (or, `block`ing, waits for some of) the messages in flight and advances every slot whose
    // step completed; returns whether any did.
    bool progress(bool block) {
        if (!accepted_) {  // a caller's mistake: nothing may be received before the call is agreed
            throw StateError(std::string(op_) +
                             ": the all-reduce's early messages were neither accepted nor taken back");
        }
        fill_slots();
        if (done()) {
            return true;
        }
        int count = 0;
        indices_.resize(requests_.size());
        const int n = static_cast<int>(requests_.size());
        if (block) {
            check(MPI_Waitsome(n, requests_.data(), &count, indices_.data(), MPI_STATUSES_IGNORE), op_, "MPI_Waitsome");
        } else {
            check(MPI_Testsome(n, requests_.data(), &count, indices_.data(), MPI_STATUSES_IGNORE), op_, "MPI_Testsome");
        }
        if (count == MPI_UNDEFINED || count == 0) {
            return false;
        }
        for (std::size_t s = 0; s < slots_.size(); ++s) {
            if (slots_[s].step >= 0 && in_flight(s) == 0) {
                finish_step(s);
            }
        }
        fill_slots();
        return true;
    }

    [[nodiscard]] int in_flight(std::size_t s) const noexcept {
        return (requests_[2 * s] != MPI_REQUEST_NULL ? 1 : 0) + (requests_[2 * s + 1] != MPI_REQUEST_NULL ? 1 : 0);
    }

    // The requests still in flight, their scratch memory added to `memory`; the slots emptied.
    std::vector<MPI_Request> take_in_flight(std::vector<std::shared_ptr<void>>& memory) {
        std::vector<MPI_Request> out;
        for (std::size_t s = 0; s < slots_.size(); ++s) {
            if (in_flight(s) != 0) {
                memory.push_back(slots_[s].scratch);
            }
            slots_[s] = Slot{};
        }
        for (MPI_Request& r : requests_) {
            if (r != MPI_REQUEST_NULL) {
                out.push_back(std::exchange(r, MPI_REQUEST_NULL));
            }
        }
        finished_ = pieces_.size();
        next_ = pieces_.size();
        return out;
    }

    // A handle dropped with messages in flight (a failed MPI call): they may still complete.
    void leave_to_graveyard() noexcept {
        try {
            std::vector<std::shared_ptr<void>> memory;
            auto requests = take_in_flight(memory);
            if (!requests.empty()) {
                Graveyard::add({std::move(requests), std::move(memory)});
            }
        } catch (...) {  // out of memory: nothing better to do
        }
    }

    MPI_Comm comm_ = MPI_COMM_NULL;
    int ranks_ = 1;
    int rank_ = 0;
    bool mean_ = false;
    bool accepted_ = true;  // false between add_before_agreement and accept
    int levels_ = 0;        // log2(ranks) where the schedule is halving and doubling, else 0 (the ring)
    std::size_t piece_ = 1;
    std::string_view op_;
    std::vector<Piece> pieces_;
    std::vector<Slot> slots_;
    std::vector<MPI_Request> requests_;  // two per slot: the receive, then the send
    std::vector<int> indices_;
    std::size_t next_ = 0;      // the next piece to start
    std::size_t finished_ = 0;  // pieces reduced
};

/// What mpi_agree.hpp's agree does with the messages `engine` sent before it: receives them while
/// it waits, or takes them back when the call is refused.
template <MpiElement T, class Keep>
struct EarlyMessages {
    Allreduce<T>& engine;
    MPI_Comm comm;  ///< the caller's communicator
    const Deadline& deadline;
    Keep keep;  ///< returns the memory the messages read and write (for an operation given up on)
    void receive() { engine.receive_early(); }
    [[nodiscard]] std::uint64_t received() const noexcept { return engine.received_early(); }
    void take_back() { engine.take_back(comm, deadline, keep); }
};

}  // namespace mpi::detail

SYNCBLOB_END_NAMESPACE
