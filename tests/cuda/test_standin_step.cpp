// SPDX-License-Identifier: BSD-2-Clause
// The CUDA backend's half of the sync audit, tested without a GPU: this program is linked with the
// stand-in of tests/cuda/standin (each CUDA runtime, cuBLAS and NCCL call runs at once on host memory
// and is counted by name) instead of the real libraries. A steady training step on cuda::AsyncAllocator
// blobs, its diffs all-reduced through NCCL by a bucketed all-reduce agreed once, makes, after warm-up,
// no stream, device or event synchronisation but the step's own wait, no device-to-host copy, no
// cudaMalloc and no cudaFree; the one host result is the loss read through cuBLAS.

#include <nccl.h>
#include <catch2/catch.hpp>

#include <cstddef>
#include <map>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <syncblob/arena.hpp>
#include <syncblob/comm/nccl.hpp>
#include <syncblob/core/sync_audit.hpp>
#include <syncblob/cuda/async_pool.hpp>
#include <syncblob/cuda/math.hpp>
#include <syncblob/cuda/runtime.hpp>
#include <syncblob/interop/dlpack.hpp>
#include <syncblob/math.hpp>

#include "standin/standin.hpp"

namespace audit = syncblob::audit;
namespace cuda = syncblob::cuda;
namespace nccl = syncblob::nccl;
using A = cuda::AsyncAllocator;
using Arena = syncblob::ParameterArena<float, A>;
using standin = std::map<std::string, std::uint64_t>;

namespace {

std::uint64_t calls(const char* name) {
    return syncblob_standin::calls(name);
}

class Step {
public:
    explicit Step(ncclComm_t comm, bool agree_every_step) : comm_(comm), agree_every_step_(agree_every_step) {
        arena_.set_stream(forward_);
        for (int layer = 0; layer < 10; ++layer) {
            arena_.add({64, 64});
            arena_.add({64});
            arena_.add({3, 64});
        }
        arena_.seal();
        loss_.set_stream(forward_);
    }

    float run(int index) {
        for (auto& blob : arena_.blobs()) {  // forward: cuBLAS on the arena's stream
            syncblob::scale_data(blob, 0.999f);
        }
        auto forward_done = cuda::Event::record(forward_);
        forward_done.make_wait(backward_);
        syncblob::Blob<float, A> scratch({256});  // a temporary from the pool, on the backward stream
        scratch.set_stream(backward_);
        float* t = scratch.mutable_device_data();
        for (auto& blob : arena_.blobs()) {  // backward: the stand-in's "kernel" runs at once
            const float* w = blob.device_data();
            float* g = blob.mutable_device_diff();
            for (std::int64_t i = 0; i < blob.count(); ++i) {
                g[i] = 0.001f * w[i] + 0.0001f * static_cast<float>(index);
            }
            t[0] = g[0];
        }
        auto backward_done = cuda::Event::record(backward_);
        backward_done.make_wait(forward_);
        if (agree_every_step_) {
            (void)nccl::allreduce_diff(arena_, comm_, syncblob::Reduce::mean);
        } else {
            if (!reduce_) {
                reduce_.emplace(arena_, comm_, syncblob::Reduce::mean, 16 << 10, 64 << 10);  // agrees once
            } else {
                reduce_->restart();
            }
            for (std::size_t i = arena_.size(); i-- > 0;) {
                reduce_->ready(i);
            }
            (void)reduce_->wait();
        }
        for (auto& blob : arena_.blobs()) {
            syncblob::update(blob);
        }
        loss_.mutable_device_data()[0] = arena_[0].device_data()[0];  // the loss "kernel"
        return syncblob::asum_data(loss_);                            // read once, on the host
    }

private:
    ncclComm_t comm_;
    bool agree_every_step_;
    cuda::Stream forward_;
    cuda::Stream backward_;
    Arena arena_;
    syncblob::Blob<float, A> loss_{1};
    std::optional<nccl::BucketedAllreduce<float, A>> reduce_;
};

struct Comm {
    ncclComm_t comm = nullptr;
    Comm() { REQUIRE(ncclCommInitAll(&comm, 1, nullptr) == ncclSuccess); }
    ~Comm() { (void)ncclCommDestroy(comm); }
    Comm(const Comm&) = delete;
    Comm& operator=(const Comm&) = delete;
};

}  // namespace

