// SPDX-License-Identifier: BSD-2-Clause
// Sharded safetensors checkpoints: writing shards and an index, reading them back, the index of
// transformers' layout, every malformed case (each a FormatError naming the file and the tensor),
// and a save killed at every step never leaving an index that names a missing or partial shard.

#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <syncblob/checkpoint/writer.hpp>
#include <syncblob/io/checkpoint.hpp>  // the old paths, kept through 0.2 (the last test cases)
#include <syncblob/io/checkpoint_writer.hpp>
#include <type_traits>
#include <vector>

#include "../io/checkpoint_files.hpp"
#include "../io/tempfile.hpp"
#include "child_process.hpp"
#include "complexity.hpp"

namespace fs = std::filesystem;
using namespace syncblob;
using Catch::Matchers::Contains;

namespace {

std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::set<std::string> names_in(const fs::path& dir) {
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) {
        names.insert(e.path().filename().string());
    }
    return names;
}

// Three F32 blobs of 100 floats (400 bytes each) and one of 10.
test::NamedBlobs four_blobs() {
    test::NamedBlobs b;
    b.add("a", {100}).add("b", {10, 10}).add("c", {4, 25}).add("d", {10});
    return b;
}

checkpoint::Writer writer_of(const test::NamedBlobs& blobs) {
    checkpoint::Writer w;
    for (const auto& [name, blob] : blobs.blobs) {
        w.add(name, blob);
    }
    return w;
}

// Every tensor of `c`, loaded one by one, holds `blobs`' values.
void check_values(const checkpoint::Checkpoint& c, const test::NamedBlobs& blobs) {
    REQUIRE(c.tensors().size() == blobs.blobs.size());
    for (std::size_t k = 0; k < blobs.blobs.size(); ++k) {
        const auto& [name, blob] = blobs.blobs[k];
        const auto& t = c.at(name);
        const auto loaded = c.shard_file(t.shard).load<float>(name);
        CHECK(loaded.shape() == blob.shape());
        std::vector<float> direct(static_cast<std::size_t>(t.count));
        c.read_elements<float>(t, 0, t.count, direct.data(), io::detail::ConvertRule::exact);
        for (std::size_t i = 0; i < direct.size(); ++i) {
            REQUIRE(loaded.host_data()[i] == blob.host_data()[i]);
            REQUIRE(direct[i] == blob.host_data()[i]);
        }
    }
}

std::string open_error(const fs::path& p) {
    return test::message_of<FormatError>([&] { (void)checkpoint::Checkpoint::open(p); });
}

}  // namespace

TEST_CASE("a checkpoint is written as shards of at most max_shard_bytes, then an index", "[checkpoint][files]") {
    const test::TempDir dir;
    const auto blobs = four_blobs();
    const auto w = writer_of(blobs);
    checkpoint::SaveOptions options;
    options.max_shard_bytes = 800;  // a and b together, then c and d
    const fs::path index = w.save(dir.path(), options);
    CHECK(index == dir.path() / "model.safetensors.index.json");
    CHECK(names_in(dir.path()) == std::set<std::string>{"model-00001-of-00002.safetensors",
                                                        "model-00002-of-00002.safetensors",
                                                        "model.safetensors.index.json"});
    CHECK(
        slurp(index) ==
        "{\n  \"metadata\": {\n    \"total_size\": 1240\n  },\n  \"weight_map\": {\n"
        "    \"a\": \"model-00001-of-00002.safetensors\",\n    \"b\": \"model-00001-of-00002.safetensors\",\n"
        "    \"c\": \"model-00002-of-00002.safetensors\",\n    \"d\": \"model-00002-of-00002.safetensors\"\n  }\n}\n");
    const auto c = checkpoint::Checkpoint::open(dir.path());
    CHECK(c.index_file() == index);
    REQUIRE(c.shards().size() == 2);
    CHECK(c.total_size() == 1240);
    CHECK(c.at("c").shard == 1);
    check_values(c, blobs);
    CHECK(checkpoint::Checkpoint::open(index).tensors().size() == 4);
}

TEST_CASE("a tensor larger than the shard limit gets a shard of its own", "[checkpoint][files]") {
    const test::TempDir dir;
    test::NamedBlobs blobs;
    blobs.add("small", {10}).add("huge", {1000}).add("tail", {10});
    checkpoint::SaveOptions options;
    options.max_shard_bytes = 100;
    (void)writer_of(blobs).save(dir.path(), options);
    const auto c = checkpoint::Checkpoint::open(dir.path());
    REQUIRE(c.shards().size() == 3);
    CHECK(c.at("small").shard == 0);
    CHECK(c.at("huge").shard == 1);
    CHECK(c.at("tail").shard == 2);
    check_values(c, blobs);
}

