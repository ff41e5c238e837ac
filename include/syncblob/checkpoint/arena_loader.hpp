// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// `CheckpointArena`: a checkpoint's tensors as the blobs of one `ParameterArena`, loaded by
/// streaming the shards through large chunks, I/O first and objects last.

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../arena/parameter_arena.hpp"
#include "../core/error.hpp"
#include "../core/thread_pool.hpp"
#include "../io/name_index.hpp"
#include "../memory/stream_order.hpp"
#include "detail/device_load.hpp"
#include "device_convert.hpp"
#include "options.hpp"
#include "plan.hpp"
#include "read_chunk.hpp"
#include "reader.hpp"
#include "sim.hpp"  // the simulated device's conversion, so a load into a simulated arena needs nothing more

SYNCBLOB_BEGIN_NAMESPACE

namespace checkpoint {

/// The tensors of a checkpoint (or the named ones) as the blobs of one sealed `ParameterArena`:
/// one allocation per buffer and side, slices in the order of the tensors (the checkpoint's order,
/// shard by shard, or the order of the names given). A tensor `<name>.__diff__` goes to the diff of
/// blob `<name>`. `load` fills them from a checkpoint whose tensors have these names and shapes.
template <Element T, SyncedAllocator A = HostOnly>
class CheckpointArena {
    [[nodiscard]] auto name_at() const {
        return [this](std::size_t i) -> std::string_view { return names_[i]; };
    }

    static_assert(ParameterArena<T, A>::alignment == detail::slice_alignment);

public:
    using arena_type = ParameterArena<T, A>;
    using blob_type = Blob<T, A>;
    using device_backend = typename A::device_backend;
    using stream_type = typename device_backend::stream_type;

    /// Lays out `names` (every tensor but the diffs when empty) on `stream` and seals the arena
    /// (zero-filled). \throws FormatError (a name not in the checkpoint, a diff's name, a name given
    /// twice, more than `max_bytes` of the checkpoint's options), std::bad_alloc.
    explicit CheckpointArena(const Checkpoint& ckpt, std::span<const std::string> names = {},
                             stream_type stream = device_backend::default_stream()) {
        std::uint64_t bytes = 0;
        std::vector<const Tensor*> tensors;  // each looked up once
        for (const auto& t : ckpt.tensors()) {
            if (names.empty() && !Checkpoint::is_diff(t.name)) {
                names_.push_back(t.name);
                tensors.push_back(&t);
            }
        }
        for (const auto& name : names) {
            const auto& t = ckpt.at(name);
            if (Checkpoint::is_diff(t.name)) {
                io::throw_format_error(source(ckpt), "tensor \"" + name + "\"",
                                       "a diff loads into its blob's diff, not as a blob of its own");
            }
            names_.push_back(name);
            tensors.push_back(&t);
        }
        if (const std::size_t d = index_.build(names_.size(), name_at()); d != io::detail::NameIndex::npos) {
            io::throw_format_error(source(ckpt), "tensor \"" + names_[d] + "\"", "named twice");
        }
        arena_.set_stream(stream);
        for (const Tensor* t : tensors) {
            bytes += t->count * sizeof(T) * (ckpt.diff_of(*t) != nullptr ? 2 : 1);
            arena_.add(t->shape);
        }
        if (bytes > ckpt.options().max_bytes) {
            io::throw_format_error(source(ckpt), "tensors",
                                   "the arena needs " + std::to_string(bytes) + " bytes, more than the limit of " +
                                       std::to_string(ckpt.options().max_bytes) + " (LoadOptions::max_bytes)");
        }
        arena_.seal();
    }

    [[nodiscard]] arena_type& arena() noexcept { return arena_; }
    [[nodiscard]] const arena_type& arena() const noexcept { return arena_; }
    /// The blobs' names, in the arena's order.
    [[nodiscard]] const std::vector<std::string>& names() const noexcept { return names_; }
    [[nodiscard]] bool contains(std::string_view name) const { return index_.find(name, name_at()) != npos; }
    /// The blob named `name`. \throws IndexError when the arena has none.
    [[nodiscard]] blob_type& operator[](std::string_view name) { return arena_[position(name)]; }
    [[nodiscard]] const blob_type& operator[](std::string_view name) const { return arena_[position(name)]; }

