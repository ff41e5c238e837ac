// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// `SimulatedDevice`: a device backend whose "device memory" is separate host memory, so the
/// whole state machine runs and is tested on machines without a GPU. Its settings, scopes and
/// observations (faults, footprint) are its base `SimulatedContext` (simulated_context.hpp); the
/// engine that queues and runs its work is detail/simulated_queue.hpp.

#include <compare>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <new>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "../core/error.hpp"
#include "../core/sync_audit.hpp"
#include "../memory/allocator.hpp"
#include "../memory/device_backend.hpp"
#include "../memory/pinned_pool.hpp"
#include "context.hpp"
#include "detail/queue.hpp"

SYNCBLOB_BEGIN_NAMESPACE

class SimulatedAsyncDevice;

/// A device made of host memory, as asynchronous as a GPU. Copies really happen and are counted;
/// allocations can be made to fail; a checking mode asks buffers to poison the stale side.
///
/// Copies, fills and kernels are operations queued per stream and run later, in stream order: a
/// synchronous copy or fill runs its stream up to itself before it returns; an asynchronous copy
/// or a kernel (`launch`) only queues. `stream_wait(stream, event)` makes the stream's next
/// operation run after the event and runs nothing by itself; work on one stream runs another
/// stream's work only through such a dependency. `wait(event)` runs what the event needs;
/// `synchronize()` runs everything, the streams interleaved as `Settings::seed` chooses. So code
/// that forgets a wait reads stale values, deterministically for a given seed.
///
/// Misuse it can see is recorded, in order, as messages read with `faults()` (since the innermost
/// `Scope` began): a block freed while queued work still uses it (that work is then cancelled), a
/// block touched by work issued while another simulated device is current, and two unordered
/// operations on different streams where one writes what the other touches. No stream is
/// implicitly ordered with another (as CUDA's non-blocking streams and per-thread default streams).
///
/// Settings live in a process-wide context that a test scopes with `SimulatedDevice::Scope` (see
/// `SimulatedContext`, its base).
class SimulatedDevice : public SimulatedContext {
public:
    /// A stream: operations on one stream run in order. A stream belongs to the device that was
    /// current when it was created; id 0 names the legacy default stream of whichever device is
    /// current where it is used, as CUDA's `cudaStreamLegacy` does (one per device).
    struct Stream {
        int id = 0;
        friend constexpr bool operator==(Stream, Stream) noexcept = default;
        friend constexpr auto operator<=>(Stream, Stream) noexcept = default;
        friend std::ostream& operator<<(std::ostream& os, Stream s) { return os << s.id; }
    };
    /// A point in a stream; an empty event (stream -1) is always complete.
    using Event = sim::detail::Point;
    using stream_type = Stream;
    using event_type = Event;
    /// Bytes a kernel reads or writes (for `launch`).
    using Range = sim::detail::Range;

    static constexpr std::string_view name = "SimulatedDevice";
    /// The byte a fresh device block is filled with (device memory starts out as garbage).
    static constexpr unsigned char uninitialized_byte = 0xCD;
    static constexpr bool has_device = true;

    /// Memory from the system (as `cudaMalloc`; a `system_allocation` for the sync audit).
    /// \throws std::bad_alloc when out of memory or when the scope's fault injection says so.
    [[nodiscard]] static void* allocate(std::size_t bytes) {
        audit::note(audit::Wait::system_allocation);
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
        try {
            s.engine.add_block(p, bytes, current());
        } catch (...) {
            ::operator delete (p, std::align_val_t{alignment});
            throw;
        }
        ++s.live_blocks;
        s.live_bytes += bytes;
        return p;
    }

    /// Frees a block at once, as a stream-ordered free would not: queued work that still uses it
    /// is a fault (and is cancelled). Free only after waiting for that work.
    static void deallocate(void* p, std::size_t bytes) noexcept {
        if (p == nullptr) {
            return;
        }
        audit::note_nothrow(audit::Wait::blocking_free);  // cudaFree waits for the whole device
        auto& s = state();
        {
            std::lock_guard lock(s.mutex);
            try {
                s.engine.remove_block(p, bytes);
            } catch (...) {  // a fault message that cannot be allocated is lost; the block is still freed
            }
            --s.live_blocks;
            s.live_bytes -= bytes;
        }
        ::operator delete (p, std::align_val_t{alignment});
    }

    /// Stream 0.
    [[nodiscard]] static constexpr Stream default_stream() noexcept { return Stream{0}; }

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

    /// The device whose block holds `p`, or the current device for memory the simulator did not
    /// allocate (as `cudaPointerGetAttributes` names a pointer's own device).
    [[nodiscard]] static int device_of(const void* p) {
        auto& s = state();
        std::lock_guard lock(s.mutex);
        const int d = s.engine.device_of(p);
        return d < 0 ? current() : d;
    }

