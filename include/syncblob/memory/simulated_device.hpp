// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// `SimulatedDevice`: a device backend whose "device memory" is separate host memory, so the
/// whole state machine runs and is tested on machines without a GPU.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <string_view>

#include "../core/error.hpp"
#include "allocator.hpp"
#include "device_backend.hpp"

SYNCBLOB_BEGIN_NAMESPACE

/// A device made of host memory. Copies really happen and are counted; allocations can be made
/// to fail; a checking mode asks buffers to poison the stale side; and asynchronous copies are
/// carried out late — when their event is waited on, when a later operation on the same stream
/// runs, or at `synchronize()` — as a GPU may, so code that forgets to wait reads stale data.
///
/// Settings live in a process-wide context that a test scopes with `SimulatedDevice::Scope`.
class SimulatedDevice {
public:
    /// A stream: operations on one stream run in order. Id 0 is the default stream.
    struct Stream {
        int id = 0;
        friend constexpr bool operator==(Stream, Stream) noexcept = default;
    };
    /// A point in a stream; an empty event (stream -1) is always complete.
    struct Event {
        int stream = -1;
        std::uint64_t sequence = 0;
    };
    using stream_type = Stream;
    using event_type = Event;

    /// What a `Scope` sets.
    struct Settings {
        /// Fail the k-th device allocation made inside the scope (1-based) with `std::bad_alloc`; 0: never.
        std::uint64_t fail_allocation = 0;
        /// Ask buffers to poison the side a mutable access made stale.
        bool checking = false;
        /// Number of simulated devices; `set_device` accepts [0, device_count).
        int device_count = 1;
    };

    /// Installs settings for its lifetime and restores the previous ones after (not thread-safe
    /// against concurrent scopes; meant for tests).
    class Scope {
    public:
        explicit Scope(Settings settings) {
            auto& s = state();
            std::lock_guard lock(s.mutex);
            previous_ = s.settings;
            previous_allocations_ = s.allocations_in_scope;
            s.settings = settings;
            s.allocations_in_scope = 0;
        }
        ~Scope() {
            auto& s = state();
            std::lock_guard lock(s.mutex);
            s.settings = previous_;
            s.allocations_in_scope = previous_allocations_;
        }
        Scope(const Scope&) = delete;
        Scope& operator=(const Scope&) = delete;

    private:
        Settings previous_;
        std::uint64_t previous_allocations_ = 0;
    };

    static constexpr std::string_view name = "SimulatedDevice";
    /// The byte a fresh device block is filled with (device memory starts out as garbage).
    static constexpr unsigned char uninitialized_byte = 0xCD;
    static constexpr bool has_device = true;

    /// \throws std::bad_alloc when out of memory or when the scope's fault injection says so.
    [[nodiscard]] static void* allocate(std::size_t bytes) {
        auto& s = state();
        std::lock_guard lock(s.mutex);
        ++s.allocations_in_scope;
        if (s.settings.fail_allocation != 0 && s.allocations_in_scope == s.settings.fail_allocation) {
            throw std::bad_alloc();
        }
        if (bytes > static_cast<std::size_t>(PTRDIFF_MAX) - alignment) {  // aligned new would wrap
            throw std::bad_alloc();
        }
        void* p = ::operator new (bytes == 0 ? 1 : bytes, std::align_val_t{alignment});
        // Fresh device memory is not zero on a GPU either: code that forgets to zero-fill shows it.
        std::memset(p, uninitialized_byte, bytes);
        ++s.live_blocks;
        s.live_bytes += bytes;
        return p;
    }

    static void deallocate(void* p, std::size_t bytes) noexcept {
        if (p == nullptr) {
            return;
        }
        auto& s = state();
        {
            std::lock_guard lock(s.mutex);
            --s.live_blocks;
            s.live_bytes -= bytes;
        }
        ::operator delete (p, std::align_val_t{alignment});
    }

    /// The calling thread's current simulated device.
    static int current_device() noexcept { return current(); }

    /// Makes `device` current for the calling thread. \throws DeviceError when out of range.
    static void set_device(int device) {
        const int count = settings().device_count;
        if (device < 0 || device >= count) {
            throw DeviceError("SimulatedDevice::set_device: device " + std::to_string(device) + " out of range [0, " +
                              std::to_string(count) + ")");
        }
        current() = device;
    }

