// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Sharded safetensors checkpoints, as Hugging Face lays them out: shard files
/// `model-00001-of-00004.safetensors` … and an index `model.safetensors.index.json` that maps every
/// tensor to its shard (`{"metadata": {"total_size": N}, "weight_map": {name: shard}}`). A single
/// safetensors file is a checkpoint of one shard. `Checkpoint` opens either, checks the shards
/// against the index and against each other, and reads tensor bytes through the files it checked;
/// `Writer` (checkpoint_writer.hpp) writes one. The arena loader (syncblob/checkpoint.hpp)
/// streams a checkpoint into a `ParameterArena`. Needs the `syncblob::json` target.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../io/name_index.hpp"
#include "../io/safetensors.hpp"
#include "detail/index.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace checkpoint {

/// The index file name `Writer` writes and `Checkpoint::open` looks for in a folder.
inline constexpr std::string_view index_name = "model.safetensors.index.json";
/// The single-file checkpoint `Checkpoint::open` looks for in a folder that has no index.
inline constexpr std::string_view single_name = "model.safetensors";

/// One tensor of a checkpoint.
struct Tensor {
    std::string name;
    std::size_t shard = 0;  ///< position in `Checkpoint::shards()`
    Dtype dtype = Dtype::F32;
    Shape shape;
    std::uint64_t count = 0;   ///< elements
    std::uint64_t offset = 0;  ///< where its bytes start in the shard file
    std::uint64_t bytes = 0;   ///< count × the dtype's size
};

/// One shard file of a checkpoint.
struct Shard {
    std::filesystem::path path;
    std::uint64_t size = 0;  ///< bytes of the file
    io::Metadata metadata;   ///< its `__metadata__`
};

/// A checkpoint whose index and shard headers have been read and checked; tensor bytes are read on
/// demand through the shard files it opened (kept open, so they are the files that were checked).
/// Copies share those files.
class Checkpoint {
    [[nodiscard]] auto name_at() const {
        return [this](std::size_t i) -> std::string_view { return tensors_[i].name; };
    }

public:
    /// Opens a checkpoint: an index (`*.json`), a single safetensors file, or a folder holding
    /// `model.safetensors.index.json` or else `model.safetensors`. Every shard the index names is
    /// opened and its header validated; then the shards are checked against the index and each
    /// other. \throws FormatError naming the file and the tensor: a malformed index or shard; a
    /// tensor the index maps to a shard that does not hold it; a tensor held by two shards; a
    /// tensor a shard holds that the index does not name; a shard the index does not name (a gap
    /// in `-KKKKK-of-NNNNN` numbering); a `metadata.total_size` other than the bytes of the tensors;
    /// a tensor named twice in `weight_map`; a diff (`<name>.__diff__`) without its blob or of
    /// another dtype or shape. IOError when a file cannot be opened.
    [[nodiscard]] static Checkpoint open(const std::filesystem::path& path, const io::LoadOptions& options = {}) {
        namespace fs = std::filesystem;
        Checkpoint c;
        c.options_ = options;
        if (fs::is_directory(path)) {
            if (fs::exists(path / index_name)) {
                c.open_index(path / index_name);
            } else if (fs::exists(path / single_name)) {
                c.add_shard(path / single_name);
            } else {
                throw IOError("Checkpoint::open: folder \"" + path.string() + "\" holds neither " +
                              std::string(index_name) + " nor " + std::string(single_name));
            }
        } else if (path.extension() == ".json") {
            c.open_index(path);
        } else {
            c.add_shard(path);
        }
        c.index_names();
        if (!c.index_.empty()) {
            c.check_against_index();
        }
        c.check_diffs();
        return c;
    }

    /// The index file, or an empty path for a single-file checkpoint.
    [[nodiscard]] const std::filesystem::path& index_file() const noexcept { return index_; }
    /// The shards, sorted by file name.
    [[nodiscard]] const std::vector<Shard>& shards() const noexcept { return shards_; }
    /// Every tensor (diffs included, under their own names), shard by shard, each in data order.
    [[nodiscard]] const std::vector<Tensor>& tensors() const noexcept { return tensors_; }
    /// Bytes of all tensors (what `metadata.total_size` says).
    [[nodiscard]] std::uint64_t total_size() const noexcept {
        std::uint64_t n = 0;
        for (const auto& t : tensors_) {
            n += t.bytes;
        }
        return n;
    }

