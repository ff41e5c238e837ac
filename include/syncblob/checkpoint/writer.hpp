// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Writing sharded safetensors checkpoints: `Writer` collects named blobs (and raw
/// tensors) and saves them as shards of at most a given size plus an index, shards first and the
/// index last, each file atomically, so that a crash never leaves an index that names a missing or
/// partial shard. Needs the `syncblob::json` target.

#include <unistd.h>

#include <fcntl.h>

#include <climits>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "../io/name_index.hpp"
#include "reader.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace checkpoint::detail {

// A name as messages print it: printable ASCII as it is, every other byte as \xNN.
inline std::string shown_name(std::string_view name) {
    std::string out;
    for (const char c : name) {
        const auto u = static_cast<unsigned char>(c);
        if (u >= 0x20 && u < 0x7F && c != '\\') {
            out.push_back(c);
        } else {
            constexpr char hex[] = "0123456789abcdef";
            out.append("\\x").push_back(hex[u >> 4]);
            out.push_back(hex[u & 0xF]);
        }
    }
    return out;
}

// Refuses a prefix whose files `Checkpoint::open` could not read back (or that are no file names).
inline void check_prefix(const std::string& prefix, std::size_t shards) {
    const auto refuse = [&](const std::string& why) {
        throw OptionError("checkpoint::Writer::save: SaveOptions::prefix \"" + shown_name(prefix) + "\": " + why);
    };
    if (prefix.empty() || prefix == "." || prefix == "..") {
        refuse("not a name for the checkpoint's files");
    }
    if (prefix.find('/') != std::string::npos) {
        refuse("holds a '/'; a prefix names files in the folder given to save (pass the folder instead)");
    }
    if (prefix.find('\0') != std::string::npos) {
        refuse("holds a NUL byte");
    }
    try {
        (void)io::parse::json_quote(prefix, "prefix");
    } catch (const FormatError&) {
        refuse("is not valid UTF-8 (the index names its shards in JSON)");
    }
    const std::size_t longest =
        std::max(prefix.size() + std::string_view(".safetensors.index.json").size(),
                 shard_file_name(prefix, std::max<std::size_t>(shards, 1), std::max<std::size_t>(shards, 1)).size());
    if (longest > NAME_MAX) {
        refuse("makes file names of " + std::to_string(longest) + " bytes, more than a file name may have (" +
               std::to_string(NAME_MAX) + ")");
    }
}

// The shards the old index at `index` names, or none when there is no file there. \throws IOError when there is a
// file that is not a checkpoint index: a save replaces only an index it can read.
inline std::optional<CheckpointIndex> old_index(const std::filesystem::path& index) {
    std::error_code ec;
    if (!std::filesystem::exists(std::filesystem::symlink_status(index, ec))) {
        return std::nullopt;
    }
    try {
        return parse_checkpoint_index(io::read_file(index, io::default_max_bytes), index.string(), IndexRead::shards);
    } catch (const Error& e) {
        throw IOError("checkpoint::Writer::save: cannot replace " + index.string() +
                      ": it is not a checkpoint index (" + e.what() +
                      "); a save replaces only an index it can read. Move it away or choose another "
                      "SaveOptions::prefix");
    }
}

// Why `file` is not provably a safetensors file ("" when it is: its header parses).
inline std::string not_safetensors(const std::filesystem::path& file) {
    try {
        (void)io::detail::open_safetensors(file, io::default_max_bytes);
        return {};
    } catch (const Error& e) {
        return std::string("not a safetensors file (") + e.what() + ")";
    }
}

// Why a file the old index named is not provably one of its shards ("" when it is): a shard has
// the old index's pattern `<prefix>-KKKKK-of-NNNNN.safetensors` and a safetensors header.
inline std::string not_old_shard(const std::filesystem::path& file, std::string_view prefix) {
    const auto n = shard_number(file.filename().string());
    if (!n || n->stem != prefix) {
        return "not named as the old index's shards are (" + std::string(prefix) + "-KKKKK-of-NNNNN.safetensors)";
    }
    return not_safetensors(file);
}

