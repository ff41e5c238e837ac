// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The agreement every MPI call of `syncblob/comm/mpi.hpp` opens with: each rank's descriptor of its
/// arena and of the call, gathered from every rank before any rank's data changes, within the
/// call's deadline; every argument that can differ between ranks is checked there, on every rank
/// alike. (A mean may send its first messages before it: a refused call takes them back here.)

#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "../../arena/parameter_arena.hpp"
#include "../../core/sync_audit.hpp"
#include "../mpi_options.hpp"
#include "agreement.hpp"
#include "mpi_call.hpp"
#include "mpi_private_comm.hpp"
#include "mpi_ring.hpp"
#include "mpi_wait.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace mpi::detail {

/// What a call's descriptor says of `Options::piece_bytes`: its value, or that it is unset.
inline std::uint64_t requested_piece(std::optional<std::size_t> piece_bytes) noexcept {
    return piece_bytes ? static_cast<std::uint64_t>(*piece_bytes) : comm::detail::automatic_piece;
}

/// This process's host as the agreement tells it apart: a hash of MPI_Get_processor_name (the host
/// name in Open MPI). Ranks whose hashes differ run on different hosts; should two hosts' names
/// hash alike, the call takes them for one host, and only chooses smaller pieces (Agreement).
inline std::uint64_t host_fingerprint() {
    static const std::uint64_t fingerprint = [] {
        char name[MPI_MAX_PROCESSOR_NAME] = {};
        int length = 0;
        if (MPI_Get_processor_name(name, &length) != MPI_SUCCESS) {
            length = 0;
        }
        comm::detail::Fnv1a h;
        for (int i = 0; i < length; ++i) {
            h.byte(static_cast<unsigned char>(name[i]));
        }
        return h.value();
    }();
    return fingerprint;
}

/// What every rank learns from the agreement, alike.
struct Agreement {
    bool device = false;        ///< some rank may reduce some of the data in device memory (`Call::device`)
    bool across_hosts = false;  ///< the ranks run on more than one host
    /// The bytes of a piece: `requested` (`Options::piece_bytes`), or when it is unset the default
    /// for where the ranks run (mpi::piece_bytes_within_host or mpi::piece_bytes_across_hosts).
    [[nodiscard]] std::size_t piece_bytes(std::optional<std::size_t> requested) const noexcept {
        return requested.value_or(across_hosts ? mpi::piece_bytes_across_hosts : mpi::piece_bytes_within_host);
    }
};

/// The attribute of a caller's communicator that remembers what its last agreement learned: where
/// the ranks run (bits 0-1: 1, one host; 2, more than one), which no later call can change, and
/// whether some rank may reduce in device memory (bit 2: Agreement::device).
inline int learned_key() {
    static const int key = [] {
        int k = MPI_KEYVAL_INVALID;
        (void)MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &k, nullptr);
        return k;
    }();
    return key;
}

/// What the last agreement on `comm` learned (learned_key's bits); nothing before the first.
inline std::optional<std::intptr_t> learned(MPI_Comm comm) {
    void* value = nullptr;
    int found = 0;
    if (MPI_Comm_get_attr(comm, learned_key(), &value, &found) != MPI_SUCCESS || found == 0) {
        return std::nullopt;
    }
    return reinterpret_cast<std::intptr_t>(value);
}

/// Whether the ranks of `comm` run on more than one host, as an earlier agreement learned; nothing
/// before the first.
inline std::optional<bool> known_across_hosts(MPI_Comm comm) {
    const std::optional<std::intptr_t> bits = learned(comm);
    return bits ? std::optional<bool>((*bits & 3) == 2) : std::nullopt;
}

/// Whether the last agreement on `comm` said that some rank may reduce in device memory, so that a
/// sum there used MPI's collectives on every rank (Agreement::device).
inline bool last_chose_device(MPI_Comm comm) {
    const std::optional<std::intptr_t> bits = learned(comm);
    return bits && (*bits & 4) != 0;
}

/// Where a call may send its first messages before its agreement (mpi_ring.hpp): the private
/// communicator, and the bytes of a piece.
struct EarlyStart {
    MPI_Comm mine = MPI_COMM_NULL;
    std::size_t piece_bytes = 0;
};

