// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The safetensors header reader: the streaming JSON reader's events turned into tensor entries
/// as they come, every rule of the reference implementation enforced, in time and memory linear
/// in the header. Duplicate names (which the reference's JSON parser would silently merge) are
/// found through a keyed hash index, which then serves every lookup by name; the offsets are
/// checked in one pass over the entries sorted by offset (already so in files written by the
/// reference and by syncblob, so sorting costs one scan).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../../core/element.hpp"
#include "../../core/shape.hpp"
#include "../name_index.hpp"
#include "../parse/json_input.hpp"
#include "../parse/json_reader.hpp"
#include "byte_source.hpp"
#include "format_error.hpp"
#include "safetensors_format.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace io::detail {

/// A parsed and validated header, with its entries indexed by name.
struct SafetensorsHeader {
    std::vector<SafetensorsEntry> entries;  ///< in data order
    std::map<std::string, std::string> metadata;
    std::uint64_t data_start = 0;  ///< 8 + header length
    NameIndex index;               ///< positions in `entries` by name

    /// The entry named `name`, or nullptr.
    [[nodiscard]] const SafetensorsEntry* find(std::string_view name) const {
        const std::size_t i = index.find(name, [this](std::size_t p) -> std::string_view { return entries[p].name; });
        return i == NameIndex::npos ? nullptr : &entries[i];
    }
};

/// Builds a SafetensorsHeader from the reader's events: the root object's members are tensors
/// (`{"dtype", "shape", "data_offsets"}`) and at most one `__metadata__` (an object of strings).
class SafetensorsHeaderHandler {
public:
    /// `max_bytes` bounds the memory the parsed entries take (LoadOptions::max_bytes).
    SafetensorsHeaderHandler(std::string_view source, std::uint64_t max_bytes, SafetensorsHeader& out)
        : source_(source), max_bytes_(max_bytes), out_(out) {}

    void begin_object(std::uint64_t) {
        if (depth_ >= 2) {
            fail("header", "objects nested deeper than a tensor's entry");
        }
        if (depth_ == 1 && !in_metadata_) {
            entry_ = SafetensorsEntry{};
            entry_.name = member_;
            seen_ = 0;
        }
        ++depth_;
    }

    void key(std::string_view key, std::uint64_t) {
        if (depth_ == 1) {
            member_.assign(key);
            in_metadata_ = key == "__metadata__";
            if (in_metadata_ && std::exchange(seen_metadata_, true)) {
                fail("header", "duplicate key \"__metadata__\"");
            }
        } else if (in_metadata_) {
            member_.assign(key);
        } else {
            field_ = key == "dtype" ? 1 : key == "shape" ? 2 : key == "data_offsets" ? 4 : 0;
            if (field_ == 0) {
                fail(where(), "unexpected key \"" + std::string(key) + "\" (expected dtype, shape and data_offsets)");
            }
            if ((seen_ & field_) != 0) {
                fail("header entry", "duplicate key \"" + std::string(key) + "\"");
            }
            seen_ |= field_;
        }
    }

    void end_object() {
        --depth_;
        if (depth_ == 1 && !in_metadata_) {
            finish_entry();
        }
    }

    void begin_array(std::uint64_t) {
        if (depth_ == 0) {
            fail("header byte 8", "expected '{' opening the JSON header");
        }
        if (depth_ >= 3) {
            fail("header", "arrays nested inside arrays");
        }
        if (depth_ == 1) {
            wrong_member("array");
        }
        if (in_metadata_) {
            fail("__metadata__", "expected string values, \"" + member_ + "\" holds a array");
        }
        if (field_ == 1) {
            fail(where() + ": dtype", "expected a string, found array");
        }
        items_ = 0;
        offsets_ok_ = false;
        items_text_.clear();
        ++depth_;
    }

    void end_array() {
        --depth_;
        if (field_ == 2 && items_ > Shape::max_axes) {
            fail(where() + ": shape",
                 std::to_string(items_) + " axes, at most " + std::to_string(Shape::max_axes) + " supported");
        }
        if (field_ == 4 && (items_ != 2 || !offsets_ok_)) {
            bad_offsets("[" + items_text_ + "]");
        }
    }

