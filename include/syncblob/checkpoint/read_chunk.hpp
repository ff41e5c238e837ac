// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Internal, shared beyond its folder: used by the shared load across ranks (comm/mpi_checkpoint.hpp), so it
/// sits outside detail/; its names stay in a detail namespace and are no user API.
///
/// What every reader thread of a checkpoint load shares: the chunks it claims, the progress it
/// reports, reading a chunk's pieces into memory (an image of the arena, or raw bytes), and the
/// virtual clock of the simulated device (simulated_timeline.hpp), to which it reports its reads.

#include <sys/uio.h>

#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <utility>

#include "../core/element.hpp"
#include "../core/thread_pool.hpp"
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

/// Reads small pieces that lie next to each other in a shard (or a few bytes apart) together: one
/// scattered read per run of them, where a read per piece costs a system call per tensor (at a
/// million one-element tensors, most of a load's time). A piece is read when its run is: when a
/// piece joins that does not fit the run, or on `flush()`.
class PieceRuns {
public:
    /// A piece of at least this many bytes is read on its own: the call costs little beside its bytes.
    static constexpr std::size_t small_piece = std::size_t{64} << 10;
    /// Bytes between two pieces that a run reads and drops rather than end there.
    static constexpr std::size_t max_gap = 4096;

    explicit PieceRuns(const Checkpoint& ckpt) noexcept : ckpt_(ckpt) {}
    PieceRuns(const PieceRuns&) = delete;
    PieceRuns& operator=(const PieceRuns&) = delete;
    ~PieceRuns() = default;

    /// Reads `bytes` bytes of `t` from its byte `first` into `dst`: now, or with the run it joins
    /// (`bytes` below `small_piece`). \throws as `Checkpoint::read_bytes` (this piece's or an
    /// earlier one's error).
    void read(const Tensor& t, std::uint64_t first, std::byte* dst, std::size_t bytes) {
        if (bytes >= small_piece) {
            flush();
            ckpt_.read_bytes(t, first, dst, bytes);
            return;
        }
        const std::uint64_t at = t.offset + first;
        if (n_ != 0 && (t.shard != shard_ || at < end_ || at - end_ > max_gap || n_ + 2 > parts_.size())) {
            flush();
        }
        if (n_ == 0) {
            shard_ = t.shard;
            offset_ = end_ = at;
        }
        if (at > end_) {  // the bytes between: read into gap_, dropped (the tensor after them names an error)
            add(gap_.data(), static_cast<std::size_t>(at - end_), t);
        }
        add(dst, bytes, t);
        end_ = at + bytes;
    }

    /// Reads the run gathered so far. \throws as `read`.
    void flush() {
        if (n_ == 0) {
            return;
        }
        const std::size_t n = std::exchange(n_, 0);
        ckpt_.read_scattered(shard_, offset_, std::span(parts_.data(), n),
                             [&](std::size_t k) { return "tensor \"" + tensors_[k]->name + "\""; });
    }

private:
    void add(void* dst, std::size_t bytes, const Tensor& t) noexcept {
        parts_[n_] = ::iovec{dst, bytes};
        tensors_[n_] = &t;
        ++n_;
    }

    const Checkpoint& ckpt_;
    std::size_t shard_ = 0;
    std::uint64_t offset_ = 0;  // where the run starts in its shard
    std::uint64_t end_ = 0;     // where it ends
    std::size_t n_ = 0;         // parts gathered
    std::array<::iovec, io::detail::InputFile::max_parts> parts_{};
    std::array<const Tensor*, io::detail::InputFile::max_parts> tensors_{};  // what each part holds
    std::array<std::byte, max_gap> gap_{};
};

/// Reads the pieces of direct chunk `c` into `image`, an image of the arena from the chunk's first
/// byte (each piece where it sits in the arena, converted by `rule` where the dtype differs); with
/// `zero_gaps`, the padding between them is zeroed.
template <Element T>
void read_image(const Checkpoint& ckpt, const Plan& plan, const Chunk& c, std::byte* image, bool zero_gaps,
                io::detail::ConvertRule rule) {
    PieceRuns runs(ckpt);
    std::size_t at = 0;
    for (std::size_t p = c.first; p < c.end; ++p) {
        const Piece& piece = plan.pieces[p];
        if (zero_gaps && piece.staging > at) {
            std::memset(image + at, 0, piece.staging - at);
        }
        const Tensor& t = ckpt.tensors()[piece.tensor];
        const std::size_t bytes = static_cast<std::size_t>(piece.count) * sizeof(T);
        // The file's bytes are T's as they are (no byte swap, no bool to normalise): a plain read,
        // which, unlike read_elements, does not advise huge pages on memory the arena already touched.
        constexpr bool as_is = std::endian::native == std::endian::little && !std::same_as<T, bool>;
        if (as_is && t.dtype == dtype_of<T>) {
            runs.read(t, piece.first * sizeof(T), image + piece.staging, bytes);
        } else {
            runs.flush();  // in the file's order: the first bad byte is the one an error names
            ckpt.read_elements<T>(t, piece.first, piece.count, reinterpret_cast<T*>(image + piece.staging), rule);
        }
        at = piece.staging + bytes;
    }
    runs.flush();
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
    PieceRuns runs(ckpt);
    for (std::size_t p = c.first; p < c.end; ++p) {
        const Piece& piece = plan.pieces[p];
        const auto& t = ckpt.tensors()[piece.tensor];
        const std::size_t item = dtype_size(t.dtype);
        runs.read(t, piece.first * item, staging + piece.staging, static_cast<std::size_t>(piece.count) * item);
    }
    runs.flush();
}

/// Seconds since `start`.
[[nodiscard]] inline double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace checkpoint::detail

SYNCBLOB_END_NAMESPACE