    /// A new stream of the current device, distinct from every other.
    [[nodiscard]] static Stream create_stream() {
        auto& s = state();
        std::lock_guard lock(s.mutex);
        return Stream{s.engine.create_stream(current())};
    }

    /// The device `stream` belongs to (for `Stream{0}`: the current device, whose default stream it names).
    [[nodiscard]] static int device_of_stream(Stream stream) {
        auto& s = state();
        std::lock_guard lock(s.mutex);
        return s.engine.device_of_stream(key(stream));
    }

    /// Copies on `stream` and returns when the copy is done (after everything issued before it there).
    /// \throws DeviceError when the scope's fault injection says so (nothing is issued).
    static void copy(void* dst, const void* src, std::size_t bytes, CopyKind kind, Stream stream) {
        audit::note(audit::Wait::synchronous_copy);
        auto& s = state();
        std::lock_guard lock(s.mutex);
        count_copy(s, "copy");
        (void)s.engine.issue(sim::detail::copy_operation(key(stream), dst, src, bytes, copy_name(kind)), current());
        s.engine.host_wait(s.engine.point_after(key(stream)));
    }

    /// Issues the copy; it runs (reading `src` then) when its stream is run up to it.
    static void copy_async(void* dst, const void* src, std::size_t bytes, CopyKind kind, Stream stream) {
        auto& s = state();
        std::lock_guard lock(s.mutex);
        count_copy(s, "copy_async");
        (void)s.engine.issue(sim::detail::copy_operation(key(stream), dst, src, bytes, copy_name(kind)), current());
    }

    /// Queues the fill on `stream` and returns: it runs in stream order, as `cudaMemsetAsync` does
    /// (the host does not wait; work on other streams that uses the bytes must be ordered after it).
    static void fill(void* dst, unsigned char byte, std::size_t bytes, Stream stream) {
        auto& s = state();
        std::lock_guard lock(s.mutex);
        (void)s.engine.issue(sim::detail::fill_operation(key(stream), dst, byte, bytes), current());
    }

    /// Queues a kernel on `stream` that reads `reads` and writes `writes`; `body` runs when the
    /// stream is run up to it (under the simulator's lock: it must not call the simulator). A
    /// launch on a stream of another device than the current one is a fault (CUDA's fails).
    static void launch(Stream stream, std::string what, std::vector<Range> reads, std::vector<Range> writes,
                       std::function<void()> body) {
        auto& s = state();
        std::lock_guard lock(s.mutex);
        sim::detail::Operation op;
        op.stream = key(stream);
        op.kind = sim::detail::OpKind::kernel;
        op.what = "kernel " + std::move(what);
        op.reads = std::move(reads);
        op.writes = std::move(writes);
        op.body = std::move(body);
        (void)s.engine.issue(std::move(op), current());
    }

    /// The point after everything issued on `stream` so far, the work it waits for included.
    /// Recording on a stream of another device than the current one is a fault (CUDA's
    /// `cudaEventRecord` fails).
    [[nodiscard]] static Event record(Stream stream) {
        auto& s = state();
        std::lock_guard lock(s.mutex);
        return s.engine.record(key(stream), current());
    }

    /// Blocks until `event` is reached: runs its stream's work up to it (and what that waits for).
    /// An event of another device may be waited for.
    static void wait(Event& event) {
        if (event.stream == -1) {
            return;
        }
        audit::note(audit::Wait::event_synchronize);
        run_to(event);
    }

    /// Blocks until `event` is reached, as returning a device result to the host does (a cuBLAS
    /// reduction in host pointer mode): the same wait, audited as a `host_result`.
    static void wait_for_result(Event& event) {
        if (event.stream == -1) {
            return;
        }
        audit::note(audit::Wait::host_result);
        run_to(event);
    }

    /// True when the work up to `event` has run; runs nothing (a queued operation runs only when
    /// something waits for it or `synchronize()` is called, so this stays false until then).
    [[nodiscard]] static bool query(const Event& event) {
        if (event.stream == -1) {
            return true;
        }
        auto& s = state();
        std::lock_guard lock(s.mutex);
        return s.engine.reached(event);
    }

    /// Makes `stream`'s next operation wait for `event`; runs nothing. The event may belong to
    /// another device: that orders work across devices.
    static void stream_wait(Stream stream, Event& event) {
        auto& s = state();
        std::lock_guard lock(s.mutex);
        s.engine.stream_wait(key(stream), event);
    }

