// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Internal, shared beyond its folder: used by the shared load across ranks (comm/mpi_checkpoint.hpp), so it
/// sits outside detail/; its names stay in a detail namespace and are no user API.
///
/// What every reader thread of a checkpoint load shares: the chunks it claims, the progress it
/// reports, reading a chunk's pieces into memory (an image of the arena, or raw bytes), and the
/// virtual clock of the simulated device (simulated_timeline.hpp), to which it reports its reads.

#include <atomic>
#include <bit>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>

#include "../core/element.hpp"
#include "../core/prefetch.hpp"
#include "../core/thread_pool.hpp"
#include "../io/read_runs.hpp"
#include "../sim/async_device.hpp"
#include "../sim/device.hpp"
#include "../sim/timeline.hpp"
#include "plan.hpp"
#include "reader.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace checkpoint::detail {

/// Chunks handed to reader threads one at a time, in order, until none is left or one reader failed.
class ChunkQueue {
public:
    explicit ChunkQueue(std::size_t chunks) noexcept : chunks_(chunks) {}
    /// The next chunk, or false when there is none (or the load failed).
    bool next(std::size_t& c) noexcept {
        if (failed_.load(std::memory_order_acquire)) {
            return false;
        }
        c = next_.fetch_add(1, std::memory_order_relaxed);
        return c < chunks_;
    }
    void fail() noexcept { failed_.store(true, std::memory_order_release); }

private:
    std::size_t chunks_;
    std::atomic<std::size_t> next_{0};
    std::atomic<bool> failed_{false};
};

/// The progress callback, called one call at a time with a growing count.
class Progress {
public:
    Progress(const std::function<void(std::uint64_t, std::uint64_t)>& callback, std::uint64_t total)
        : callback_(callback), total_(total) {}
    void add(std::uint64_t bytes) {
        std::lock_guard lock(mutex_);
        done_ += bytes;
        if (callback_) {
            callback_(done_, total_);
        }
    }
    [[nodiscard]] std::uint64_t done() const {
        std::lock_guard lock(mutex_);
        return done_;
    }

private:
    const std::function<void(std::uint64_t, std::uint64_t)>& callback_;
    std::uint64_t total_;
    std::uint64_t done_ = 0;
    mutable std::mutex mutex_;
};

/// The simulated device's virtual clock, seen from a load: reads are reported to it as host work,
/// and reader threads start when the load does. Nothing for other backends.
template <class Device>
struct LoadClock {
    static constexpr bool simulated =
        std::same_as<Device, SimulatedDevice> || std::same_as<Device, SimulatedAsyncDevice>;
    static double now() {
        if constexpr (simulated) {
            return SimulatedTimeline::now();
        } else {
            return 0;
        }
    }
    static void advance_to([[maybe_unused]] double t) {
        if constexpr (simulated) {
            SimulatedTimeline::advance_to(t);
        }
    }
    static void read([[maybe_unused]] std::size_t chunk, [[maybe_unused]] std::uint64_t bytes,
                     [[maybe_unused]] double seconds) {
        if constexpr (simulated) {
            SimulatedTimeline::host_work("read chunk " + std::to_string(chunk), bytes, seconds);
        }
    }
};

/// How many pieces ahead `for_each_piece` asks for the cache line a piece's read will write: at a
/// million tensors each piece's place in the arena is a miss, which the loop would otherwise wait
/// for one piece at a time.
inline constexpr std::size_t prefetch_distance = 16;

/// Goes through the pieces of direct chunk `c`, each to its place in `image` (an image of the arena
/// from the chunk's first byte; with `zero_gaps`, the padding between them is zeroed): a piece the
/// file holds as T's bytes are (no byte swap, no bool to normalise) is read through `runs`, any other
/// is given to `other(piece, dst)`, which converts it. Stops where `other` returns false. Only the
/// pieces are read (what a read needs is in them), the tensors' descriptions only to name one in an
/// error.
template <Element T, class Other>
void for_each_piece(const Checkpoint& ckpt, const Plan& plan, const Chunk& c, std::byte* image, bool zero_gaps,
                    io::detail::ReadRuns& runs, Other&& other) {
    constexpr bool as_is = std::endian::native == std::endian::little && !std::same_as<T, bool>;
    std::size_t at = 0;
    for (std::size_t p = c.first; p < c.end; ++p) {
        const Piece& piece = plan.pieces[p];
        if (p + prefetch_distance < c.end) {
            syncblob::detail::prefetch_for_write(image + plan.pieces[p + prefetch_distance].staging);
        }
        if (zero_gaps && piece.staging > at) {
            std::memset(image + at, 0, piece.staging - at);
        }
        auto* dst = reinterpret_cast<T*>(image + piece.staging);
        if (as_is && piece.dtype == dtype_of<T>) {
            // A plain read, which, unlike read_elements, does not advise huge pages on memory the
            // arena already touched.
            runs.read(ckpt.shard_input(piece.shard), piece.source, dst,
                      static_cast<std::size_t>(piece.count) * sizeof(T), ckpt.tensors()[piece.tensor].name);
        } else if (!other(piece, dst)) {
            return;
        }
        at = piece.staging + static_cast<std::size_t>(piece.count) * sizeof(T);
    }
}