TEST_CASE("cuda stand-in: a steady step on AsyncAllocator blobs and NCCL waits only for its buckets and the loss",
          "[cuda][audit][standin]") {
    const Comm comm;
    Step step(comm.comm, false);
    const audit::ModeScope counting(audit::Mode::count);
    (void)step.run(1);
    (void)step.run(2);
    audit::reset();
    syncblob_standin::reset();
    {
        const audit::ModeScope strict(audit::Mode::error);
        for (int s = 3; s <= 7; ++s) {
            REQUIRE_NOTHROW(step.run(s));
        }
    }
    INFO(audit::table());
    CHECK(audit::unasked() == 0);
    CHECK(calls("cudaStreamSynchronize") == 0);
    CHECK(calls("cudaDeviceSynchronize") == 0);
    CHECK(calls("cudaEventSynchronize") == 5);  // BucketedAllreduce::wait, once per step, asked for
    CHECK(calls("cudaMemcpyAsync D->H") == 0);
    CHECK(calls("cudaMalloc") == 0);
    CHECK(calls("cudaFree") == 0);
    CHECK(calls("cudaMallocHost") == 0);
    CHECK(calls("cudaFreeHost") == 0);
    CHECK(calls("ncclAllGather") == 0);             // no agreement
    CHECK(calls("cudaEventCreateWithFlags") == 0);  // every event recorded comes from the cache
    CHECK(calls("cublasSasum (host result)") == 5);
    CHECK(calls("cudaMallocFromPoolAsync") == 5);  // the temporary, from the pool's cache
}

TEST_CASE("cuda stand-in: the per-call NCCL all-reduce agrees every step, and says what that costs",
          "[cuda][audit][standin]") {
    const Comm comm;
    Step step(comm.comm, true);
    const audit::ModeScope counting(audit::Mode::count);
    (void)step.run(1);
    audit::reset();
    syncblob_standin::reset();
    (void)step.run(2);
    INFO(audit::table());
    // the agreement: its scratch from the system, a copy each way, its wait, and the free
    CHECK(calls("ncclAllGather") == 1);
    CHECK(calls("cudaMalloc") == 1);
    CHECK(calls("cudaFree") == 1);
    CHECK(audit::total(audit::Wait::synchronous_copy) == 2);
    CHECK(audit::unasked() == 5);  // allocation, two copies, the collective wait, the free
}

TEST_CASE("cuda stand-in: a reduction into a device scalar runs cuBLAS in device pointer mode, with no wait",
          "[cuda][audit][standin]") {
    syncblob::Blob<float, A> x{256};
    x.fill(-2.0f);
    (void)x.mutable_device_data();
    syncblob::Blob<float, A> loss{1};
    (void)loss.mutable_device_data();
    syncblob_standin::reset();
    {
        const audit::ModeScope strict(audit::Mode::error);
        syncblob::asum_data(x, loss);  // stays on the device
    }
    CHECK(calls("cublasSasum (device result)") == 1);
    CHECK(calls("cublasSasum (host result)") == 0);
    CHECK(calls("cudaStreamSynchronize") + calls("cudaEventSynchronize") == 0);
    CHECK(loss.host_data()[0] == 512.0f);     // read when wanted: one copy to the host, asked for
    CHECK(syncblob::asum_data(x) == 512.0f);  // the blocking form is still there
    CHECK(calls("cublasSasum (host result)") == 1);
}

