// SPDX-License-Identifier: BSD-2-Clause
// The checkpoint reader and writer moved from io/ to checkpoint/ (namespace syncblob::checkpoint); their
// old include paths and names keep working through the 0.2 releases (CHANGELOG, "What to change"): a
// program written against them still builds and runs, warned where it uses an old name.

#include <catch2/catch.hpp>

#include <syncblob/io/checkpoint.hpp>
#include <syncblob/io/checkpoint_writer.hpp>

#include <string>
#include <type_traits>

#include "../io/tempfile.hpp"

using namespace syncblob;

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
