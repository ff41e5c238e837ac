// SPDX-License-Identifier: BSD-2-Clause
#pragma once
// A steady training step on a simulated device, as a data-parallel trainer runs it: a ParameterArena
// of a few dozen blobs on a stream-ordered allocator; "forward" device math on the arena's stream,
// "backward" kernels writing the diffs on a second stream, temporary blobs from the pool, an optional
// all-reduce of the diffs (given by the caller: none, or MPI's bucketed one), `update`, the loss read
// on the host once per step, and a checkpoint every few steps. What the sync audit counts while it
// runs is what each step makes the host wait for.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <syncblob/arena.hpp>
#include <syncblob/checkpoint/writer.hpp>
#include <syncblob/math.hpp>
#include <syncblob/sim/async_device.hpp>

namespace audit_test {

using Device = syncblob::SimulatedDevice;
using Allocator = syncblob::SimulatedAsync;  // stream-ordered device memory, as cuda::AsyncAllocator's
using Arena = syncblob::ParameterArena<float, Allocator>;
using BlobT = syncblob::Blob<float, Allocator>;

/// The model: 30 blobs of a small transformer's shapes, and a loss blob.
class Model {
public:
    explicit Model(Device::Stream forward) : forward_(forward), backward_(Device::create_stream()) {
        arena_.set_stream(forward);
        for (int layer = 0; layer < 10; ++layer) {
            arena_.add({64, 64});
            arena_.add({64});
            arena_.add({3, 64});
        }
        arena_.seal();
        loss_.set_stream(forward);
    }

    [[nodiscard]] Arena& arena() noexcept { return arena_; }

    /// One step. `reduce` runs after backward (the all-reduce of the diffs, or nothing); every
    /// `checkpoint_every`-th step saves the arena into `folder`. Returns the loss read on the host.
    float step(int index, const std::function<void(Arena&)>& reduce, int checkpoint_every,
               const std::filesystem::path& folder) {
        // forward: device math on the arena's stream
        for (auto& blob : arena_.blobs()) {
            syncblob::scale_data(blob, 0.999f);
        }
        // backward: kernels on a stream of their own, after forward, writing every diff
        auto forward_done = Device::record(forward_);
        Device::stream_wait(backward_, forward_done);
        BlobT scratch({256});  // a temporary, from the pool, on the backward stream
        scratch.set_stream(backward_);
        auto* t = scratch.mutable_device_data();
        for (auto& blob : arena_.blobs()) {
            const auto n = static_cast<std::size_t>(blob.count());
            const float* w = blob.device_data();
            float* g = blob.mutable_device_diff();
            Device::launch(backward_, "backward", {Device::Range{w, n * sizeof(float)}},
                           {Device::Range{g, n * sizeof(float)}, Device::Range{t, 256 * sizeof(float)}},
                           [w, g, t, n, index] {
                               for (std::size_t i = 0; i < n; ++i) {
                                   g[i] = 0.001f * w[i] + 0.0001f * static_cast<float>(index);
                               }
                               t[0] = g[0];
                           });
        }
        auto backward_done = Device::record(backward_);
        Device::stream_wait(forward_, backward_done);
        reduce(arena_);
        for (auto& blob : arena_.blobs()) {
            syncblob::update(blob);
        }
        // the loss: a kernel on the arena's stream writes it, the host reads it once
        const float* w0 = arena_[0].device_data();
        float* l = loss_.mutable_device_data();
        Device::launch(forward_, "loss", {Device::Range{w0, sizeof(float)}}, {Device::Range{l, sizeof(float)}},
                       [w0, l] { l[0] = w0[0] * w0[0]; });
        const float loss = syncblob::asum_data(loss_);
        if (checkpoint_every > 0 && index % checkpoint_every == 0) {
            syncblob::checkpoint::Writer writer;
            for (std::size_t i = 0; i < arena_.size(); ++i) {
                writer.add("w" + std::to_string(i), arena_[i]);
            }
            (void)writer.save(folder);
        }
        return loss;
    }

private:
    Device::Stream forward_;
    Device::Stream backward_;
    Arena arena_;
    BlobT loss_{1};
};

}  // namespace audit_test
