// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// A small fixed-size description of an arena and of the call made on it, which every rank
/// gathers from every other before any rank's data changes: arenas or calls that differ between
/// ranks are then a `StateError` raised on every rank alike, not a hang or a crash.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "../../arena/parameter_arena.hpp"
#include "../../core/element.hpp"
#include "../../core/error.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace comm::detail {

/// Plain bytes, the same layout on every rank of one program.
struct ArenaDescriptor {
    std::uint64_t intact = 0;  ///< 1 when the arena is sealed and its blobs are as seal laid them out
    std::uint64_t blobs = 0;
    std::uint64_t elements = 0;
    std::uint64_t bytes = 0;
    std::uint64_t layout = 0;     ///< a hash of every blob's shape, in order
    std::uint64_t operation = 0;  ///< which call (allreduce, broadcast, bucketed allreduce)
    std::uint64_t argument = 0;   ///< its argument (the reduction, the root)
    std::uint64_t first_bucket = 0;
    std::uint64_t bucket = 0;
    std::uint64_t piece = 0;   ///< an MPI all-reduce's Options::piece_bytes, or automatic_piece when unset
    std::uint64_t failed = 0;  ///< 1 when this rank's own preparation (a staging copy) failed
    /// 1 when the call's collectives are MPI's non-blocking ones (a timeout is set): a blocking and a
    /// non-blocking collective never match, so every rank must choose the same
    std::uint64_t nonblocking = 0;
    /// 1 when this rank may reduce some of the data in device memory (a sum through a device-aware
    /// MPI): ranks may differ here; the bucketed all-reduce then uses MPI's collectives on every rank
    std::uint64_t device = 0;
    /// 1 when this rank set a timeout, and its milliseconds (two's complement): a timeout that is
    /// not positive is refused on every rank alike (see check_arguments)
    std::uint64_t timeout_set = 0;
    std::uint64_t timeout_ms = 0;
    /// the host this rank runs on, as a hash of its name (MPI); ranks may differ here
    std::uint64_t host = 0;
    /// the pieces whose first messages this rank sent before the agreement (an MPI mean or sum on a
    /// communicator it has used: mpi_ring.hpp); ranks may differ here, and a refused call takes
    /// them back (mpi_agree.hpp)
    std::uint64_t early = 0;
    char dtype[8] = {};
};

/// `ArenaDescriptor::piece` of a call whose `Options::piece_bytes` is unset: the pieces are then
/// chosen from where the ranks run, alike on every rank.
inline constexpr std::uint64_t automatic_piece = ~std::uint64_t{0};

/// 64-bit FNV-1a: the fingerprints the agreement compares (an arena's layout, a checkpoint's
/// tensors, a host's name).
class Fnv1a {
public:
    void byte(unsigned char b) noexcept { h_ = (h_ ^ b) * 1099511628211ull; }
    /// The 8 bytes of `v`, least significant first.
    void word(std::uint64_t v) noexcept {
        for (int i = 0; i < 8; ++i) {
            byte(static_cast<unsigned char>(v >> (8 * i)));
        }
    }
    [[nodiscard]] std::uint64_t value() const noexcept { return h_; }

private:
    std::uint64_t h_ = 14695981039346656037ull;
};

/// Puts a call's timeout into its descriptor.
inline void note_timeout(ArenaDescriptor& d, std::optional<std::chrono::milliseconds> timeout) noexcept {
    d.timeout_set = timeout ? 1 : 0;
    d.timeout_ms = timeout ? static_cast<std::uint64_t>(static_cast<std::int64_t>(timeout->count())) : 0;
}

/// A timeout the host can wait for: set and positive. (One that is set and not positive is
/// refused after the agreement; until then the rank that passed it waits without a bound.)
inline bool usable_timeout(std::optional<std::chrono::milliseconds> timeout) noexcept {
    return timeout && timeout->count() > 0;
}

enum class CommOperation : std::uint64_t { allreduce = 1, broadcast = 2, bucketed_allreduce = 3, shared_load = 4 };

inline constexpr std::string_view operation_name(std::uint64_t op) noexcept {
    switch (op) {
        case 1:
            return "allreduce_diff";
        case 2:
            return "broadcast_data";
        case 3:
            return "iallreduce_diff";
        case 4:
            return "load_shared";
        default:
            return "?";
    }
}

