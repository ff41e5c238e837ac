// SPDX-License-Identifier: BSD-2-Clause
// The arena, DLPack and a load on the simulated device: the arena's blobs on its stream, its memory
// freed after that stream's work (in stream order where the backend frees that way, and with its
// own device current), and an exported device blob finished and named by its own device, under
// every seed of the fixed set.

#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstddef>
#include <filesystem>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <syncblob/arena.hpp>
#include <syncblob/core/sync_audit.hpp>
#include <syncblob/interop/dlpack.hpp>
#include <syncblob/io/npy.hpp>
#include <syncblob/sim/async_device.hpp>

#include "ordering_support.hpp"

using namespace syncblob_test;
using syncblob::SimulatedAsyncDevice;

namespace {

using PlainArena = syncblob::ParameterArena<float, syncblob::Simulated>;
using OrderedArena = syncblob::ParameterArena<float, syncblob::SimulatedAsync>;

}  // namespace

TEMPLATE_TEST_CASE("An arena's blobs are on its stream, and its memory is freed after that stream's work",
                   "[ordering][arena]", PlainArena, OrderedArena) {
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed)};
        const auto s = SimulatedDevice::create_stream();
        {
            TestType arena;
            arena.set_stream(s);
            auto& w = arena.add({8});
            auto& b = arena.add({3});
            arena.seal();
            CHECK(w.data_buffer()->stream() == s);
            CHECK(b.diff_buffer()->stream() == s);
            float* d = w.mutable_device_diff();
            set_kernel(s, d, 8, 0.5f);  // a kernel on the arena's stream writes a slice
            CHECK(w.host_diff()[7] == 0.5f);
            read_kernel(s, w.device_data(), 8);  // still queued when the arena goes
        }
        finish();
    }
}

TEST_CASE("A stream-ordered arena frees its memory without the host waiting", "[ordering][arena]") {
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed)};
        const auto s = SimulatedDevice::create_stream();
        {
            OrderedArena arena;
            arena.set_stream(s);
            auto& w = arena.add({8});
            arena.seal();
            read_kernel(s, w.device_data(), 8);
        }
        // The kernel and the two frees (data and diff) are still queued: nothing waited for them.
        CHECK(SimulatedDevice::pending_copies() >= 3);
        finish();
    }
}

TEMPLATE_TEST_CASE("An arena of device 1 whose memory outlives it is freed after device 1's work",
                   "[ordering][arena][devices]", PlainArena, OrderedArena) {
    namespace dlpack = syncblob::dlpack;
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed, 2)};
        SimulatedDevice::set_device(1);
        void* other = SimulatedDevice::allocate(8 * sizeof(float));
        dlpack::DLManagedTensorVersioned* t = nullptr;
        {
            TestType arena;  // the default stream: device 1's while device 1 is current
            auto& w = arena.add({8});
            arena.seal();
            t = dlpack::to_dlpack(w, dlpack::Side::device);  // holds the arena's memory
            read_kernel(Stream{}, w.device_data(), 8);
            // The blob's buffer moves to other memory: the exported tensor alone holds the arena's.
            w.data_buffer()->set_device_data(other, 8 * sizeof(float));
            SimulatedDevice::set_device(0);
        }
        t->deleter(t);  // the last holder lets go while device 0 is current: the memory is freed now
        finish();
        SimulatedDevice::deallocate(other, 8 * sizeof(float));
    }
}

TEST_CASE("DLPack export of a device blob finishes the work queued on its stream", "[ordering][dlpack]") {
    namespace dlpack = syncblob::dlpack;
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed)};
        const auto s = SimulatedDevice::create_stream();
        {
            syncblob::Blob<float, syncblob::Simulated> blob{8};
            blob.set_stream(s);
            set_kernel(s, blob.mutable_device_data(), 8, 9.0f);  // still queued
            auto* t = dlpack::to_dlpack(blob, dlpack::Side::device);
            const auto* seen = static_cast<const float*>(t->dl_tensor.data);
            CHECK(seen[0] == 9.0f);  // the consumer may read it from any stream at once
            CHECK(seen[7] == 9.0f);
            t->deleter(t);
        }
        finish();
    }
}

TEST_CASE("DLPack export names the device of the blob's memory", "[ordering][dlpack][devices]") {
    namespace dlpack = syncblob::dlpack;
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed, 2)};
        SimulatedDevice::set_device(1);
        {
            syncblob::Blob<float, syncblob::Simulated> blob{4};
            blob.fill(1.0f);
            auto* t = dlpack::to_dlpack(blob, dlpack::Side::device);
            CHECK(t->dl_tensor.device.device_id == 1);
            t->deleter(t);
            SimulatedDevice::set_device(0);
        }
        finish();
    }
}