TEST_CASE("a blob's diff is written beside it and mapped in the index", "[checkpoint][files]") {
    const test::TempDir dir;
    Blob<float> w({8});
    w.fill(1.5f);
    w.fill_diff(-2.0f);
    checkpoint::Writer writer;
    writer.add("w", w, true);
    writer.metadata()["format"] = "pt";
    (void)writer.save(dir.path());
    const auto c = checkpoint::Checkpoint::open(dir.path());
    REQUIRE(c.tensors().size() == 2);
    const auto* diff = c.diff_of(c.at("w"));
    REQUIRE(diff != nullptr);
    CHECK(diff->name == "w.__diff__");
    CHECK(diff->shard == c.at("w").shard);
    CHECK(c.diff_of(*diff) == nullptr);  // a diff has no diff
    // A tensor description that is not the checkpoint's own (a copy, or one of another copy of
    // the checkpoint) finds the same diff by its name.
    const checkpoint::Tensor copy = c.at("w");
    CHECK(c.diff_of(copy) == diff);
    const auto other = c;
    CHECK(c.diff_of(other.at("w")) == diff);
    CHECK(other.diff_of(other.at("w")) == &other.at("w.__diff__"));
    CHECK(c.shards()[0].metadata.at("format") == "pt");
    CHECK(c.total_size() == 64);
}

TEST_CASE("checkpoint::Writer refuses names as SafetensorsWriter does, across shards", "[checkpoint][files]") {
    Blob<float> b({4});
    checkpoint::Writer w;
    w.add("x", b);
    CHECK_THAT(test::message_of<FormatError>([&] { w.add("x", b); }), Contains("added twice"));
    CHECK_THAT(test::message_of<FormatError>([&] { w.add("y.__diff__", b); }), Contains("reserved for diffs"));
    w.add("y", b, true);
    CHECK_THAT(test::message_of<FormatError>([&] { w.add("y.__diff__", b); }), Contains("reserved"));
    const test::TempDir dir;
    checkpoint::SaveOptions options;
    options.max_shard_bytes = 16;  // a shard per blob: x, then y with its diff
    (void)w.save(dir.path(), options);
    const auto c = checkpoint::Checkpoint::open(dir.path());
    CHECK(c.tensors().size() == 3);
    CHECK(c.shards().size() == 2);
}

TEST_CASE("save reports progress up to the bytes of every file", "[checkpoint][files]") {
    const test::TempDir dir;
    std::vector<std::uint64_t> seen;
    std::uint64_t total = 0;
    checkpoint::SaveOptions options;
    options.max_shard_bytes = 800;
    options.progress = [&](std::uint64_t done, std::uint64_t all) {
        seen.push_back(done);
        total = all;
    };
    (void)writer_of(four_blobs()).save(dir.path(), options);
    std::uint64_t files = 0;
    for (const auto& e : fs::directory_iterator(dir.path())) {
        files += e.file_size();
    }
    CHECK(total == files);
    REQUIRE(seen.size() == 4 + 2 + 1);  // each tensor, each shard in place, the index
    CHECK(std::is_sorted(seen.begin(), seen.end()));
    CHECK(seen.back() == total);
}

TEST_CASE("a single safetensors file is a checkpoint of one shard", "[checkpoint][files]") {
    const test::TempDir dir;
    const auto blobs = four_blobs();
    test::write_shard(dir.path() / "model.safetensors", blobs);
    for (const fs::path& p : {dir.path() / "model.safetensors", dir.path()}) {
        const auto c = checkpoint::Checkpoint::open(p);
        CHECK(c.index_file().empty());
        CHECK(c.shards().size() == 1);
        check_values(c, blobs);
    }
    const test::TempDir empty;
    CHECK_THAT(test::message_of<IOError>([&] { (void)checkpoint::Checkpoint::open(empty.path()); }),
               Contains("holds neither model.safetensors.index.json nor model.safetensors"));
}

TEST_CASE("an index as transformers writes it: other metadata and members are read past", "[checkpoint][files]") {
    const test::TempDir dir;
    test::NamedBlobs one, two;
    one.add("embed", {5});
    two.add("head", {3});
    test::write_shard(dir.path() / "model-00001-of-00002.safetensors", one);
    test::write_shard(dir.path() / "model-00002-of-00002.safetensors", two);
    test::write_text(dir.path() / "model.safetensors.index.json",
                     "{\"metadata\": {\"total_parameters\": 8, \"total_size\": 32, \"extra\": {\"a\": [1, 2]}},"
                     " \"other\": [null, {\"x\": 1}],"
                     " \"weight_map\": {\"head\": \"model-00002-of-00002.safetensors\","
                     " \"embed\": \"model-00001-of-00002.safetensors\"}}");
    const auto c = checkpoint::Checkpoint::open(dir.path());
    CHECK(c.total_size() == 32);
    CHECK(c.at("head").shard == 1);
}

