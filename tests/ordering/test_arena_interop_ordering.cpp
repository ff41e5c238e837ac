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

#include <syncblob/arena.hpp>
#include <syncblob/interop/dlpack.hpp>
#include <syncblob/io/npy.hpp>
#include <syncblob/memory/simulated_async_device.hpp>

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
