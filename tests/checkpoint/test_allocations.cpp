// SPDX-License-Identifier: BSD-2-Clause
// What opening and loading allocate per tensor: nothing beyond what the result holds. A load of N
// tensors makes a few growing vectors (its plan) and its reader threads, never an allocation per
// tensor, such as the text of an error it does not throw, and never more memory for a small tensor
// than its elements need (a converting read staged each tensor in a zeroed block of 1 MiB); a header's
// check builds no message for a tensor that passes. The program replaces the global operator new to
// count the allocations of one call, so it is a program of its own.

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <new>
#include <optional>
#include <string>
#include <syncblob/checkpoint.hpp>
#include <syncblob/io/safetensors.hpp>
#include <vector>

#include "../io/tempfile.hpp"

namespace {

std::atomic<bool> counting{false};
std::atomic<std::size_t> allocations{0};
std::atomic<std::size_t> allocated_bytes{0};

// Counts `n` bytes while counting is on, then allocates them aligned to `align` (0: malloc's own).
void* allocate(std::size_t n, std::size_t align = 0) {
    if (counting.load(std::memory_order_relaxed)) {
        allocations.fetch_add(1, std::memory_order_relaxed);
        allocated_bytes.fetch_add(n, std::memory_order_relaxed);
    }
    const std::size_t bytes = std::max<std::size_t>(n, 1);
    if (void* p = align == 0 ? std::malloc(bytes) : std::aligned_alloc(align, (bytes + align - 1) / align * align)) {
        return p;
    }
    throw std::bad_alloc();
}

struct Made {
    std::size_t allocations = 0;
    std::size_t bytes = 0;
};

// The allocations `f` makes, and their bytes.
template <class F>
Made allocations_of(F&& f) {
    allocations = 0;
    allocated_bytes = 0;
    counting = true;
    try {
        f();
    } catch (...) {
        counting = false;
        throw;
    }
    counting = false;
    return {allocations.load(), allocated_bytes.load()};
}

// A name too long for any string's inline buffer, as real parameter names are.
std::string long_name(std::size_t k) {
    return "model.layers." + std::to_string(k) + ".self_attn.q_proj.weight";
}

}  // namespace

