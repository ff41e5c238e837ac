// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// safetensors files: many named blobs plus string metadata, written byte for byte as the
/// format's reference implementation writes them, read with every rule of its reader enforced,
/// and loadable by memory-mapping the file and borrowing its pages without a copy.
///
/// A blob's diff, when saved, is the tensor `<name>.__diff__` (`diff_suffix`): same dtype and
/// shape as `<name>`. Loading `<name>` also loads that tensor, when present, into the diff. Names
/// ending in the suffix are reserved for diffs: the writer refuses them as names of their own, and
/// `load_all` refuses a diff whose blob is not in the file (every tensor loads or is an error).
/// Needs the `syncblob::json` target (nlohmann/json).

#include <algorithm>
#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../blob/blob.hpp"
#include "detail/byte_source.hpp"
#include "detail/mapped_file.hpp"
#include "detail/safetensors_format.hpp"
#include "detail/safetensors_header.hpp"
#include "detail/staged_load.hpp"
#include "file.hpp"
#include "name_index.hpp"
#include "read_runs.hpp"
#include "safetensors_writer.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace io {

/// How `SafetensorsFile` reaches the tensor bytes.
enum class LoadMode : std::uint8_t {
    copy,  ///< read each tensor into memory the blob owns
    /// Memory-map the file; blobs borrow its pages read-only (no copy when the dtype matches) and
    /// keep the mapping alive. Such a blob depends on the file's contents: if another program
    /// truncates the file, reading a vanished page raises SIGBUS (the process dies); if it rewrites
    /// the file in place, the blob's values change. syncblob's own saves never disturb a mapping
    /// (they replace the file by a rename). The first mutable access copies into owned memory, so
    /// the file is never written. `LoadOptions::max_bytes` applies as for a copying load.
    map,
};

/// Description of one tensor in a file.
struct TensorInfo {
    std::string name;
    Dtype dtype;
    Shape shape;
    std::uint64_t data_begin;  ///< offset in the data section
    std::uint64_t data_end;
};

/// A safetensors file whose header has been read and validated; tensors are loaded on demand.
class SafetensorsFile {
public:
    /// Opens `file` and validates its header; tensors are then read with positioned reads
    /// (`LoadMode::copy`) or borrowed from a read-only mapping (`LoadMode::map`).
    /// \throws FormatError on a malformed file, IOError.
    [[nodiscard]] static SafetensorsFile open(const std::filesystem::path& file, LoadOptions options = {},
                                              LoadMode mode = LoadMode::copy) {
        SafetensorsFile f(options);
        if (mode == LoadMode::map) {
            f.mapping_ = detail::MappedFile::open(file);
            f.memory_.emplace(f.mapping_->bytes(), file.string());
        } else {
            f.file_ = std::make_shared<detail::FileSource>(file);
        }
        f.read_header();
        return f;
    }

    /// Reads from bytes in memory (which must outlive the object); `source` names them in errors.
    [[nodiscard]] static SafetensorsFile from_memory(std::span<const std::byte> bytes, std::string_view source,
                                                     LoadOptions options = {}) {
        SafetensorsFile f(options);
        f.memory_.emplace(bytes, source);
        f.read_header();
        return f;
    }

    [[nodiscard]] const Metadata& metadata() const noexcept { return header_.metadata; }

    /// Every tensor, in file order (diff tensors included, under their own names).
    [[nodiscard]] std::vector<TensorInfo> tensors() const {
        std::vector<TensorInfo> out;
        for (const auto& e : header_.entries) {
            out.push_back({e.name, e.dtype, Shape(std::span<const std::int64_t>(e.shape)), e.begin, e.end});
        }
        return out;
    }

    [[nodiscard]] bool contains(std::string_view name) const { return find(name) != nullptr; }

    /// Loads tensor `name` into the blob's data and, when the file holds `name.__diff__`, into its
    /// diff, through new storage that replaces the blob's only when everything has been read (data
    /// and diff together). With `LoadMode::map` and a matching dtype the new storage borrows the
    /// mapped pages: no allocation, no copy; the first mutable access copies (see `LoadMode::map`
    /// for what such a blob depends on). \throws FormatError (unknown name, dtype mismatch without
    /// `convert`, a size over `max_bytes`, a file cut short since it was opened), ShapeError (shape
    /// mismatch without `reshape`), IOError, std::bad_alloc. On any exception the blob is unchanged.
    template <Element T, SyncedAllocator A>
    void load(std::string_view name, Blob<T, A>& blob) const {
        const auto& data = require(name);
        load_entries(data, diff_of(data), blob);
    }