/// Whether a call on `comm` may send its first messages before its agreement, and where: only on a
/// communicator an earlier call has agreed on (its private communicator made, and where its ranks
/// run known, unless `piece_bytes` is set), so that the pieces are the ones the agreement would
/// choose. Not in the sync audit's error mode: there the agreement's wait throws SyncError before
/// any rank learns what the others sent early. \throws StateError when `comm` is out of step.
inline std::optional<EarlyStart> early_start(MPI_Comm comm, std::optional<std::size_t> piece_bytes,
                                             std::string_view op) {
    if (audit::mode() == audit::Mode::error) {
        return std::nullopt;
    }
    require_in_step(comm, op);
    const MPI_Comm mine = existing_private_comm(comm);
    const std::optional<bool> across = known_across_hosts(comm);
    if (mine == MPI_COMM_NULL || !(across || piece_bytes)) {
        return std::nullopt;
    }
    return EarlyStart{mine, Agreement{false, across.value_or(false)}.piece_bytes(piece_bytes)};
}

/// Receives and drops the `count` early messages (mpi_ring.hpp: the first of each piece a call sent
/// before its agreement) that rank `from` sent this rank on the private communicator `mine`, for a call
/// the agreement refused (or moved to MPI's collectives). Each is matched by a probe and received
/// whole, into a block of the size it has: a receive of the size this rank would expect could meet a
/// longer one (mpi_ring.hpp). `count` is at most the window a rank starts (ring_pieces_in_flight); the
/// pieces whose bits are set in `received` this rank's own early handle is receiving
/// (Allreduce::received_early).
/// \throws CommError; TimeoutError when `deadline` passes first (as mpi_wait.hpp's complete).
inline void consume_early(MPI_Comm mine, int from, std::uint64_t count, std::uint64_t received, MPI_Comm comm,
                          const Deadline& deadline, std::string_view op) {
    if (mine == MPI_COMM_NULL || from < 0) {
        return;
    }
    count = std::min<std::uint64_t>(count, ring_pieces_in_flight);
    for (std::uint64_t piece = 0; piece < count; ++piece) {
        if (((received >> piece) & 1) != 0) {
            continue;
        }
        const int tag = piece_tag(static_cast<std::size_t>(piece));
        MPI_Message message = MPI_MESSAGE_NULL;
        MPI_Status status{};
        audit::note(audit::Wait::collective);  // with a deadline too: the polling below is the same wait
        if (!deadline.bounded()) {
            check(MPI_Mprobe(from, tag, mine, &message, &status), op, "MPI_Mprobe");
        } else {
            for (int found = 0; found == 0;) {
                check(MPI_Improbe(from, tag, mine, &found, &message, &status), op, "MPI_Improbe");
                if (found == 0 && deadline.passed()) {
                    std::vector<MPI_Request> none;
                    give_up(none, {}, comm, deadline, op, "MPI_Improbe", "a refused call's early messages");
                }
                if (found == 0) {
                    std::this_thread::yield();
                }
            }
        }
        int bytes = 0;
        check(MPI_Get_count(&status, MPI_BYTE, &bytes), op, "MPI_Get_count");
        std::vector<std::byte> sink(static_cast<std::size_t>(std::max(bytes, 0)));
        check(MPI_Mrecv(sink.data(), bytes, MPI_BYTE, &message, MPI_STATUS_IGNORE), op, "MPI_Mrecv");
    }
}

/// What a call puts into the agreement besides its arena.
struct Call {
    comm::detail::CommOperation what{};
    std::uint64_t argument = 0;  ///< the reduction, or the root (as a two's-complement int)
    std::uint64_t first_bucket = 0;
    std::uint64_t bucket = 0;
    std::uint64_t piece = 0;   ///< requested_piece(Options::piece_bytes), or 0 for a call without pieces
    bool nonblocking = false;  ///< the call's collectives are non-blocking ones (a timeout is set)
    bool device = false;       ///< this rank may reduce some of the data in device memory
    std::size_t early = 0;     ///< pieces whose first messages this rank sent before the agreement
};

