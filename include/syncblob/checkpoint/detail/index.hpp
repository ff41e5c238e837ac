// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The index of a sharded safetensors checkpoint (`model.safetensors.index.json`, Hugging Face's
/// layout): `{"metadata": {"total_size": N, ...}, "weight_map": {tensor name: shard file}}`. Read
/// with the streaming JSON reader (other members and other metadata are skipped), written with its
/// keys sorted and indented by two spaces, as `transformers` writes it. Shard file names follow
/// `<prefix>-00001-of-00004.safetensors`.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../../io/file.hpp"
#include "../../io/parse/json_input.hpp"
#include "../../io/parse/json_quote.hpp"
#include "../../io/parse/json_reader.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace checkpoint::detail {

/// One entry of `weight_map`: a tensor and its shard, as a position in `CheckpointIndex::shards`.
struct WeightMapEntry {
    std::string tensor;
    std::size_t shard = 0;
};

/// What an index says.
struct CheckpointIndex {
    std::optional<std::uint64_t> total_size;  ///< `metadata.total_size`, when present
    /// The shard of each run of entries that name the same one, in order: a shard is kept once per
    /// run, not once per tensor (most entries name the shard of the entry before).
    std::vector<std::string> shards;
    std::vector<WeightMapEntry> weight_map;  ///< in the order of the file (`IndexRead::everything`)
};

/// What `parse_checkpoint_index` keeps: every entry, or the shards alone (a save replacing the
/// index needs only the files it named).
enum class IndexRead : std::uint8_t { everything, shards };

/// Builds a CheckpointIndex from the JSON reader's events.
class CheckpointIndexHandler {
public:
    CheckpointIndexHandler(std::string_view source, CheckpointIndex& out, IndexRead what = IndexRead::everything)
        : source_(source), out_(out), what_(what) {}

    void begin_object(std::uint64_t) { open(true); }
    void begin_array(std::uint64_t) { open(false); }
    void end_object() { close(); }
    void end_array() { close(); }

    void key(std::string_view key, std::uint64_t) {
        if (depth_ == 1) {
            member_.assign(key);
        } else if (depth_ == 2) {
            field_.assign(key);
        }
    }

    void scalar(const io::parse::Scalar& s) {
        if (depth_ == 0) {
            fail("index", std::string("expected a JSON object, found ") + s.type_name());
        }
        if (depth_ == 1) {
            require_object(s.type_name());
            return;  // another member: skipped
        }
        if (depth_ != 2) {
            return;
        }
        if (section_ == Section::weight_map) {
            if (s.kind != io::parse::ScalarKind::string) {
                fail("weight_map: tensor \"" + field_ + "\"",
                     "expected the file name of a shard, found " + s.describe());
            }
            check_shard_name(s.text);
            if (out_.shards.empty() || out_.shards.back() != s.text) {
                out_.shards.emplace_back(s.text);
            }
            if (what_ == IndexRead::everything) {
                out_.weight_map.push_back({field_, out_.shards.size() - 1});
            }
        } else if (section_ == Section::metadata && field_ == "total_size") {
            if (s.kind != io::parse::ScalarKind::unsigned_integer) {
                fail("metadata: total_size", "expected a non-negative integer, found " + s.describe());
            }
            out_.total_size = s.unsigned_integer;
        }
    }

    /// After the reader: the index must have had a weight_map.
    void finish() const {
        if (!seen_weight_map_) {
            fail("index", "no \"weight_map\" object (the map from tensor names to shard files)");
        }
    }

private:
    enum class Section : std::uint8_t { none, metadata, weight_map };

    [[noreturn]] void fail(const std::string& where, const std::string& what) const {
        io::throw_format_error(source_, where, what);
    }

    void require_object(const char* found) const {
        if (member_ == "metadata" || member_ == "weight_map") {
            fail(member_, std::string("expected an object, found ") + found);
        }
    }

    void open(bool object) {
        if (depth_ == 0 && !object) {
            fail("index", "expected a JSON object, found array");
        }
        if (depth_ == 1) {
            if (!object) {
                require_object("array");
            }
            section_ = member_ == "metadata"     ? Section::metadata
                       : member_ == "weight_map" ? Section::weight_map
                                                 : Section::none;
            if (section_ == Section::weight_map && std::exchange(seen_weight_map_, true)) {
                fail("weight_map", "the index has two weight_map members");
            }
        } else if (depth_ == 2 && section_ == Section::weight_map) {
            fail("weight_map: tensor \"" + field_ + "\"",
                 std::string("expected the file name of a shard, found ") + (object ? "object" : "array"));
        } else if (depth_ == 2 && section_ == Section::metadata && field_ == "total_size") {
            fail("metadata: total_size",
                 std::string("expected a non-negative integer, found ") + (object ? "object" : "array"));
        }
        ++depth_;
    }