    /// Streams the tensors of `ckpt` into the blobs (and the diffs it holds into their diffs); see
    /// docs/checkpoints.md. A device load (the default where the arena has a device) reads on
    /// `options.threads` threads into pinned staging blocks and issues one copy per chunk on
    /// `copy_stream` (default: the arena's stream) as each chunk is read; the blobs are at_device
    /// when it returns, their streams made to wait for the copies (so reading a blob, on the host
    /// or on the device, waits for its bytes; the host does not wait here). A host load reads
    /// straight into the host side; the blobs are at_host. The arena keeps the memory of the load's
    /// plan (some 60 bytes a tensor) for its next load.
    /// \throws before anything is written: FormatError (a blob's tensor missing, a dtype other than
    /// T without `options.convert`), ShapeError (a tensor of another shape), StateError (an arena
    /// blob replaced or reshaped). While streaming: FormatError (a value the conversion refuses, a
    /// shard cut short), IOError, and what `progress` throws; the blobs' values are then
    /// unspecified (the copies issued stay ordered before any use of the blobs).
    LoadReport load(const Checkpoint& ckpt, const LoadOptions& options = {}) {
        return load(ckpt, options, arena_.stream());
    }
    LoadReport load(const Checkpoint& ckpt, const LoadOptions& options, stream_type copy_stream);

    /// The tensors of a checkpoint that blob `i` loads: its own, and its diff's (null where the
    /// file holds none).
    struct Match {
        const Tensor* tensor = nullptr;
        const Tensor* diff = nullptr;
    };
    /// What a load of `ckpt` reads for each blob, in the arena's order, each looked up once and
    /// checked against its blob as `load` checks it; `op` begins the message of a ShapeError.
    /// \throws FormatError (a blob's tensor missing, a dtype other than T unless `convert`),
    /// ShapeError (a tensor of another shape).
    [[nodiscard]] std::vector<Match> match(const Checkpoint& ckpt, bool convert,
                                           std::string_view op = "CheckpointArena::load") const;

private:
    static constexpr std::size_t npos = io::detail::NameIndex::npos;
    // How many tensors after the last one found `targets` compares by name before it looks one up
    // (a blob's diff, when it follows it, is one of them).
    static constexpr std::size_t lookahead = 4;

    [[nodiscard]] static std::string source(const Checkpoint& ckpt) {
        return ckpt.index_file().empty() ? ckpt.shards().at(0).path.string() : ckpt.index_file().string();
    }
    [[nodiscard]] std::size_t position(std::string_view name) const {
        const std::size_t i = index_.find(name, name_at());
        if (i == npos) {
            throw IndexError("CheckpointArena: no blob \"" + std::string(name) + "\" (" +
                             std::to_string(names_.size()) + " blobs)");
        }
        return i;
    }

    // Calls `fn(i, tensor, diff)` for each blob i, in the arena's order, with what `match` gives it;
    // \throws as match, before the first call for a blob that does not match.
    template <class Fn>
    void each_match(const Checkpoint& ckpt, bool convert, std::string_view op, Fn&& fn) const;
    using Flat = typename arena_type::FlatBuffers;
    LoadReport load_host(Flat& flat, const detail::Plan& plan, const std::vector<bool>& with_diff,
                         const Checkpoint& ckpt, const LoadOptions& options, unsigned threads);
    LoadReport load_device(Flat& flat, const detail::Plan& plan, const std::vector<bool>& with_diff,
                           const Checkpoint& ckpt, const LoadOptions& options, unsigned threads,
                           stream_type copy_stream);

