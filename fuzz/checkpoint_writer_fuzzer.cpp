// SPDX-License-Identifier: BSD-2-Clause
// Fuzzes the checkpoint writer's round trip: the input chooses tensors (names, dtypes, shapes,
// bytes), metadata, a prefix and a shard size, and the old checkpoint the save replaces (an index
// whose weight_map names shards of its own and files beside the weights). Whatever the writer
// accepts and saves, `Checkpoint::open` reads back byte for byte; a refusal is a syncblob::Error
// that writes nothing; and no save removes or changes a file it cannot prove is an old shard
// (config.json stays as it was, whatever the old index says of it). Every tensor is read back twice:
// on its own, and gathered with the others into the scattered reads a load makes; and the whole
// checkpoint is loaded into an F32 CheckpointArena, its conversions gathered as a load gathers
// them, each tensor as a read of it alone converts it.

#include <fuzzer/FuzzedDataProvider.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <syncblob/checkpoint/arena_loader.hpp>
#include <syncblob/checkpoint/reader.hpp>
#include <syncblob/checkpoint/writer.hpp>
#include <syncblob/io/read_runs.hpp>

#include "fuzz_support.hpp"

namespace fs = std::filesystem;
namespace io = syncblob::io;
namespace checkpoint = syncblob::checkpoint;

namespace {

constexpr std::string_view config_text = "{\"model_type\": \"fuzz\"}\n";

std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_text(const fs::path& p, const std::string& text) {
    std::ofstream(p, std::ios::binary) << text;
}

struct Want {
    syncblob::Dtype dtype{};
    std::vector<std::int64_t> shape;
    std::vector<std::byte> bytes;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    FuzzedDataProvider in(data, size);
    static const fs::path root = fs::temp_directory_path() / ("syncblob-fuzz-writer-" + std::to_string(::getpid()));
    std::error_code ec;
    fs::remove_all(root, ec);
    fs::create_directories(root);
    write_text(root / "config.json", std::string(config_text));

    // The old checkpoint: shards of the default prefix and whatever names the input gives.
    const bool old = in.ConsumeBool();
    if (old) {
        std::string index = "{\"weight_map\": {\"cfg\": \"config.json\"";
        for (int k = in.ConsumeIntegralInRange(0, 3); k > 0; --k) {
            const std::string shard = in.ConsumeBool()
                                          ? checkpoint::detail::shard_file_name("model", static_cast<std::size_t>(k), 3)
                                          : in.ConsumeRandomLengthString(24);
            try {
                index += ", \"t" + std::to_string(k) + "\": " + io::parse::json_quote(shard, "shard");
            } catch (const syncblob::FormatError&) {  // not UTF-8: the index names another
                index += ", \"t" + std::to_string(k) + "\": \"tokenizer.model\"";
            }
            if (in.ConsumeBool() && shard.find('/') == std::string::npos && !shard.empty() && shard != "." &&
                shard != ".." && shard.find('\0') == std::string::npos && shard != "config.json") {
                write_text(root / shard, in.ConsumeBool() ? std::string("not a shard") : std::string());
            }
        }
        write_text(root / "model.safetensors.index.json", index + "}}");
    }

