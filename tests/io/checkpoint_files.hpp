// SPDX-License-Identifier: BSD-2-Clause
#pragma once
// Small checkpoints for the checkpoint tests: blobs with values that say which tensor and element
// they are, shards written from them, and index files written by hand (for malformed cases).

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <syncblob/checkpoint/writer.hpp>
#include <utility>
#include <vector>

namespace test {

/// The value element `i` of tensor number `k` holds: distinct per tensor and element, exact in float.
inline float checkpoint_value(std::size_t k, std::size_t i) {
    return static_cast<float>(k * 1000 + i % 997) * 0.25f;
}

/// Named blobs of the given shapes, filled with `checkpoint_value` (k = their position).
struct NamedBlobs {
    std::vector<std::pair<std::string, syncblob::Blob<float>>> blobs;

    NamedBlobs& add(std::string name, syncblob::Shape shape) {
        syncblob::Blob<float> b(shape);
        auto v = b.mutable_host_data();
        for (std::size_t i = 0; i < v.size(); ++i) {
            v[i] = checkpoint_value(blobs.size(), i);
        }
        blobs.emplace_back(std::move(name), std::move(b));
        return *this;
    }
};

/// Writes `blobs` as one safetensors file.
inline void write_shard(const std::filesystem::path& file, const NamedBlobs& blobs) {
    syncblob::io::SafetensorsWriter w;
    for (const auto& [name, blob] : blobs.blobs) {
        w.add(name, blob);
    }
    w.save(file);
}

/// Writes `text` to `file`.
inline void write_text(const std::filesystem::path& file, const std::string& text) {
    std::ofstream out(file, std::ios::binary);
    out << text;
}

/// An index text mapping each (tensor, shard) pair, with `total_size` when it is not negative.
inline std::string index_text(const std::vector<std::pair<std::string, std::string>>& map, long long total_size = -1) {
    std::string out = "{\"metadata\": {";
    if (total_size >= 0) {
        out += "\"total_size\": " + std::to_string(total_size);
    }
    out += "}, \"weight_map\": {";
    for (std::size_t i = 0; i < map.size(); ++i) {
        out += (i == 0 ? "\"" : ", \"") + map[i].first + "\": \"" + map[i].second + "\"";
    }
    return out + "}}";
}

}  // namespace test