    /// The tensor named `name`, or null.
    [[nodiscard]] const Tensor* find(std::string_view name) const {
        const std::size_t i = by_name_.find(name, name_at());
        return i == io::detail::NameIndex::npos ? nullptr : &tensors_[i];
    }
    /// The tensor named `name`. \throws FormatError when the checkpoint has none.
    [[nodiscard]] const Tensor& at(std::string_view name) const {
        const auto* t = find(name);
        if (t == nullptr) {
            io::throw_format_error(source(), "tensor \"" + std::string(name) + "\"", "not in the checkpoint");
        }
        return *t;
    }
    /// The diff of tensor `t` (`<name>.__diff__`), or null. Without a lookup when `t` is one of
    /// this checkpoint's own `tensors()` (the diffs were paired with their blobs at open).
    [[nodiscard]] const Tensor* diff_of(const Tensor& t) const {
        const std::less<const Tensor*> before;  // a total order, for pointers into any array
        if (!tensors_.empty() && !before(&t, tensors_.data()) && before(&t, tensors_.data() + tensors_.size())) {
            const std::size_t d = diffs_[static_cast<std::size_t>(&t - tensors_.data())];
            return d == io::detail::NameIndex::npos ? nullptr : &tensors_[d];
        }
        return find(t.name + std::string(io::diff_suffix));
    }
    /// True for a diff's name (`<name>.__diff__`).
    [[nodiscard]] static bool is_diff(std::string_view name) noexcept { return name.ends_with(io::diff_suffix); }

    /// Reads `n` elements of `t` from element `first` into `dst`, converting by `rule` when `t`'s
    /// dtype is not T's (the caller decides whether conversion is allowed). Thread-safe.
    /// \throws FormatError (a value `rule` refuses, naming its element; a shard cut short since it
    /// was opened), IOError.
    template <Element T>
    void read_elements(const Tensor& t, std::uint64_t first, std::uint64_t n, T* dst,
                       io::detail::ConvertRule rule) const {
        const std::uint64_t at = t.offset + first * dtype_size(t.dtype);
        io::detail::read_elements(
            *files_[t.shard], at, t.dtype, false, static_cast<std::size_t>(n), dst,
            [&] { return "tensor \"" + t.name + "\" at byte " + std::to_string(at); }, rule);
    }
    /// Reads `bytes` raw bytes of `t` from its byte `first` into `dst`. Thread-safe. \throws as read_elements.
    void read_bytes(const Tensor& t, std::uint64_t first, void* dst, std::size_t bytes) const {
        files_[t.shard]->read_at(t.offset + first, dst, bytes, [&] { return "tensor \"" + t.name + "\""; });
    }

    /// The open file of shard `i`, unchecked (the loaders read it through `io::detail::ReadRuns`; no user API).
    [[nodiscard]] const io::detail::InputFile& shard_input(std::size_t i) const { return files_[i]->file(); }

    /// Shard `i` as a `SafetensorsFile` of its own (opened anew), for loading tensors one by one.
    [[nodiscard]] io::SafetensorsFile shard_file(std::size_t i, io::LoadMode mode = io::LoadMode::copy) const {
        return io::SafetensorsFile::open(shards_.at(i).path, options_, mode);
    }

    /// The options it was opened with (their `max_bytes` bounds what a loader allocates).
    [[nodiscard]] const io::LoadOptions& options() const noexcept { return options_; }

private:
    [[nodiscard]] std::string source() const {
        return index_.empty() ? (shards_.empty() ? std::string("checkpoint") : shards_[0].path.string())
                              : index_.string();
    }

    void open_index(const std::filesystem::path& file);
    void add_shard(const std::filesystem::path& file);
    void index_names();
    void check_against_index() const;
    void check_shard_numbers(const std::vector<std::string>& names) const;
    void check_diffs();

    std::filesystem::path index_;
    detail::CheckpointIndex index_data_;
    std::vector<Shard> shards_;
    std::vector<std::shared_ptr<const io::detail::FileSource>> files_;
    std::vector<Tensor> tensors_;
    io::detail::NameIndex by_name_;
    std::vector<std::size_t> diffs_;  ///< per tensor, the position of its diff (or npos)
    io::LoadOptions options_;
};