TEST_CASE("malformed checkpoints are FormatErrors naming the file and the tensor", "[checkpoint][files]") {
    const test::TempDir dir;
    const fs::path index = dir.path() / "model.safetensors.index.json";
    const std::string s1 = "model-00001-of-00002.safetensors";
    const std::string s2 = "model-00002-of-00002.safetensors";
    test::NamedBlobs one, two;
    one.add("a", {4}).add("b", {2});
    two.add("c", {3});
    test::write_shard(dir.path() / s1, one);
    test::write_shard(dir.path() / s2, two);
    const auto error = [&](const std::string& text) {
        test::write_text(index, text);
        return open_error(index);
    };
    SECTION("a tensor in the index but not in its shard") {
        CHECK_THAT(error(test::index_text({{"a", s1}, {"b", s1}, {"c", s2}, {"z", s2}})),
                   Contains(index.string() + ": weight_map: tensor \"z\": mapped to shard " + s2 +
                            ", which does not hold it (no shard does)"));
        CHECK_THAT(error(test::index_text({{"a", s2}, {"b", s1}, {"c", s2}})),
                   Contains("weight_map: tensor \"a\": mapped to shard " + s2 + ", which does not hold it (" +
                            (dir.path() / s1).string() + " does)"));
    }
    SECTION("a tensor in two shards") {
        test::NamedBlobs again;
        again.add("c", {3}).add("b", {2});
        test::write_shard(dir.path() / s2, again);
        CHECK_THAT(error(test::index_text({{"a", s1}, {"b", s1}, {"c", s2}})),
                   Contains((dir.path() / s2).string() + ": tensor \"b\": also in " + (dir.path() / s1).string()));
    }
    SECTION("a tensor of a shard that the index does not name") {
        CHECK_THAT(
            error(test::index_text({{"a", s1}, {"c", s2}})),
            Contains((dir.path() / s1).string() + ": tensor \"b\": the index " + index.string() + " does not name it"));
    }
    SECTION("a shard the index does not name") {
        test::write_shard(dir.path() / "model-00001-of-00003.safetensors", one);
        test::write_shard(dir.path() / "model-00003-of-00003.safetensors", two);
        CHECK_THAT(error(test::index_text({{"a", "model-00001-of-00003.safetensors"},
                                           {"b", "model-00001-of-00003.safetensors"},
                                           {"c", "model-00003-of-00003.safetensors"}})),
                   Contains(index.string() + ": weight_map: names 2 of the 3 shards of model but not shard "
                                             "model-00002-of-00003.safetensors"));
    }
    SECTION("a total size that disagrees") {
        CHECK_THAT(error(test::index_text({{"a", s1}, {"b", s1}, {"c", s2}}, 40)),
                   Contains(index.string() + ": metadata: total_size: 40 bytes, but the shards hold 36 bytes"));
        CHECK(error(test::index_text({{"a", s1}, {"b", s1}, {"c", s2}}, 36)) == "no exception");
    }
    SECTION("a tensor named twice in weight_map") {
        CHECK_THAT(error("{\"weight_map\": {\"a\": \"" + s1 + "\", \"b\": \"" + s1 + "\", \"c\": \"" + s2 +
                         "\", \"a\": \"" + s1 + "\"}}"),
                   Contains("weight_map: tensor \"a\": named twice"));
    }
    SECTION("an index that is not one") {
        CHECK_THAT(error("[1]"), Contains("index: expected a JSON object, found array"));
        CHECK_THAT(error("{\"metadata\": {}}"), Contains("no \"weight_map\" object"));
        CHECK_THAT(error("{\"weight_map\": [\"a\"]}"), Contains("weight_map: expected an object, found array"));
        CHECK_THAT(error("{\"weight_map\": {\"a\": 3}}"),
                   Contains("weight_map: tensor \"a\": expected the file name of a shard, found number 3"));
        CHECK_THAT(error("{\"weight_map\": {\"a\": \"../x.safetensors\"}}"),
                   Contains("shard \"../x.safetensors\" is not a file name in the index's folder"));
        CHECK_THAT(error("{\"metadata\": {\"total_size\": -1}, \"weight_map\": {}}"),
                   Contains("metadata: total_size: expected a non-negative integer, found number -1"));
        CHECK_THAT(error("{\"weight_map\": {}, \"weight_map\": {}}"), Contains("two weight_map members"));
        CHECK_THAT(error("{\"weight_map\": {"), Contains("not valid JSON"));
    }
    SECTION("a shard that is missing or malformed") {
        CHECK_THAT(test::message_of<IOError>([&] {
                       test::write_text(index, test::index_text({{"a", "gone.safetensors"}}));
                       (void)checkpoint::Checkpoint::open(index);
                   }),
                   Contains((dir.path() / "gone.safetensors").string()));
        test::write_text(dir.path() / "bad.safetensors", "short");
        CHECK_THAT(error(test::index_text({{"a", "bad.safetensors"}})),
                   Contains((dir.path() / "bad.safetensors").string() + ": header length"));
    }
}

