// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// A checkpoint load into the device side of an arena. Reader threads claim chunks in order; each
/// reads its chunk into one of its own pinned staging blocks (after waiting, on the host, for the
/// copy that last read that block) and issues at once the chunk's one host-to-device copy on the
/// copy stream (and, for a device-converting chunk, its conversion kernels), then records an event
/// for the chunk and goes on to the next while the copy runs. The caller then makes every stream
/// the arena's blobs use wait for those events, so work on a blob runs after its bytes arrived.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <exception>
#include <optional>
#include <vector>

#include "../../core/element.hpp"
#include "../../core/thread_pool.hpp"
#include "../../memory/device_backend.hpp"
#include "../device_convert.hpp"
#include "../plan.hpp"
#include "../read_chunk.hpp"
#include "../reader.hpp"
#include "staging.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace checkpoint::detail {

/// The device of an arena's blocks: that of its first blob with a device side (-1 when none has one).
template <class Arena>
[[nodiscard]] int arena_device(const Arena& arena) {
    int device = -1;
    for (std::size_t i = 0; i < arena.size() && device < 0; ++i) {
        const auto& buffer = arena[i].data_buffer();
        device = buffer ? buffer->device_id() : -1;
    }
    return device;
}

/// The streams of the buffers a load writes (every blob's data, and the diffs `with_diff` names),
/// each once.
template <class Arena>
[[nodiscard]] std::vector<typename Arena::stream_type> load_streams(const Arena& arena,
                                                                    const std::vector<bool>& with_diff) {
    std::vector<typename Arena::stream_type> streams;
    const auto use = [&streams](typename Arena::stream_type s) {
        if (streams.empty() || !(streams.back() == s)) {  // most blobs share their neighbour's
            streams.push_back(s);
        }
    };
    for (std::size_t i = 0; i < arena.size(); ++i) {
        use(arena[i].data_buffer()->stream());
        if (with_diff[i]) {
            use(arena[i].diff_buffer()->stream());
        }
    }
    keep_distinct(streams);
    return streams;
}

template <Element T, SyncedAllocator A>
class DeviceLoad {
    using Device = typename A::device_backend;
    using Pool = staging_pool_t<typename A::host_allocator, Device>;
    using Clock = LoadClock<Device>;

public:
    using stream_type = typename Device::stream_type;

    /// Where the chunks go: the device addresses of the arena's data and diff buffers.
    struct Targets {
        std::byte* data = nullptr;
        std::byte* diff = nullptr;
    };

    DeviceLoad(const Checkpoint& ckpt, const Plan& plan, Targets targets, stream_type stream, int device,
               io::detail::ConvertRule rule)
        : ckpt_(ckpt),
          plan_(plan),
          targets_(targets),
          stream_(stream),
          device_(device),
          rule_(rule),
          events_(plan.chunks.size()) {}

    /// Reads and copies every chunk with `threads` readers of `blocks` staging blocks of
    /// `block_bytes` each. \throws what a reader throws (the chunks issued before stay issued).
    void run(unsigned threads, unsigned blocks, std::size_t block_bytes, Progress& progress) {
        if (plan_.chunks.empty()) {
            return;
        }
        bool device_slots = false;
        for (const auto& c : plan_.chunks) {
            device_slots = device_slots || c.device_convert;
        }
        Staging<Pool, Device> staging(std::size_t{threads} * blocks, block_bytes, device_slots, stream_);
        ChunkQueue queue(plan_.chunks.size());
        const double start = Clock::now();
        std::vector<double> ends(threads, start);
        parallel::run(threads, [&](unsigned part) {
            const DeviceGuard<Device> guard(device_);  // a pool thread starts on another device
            Clock::advance_to(start);
            try {
                std::size_t c = 0;
                for (unsigned k = 0; queue.next(c); k = (k + 1) % blocks) {
                    chunk(c, staging, std::size_t{part} * blocks + k, progress);
                }
            } catch (...) {
                queue.fail();
                throw;
            }
            ends[part] = Clock::now();
        });
        for (const double end : ends) {
            Clock::advance_to(end);
        }
    }

    /// Work issued on `stream` from now on runs after every chunk copied (and converted).
    void order(stream_type stream) {
        if (stream == stream_) {
            return;  // stream order
        }
        for (auto& e : events_) {
            if (e) {
                Device::stream_wait(stream, *e);
            }
        }
    }

    [[nodiscard]] std::size_t copies() const noexcept { return copies_.load(); }
    [[nodiscard]] std::size_t conversions() const noexcept { return conversions_.load(); }

private:
    // Reads chunk `c` into staging block `slot` and issues its copy (and conversions).
    void chunk(std::size_t c, Staging<Pool, Device>& staging, std::size_t slot, Progress& progress) {
        const Chunk& ch = plan_.chunks[c];
        if (const std::size_t last = staging.last_chunk(slot); last != staging.none) {
            Device::wait(*events_[last]);  // the block is free once the copy that read it has run
        }
        std::byte* host = staging.host(slot);
        if constexpr (requires { Device::host_access(host, ch.bytes, true, "checkpoint staging"); }) {
            Device::host_access(host, ch.bytes, true, "checkpoint::load's read into a staging block");
        }
        const auto started = std::chrono::steady_clock::now();
        if (ch.device_convert) {
            read_raw(ckpt_, plan_, ch, host);
        } else {
            read_image<T>(ckpt_, plan_, ch, host, true, rule_);
        }
        Clock::read(c, ch.source_bytes, seconds_since(started));
        issue(ch, host, staging.device(slot));
        events_[c] = Device::record(stream_);
        staging.last_chunk(slot) = c;
        progress.add(ch.source_bytes);
    }

    void issue(const Chunk& ch, const std::byte* host, std::byte* slot) {
        std::byte* base = ch.diff ? targets_.diff : targets_.data;
        if (!ch.device_convert) {
            Device::copy_async(base + ch.arena_offset, host, ch.bytes, CopyKind::host_to_device, stream_);
            copies_.fetch_add(1);
            return;
        }
        Device::copy_async(slot, host, ch.bytes, CopyKind::host_to_device, stream_);
        copies_.fetch_add(1);
        for (std::size_t p = ch.first; p < ch.end; ++p) {
            const Piece& piece = plan_.pieces[p];
            checkpoint::DeviceConvert<Device>::template convert<T>(reinterpret_cast<T*>(base + piece.dst), piece.dtype,
                                                                   slot + piece.staging, piece.count, stream_);
            conversions_.fetch_add(1);
        }
    }

    const Checkpoint& ckpt_;
    const Plan& plan_;
    Targets targets_;
    stream_type stream_;
    int device_;
    io::detail::ConvertRule rule_;
    std::vector<std::optional<typename Device::event_type>> events_;
    std::atomic<std::size_t> copies_{0};
    std::atomic<std::size_t> conversions_{0};
};

}  // namespace checkpoint::detail

SYNCBLOB_END_NAMESPACE