inline void Checkpoint::open_index(const std::filesystem::path& file) {
    index_ = file;
    index_data_ = detail::parse_checkpoint_index(io::read_file(file, options_.max_bytes), file.string());
    const auto& map = index_data_.weight_map;
    io::detail::NameIndex names;
    const auto tensor_at = [&](std::size_t i) -> std::string_view { return map[i].tensor; };
    if (const std::size_t d = names.build(map.size(), tensor_at); d != io::detail::NameIndex::npos) {
        io::throw_format_error(file.string(), "weight_map: tensor \"" + map[d].tensor + "\"", "named twice");
    }
    // The shards' names, each once, sorted. The index keeps a shard once per run of entries that
    // name it (most name the shard of the entry before); those are sorted through their positions
    // (name_order: no name copied, and most comparisons read only the array being sorted), then
    // each name is kept once.
    const std::vector<std::string>& named = index_data_.shards;
    std::vector<std::string> shard_names;
    for (const std::size_t k :
         io::detail::name_order(named.size(), [&](std::size_t i) -> std::string_view { return named[i]; })) {
        if (shard_names.empty() || shard_names.back() != named[k]) {
            shard_names.emplace_back(named[k]);
        }
    }
    check_shard_numbers(shard_names);
    for (const auto& name : shard_names) {
        add_shard(file.parent_path() / name);
    }
}

inline void Checkpoint::add_shard(const std::filesystem::path& file) {
    io::detail::OpenSafetensors s = io::detail::open_safetensors(file, options_.max_bytes);
    const std::size_t shard = shards_.size();
    for (auto& e : s.header.entries) {
        const Shape shape(std::span<const std::int64_t>(e.shape));  // checked by the header's reader
        tensors_.push_back(
            Tensor{std::move(e.name), shard, e.dtype, shape, e.count, s.header.data_start + e.begin, e.end - e.begin});
    }
    shards_.push_back(Shard{file, s.file->size(), std::move(s.header.metadata)});
    files_.push_back(std::move(s.file));
}

// Indexes every tensor by name; a name found twice is a tensor held by two shards.
inline void Checkpoint::index_names() {
    if (const std::size_t d = by_name_.build(tensors_.size(), name_at()); d != io::detail::NameIndex::npos) {
        const auto& twice = tensors_[d];
        const auto& first = tensors_[by_name_.find(twice.name, name_at())];
        io::throw_format_error(shards_[twice.shard].path.string(), "tensor \"" + twice.name + "\"",
                               "also in " + shards_[first.shard].path.string() + " (a tensor must be in one shard)");
    }
}

inline void Checkpoint::check_against_index() const {
    const auto& map = index_data_.weight_map;
    std::vector<std::string> files;  // each shard's file name, made once (not a path per tensor)
    files.reserve(shards_.size());
    for (const auto& s : shards_) {
        files.push_back(s.path.filename().string());
    }
    for (const auto& e : map) {
        const Tensor* t = find(e.tensor);
        const std::string& shard = index_data_.shards[e.shard];
        if (t == nullptr || files[t->shard] != shard) {
            io::throw_format_error(index_.string(), "weight_map: tensor \"" + e.tensor + "\"",
                                   "mapped to shard " + shard + ", which does not hold it" +
                                       (t == nullptr ? std::string(" (no shard does)")
                                                     : " (" + shards_[t->shard].path.string() + " does)"));
        }
    }
    if (map.size() != tensors_.size()) {  // every entry was found: some tensor has none
        io::detail::NameIndex named;
        const auto tensor_at = [&](std::size_t i) -> std::string_view { return map[i].tensor; };
        (void)named.build(map.size(), tensor_at);
        for (const auto& t : tensors_) {
            if (named.find(t.name, tensor_at) == io::detail::NameIndex::npos) {
                io::throw_format_error(shards_[t.shard].path.string(), "tensor \"" + t.name + "\"",
                                       "the index " + index_.string() +
                                           " does not name it (weight_map must map every "
                                           "tensor of every shard)");
            }
        }
    }
    if (index_data_.total_size && *index_data_.total_size != total_size()) {
        io::throw_format_error(index_.string(), "metadata: total_size",
                               std::to_string(*index_data_.total_size) + " bytes, but the shards hold " +
                                   std::to_string(total_size()) + " bytes of tensors");
    }
}