// A safetensors file of one F32 tensor `name` of `n` elements, written byte by byte (a writer
// refuses to write a diff without its blob).
void raw_shard(const fs::path& file, const std::string& name, int n) {
    std::string header = "{\"" + name + "\":{\"dtype\":\"F32\",\"shape\":[" + std::to_string(n) +
                         "],\"data_offsets\":[0," + std::to_string(4 * n) + "]}}";
    std::string out(8, '\0');
    for (std::size_t i = 0; i < 8; ++i) {
        out[i] = static_cast<char>((header.size() >> (8 * i)) & 0xFF);
    }
    test::write_text(file, out + header + std::string(static_cast<std::size_t>(4 * n), '\0'));
}

TEST_CASE("a diff in another shard than its blob must have its dtype and shape", "[checkpoint][files]") {
    const test::TempDir dir;
    const std::string s1 = "model-00001-of-00002.safetensors";
    const std::string s2 = "model-00002-of-00002.safetensors";
    test::NamedBlobs one;
    one.add("w", {4});
    test::write_shard(dir.path() / s1, one);
    const fs::path index = dir.path() / "model.safetensors.index.json";
    test::write_text(index, test::index_text({{"w", s1}, {"w.__diff__", s2}}));
    raw_shard(dir.path() / s2, "w.__diff__", 4);
    const auto c = checkpoint::Checkpoint::open(dir.path());
    REQUIRE(c.diff_of(c.at("w")) != nullptr);
    CHECK(c.diff_of(c.at("w"))->shard == 1);

    raw_shard(dir.path() / s2, "w.__diff__", 5);
    CHECK_THAT(open_error(dir.path()),
               Contains((dir.path() / s2).string() + ": tensor \"w.__diff__\": F32 5 (5), but its blob \"w\" in " +
                        (dir.path() / s1).string() + " is F32 4 (4)"));
    raw_shard(dir.path() / s2, "v.__diff__", 4);
    test::write_text(index, test::index_text({{"w", s1}, {"v.__diff__", s2}}));
    CHECK_THAT(open_error(dir.path()), Contains((dir.path() / s2).string() + ": tensor \"v.__diff__\": its name "
                                                                             "makes it the diff of \"v\""));
}

// Forks a child that saves `blobs` into `dir` and kills itself with SIGKILL at the `kill_at`-th
// progress call; returns its wait status.
int save_killed_at(const fs::path& dir, const test::NamedBlobs& blobs, std::uint64_t max_shard, int kill_at) {
    const int status = test::wait_status_of_child([&] {
        int calls = 0;
        checkpoint::SaveOptions options;
        options.max_shard_bytes = max_shard;
        options.progress = [&](std::uint64_t, std::uint64_t) {
            if (++calls == kill_at) {
                ::raise(SIGKILL);
            }
        };
        (void)writer_of(blobs).save(dir, options);
        return 3;
    });
    REQUIRE(status != -1);
    return status;
}

// True when the checkpoint in `dir` opens and holds exactly `blobs`' values (no Catch assertions:
// a false answer is an answer).
bool holds(const fs::path& dir, const test::NamedBlobs& blobs) {
    try {
        const auto c = checkpoint::Checkpoint::open(dir);
        if (c.tensors().size() != blobs.blobs.size()) {
            return false;
        }
        for (const auto& [name, blob] : blobs.blobs) {
            const auto loaded = c.shard_file(c.at(name).shard).load<float>(name);
            if (!std::equal(loaded.host_data().begin(), loaded.host_data().end(), blob.host_data().begin(),
                            blob.host_data().end())) {
                return false;
            }
        }
        return true;
    } catch (const Error&) {
        return false;
    }
}

TEST_CASE("a save killed at any step leaves no index naming a missing or partial shard", "[io][checkpoint][save]") {
    const auto fresh = four_blobs();
    test::NamedBlobs older;  // the same names, other values
    older.add("a", {100}).add("b", {10, 10}).add("c", {4, 25}).add("d", {10});
    for (auto& [name, blob] : older.blobs) {
        blob.fill(-1.0f);
    }
    std::set<int> shard_counts_before = {0, 2, 4};  // none; the same names as the new one; other names
    for (const int before : shard_counts_before) {
        CAPTURE(before);
        // 2 shards: 4 tensors, 2 shards in place, 1 index: 7 progress calls; kill at each.
        for (int kill_at = 1; kill_at <= 7; ++kill_at) {
            CAPTURE(kill_at);
            const test::TempDir dir;
            if (before != 0) {
                checkpoint::SaveOptions old;
                old.max_shard_bytes = before == 2 ? 800 : 100;
                (void)writer_of(older).save(dir.path(), old);
            }
            const int status = save_killed_at(dir.path(), fresh, 800, kill_at);
            REQUIRE(WIFSIGNALED(status));
            CHECK(WTERMSIG(status) == SIGKILL);
            for (const auto& name : names_in(dir.path())) {
                CHECK(name.find(".tmp-") == std::string::npos);  // no temporary left behind
            }
            const bool indexed = fs::exists(dir.path() / "model.safetensors.index.json");
            if (!indexed) {
                CHECK(before != 4);  // only a save over shards of the same names removes an old index
                continue;
            }
            const bool is_old = holds(dir.path(), older);
            const bool is_new = holds(dir.path(), fresh);
            CHECK((is_old || is_new));        // whichever index is there, its shards are whole and its own
            CHECK(is_new == (kill_at == 7));  // killed after the index was in place: the new checkpoint
        }
    }
}

