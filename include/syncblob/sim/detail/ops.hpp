// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// What the engine behind `SimulatedDevice` queues: byte ranges, vector clocks, points in a stream
/// (events), and operations (copies and fills are made here).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "../../core/config.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace sim::detail {

/// Bytes an operation reads or writes.
struct Range {
    const void* data = nullptr;
    std::size_t bytes = 0;
};

[[nodiscard]] inline bool overlap(const Range& a, const Range& b) noexcept {
    const auto x = reinterpret_cast<std::uintptr_t>(a.data);
    const auto y = reinterpret_cast<std::uintptr_t>(b.data);
    return a.bytes != 0 && b.bytes != 0 && x < y + b.bytes && y < x + a.bytes;
}

[[nodiscard]] inline bool touches(const std::vector<Range>& ranges, const Range& r) noexcept {
    return std::any_of(ranges.begin(), ranges.end(), [&](const Range& x) { return overlap(x, r); });
}

[[nodiscard]] inline std::string hex(const void* p) {
    char text[2 * sizeof(void*) + 3];
    std::snprintf(text, sizeof text, "%p", p);
    return text;
}

/// A vector clock: for each stream, how many of its operations are known to have happened.
using Clock = std::map<int, std::uint64_t>;

inline void merge(Clock& into, const Clock& from) {
    for (const auto& [stream, n] : from) {
        auto& mine = into[stream];
        mine = std::max(mine, n);
    }
}

/// True when everything `a` knows of has happened by `b`: an operation stamped `a` happens before
/// one stamped `b`.
[[nodiscard]] inline bool happens_before(const Clock& a, const Clock& b) {
    return std::all_of(a.begin(), a.end(), [&](const auto& entry) {
        const auto it = b.find(entry.first);
        return it != b.end() && it->second >= entry.second;
    });
}

/// Streams are named by keys: a created stream by its id (1, 2, ...), the legacy default stream
/// of device d (`Stream{0}` while d is current) by `default_stream_key(d)`, which is below -1.
[[nodiscard]] constexpr int default_stream_key(int device) noexcept {
    return -2 - device;
}

/// How a stream key reads in a message.
[[nodiscard]] inline std::string stream_name(int key) {
    return key < -1 ? "the default stream of device " + std::to_string(-2 - key) : "stream " + std::to_string(key);
}

/// A point in a stream: its operations up to `sequence`, and what they had seen. An empty point
/// (stream -1) is always reached.
struct Point {
    int stream = -1;
    std::uint64_t sequence = 0;
    Clock clock;
};

/// What an operation is, for the checks that depend on it.
enum class OpKind : std::uint8_t {
    copy,        ///< CUDA accepts a copy on a stream of another device
    fill,        ///< likewise a memset
    kernel,      ///< a launch on a stream of another device than the current one fails
    allocation,  ///< a stream-ordered allocation: it "writes" the block, so later uses must follow it
    free,        ///< a stream-ordered free
    marker,      ///< carries pending waits into a recorded point; touches nothing
};

struct Operation {
    int stream = 0;  ///< a stream key
    OpKind kind = OpKind::kernel;
    std::uint64_t sequence = 0;
    std::string what;
    std::vector<Range> reads;
    std::vector<Range> writes;
    std::vector<Point> waits;  ///< other streams' points this operation runs after (stream_wait)
    Clock clock;
    std::function<void()> body;  ///< empty for a marker, and once cancelled
    bool cancelled = false;
};

/// A copy of `bytes` bytes from `src` to `dst` queued on stream `stream` (a key); `kind` names it
/// in messages ("copy H->D", ...).
inline Operation copy_operation(int stream, void* dst, const void* src, std::size_t bytes, const char* kind) {
    Operation op;
    op.stream = stream;
    op.kind = OpKind::copy;
    op.what = std::string(kind) + " of " + std::to_string(bytes) + " bytes";
    op.reads = {Range{src, bytes}};
    op.writes = {Range{dst, bytes}};
    op.body = [dst, src, bytes] {
        if (bytes != 0) {
            std::memmove(dst, src, bytes);
        }
    };
    return op;
}

/// A fill of `bytes` bytes at `dst` with `byte`, queued on stream `stream` (a key).
inline Operation fill_operation(int stream, void* dst, unsigned char byte, std::size_t bytes) {
    Operation op;
    op.stream = stream;
    op.kind = OpKind::fill;
    op.what = "fill of " + std::to_string(bytes) + " bytes";
    op.writes = {Range{dst, bytes}};
    op.body = [dst, byte, bytes] {
        if (bytes != 0) {
            std::memset(dst, byte, bytes);
        }
    };
    return op;
}

/// How much the engine holds: what must stay bounded over a long run.
struct Footprint {
    std::size_t queued = 0;   ///< operations issued and not yet run
    std::size_t history = 0;  ///< accesses remembered for race checks
    std::size_t streams = 0;  ///< streams the engine has seen
    std::size_t blocks = 0;   ///< device blocks it knows
    std::size_t faults = 0;   ///< faults recorded (until a scope clears them)
};

}  // namespace sim::detail

SYNCBLOB_END_NAMESPACE