    /// A new blob holding tensor `name` (and its diff).
    template <Element T, SyncedAllocator A = HostOnly>
    [[nodiscard]] Blob<T, A> load(std::string_view name) const {
        Blob<T, A> blob;
        load(name, blob);
        return blob;
    }

    /// Every tensor: each loads as a blob, except a diff `<name>.__diff__`, which loads into the
    /// diff of blob `<name>`. `max_bytes` bounds the total. \throws FormatError when a diff has no
    /// blob to load into (no tensor `<name>`, or `<name>` is a diff itself): every tensor of the
    /// file loads or is an error (`load("<name>.__diff__")` reads such a tensor as a blob).
    template <Element T, SyncedAllocator A = HostOnly>
    [[nodiscard]] std::map<std::string, Blob<T, A>> load_all() const {
        // One pass over the entries, in data order: each diff finds its blob (a lookup per diff),
        // and every blob is taken where it stands (no lookup per blob: at a million tensors each
        // one is a cache miss).
        const auto& entries = header_.entries;
        std::vector<const detail::SafetensorsEntry*> diffs(entries.size(), nullptr);
        for (const auto& e : entries) {
            if (!is_diff(e.name)) {
                continue;
            }
            const std::string_view blob = std::string_view(e.name).substr(0, e.name.size() - diff_suffix.size());
            const auto* b = is_diff(blob) ? nullptr : find(blob);
            if (b == nullptr) {
                throw_format_error(source(), "tensor \"" + e.name + "\"",
                                   "its name makes it the diff of \"" + std::string(blob) + "\", but " +
                                       (is_diff(blob) ? "that is a diff itself"
                                                      : "the file has no tensor \"" + std::string(blob) + "\"") +
                                       " (load it by name to read it as a blob of its own)");
            }
            diffs[static_cast<std::size_t>(b - entries.data())] = &e;
        }
        Found found;
        found.reserve(entries.size());
        for (std::size_t i = 0; i < entries.size(); ++i) {
            if (!is_diff(entries[i].name)) {
                found.emplace_back(&entries[i], diffs[i]);
            }
        }
        return load_found<T, A>(found);
    }

    /// The named tensors (and their diffs). `max_bytes` bounds the total. \throws FormatError
    template <Element T, SyncedAllocator A = HostOnly>
    [[nodiscard]] std::map<std::string, Blob<T, A>> load_some(std::span<const std::string> names) const {
        Found found;
        found.reserve(names.size());
        for (const auto& name : names) {
            const auto& e = require(name);
            found.emplace_back(&e, diff_of(e));
        }
        return load_found<T, A>(found);
    }

private:
    explicit SafetensorsFile(LoadOptions options) : options_(options) {}

    // Where a new blob's reads wait to be made with others: `runs` for those read as they are,
    // `staged` for those converted (null: each conversion reads on its own).
    template <Element T>
    struct Reads {
        detail::ReadRuns* runs = nullptr;
        detail::StagedConversions<T>* staged = nullptr;
    };

    [[nodiscard]] const std::string& source() const { return memory_ ? memory_->name() : file_->name(); }

    template <class Fn>
    decltype(auto) with_source(Fn&& fn) const {
        return memory_ ? fn(*memory_) : fn(*file_);
    }

    // The header streams from the file in small chunks (or is read where it lies in memory).
    void read_header() {
        header_ =
            with_source([&](const auto& src) { return detail::read_safetensors_header(src, options_.max_bytes); });
    }

    [[nodiscard]] static bool is_diff(std::string_view name) noexcept { return name.ends_with(diff_suffix); }

    [[nodiscard]] const detail::SafetensorsEntry* find(std::string_view name) const { return header_.find(name); }

    const detail::SafetensorsEntry& require(std::string_view name) const {
        const auto* e = find(name);
        if (e == nullptr) {
            throw_format_error(source(), "tensor \"" + std::string(name) + "\"", "not in the file");
        }
        return *e;
    }