// --- What a save may remove or replace ---------------------------------------------------------

namespace {

// A Hugging Face folder: an old checkpoint of one shard whose index also maps tensors to files that
// are no shards (a config and a tokenizer kept beside the weights), and a stale file of the shard
// pattern that is no safetensors file.
struct ModelFolder {
    test::TempDir dir;
    fs::path index = dir.path() / "model.safetensors.index.json";
    std::string config = "{\"model_type\": \"llama\"}\n";
    std::string tokenizer = "\x0a\x05hello tokenizer bytes";
    std::string garbage = "not a safetensors file";

    ModelFolder() {
        test::NamedBlobs old;
        old.add("old", {4});
        test::write_shard(dir.path() / "model-00001-of-00003.safetensors", old);
        test::write_shard(dir.path() / "other-00001-of-00001.safetensors", old);
        test::write_text(dir.path() / "config.json", config);
        test::write_text(dir.path() / "tokenizer.model", tokenizer);
        test::write_text(dir.path() / "model-00003-of-00003.safetensors", garbage);
        test::write_text(index, test::index_text({{"old", "model-00001-of-00003.safetensors"},
                                                  {"cfg", "config.json"},
                                                  {"tok", "tokenizer.model"},
                                                  {"junk", "model-00003-of-00003.safetensors"},
                                                  {"elsewhere", "other-00001-of-00001.safetensors"}}));
    }
};

}  // namespace

TEST_CASE("a save removes only the old shards it can prove are shards; files beside the weights stay",
          "[io][checkpoint][strangers]") {
    const ModelFolder m;
    checkpoint::SaveOptions options;
    options.max_shard_bytes = 800;
    const auto blobs = four_blobs();
    const checkpoint::SaveReport saved = writer_of(blobs).save(m.dir.path(), options);
    CHECK(holds(m.dir.path(), blobs));
    CHECK(saved.index == m.index);
    CHECK(saved.shards == std::vector<fs::path>{m.dir.path() / "model-00001-of-00002.safetensors",
                                                m.dir.path() / "model-00002-of-00002.safetensors"});
    CHECK(saved.removed == std::vector<fs::path>{m.dir.path() / "model-00001-of-00003.safetensors"});
    std::map<std::string, std::string> kept;
    for (const auto& k : saved.kept) {
        kept[k.file.filename().string()] = k.reason;
    }
    REQUIRE(kept.size() == 4);
    CHECK_THAT(kept["config.json"], Contains("not named as the old index's shards are"));
    CHECK_THAT(kept["tokenizer.model"], Contains("not named as the old index's shards are"));
    CHECK_THAT(kept["other-00001-of-00001.safetensors"], Contains("model-KKKKK-of-NNNNN.safetensors"));
    CHECK_THAT(kept["model-00003-of-00003.safetensors"], Contains("not a safetensors file"));
    REQUIRE(fs::exists(m.dir.path() / "config.json"));
    REQUIRE(fs::exists(m.dir.path() / "tokenizer.model"));
    CHECK(slurp(m.dir.path() / "config.json") == m.config);
    CHECK(slurp(m.dir.path() / "tokenizer.model") == m.tokenizer);
    // the shard pattern of the old index, but not a safetensors file: not provably a shard
    CHECK(slurp(m.dir.path() / "model-00003-of-00003.safetensors") == m.garbage);
    // a safetensors file, but not of the old index's pattern: not provably its shard
    CHECK(fs::exists(m.dir.path() / "other-00001-of-00001.safetensors"));
    // the old index's own shard: removed
    CHECK_FALSE(fs::exists(m.dir.path() / "model-00001-of-00003.safetensors"));
}

TEST_CASE("a save replaces no file at a shard's or the index's name that it cannot prove is a checkpoint's",
          "[io][checkpoint][strangers]") {
    const test::TempDir dir;
    const std::string notes = "my notes, not a shard";
    checkpoint::SaveOptions options;
    options.max_shard_bytes = 800;  // two shards
    SECTION("a shard's name") {
        test::write_text(dir.path() / "model-00002-of-00002.safetensors", notes);
        CHECK_THAT(test::message_of<IOError>([&] { (void)writer_of(four_blobs()).save(dir.path(), options); }),
                   Contains("cannot replace " + (dir.path() / "model-00002-of-00002.safetensors").string() +
                            ": it is not a safetensors file"));
        CHECK(slurp(dir.path() / "model-00002-of-00002.safetensors") == notes);
    }
    SECTION("the index's name") {
        test::write_text(dir.path() / "model.safetensors.index.json", notes);
        CHECK_THAT(test::message_of<IOError>([&] { (void)writer_of(four_blobs()).save(dir.path(), options); }),
                   Contains("cannot replace " + (dir.path() / "model.safetensors.index.json").string() +
                            ": it is not a checkpoint index"));
        CHECK(slurp(dir.path() / "model.safetensors.index.json") == notes);
    }
    CHECK(names_in(dir.path()).size() == 1);  // refused before anything was written
}

