// SPDX-License-Identifier: BSD-2-Clause
// A checkpoint streamed into an arena's device side, under every seed of the fixed set: a blob read
// before its bytes arrived (on the host or by a kernel) waits for them; the copies wait for work
// already queued on the blobs; a staging block is refilled only after the copy that read it ran,
// and goes back to its pool only after that; the device staging of a conversion is freed after
// its kernels; reader threads issue their work on the arena's device.

#include <catch2/catch.hpp>

#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <syncblob/checkpoint.hpp>
#include <syncblob/core/thread_pool.hpp>
#include <syncblob/sim/async_device.hpp>

#include "../checkpoint/checkpoint_support.hpp"
#include "ordering_support.hpp"

using namespace syncblob_test;
namespace ckpt = syncblob::checkpoint;

namespace {

using PlainArena = ckpt::CheckpointArena<float, syncblob::Simulated>;
using OrderedArena = ckpt::CheckpointArena<float, syncblob::SimulatedAsync>;

// Many chunks of a few small tensors each.
ckpt::LoadOptions small_chunks(unsigned threads = 1, unsigned blocks = 2) {
    ckpt::LoadOptions o;
    o.chunk_bytes = 4096;
    o.threads = threads;
    o.staging_blocks = blocks;
    return o;
}

// Runs each part of a parallel call on a thread of its own (new threads: device 0 is current).
class ThreadPerPart {
public:
    ThreadPerPart() {
        syncblob::parallel::set_executor([](unsigned parts, const std::function<void(unsigned)>& part) {
            std::vector<std::thread> threads;
            std::exception_ptr error;
            std::mutex m;
            for (unsigned p = 0; p < parts; ++p) {
                threads.emplace_back([&, p] {
                    try {
                        part(p);
                    } catch (...) {
                        const std::lock_guard lock(m);
                        error = std::current_exception();
                    }
                });
            }
            for (auto& t : threads) {
                t.join();
            }
            if (error) {
                std::rethrow_exception(error);
            }
        });
    }
    ~ThreadPerPart() { syncblob::parallel::set_executor({}); }
    ThreadPerPart(const ThreadPerPart&) = delete;
    ThreadPerPart& operator=(const ThreadPerPart&) = delete;
};

}  // namespace

TEMPLATE_TEST_CASE("A blob read before its bytes arrived waits for them, on the host and on the device",
                   "[ordering][checkpoint]", PlainArena, OrderedArena) {
    const test::TempDir dir;
    const auto blobs = test::transformer_blobs(3, 16);
    const auto c = test::save_checkpoint(dir.path(), blobs, 4000);
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed)};
        const auto copies = SimulatedDevice::create_stream();
        {
            TestType loaded(c);
            (void)loaded.load(c, small_chunks(), copies);  // nothing has run yet
            auto& embed = loaded["embed"];
            const auto n = static_cast<std::size_t>(embed.count());
            auto* out = static_cast<float*>(SimulatedDevice::allocate(n * sizeof(float)));
            copy_kernel(embed.stream(), out, embed.device_data(), n);  // a kernel reads it first
            CHECK(test::arena_holds(loaded, blobs));                   // then the host
            SimulatedDevice::synchronize();
            CHECK(out[n - 1] == test::checkpoint_value(0, n - 1));
            SimulatedDevice::deallocate(out, n * sizeof(float));
        }
        finish();
    }
}

TEMPLATE_TEST_CASE("A load's copies wait for the work already queued on the blobs", "[ordering][checkpoint]",
                   PlainArena, OrderedArena) {
    const test::TempDir dir;
    const auto blobs = test::transformer_blobs(2, 16);
    const auto c = test::save_checkpoint(dir.path(), blobs, 1 << 20);
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed)};
        const auto copies = SimulatedDevice::create_stream();
        {
            TestType loaded(c);
            auto& embed = loaded["embed"];
            set_kernel(embed.stream(), embed.mutable_device_data(), static_cast<std::size_t>(embed.count()), 7.0f);
            (void)loaded.load(c, small_chunks(), copies);
            SimulatedDevice::synchronize();
            CHECK(test::arena_holds(loaded, blobs));
        }
        finish();
    }
}

TEST_CASE("A staging block is refilled only after the copy that read it ran", "[ordering][checkpoint]") {
    const test::TempDir dir;
    const auto blobs = test::transformer_blobs(3, 16);
    const auto c = test::save_checkpoint(dir.path(), blobs, 1 << 20);
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed)};
        const auto copies = SimulatedDevice::create_stream();
        {
            const auto own = SimulatedDevice::create_stream();
            PlainArena loaded(c, {}, own);
            CHECK(loaded["embed"].data_buffer()->stream() == own);
            const auto report = loaded.load(c, small_chunks(1, 1), copies);  // one block for every chunk
            CHECK(report.chunks > 2);
            SimulatedDevice::synchronize();
            CHECK(test::arena_holds(loaded, blobs));
        }
        finish();
    }
}

