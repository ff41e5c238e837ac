// SPDX-License-Identifier: BSD-2-Clause
// Loading checkpoints into an arena: the host path straight from the files, the device path
// through staging blocks with one copy per chunk, conversion on the way (on the device where it
// can never refuse a value, on the host otherwise), diffs, progress, validation that leaves the
// arena as it was, and, on the simulated timeline, reads and copies overlapping.

#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <span>
#include <string>
#include <syncblob/checkpoint.hpp>
#include <syncblob/checkpoint/detail/staging.hpp>
#include <syncblob/sim/timeline.hpp>
#include <vector>

#include "checkpoint_support.hpp"
#include "child_process.hpp"
#include "complexity.hpp"
#include "files.hpp"

namespace fs = std::filesystem;
using namespace syncblob;
using Catch::Matchers::Contains;
using Kind = sim::detail::OpKind;
using Device = SimulatedDevice;

TEST_CASE("a checkpoint loads into the host side of an arena, in its order, on any number of threads",
          "[checkpoint][host]") {
    const test::TempDir dir;
    const auto blobs = test::transformer_blobs(6, 32);
    const auto ckpt = test::save_checkpoint(dir.path(), blobs, 20000);
    REQUIRE(ckpt.shards().size() >= 3);
    const unsigned threads = GENERATE(1u, 2u);
    const std::size_t chunk = GENERATE(std::size_t{4096}, std::size_t{1} << 20);
    CAPTURE(threads, chunk);
    checkpoint::LoadOptions options;
    options.threads = threads;
    options.chunk_bytes = chunk;
    checkpoint::CheckpointArena<float> loaded(ckpt);
    const auto report = loaded.load(ckpt, options);
    CHECK(test::arena_holds(loaded, blobs));
    CHECK(loaded.names().front() == ckpt.tensors().front().name);
    CHECK(report.bytes_read == ckpt.total_size());
    CHECK(report.tensors == blobs.blobs.size());
    CHECK(report.host_to_device_copies == 0);
    CHECK_FALSE(report.on_device);
    CHECK(report.chunks >= (chunk == 4096 ? report.bytes_read / 4096 : 1));
    CHECK(loaded.arena().flat_data().fresh_on_host());
}

TEST_CASE("a device load issues one host-to-device copy per chunk, not per tensor", "[checkpoint][device]") {
    const test::TempDir dir;
    const auto blobs = test::transformer_blobs(8, 16);  // 34 tensors of 12 B to 3 KiB
    const auto ckpt = test::save_checkpoint(dir.path(), blobs, 6000);
    const Device::Scope scope{Device::Settings{}};
    checkpoint::LoadOptions options;
    options.chunk_bytes = 8192;
    checkpoint::CheckpointArena<float, Simulated> loaded(ckpt);
    const SimulatedTimeline timeline;
    const auto report = loaded.load(ckpt, options);
    CHECK(report.on_device);
    CHECK(timeline.count(Kind::copy) == report.chunks);  // counted by the simulator, not by the loader
    CHECK(report.host_to_device_copies == report.chunks);
    CHECK(report.chunks < report.tensors / 2);
    CHECK(loaded["embed"].data_head() == Head::at_device);
    CHECK(test::arena_holds(loaded, blobs));
    CHECK(Device::faults().empty());
}

TEST_CASE("a BF16 checkpoint loads into a float arena, converted by kernels on the device", "[checkpoint][convert]") {
    const test::TempDir dir;
    const auto blobs = test::transformer_blobs(4, 16);
    const auto ckpt = test::save_checkpoint<bfloat16>(dir.path(), blobs, 4000);
    const Device::Scope scope{Device::Settings{}};
    checkpoint::CheckpointArena<float, Simulated> loaded(ckpt);
    checkpoint::LoadOptions options;
    CHECK_THAT(test::message_of<FormatError>([&] { (void)loaded.load(ckpt, options); }),
               Contains(": dtype: the file holds BF16, the arena F32 (set LoadOptions::convert to convert)"));
    options.convert = true;
    options.chunk_bytes = 4096;
    const SimulatedTimeline timeline;
    const auto report = loaded.load(ckpt, options);
    CHECK(report.device_conversions >= report.tensors);
    CHECK(timeline.count(Kind::kernel) == report.device_conversions);
    CHECK(report.host_to_device_copies == report.chunks);
    CHECK(report.bytes_read == ckpt.total_size());
    CHECK(test::arena_holds<bfloat16>(loaded, blobs));
    CHECK(Device::faults().empty());
}