    // The diff tensor of tensor `data`, or nullptr.
    [[nodiscard]] const detail::SafetensorsEntry* diff_of(const detail::SafetensorsEntry& data) const {
        std::string name;
        name.reserve(data.name.size() + diff_suffix.size());
        name.append(data.name).append(diff_suffix);
        return find(name);
    }

    // Tensors to load, each with its diff (or null).
    using Found = std::vector<std::pair<const detail::SafetensorsEntry*, const detail::SafetensorsEntry*>>;

    // Loads `found` into a map by name, each once. `max_bytes` bounds the total.
    template <Element T, SyncedAllocator A>
    [[nodiscard]] std::map<std::string, Blob<T, A>> load_found(const Found& found) const {
        std::uint64_t total = 0;
        for (const auto& [data, diff] : found) {
            total += (data->count + (diff != nullptr ? diff->count : 0)) * sizeof(T);
        }
        if (total > options_.max_bytes) {
            throw_format_error(source(), "tensors",
                               "loading needs " + std::to_string(total) + " bytes, more than the limit of " +
                                   std::to_string(options_.max_bytes) + " (LoadOptions::max_bytes)");
        }
        // Into the map in name order, each at its end: no search through the map per tensor.
        const std::vector<std::size_t> order =
            detail::name_order(found.size(), [&](std::size_t i) -> std::string_view { return found[i].first->name; });
        // The blobs are new, so each is read into after it is in the map: small tensors that lie
        // together in the file are read together, a system call per run of them, not one each, and
        // those it converts are staged and converted once read. When that fails, the tensors are
        // read again with each conversion on its own, in name order, for the error those reads make.
        const auto load = [&](bool gather) -> std::optional<std::map<std::string, Blob<T, A>>> {
            std::map<std::string, Blob<T, A>> out;
            detail::ReadRuns runs;
            std::optional<detail::StagedConversions<T>> staged;
            if (gather) {
                staged.emplace(runs, convert_rule(options_));
            }
            for (std::size_t k = 0; k < order.size(); ++k) {
                if (k != 0 && found[order[k]].first == found[order[k - 1]].first) {
                    continue;  // named twice: loaded once
                }
                const auto& [data, diff] = found[order[k]];
                load_entries(*data, diff, out.emplace_hint(out.end(), data->name, Blob<T, A>{})->second,
                             Reads<T>{&runs, staged ? &*staged : nullptr});
            }
            runs.flush();
            if (staged && !staged->convert()) {
                return std::nullopt;  // a value refused
            }
            return out;
        };
        std::optional<std::map<std::string, Blob<T, A>>> out;
        if constexpr (std::endian::native == std::endian::little) {  // the staged conversions read little-endian
            detail::gathered_else_in_order([&] { return (out = load(true)).has_value(); }, [&] { out = load(false); });
        } else {
            out = load(false);
        }
        return std::move(*out);
    }

    // Loads `data` (and `diff`, when not null) into `blob`: see load(name, blob).
    template <Element T, SyncedAllocator A>
    // `reads`: where a new blob's reads may wait to be made with others (its bytes are unspecified
    // until they are); none for a blob that has contents of its own, read before it changes.
    void load_entries(const detail::SafetensorsEntry& data, const detail::SafetensorsEntry* diff, Blob<T, A>& blob,
                      Reads<T> reads = {}) const {
        check<T>(data, data.count * sizeof(T));
        if (diff != nullptr) {
            if (diff->dtype != data.dtype || diff->shape != data.shape) {
                throw_format_error(source(), "tensor \"" + diff->name + "\"",
                                   "a diff must have the dtype and shape of \"" + data.name + "\"");
            }
            check<T>(*diff, 2 * data.count * sizeof(T));
        }
        const Shape shape(std::span<const std::int64_t>(data.shape));  // checked by the header parser
        if (!options_.reshape && (shape != blob.shape() || !blob.has_shape())) {
            throw ShapeError("SafetensorsFile::load: " + source() + " holds \"" + data.name + "\" of shape " +
                             shape.to_string() + ", the blob has " + blob.shape_string() +
                             " (set LoadOptions::reshape to adopt it)");
        }
        detail::StagedLoad<T, A> stage(blob, shape);
        fill(data, stage, false, reads);
        if (diff != nullptr) {
            fill(*diff, stage, true, reads);
        }
        stage.commit(blob);
    }