TEST_CASE("Staging blocks go back to the pool only after the copies that read them", "[ordering][checkpoint]") {
    const test::TempDir dir;
    const auto first = test::transformer_blobs(2, 16);
    auto second = test::transformer_blobs(2, 16);
    for (auto& [name, blob] : second.blobs) {
        blob.fill(-5.0f);
    }
    const auto one = test::save_checkpoint(dir.path() / "one", first, 1 << 20);
    const auto two = test::save_checkpoint(dir.path() / "two", second, 1 << 20);
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed)};
        const auto copies = SimulatedDevice::create_stream();
        {
            PlainArena a(one);
            PlainArena b(two);
            (void)a.load(one, small_chunks(), copies);  // its copies still queued
            (void)b.load(two, small_chunks(), copies);  // staging from the same pool
            SimulatedDevice::synchronize();
            CHECK(test::arena_holds(a, first));
            CHECK(test::arena_holds(b, second));
        }
        finish();
    }
}

TEMPLATE_TEST_CASE("A converting load frees its device staging after its kernels", "[ordering][checkpoint]", PlainArena,
                   OrderedArena) {
    const test::TempDir dir;
    const auto blobs = test::transformer_blobs(2, 16);
    const auto c = test::save_checkpoint<syncblob::bfloat16>(dir.path(), blobs, 1 << 20);
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed)};
        const auto copies = SimulatedDevice::create_stream();
        {
            TestType loaded(c);
            auto options = small_chunks();
            options.convert = true;
            const auto report = loaded.load(c, options, copies);
            CHECK(report.device_conversions > 0);
            CHECK(test::arena_holds<syncblob::bfloat16>(loaded, blobs));
        }
        finish();
    }
}

TEST_CASE("Reader threads issue their copies on the arena's device", "[ordering][checkpoint]") {
    const test::TempDir dir;
    const auto blobs = test::transformer_blobs(3, 16);
    const auto c = test::save_checkpoint(dir.path(), blobs, 1 << 20);
    const ThreadPerPart threads;
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed, 2)};
        SimulatedDevice::set_device(1);
        const auto copies = SimulatedDevice::create_stream();
        {
            PlainArena loaded(c);  // on device 1
            SimulatedDevice::set_device(0);
            const auto report = loaded.load(c, small_chunks(2), copies);
            CHECK(report.threads == 2);
            SimulatedDevice::set_device(1);
            CHECK(test::arena_holds(loaded, blobs));
        }
        SimulatedDevice::set_device(0);
        finish();
    }
}

TEMPLATE_TEST_CASE("A load that fails part-way on a copy stream of its own still orders the blobs after its copies",
                   "[ordering][checkpoint]", PlainArena, OrderedArena) {
    const test::TempDir dir;
    const auto blobs = test::transformer_blobs(3, 16);
    const auto c = test::save_checkpoint(dir.path(), blobs, 1 << 20);
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed)};
        const auto copies = SimulatedDevice::create_stream();
        {
            TestType loaded(c);
            auto options = small_chunks(1, 8);  // a block per chunk: no reader waits for an earlier copy
            int chunks = 0;
            options.progress = [&chunks](std::uint64_t, std::uint64_t) {
                if (++chunks == 3) {
                    throw std::runtime_error("stopped by the caller");
                }
            };
            CHECK_THROWS_WITH(loaded.load(c, options, copies), "stopped by the caller");
            // The first chunks' copies were issued on `copies` and have not run; a read of their
            // blob waits for them, on the host and on the device.
            auto& embed = loaded["embed"];
            const auto n = static_cast<std::size_t>(embed.count());
            auto* out = static_cast<float*>(SimulatedDevice::allocate(n * sizeof(float)));
            copy_kernel(embed.stream(), out, embed.device_data(), n);
            CHECK(embed.host_data()[0] == test::checkpoint_value(0, 0));
            SimulatedDevice::synchronize();
            CHECK(out[0] == test::checkpoint_value(0, 0));
            SimulatedDevice::deallocate(out, n * sizeof(float));
        }
        finish();
    }
}

TEMPLATE_TEST_CASE("A device load leaves alone the diff of a blob between two blobs whose diffs it loads",
                   "[ordering][checkpoint]", PlainArena, OrderedArena) {
    // Blobs a and c have diffs in the file, b has none: a chunk of a's and c's diffs together
    // would copy its image over b's diff, which the file does not hold (a host load leaves it).
    const test::TempDir dir;
    syncblob::Blob<float> a({300});
    syncblob::Blob<float> b({5});
    syncblob::Blob<float> c({7});
    a.fill_diff(-3.0f);
    c.fill_diff(-5.0f);
    ckpt::Writer w;
    w.add("a", a, true);
    w.add("b", b);
    w.add("c", c, true);
    const auto file = ckpt::Checkpoint::open(w.save(dir.path()));
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed)};
        {
            TestType loaded(file);
            auto& kept = loaded["b"];
            set_kernel(kept.stream(), kept.mutable_device_diff(), 5, 7.0f);  // b's diff at_device
            const auto report = loaded.load(file, small_chunks());
            CHECK(report.chunks == 3);  // the data, then a's diff and c's diff, each a chunk of its own
            CHECK(loaded["a"].host_diff()[299] == -3.0f);
            CHECK(loaded["c"].host_diff()[6] == -5.0f);
            CHECK(kept.host_diff()[0] == 7.0f);
            CHECK(kept.host_diff()[4] == 7.0f);
        }
        finish();
    }
}