TEST_CASE("a conversion that can refuse a value runs on the host, and names the value it refuses",
          "[checkpoint][convert]") {
    const test::TempDir dir;
    Blob<double> big({1000});
    big.fill(1.0);
    big.mutable_host_data()[700] = 1e300;
    checkpoint::Writer w;
    w.add("big", big);
    const auto ckpt = checkpoint::Checkpoint::open(w.save(dir.path()));
    const Device::Scope scope{Device::Settings{}};
    checkpoint::CheckpointArena<float, Simulated> loaded(ckpt);
    checkpoint::LoadOptions options;
    options.convert = true;
    options.chunk_bytes = 4096;  // 1024 floats a chunk: the value is in the first
    CHECK_THAT(test::message_of<FormatError>([&] { (void)loaded.load(ckpt, options); }),
               Contains("tensor \"big\" at byte ") &&
                   Contains("element 700: value 1e+300 (F64) overflows F32 (its largest finite value is "
                            "3.4028235e+38); LoadOptions::saturate would load it as 3.4028235e+38"));
    options.saturate = true;
    const auto report = loaded.load(ckpt, options);
    CHECK(report.device_conversions == 0);
    CHECK(loaded["big"].host_data()[700] == std::numeric_limits<float>::max());
    CHECK(loaded["big"].host_data()[699] == 1.0f);
    CHECK(Device::faults().empty());
}

TEST_CASE("diffs load into their blobs' diffs; progress counts every byte once", "[checkpoint]") {
    const test::TempDir dir;
    Blob<float> a({300});
    Blob<float> b({5});
    a.fill(2.0f);
    a.fill_diff(-3.0f);
    b.fill(4.0f);
    checkpoint::Writer w;
    w.add("a", a, true);
    w.add("b", b);
    const auto ckpt = checkpoint::Checkpoint::open(w.save(dir.path()));
    const Device::Scope scope{Device::Settings{}};
    for (const auto target : {checkpoint::Target::host, checkpoint::Target::device}) {
        checkpoint::CheckpointArena<float, Simulated> loaded(ckpt);
        std::vector<std::uint64_t> seen;
        checkpoint::LoadOptions options;
        options.target = target;
        options.chunk_bytes = 4096;
        options.progress = [&](std::uint64_t done, std::uint64_t total) {
            CHECK(total == ckpt.total_size());
            seen.push_back(done);
        };
        const auto report = loaded.load(ckpt, options);
        CHECK(report.tensors == 3);
        CHECK(loaded.names() == std::vector<std::string>{"a", "b"});
        CHECK(loaded["a"].host_diff()[299] == -3.0f);
        CHECK(loaded["a"].host_data()[0] == 2.0f);
        CHECK(loaded["b"].host_diff()[0] == 0.0f);  // no diff in the file: left as it was
        REQUIRE(seen.size() == report.chunks);
        CHECK(std::is_sorted(seen.begin(), seen.end()));
        CHECK(seen.back() == ckpt.total_size());
    }
    CHECK(Device::faults().empty());
}

