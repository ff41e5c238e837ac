// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// safetensors files: many named blobs plus string metadata, written byte for byte as the
/// format's reference implementation writes them, read with every rule of its reader enforced,
/// and loadable by memory-mapping the file and borrowing its pages without a copy.
///
/// A blob's diff, when saved, is the tensor `<name>.__diff__` (`diff_suffix`): same dtype and
/// shape as `<name>`. Loading `<name>` also loads that tensor, when present, into the diff.
/// Needs the `syncblob::json` target (nlohmann/json).

#include <algorithm>
#include <bit>
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

#include "../blob.hpp"
#include "detail/byte_source.hpp"
#include "detail/mapped_file.hpp"
#include "detail/safetensors_format.hpp"
#include "detail/staged_load.hpp"
#include "file.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace io {

/// The suffix that names the tensor holding a blob's diff: "conv1.weight" → "conv1.weight.__diff__".
inline constexpr std::string_view diff_suffix = ".__diff__";

/// String metadata of a safetensors file (`__metadata__`); written with its keys sorted.
using Metadata = std::map<std::string, std::string>;

/// Collects named blobs, then saves them as one safetensors file. The blobs are read when added
/// (synchronised to the host then) and must stay alive and unchanged until `save` returns.
class SafetensorsWriter {
public:
    /// Adds the blob's data as `name` and, with `with_diff`, its diff as `name + diff_suffix`: both
    /// or neither. \throws FormatError when a name is already taken or is "__metadata__" (nothing
    /// is added then).
    template <Element T, SyncedAllocator A>
    void add(std::string name, const Blob<T, A>& blob, bool with_diff = false) {
        std::vector<std::int64_t> shape = blob.has_shape()
                                              ? std::vector<std::int64_t>(blob.shape().begin(), blob.shape().end())
                                              : std::vector<std::int64_t>{0};
        if (!with_diff) {
            add_bytes(std::move(name), dtype_of<T>, std::move(shape), std::as_bytes(blob.host_data()));
            return;
        }
        std::string diff_name = name + std::string(diff_suffix);
        check_name(name);
        check_name(diff_name);
        const auto data = std::as_bytes(blob.host_data());
        const auto diff = std::as_bytes(blob.host_diff());
        entries_.reserve(entries_.size() + 2);  // neither push_back below can throw now
        push(std::move(diff_name), dtype_of<T>, shape, diff);
        push(std::move(name), dtype_of<T>, std::move(shape), data);
    }

    /// Adds raw little-endian bytes as a tensor (`bytes` must outlive `save`).
    /// \throws FormatError when the name is already taken or is "__metadata__".
    void add_bytes(std::string name, Dtype dtype, std::vector<std::int64_t> shape, std::span<const std::byte> bytes) {
        check_name(name);
        entries_.reserve(entries_.size() + 1);
        push(std::move(name), dtype, std::move(shape), bytes);
    }

    /// The string metadata written as `__metadata__`.
    Metadata& metadata() noexcept { return metadata_; }

    /// The whole header (length, JSON, padding) for the tensors added so far.
    [[nodiscard]] std::string header() {
        order();
        const std::string json = detail::safetensors_header(entries(), metadata_);
        std::string out(8, '\0');
        for (std::size_t i = 0; i < 8; ++i) {
            out[i] = static_cast<char>((json.size() >> (8 * i)) & 0xFF);
        }
        return out + json;
    }

    /// Writes the file atomically (see `save_atomic`). \throws IOError, FormatError
    void save(const std::filesystem::path& file, const SaveOptions& options = {}) {
        const std::string head = header();
        std::uint64_t total = head.size();
        for (const auto& p : entries_) {
            total += p.bytes.size();
        }
        save_atomic(file, options, [&](FileWriter& w) {
            w.reserve(total);
            w.write(head.data(), head.size());
            for (const auto& p : entries_) {
                w.write(p.bytes.data(), p.bytes.size());
            }
        });
    }

private:
    struct Pending {
        detail::SafetensorsEntry entry;
        std::span<const std::byte> bytes;
    };

    void check_name(const std::string& name) const {
        if (name == "__metadata__" ||
            std::any_of(entries_.begin(), entries_.end(), [&](const Pending& p) { return p.entry.name == name; })) {
            throw_format_error("safetensors", "tensor \"" + name + "\"",
                               name == "__metadata__" ? "the name is reserved" : "added twice");
        }
    }

    // Appends an entry whose name was checked, into capacity reserved by the caller.
    void push(std::string name, Dtype dtype, std::vector<std::int64_t> shape, std::span<const std::byte> bytes) {
        detail::SafetensorsEntry e;
        e.name = std::move(name);
        e.dtype = dtype;
        e.shape = std::move(shape);
        e.end = bytes.size();
        entries_.push_back({std::move(e), bytes});
    }