    /// The host is about to read (`write` false) or write the `bytes` bytes at `p` through a
    /// host pointer: queued work that will still write them (or, for a write, that still reads
    /// them) is a fault. Buffers call this on every host access; `who` names the access.
    static void host_access(const void* p, std::size_t bytes, bool write, const char* who) noexcept {
        if (bytes == 0) {
            return;
        }
        auto& s = state();
        std::lock_guard lock(s.mutex);
        try {
            s.engine.check_host(Range{p, bytes}, write, who);
        } catch (...) {  // a fault message that cannot be allocated is lost
        }
    }

    static bool poisons_stale_side() noexcept { return settings().checking; }

    /// Runs every queued operation on every stream, interleaved as `Settings::seed` chooses.
    static void synchronize() {
        audit::note(audit::Wait::device_synchronize);
        auto& s = state();
        std::lock_guard lock(s.mutex);
        s.engine.synchronize(s.rng);
    }

    /// True when queued work that has not run yet reads or writes any of the `bytes` bytes at `p`
    /// (host or device memory): such memory must not be freed, reused or overwritten yet.
    [[nodiscard]] static bool queued_work_touches(const void* p, std::size_t bytes) {
        auto& s = state();
        std::lock_guard lock(s.mutex);
        return s.engine.queued_touches(Range{p, bytes});
    }

    /// Page-locks host memory, as `cudaHostRegister` does: true when this call registered it,
    /// false when part of it already was (left as it is). \throws DeviceError when
    /// `Settings::fail_registration` is set.
    static bool register_host(void* p, std::size_t bytes) {
        auto& s = state();
        std::lock_guard lock(s.mutex);
        if (s.settings.fail_registration) {
            throw DeviceError("SimulatedDevice::register_host: cannot page-lock " + std::to_string(bytes) +
                              " bytes (registration fails in this scope)");
        }
        return s.add_registered(p, bytes);
    }

    /// Undoes `register_host`; unregistering memory that is not registered is a fault.
    static void unregister_host(void* p) noexcept {
        auto& s = state();
        std::lock_guard lock(s.mutex);
        if (s.registered.erase(p) == 0) {
            try {
                s.engine.fault("unregister_host of memory that is not registered");
            } catch (...) {  // a fault message that cannot be allocated is lost
            }
        }
    }

    /// True when `p` lies in memory registered with `register_host`.
    [[nodiscard]] static bool registered(const void* p) {
        auto& s = state();
        std::lock_guard lock(s.mutex);
        return s.is_registered(p);
    }

private:
    friend class SimulatedAsyncDevice;

    static void run_to(Event& event) {
        auto& s = state();
        std::lock_guard lock(s.mutex);
        s.engine.host_wait(event);
    }
    // its stream-ordered pool shares the engine (simulated_async_device.hpp)

    static constexpr std::size_t alignment = 256;  // what cudaMalloc guarantees

    // Counts a copy issued in the scope; throws when it is the one the scope makes fail.
    static void count_copy(State& s, const char* what) {
        ++s.copies_in_scope;
        if (s.settings.fail_copy != 0 && s.copies_in_scope == s.settings.fail_copy) {
            throw DeviceError(std::string("SimulatedDevice::") + what + ": copy " + std::to_string(s.copies_in_scope) +
                              " fails in this scope (Settings::fail_copy)");
        }
    }

    static int& current() {
        thread_local int device = 0;
        return device;
    }

    // The engine's key for `stream` on the calling thread (Stream{0}: the current device's default stream).
    static int key(Stream stream) noexcept { return sim::detail::Engine::key(stream.id, current()); }

    static const char* copy_name(CopyKind kind) noexcept {
        return kind == CopyKind::host_to_device   ? "copy H->D"
               : kind == CopyKind::device_to_host ? "copy D->H"
                                                  : "copy D->D";
    }
};

static_assert(DeviceBackend<SimulatedDevice>);

/// Aligned host memory and a `SimulatedDevice`: the test vehicle for device behaviour.
struct Simulated {
    using host_allocator = AlignedAllocator;
    using device_backend = SimulatedDevice;
};

static_assert(SyncedAllocator<Simulated>);

/// Pooled host memory (`PinnedPool` over `AlignedAllocator`) and a `SimulatedDevice`: how the pool
/// and its reuse gating are tested.
struct SimulatedPooled {
    using host_allocator = PinnedPool<AlignedAllocator, SimulatedDevice>;
    using device_backend = SimulatedDevice;
};

static_assert(SyncedAllocator<SimulatedPooled>);
static_assert(StreamAwareHostAllocator<SimulatedPooled::host_allocator, SimulatedDevice>);

SYNCBLOB_END_NAMESPACE