TEST_CASE("cuda stand-in: an AsyncPool allocation that finds the device full gives back its cache and tries again",
          "[cuda][standin][pool]") {
    cuda::AsyncPool::empty_cache();
    syncblob_standin::set_device_capacity(4 << 20);
    const cuda::Stream s;
    {
        std::vector<void*> held;
        for (int i = 0; i < 4; ++i) {
            held.push_back(cuda::AsyncPool::allocate_async(1 << 20, s));  // the device is full
        }
        cuda::AsyncPool::deallocate_async(held[2], 1 << 20, s);  // two blocks of 1 MiB cached
        cuda::AsyncPool::deallocate_async(held[3], 1 << 20, s);
        syncblob_standin::reset();
        const std::uint64_t retries = cuda::AsyncPool::out_of_memory_retries();
        void* big = cuda::AsyncPool::allocate_async(2 << 20, s);  // no cached block of 2 MiB: full, then trimmed
        CHECK(big != nullptr);
        CHECK(cuda::AsyncPool::out_of_memory_retries() == retries + 1);
        CHECK(calls("cudaMallocFromPoolAsync out of memory") == 1);
        CHECK(calls("cudaMemPoolTrimTo") == 1);
        CHECK(cuda::AsyncPool::stats().requested_bytes == (4u << 20));
        CHECK_THROWS_AS(cuda::AsyncPool::allocate_async(1 << 20, s), std::bad_alloc);  // nothing left to give back
        CHECK(cuda::AsyncPool::stats().requested_bytes == (4u << 20));  // the failed request is not counted
        cuda::AsyncPool::deallocate_async(big, 2 << 20, s);
        cuda::AsyncPool::deallocate_async(held[0], 1 << 20, s);
        cuda::AsyncPool::deallocate_async(held[1], 1 << 20, s);
    }
    syncblob_standin::set_device_capacity(0);
    CHECK(cuda::AsyncPool::stats().requested_bytes == 0);
    cuda::AsyncPool::empty_cache();
}

TEST_CASE("cuda stand-in: threads allocate from the AsyncPool at once, and its counters add up",
          "[cuda][standin][pool]") {
    const std::uint64_t before = cuda::AsyncPool::stats().requests;
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([] {
            const cuda::Stream s;
            for (int i = 0; i < 200; ++i) {
                void* p = cuda::AsyncPool::allocate_async(4096, s);
                cuda::AsyncPool::deallocate_async(p, 4096, s);
            }
        });
    }
    for (auto& t : threads) {
        t.join();
    }
    const auto stats = cuda::AsyncPool::stats();
    CHECK(stats.requests == before + 800);
    CHECK(stats.requested_bytes == 0);
    cuda::AsyncPool::empty_cache();
}

TEST_CASE("cuda stand-in: a DLPack export to a consumer stream and its release wait for nothing",
          "[cuda][audit][standin][dlpack]") {
    namespace dlpack = syncblob::dlpack;
    const cuda::Stream blob_stream;
    const cuda::Stream consumer;
    const audit::ModeScope counting(audit::Mode::count);
    dlpack::DLManagedTensorVersioned* t = nullptr;
    {
        syncblob::Blob<float, A> blob({64});
        blob.set_stream(blob_stream);
        (void)blob.mutable_device_data();  // allocated and zero-filled on its stream
        audit::reset();
        syncblob_standin::reset();
        {
            const audit::ModeScope strict(audit::Mode::error);
            t = dlpack::to_dlpack(blob, dlpack::Side::device, dlpack::Part::data, consumer.get());
        }
        CHECK(calls("cudaStreamWaitEvent") == 1);  // the consumer's stream waits for the blob's
    }                                              // the blob lets go first
    t->deleter(t);                                 // the consumer, last: freed on its stream
    INFO(audit::table());
    CHECK(audit::counts().empty());
    CHECK(calls("cudaStreamSynchronize") == 0);
    CHECK(calls("cudaEventSynchronize") == 0);
    CHECK(calls("cudaDeviceSynchronize") == 0);
    CHECK(calls("cudaFree") == 0);
    CHECK(calls("cudaFreeAsync") == 1);
    CHECK(syncblob_standin::frees_on(consumer.get()) == 1);
}

TEST_CASE(
    "cuda stand-in: a DLPack export without a consumer stream waits for the blob's, and its late free for the device",
    "[cuda][audit][standin][dlpack]") {
    namespace dlpack = syncblob::dlpack;
    const audit::ModeScope counting(audit::Mode::count);
    dlpack::DLManagedTensorVersioned* t = nullptr;
    {
        syncblob::Blob<float, A> blob({64});
        (void)blob.mutable_device_data();
        syncblob_standin::reset();
        t = dlpack::to_dlpack(blob, dlpack::Side::device);
        CHECK(calls("cudaEventSynchronize") == 1);
    }
    t->deleter(t);
    CHECK(calls("cudaDeviceSynchronize") == 1);  // cuda::AsyncPool::deallocate
    CHECK(calls("cudaFreeAsync") == 0);
}