TEST_CASE("a prefix that would not read back is refused at save, before anything is written",
          "[io][checkpoint][strangers]") {
    const test::TempDir dir;
    const auto w = writer_of(four_blobs());
    const std::vector<std::string> refused = {
        "sub/model", "", ".", "..", "/abs", std::string("a\0b", 3), "bad\xff", std::string(250, 'x')};
    for (const auto& prefix : refused) {
        CAPTURE(prefix);
        checkpoint::SaveOptions options;
        options.prefix = prefix;
        CHECK_THAT(test::message_of<OptionError>([&] { (void)w.save(dir.path() / "out", options); }),
                   Contains("checkpoint::Writer::save: SaveOptions::prefix \""));
        CHECK_FALSE(fs::exists(dir.path() / "out"));
    }
}

TEST_CASE("writers keep what they save alive: blobs of a vector that grew, or was cleared, save their values",
          "[io][checkpoint][strangers]") {
    const test::TempDir dir;
    std::vector<Blob<float>> blobs;
    checkpoint::Writer checkpoint;
    io::SafetensorsWriter single;
    for (int k = 0; k < 40; ++k) {
        auto& b = blobs.emplace_back(Shape{16});  // each emplace may move every blob before it
        b.fill(static_cast<float>(k));
        b.fill_diff(static_cast<float>(-k));
        checkpoint.add("b" + std::to_string(k), b, k % 2 == 0);
        single.add("b" + std::to_string(k), b, k % 2 == 0);
    }
    blobs.clear();  // and then every blob is gone
    checkpoint::SaveOptions options;
    options.max_shard_bytes = 256;
    const auto c = checkpoint::Checkpoint::open(checkpoint.save(dir.path() / "ckpt", options));
    single.save(dir.path() / "one.safetensors");
    const auto file = io::SafetensorsFile::open(dir.path() / "one.safetensors");
    for (int k = 0; k < 40; ++k) {
        const std::string name = "b" + std::to_string(k);
        CAPTURE(name);
        std::vector<float> got(16);
        c.read_elements<float>(c.at(name), 0, 16, got.data(), io::detail::ConvertRule::exact);
        CHECK(got == std::vector<float>(16, static_cast<float>(k)));
        CHECK(file.load<float>(name).host_data()[15] == static_cast<float>(k));
        if (k % 2 == 0) {
            REQUIRE(c.diff_of(c.at(name)) != nullptr);
            c.read_elements<float>(*c.diff_of(c.at(name)), 0, 16, got.data(), io::detail::ConvertRule::exact);
            CHECK(got == std::vector<float>(16, static_cast<float>(-k)));
        }
    }
}

TEST_CASE("a writer holding a memory-mapped blob saves it after the blob was written through copy on write",
          "[io][checkpoint][strangers]") {
    const test::TempDir dir;
    test::NamedBlobs one;
    one.add("w", {64});
    test::write_shard(dir.path() / "in.safetensors", one);
    io::SafetensorsWriter single;
    checkpoint::Writer checkpoint;
    {
        auto mapped = io::SafetensorsFile::open(dir.path() / "in.safetensors", {}, io::LoadMode::map).load<float>("w");
        single.add("w", mapped);
        checkpoint.add("w", mapped);
        mapped.mutable_host_data()[0] = 42.0f;  // copy on write: the mapping is let go
    }
    single.save(dir.path() / "out.safetensors");
    const auto saved = io::SafetensorsFile::open(dir.path() / "out.safetensors").load<float>("w");
    CHECK(saved.host_data()[0] == 42.0f);  // the values the blob held at save
    CHECK(saved.host_data()[1] == one.blobs[0].second.host_data()[1]);
    const auto c = checkpoint::Checkpoint::open(checkpoint.save(dir.path() / "ckpt"));
    std::vector<float> got(64);
    c.read_elements<float>(c.at("w"), 0, 64, got.data(), io::detail::ConvertRule::exact);
    CHECK(got[1] == one.blobs[0].second.host_data()[1]);
}

TEST_CASE("an index naming many shards is checked in time linear in their count", "[io][checkpoint][complexity]") {
    const test::TempDir dir;
    // An index naming N shards, none of which exists: the numbering is checked, then the first is missing.
    for (const std::size_t n : {std::size_t{20000}, std::size_t{200000}}) {
        std::vector<std::pair<std::string, std::string>> map;
        for (std::size_t k = 1; k <= n; ++k) {
            map.emplace_back("t" + std::to_string(k), syncblob::checkpoint::detail::shard_file_name("model", k, n));
        }
        test::write_text(dir.path() / (std::to_string(n) + ".json"), test::index_text(map));
    }
    const auto open = [&](std::size_t n) {
        REQUIRE_THAT(test::message_of<IOError>(
                         [&] { (void)checkpoint::Checkpoint::open(dir.path() / (std::to_string(n) + ".json")); }),
                     Contains("model-00001-of-"));
    };
    CHECK(test::tenfold_growth(open, 20000) < test::linear_bound);
}