// Shards numbered "<stem>-KKKKK-of-NNNNN.safetensors": the index must name all N of each stem.
// Linear after the sort: each group's numbers (distinct, each in [1, N]) are 1 … N exactly when the
// i-th smallest is i + 1 for every i, and the first i where it is not is the first shard missing.
inline void Checkpoint::check_shard_numbers(const std::vector<std::string>& names) const {
    std::map<std::pair<std::string, std::size_t>, std::vector<std::size_t>> groups;
    for (const auto& name : names) {
        if (auto n = detail::shard_number(name)) {
            groups[{n->stem, n->n}].push_back(n->k);
        }
    }
    for (auto& [key, ks] : groups) {
        std::sort(ks.begin(), ks.end());
        ks.erase(std::unique(ks.begin(), ks.end()), ks.end());  // "-00001-" and "-000001-" are one number
        std::size_t missing = 0;
        while (missing < ks.size() && ks[missing] == missing + 1) {
            ++missing;
        }
        if (missing < key.second) {
            io::throw_format_error(index_.string(), "weight_map",
                                   "names " + std::to_string(ks.size()) + " of the " + std::to_string(key.second) +
                                       " shards of " + key.first + " but not shard " +
                                       detail::shard_file_name(key.first, missing + 1, key.second) +
                                       " (a shard the index does not name)");
        }
    }
}

// Every diff has its blob, of the same dtype and shape, in whichever shards they are; each blob
// learns where its diff is (diffs_).
inline void Checkpoint::check_diffs() {
    diffs_.assign(tensors_.size(), io::detail::NameIndex::npos);
    for (const auto& d : tensors_) {
        if (!is_diff(d.name)) {
            continue;
        }
        const std::string_view blob = std::string_view(d.name).substr(0, d.name.size() - io::diff_suffix.size());
        const Tensor* b = is_diff(blob) ? nullptr : find(blob);
        if (b == nullptr) {
            io::throw_format_error(shards_[d.shard].path.string(), "tensor \"" + d.name + "\"",
                                   "its name makes it the diff of \"" + std::string(blob) +
                                       "\", but the checkpoint has no such tensor (or it is a diff itself)");
        }
        if (b->dtype != d.dtype || b->shape != d.shape) {
            io::throw_format_error(shards_[d.shard].path.string(), "tensor \"" + d.name + "\"",
                                   std::string(dtype_name(d.dtype)) + " " + d.shape.to_string() + ", but its blob \"" +
                                       b->name + "\" in " + shards_[b->shard].path.string() + " is " +
                                       std::string(dtype_name(b->dtype)) + " " + b->shape.to_string() +
                                       " (a diff must have its blob's dtype and shape)");
        }
        diffs_[static_cast<std::size_t>(b - tensors_.data())] = static_cast<std::size_t>(&d - tensors_.data());
    }
}

}  // namespace checkpoint

// The names the reader had in namespace io, kept for the 0.2 releases (CHANGELOG, "What to change").
namespace io {
using Checkpoint [[deprecated("use syncblob::checkpoint::Checkpoint (syncblob/checkpoint/reader.hpp)")]] =
    checkpoint::Checkpoint;
using CheckpointTensor [[deprecated("use syncblob::checkpoint::Tensor (syncblob/checkpoint/reader.hpp)")]] =
    checkpoint::Tensor;
using CheckpointShard [[deprecated("use syncblob::checkpoint::Shard (syncblob/checkpoint/reader.hpp)")]] =
    checkpoint::Shard;
[[deprecated(
    "use syncblob::checkpoint::index_name (syncblob/checkpoint/reader.hpp)")]] inline constexpr std::string_view
    checkpoint_index_name = checkpoint::index_name;
[[deprecated(
    "use syncblob::checkpoint::single_name (syncblob/checkpoint/reader.hpp)")]] inline constexpr std::string_view
    checkpoint_single_name = checkpoint::single_name;
}  // namespace io

SYNCBLOB_END_NAMESPACE