    arena_type arena_;
    std::vector<std::string> names_;
    io::detail::NameIndex index_;
    // The memory of the last load's plan and list of diffs, kept empty for the next load: at a million
    // tensors, their fresh pages were 13,021 page faults on every load.
    std::vector<detail::Piece> pieces_;
    std::vector<std::pair<std::size_t, const Tensor*>> diffs_;
};

template <Element T, SyncedAllocator A>
template <class Fn>
void CheckpointArena<T, A>::each_match(const Checkpoint& ckpt, bool convert, std::string_view op, Fn&& fn) const {
    const auto& tensors = ckpt.tensors();
    std::size_t next = 0;  // where blob i's tensor is, when the arena follows the checkpoint's order
    for (std::size_t i = 0; i < names_.size(); ++i) {
        // The arena's order is usually the checkpoint's (the tensors laid out from it, less their
        // diffs): the next few tensors are compared by name first, in order, and only a name not
        // among them is looked up. At a million tensors a lookup is a cache miss per blob.
        const Tensor* t = nullptr;
        for (std::size_t k = next; k < std::min(next + lookahead, tensors.size()) && t == nullptr; ++k) {
            if (tensors[k].name == names_[i]) {
                t = &tensors[k];
            }
        }
        if (t == nullptr) {
            t = ckpt.find(names_[i]);
        }
        if (t == nullptr || Checkpoint::is_diff(names_[i])) {
            io::throw_format_error(source(ckpt), "tensor \"" + names_[i] + "\"",
                                   "not in the checkpoint (the arena's blob " + std::to_string(i) + " needs it)");
        }
        // The shape the blob was laid out with: ParameterArena::check holds the blob to it.
        if (t->shape != arena_.shapes()[i]) {
            throw ShapeError(std::string(op) + ": " + source(ckpt) + " holds \"" + t->name + "\" of shape " +
                             t->shape.to_string() + ", the arena's blob has " + arena_.shapes()[i].to_string());
        }
        if (t->dtype != dtype_of<T> && !convert) {
            io::throw_format_error(ckpt.shards()[t->shard].path.string(), "tensor \"" + t->name + "\": dtype",
                                   "the file holds " + std::string(dtype_name(t->dtype)) + ", the arena " +
                                       std::string(element_name<T>()) + " (set LoadOptions::convert to convert)");
        }
        next = static_cast<std::size_t>(t - tensors.data()) + 1;
        fn(i, *t, ckpt.diff_of(*t));
    }
}

template <Element T, SyncedAllocator A>
std::vector<typename CheckpointArena<T, A>::Match> CheckpointArena<T, A>::match(const Checkpoint& ckpt, bool convert,
                                                                                std::string_view op) const {
    std::vector<Match> out;
    out.reserve(names_.size());
    each_match(ckpt, convert, op, [&](std::size_t, const Tensor& t, const Tensor* diff) { out.push_back({&t, diff}); });
    return out;
}

template <Element T, SyncedAllocator A>
LoadReport CheckpointArena<T, A>::load(const Checkpoint& ckpt, const LoadOptions& options, stream_type copy_stream) {
    const auto started = std::chrono::steady_clock::now();
    Flat flat = arena_.flat("CheckpointArena::load");  // every blob checked once, before anything moves
    const bool on_device = detail::on_device(options.target, device_backend::has_device);
    // Each blob is planned as it is matched, its diff once every blob's data is: at a million
    // tensors, a vector of the matches and one of the plan's tensors were a hundred bytes a tensor
    // of fresh memory per load, and two more passes over them.
    detail::Planner planner(sizeof(T), options.chunk_bytes, !on_device,  // a host load reads in place
                            std::exchange(pieces_, {}));
    // The blobs' tensors are distinct and no diffs, so at most the checkpoint's other tensors are
    // their diffs: exactly as many when the arena holds every tensor of the checkpoint.
    const std::size_t blobs = names_.size();
    const std::size_t others = ckpt.tensors().size() - std::min(ckpt.tensors().size(), blobs);
    planner.reserve(blobs + std::min(blobs, others));  // a piece per tensor, unless one spans chunks
    std::vector<bool> with_diff(blobs);
    auto diffs = std::exchange(diffs_, {});  // a blob, and the tensor of its diff (diffs_ is kept empty)
    diffs.reserve(std::min(blobs, others));
    const auto plan_tensor = [&](const Tensor& t, std::size_t i) {
        return detail::PlanTensor{.tensor = static_cast<std::size_t>(&t - ckpt.tensors().data()),
                                  .dst = arena_.slice(i).offset,
                                  .count = t.count,
                                  .dtype = t.dtype,
                                  .device_convert = on_device && detail::converts_on_device<T>(t.dtype),
                                  .shard = t.shard,
                                  .offset = t.offset};
    };
    each_match(ckpt, options.convert, "CheckpointArena::load", [&](std::size_t i, const Tensor& t, const Tensor* diff) {
        planner.add(plan_tensor(t, i), false);
        if (diff != nullptr) {
            with_diff[i] = true;
            diffs.emplace_back(i, diff);
        }
    });
    for (const auto& [i, diff] : diffs) {
        planner.add(plan_tensor(*diff, i), true);
    }
    detail::Plan plan = planner.finish();
    const unsigned threads = detail::reader_threads(options.threads, plan.chunks.size());
    LoadReport report = on_device ? load_device(flat, plan, with_diff, ckpt, options, threads, copy_stream)
                                  : load_host(flat, plan, with_diff, ckpt, options, threads);
    report.tensors = blobs + diffs.size();
    pieces_ = std::move(plan.pieces);  // for the next load (a load that threw allocates them anew)
    pieces_.clear();
    diffs.clear();
    diffs_ = std::move(diffs);
    report.bytes_read = plan.source_bytes;
    report.chunks = plan.chunks.size();
    report.threads = threads;
    report.on_device = on_device;
    report.seconds = detail::seconds_since(started);
    return report;
}

template <Element T, SyncedAllocator A>
LoadReport CheckpointArena<T, A>::load_host(Flat& flat, const detail::Plan& plan, const std::vector<bool>& with_diff,
                                            const Checkpoint& ckpt, const LoadOptions& options, unsigned threads) {
    auto& data = flat.data;
    auto& diff = flat.diff;
    // Heads at_host, the device sides stale: a pass over every blob's buffers (at a million blobs a
    // cache miss each), split among the reader threads as the reads are.
    const std::size_t blobs = arena_.size();
    parallel::run(threads, [&](unsigned part) {
        for (std::size_t i = blobs * part / threads; i < blobs * (part + 1) / threads; ++i) {
            (void)data.mutable_host_data_for_overwrite(i, i + 1);
            if (with_diff[i]) {
                (void)diff.mutable_host_data_for_overwrite(i, i + 1);
            }
        }
    });
    // The buffers' first bytes (blobs [0, 0): no head moves).
    auto* const data_base = reinterpret_cast<std::byte*>(data.mutable_host_data_for_overwrite(0, 0).data());
    auto* const diff_base = reinterpret_cast<std::byte*>(diff.mutable_host_data_for_overwrite(0, 0).data());
    detail::Progress progress(options.progress, plan.source_bytes);
    detail::read_into_host<T>(ckpt, plan, data_base, diff_base, threads, progress, detail::convert_rule(options));
    return LoadReport{};
}

template <Element T, SyncedAllocator A>
LoadReport CheckpointArena<T, A>::load_device(Flat& flat, const detail::Plan& plan, const std::vector<bool>& with_diff,
                                              const Checkpoint& ckpt, const LoadOptions& options, unsigned threads,
                                              stream_type copy_stream) {
    LoadReport report;
    if constexpr (device_backend::has_device) {
        using Load = detail::DeviceLoad<T, A>;
        const int device = detail::arena_device(arena_);
        const DeviceGuard<device_backend> guard(device);  // the arena's blocks and streams are its device's
        typename Load::Targets targets;
        auto& data = flat.data;
        auto& diff = flat.diff;
        for (std::size_t i = 0; i < arena_.size(); ++i) {  // heads at_device, the host sides stale
            targets.data = reinterpret_cast<std::byte*>(data.mutable_device_data_for_overwrite(i, i + 1));
            if (with_diff[i]) {
                targets.diff = reinterpret_cast<std::byte*>(diff.mutable_device_data_for_overwrite(i, i + 1));
            }
        }
        const std::vector<stream_type> streams = detail::load_streams(arena_, with_diff);
        for (const stream_type s : streams) {
            syncblob::detail::order_after<device_backend>(s, copy_stream);  // the copies overwrite what work on s uses
        }
        Load load(ckpt, plan, targets, copy_stream, device, detail::convert_rule(options));
        detail::Progress progress(options.progress, plan.source_bytes);
        try {
            load.run(threads, detail::staging_blocks(options.staging_blocks, plan.chunks.size(), threads),
                     plan.largest_chunk, progress);
        } catch (...) {
            for (const stream_type s : streams) {
                load.order(s);  // failed part-way: the copies already issued stay before any use of the blobs
            }
            throw;
        }
        for (const stream_type s : streams) {
            load.order(s);
        }
        report.host_to_device_copies = load.copies();
        report.device_conversions = load.conversions();
    }
    return report;
}

/// A new `CheckpointArena` of `ckpt`'s tensors (or of `names`), loaded with `options`.
template <Element T, SyncedAllocator A = HostOnly>
[[nodiscard]] CheckpointArena<T, A> load(const Checkpoint& ckpt, const LoadOptions& options = {},
                                         std::span<const std::string> names = {}) {
    CheckpointArena<T, A> arena(ckpt, names);
    (void)arena.load(ckpt, options);
    return arena;
}

}  // namespace checkpoint

SYNCBLOB_END_NAMESPACE