    void scalar(const parse::Scalar& s) {
        if (depth_ == 0) {
            fail("header byte 8", "expected '{' opening the JSON header");
        }
        if (depth_ == 1) {
            if (in_metadata_ && s.kind == parse::ScalarKind::null) {
                return;  // "__metadata__": null is no metadata
            }
            wrong_member(s.type_name());
        }
        if (in_metadata_) {
            if (s.kind != parse::ScalarKind::string) {
                fail("__metadata__", "expected string values, \"" + member_ + "\" holds a " + s.type_name());
            }
            if (!out_.metadata.emplace(member_, std::string(s.text)).second) {
                fail("__metadata__", "duplicate key \"" + member_ + "\"");
            }
            charge(member_.size() + s.text.size() + 64);
            return;
        }
        if (depth_ == 2) {
            field_value(s);
        } else {
            array_item(s);
        }
    }

    /// After the reader: indexes the entries by name (refusing duplicates) and checks the offsets.
    void finish(std::uint64_t data_bytes) {
        auto& entries = out_.entries;
        const auto name_at = [&](std::size_t p) -> std::string_view { return entries[p].name; };
        if (const std::size_t d = out_.index.build(entries.size(), name_at); d != NameIndex::npos) {
            fail("header", "duplicate key \"" + entries[d].name + "\"");
        }
        const auto by_offset = [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
            return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
        };
        if (!std::is_sorted(entries.begin(), entries.end(), by_offset)) {
            std::sort(entries.begin(), entries.end(), by_offset);
            (void)out_.index.build(entries.size(), name_at);  // the positions moved
        }
        validate(entries, data_bytes);
    }

private:
    [[noreturn]] void fail(const std::string& where, const std::string& what) const {
        io::throw_format_error(source_, where, what);
    }

    [[nodiscard]] std::string where() const { return "tensor \"" + entry_.name + "\""; }

    [[noreturn]] void wrong_member(const char* type) const {
        if (in_metadata_) {
            fail("__metadata__", std::string("expected an object of strings, found ") + type);
        }
        fail("tensor \"" + member_ + "\"",
             std::string("expected an object with dtype, shape and data_offsets, found ") + type);
    }

    [[noreturn]] void bad_offsets(const std::string& found) const {
        fail(where() + ": data_offsets", "expected [begin, end] as two non-negative integers, found " + found);
    }

    static std::string literal(const parse::Scalar& s) { return s.literal(); }

    static bool non_negative(const parse::Scalar& s, std::uint64_t& v) {
        if (s.kind == parse::ScalarKind::unsigned_integer) {
            v = s.unsigned_integer;
            return true;
        }
        return false;  // a negative integer, a fraction, anything else
    }

    void field_value(const parse::Scalar& s) {
        if (field_ == 1) {
            if (s.kind != parse::ScalarKind::string) {
                fail(where() + ": dtype", std::string("expected a string, found ") + s.type_name());
            }
            const auto parsed = parse_dtype(s.text);
            if (!parsed) {
                constexpr std::string_view reference_only[] = {"C64", "F6_E2M3", "F6_E3M2", "F4"};
                const bool known =
                    std::find(std::begin(reference_only), std::end(reference_only), s.text) != std::end(reference_only);
                fail(where() + ": dtype",
                     "\"" + std::string(s.text) +
                         (known ? "\" is a safetensors dtype syncblob does not support"
                                : "\" is not a safetensors dtype (expected " + dtype_names() + ")"));
            }
            entry_.dtype = *parsed;
        } else if (field_ == 2) {
            fail(where() + ": shape", std::string("expected an array of extents, found ") + s.type_name());
        } else {
            bad_offsets(literal(s));
        }
    }