// Removes `file` (absent is fine); with `fsync`, syncs its folder so the removal is on disk.
inline void remove_file(const std::filesystem::path& file, bool fsync) {
    if (::unlink(file.c_str()) != 0 && errno != ENOENT) {
        io::detail::throw_io_error("save", "cannot remove", file, errno);
    }
    if (fsync) {
        const io::detail::FileDescriptor folder(::open(file.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        if (folder.valid()) {
            (void)::fsync(folder.get());
        }
    }
}

}  // namespace checkpoint::detail

namespace checkpoint {

/// How `Writer::save` lays a checkpoint out.
struct SaveOptions {
    /// The most tensor bytes a shard holds (transformers' default, "5GB"). A tensor larger than
    /// that (a blob and its diff count as one) gets a shard of its own; 0: a shard per tensor.
    std::uint64_t max_shard_bytes = 5'000'000'000;
    /// Shards are `<prefix>-00001-of-0000N.safetensors`, the index `<prefix>.safetensors.index.json`:
    /// a file name (no '/', no NUL, valid UTF-8, not "." or "..", short enough for the names it
    /// makes), or `save` throws OptionError before writing anything.
    std::string prefix = "model";
    /// `fsync` each file before its rename and the folder after it (see `io::SaveOptions::fsync`): then
    /// the shards are on disk before the index names them, even across a power loss.
    bool fsync = false;
    /// Called as the save goes on with (bytes written so far, bytes of all files): after each
    /// tensor and after each file is in place. What it throws stops the save (see `save`).
    std::function<void(std::uint64_t, std::uint64_t)> progress;
};

/// What `Writer::save` wrote, removed and left; converts to the index's path.
struct SaveReport {
    /// A file the old index named that the save left in place, and why.
    struct Kept {
        std::filesystem::path file;
        std::string reason;
    };
    std::filesystem::path index;                 ///< the new index
    std::vector<std::filesystem::path> shards;   ///< the new shards, in order
    std::vector<std::filesystem::path> removed;  ///< old shards the new index does not name, removed
    std::vector<Kept> kept;  ///< files the old index named, not provably its shards: left as they were

    operator const std::filesystem::path&() const noexcept { return index; }  // NOLINT: the index, as before
};

/// Collects named blobs, then saves them as a sharded checkpoint. Like `SafetensorsWriter` it owns
/// what it needs: each blob's storage is held from `add` on, and `save` reads the values it holds
/// then, so the blobs may be moved or destroyed in between.
class Writer {
public:
    /// Adds the blob's data as `name` and, with `with_diff`, its diff as `name.__diff__` (in the same
    /// shard). \throws FormatError as `SafetensorsWriter::add` (a name already taken, reserved, not
    /// UTF-8): nothing is added then.
    template <Element T, SyncedAllocator A>
    void add(std::string name, const Blob<T, A>& blob, bool with_diff = false) {
        all_.add(std::move(name), blob, with_diff);
    }

    /// Adds raw little-endian bytes as a tensor (copied). \throws FormatError as
    /// `SafetensorsWriter::add_bytes`.
    void add_bytes(std::string name, Dtype dtype, std::vector<std::int64_t> shape, std::span<const std::byte> bytes) {
        all_.add_bytes(std::move(name), dtype, std::move(shape), bytes);
    }

    /// The string metadata every shard carries as `__metadata__` (transformers writes `format: pt`).
    io::Metadata& metadata() noexcept { return all_.metadata(); }

    /// Writes the checkpoint into `folder` (created if needed). Tensors go to shards in the order
    /// they were added, a new shard whenever the next would pass `max_shard_bytes`. A checkpoint of
    /// no tensors is its index alone (no shard: an index names a shard only through a tensor, so the
    /// metadata shards carry is not written either). Each shard is
    /// saved atomically (`save_atomic`), then the index; so the index at the target is, at every
    /// moment, the old one, the new one, or none:
    /// - a new shard whose name is taken by a file of the old checkpoint would change a shard the
    ///   old index names, so the old index is removed first (a crash then leaves no index);
    /// - otherwise the old index stays until the new one replaces it, and the old checkpoint stays
    ///   loadable all along;
    /// - after the new index is in place, the files the old index named and the new one does not
    ///   are removed when they are provably its shards (named `<prefix>-KKKKK-of-NNNNN.safetensors`
    ///   and a safetensors file); any other (a `config.json`, a tokenizer) is left and reported in
    ///   `SaveReport::kept`.
    /// It replaces nothing it cannot prove is a checkpoint's: a file at the index's name that is no
    /// checkpoint index, or at a new shard's name that is no safetensors file, is an IOError before
    /// anything is written.
    /// \throws OptionError (a prefix that would not read back), IOError, FormatError (a name that is
    /// not valid UTF-8 in a file), StateError (see `SafetensorsWriter::save`), and what `progress`
    /// throws; the files already in place stay (shards without an index that names them, or the
    /// complete new checkpoint when only the clean-up failed).
    SaveReport save(const std::filesystem::path& folder, const SaveOptions& options = {}) const;

private:
    [[nodiscard]] bool is_diff(std::size_t i) const { return all_.entries_[i].entry.name.ends_with(io::diff_suffix); }

    // Entries per shard: in order, a new shard whenever the next blob (with its diff) would pass the limit.
    [[nodiscard]] std::vector<std::vector<std::size_t>> plan(std::uint64_t max_bytes) const {
        const auto& entries = all_.entries_;
        std::vector<std::vector<std::size_t>> shards;
        if (!entries.empty()) {
            shards.emplace_back();
        }
        std::uint64_t in_shard = 0;
        for (std::size_t i = 0; i < entries.size(); ++i) {
            const bool with_diff = i + 1 < entries.size() && is_diff(i + 1);  // a diff follows its blob
            const std::uint64_t bytes = entries[i].bytes.size() + (with_diff ? entries[i + 1].bytes.size() : 0);
            if (!shards.back().empty() && bytes > max_bytes - std::min(max_bytes, in_shard)) {
                shards.emplace_back();
                in_shard = 0;
            }
            shards.back().push_back(i);
            if (with_diff) {
                shards.back().push_back(++i);
            }
            in_shard += bytes;
        }
        return shards;
    }

    io::SafetensorsWriter all_;  // every tensor, in the order added; checks names across all shards
};

inline SaveReport Writer::save(const std::filesystem::path& folder, const SaveOptions& options) const {
    namespace fs = std::filesystem;
    const auto shards = plan(options.max_shard_bytes == 0 ? 1 : options.max_shard_bytes);
    detail::check_prefix(options.prefix, shards.size());
    for (const auto& [key, value] : all_.metadata_) {  // refused even where no shard would carry it
        (void)io::parse::json_quote(key, "metadata key");
        (void)io::parse::json_quote(value, "metadata value");
    }
    SaveReport saved;
    saved.index = folder / (options.prefix + ".safetensors.index.json");
    // Each shard is written from the entries where they are, through positions: no entry is
    // copied (a shape, a long name and a holder each) and no name indexed again.
    const auto& entries = all_.entries_;
    const auto name_of = [&](std::size_t i) -> std::string_view { return entries[i].entry.name; };
    std::vector<std::string> names;
    std::vector<std::vector<std::size_t>> in_file;  // each shard's entries, in its file's order
    std::vector<std::string> heads;                 // each shard's header, built once
    std::vector<std::size_t> shard_of(entries.size());
    std::uint64_t tensor_bytes = 0;
    std::uint64_t total = 0;  // of every file
    for (std::size_t k = 0; k < shards.size(); ++k) {
        const auto& in = shards[k];
        names.push_back(detail::shard_file_name(options.prefix, k + 1, shards.size()));
        saved.shards.push_back(folder / names.back());
        auto order = io::SafetensorsWriter::reference_order(
            in.size(), [&](std::size_t j) { return name_of(in[j]); },
            [&](std::size_t j) { return entries[in[j]].entry.dtype; });
        std::vector<std::uint64_t> begin(in.size() + 1, 0);
        for (std::size_t j = 0; j < in.size(); ++j) {
            order[j] = in[order[j]];
            shard_of[order[j]] = k;
            begin[j + 1] = begin[j] + entries[order[j]].bytes.size();
        }
        heads.push_back(io::SafetensorsWriter::header_of(
            in.size(),
            [&](std::size_t j) {
                const auto& e = entries[order[j]].entry;
                return io::SafetensorsWriter::EntryView{e.name, e.dtype, e.shape, begin[j], begin[j + 1]};
            },
            all_.metadata_));
        tensor_bytes += begin.back();
        total += begin.back() + heads.back().size();
        in_file.push_back(std::move(order));
    }
    // In name order through the positions (no comparison reads a name through its entry).
    const std::vector<std::size_t> by_name = io::detail::name_order(entries.size(), name_of);
    const std::string text = detail::checkpoint_index_text(
        tensor_bytes, by_name.size(), [&](std::size_t i) { return name_of(by_name[i]); },
        [&](std::size_t i) -> std::string_view { return names[shard_of[by_name[i]]]; });
    total += text.size();

    // What is there already: an index only if it reads as one, a shard's name only over a safetensors file.
    const auto old = detail::old_index(saved.index);
    bool replaces_shard = false;
    for (const auto& file : saved.shards) {
        std::error_code ec;
        if (fs::exists(fs::symlink_status(file, ec))) {
            if (const std::string why = detail::not_safetensors(file); !why.empty()) {
                throw IOError("checkpoint::Writer::save: cannot replace " + file.string() + ": it is " + why +
                              "; a save replaces only a shard it can read. Move it away or choose another "
                              "SaveOptions::prefix");
            }
            replaces_shard = true;
        }
    }
    std::error_code ec;
    fs::create_directories(folder, ec);
    if (ec) {
        io::detail::throw_io_error("save", "cannot create the folder", folder, ec.value());
    }
    if (old && replaces_shard) {
        detail::remove_file(saved.index, options.fsync);  // the old index must not name a shard replaced below
    }
    std::uint64_t done = 0;
    const auto report = [&](std::uint64_t at) {
        if (options.progress) {
            options.progress(at, total);
        }
    };
    for (std::size_t k = 0; k < shards.size(); ++k) {
        const auto& order = in_file[k];
        io::SafetensorsWriter::write_file(
            saved.shards[k], io::SaveOptions{options.fsync},
            [&](std::uint64_t written, std::uint64_t) { report(done + written); }, heads[k],
            order.size(), [&](std::size_t j) -> const auto& { return entries[order[j]]; });
        heads[k] = {};
        done += fs::file_size(saved.shards[k]);
        report(done);
    }
    io::save_atomic(saved.index, io::SaveOptions{options.fsync},
                    [&](io::FileWriter& w) { w.write(text.data(), text.size()); });
    report(total);
    if (!old) {
        return saved;
    }
    std::set<std::string> stale;  // what the old index named and the new one does not
    for (const auto& shard : old->shards) {
        stale.insert(shard);
    }
    for (const auto& n : names) {
        stale.erase(n);
    }
    stale.erase(saved.index.filename().string());
    for (const auto& name : stale) {
        const fs::path file = folder / name;
        if (!fs::exists(fs::symlink_status(file, ec))) {
            continue;
        }
        if (std::string why = detail::not_old_shard(file, options.prefix); !why.empty()) {
            saved.kept.push_back({file, std::move(why)});
            continue;
        }
        detail::remove_file(file, false);
        saved.removed.push_back(file);
    }
    return saved;
}

}  // namespace checkpoint

// The names the writer had in namespace io, kept for the 0.2 releases (CHANGELOG, "What to change").
namespace io {
using CheckpointWriter [[deprecated("use syncblob::checkpoint::Writer (syncblob/checkpoint/writer.hpp)")]] =
    checkpoint::Writer;
using CheckpointSaveOptions [[deprecated("use syncblob::checkpoint::SaveOptions (syncblob/checkpoint/writer.hpp)")]] =
    checkpoint::SaveOptions;
using SavedCheckpoint [[deprecated("use syncblob::checkpoint::SaveReport (syncblob/checkpoint/writer.hpp)")]] =
    checkpoint::SaveReport;
}  // namespace io

SYNCBLOB_END_NAMESPACE
