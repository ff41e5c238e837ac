// SPDX-License-Identifier: BSD-2-Clause
#pragma once
// Checkpoints for the loader's tests: mixed sizes, as a small transformer has (embeddings and
// matrices, and many small norms and biases), saved in a few shards of a temporary folder.

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <syncblob/checkpoint.hpp>
#include <vector>

#include "../io/checkpoint_files.hpp"
#include "../io/tempfile.hpp"

namespace test {

/// `layers` layers of a transformer of width `width`: per layer a norm, a bias and two matrices.
inline NamedBlobs transformer_blobs(int layers, std::int64_t width) {
    NamedBlobs b;
    b.add("embed", {3 * width, width});
    for (int l = 0; l < layers; ++l) {
        const std::string p = "layer" + std::to_string(l) + ".";
        b.add(p + "norm", {width})
            .add(p + "attn", {width, width})
            .add(p + "bias", {3})
            .add(p + "mlp", {2 * width, width});
    }
    b.add("final_norm", {width});
    return b;
}

/// Saves `blobs` in shards of at most `max_shard` bytes (as element type T) and opens the checkpoint.
template <class T = float>
syncblob::checkpoint::Checkpoint save_checkpoint(const std::filesystem::path& dir, const NamedBlobs& blobs,
                                                 std::uint64_t max_shard) {
    syncblob::checkpoint::Writer w;
    std::vector<syncblob::Blob<T>> converted;
    converted.reserve(blobs.blobs.size());
    for (const auto& [name, blob] : blobs.blobs) {
        if constexpr (std::is_same_v<T, float>) {
            w.add(name, blob);
        } else {
            auto& c = converted.emplace_back(blob.shape());
            auto out = c.mutable_host_data();
            for (std::size_t i = 0; i < out.size(); ++i) {
                out[i] = static_cast<T>(blob.host_data()[i]);
            }
            w.add(name, c);
        }
    }
    syncblob::checkpoint::SaveOptions options;
    options.max_shard_bytes = max_shard;
    return syncblob::checkpoint::Checkpoint::open(w.save(dir, options));
}

/// The blobs of `arena` hold `blobs`' values (read on the host), converted through `T`.
template <class T = float, class Arena>
bool arena_holds(const Arena& arena, const NamedBlobs& blobs) {
    for (const auto& [name, blob] : blobs.blobs) {
        const auto got = arena[name].host_data();
        const auto want = blob.host_data();
        if (got.size() != want.size()) {
            return false;
        }
        for (std::size_t i = 0; i < got.size(); ++i) {
            if (static_cast<float>(got[i]) != static_cast<float>(static_cast<T>(want[i]))) {
                return false;
            }
        }
    }
    return true;
}

/// The tensors of a small transformer (`layers` layers of width 24) saved as element type T in shards of
/// at most `max_shard` bytes, with the diffs of some blobs: two runs of consecutive blobs and one alone,
/// so that blobs without a diff lie between blobs with one. Returns what `Writer::save` returns (the
/// index, or the one shard). The shared loads' tests (MPI and NCCL) load it.
template <class T = float>
std::filesystem::path save_with_diffs(const std::filesystem::path& dir, int layers = 3,
                                      std::uint64_t max_shard = 6000) {
    const NamedBlobs blobs = transformer_blobs(layers, 24);
    syncblob::checkpoint::Writer w;
    std::vector<syncblob::Blob<T>> converted;
    converted.reserve(blobs.blobs.size());
    std::size_t b = 0;
    for (const auto& [name, blob] : blobs.blobs) {
        auto& c = converted.emplace_back(blob.shape());
        auto data = c.mutable_host_data();
        auto diff = c.mutable_host_diff();
        for (std::size_t i = 0; i < data.size(); ++i) {
            data[i] = static_cast<T>(blob.host_data()[i]);
            diff[i] = static_cast<T>(-blob.host_data()[i]);
        }
        w.add(name, c, b == 1 || b == 2 || b == 3 || b == 6 || b == 10 || b == 11);
        ++b;
    }
    syncblob::checkpoint::SaveOptions options;
    options.max_shard_bytes = max_shard;
    return w.save(dir, options);
}

/// Every blob's data and diff in arena `a` are, byte for byte, those in `b` (read on the host).
template <class ArenaA, class ArenaB>
bool same_bytes(const ArenaA& a, const ArenaB& b) {
    for (std::size_t i = 0; i < a.arena().size(); ++i) {
        const auto x = a.arena()[i].host_data();
        const auto y = b.arena()[i].host_data();
        const auto dx = a.arena()[i].host_diff();
        const auto dy = b.arena()[i].host_diff();
        if (x.size() != y.size() || std::memcmp(x.data(), y.data(), x.size_bytes()) != 0 ||
            std::memcmp(dx.data(), dy.data(), dx.size_bytes()) != 0) {
            return false;
        }
    }
    return true;
}

}  // namespace test