    /// A new stream, distinct from every other.
    [[nodiscard]] static Stream create_stream() {
        auto& s = state();
        std::lock_guard lock(s.mutex);
        return Stream{++s.last_stream};
    }

    static void copy(void* dst, const void* src, std::size_t bytes, CopyKind, Stream stream) {
        auto& s = state();
        std::lock_guard lock(s.mutex);
        flush(s, stream.id, s.issued[stream.id]);
        copy_bytes(dst, src, bytes);
    }

    /// Issues the copy; it runs (reading `src` then) when the stream is next flushed.
    static void copy_async(void* dst, const void* src, std::size_t bytes, CopyKind, Stream stream) {
        auto& s = state();
        std::lock_guard lock(s.mutex);
        s.queues[stream.id].push_back(Pending{dst, src, bytes, ++s.issued[stream.id]});
    }

    static void fill(void* dst, unsigned char byte, std::size_t bytes, Stream stream) {
        auto& s = state();
        std::lock_guard lock(s.mutex);
        flush(s, stream.id, s.issued[stream.id]);
        if (bytes != 0) {
            std::memset(dst, byte, bytes);
        }
    }

    [[nodiscard]] static Event record(Stream stream) {
        auto& s = state();
        std::lock_guard lock(s.mutex);
        return Event{stream.id, s.issued[stream.id]};
    }

    /// Blocks until `event` is reached: runs every copy issued on its stream up to it.
    static void wait(Event& event) {
        if (event.stream < 0) {
            return;
        }
        auto& s = state();
        std::lock_guard lock(s.mutex);
        flush(s, event.stream, event.sequence);
    }

    /// Makes `stream` wait for `event`. Simulated work runs eagerly, so this runs the event's copies.
    static void stream_wait(Stream, Event& event) { wait(event); }

    static bool poisons_stale_side() noexcept { return settings().checking; }

    /// Runs every pending copy on every stream.
    static void synchronize() {
        auto& s = state();
        std::lock_guard lock(s.mutex);
        for (auto& [id, queue] : s.queues) {
            flush(s, id, s.issued[id]);
        }
    }

    /// Copies issued but not yet carried out, on all streams.
    [[nodiscard]] static std::size_t pending_copies() {
        auto& s = state();
        std::lock_guard lock(s.mutex);
        std::size_t n = 0;
        for (const auto& [id, queue] : s.queues) {
            n += queue.size();
        }
        return n;
    }

    /// Device blocks allocated and not yet freed (for leak checks).
    [[nodiscard]] static std::size_t live_blocks() {
        auto& s = state();
        std::lock_guard lock(s.mutex);
        return s.live_blocks;
    }

    /// The settings in force.
    [[nodiscard]] static Settings settings() {
        auto& s = state();
        std::lock_guard lock(s.mutex);
        return s.settings;
    }

private:
    static constexpr std::size_t alignment = 256;  // what cudaMalloc guarantees

    struct Pending {
        void* dst;
        const void* src;
        std::size_t bytes;
        std::uint64_t sequence;
    };

    struct State {
        std::mutex mutex;
        Settings settings;
        std::uint64_t allocations_in_scope = 0;
        std::size_t live_blocks = 0;
        std::size_t live_bytes = 0;
        int last_stream = 0;
        std::map<int, std::deque<Pending>> queues;
        std::map<int, std::uint64_t> issued;
    };

    static State& state() {
        static State s;
        return s;
    }

    static int& current() {
        thread_local int device = 0;
        return device;
    }

    static void copy_bytes(void* dst, const void* src, std::size_t bytes) {
        if (bytes != 0) {
            std::memmove(dst, src, bytes);
        }
    }

    // Runs the copies of `stream` issued at or before `sequence`, in order. Caller holds the mutex.
    static void flush(State& s, int stream, std::uint64_t sequence) {
        auto it = s.queues.find(stream);
        if (it == s.queues.end()) {
            return;
        }
        auto& queue = it->second;
        while (!queue.empty() && queue.front().sequence <= sequence) {
            const Pending p = queue.front();
            queue.pop_front();
            copy_bytes(p.dst, p.src, p.bytes);
        }
    }
};

static_assert(DeviceBackend<SimulatedDevice>);

/// Aligned host memory and a `SimulatedDevice`: the test vehicle for device behaviour.
struct Simulated {
    using host_allocator = AlignedAllocator;
    using device_backend = SimulatedDevice;
};

static_assert(SyncedAllocator<Simulated>);

SYNCBLOB_END_NAMESPACE
