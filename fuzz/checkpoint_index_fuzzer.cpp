// SPDX-License-Identifier: BSD-2-Clause
// Fuzzes the reader of a sharded checkpoint's index: the bytes are parsed in memory (any input either
// parses or throws a syncblob::Error; a parsed index names only file names in its folder and reads
// back from the text the writer makes of it), then opened as `model.safetensors.index.json` in a
// folder beside two real shards, so the checks of the shards against the index run too (any input
// opens or throws a syncblob::Error; an opened checkpoint holds only the shards' own tensors).

#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <syncblob/checkpoint/writer.hpp>

#include "fuzz_support.hpp"

namespace fs = std::filesystem;
namespace io = syncblob::io;
namespace checkpoint = syncblob::checkpoint;

namespace {

// A folder of this process holding two shards of a checkpoint (tensors a, b in the first; c and
// c.__diff__ in the second), made once.
const fs::path& folder() {
    static const fs::path dir = [] {
        fs::path d = fs::temp_directory_path() / ("syncblob-fuzz-index-" + std::to_string(::getpid()));
        fs::create_directories(d);
        syncblob::Blob<float> a({3});
        syncblob::Blob<float> b({2, 2});
        syncblob::Blob<float> c({5});
        a.fill(1.0f);
        b.fill(2.0f);
        c.fill(3.0f);
        c.fill_diff(-3.0f);
        checkpoint::Writer w;
        w.add("a", a);
        w.add("b", b);
        w.add("c", c, true);
        checkpoint::SaveOptions options;
        options.max_shard_bytes = 40;
        (void)w.save(d / "seed", options);
        for (const auto& e : fs::directory_iterator(d / "seed")) {
            if (e.path().extension() == ".safetensors") {
                fs::copy_file(e.path(), d / e.path().filename(), fs::copy_options::overwrite_existing);
            }
        }
        return d;
    }();
    return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    try {
        const auto index = checkpoint::detail::parse_checkpoint_index(text, "fuzz");
        for (const auto& e : index.weight_map) {
            fuzz::require(e.shard < index.shards.size(), "every entry names one of the index's shards");
        }
        for (const auto& shard : index.shards) {
            fuzz::require(!shard.empty() && shard != "." && shard != ".." && shard.find('/') == std::string::npos &&
                              shard.find('\0') == std::string::npos,
                          "a parsed index names only file names in its folder");
        }
        for (std::size_t k = 1; k < index.shards.size(); ++k) {
            fuzz::require(index.shards[k] != index.shards[k - 1], "a shard is kept once per run of entries");
        }
        // Read for its shards alone (what a save over it keeps): the same shards, no entry.
        const auto shards =
            checkpoint::detail::parse_checkpoint_index(text, "fuzz", checkpoint::detail::IndexRead::shards);
        fuzz::require(
            shards.weight_map.empty() && shards.shards == index.shards && shards.total_size == index.total_size,
            "an index read for its shards names the same shards");
        // Written back in name order, it reads back entry by entry.
        std::vector<std::size_t> order(index.weight_map.size());
        for (std::size_t i = 0; i < order.size(); ++i) {
            order[i] = i;
        }
        const auto& map = index.weight_map;
        std::stable_sort(order.begin(), order.end(),
                         [&](std::size_t x, std::size_t y) { return map[x].tensor < map[y].tensor; });
        const auto tensor_at = [&](std::size_t i) -> std::string_view { return map[order[i]].tensor; };
        const auto shard_at = [&](std::size_t i) -> std::string_view { return index.shards[map[order[i]].shard]; };
        const auto again = checkpoint::detail::parse_checkpoint_index(
            checkpoint::detail::checkpoint_index_text(index.total_size.value_or(0), order.size(), tensor_at, shard_at),
            "fuzz (written back)");
        fuzz::require(again.weight_map.size() == order.size(), "the written index holds every entry");
        for (std::size_t i = 0; i < order.size(); ++i) {
            fuzz::require(
                again.weight_map[i].tensor == tensor_at(i) && again.shards[again.weight_map[i].shard] == shard_at(i),
                "the written index reads back entry by entry");
        }
    } catch (const syncblob::Error&) {
    }
    const fs::path index = folder() / "model.safetensors.index.json";
    if (std::FILE* f = std::fopen(index.c_str(), "wb")) {
        (void)std::fwrite(data, 1, size, f);
        (void)std::fclose(f);
    }
    try {
        io::LoadOptions options;
        options.max_bytes = fuzz::max_bytes;
        const auto c = checkpoint::Checkpoint::open(folder(), options);
        fuzz::require(c.tensors().size() <= 4, "an opened checkpoint holds only its shards' tensors");
        for (const auto& t : c.tensors()) {
            fuzz::require(t.shard < c.shards().size(), "every tensor is in one of the shards opened");
            std::vector<std::byte> bytes(static_cast<std::size_t>(t.bytes));
            c.read_bytes(t, 0, bytes.data(), bytes.size());
        }
    } catch (const syncblob::Error&) {
    }
    return 0;
}