    template <Element T>
    [[nodiscard]] bool mapped_as_is() const noexcept {
        return mapping_ != nullptr && std::endian::native == std::endian::little;
    }

    template <Element T>
    void check(const detail::SafetensorsEntry& e, std::uint64_t bytes) const {
        if (e.dtype != dtype_of<T> && !options_.convert) {
            throw_format_error(source(), "tensor \"" + e.name + "\": dtype",
                               "the file holds " + std::string(dtype_name(e.dtype)) + ", the blob " +
                                   std::string(element_name<T>()) + " (set LoadOptions::convert to convert)");
        }
        if (bytes > options_.max_bytes) {  // mapped or copied alike: the limit bounds what a blob may hold
            throw_format_error(source(), "tensor \"" + e.name + "\"",
                               "loading needs " + std::to_string(bytes) + " bytes, more than the limit of " +
                                   std::to_string(options_.max_bytes) + " (LoadOptions::max_bytes)");
        }
    }

    // Fills the staged data (or diff) with tensor `e`: borrowed from the mapping when possible, read
    // (and converted) into owned memory otherwise.
    template <Element T, SyncedAllocator A>
    void fill(const detail::SafetensorsEntry& e, detail::StagedLoad<T, A>& stage, bool diff, Reads<T> reads) const {
        const auto bytes = static_cast<std::size_t>(e.count * sizeof(T));
        if (mapped_as_is<T>() && e.dtype == dtype_of<T> && e.count != 0) {
            const std::byte* p = mapping_->bytes().data() + header_.data_start + e.begin;
            if (!std::same_as<T, bool> || detail::bools_are_normal(p, bytes)) {
                stage.buffer(diff).set_host_data(static_cast<const void*>(p), bytes,
                                                 std::shared_ptr<void>(mapping_, nullptr));
                return;
            }
        }
        const auto dst = diff ? stage.diff() : stage.data();
        if (dst.empty()) {
            return;
        }
        const std::uint64_t at = header_.data_start + e.begin;
        constexpr bool as_is = std::endian::native == std::endian::little && !std::same_as<T, bool>;
        if (reads.runs != nullptr && file_ && as_is && e.dtype == dtype_of<T>) {
            reads.runs->read(file_->file(), at, dst.data(), dst.size_bytes(), e.name);
            return;
        }
        if (reads.staged != nullptr && file_ && e.dtype != dtype_of<T> &&
            dst.size() * dtype_size(e.dtype) <= detail::StagedConversions<T>::capacity) {
            reads.staged->read(file_->file(), at, e.dtype, dst.size(), dst.data(), e.name);
            return;
        }
        with_source([&](const auto& src) {
            detail::read_elements(
                src, at, e.dtype, false, dst.size(), dst.data(),
                [&] { return "tensor \"" + e.name + "\" at byte " + std::to_string(at); }, convert_rule(options_));
            return 0;
        });
    }

    LoadOptions options_;
    detail::SafetensorsHeader header_;
    std::shared_ptr<const detail::MappedFile> mapping_;
    std::optional<detail::MemorySource> memory_;
    std::shared_ptr<detail::FileSource> file_;
};

/// Saves named blobs (all of one element type; use SafetensorsWriter to mix types) with metadata.
template <Element T, SyncedAllocator A>
void save_safetensors(const std::filesystem::path& file, const std::map<std::string, Blob<T, A>>& blobs,
                      const Metadata& metadata = {}, bool with_diff = false, const SaveOptions& options = {}) {
    SafetensorsWriter writer;
    for (const auto& [name, blob] : blobs) {
        writer.add(name, blob, with_diff);
    }
    writer.metadata() = metadata;
    writer.save(file, options);
}

/// Loads every tensor of a file as blobs of T (diffs into their blobs' diffs).
template <Element T, SyncedAllocator A = HostOnly>
[[nodiscard]] std::map<std::string, Blob<T, A>> load_safetensors(const std::filesystem::path& file,
                                                                 const LoadOptions& options = {},
                                                                 LoadMode mode = LoadMode::copy) {
    return SafetensorsFile::open(file, options, mode).load_all<T, A>();
}

}  // namespace io

SYNCBLOB_END_NAMESPACE