/// Gathers every rank's descriptor of the arena and the call, then settles them on every rank
/// alike (comm::detail::settle): a rank's wrong argument (a root outside the communicator, a
/// bucket limit of 0) is the same typed error on every rank; arenas or calls that differ the same
/// StateError; when some rank's own preparation failed (`local_failure`, caught by the caller
/// before this call), that rank rethrows its exception and every other rank throws a StateError
/// naming it. The gathering is an MPI_Iallgather, with a bounded `deadline` polled until it passes
/// (TimeoutError: a rank never joined).
/// `early`, for a call that sent messages before it (mpi_ring.hpp), or nullptr: while the
/// gathering is waited for, `early.receive()` receives those sent to this rank whose sizes it has
/// checked; when the call is refused, this rank consumes the others sent to it (consume_early, but
/// for the pieces `early.received()` names), then `early.take_back()` waits for its own to be
/// consumed, and only then throws: no rank's data has changed, and no message is left behind. So
/// too, without throwing, when some rank may reduce in device memory (`Agreement::device`: every
/// rank then uses MPI's collectives, not the engine that sent them).
/// Returns what the descriptors say of every rank (Agreement).
/// \throws StateError first when this rank gave an earlier call on `comm` up (see mpi_wait.hpp).
template <Element T, SyncedAllocator A, class Early = std::nullptr_t>
Agreement agree(const ParameterArena<T, A>& arena, MPI_Comm comm, std::string_view op, const Call& call,
                const Deadline& deadline, const std::exception_ptr& local_failure = nullptr, Early early = nullptr) {
    constexpr bool sent_early = !std::is_null_pointer_v<Early>;
    using Descriptor = comm::detail::ArenaDescriptor;
    const audit::Operation audited("mpi agreement");  // a wait no caller asks for
    (void)Graveyard::reap();
    require_in_step(comm, op);
    std::string problem;
    auto mine = comm::detail::describe(arena, op, call.what, call.argument, problem, call.first_bucket, call.bucket);
    mine.piece = call.piece;
    mine.nonblocking = call.nonblocking ? 1 : 0;
    mine.device = call.device ? 1 : 0;
    mine.failed = local_failure ? 1 : 0;
    mine.host = host_fingerprint();
    mine.early = call.early;
    comm::detail::note_timeout(mine, deadline.bounded() ? std::optional(deadline.timeout()) : std::nullopt);
    int size = 0;
    int rank = 0;
    check(MPI_Comm_size(comm, &size), op, "MPI_Comm_size");
    check(MPI_Comm_rank(comm, &rank), op, "MPI_Comm_rank");
    constexpr int bytes = static_cast<int>(sizeof(Descriptor));
    // On the heap: given up on, MPI may still write the result when the missing rank joins.
    auto gathered = std::make_shared<std::pair<Descriptor, std::vector<Descriptor>>>(
        mine, std::vector<Descriptor>(static_cast<std::size_t>(size)));
    // Always the non-blocking gather, waited for as the deadline says: ranks that differ in their
    // timeouts still match here (a blocking and a non-blocking collective never match), and learn
    // from the descriptors whether the collectives after it may be blocking.
    std::vector<MPI_Request> request(1, MPI_REQUEST_NULL);
    audit::note(audit::Wait::collective);  // before the gathering is posted (complete)
    check(MPI_Iallgather(&gathered->first, bytes, MPI_BYTE, gathered->second.data(), bytes, MPI_BYTE, comm,
                         request.data()),
          op, "MPI_Iallgather");
    const auto keep = [&] { return std::vector<std::shared_ptr<void>>{gathered}; };
    if constexpr (sent_early) {
        complete(request, comm, deadline, op, "MPI_Iallgather", "every rank to join the agreement", keep,
                 [&] { early.receive(); });
    } else {
        complete(request, comm, deadline, op, "MPI_Iallgather", "every rank to join the agreement", keep);
    }
    const auto& all = gathered->second;
    const auto take_back_early = [&] {
        const int from = first_sender(rank, size);
        if (from >= 0 && all[static_cast<std::size_t>(from)].early != 0) {
            std::uint64_t received = 0;
            if constexpr (sent_early) {
                received = early.received();
            }
            consume_early(existing_private_comm(comm), from, all[static_cast<std::size_t>(from)].early, received, comm,
                          deadline, op);
        }
        if constexpr (sent_early) {
            early.take_back();  // this rank's own, consumed by the ranks they went to
        }
    };
    try {
        comm::detail::settle(all, op, rank, problem, local_failure);
    } catch (...) {
        take_back_early();
        throw;
    }
    const Agreement agreed{std::ranges::any_of(all, [](const Descriptor& d) { return d.device != 0; }),
                           std::ranges::any_of(all, [&](const Descriptor& d) { return d.host != all.front().host; })};
    if (agreed.device) {
        take_back_early();  // every rank uses MPI's collectives (Agreement::device), not the engine that sent them
    }
    const auto bits = static_cast<std::intptr_t>((agreed.across_hosts ? 2 : 1) | (agreed.device ? 4 : 0));
    check(MPI_Comm_set_attr(comm, learned_key(), reinterpret_cast<void*>(bits)),  // NOLINT(performance-no-int-to-ptr)
          op, "MPI_Comm_set_attr");
    return agreed;
}

}  // namespace mpi::detail

SYNCBLOB_END_NAMESPACE
