// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Writing sharded safetensors checkpoints: `CheckpointWriter` collects named blobs (and raw
/// tensors) and saves them as shards of at most a given size plus an index, shards first and the
/// index last, each file atomically, so that a crash never leaves an index that names a missing or
/// partial shard. Needs the `syncblob::json` target.

#include <unistd.h>

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "checkpoint.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace io::detail {

// The shard names an existing index names, or none when there is none or it cannot be read.
inline std::set<std::string> shards_named_by(const std::filesystem::path& index) {
    std::set<std::string> names;
    try {
        for (const auto& e :
             parse_checkpoint_index(io::read_file(index, io::default_max_bytes), index.string()).weight_map) {
            names.insert(e.shard);
        }
    } catch (const Error&) {  // unreadable: nothing of it is cleaned up
        names.clear();
    }
    return names;
}

// Removes `file` (absent is fine); with `fsync`, syncs its folder so the removal is on disk.
inline void remove_file(const std::filesystem::path& file, bool fsync) {
    if (::unlink(file.c_str()) != 0 && errno != ENOENT) {
        throw_io_error("save", "cannot remove", file, errno);
    }
    if (fsync) {
        const FileDescriptor folder(::open(file.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        if (folder.valid()) {
            (void)::fsync(folder.get());
        }
    }
}

}  // namespace io::detail

namespace io {

/// How `CheckpointWriter::save` lays a checkpoint out.
struct CheckpointSaveOptions {
    /// The most tensor bytes a shard holds (transformers' default, "5GB"). A tensor larger than
    /// that (a blob and its diff count as one) gets a shard of its own.
    std::uint64_t max_shard_bytes = 5'000'000'000;
    /// Shards are `<prefix>-00001-of-0000N.safetensors`, the index `<prefix>.safetensors.index.json`.
    std::string prefix = "model";
    /// `fsync` each file before its rename and the folder after it (see `SaveOptions::fsync`): then
    /// the shards are on disk before the index names them, even across a power loss.
    bool fsync = false;
    /// Called as the save goes on with (bytes written so far, bytes of all files): after each
    /// tensor and after each file is in place. What it throws stops the save (see `save`).
    std::function<void(std::uint64_t, std::uint64_t)> progress;
};

/// Collects named blobs, then saves them as a sharded checkpoint. As with `SafetensorsWriter`, the
/// blobs are read when added (synchronised to the host then) and must stay alive and unchanged
/// until `save` returns.
class CheckpointWriter {
public:
    /// Adds the blob's data as `name` and, with `with_diff`, its diff as `name.__diff__` (in the same
    /// shard). \throws FormatError as `SafetensorsWriter::add` (a name already taken, reserved, not
    /// UTF-8): nothing is added then.
    template <Element T, SyncedAllocator A>
    void add(std::string name, const Blob<T, A>& blob, bool with_diff = false) {
        Unit u{name, static_cast<std::uint64_t>(blob.count()) * sizeof(T) * (with_diff ? 2 : 1), with_diff,
               [&blob, with_diff](SafetensorsWriter& w, std::string n) { w.add(std::move(n), blob, with_diff); }};
        make_room();
        check_.add(std::move(name), blob, with_diff);
        units_.push_back(std::move(u));  // within the room made: cannot throw
    }

    /// Adds raw little-endian bytes as a tensor (`bytes` must outlive `save`). \throws FormatError
    /// as `SafetensorsWriter::add_bytes`.
    void add_bytes(std::string name, Dtype dtype, std::vector<std::int64_t> shape, std::span<const std::byte> bytes) {
        Unit u{name, bytes.size(), false, [dtype, shape, bytes](SafetensorsWriter& w, std::string n) {
                   w.add_bytes(std::move(n), dtype, shape, bytes);
               }};
        make_room();
        check_.add_bytes(std::move(name), dtype, std::move(shape), bytes);
        units_.push_back(std::move(u));
    }

    /// The string metadata every shard carries as `__metadata__` (transformers writes `format: pt`).
    Metadata& metadata() noexcept { return metadata_; }

    /// Writes the checkpoint into `folder` (created if needed) and returns the index's path. Tensors
    /// go to shards in the order they were added, a new shard whenever the next would pass
    /// `max_shard_bytes`. Each shard is saved atomically (`save_atomic`), then the index; so the
    /// index at the target is, at every moment, the old one, the new one, or none:
    /// - a new shard whose name is taken by a file of the old checkpoint would change a shard the
    ///   old index names, so the old index is removed first (a crash then leaves no index);
    /// - otherwise the old index stays until the new one replaces it, and the old checkpoint stays
    ///   loadable all along;
    /// - after the new index is in place, the shards the old index named and the new one does not
    ///   are removed.
    /// \throws IOError, FormatError (a name that is not valid UTF-8 in a file), and what `progress`
    /// throws; the files already in place stay (shards without an index that names them, or
    /// the complete new checkpoint when only the clean-up failed).
    std::filesystem::path save(const std::filesystem::path& folder, const CheckpointSaveOptions& options = {}) const;

private:
    struct Unit {
        std::string name;
        std::uint64_t bytes;  // of the data and, when `diff`, the diff
        bool diff;
        std::function<void(SafetensorsWriter&, std::string)> add;
    };

    void make_room() {  // geometric growth: reserve(size + 1) each time would be quadratic
        if (units_.capacity() == units_.size()) {
            units_.reserve(std::max<std::size_t>(16, 2 * units_.size()));
        }
    }

    // Tensors per shard: in order, a new shard whenever the next unit would pass the limit.
    [[nodiscard]] std::vector<std::vector<const Unit*>> plan(std::uint64_t max_bytes) const {
        std::vector<std::vector<const Unit*>> shards(1);
        std::uint64_t in_shard = 0;
        for (const auto& u : units_) {
            if (!shards.back().empty() && u.bytes > max_bytes - std::min(max_bytes, in_shard)) {
                shards.emplace_back();
                in_shard = 0;
            }
            shards.back().push_back(&u);
            in_shard += u.bytes;
        }
        return shards;
    }

    SafetensorsWriter check_;  // checks names as they are added, across all shards
    std::vector<Unit> units_;
    Metadata metadata_;
};

inline std::filesystem::path CheckpointWriter::save(const std::filesystem::path& folder,
                                                    const CheckpointSaveOptions& options) const {
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::create_directories(folder, ec);
    if (ec) {
        detail::throw_io_error("save", "cannot create the folder", folder, ec.value());
    }
    const auto shards = plan(options.max_shard_bytes == 0 ? 1 : options.max_shard_bytes);
    const fs::path index = folder / (options.prefix + ".safetensors.index.json");
    std::vector<SafetensorsWriter> writers(shards.size());
    std::vector<std::string> names;
    std::vector<detail::WeightMapEntry> map;
    std::uint64_t tensor_bytes = 0;
    std::uint64_t total = 0;  // of every file
    for (std::size_t k = 0; k < shards.size(); ++k) {
        names.push_back(detail::shard_file_name(options.prefix, k + 1, shards.size()));
        writers[k].metadata() = metadata_;
        for (const Unit* u : shards[k]) {
            u->add(writers[k], u->name);
            map.push_back({u->name, names[k]});
            if (u->diff) {
                map.push_back({u->name + std::string(diff_suffix), names[k]});
            }
            tensor_bytes += u->bytes;
            total += u->bytes;
        }
        total += writers[k].header().size();
    }
    std::sort(map.begin(), map.end(), [](const auto& a, const auto& b) { return a.tensor < b.tensor; });
    const std::string text = detail::checkpoint_index_text(tensor_bytes, map);
    total += text.size();

    const std::set<std::string> old = fs::exists(index) ? detail::shards_named_by(index) : std::set<std::string>{};
    if (std::any_of(names.begin(), names.end(), [&](const std::string& n) { return fs::exists(folder / n); })) {
        detail::remove_file(index, options.fsync);  // the old index must not name a shard replaced below
    }
    std::uint64_t done = 0;
    const auto report = [&](std::uint64_t at) {
        if (options.progress) {
            options.progress(at, total);
        }
    };
    for (std::size_t k = 0; k < shards.size(); ++k) {
        const fs::path file = folder / names[k];
        writers[k].save(file, SaveOptions{options.fsync},
                        [&](std::uint64_t written, std::uint64_t) { report(done + written); });
        done += fs::file_size(file);
        report(done);
    }
    save_atomic(index, SaveOptions{options.fsync}, [&](FileWriter& w) { w.write(text.data(), text.size()); });
    report(total);
    for (const auto& stale : old) {  // what the old index named and the new one does not
        if (std::find(names.begin(), names.end(), stale) == names.end() && stale != index.filename()) {
            detail::remove_file(folder / stale, false);
        }
    }
    return index;
}

}  // namespace io

SYNCBLOB_END_NAMESPACE