TEMPLATE_TEST_CASE("set_stream after add and after seal moves the blobs and the arena's memory to the stream",
                   "[ordering][arena]", PlainArena, OrderedArena) {
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed)};
        const auto first = SimulatedDevice::create_stream();
        const auto second = SimulatedDevice::create_stream();
        {
            TestType arena;
            auto& w = arena.add({8});
            arena.set_stream(first);  // after add: the blob moves too
            CHECK(w.data_buffer()->stream() == first);
            arena.seal();
            arena.set_stream(second);  // after seal: the blobs and the memory's release move
            CHECK(w.diff_buffer()->stream() == second);
            read_kernel(second, w.device_data(), 8);  // still queued on `second` when the arena goes
        }
        finish();
    }
}

TEST_CASE("Device memory lent through DLPack is freed after the work the blob queued on it",
          "[ordering][dlpack][lifetime]") {
    namespace dlpack = syncblob::dlpack;
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed)};
        const auto s = SimulatedDevice::create_stream();
        dlpack::DLManagedTensorVersioned* t = nullptr;
        {
            syncblob::Blob<float, syncblob::Simulated> blob{8};
            blob.set_stream(s);
            blob.fill(1.0f);
            t = dlpack::to_dlpack(blob, dlpack::Side::device);
            read_kernel(s, blob.device_data(), 8);  // queued after the export
        }               // the blob lets go of the block: its holder (the tensor) frees it later
        t->deleter(t);  // frees the block at once: the kernel must have run
        finish();
    }
}

TEST_CASE("DLPack import refuses device memory of another device than the tensor names",
          "[ordering][dlpack][devices]") {
    namespace dlpack = syncblob::dlpack;
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed, 2)};
        SimulatedDevice::set_device(1);
        {
            syncblob::Blob<float, syncblob::Simulated> blob{4};
            blob.fill(1.0f);
            auto* t = dlpack::to_dlpack(blob, dlpack::Side::device);
            t->dl_tensor.device.device_id = 0;  // wrong: the memory is device 1's
            CHECK_THROWS_WITH((dlpack::from_dlpack<float, syncblob::Simulated>(t)),
                              Catch::Contains("names device 0") && Catch::Contains("on device 1"));
            // from_dlpack owns the tensor once called: it ran the deleter when it refused it.
            SimulatedDevice::set_device(0);
        }
        finish();
    }
}

TEST_CASE("A load into a blob on a stream leaves its buffers on that stream", "[ordering][io]") {
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed)};
        const auto s = SimulatedDevice::create_stream();
        {
            syncblob::Blob<float, syncblob::Simulated> source{6};
            source.fill(2.0f);
            const auto file =
                std::filesystem::temp_directory_path() / ("syncblob-ordering-" + std::to_string(::getpid()) + ".npy");
            syncblob::io::save_npy(file, source);
            syncblob::Blob<float, syncblob::Simulated> blob;
            blob.set_stream(s);
            syncblob::io::load_npy(file, blob);
            std::filesystem::remove(file);
            CHECK(blob.data_buffer()->stream() == s);
            CHECK(blob.diff_buffer()->stream() == s);
            set_kernel(s, blob.mutable_device_data(), 6, 4.0f);
            CHECK(blob.host_data()[5] == 4.0f);
        }
        finish();
    }
}

// ---- DLPack export to a stream the consumer names ---------------------------------------------------

namespace {

// The consumer's kernel: copies the `n` exported floats at `p` into host memory `out`, on `c`.
void consume(Stream c, const float* p, float* out, std::size_t n) {
    copy_kernel(c, out, p, n);
}

// True when every one of `values` is `expected`.
bool all_equal(const std::vector<float>& values, float expected) {
    for (const float v : values) {
        if (v != expected) {
            return false;
        }
    }
    return true;
}

using PlainBlob = syncblob::Blob<float, syncblob::Simulated>;
using OrderedBlob = syncblob::Blob<float, syncblob::SimulatedAsync>;

}  // namespace

TEMPLATE_TEST_CASE("DLPack export to a consumer stream makes that stream wait for the blob's, not the host",
                   "[ordering][dlpack][consumer_stream]", PlainBlob, OrderedBlob) {
    namespace dlpack = syncblob::dlpack;
    namespace audit = syncblob::audit;
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed)};
        const auto s = SimulatedDevice::create_stream();
        const auto c = SimulatedDevice::create_stream();
        std::vector<float> out(8, 0.0f);
        {
            TestType blob{8};
            blob.set_stream(s);
            float* p = blob.mutable_device_data();
            set_kernel(s, p, 8, 9.0f);  // the blob's pending write
            {
                const audit::ModeScope error(audit::Mode::error);
                audit::reset();
                auto* t = dlpack::to_dlpack(blob, dlpack::Side::device, dlpack::Part::data, c);
                CHECK(audit::counts().empty());                      // no wait of any kind
                CHECK(SimulatedDevice::queued_work_touches(p, 32));  // the write has not run
                consume(c, static_cast<const float*>(t->dl_tensor.data), out.data(), 8);
                t->deleter(t);  // the blob still holds the memory
                CHECK(audit::counts().empty());
            }
        }
        SimulatedDevice::synchronize();
        CHECK(all_equal(out, 9.0f));  // the consumer's read ran after the blob's write
        finish();
    }
}