    // The reference's order (dtype enum descending, then name) and the offsets it implies.
    void order() {
        std::sort(entries_.begin(), entries_.end(), [](const Pending& a, const Pending& b) {
            const int ra = detail::safetensors_rank(a.entry.dtype);
            const int rb = detail::safetensors_rank(b.entry.dtype);
            return ra != rb ? ra > rb : a.entry.name < b.entry.name;
        });
        std::uint64_t at = 0;
        for (auto& p : entries_) {
            p.entry.begin = at;
            at += p.bytes.size();
            p.entry.end = at;
        }
    }

    std::vector<detail::SafetensorsEntry> entries() const {
        std::vector<detail::SafetensorsEntry> out;
        out.reserve(entries_.size());
        for (const auto& p : entries_) {
            out.push_back(p.entry);
        }
        return out;
    }

    std::vector<Pending> entries_;
    Metadata metadata_;
};

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

    [[nodiscard]] bool contains(std::string_view name) const noexcept { return find(name) != nullptr; }

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
        const detail::SafetensorsEntry* diff = find(std::string(name) + std::string(diff_suffix));
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
        fill(data, stage, false);
        if (diff != nullptr) {
            fill(*diff, stage, true);
        }
        stage.commit(blob);
    }

    /// A new blob holding tensor `name` (and its diff).
    template <Element T, SyncedAllocator A = HostOnly>
    [[nodiscard]] Blob<T, A> load(std::string_view name) const {
        Blob<T, A> blob;
        load(name, blob);
        return blob;
    }

    /// Every tensor except diffs (which load into the diff of their blob). `max_bytes` bounds the total.
    template <Element T, SyncedAllocator A = HostOnly>
    [[nodiscard]] std::map<std::string, Blob<T, A>> load_all() const {
        std::vector<std::string> names;
        for (const auto& e : header_.entries) {
            if (!is_diff(e.name)) {
                names.push_back(e.name);
            }
        }
        return load_some<T, A>(names);
    }

    /// The named tensors (and their diffs). `max_bytes` bounds the total. \throws FormatError
    template <Element T, SyncedAllocator A = HostOnly>
    [[nodiscard]] std::map<std::string, Blob<T, A>> load_some(std::span<const std::string> names) const {
        std::uint64_t total = 0;
        for (const auto& name : names) {
            const auto& e = require(name);
            const auto* d = find(name + std::string(diff_suffix));
            total += (e.count + (d != nullptr ? d->count : 0)) * sizeof(T);
        }
        if (total > options_.max_bytes) {
            throw_format_error(source(), "tensors",
                               "loading needs " + std::to_string(total) + " bytes, more than the limit of " +
                                   std::to_string(options_.max_bytes) + " (LoadOptions::max_bytes)");
        }
        std::map<std::string, Blob<T, A>> out;
        for (const auto& name : names) {
            load(name, out[name]);
        }
        return out;
    }

private:
    explicit SafetensorsFile(LoadOptions options) : options_(options) {}

    [[nodiscard]] const std::string& source() const { return memory_ ? memory_->name() : file_->name(); }

    template <class Fn>
    decltype(auto) with_source(Fn&& fn) const {
        return memory_ ? fn(*memory_) : fn(*file_);
    }

    void read_header() {
        with_source([&](const auto& src) {
            unsigned char prefix[8] = {};
            const std::uint64_t size = src.size();
            src.read_at(0, prefix, static_cast<std::size_t>(size < 8 ? size : 8), "header length");
            const std::uint64_t n = detail::safetensors_header_length(prefix, size, options_.max_bytes, src.name());
            std::string text(static_cast<std::size_t>(n), '\0');
            src.read_at(8, text.data(), text.size(), "header");
            header_ = detail::SafetensorsHeaderParser(src.name(), size - 8 - n).parse(text);
            return 0;
        });
    }

    [[nodiscard]] static bool is_diff(std::string_view name) noexcept {
        return name.size() > diff_suffix.size() && name.substr(name.size() - diff_suffix.size()) == diff_suffix;
    }

    [[nodiscard]] const detail::SafetensorsEntry* find(std::string_view name) const noexcept {
        for (const auto& e : header_.entries) {
            if (e.name == name) {
                return &e;
            }
        }
        return nullptr;
    }

    const detail::SafetensorsEntry& require(std::string_view name) const {
        const auto* e = find(name);
        if (e == nullptr) {
            throw_format_error(source(), "tensor \"" + std::string(name) + "\"", "not in the file");
        }
        return *e;
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
    void fill(const detail::SafetensorsEntry& e, detail::StagedLoad<T, A>& stage, bool diff) const {
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
        with_source([&](const auto& src) {
            detail::read_elements(src, header_.data_start + e.begin, e.dtype, false, dst.size(), dst.data(),
                                  "tensor \"" + e.name + "\" at byte " + std::to_string(header_.data_start + e.begin),
                                  convert_rule(options_));
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