// --- Whatever a writer saves, open reads back ----------------------------------------------------

namespace {

const std::string not_utf8("bad\xc3", 4);

// A random name: printable ASCII, the characters JSON escapes, multi-byte UTF-8, '/' and '.'; now
// and then one a writer must refuse (reserved, not UTF-8) or one already taken.
std::string random_name(std::mt19937_64& rng, const std::vector<std::string>& taken) {
    static const std::vector<std::string> pieces = {
        "a",    "Z", "0",  ".",    "/",      "-",  " ", "\"", "\\", "\n",   "\t",
        "\x01", "é", "层", "🙂", "weight", "__", ":", "{}", "[",  ".__d", "model-00001-of-00002"};
    const auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
    switch (pick(24)) {
        case 0:
            return taken.empty() ? "x" : taken[pick(taken.size())];  // taken: refused
        case 1:
            return "w" + std::string(io::diff_suffix);  // reserved: refused
        case 2:
            return "__metadata__";  // reserved: refused
        case 3:
            return not_utf8;  // refused
        case 4:
            return std::string(300 + pick(3000), 'n');  // long names are names
        default:
            break;
    }
    std::string name;
    for (std::size_t n = 1 + pick(6); n > 0; --n) {
        name += pieces[pick(pieces.size())];
    }
    return name;
}

// A random prefix; `valid` says whether save must take it.
std::string random_prefix(std::mt19937_64& rng, bool& valid) {
    static const std::vector<std::string> good = {"model",   "m",   "model-00001-of-00002", "权重",
                                                  ".hidden", "a b", "x.safetensors",        std::string(200, 'p')};
    static const std::vector<std::string> bad = {
        "", ".", "..", "sub/model", "/abs", "a/", std::string("a\0b", 3), "\xff", std::string(240, 'p')};
    valid = rng() % 3 != 0;
    return valid ? good[rng() % good.size()] : bad[rng() % bad.size()];
}

}  // namespace