// Every form, so that whatever any form allocates, the matching delete frees.
void* operator new(std::size_t n) {
    return allocate(n);
}
void* operator new[](std::size_t n) {
    return allocate(n);
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
    try {
        return allocate(n);
    } catch (...) {
        return nullptr;
    }
}
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept {
    return operator new(n, t);
}
void* operator new(std::size_t n, std::align_val_t a) {
    return allocate(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a) {
    return allocate(n, static_cast<std::size_t>(a));
}
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
    try {
        return allocate(n, static_cast<std::size_t>(a));
    } catch (...) {
        return nullptr;
    }
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t& t) noexcept {
    return operator new(n, a, t);
}
void operator delete(void* p) noexcept {
    std::free(p);
}
void operator delete[](void* p) noexcept {
    std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
    std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
    std::free(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
    std::free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
    std::free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
    std::free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
    std::free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
    std::free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
    std::free(p);
}
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept {
    std::free(p);
}
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept {
    std::free(p);
}

using namespace syncblob;

namespace {

// A writer of `n` tensors of two T each (half of them with their diff; it holds their storage).
template <class T>
checkpoint::Writer tensors_writer(std::size_t n) {
    checkpoint::Writer w;
    for (std::size_t k = 0; k < n; ++k) {
        Blob<T> b(Shape{2});
        b.fill(static_cast<T>(k));
        b.fill_diff(T{-1});
        w.add(long_name(k), b, k % 2 == 0);
    }
    return w;
}

// A checkpoint of those tensors, in several shards.
template <class T>
checkpoint::Checkpoint save_tensors(const std::filesystem::path& dir, std::size_t n) {
    checkpoint::SaveOptions save;
    save.max_shard_bytes = 8000;
    return checkpoint::Checkpoint::open(tensors_writer<T>(n).save(dir, save));
}

}  // namespace

TEST_CASE("a checkpoint load makes no allocation per tensor, whatever the names' length", "[checkpoint][host]") {
    const test::TempDir dir;
    constexpr std::size_t n = 2000;
    const bool f64 = GENERATE(false, true);  // F32 read as it is, or F64 read through the conversion
    CAPTURE(f64);
    const auto ckpt = f64 ? save_tensors<double>(dir.path(), n) : save_tensors<float>(dir.path(), n);
    REQUIRE(ckpt.shards().size() > 1);
    checkpoint::CheckpointArena<float> arena(ckpt);
    checkpoint::LoadOptions options;
    options.threads = 1;
    options.chunk_bytes = 4096;  // many chunks, several tensors each
    options.convert = f64;
    checkpoint::LoadReport loaded;
    const Made made = allocations_of([&] { loaded = arena.load(ckpt, options); });
    REQUIRE(loaded.tensors == n + n / 2);
    CHECK(arena[long_name(n - 1)].host_data()[1] == static_cast<float>(n - 1));
    CHECK(arena[long_name(0)].host_diff()[0] == -1.0f);
    // The plan's vectors grow geometrically: a few dozen allocations for 3000 tensors. One
    // allocation per tensor would be 3000, and a block of 1 MiB per tensor 3 GB.
    CHECK(made.allocations < 200);
    // A piece of the plan (40 bytes) per tensor and a chunk per few: some 55 bytes a tensor. A list
    // of the blobs' matches and one of the plan's tensors beside the pieces made it 150, fresh
    // memory on every load, whose pages cost more than the reads at a million tensors.
    CHECK(made.bytes < loaded.tensors * 64);
}

TEST_CASE("a checkpoint arena loaded again allocates nothing in proportion to its tensors", "[checkpoint][host]") {
    const test::TempDir dir;
    constexpr std::size_t n = 2000;
    const bool f64 = GENERATE(false, true);
    CAPTURE(f64);
    const auto ckpt = f64 ? save_tensors<double>(dir.path(), n) : save_tensors<float>(dir.path(), n);
    checkpoint::CheckpointArena<float> arena(ckpt);
    checkpoint::LoadOptions options;
    options.threads = 1;
    options.convert = f64;
    const checkpoint::LoadReport first = arena.load(ckpt, options);
    arena[long_name(n - 1)].mutable_host_data()[1] = -5.0f;
    checkpoint::LoadReport again;
    const Made made = allocations_of([&] { again = arena.load(ckpt, options); });
    REQUIRE(again.tensors == first.tensors);
    CHECK(arena[long_name(n - 1)].host_data()[1] == static_cast<float>(n - 1));  // loaded again
    // The plan's pieces and the list of diffs reuse the first load's memory: what is left is a bit a
    // blob (which ones have a diff) and the chunks, a few for the whole arena: 400 bytes in 3
    // allocations. Without the reuse, 136,400 bytes, on fresh pages at every load.
    CHECK(made.bytes < again.tensors);
}

TEST_CASE("a safetensors load converts small tensors without a block of its own for each", "[io][safetensors]") {
    const test::TempDir dir;
    constexpr std::size_t n = 2000;
    std::map<std::string, Blob<double>> blobs;
    for (std::size_t k = 0; k < n; ++k) {
        blobs.emplace(long_name(k), Shape{2}).first->second.fill(static_cast<double>(k));
    }
    const auto file = dir.path() / "f64.safetensors";
    io::save_safetensors(file, blobs);
    io::LoadOptions options;
    options.convert = true;
    const auto source = io::SafetensorsFile::open(file, options);
    std::map<std::string, Blob<float>> loaded;
    const Made made = allocations_of([&] { loaded = source.load_all<float>(); });
    REQUIRE(loaded.size() == n);
    CHECK(loaded.at(long_name(n - 1)).host_data()[0] == static_cast<float>(n - 1));
    // What the blobs hold (each a Blob and two buffers of under 1 KB, their memory, a map node):
    // a few KB a tensor at most, where a block of 1 MiB per tensor made 2 GB.
    CHECK(made.bytes < n * 8192);
}

TEST_CASE("a blob loaded again makes no allocation for the counts of the buffer it replaces", "[io][safetensors]") {
    // Each load stages a new buffer and the blob lets the old one go, keeping what it counted (its
    // allocation) for data_stats(). A small block made for those counts between the loads' large
    // blocks slowed a checkpoint loaded tensor by tensor (docs/waits.md).
    const test::TempDir dir;
    std::map<std::string, Blob<float>> blobs;
    blobs.emplace("w", Shape{1000}).first->second.fill(2.0f);
    const auto file = dir.path() / "one.safetensors";
    io::save_safetensors(file, blobs);
    const auto source = io::SafetensorsFile::open(file);
    Blob<float> blob(Shape{1000});
    const Made first = allocations_of([&] { source.load("w", blob); });  // nothing counted is replaced
    for (int again = 1; again <= 3; ++again) {
        const Made made = allocations_of([&] { source.load("w", blob); });
        INFO("load " << again + 1);
        CHECK(made.allocations == first.allocations);
        CHECK(made.bytes == first.bytes);
    }
    CHECK(blob.host_data()[999] == 2.0f);
    CHECK(blob.data_stats().host_allocations == 4);  // every load's buffer counted, none lost
}

TEST_CASE("a safetensors header is checked without building a message for each tensor that passes",
          "[io][safetensors]") {
    const test::TempDir dir;
    constexpr std::size_t n = 2000;
    std::map<std::string, Blob<float>> blobs;
    for (std::size_t k = 0; k < n; ++k) {
        blobs.emplace(long_name(k), Shape{2}).first->second.fill(1.0f);
    }
    const auto file = dir.path() / "many.safetensors";
    io::save_safetensors(file, blobs);
    std::optional<io::SafetensorsFile> opened;
    const Made made = allocations_of([&] { opened.emplace(io::SafetensorsFile::open(file)); });
    REQUIRE(opened->tensors().size() == n);
    // Each tensor's name (too long to be held inline) and its extents are its own: two allocations a
    // tensor, 4017 in all here; the entries and the name index grow geometrically. A message built for
    // each tensor that passes made two more each (8017).
    CHECK(made.allocations < 2 * n + n / 2);
}

TEST_CASE("a checkpoint save makes no allocation per tensor, whatever the names' length", "[checkpoint][host]") {
    const test::TempDir dir;
    constexpr std::size_t n = 2000;
    const checkpoint::Writer w = tensors_writer<float>(n);
    checkpoint::SaveOptions options;
    options.max_shard_bytes = 4000;
    checkpoint::SaveReport saved;
    const Made first = allocations_of([&] { saved = w.save(dir.path(), options); });
    REQUIRE(saved.shards.size() > 4);
    // Over the last save: its index is read for the files it named, not kept entry by entry.
    const Made again = allocations_of([&] { saved = w.save(dir.path(), options); });
    const auto ckpt = checkpoint::Checkpoint::open(saved);
    REQUIRE(ckpt.tensors().size() == n + n / 2);
    CHECK(ckpt.shard_file(ckpt.at(long_name(n - 1)).shard).load<float>(long_name(n - 1)).host_data()[1] ==
          static_cast<float>(n - 1));
    // Each shard makes a few dozen (its name, its order, its header, its file's writer); the save a
    // few more for the index and the order of every name: 338 here, with 7 shards. Copying each
    // tensor's entry into a writer of its shard and its name into the index's list made four a
    // tensor (12,348). Over the last save, each old shard's header is read whole to prove it is a
    // safetensors file before it is replaced, its tensors' names and shapes included (two
    // allocations a tensor, 6,833 in all); reading the old index entry by entry made as many again,
    // and the copies as before (24,507).
    CAPTURE(saved.shards.size(), first.allocations, again.allocations);
    CHECK(first.allocations < 50 * saved.shards.size() + 100);
    CHECK(again.allocations < 3 * ckpt.tensors().size());
}

TEST_CASE("a checkpoint open allocates for each tensor only the names and extents it keeps", "[checkpoint][host]") {
    const test::TempDir dir;
    constexpr std::size_t n = 2000;
    const std::size_t tensors = save_tensors<float>(dir.path(), n).tensors().size();
    std::optional<checkpoint::Checkpoint> opened;
    const Made made = allocations_of([&] { opened.emplace(checkpoint::Checkpoint::open(dir.path())); });
    REQUIRE(opened->tensors().size() == tensors);
    CHECK(opened->at(long_name(n - 1)).shape == Shape{2});
    // Each tensor's name in the index, and its name and extents in its shard's header: three
    // allocations a tensor (the names too long to be held inline), and the tables growing
    // geometrically: 9,496 here. The index kept each entry's shard as a string of its own, and each
    // entry's check against it made the shard's file name anew: six a tensor (18,217).
    CAPTURE(made.allocations, tensors);
    CHECK(made.allocations < 4 * tensors);
}

TEST_CASE("an arena's one-element blob takes under 750 bytes of the heap beside its slices", "[arena][host]") {
    // Each blob of an arena is a Blob, two buffers made with their shared counts, a shape and the
    // arena's handles to them; at a million blobs every byte of that is memory faulted in anew
    // (docs/file-safety.md, "Memory per item"). Arenas of 2n and n blobs, so the arena's fixed cost
    // cancels; the slices are 256 bytes each, the alignment DESIGN.md fixes.
    const auto heap_of = [](std::size_t blobs) {
        ParameterArena<float> arena;
        return allocations_of([&] {
                   for (std::size_t i = 0; i < blobs; ++i) {
                       arena.add({1});
                   }
                   arena.seal();
               })
            .bytes;
    };
    constexpr std::size_t n = 1000;
    const std::size_t per_blob = (heap_of(2 * n) - heap_of(n)) / n;
    const std::size_t slices = 2 * 256;
    INFO("bytes per blob " << per_blob);
    REQUIRE(per_blob > slices);
    // 1,027 bytes when a host-only SyncedBuffer took 328 (a `std::mutex`, a device holding for a
    // backend without a device, the kernel counts twice), 835 with 232, 704 since the arena keeps
    // no second copy of the shapes. The bytes count every allocation made, so the arena's growing
    // vectors count about twice what they keep.
    CHECK(per_blob - slices < 750);
}