/// Reads the pieces of direct chunk `c` into `image` as `read_image` does, one converting piece at
/// a time, in the file's order: the first bad byte is the one an error names.
template <Element T>
void read_image_in_order(const Checkpoint& ckpt, const Plan& plan, const Chunk& c, std::byte* image, bool zero_gaps,
                         io::detail::ConvertRule rule) {
    io::detail::ReadRuns runs;
    for_each_piece<T>(ckpt, plan, c, image, zero_gaps, runs, [&](const Piece& piece, T* dst) {
        runs.flush();  // in the file's order
        const Tensor& t = ckpt.tensors()[piece.tensor];
        ckpt.read_elements<T>(t, piece.first(t.offset), piece.count, dst, rule);
        return true;
    });
    runs.flush();
}

/// read_image's gathered reads: the small converting pieces staged (io::detail::StagedConversions),
/// every read through `runs`. Returns false where a conversion refused a value.
template <Element T>
bool read_image_gathered(const Checkpoint& ckpt, const Plan& plan, const Chunk& c, std::byte* image, bool zero_gaps,
                         io::detail::ConvertRule rule) {
    io::detail::ReadRuns runs;
    io::detail::StagedConversions<T> staged(runs, rule);
    for_each_piece<T>(ckpt, plan, c, image, zero_gaps, runs, [&](const Piece& piece, T* dst) {
        const auto count = static_cast<std::size_t>(piece.count);
        const std::size_t file_bytes = count * dtype_size(piece.dtype);
        const Tensor& t = ckpt.tensors()[piece.tensor];  // its name, not read unless an error needs it
        if (piece.dtype != dtype_of<T> && file_bytes <= io::detail::StagedConversions<T>::capacity) {
            staged.read(ckpt.shard_input(piece.shard), piece.source, piece.dtype, count, dst, t.name);
            return true;
        }
        if (!staged.convert()) {
            return false;
        }
        ckpt.read_elements<T>(t, piece.first(t.offset), piece.count, dst, rule);
        return true;
    });
    return staged.convert();
}

/// Reads the pieces of direct chunk `c` into `image`, an image of the arena from the chunk's first
/// byte (each piece where it sits in the arena, converted by `rule` where the dtype differs); with
/// `zero_gaps`, the padding between them is zeroed. The reads of pieces that lie together in a shard
/// are gathered into one system call per run (io::detail::ReadRuns), a small converting piece's too:
/// its file's bytes are staged, then converted. When any of it fails, the chunk is read again one
/// converting piece at a time (read_image_in_order), so that the error is the first in the file.
template <Element T>
void read_image(const Checkpoint& ckpt, const Plan& plan, const Chunk& c, std::byte* image, bool zero_gaps,
                io::detail::ConvertRule rule) {
    if constexpr (std::endian::native != std::endian::little) {  // the conversions read little-endian bytes
        read_image_in_order<T>(ckpt, plan, c, image, zero_gaps, rule);
    } else {
        io::detail::gathered_else_in_order(
            [&] { return read_image_gathered<T>(ckpt, plan, c, image, zero_gaps, rule); },
            [&] { read_image_in_order<T>(ckpt, plan, c, image, zero_gaps, rule); });
    }
}

/// The element conversion's rule that a checkpoint load's options ask for (`io::convert_rule` for io's).
[[nodiscard]] inline io::detail::ConvertRule convert_rule(const LoadOptions& options) noexcept {
    return options.saturate ? io::detail::ConvertRule::saturate : io::detail::ConvertRule::exact;
}

/// Reads every chunk of `plan` (all direct) into host memory on `threads` reader threads, each
/// claiming chunks in order: a chunk goes to `data` or `diff` (its buffer) at its arena offset.
/// Reports each chunk to `progress`. \throws what a reader throws (the others stop at their chunk).
template <Element T>
void read_into_host(const Checkpoint& ckpt, const Plan& plan, std::byte* data, std::byte* diff, unsigned threads,
                    Progress& progress, io::detail::ConvertRule rule) {
    ChunkQueue queue(plan.chunks.size());
    parallel::run(threads, [&](unsigned) {
        try {
            for (std::size_t c = 0; queue.next(c);) {
                const Chunk& ch = plan.chunks[c];
                read_image<T>(ckpt, plan, ch, (ch.diff ? diff : data) + ch.arena_offset, false, rule);
                progress.add(ch.source_bytes);
            }
        } catch (...) {
            queue.fail();
            throw;
        }
    });
}

/// Reads the raw bytes of the pieces of device-converting chunk `c` into `staging`.
inline void read_raw(const Checkpoint& ckpt, const Plan& plan, const Chunk& c, std::byte* staging) {
    io::detail::ReadRuns runs;
    for (std::size_t p = c.first; p < c.end; ++p) {
        const Piece& piece = plan.pieces[p];
        runs.read(ckpt.shard_input(piece.shard), piece.source, staging + piece.staging,
                  static_cast<std::size_t>(piece.count) * dtype_size(piece.dtype), ckpt.tensors()[piece.tensor].name);
    }
    runs.flush();
}

/// Seconds since `start`.
[[nodiscard]] inline double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace checkpoint::detail

SYNCBLOB_END_NAMESPACE
