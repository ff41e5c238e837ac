// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Writing safetensors files: `SafetensorsWriter` collects named blobs (and raw tensors) and saves
/// them as one file, byte for byte as the format's reference implementation writes them (tensors
/// sorted by its dtype enum, descending, then by name; metadata keys sorted). Names are checked
/// as they are added, each in constant time: a name already taken, "__metadata__", a name that
/// ends in `diff_suffix` (reserved for the diffs `add(name, blob, true)` writes) and a name that
/// is not valid UTF-8 are refused. Needs the `syncblob::json` target (nlohmann/json).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../blob/blob.hpp"
#include "detail/held_bytes.hpp"
#include "detail/safetensors_format.hpp"
#include "detail/safetensors_header.hpp"
#include "file.hpp"
#include "name_index.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace checkpoint {
class Writer;  // shares a writer's entries (syncblob/checkpoint/writer.hpp)
}  // namespace checkpoint

namespace io {

/// The suffix that names the tensor holding a blob's diff: "conv1.weight" → "conv1.weight.__diff__".
inline constexpr std::string_view diff_suffix = ".__diff__";

/// String metadata of a safetensors file (`__metadata__`); written with its keys sorted.
using Metadata = std::map<std::string, std::string>;

/// Collects named blobs, then saves them as one safetensors file. It owns what it needs: each blob's
/// storage is held (shared with the blob) from `add` until the writer is destroyed, and raw bytes
/// are copied, so the blobs may be moved, destroyed or kept in a container that grows meanwhile.
/// `save` reads the values the storage holds then (synchronised to the host then); a blob given
/// other storage after `add` (a reshape that reallocates, `share_data`) leaves the writer with the
/// storage it had.
class SafetensorsWriter {
    struct Pending {
        detail::SafetensorsEntry entry;
        detail::HeldBytes bytes;
    };

    [[nodiscard]] auto name_at() const {
        return [this](std::size_t i) -> std::string_view { return entries_[i].entry.name; };
    }

public:
    /// Adds the blob's data as `name` and, with `with_diff`, its diff as `name + diff_suffix`: both
    /// or neither. \throws FormatError when a name is already taken, is "__metadata__", ends in
    /// `diff_suffix` (reserved for diffs) or is not valid UTF-8 (nothing is added then).
    // `name` is moved into the entry; clang-tidy reads the template uninstantiated, where the calls
    // that move it are dependent, and takes it for a copy only read.
    template <Element T, SyncedAllocator A>
    // NOLINTNEXTLINE(performance-unnecessary-value-param)
    void add(std::string name, const Blob<T, A>& blob, bool with_diff = false) {
        std::vector<std::int64_t> shape = blob.has_shape()
                                              ? std::vector<std::int64_t>(blob.shape().begin(), blob.shape().end())
                                              : std::vector<std::int64_t>{0};
        const auto bytes = static_cast<std::uint64_t>(blob.count()) * sizeof(T);
        check_name(name);
        if (!with_diff) {
            auto data = detail::HeldBytes::of(blob.data_buffer(), bytes);
            make_room(1);
            push(std::move(name), dtype_of<T>, std::move(shape), std::move(data));
            return;
        }
        std::string diff_name = name + std::string(diff_suffix);
        check_free(diff_name);
        auto data = detail::HeldBytes::of(blob.data_buffer(), bytes);
        auto diff = detail::HeldBytes::of(blob.diff_buffer(), bytes);
        make_room(2);  // neither push below can throw now
        push(std::move(name), dtype_of<T>, shape, std::move(data));
        push(std::move(diff_name), dtype_of<T>, std::move(shape), std::move(diff));
    }

