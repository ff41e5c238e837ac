// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The sync audit: every place where syncblob makes the host wait for a device, for the whole
/// device or for other ranks, or takes memory from the system, reports itself here (`audit::note`),
/// in every backend alike (the simulator, CUDA, MPI, NCCL). Each report is counted by its kind
/// (`audit::Wait`) and by the library operation it happened in (`audit::Operation`, a scope the
/// library opens around each operation that can wait), and whether that operation asked for that
/// kind of wait: a host read of device-fresh data asks for the wait for its copy; a free, a fill, an
/// allocation or an agreement between ranks asks for nothing.
///
/// Three modes (process-wide, `audit::set_mode`), as PyTorch's `set_sync_debug_mode`:
/// - `off` (the default): nothing is counted; a report costs one relaxed atomic load;
/// - `count`: every report is counted (`audit::counts()`, `audit::table()`);
/// - `error`: as `count`, and a wait the operation did not ask for throws `SyncError` naming the
///   operation and the kind of wait, before it waits. A report from a place that cannot throw (a
///   release in a destructor) is counted but never thrown.
///
/// A wait outside every operation the library opened is the caller's own (a direct call of
/// `SimulatedDevice::synchronize()` or `cuda::Stream::synchronize()`): it is counted under the
/// operation "caller" as asked. docs/waits.md lists, per operation, the waits it may make and why.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "config.hpp"
#include "error.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace audit {

/// A kind of wait (or of allocation from the system, which may wait and is slow).
enum class Wait : std::uint8_t {
    stream_synchronize,  ///< the host waits for a stream (cudaStreamSynchronize)
    event_synchronize,   ///< the host waits for an event (cudaEventSynchronize)
    device_synchronize,  ///< the host waits for the whole device (cudaDeviceSynchronize)
    synchronous_copy,    ///< a copy that returns when done (cudaMemcpy, or a copy then a stream wait)
    blocking_free,       ///< a free that waits for the device (cudaFree, cudaFreeHost)
    system_allocation,   ///< memory from the system rather than a pool (cudaMalloc, cudaMallocHost)
    host_result,         ///< a device result returned to the host (a cuBLAS reduction in host pointer mode)
    collective,          ///< the host waits for other ranks (MPI_Wait, a blocking MPI collective, NCCL)
};

inline constexpr Wait all_waits[] = {Wait::stream_synchronize, Wait::event_synchronize, Wait::device_synchronize,
                                     Wait::synchronous_copy,   Wait::blocking_free,     Wait::system_allocation,
                                     Wait::host_result,        Wait::collective};

/// The name of a kind of wait ("stream_synchronize", ...).
[[nodiscard]] constexpr std::string_view wait_name(Wait w) noexcept {
    switch (w) {
        case Wait::stream_synchronize:
            return "stream_synchronize";
        case Wait::event_synchronize:
            return "event_synchronize";
        case Wait::device_synchronize:
            return "device_synchronize";
        case Wait::synchronous_copy:
            return "synchronous_copy";
        case Wait::blocking_free:
            return "blocking_free";
        case Wait::system_allocation:
            return "system_allocation";
        case Wait::host_result:
            return "host_result";
        case Wait::collective:
            return "collective";
    }
    return "?";
}

/// A set of kinds of wait (what an operation asks for).
class Waits {
public:
    constexpr Waits() noexcept = default;
    template <class... W>
    constexpr explicit Waits(Wait first, W... rest) noexcept
        : bits_(static_cast<std::uint16_t>((bit(first) | ... | bit(rest)))) {}
    [[nodiscard]] constexpr bool contains(Wait w) const noexcept { return (bits_ & bit(w)) != 0; }

private:
    static constexpr std::uint16_t bit(Wait w) noexcept {
        return static_cast<std::uint16_t>(1u << static_cast<unsigned>(w));
    }
    std::uint16_t bits_ = 0;
};

/// What a host read of device-fresh data asks for: the wait for its copy, however it is waited for.
inline constexpr Waits host_read{Wait::stream_synchronize, Wait::event_synchronize, Wait::synchronous_copy};

/// How the audit runs.
enum class Mode : std::uint8_t { off, count, error };

}  // namespace audit

/// A wait that the operation it happened in did not ask for, under `audit::Mode::error`.
class SyncError : public Error {
public:
    SyncError(const std::string& what, audit::Wait wait, std::string operation)
        : Error(what), wait_(wait), operation_(std::move(operation)) {}
    [[nodiscard]] audit::Wait wait() const noexcept { return wait_; }
    [[nodiscard]] const std::string& operation() const noexcept { return operation_; }

private:
    audit::Wait wait_;
    std::string operation_;
};

