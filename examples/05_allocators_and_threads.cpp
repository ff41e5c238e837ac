// SPDX-License-Identifier: BSD-2-Clause
// Tutorial 5: your own host allocator, memory you lend to a buffer, asynchronous copies, and many
// threads reading one blob.
//
// A Blob's second template argument bundles a host allocator with a device backend. Both are
// policies: plain types with static members, checked by the `HostAllocator` and `DeviceBackend`
// concepts, so a wrong one fails to compile with the concept's name. The device here is
// SimulatedDevice again; with a GPU the same code runs on syncblob::cuda::Allocator.

#include <atomic>
#include <cstddef>
#include <iostream>
#include <numeric>
#include <string_view>
#include <thread>
#include <vector>

#include <syncblob/syncblob.hpp>

namespace {

// [host-allocator]
// A host allocator: a name and two static functions. This one hands out 64-byte aligned memory
// and keeps count of the bytes it has out.
struct CountingAllocator {
    static constexpr std::string_view name = "CountingAllocator";
    static inline std::atomic<std::size_t> live_bytes{0};

    static syncblob::HostBlock allocate(std::size_t bytes) {
        const syncblob::HostBlock block = syncblob::AlignedAllocator::allocate(bytes);  // throws std::bad_alloc
        live_bytes += block.bytes;
        return block;
    }
    static void deallocate(syncblob::HostBlock block) noexcept {
        live_bytes -= block.bytes;
        syncblob::AlignedAllocator::deallocate(block);
    }
};

// The bundle a Blob takes: which host allocator, which device backend.
struct Counting {
    using host_allocator = CountingAllocator;
    using device_backend = syncblob::SimulatedDevice;
};
static_assert(syncblob::SyncedAllocator<Counting>);
// [host-allocator]

}  // namespace

int main() {
    namespace sb = syncblob;

    // ---- 1. A blob on your allocator ------------------------------------------------------------
    {
        // [custom-blob]
        sb::Blob<float, Counting> blob{16, 16};
        std::cout << "constructed: " << CountingAllocator::live_bytes << " host bytes\n";
        blob.fill(1.0f);  // the data's host block; the diff is not touched, so not allocated
        std::cout << "after fill:  " << CountingAllocator::live_bytes << " host bytes\n";
        blob.fill_diff(0.5f);
        std::cout << "after fill_diff: " << CountingAllocator::live_bytes << " host bytes\n";
        // [custom-blob]
    }
    std::cout << "destroyed:   " << CountingAllocator::live_bytes << " host bytes\n";

    // ---- 2. Lending memory to a buffer ------------------------------------------------------------
    // [borrow]
    using Buffer = sb::SyncedBuffer<sb::AlignedAllocator, sb::SimulatedDevice>;
    std::vector<float> samples(8);
    std::iota(samples.begin(), samples.end(), 0.0f);

    // Lent read-write: the buffer uses the vector's memory as its host side and never frees it.
    Buffer lent(samples.size() * sizeof(float));
    lent.set_host_data(samples.data(), samples.size() * sizeof(float));
    (void)lent.device_data();  // host to device, from the vector's memory
    std::cout << "\nlent: " << lent.stats() << '\n';

    // Lent read-only: the buffer never writes it. The first mutable access copies it into a block
    // of the buffer's own, so the vector keeps its values.
    const std::vector<float>& constants = samples;
    Buffer borrowed(constants.size() * sizeof(float));
    borrowed.set_host_data(constants.data(), constants.size() * sizeof(float));
    static_cast<float*>(borrowed.mutable_host_data())[0] = 100.0f;
    std::cout << "read-only borrow after a write: " << borrowed.stats() << "\n    samples[0] is still " << samples[0]
              << ", the buffer's copy holds " << static_cast<const float*>(borrowed.host_data())[0] << '\n';
    // [borrow]

    // ---- 3. Asynchronous copies ---------------------------------------------------------------------
    // [async]
    // push_to_device_async issues the host-to-device copy and returns; the buffer remembers its
    // event. A later host access waits for the copy, a later device access orders its stream after
    // it, so no access can see half-copied bytes. (SimulatedDevice carries the copy out late, as a
    // GPU may, so a missing wait would show up here as wrong values.)
    sb::Blob<float, sb::Simulated> batch{4};
    batch.fill(2.0f);
    batch.data_buffer()->push_to_device_async();
    std::cout << "\nafter push_to_device_async: head " << sb::head_name(batch.data_head()) << ", pending "
              << std::boolalpha << batch.data_buffer()->async_pending() << '\n';
    batch.mutable_host_data()[0] = 3.0f;  // waits for the copy before writing
    std::cout << "after a host write: pending " << batch.data_buffer()->async_pending() << ", " << batch.data_stats()
              << '\n';
    // [async]

    // ---- 4. Many threads, one blob --------------------------------------------------------------------
    // [threads]
    // Const access is thread-safe: the first thread to ask for the stale side copies it while the
    // others wait, and once both sides are fresh an access is one atomic load.
    sb::Blob<float, sb::Simulated> weights{1024};
    weights.fill(0.5f);
    const auto& shared = weights;
    std::atomic<int> device_reads{0};
    {
        std::vector<std::jthread> readers;
        for (int t = 0; t < 8; ++t) {
            readers.emplace_back([&shared, &device_reads] {
                if (shared.device_data() != nullptr) {
                    ++device_reads;
                }
            });
        }
    }  // jthreads join here
    std::cout << "\n" << device_reads << " threads read the device side: " << weights.data_stats() << '\n';
    // [threads]
    return 0;
}