TEMPLATE_TEST_CASE("DLPack export to a consumer stream of another device than the memory's is refused, naming both",
                   "[ordering][dlpack][consumer_stream][device]", PlainBlob, OrderedBlob) {
    namespace dlpack = syncblob::dlpack;
    const SimulatedDevice::Scope scope{with_seed(1, 2)};
    SimulatedDevice::set_device(1);
    const auto other = SimulatedDevice::create_stream();  // a stream of device 1
    SimulatedDevice::set_device(0);
    TestType blob{4};
    blob.fill(1.0f);
    const auto before = blob.data_stats();
    CHECK_THROWS_AS(dlpack::to_dlpack(blob, dlpack::Side::device, dlpack::Part::data, other), syncblob::DeviceError);
    CHECK_THROWS_WITH(dlpack::to_dlpack_legacy(std::as_const(blob), dlpack::Side::device, dlpack::Part::data, other),
                      Catch::Matchers::Contains("dlpack::to_dlpack_legacy") &&
                          Catch::Matchers::Contains("consumer stream") && Catch::Matchers::Contains("device 1") &&
                          Catch::Matchers::Contains("device 0"));
    CHECK(blob.data_stats().host_to_device == before.host_to_device);  // refused before anything was touched
    CHECK(blob.data_head() == syncblob::Head::at_host);
    // Once its data is on device 0, the data is refused a stream of device 1 whichever device is current.
    (void)blob.device_data();
    SimulatedDevice::set_device(1);
    CHECK_THROWS_AS(dlpack::to_dlpack(blob, dlpack::Side::device, dlpack::Part::data, other), syncblob::DeviceError);
    // A stream of the memory's own device is taken.
    SimulatedDevice::set_device(0);
    const auto own = SimulatedDevice::create_stream();
    auto* t = dlpack::to_dlpack(blob, dlpack::Side::device, dlpack::Part::data, own);
    CHECK(t->dl_tensor.device.device_id == 0);
    t->deleter(t);
    SimulatedDevice::synchronize();
    CHECK(SimulatedDevice::faults().empty());
}

TEST_CASE("A block lent to a consumer stream and let go of by the consumer last is freed on that stream",
          "[ordering][dlpack][consumer_stream][lifetime]") {
    namespace dlpack = syncblob::dlpack;
    namespace audit = syncblob::audit;
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed)};
        const auto s = SimulatedDevice::create_stream();
        const auto c = SimulatedDevice::create_stream();
        std::vector<float> out(8, 0.0f);
        const void* block = nullptr;
        {
            const audit::ModeScope counting(audit::Mode::count);
            dlpack::DLManagedTensorVersioned* t = nullptr;
            {
                OrderedBlob blob{8};
                blob.set_stream(s);
                set_kernel(s, blob.mutable_device_data(), 8, 7.0f);
                audit::reset();
                t = dlpack::to_dlpack(blob, dlpack::Side::device, dlpack::Part::data, c);
                block = t->dl_tensor.data;
                read_kernel(s, static_cast<const float*>(block), 8);  // the blob's own later work, on s
            }  // the blob lets go first: the host does not wait for s
            consume(c, static_cast<const float*>(block), out.data(), 8);
            t->deleter(t);  // the last user: the block is freed on c, after c's and s's work
            CHECK(audit::counts().empty());
        }
        CHECK(all_equal(out, 0.0f));  // nothing has run yet: nobody waited
        // Freed in order on c, the block goes at once to the next allocation there; what that
        // writes runs after the consumer's read, which still sees the blob's values.
        void* again = SimulatedAsyncDevice::allocate_async(32, c);
        CHECK(again == block);
        set_kernel(c, static_cast<float*>(again), 8, -1.0f);
        SimulatedDevice::synchronize();
        CHECK(all_equal(out, 7.0f));
        SimulatedAsyncDevice::deallocate_async(again, 32, c);
        finish();
    }
}