namespace audit {

/// One row of the count: the waits of one kind in one operation.
struct Count {
    std::string operation;
    Wait wait = Wait::stream_synchronize;
    bool asked = false;  ///< the operation asked for this kind of wait
    std::uint64_t calls = 0;
    friend bool operator==(const Count&, const Count&) = default;
};

namespace detail {

inline std::atomic<Mode>& mode_flag() noexcept {
    static std::atomic<Mode> m{Mode::off};
    return m;
}

struct Frame {
    std::string_view name;
    Waits asked;
    const Frame* outer;
};

inline const Frame*& innermost() noexcept {
    thread_local const Frame* frame = nullptr;
    return frame;
}

// Depth of `CountOnly` scopes on this thread: inside one, no report throws.
inline int& count_only_depth() noexcept {
    thread_local int depth = 0;
    return depth;
}

struct Tally {
    std::mutex mutex;
    std::map<std::tuple<std::string, Wait, bool>, std::uint64_t> rows;
};

inline Tally& tally() {
    static Tally* t = new Tally;  // NOLINT(cppcoreguidelines-owning-memory): never destroyed, reports at exit count
    return *t;
}

// Counts `w` in the innermost operation; true when that operation asked for it.
inline bool count(Wait w, std::string& name) {
    const Frame* f = innermost();
    const bool asked = f == nullptr || f->asked.contains(w);
    name = f == nullptr ? std::string("caller") : std::string(f->name);
    auto& t = tally();
    const std::lock_guard lock(t.mutex);
    ++t.rows[{name, w, asked}];
    return asked;
}

[[noreturn]] inline void refuse(Wait w, const std::string& operation) {
    throw SyncError(operation + ": a wait it did not ask for (" + std::string(wait_name(w)) +
                        "; syncblob::audit::Mode::error, and docs/waits.md lists the waits each operation may make)",
                    w, operation);
}

SYNCBLOB_NOINLINE inline void note_slow(Wait w) {
    std::string name;
    if (!count(w, name) && mode_flag().load(std::memory_order_relaxed) == Mode::error && count_only_depth() == 0) {
        refuse(w, name);
    }
}

SYNCBLOB_NOINLINE inline void note_slow_nothrow(Wait w) noexcept {
    try {
        std::string name;
        (void)count(w, name);
    } catch (...) {  // a count that cannot be allocated is lost
    }
}

}  // namespace detail

/// The current mode.
[[nodiscard]] inline Mode mode() noexcept {
    return detail::mode_flag().load(std::memory_order_relaxed);
}

/// Sets the mode for the whole process; returns the previous one. Counts are kept (see `reset`).
inline Mode set_mode(Mode m) noexcept {
    return detail::mode_flag().exchange(m, std::memory_order_relaxed);
}

/// Sets a mode for its lifetime and restores the previous one after (for tests and tutorials).
class ModeScope {
public:
    explicit ModeScope(Mode m) noexcept : previous_(set_mode(m)) {}
    ~ModeScope() { (void)set_mode(previous_); }
    ModeScope(const ModeScope&) = delete;
    ModeScope& operator=(const ModeScope&) = delete;

private:
    Mode previous_;
};

/// Reports a wait of kind `w` about to happen on this thread. \throws SyncError in `Mode::error`
/// when the innermost operation did not ask for it (before the wait).
SYNCBLOB_ALWAYS_INLINE void note(Wait w) {
    if (mode() != Mode::off) {
        detail::note_slow(w);
    }
}

/// As `note`, from a place that cannot throw (a release): counted, never thrown.
SYNCBLOB_ALWAYS_INLINE void note_nothrow(Wait w) noexcept {
    if (mode() != Mode::off) {
        detail::note_slow_nothrow(w);
    }
}

/// Names the library operation the waits on this thread belong to, for its lifetime, and the kinds
/// of wait it asks for. The innermost scope names a wait. Costs one relaxed load when the audit is off.
class Operation {
public:
    explicit Operation(std::string_view name, Waits asked = {}) noexcept : frame_{name, asked, nullptr} {
        if (mode() != Mode::off) {
            frame_.outer = detail::innermost();
            detail::innermost() = &frame_;
            pushed_ = true;
        }
    }
    ~Operation() {
        if (pushed_) {
            detail::innermost() = frame_.outer;
        }
    }
    Operation(const Operation&) = delete;
    Operation& operator=(const Operation&) = delete;

private:
    detail::Frame frame_;
    bool pushed_ = false;
};

/// Within its lifetime no report on this thread throws (each is still counted): for the waits of a
/// release, which must happen whatever the mode (a free after the work that uses the memory).
class CountOnly {
public:
    CountOnly() noexcept { ++detail::count_only_depth(); }
    ~CountOnly() { --detail::count_only_depth(); }
    CountOnly(const CountOnly&) = delete;
    CountOnly& operator=(const CountOnly&) = delete;
};

/// Every row counted since the last `reset`, sorted by operation, then kind.
[[nodiscard]] inline std::vector<Count> counts() {
    auto& t = detail::tally();
    const std::lock_guard lock(t.mutex);
    std::vector<Count> out;
    out.reserve(t.rows.size());
    for (const auto& [key, calls] : t.rows) {
        out.push_back(Count{std::get<0>(key), std::get<1>(key), std::get<2>(key), calls});
    }
    return out;
}

/// The waits counted of kind `w` (asked for and not).
[[nodiscard]] inline std::uint64_t total(Wait w) {
    std::uint64_t n = 0;
    for (const auto& c : counts()) {
        n += c.wait == w ? c.calls : 0;
    }
    return n;
}

/// The waits counted that their operation did not ask for.
[[nodiscard]] inline std::uint64_t unasked() {
    std::uint64_t n = 0;
    for (const auto& c : counts()) {
        n += c.asked ? 0 : c.calls;
    }
    return n;
}

/// Forgets every count.
inline void reset() {
    auto& t = detail::tally();
    const std::lock_guard lock(t.mutex);
    t.rows.clear();
}

/// The counts as a Markdown table: one row per operation and kind, asked or not.
[[nodiscard]] inline std::string table() {
    std::string out = "| operation | wait | asked | calls |\n|---|---|---|---|\n";
    for (const auto& c : counts()) {
        out += "| `" + c.operation + "` | " + std::string(wait_name(c.wait)) + " | " + (c.asked ? "yes" : "no") +
               " | " + std::to_string(c.calls) + " |\n";
    }
    return out;
}

}  // namespace audit

SYNCBLOB_END_NAMESPACE