    void close() {
        if (--depth_ == 1) {
            section_ = Section::none;
        }
    }

    // A shard is a file in the index's folder: no folder part, not "." or "..".
    void check_shard_name(std::string_view name) const {
        if (name.empty() || name == "." || name == ".." || name.find('/') != std::string_view::npos ||
            name.find('\0') != std::string_view::npos) {
            fail("weight_map: tensor \"" + field_ + "\"",
                 "shard \"" + std::string(name) + "\" is not a file name in the index's folder");
        }
    }

    std::string_view source_;
    CheckpointIndex& out_;
    IndexRead what_;
    int depth_ = 0;
    Section section_ = Section::none;
    bool seen_weight_map_ = false;
    std::string member_;  // the current member of the root
    std::string field_;   // the current key inside it
};

/// Parses the text of an index; `source` names it in errors.
[[nodiscard]] inline CheckpointIndex parse_checkpoint_index(std::string_view text, std::string_view source,
                                                            IndexRead what = IndexRead::everything) {
    CheckpointIndex index;
    CheckpointIndexHandler handler(source, index, what);
    io::parse::TextInput in(text);
    io::parse::read_json(in, handler, io::parse::JsonLimits{}, source);
    handler.finish();
    return index;
}

/// The index's text for `n` entries sorted by tensor name, entry `i` mapping `tensor_at(i)` to
/// `shard_at(i)` (both giving a `std::string_view`): metadata.total_size, then weight_map.
template <class TensorAt, class ShardAt>
[[nodiscard]] std::string checkpoint_index_text(std::uint64_t total_size, std::size_t n, TensorAt tensor_at,
                                                ShardAt shard_at) {
    std::size_t estimate = 64;
    for (std::size_t i = 0; i < n; ++i) {
        estimate += tensor_at(i).size() + shard_at(i).size() + 12;
    }
    std::string out;
    out.reserve(estimate);  // sized once, not grown by copies
    out.append("{\n  \"metadata\": {\n    \"total_size\": ");
    out.append(std::to_string(total_size)).append("\n  },\n  \"weight_map\": {");
    for (std::size_t i = 0; i < n; ++i) {
        out.append(i == 0 ? "\n    " : ",\n    ");
        io::parse::append_json_quoted(out, tensor_at(i), "tensor name");
        out.append(": ");
        io::parse::append_json_quoted(out, shard_at(i), "shard name");
    }
    out.append(n == 0 ? "}\n}\n" : "\n  }\n}\n");
    return out;
}

/// "<prefix>-00002-of-00005.safetensors" (at least five digits each, as `transformers` names them).
[[nodiscard]] inline std::string shard_file_name(std::string_view prefix, std::size_t k, std::size_t n) {
    char numbers[64];
    std::snprintf(numbers, sizeof numbers, "-%05zu-of-%05zu.safetensors", k, n);
    return std::string(prefix) + numbers;
}

/// For a name "<stem>-KKKKK-of-NNNNN.safetensors": {stem, K, N}; nothing for any other name.
struct ShardNumber {
    std::string stem;
    std::size_t k = 0;
    std::size_t n = 0;
};
[[nodiscard]] inline std::optional<ShardNumber> shard_number(std::string_view name) {
    constexpr std::string_view ext = ".safetensors";
    if (!name.ends_with(ext)) {
        return std::nullopt;
    }
    name.remove_suffix(ext.size());
    const auto digits = [](std::string_view s, std::size_t& v) {
        if (s.size() < 5 || s.size() > 9) {
            return false;
        }
        v = 0;
        for (const char c : s) {
            if (c < '0' || c > '9') {
                return false;
            }
            v = v * 10 + static_cast<std::size_t>(c - '0');
        }
        return true;
    };
    const std::size_t of = name.rfind("-of-");
    const std::size_t dash = of == std::string_view::npos ? of : name.rfind('-', of == 0 ? 0 : of - 1);
    ShardNumber out;
    if (of == std::string_view::npos || dash == std::string_view::npos || dash >= of ||
        !digits(name.substr(dash + 1, of - dash - 1), out.k) || !digits(name.substr(of + 4), out.n) || out.k == 0 ||
        out.k > out.n) {
        return std::nullopt;
    }
    out.stem = std::string(name.substr(0, dash));
    return out;
}

}  // namespace checkpoint::detail

SYNCBLOB_END_NAMESPACE