/// This rank's descriptor; `problem` receives what is wrong with the arena locally (unsealed,
/// a blob reshaped after seal...), empty when nothing is.
template <Element T, SyncedAllocator A>
ArenaDescriptor describe(const ParameterArena<T, A>& arena, std::string_view op, CommOperation operation,
                         std::uint64_t argument, std::string& problem, std::uint64_t first_bucket = 0,
                         std::uint64_t bucket = 0) {
    ArenaDescriptor d;
    try {
        arena.check(op);
        d.intact = 1;
    } catch (const StateError& e) {
        problem = e.what();
    }
    d.blobs = arena.size();
    d.elements = static_cast<std::uint64_t>(arena.count());
    d.bytes = arena.bytes();
    Fnv1a h;  // over the extents, each shape ended by its rank
    for (const auto& shape : arena.shapes()) {
        for (const std::int64_t extent : shape) {
            h.word(static_cast<std::uint64_t>(extent));
        }
        h.word(0xFFFF'0000ull + shape.rank());
    }
    d.layout = h.value();
    d.operation = static_cast<std::uint64_t>(operation);
    d.argument = argument;
    d.first_bucket = first_bucket;
    d.bucket = bucket;
    const std::string_view name = element_name<T>();
    std::memcpy(d.dtype, name.data(), std::min(name.size(), sizeof(d.dtype) - 1));
    return d;
}

inline std::string describe_text(const ArenaDescriptor& d) {
    return std::to_string(d.blobs) + " blobs, " + std::to_string(d.elements) + " elements of " + std::string(d.dtype) +
           (d.intact != 0 ? "" : " (not usable: unsealed, or changed after seal)");
}

/// A call's arguments as a message names them: "Reduce::mean, first bucket 1024 bytes, buckets of
/// 512 bytes, pieces of 4194304 bytes" (the enumerators by name; a root as "root 2"; pieces left
/// unset as such).
inline std::string arguments_text(const ArenaDescriptor& d) {
    const auto what = static_cast<CommOperation>(d.operation);
    std::string out;
    if (what == CommOperation::broadcast) {
        out = "root " + std::to_string(static_cast<std::int64_t>(d.argument));
    } else {
        out = d.argument == 0   ? "Reduce::sum"
              : d.argument == 1 ? "Reduce::mean"
                                : "reduction " + std::to_string(d.argument) + " (no Reduce)";
    }
    if (what == CommOperation::bucketed_allreduce) {
        out += ", first bucket " + std::to_string(d.first_bucket) + " bytes, buckets of " + std::to_string(d.bucket) +
               " bytes";
    }
    if (d.piece == automatic_piece) {  // MPI's pieces (NCCL has none)
        out += ", pieces as the hosts suggest (Options::piece_bytes unset)";
    } else if (d.piece != 0) {
        out += ", pieces of " + std::to_string(d.piece) + " bytes";
    }
    return out;
}

/// Every rank computes the same verdict from the same gathered descriptors: empty when they agree,
/// else a message naming the first rank that differs from rank 0 and how. `rank` and `problem`
/// add this rank's own local reason, when it has one.
inline std::string disagreement(std::span<const ArenaDescriptor> all, std::string_view op, int rank,
                                const std::string& problem) {
    const ArenaDescriptor& r0 = all[0];
    std::string what;
    for (std::size_t r = 0; r < all.size() && what.empty(); ++r) {
        const ArenaDescriptor& d = all[r];
        const std::string who = "rank " + std::to_string(r);
        if (d.intact == 0) {
            what = who + "'s arena cannot be used: " + describe_text(d);
        } else if (std::strncmp(d.dtype, r0.dtype, sizeof d.dtype) != 0 || d.blobs != r0.blobs ||
                   d.elements != r0.elements || d.bytes != r0.bytes) {
            what = "the arenas differ: rank 0 has " + describe_text(r0) + ", " + who + " has " + describe_text(d);
        } else if (d.layout != r0.layout) {
            what = "the arenas differ: " + who + "'s blob shapes differ from rank 0's (" + describe_text(d) + ")";
        } else if (d.operation != r0.operation) {
            what = "the ranks disagree on the call: rank 0 calls " + std::string(operation_name(r0.operation)) + ", " +
                   who + " calls " + std::string(operation_name(d.operation));
        } else if (d.nonblocking != r0.nonblocking) {
            what = "the ranks disagree on the timeout: rank 0 " +
                   std::string(r0.nonblocking != 0 ? "sets" : "leaves out") + " Options::timeout, " + who +
                   (d.nonblocking != 0 ? " sets it" : " leaves it out") +
                   " (with a timeout the collectives are MPI's non-blocking ones, which never match blocking ones)";
        } else if (d.operation == static_cast<std::uint64_t>(CommOperation::shared_load) && d.argument != r0.argument &&
                   d.failed == 0 && r0.failed == 0) {  // (a rank that failed is named by settle)
            what = "the ranks' checkpoints differ: " + who +
                   "'s tensors differ from rank 0's in their dtypes, their diffs or their places in the shard files";
        } else if ((d.argument != r0.argument &&
                    d.operation != static_cast<std::uint64_t>(CommOperation::shared_load)) ||
                   d.first_bucket != r0.first_bucket || d.bucket != r0.bucket || d.piece != r0.piece) {
            what = "the ranks disagree on the call's arguments: rank 0 passes " + arguments_text(r0) + ", " + who +
                   " passes " + arguments_text(d);
        }
    }
    if (what.empty()) {
        return {};
    }
    std::string message = std::string(op) + ": " + what + "; no rank's data was changed";
    if (!problem.empty()) {
        message += " (on this rank, " + std::to_string(rank) + ": " + problem + ")";
    }
    return message;
}

/// After the descriptors are gathered: throws the same error on every rank when some rank passed an
/// argument that is wrong in itself, whatever the others passed (checked here, not before the
/// gathering, where a rank that threw would leave the others waiting in it): a broadcast root
/// outside [0, ranks) is an IndexError, a bucket limit of 0 a ShapeError, a reduction that is not a
/// `Reduce` a StateError, a timeout that is not positive an OptionError. The first such rank, in
/// rank order, is named.
inline void check_arguments(std::span<const ArenaDescriptor> all, std::string_view op) {
    const auto ranks = static_cast<std::int64_t>(all.size());
    for (std::size_t r = 0; r < all.size(); ++r) {
        const ArenaDescriptor& d = all[r];
        const std::string who = " (passed by rank " + std::to_string(r) + "); no rank's data was changed";
        if (d.timeout_set != 0 && static_cast<std::int64_t>(d.timeout_ms) <= 0) {
            throw OptionError(
                std::string(op) + ": Options::timeout of " + std::to_string(static_cast<std::int64_t>(d.timeout_ms)) +
                " ms: a timeout must be positive (leave it unset to wait as long as the engine does)" + who);
        }
        const auto what = static_cast<CommOperation>(d.operation);
        if (what == CommOperation::shared_load) {
            continue;  // its argument is the checkpoint's fingerprint, compared in disagreement()
        }
        if (what == CommOperation::broadcast) {
            const auto root = static_cast<std::int64_t>(d.argument);
            if (root < 0 || root >= ranks) {
                throw IndexError(std::string(op) + ": root " + std::to_string(root) +
                                 " is not a rank of the communicator [0, " + std::to_string(ranks) + ")" + who);
            }
            continue;
        }
        if (d.argument > 1) {
            throw StateError(std::string(op) + ": reduction " + std::to_string(d.argument) +
                             " is neither Reduce::sum (0) nor Reduce::mean (1)" + who);
        }
        if (what == CommOperation::bucketed_allreduce && (d.first_bucket == 0 || d.bucket == 0)) {
            throw ShapeError(std::string(op) + ": a bucket limit of 0 bytes (first " + std::to_string(d.first_bucket) +
                             ", then " + std::to_string(d.bucket) + ")" + who);
        }
    }
}

/// After the descriptors are gathered: throws as check_arguments; then the same StateError on every
/// rank when they disagree; otherwise, when some rank's own preparation failed (`local_failure` on that rank, see
/// `prepare`), that rank rethrows its exception and every other rank throws a StateError naming it.
inline void settle(std::span<const ArenaDescriptor> all, std::string_view op, int rank, const std::string& problem,
                   const std::exception_ptr& local_failure) {
    check_arguments(all, op);
    std::string message = disagreement(all, op, rank, problem);
    for (std::size_t r = 0; r < all.size() && message.empty(); ++r) {
        if (all[r].failed != 0) {
            if (local_failure) {
                std::rethrow_exception(local_failure);  // this rank's own error, with its own type
            }
            message = std::string(op) + ": rank " + std::to_string(r) +
                      " failed before communicating (its own exception says why); no rank's data was changed";
        }
    }
    if (!message.empty()) {
        throw StateError(message);
    }
}

/// Runs `prepare` (this rank's local work before a collective: staging copies, waiting for a
/// stream) when the arena is usable, and returns what it threw instead of throwing it, for `agree`.
template <Element T, SyncedAllocator A, class Fn>
std::exception_ptr prepare(const ParameterArena<T, A>& arena, std::string_view op, Fn fn) {
    try {
        arena.check(op);
    } catch (const StateError&) {
        return nullptr;  // agree reports it, on every rank
    }
    try {
        fn();
    } catch (...) {
        return std::current_exception();
    }
    return nullptr;
}

}  // namespace comm::detail

SYNCBLOB_END_NAMESPACE