TEST_CASE("whatever a checkpoint writer saves, open reads back: random names, prefixes, shard sizes, dtypes",
          "[io][checkpoint][property]") {
    const test::TempDir dir;
    for (std::uint64_t seed = 1; seed <= 150; ++seed) {
        CAPTURE(seed);
        std::mt19937_64 rng(seed);
        checkpoint::Writer w;
        struct Want {
            Dtype dtype;
            std::vector<std::int64_t> shape;
            std::vector<std::byte> bytes;
        };
        std::map<std::string, Want> want;
        std::vector<std::string> taken;
        for (std::size_t n = rng() % 12; n > 0; --n) {
            const std::string name = random_name(rng, taken);
            const bool refused = std::find(taken.begin(), taken.end(), name) != taken.end() ||
                                 name.ends_with(io::diff_suffix) || name == "__metadata__" || name == not_utf8;
            if (rng() % 3 == 0) {  // a blob, now and then with its diff
                Blob<double> b({static_cast<std::int64_t>(rng() % 5), 3});
                for (auto& x : b.mutable_host_data()) {
                    x = static_cast<double>(rng() % 1000) - 500.5;
                }
                b.fill_diff(0.25);
                const bool with_diff = rng() % 2 == 0;
                const bool diff_taken = with_diff && std::find(taken.begin(), taken.end(),
                                                               name + std::string(io::diff_suffix)) != taken.end();
                if (refused || diff_taken) {
                    CHECK_THROWS_AS(w.add(name, b, with_diff), FormatError);
                    continue;
                }
                w.add(name, b, with_diff);
                const auto bytes = std::as_bytes(b.host_data());
                want[name] = {Dtype::F64, {b.shape(0), 3}, {bytes.begin(), bytes.end()}};
                taken.push_back(name);
                if (with_diff) {
                    const auto d = std::as_bytes(b.host_diff());
                    want[name + std::string(io::diff_suffix)] = {Dtype::F64, {b.shape(0), 3}, {d.begin(), d.end()}};
                    taken.push_back(name + std::string(io::diff_suffix));
                }
                continue;
            }
            const Dtype dtype = all_dtypes[rng() % all_dtypes.size()];
            std::vector<std::int64_t> shape;
            for (std::size_t axes = rng() % 4; axes > 0; --axes) {
                shape.push_back(static_cast<std::int64_t>(rng() % 4));
            }
            std::uint64_t count = 1;
            for (const auto e : shape) {
                count *= static_cast<std::uint64_t>(e);
            }
            std::vector<std::byte> bytes(count * dtype_size(dtype));
            for (auto& b : bytes) {
                b = static_cast<std::byte>(rng());
            }
            if (refused) {
                CHECK_THROWS_AS(w.add_bytes(name, dtype, shape, bytes), FormatError);
                continue;
            }
            w.add_bytes(name, dtype, shape, bytes);
            want[name] = {dtype, shape, std::move(bytes)};
            taken.push_back(name);
        }
        w.metadata()["format"] = "pt";
        const std::string key = random_name(rng, {});
        const std::string value = random_name(rng, {});
        w.metadata()[key] = value;
        checkpoint::SaveOptions options;
        bool valid = true;
        options.prefix = random_prefix(rng, valid);
        const std::uint64_t limits[] = {0, 1, 16, 100, 1000, 5'000'000'000};
        options.max_shard_bytes = limits[rng() % 6];
        options.fsync = rng() % 8 == 0;
        const fs::path folder = dir.path() / std::to_string(seed);
        if (!valid) {
            CHECK_THROWS_AS(w.save(folder, options), OptionError);
            CHECK_FALSE(fs::exists(folder));
            continue;
        }
        if (key == not_utf8 || value == not_utf8) {
            CHECK_THROWS_AS(w.save(folder, options), FormatError);  // metadata that is not UTF-8
            CHECK_FALSE(fs::exists(folder));
            continue;
        }
        const checkpoint::SaveReport saved = w.save(folder, options);
        // The index maps the tensors in name order, as transformers writes it.
        const auto index = nlohmann::ordered_json::parse(slurp(saved.index));
        std::vector<std::string> mapped;
        for (const auto& [name, shard] : index.at("weight_map").items()) {
            mapped.push_back(name);
        }
        std::vector<std::string> names;
        for (const auto& [name, expected] : want) {
            names.push_back(name);
        }
        CHECK(mapped == names);
        const auto c = checkpoint::Checkpoint::open(saved.index);
        REQUIRE(c.tensors().size() == want.size());
        CHECK(c.shards().size() == saved.shards.size());
        for (const auto& shard : c.shards()) {
            CHECK(shard.metadata == w.metadata());
        }
        for (const auto& [name, expected] : want) {
            const auto* t = c.find(name);
            REQUIRE(t != nullptr);
            CHECK(t->dtype == expected.dtype);
            CHECK(std::vector<std::int64_t>(t->shape.begin(), t->shape.end()) == expected.shape);
            std::vector<std::byte> got(expected.bytes.size());
            c.read_bytes(*t, 0, got.data(), got.size());
            CHECK(got == expected.bytes);
            if (checkpoint::Checkpoint::is_diff(name)) {
                CHECK(t->shard == c.at(name.substr(0, name.size() - io::diff_suffix.size())).shard);
            }
        }
        CHECK(saved.kept.empty());
        CHECK(saved.removed.empty());
    }
}

// ---- the reader's and writer's old include paths and names ------------------------------------------
// They moved from io/ to checkpoint/ (namespace syncblob::checkpoint); the old paths and names keep
// working through the 0.2 releases (CHANGELOG, "What to change"): a program written against them still
// builds and runs, warned where it uses an old name.

// The old names are deprecated: a user sees the warning; this test is the one place that uses them.
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif

TEST_CASE("the checkpoint reader's and writer's old names are the new classes", "[checkpoint][moved]") {
    STATIC_REQUIRE(std::is_same_v<io::Checkpoint, checkpoint::Checkpoint>);
    STATIC_REQUIRE(std::is_same_v<io::CheckpointTensor, checkpoint::Tensor>);
    STATIC_REQUIRE(std::is_same_v<io::CheckpointShard, checkpoint::Shard>);
    STATIC_REQUIRE(std::is_same_v<io::CheckpointWriter, checkpoint::Writer>);
    STATIC_REQUIRE(std::is_same_v<io::CheckpointSaveOptions, checkpoint::SaveOptions>);
    STATIC_REQUIRE(std::is_same_v<io::SavedCheckpoint, checkpoint::SaveReport>);
    CHECK(io::checkpoint_index_name == checkpoint::index_name);
    CHECK(io::checkpoint_single_name == checkpoint::single_name);
}

TEST_CASE("a checkpoint saved and opened through the old paths and names reads back", "[checkpoint][moved]") {
    test::TempDir dir;
    Blob<float> w({2, 3});
    float next = 0.5f;
    for (float& v : w.mutable_host_data()) {
        v = next++;
    }
    io::CheckpointWriter writer;
    writer.add("w", w);
    io::CheckpointSaveOptions options;
    options.max_shard_bytes = 8;
    const io::SavedCheckpoint saved = writer.save(dir.path(), options);
    CHECK(saved.index == dir.path() / io::checkpoint_index_name);

    const auto ckpt = io::Checkpoint::open(dir.path());
    const io::CheckpointTensor& t = ckpt.at("w");
    REQUIRE(t.count == 6);
    float back[6] = {};
    ckpt.read_elements(t, 0, 6, back, io::detail::ConvertRule::exact);
    CHECK(back[5] == 5.5f);
    const io::CheckpointShard& shard = ckpt.shards().at(t.shard);
    CHECK(shard.path.parent_path() == dir.path());
}

#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