TEST_CASE("an arena of names in an order of its own loads each blob's own tensor and diff", "[checkpoint]") {
    const test::TempDir dir;
    std::vector<Blob<float>> blobs;
    blobs.reserve(6);
    checkpoint::Writer w;
    for (int k = 0; k < 6; ++k) {
        auto& b = blobs.emplace_back(Shape{2});
        b.fill(static_cast<float>(k));
        b.fill_diff(static_cast<float>(-k - 1));
        w.add("t" + std::to_string(k), b, k % 2 == 0);
    }
    const auto ckpt = checkpoint::Checkpoint::open(w.save(dir.path()));
    // backwards, forwards past a diff, and skipping: the loader's order is not the file's
    const std::vector<std::string> names{"t5", "t0", "t1", "t4", "t2"};
    checkpoint::CheckpointArena<float> loaded(ckpt, names);
    CHECK(loaded.load(ckpt).tensors == names.size() + 3);
    for (const auto& name : names) {
        CAPTURE(name);
        const int k = name[1] - '0';
        CHECK(loaded[name].host_data()[1] == static_cast<float>(k));
        CHECK(loaded[name].host_diff()[1] == (k % 2 == 0 ? static_cast<float>(-k - 1) : 0.0f));
    }
}

TEST_CASE("a load refused before anything is read leaves the arena as it was", "[checkpoint]") {
    const test::TempDir dir;
    test::NamedBlobs blobs;
    blobs.add("w", {4, 4}).add("v", {8});
    const auto ckpt = test::save_checkpoint(dir.path() / "one", blobs, 1 << 20);
    checkpoint::CheckpointArena<float> loaded(ckpt);
    (void)loaded.load(ckpt);
    const auto before = std::vector<float>(loaded["w"].host_data().begin(), loaded["w"].host_data().end());

    test::NamedBlobs reshaped;
    reshaped.add("w", {2, 8}).add("v", {8});
    const auto other = test::save_checkpoint(dir.path() / "two", reshaped, 1 << 20);
    CHECK_THAT(test::message_of<ShapeError>([&] { (void)loaded.load(other); }),
               Contains("holds \"w\" of shape 2 8 (16), the arena's blob has 4 4 (16)"));
    test::NamedBlobs missing;
    missing.add("w", {4, 4});
    const auto third = test::save_checkpoint(dir.path() / "three", missing, 1 << 20);
    CHECK_THAT(test::message_of<FormatError>([&] { (void)loaded.load(third); }),
               Contains("tensor \"v\": not in the checkpoint (the arena's blob 0 needs it)"));
    CHECK(std::vector<float>(loaded["w"].host_data().begin(), loaded["w"].host_data().end()) == before);

    const std::vector<std::string> unknown = {"w", "nope"};
    CHECK_THAT(test::message_of<FormatError>([&] { checkpoint::CheckpointArena<float> a(ckpt, unknown); }),
               Contains("tensor \"nope\": not in the checkpoint"));
    const std::vector<std::string> twice = {"v", "v"};
    CHECK_THAT(test::message_of<FormatError>([&] { checkpoint::CheckpointArena<float> a(ckpt, twice); }),
               Contains("tensor \"v\": named twice"));
    const std::vector<std::string> some = {"v"};
    const auto subset = checkpoint::load<float>(ckpt, {}, some);
    CHECK(subset.arena().size() == 1);
    CHECK_THAT(test::message_of<IndexError>([&] { (void)subset["w"]; }), Contains("no blob \"w\""));
    test::NamedBlobs large;
    large.add("m", {40, 40});
    (void)test::save_checkpoint(dir.path() / "four", large, 1 << 20);
    io::LoadOptions small;
    small.max_bytes = 1000;  // the index and the header fit, the 6400 bytes of the arena do not
    const auto limited = checkpoint::Checkpoint::open(dir.path() / "four", small);
    CHECK_THAT(test::message_of<FormatError>([&] { checkpoint::CheckpointArena<float> a(limited); }),
               Contains("the arena needs 6400 bytes, more than the limit of 1000"));
}

TEST_CASE("a shard cut short after it was opened is a FormatError during the load", "[checkpoint]") {
    const test::TempDir dir;
    const auto blobs = test::transformer_blobs(2, 32);
    const auto ckpt = test::save_checkpoint(dir.path(), blobs, 1 << 20);
    const auto& shard = ckpt.shards().back().path;
    fs::resize_file(shard, fs::file_size(shard) - 100);
    const Device::Scope scope{Device::Settings{}};
    checkpoint::CheckpointArena<float, Simulated> loaded(ckpt);
    checkpoint::LoadOptions options;
    options.chunk_bytes = 4096;
    CHECK_THAT(test::message_of<FormatError>([&] { (void)loaded.load(ckpt, options); }),
               Contains(shard.string() + ": tensor \"") && Contains("(truncated)"));
    (void)loaded["embed"].host_data();  // ordered after the copies issued before the error
    Device::synchronize();
    CHECK(Device::faults().empty());
}