    checkpoint::Writer w;
    std::map<std::string, Want> want;
    for (int n = in.ConsumeIntegralInRange(0, 6); n > 0; --n) {
        const std::string name = in.ConsumeRandomLengthString(16);
        const auto dtype =
            syncblob::all_dtypes[in.ConsumeIntegralInRange<std::size_t>(0, syncblob::all_dtypes.size() - 1)];
        std::vector<std::int64_t> shape;
        std::uint64_t count = 1;
        for (int axes = in.ConsumeIntegralInRange(0, 3); axes > 0; --axes) {
            shape.push_back(in.ConsumeIntegralInRange<std::int64_t>(0, 4));
            count *= static_cast<std::uint64_t>(shape.back());
        }
        std::vector<std::byte> bytes(count * syncblob::dtype_size(dtype));
        for (auto& b : bytes) {
            b = static_cast<std::byte>(in.ConsumeIntegral<std::uint8_t>());
        }
        try {
            w.add_bytes(name, dtype, shape, bytes);
            want[name] = {dtype, shape, std::move(bytes)};
        } catch (const syncblob::FormatError&) {
        }
    }
    if (in.ConsumeBool()) {
        const std::string key = in.ConsumeRandomLengthString(8);
        w.metadata()[key] = in.ConsumeRandomLengthString(8);
    }
    checkpoint::SaveOptions options;
    options.prefix = in.ConsumeBool() ? std::string("model") : in.ConsumeRandomLengthString(12);
    options.max_shard_bytes = in.ConsumeIntegralInRange<std::uint64_t>(0, 64);
    const fs::path folder = root;
    try {
        const checkpoint::SaveReport saved = w.save(folder, options);
        const auto c = checkpoint::Checkpoint::open(saved.index);
        fuzz::require(c.tensors().size() == want.size(), "open reads back every tensor saved");
        for (const auto& [name, expected] : want) {
            const auto* t = c.find(name);
            fuzz::require(t != nullptr, "open finds every tensor saved by its name");
            fuzz::require(t->dtype == expected.dtype, "a tensor reads back with its dtype");
            fuzz::require(std::vector<std::int64_t>(t->shape.begin(), t->shape.end()) == expected.shape,
                          "a tensor reads back with its shape");
            std::vector<std::byte> got(expected.bytes.size());
            c.read_bytes(*t, 0, got.data(), got.size());
            fuzz::require(got == expected.bytes, "a tensor reads back byte for byte");
        }
        // The same bytes read as a load reads them: every tensor of the checkpoint, in its order,
        // gathered into runs of one scattered read each (gaps dropped, a new run at each shard).
        syncblob::io::detail::ReadRuns runs;
        std::vector<std::vector<std::byte>> gathered;
        gathered.reserve(c.tensors().size());
        for (const auto& t : c.tensors()) {
            auto& g = gathered.emplace_back(static_cast<std::size_t>(t.bytes));
            runs.read(c.shard_input(t.shard), t.offset, g.data(), g.size(), t.name);
        }
        runs.flush();
        for (std::size_t k = 0; k < gathered.size(); ++k) {
            fuzz::require(gathered[k] == want.at(c.tensors()[k].name).bytes,
                          "a tensor read in a run reads back byte for byte");
        }
        for (const auto& k : saved.kept) {
            fuzz::require(fs::exists(fs::symlink_status(k.file, ec)), "a file reported kept is there");
        }
        // Loaded into an F32 arena laid out from it: the small tensors' conversions are gathered
        // and staged, the rest read one at a time; each blob holds what a read of its tensor alone
        // gives. Exactly converted, the load fails when, and only when, such a read refuses a value.
        checkpoint::CheckpointArena<float> arena(c);
        checkpoint::LoadOptions load;
        load.convert = true;
        load.threads = 1;
        load.chunk_bytes = in.ConsumeIntegralInRange<std::size_t>(1, 4096);
        load.saturate = in.ConsumeBool();
        const auto rule =
            load.saturate ? syncblob::io::detail::ConvertRule::saturate : syncblob::io::detail::ConvertRule::exact;
        bool refused = false;
        std::vector<std::vector<float>> alone;  // each tensor read on its own
        for (const auto& t : c.tensors()) {
            auto& a = alone.emplace_back(static_cast<std::size_t>(t.count));
            try {
                c.read_elements<float>(t, 0, t.count, a.data(), rule);
            } catch (const syncblob::FormatError&) {
                refused = true;
            }
        }
        bool loaded = true;
        try {
            (void)arena.load(c, load);
        } catch (const syncblob::FormatError&) {
            loaded = false;
        }
        fuzz::require(loaded == !refused, "a converting load refuses a value when a read of its tensor alone does");
        for (std::size_t k = 0; loaded && k < alone.size(); ++k) {
            const auto got = arena[c.tensors()[k].name].host_data();
            fuzz::require(std::ranges::equal(std::as_bytes(got), std::as_bytes(std::span(alone[k]))),
                          "a tensor loaded with the others converts as a read of it alone (bit for bit)");
        }
    } catch (const syncblob::Error&) {
    }
    fuzz::require(slurp(root / "config.json") == config_text, "a save never removes or changes config.json");
    return 0;
}