    void array_item(const parse::Scalar& s) {
        std::uint64_t v = 0;
        const bool ok = non_negative(s, v);
        if (field_ == 4 && items_text_.size() < 64) {  // for a message about the offsets
            items_text_.append(items_ == 0 ? "" : ",").append(s.is_number() ? s.text : literal(s));
        }
        ++items_;
        if (field_ == 2) {
            if (!ok || v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
                fail(where() + ": shape", "expected non-negative integer extents, found " + literal(s));
            }
            if (items_ <= Shape::max_axes) {
                entry_.shape.push_back(static_cast<std::int64_t>(v));
            }
        } else if (items_ <= 2) {
            offsets_ok_ = (items_ == 1 || offsets_ok_) && ok;
            (items_ == 1 ? entry_.begin : entry_.end) = v;
        }
    }

    void finish_entry() {
        for (const auto& [bit, name] : {std::pair{1, "dtype"}, std::pair{2, "shape"}, std::pair{4, "data_offsets"}}) {
            if ((seen_ & bit) == 0) {
                fail(where(), std::string("missing \"") + name + "\"");
            }
        }
        if (auto problem = syncblob::detail::extents_problem(entry_.shape)) {
            fail(where() + ": shape", *problem);
        }
        entry_.count = static_cast<std::uint64_t>(syncblob::detail::count_of(entry_.shape));
        charge(sizeof(SafetensorsEntry) + 2 * sizeof(std::uint64_t) + entry_.name.size() +
               entry_.shape.size() * sizeof(std::int64_t));
        out_.entries.push_back(std::move(entry_));
    }

    void charge(std::uint64_t bytes) {
        used_ += bytes;
        if (used_ > max_bytes_) {
            fail("header",
                 "the parsed header needs more than " + std::to_string(max_bytes_) + " bytes (LoadOptions::max_bytes)");
        }
    }

    // The reference's rules: sorted by offsets, contiguous from 0, each the size its shape and
    // dtype need, covering the data exactly.
    void validate(const std::vector<SafetensorsEntry>& entries, std::uint64_t data_bytes) const;

    std::string_view source_;
    std::uint64_t max_bytes_;
    SafetensorsHeader& out_;
    int depth_ = 0;
    bool in_metadata_ = false;
    bool seen_metadata_ = false;
    std::string member_;  // the current member's key at depth 1 (or the metadata key at depth 2)
    SafetensorsEntry entry_;
    int seen_ = 0;   // the fields of entry_ seen: 1 dtype, 2 shape, 4 data_offsets
    int field_ = 0;  // the field whose value comes now
    std::size_t items_ = 0;
    bool offsets_ok_ = false;
    std::string items_text_;
    std::uint64_t used_ = 0;
};

inline void SafetensorsHeaderHandler::validate(const std::vector<SafetensorsEntry>& entries,
                                               std::uint64_t data_bytes) const {
    std::uint64_t at = 0;
    const SafetensorsEntry* previous = nullptr;
    for (const auto& e : entries) {
        // Built only to throw: a header of a million tensors builds no text for those that pass.
        const auto where = [&e] {
            return "tensor \"" + e.name + "\": data_offsets [" + std::to_string(e.begin) + ", " +
                   std::to_string(e.end) + "]";
        };
        if (e.end < e.begin) {
            fail(where(), "end before begin");
        }
        if (e.begin > at) {
            fail(where(), "gap: data bytes [" + std::to_string(at) + ", " + std::to_string(e.begin) +
                              ") belong to no tensor (offsets must be contiguous from 0)");
        }
        if (e.begin < at) {
            fail(where(), "overlaps tensor \"" + previous->name + "\", which ends at data byte " + std::to_string(at));
        }
        const std::size_t item = dtype_size(e.dtype);
        if (e.count > std::numeric_limits<std::uint64_t>::max() / item) {
            fail(where(), "the byte size of the shape overflows");
        }
        if (e.end - e.begin != e.count * item) {
            fail(where(), "hold " + std::to_string(e.end - e.begin) + " bytes, shape " +
                              safetensors_shape_text(e.shape) + " of " + std::string(dtype_name(e.dtype)) + " needs " +
                              std::to_string(e.count * item));
        }
        if (e.end > data_bytes) {
            fail(where(), "past the end of the data (" + std::to_string(data_bytes) + " bytes; truncated)");
        }
        at = e.end;
        previous = &e;
    }
    if (at != data_bytes) {
        fail("data", "the tensors end at data byte " + std::to_string(at) + ", the data holds " +
                         std::to_string(data_bytes) + " bytes (trailing bytes)");
    }
}