namespace {

// "t0000", "t0001"...: names in the order of their numbers.
std::string small_name(std::size_t k) {
    const std::string digits = std::to_string(k);
    return "t" + std::string(4 - digits.size(), '0') + digits;
}

// `n` one-element tensors "t0000".. of S, the diffs of every third, saved in one shard: the tensors
// lie in the file in the arena's order, each diff between its blob and the next blob.
template <class S = float>
checkpoint::Checkpoint small_tensors(const fs::path& dir, std::size_t n) {
    checkpoint::Writer w;
    for (std::size_t k = 0; k < n; ++k) {
        Blob<S> b(Shape{1});
        b.fill(static_cast<S>(k));
        b.fill_diff(-static_cast<S>(k));
        w.add(small_name(k), b, k % 3 == 0);
    }
    return checkpoint::Checkpoint::open(w.save(dir, {}));
}

bool holds_small_tensors(checkpoint::CheckpointArena<float, Simulated>& arena) {
    for (std::size_t k = 0; k < arena.arena().size(); ++k) {
        const auto& b = arena.arena()[k];
        if (b.host_data()[0] != static_cast<float>(k) ||
            b.host_diff()[0] != (k % 3 == 0 ? -static_cast<float>(k) : 0.0f)) {
            return false;
        }
    }
    return true;
}

}  // namespace

TEST_CASE("a load reads small tensors that lie together in a shard in one system call per run, not one each",
          "[checkpoint]") {
    const test::TempDir dir;
    constexpr std::size_t n = 3000;
    const bool convert = GENERATE(false, true);  // F32 read as it is, or F64 converted
    const auto ckpt = convert ? small_tensors<double>(dir.path(), n) : small_tensors<float>(dir.path(), n);
    REQUIRE(ckpt.tensors().size() == n + n / 3);
    const auto before = test::io_calls("syscr:");
    if (!before) {
        std::cout << "skipped: the kernel does not count this process's reads (/proc/self/io)" << std::endl;
        return;
    }
    const Device::Scope scope{Device::Settings{}};
    const bool host = GENERATE(true, false);
    const unsigned threads = GENERATE(1u, 2u);
    CAPTURE(convert, host, threads);
    checkpoint::CheckpointArena<float, Simulated> loaded(ckpt);
    checkpoint::LoadOptions options;
    options.target = host ? checkpoint::Target::host : checkpoint::Target::device;
    options.threads = threads;
    options.convert = convert;
    const auto start = test::io_calls("syscr:");
    const auto report = loaded.load(ckpt, options);
    const std::uint64_t calls = *test::io_calls("syscr:") - *start;
    CAPTURE(calls, report.chunks);
    // A run ends at a chunk's end or after io::detail::InputFile::max_parts parts (a diff between two
    // blobs is one more): on the host, 2 chunks and 4000 tensors in 11 calls at most. A converted
    // run also ends when 512 values are staged: 4000 in 9 calls. One call a tensor made 4001, both
    // ways.
    CHECK(calls <= report.chunks + (convert ? (n + n / 3) / 256 : 2 * (n + n / 3) / 1024) + 2);
    CHECK(report.tensors == n + n / 3);
    // Read in place, a host chunk goes on over the diffs the file does not hold: one chunk for the
    // data and one for the diffs. A device chunk, copied whole, ends before each of them.
    CHECK((report.chunks == 2) == host);
    CHECK(holds_small_tensors(loaded));
}