TEMPLATE_TEST_CASE("A block lent to a consumer stream is freed by the blob after the consumer's work",
                   "[ordering][dlpack][consumer_stream][lifetime]", PlainBlob, OrderedBlob) {
    namespace dlpack = syncblob::dlpack;
    namespace audit = syncblob::audit;
    constexpr bool ordered = std::is_same_v<TestType, OrderedBlob>;
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed)};
        const auto s = SimulatedDevice::create_stream();
        const auto c = SimulatedDevice::create_stream();
        std::vector<float> out(8, 0.0f);
        {
            const audit::ModeScope counting(audit::Mode::count);
            {
                TestType blob{8};
                blob.set_stream(s);
                set_kernel(s, blob.mutable_device_data(), 8, 5.0f);
                audit::reset();
                auto* t = dlpack::to_dlpack(blob, dlpack::Side::device, dlpack::Part::data, c);
                consume(c, static_cast<const float*>(t->dl_tensor.data), out.data(), 8);
                t->deleter(t);  // the consumer lets go first, its read still queued on c
            }                   // the blob lets go last and frees the block after c's read
            if (ordered) {
                CHECK(audit::counts().empty());  // in stream order on s, which waits for c
            } else {
                // A synchronous free: the host waits for c and s first, and the free is counted.
                CHECK(audit::total(audit::Wait::blocking_free) == 1);
                CHECK(audit::total(audit::Wait::device_synchronize) == 0);
            }
        }
        SimulatedDevice::synchronize();
        CHECK(all_equal(out, 5.0f));
        finish();
    }
}

TEMPLATE_TEST_CASE("A plain device backend frees a block lent to a consumer stream after that stream's work",
                   "[ordering][dlpack][consumer_stream][lifetime]", PlainBlob) {
    namespace dlpack = syncblob::dlpack;
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed)};
        const auto s = SimulatedDevice::create_stream();
        const auto c = SimulatedDevice::create_stream();
        std::vector<float> out(8, 0.0f);
        dlpack::DLManagedTensorVersioned* t = nullptr;
        {
            TestType blob{8};
            blob.set_stream(s);
            set_kernel(s, blob.mutable_device_data(), 8, 3.0f);
            t = dlpack::to_dlpack(blob, dlpack::Side::device, dlpack::Part::data, c);
            read_kernel(s, static_cast<const float*>(t->dl_tensor.data), 8);
        }
        consume(c, static_cast<const float*>(t->dl_tensor.data), out.data(), 8);
        t->deleter(t);  // frees at once: the host waited for c (and s) first
        CHECK(all_equal(out, 3.0f));
        finish();
    }
}

TEMPLATE_TEST_CASE("DLPack export to a consumer stream of device 1 works with device 0 current",
                   "[ordering][dlpack][consumer_stream][devices]", PlainBlob, OrderedBlob) {
    namespace dlpack = syncblob::dlpack;
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed, 2)};
        SimulatedDevice::set_device(1);
        const auto s = SimulatedDevice::create_stream();
        const auto c = SimulatedDevice::create_stream();
        std::vector<float> out(8, 0.0f);
        dlpack::DLManagedTensorVersioned* t = nullptr;
        {
            TestType blob{8};
            blob.set_stream(s);
            set_kernel(s, blob.mutable_device_data(), 8, 4.0f);
            SimulatedDevice::set_device(0);
            t = dlpack::to_dlpack(blob, dlpack::Side::device, dlpack::Part::data, c);
            CHECK(t->dl_tensor.device.device_id == 1);
            SimulatedDevice::set_device(1);
            consume(c, static_cast<const float*>(t->dl_tensor.data), out.data(), 8);
            SimulatedDevice::set_device(0);
        }               // the blob lets go with device 0 current
        t->deleter(t);  // and so does the consumer, last
        SimulatedDevice::synchronize();
        CHECK(all_equal(out, 4.0f));
        finish();
    }
}

TEST_CASE("The last DLPack deleter waits for the blob's pending copy, even in the audit's error mode",
          "[ordering][dlpack][consumer_stream][lifetime]") {
    namespace dlpack = syncblob::dlpack;
    namespace audit = syncblob::audit;
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed)};
        const auto s = SimulatedDevice::create_stream();
        const auto c = SimulatedDevice::create_stream();
        dlpack::DLManagedTensorVersioned* t = nullptr;
        {
            PlainBlob blob{8};
            blob.set_stream(s);
            set_kernel(s, blob.mutable_device_data(), 8, 2.0f);
            t = dlpack::to_dlpack(blob, dlpack::Side::device, dlpack::Part::data, c);
            blob.data_buffer()->pull_to_host_async();  // a D->H copy into the host block, pending
        }                                              // the tensor alone holds the buffer now
        {
            const audit::ModeScope error(audit::Mode::error);
            t->deleter(t);  // destroys the buffer: its host block is freed after the copy, not before
        }
        finish();
    }
}