/// Reads and validates a header of `length` bytes from `in` (the bytes after the 8-byte length);
/// `data_bytes` is what follows it in the input.
template <class Input>
[[nodiscard]] SafetensorsHeader read_safetensors_header(Input& in, std::uint64_t length, std::uint64_t data_bytes,
                                                        std::uint64_t max_bytes, std::string_view source) {
    if (in.peek() != '{') {
        io::throw_format_error(source, "header byte 8", "expected '{' opening the JSON header");
    }
    SafetensorsHeader header;
    header.data_start = 8 + length;
    // No entry takes fewer than 49 bytes of header: room for every entry the header can hold, so
    // the list never moves (pages of room never filled are never touched, so they cost no memory).
    header.entries.reserve(static_cast<std::size_t>(length / 48 + 1));
    SafetensorsHeaderHandler handler(source, max_bytes, header);
    parse::JsonLimits limits;
    limits.max_depth = 8;  // deeper than any valid header: the handler names what is too deep
    limits.allow_bom = false;
    parse::read_json(in, handler, limits, source, "header byte", 8);
    handler.finish(data_bytes);
    return header;
}

// The header's length from the first 8 bytes of `src` (checked against its size and `max_bytes`).
template <class Source>
[[nodiscard]] std::uint64_t header_length_of(const Source& src, std::uint64_t max_bytes) {
    unsigned char prefix[8] = {};
    const std::uint64_t size = src.size();
    src.read_at(0, prefix, static_cast<std::size_t>(size < 8 ? size : 8), "header length");
    return safetensors_header_length(prefix, size, max_bytes, src.name());
}

/// Reads and validates the header of the safetensors bytes `src` holds: the 8-byte length, then the
/// JSON after it, read where it lies in memory (below: streamed from a file in small chunks).
/// `max_bytes` bounds what the header may take. \throws FormatError for a malformed header; IOError.
[[nodiscard]] inline SafetensorsHeader read_safetensors_header(const MemorySource& src, std::uint64_t max_bytes) {
    const std::uint64_t n = header_length_of(src, max_bytes);
    parse::TextInput in(
        std::string_view(reinterpret_cast<const char*>(src.bytes().data()) + 8, static_cast<std::size_t>(n)));
    return read_safetensors_header(in, n, src.size() - 8 - n, max_bytes, src.name());
}

[[nodiscard]] inline SafetensorsHeader read_safetensors_header(const FileSource& src, std::uint64_t max_bytes) {
    const std::uint64_t n = header_length_of(src, max_bytes);
    parse::FileInput in(src.file(), 8, 8 + n);
    return read_safetensors_header(in, n, src.size() - 8 - n, max_bytes, src.name());
}

/// A safetensors file opened for positioned reads, its header read and validated (every rule of
/// the single-file reader), kept open so that the bytes read later come from the file whose header
/// was checked: a checkpoint's shard.
struct OpenSafetensors {
    std::shared_ptr<const FileSource> file;
    SafetensorsHeader header;
};

/// Opens `path` and reads its header (`max_bytes` bounds what the header may take).
/// \throws IOError when it cannot be opened; FormatError for a malformed header.
[[nodiscard]] inline OpenSafetensors open_safetensors(const std::filesystem::path& path, std::uint64_t max_bytes) {
    auto file = std::make_shared<const FileSource>(path);
    SafetensorsHeader header = read_safetensors_header(*file, max_bytes);
    return {std::move(file), std::move(header)};
}

}  // namespace io::detail

SYNCBLOB_END_NAMESPACE