    /// Adds raw little-endian bytes as a tensor; the writer keeps a copy of them. \throws FormatError
    /// when the name is refused (as by `add`), the shape is not one (a negative extent, more than
    /// 32 axes, a count that overflows), or `bytes` is not the size the shape and dtype need.
    void add_bytes(std::string name, Dtype dtype, std::vector<std::int64_t> shape, std::span<const std::byte> bytes) {
        check_name(name);
        if (auto problem = syncblob::detail::extents_problem(shape)) {
            throw_format_error("safetensors", "tensor \"" + name + "\": shape", *problem);
        }
        const auto count = static_cast<std::uint64_t>(syncblob::detail::count_of(shape));
        if (count > std::numeric_limits<std::uint64_t>::max() / dtype_size(dtype) ||
            count * dtype_size(dtype) != bytes.size()) {
            throw_format_error("safetensors", "tensor \"" + name + "\"",
                               std::to_string(bytes.size()) + " bytes given, shape " +
                                   detail::safetensors_shape_text(shape) + " of " + std::string(dtype_name(dtype)) +
                                   " needs " + std::to_string(count * dtype_size(dtype)));
        }
        auto copy = detail::HeldBytes::copy_of(bytes);
        make_room(1);
        push(std::move(name), dtype, std::move(shape), std::move(copy));
    }

    /// The string metadata written as `__metadata__`.
    Metadata& metadata() noexcept { return metadata_; }

    /// The whole header (length, JSON, padding) for the tensors added so far.
    [[nodiscard]] std::string header() {
        order();
        return header_of(
            entries_.size(), [this](std::size_t i) -> const detail::SafetensorsEntry& { return entries_[i].entry; },
            metadata_);
    }

    /// Writes the file atomically (see `save_atomic`). `progress`, when given, is called after each
    /// tensor's bytes are written with (bytes written so far, bytes of the whole file).
    /// \throws IOError, FormatError, StateError (a blob's storage holds fewer bytes than when it was
    /// added: it was given another size through `set_host_data`), and what `progress` throws (the
    /// file is then not written).
    void save(const std::filesystem::path& file, const SaveOptions& options = {},
              const std::function<void(std::uint64_t, std::uint64_t)>& progress = {}) {
        write_file(file, options, progress, header(), entries_.size(),
                   [this](std::size_t i) -> const Pending& { return entries_[i]; });
    }

private:
    // Keeps every tensor in one writer and saves each shard from its entries where they are: no
    // entry is copied, no name indexed twice.
    friend class checkpoint::Writer;

    // A tensor as a header names it, read from wherever it is kept.
    struct EntryView {
        std::string_view name;
        Dtype dtype = Dtype::F32;
        std::span<const std::int64_t> shape;
        std::uint64_t begin = 0;
        std::uint64_t end = 0;
    };

    // The whole header (length, JSON, padding) of `n` tensors, `entry_at(i)` giving the i-th in
    // the file's order with its offsets.
    template <class EntryAt>
    [[nodiscard]] static std::string header_of(std::size_t n, EntryAt entry_at, const Metadata& metadata) {
        std::string out(8, '\0');
        detail::append_safetensors_header(out, n, entry_at, metadata);
        const std::size_t json = out.size() - 8;
        for (std::size_t i = 0; i < 8; ++i) {
            out[i] = static_cast<char>((json >> (8 * i)) & 0xFF);
        }
        return out;
    }

    // The reference's order of `n` tensors (dtype enum descending, then name), as positions:
    // sorted through name_order, then a stable pass by dtype where the dtypes differ.
    template <class NameAt, class DtypeAt>
    [[nodiscard]] static std::vector<std::size_t> reference_order(std::size_t n, NameAt name_at, DtypeAt dtype_at) {
        std::vector<std::size_t> positions = detail::name_order(n, name_at);
        std::vector<int> rank(n);
        for (std::size_t i = 0; i < n; ++i) {
            rank[i] = detail::safetensors_rank(dtype_at(i));
        }
        if (std::adjacent_find(rank.begin(), rank.end(), std::not_equal_to<>{}) != rank.end()) {
            std::stable_sort(positions.begin(), positions.end(),
                             [&](std::size_t a, std::size_t b) { return rank[a] > rank[b]; });
        }
        return positions;
    }