TEST_CASE("a load refuses an arena whose blob left its slices, before it reads anything", "[checkpoint]") {
    const test::TempDir dir;
    const auto ckpt = small_tensors(dir.path(), 30);
    checkpoint::CheckpointArena<float> loaded(ckpt);
    const Blob<float> taken = std::move(loaded.arena()[3]);
    const auto start = test::io_calls("syscr:");
    CHECK_THROWS_WITH(loaded.load(ckpt),
                      Contains("CheckpointArena::load: blob 3 (1 element at seal) has no shape now"));
    if (start) {
        CHECK(*test::io_calls("syscr:") <= *start + 1);  // the count's own read of /proc/self/io at most
    }
    CHECK(taken.shape() == Shape{1});
}

TEST_CASE("a converting load of small tensors names the first bad value or the first byte cut, in the file's order",
          "[checkpoint][convert]") {
    const test::TempDir dir;
    constexpr std::size_t n = 300;
    auto ckpt = small_tensors<double>(dir.path(), n);
    const bool bad_first = GENERATE(true, false);
    const std::string bad = bad_first ? "t0120" : "t0200";
    const std::string cut = bad_first ? "t0200" : "t0120";
    CAPTURE(bad, cut);
    {  // a value F32 cannot hold at `bad`, then the shard cut at `cut`'s first byte
        const auto& t = ckpt.at(bad);
        const double huge = 1e300;
        std::fstream f(ckpt.shards().at(0).path, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(static_cast<std::streamoff>(t.offset));
        f.write(reinterpret_cast<const char*>(&huge), sizeof huge);
    }
    fs::resize_file(ckpt.shards().at(0).path, ckpt.at(cut).offset);
    checkpoint::CheckpointArena<float> loaded(ckpt);
    checkpoint::LoadOptions options;
    options.target = checkpoint::Target::host;
    options.threads = 1;  // the data's chunk first: the diffs' would name a diff
    options.convert = true;
    const std::string message = test::message_of<FormatError>([&] { (void)loaded.load(ckpt, options); });
    if (bad_first) {
        CHECK_THAT(message,
                   Contains("tensor \"t0120\" at byte ") && Contains("element 0: value 1e+300 (F64) overflows F32"));
    } else {
        CHECK_THAT(message, Contains("tensor \"t0120\" at byte ") &&
                                Contains("file ends at byte " + std::to_string(ckpt.at(cut).offset)) &&
                                Contains("(truncated)"));
    }
}

TEST_CASE("a shard cut short inside a run of small tensors names the tensor whose bytes it cut", "[checkpoint]") {
    const test::TempDir dir;
    const auto ckpt = small_tensors(dir.path(), 300);
    const auto& t = ckpt.at("t0120");
    const std::uint64_t cut = GENERATE(std::uint64_t{0}, std::uint64_t{2});  // at the tensor's first byte, or inside it
    CAPTURE(cut);
    fs::resize_file(ckpt.shards().at(0).path, t.offset + cut);
    // Laid out from every fourth name: the load reads the bytes between them too, and drops them.
    std::vector<std::string> names;
    for (std::size_t k = 0; k < 300; k += 4) {
        names.push_back(small_name(k));
    }
    const bool all = GENERATE(true, false);
    CAPTURE(all);
    checkpoint::CheckpointArena<float> loaded(ckpt, all ? std::span<const std::string>{} : names);
    checkpoint::LoadOptions options;
    options.target = checkpoint::Target::host;
    options.threads = 1;  // the data's chunk first: the diffs' would name "t0120.__diff__"
    CHECK_THAT(test::message_of<FormatError>([&] { (void)loaded.load(ckpt, options); }),
               Contains(ckpt.shards().at(0).path.string() + ": tensor \"t0120\": file ends at byte " +
                        std::to_string(t.offset + cut)) &&
                   Contains("(truncated)"));
}

TEST_CASE("on the simulated timeline, reading the next chunk overlaps the copy of the last", "[checkpoint][timeline]") {
    const test::TempDir dir;
    test::NamedBlobs blobs;
    blobs.add("w", {256, 1024});  // 1 MiB
    const auto ckpt = test::save_checkpoint(dir.path(), blobs, 1 << 30);
    const Device::Scope scope{Device::Settings{}};
    SimulatedTimeline::Settings rates;
    rates.host_bytes_per_second = 1e9;  // reading and copying take as long as each other
    rates.copy_bytes_per_second = 1e9;
    for (const unsigned blocks : {2u, 1u}) {
        CAPTURE(blocks);
        checkpoint::CheckpointArena<float, Simulated> loaded(ckpt);
        checkpoint::LoadOptions options;
        options.threads = 1;
        options.chunk_bytes = 64 << 10;  // 16 chunks
        options.staging_blocks = blocks;
        const SimulatedTimeline timeline(rates);
        const auto report = loaded.load(ckpt, options);
        Device::synchronize();
        const double reads = timeline.busy(true);
        const double copies = timeline.busy(false, Kind::copy);
        const double total = timeline.makespan();
        CHECK(report.chunks == 16);
        CHECK(reads == Approx(copies).epsilon(0.01));
        CHECK(total >= std::max(reads, copies));
        if (blocks == 2) {  // one chunk's copy is not hidden: 17/16 of either
            CHECK(total == Approx(reads + copies / 16).epsilon(0.01));
            CHECK(total - std::max(reads, copies) < (reads + copies) - total);
        } else {  // one block: the next read waits for the last copy, nothing overlaps
            CHECK(total == Approx(reads + copies).epsilon(0.01));
        }
    }
    CHECK(Device::faults().empty());
}

// --- Options at their limits ---------------------------------------------------------------------

namespace {

// Runs `body` in a child process that has `seconds` to finish: a hang is a failure, not a stuck suite.
template <class Body>
int in_child_within(unsigned seconds, Body&& body) {
    const int status = test::wait_status_of_child([&] {
        ::alarm(seconds);
        return body();
    });
    return status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST_CASE("a chunk size at its limit loads (host and device), as one chunk per buffer", "[checkpoint][options]") {
    const test::TempDir dir;
    Blob<float> a({300});
    Blob<float> b({5});
    a.fill(2.0f);
    b.fill(4.0f);
    b.fill_diff(-1.0f);  // the second blob has a diff: a chunk of the diff buffer after the data's
    checkpoint::Writer w;
    w.add("a", a);
    w.add("b", b, true);
    const auto ckpt = checkpoint::Checkpoint::open(w.save(dir.path()));
    for (const auto target : {checkpoint::Target::host, checkpoint::Target::device}) {
        CAPTURE(static_cast<int>(target));
        const int status = in_child_within(20, [&] {
            const Device::Scope scope{Device::Settings{}};
            checkpoint::CheckpointArena<float, Simulated> loaded(ckpt);
            checkpoint::LoadOptions options;
            options.target = target;
            options.chunk_bytes = std::numeric_limits<std::size_t>::max();
            options.staging_blocks = std::numeric_limits<unsigned>::max();
            const auto report = loaded.load(ckpt, options);
            const bool ok = report.chunks == 2 && loaded["a"].host_data()[299] == 2.0f &&
                            loaded["b"].host_data()[4] == 4.0f && loaded["b"].host_diff()[4] == -1.0f &&
                            Device::faults().empty();
            return ok ? 0 : 1;
        });
        CHECK(status == 0);
    }
}

TEST_CASE("reader threads are capped at parallel::max_threads(), as documented", "[checkpoint][options]") {
    const test::TempDir dir;
    const auto blobs = test::transformer_blobs(4, 16);
    const auto ckpt = test::save_checkpoint(dir.path(), blobs, 1 << 20);
    const Device::Scope scope{Device::Settings{}};
    for (const auto target : {checkpoint::Target::host, checkpoint::Target::device}) {
        checkpoint::CheckpointArena<float, Simulated> loaded(ckpt);
        checkpoint::LoadOptions options;
        options.target = target;
        options.chunk_bytes = 4096;
        options.threads = 256;
        const auto report = loaded.load(ckpt, options);
        CHECK(report.chunks > parallel::max_threads());
        CHECK(report.threads == parallel::max_threads());
        CHECK(test::arena_holds(loaded, blobs));
    }
    CHECK(Device::faults().empty());
}

TEST_CASE("a host load on several threads marks the head of every blob, and of every diff it loads, at the host",
          "[checkpoint][host]") {
    const test::TempDir dir;
    const auto ckpt = checkpoint::Checkpoint::open(test::save_with_diffs<float>(dir.path(), 3, 1 << 20));
    const Device::Scope scope{Device::Settings{}};
    checkpoint::CheckpointArena<float, Simulated> loaded(ckpt);
    for (std::size_t i = 0; i < loaded.arena().size(); ++i) {  // every side fresh on the device alone
        auto& b = loaded.arena()[i];
        b.fill(-7.0f);
        b.fill_diff(-7.0f);
        (void)b.mutable_device_data();
        (void)b.mutable_device_diff();
    }
    checkpoint::LoadOptions options;
    options.target = checkpoint::Target::host;
    options.threads = 2;
    options.chunk_bytes = 4096;
    const auto report = loaded.load(ckpt, options);
    CHECK(report.threads == std::min(2u, parallel::max_threads()));
    checkpoint::CheckpointArena<float> expected(ckpt);
    (void)expected.load(ckpt);
    for (std::size_t i = 0; i < loaded.arena().size(); ++i) {
        CAPTURE(i);
        const bool diff = ckpt.diff_of(ckpt.at(loaded.names()[i])) != nullptr;
        const auto& b = loaded.arena()[i];
        CHECK(b.data_head() == Head::at_host);
        CHECK(b.diff_head() == (diff ? Head::at_host : Head::at_device));
        // A head left at the device would read back -7.
        const auto data = b.host_data();
        const auto want = expected.arena()[i].host_data();
        CHECK(std::equal(data.begin(), data.end(), want.begin(), want.end()));
        if (diff) {
            const auto d = b.host_diff();
            const auto want_diff = expected.arena()[i].host_diff();
            CHECK(std::equal(d.begin(), d.end(), want_diff.begin(), want_diff.end()));
        }
    }
    CHECK(Device::faults().empty());
}

TEST_CASE("laying out and loading an arena of many tensors takes time linear in their count",
          "[checkpoint][complexity]") {
    const test::TempDir dir;
    std::vector<checkpoint::Checkpoint> checkpoints;
    for (const std::size_t n : {std::size_t{2000}, std::size_t{20000}}) {
        checkpoint::Writer w;
        std::vector<Blob<float>> blobs;
        blobs.reserve(n);
        for (std::size_t k = 0; k < n; ++k) {
            blobs.emplace_back(Shape{1}).fill(static_cast<float>(k));
            w.add("t" + std::to_string(k), blobs.back(), k % 3 == 0);
        }
        checkpoints.push_back(checkpoint::Checkpoint::open(w.save(dir.path() / std::to_string(n))));
    }
    const auto& small = checkpoints[0];
    const auto& large = checkpoints[1];
    const auto pick = [&](std::size_t n) -> const checkpoint::Checkpoint& { return n == 2000 ? small : large; };
    const double layout =
        test::tenfold_growth([&](std::size_t n) { checkpoint::CheckpointArena<float> a(pick(n)); }, 2000);
    CHECK(layout < test::linear_bound);
    const double load = test::tenfold_growth(
        [&](std::size_t n) {
            checkpoint::CheckpointArena<float> a(pick(n));
            (void)a.load(pick(n));
            REQUIRE(a["t" + std::to_string(n - 1)].host_data()[0] == static_cast<float>(n - 1));
        },
        2000);
    CHECK(load < test::linear_bound);
}

TEST_CASE("a load's staging without device slots hands out no device block, not an offset from null",
          "[checkpoint][staging]") {
    using Pool = checkpoint::detail::staging_pool_t<AlignedAllocator, Device>;
    const checkpoint::detail::Staging<Pool, Device> host_only(2, 4096, false, Device::default_stream());
    CHECK(host_only.device(0) == nullptr);
    CHECK(host_only.device(1) == nullptr);
    const checkpoint::detail::Staging<Pool, Device> with_slots(2, 4096, true, Device::default_stream());
    REQUIRE(with_slots.device(0) != nullptr);
    CHECK(with_slots.device(1) == with_slots.device(0) + 4096);
}