    // Writes `head`, then the bytes of `pending_at(0)` … `pending_at(n - 1)`, atomically (see
    // save()). A checkpoint sizes its files from each shard's header first, and builds none twice.
    template <class PendingAt>
    static void write_file(const std::filesystem::path& file, const SaveOptions& options,
                           const std::function<void(std::uint64_t, std::uint64_t)>& progress, const std::string& head,
                           std::size_t n, PendingAt pending_at) {
        std::uint64_t total = head.size();
        for (std::size_t i = 0; i < n; ++i) {
            total += pending_at(i).bytes.size();
        }
        save_atomic(file, options, [&](FileWriter& w) {
            w.reserve(total);
            w.write(head.data(), head.size());
            for (std::size_t i = 0; i < n; ++i) {
                const Pending& p = pending_at(i);
                const auto bytes = p.bytes.read(p.entry.name);
                w.write(bytes.data(), bytes.size());
                if (progress) {
                    progress(w.bytes_written(), total);
                }
            }
        });
    }

    void check_name(const std::string& name) const {
        if (name == "__metadata__" || name.ends_with(diff_suffix)) {
            throw_format_error("safetensors", "tensor \"" + name + "\"",
                               name == "__metadata__"
                                   ? "the name is reserved"
                                   : "names ending in \"" + std::string(diff_suffix) +
                                         "\" are reserved for diffs (add(name, blob, true) writes them)");
        }
        (void)parse::json_quote(name, "tensor name");  // valid UTF-8, or a FormatError now
        check_free(name);
    }

    void check_free(const std::string& name) const {
        if (index_.find(name, name_at()) != detail::NameIndex::npos) {
            throw_format_error("safetensors", "tensor \"" + name + "\"", "added twice");
        }
    }

    // Room for `n` more entries in the list and the index, so that `n` pushes cannot throw.
    void make_room(std::size_t n) {
        if (entries_.capacity() < entries_.size() + n) {  // geometric growth: reserve(size + 1) each time is quadratic
            entries_.reserve(std::max(entries_.size() + n, 2 * entries_.capacity()));
        }
        index_.reserve(entries_.size() + n, name_at());
    }

    // Appends an entry whose name was checked, into room made by the caller (nothing throws).
    void push(std::string name, Dtype dtype, std::vector<std::int64_t> shape, detail::HeldBytes bytes) {
        detail::SafetensorsEntry e;
        e.name = std::move(name);
        e.dtype = dtype;
        e.shape = std::move(shape);
        e.end = bytes.size();
        entries_.push_back({std::move(e), std::move(bytes)});
        (void)index_.insert(entries_.back().entry.name, entries_.size() - 1, name_at());
    }

    // The reference's order (dtype enum descending, then name) and the offsets it implies. The
    // entries are sorted through their positions (name_order, then a stable pass by dtype) and
    // moved once each: a sort of the entries themselves compares names through each entry's own
    // memory and moves whole entries, both misses at a million tensors. Entries already in order
    // (a second header() or save()) are left where they are.
    void order() {
        const auto before = [](const Pending& a, const Pending& b) {
            const int ra = detail::safetensors_rank(a.entry.dtype);
            const int rb = detail::safetensors_rank(b.entry.dtype);
            return ra != rb ? ra > rb : a.entry.name < b.entry.name;
        };
        if (!std::is_sorted(entries_.begin(), entries_.end(), before)) {
            detail::apply_order(entries_, reference_order(entries_.size(), name_at(),
                                                          [this](std::size_t i) { return entries_[i].entry.dtype; }));
            (void)index_.build(entries_.size(), name_at());  // the positions moved
        }
        std::uint64_t at = 0;
        for (auto& p : entries_) {
            p.entry.begin = at;
            at += p.bytes.size();
            p.entry.end = at;
        }
    }

    std::vector<Pending> entries_;
    detail::NameIndex index_;  // positions in entries_ by name
    Metadata metadata_;
};

}  // namespace io

SYNCBLOB_END_NAMESPACE
