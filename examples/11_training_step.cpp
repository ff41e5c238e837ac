// SPDX-License-Identifier: BSD-2-Clause
// Tutorial 11: a training step that never makes the host wait for nothing, and the sync audit that
// proves it. Every place where syncblob makes the host wait (for a stream, an event, the whole
// device, other ranks) or takes memory from the system reports itself to the audit; `count` mode
// counts those reports, `error` mode throws `SyncError` for a wait the operation did not ask for.
//
// The device is SimulatedDevice with its stream-ordered allocator (`SimulatedAsync`, as
// `cuda::AsyncAllocator` on a GPU): the same blob code, on any machine. docs/waits.md lists each
// operation's waits.
// needs: eigen

#include <cstddef>
#include <iostream>

#include <syncblob/arena.hpp>
#include <syncblob/core/sync_audit.hpp>
#include <syncblob/math.hpp>
#include <syncblob/sim/async_device.hpp>

namespace sb = syncblob;
namespace audit = syncblob::audit;
using Device = sb::SimulatedDevice;
using Arena = sb::ParameterArena<float, sb::SimulatedAsync>;

// One step: "forward" scales each weight on the device, "backward" (a kernel of yours, here a
// simulated one) writes each gradient from the weight and a temporary blob, `update` applies it, and
// the loss, computed on the device, is read on the host. All of it is queued on the model's stream.
float step(Arena& model, sb::Blob<float, sb::SimulatedAsync>& loss) {
    const auto stream = model.stream();
    for (auto& w : model.blobs()) {
        sb::scale_data(w, 0.5f);  // forward: device math
    }
    for (auto& w : model.blobs()) {
        sb::Blob<float, sb::SimulatedAsync> scratch(w.shape());  // from the stream-ordered pool
        scratch.set_stream(stream);
        float* t = scratch.mutable_device_data();  // its zero-fill is queued, not waited for
        const float* x = w.device_data();
        float* g = w.mutable_device_diff();
        const auto n = static_cast<std::size_t>(w.count());
        const auto bytes = n * sizeof(float);
        Device::launch(stream, "backward", {{x, bytes}}, {{g, bytes}, {t, bytes}}, [x, g, t, n] {
            for (std::size_t i = 0; i < n; ++i) {
                t[i] = 0.25f * x[i];
                g[i] = t[i];
            }
        });
    }  // each temporary goes back to the pool in stream order: no wait
    for (auto& w : model.blobs()) {
        sb::update(w);  // data -= diff, on the device
    }
    sb::asum_data(model[1], loss);  // the loss stays on the device...
    return loss.host_data()[0];     // ...until the host reads it: the one wait a step needs
}

int main() {
    const Device::Scope scope{Device::Settings{}};

    // [model]
    Arena model;
    model.set_stream(Device::create_stream());
    model.add({64, 64});
    model.add({64});
    model.seal();         // one data and one diff block for every weight, zero-filled on the device
    model[0].fill(2.0f);  // written on the host; the first step uploads them
    model[1].fill(1.0f);
    sb::Blob<float, sb::SimulatedAsync> loss{1};
    loss.set_stream(model.stream());
    // [model]

    // [warm-up]
    // The first steps upload the weights and fill the pool with the temporaries' blocks (two steps
    // here: a block freed by a smaller temporary serves the larger one only once both are cached).
    // Count what they wait for.
    for (int i = 1; i <= 2; ++i) {
        audit::reset();
        const audit::ModeScope counting{audit::Mode::count};
        const float l = step(model, loss);
        std::cout << "step " << i << ": loss " << l << "; waits it did not ask for: " << audit::unasked() << '\n';
    }
    // [warm-up]

    // [steady]
    // From then on, a wait the step did not ask for is an error: the audit throws before it waits.
    audit::reset();
    {
        const audit::ModeScope strict{audit::Mode::error};
        for (int i = 3; i <= 5; ++i) {
            std::cout << "step " << i << ": loss " << step(model, loss) << '\n';
        }
    }
    std::cout << "steps 3-5 waited:\n" << audit::table();
    // [steady]

    // [caught]
    // A wait the step does not need, put in by mistake: the whole device synchronised in a step.
    audit::reset();
    try {
        const audit::ModeScope strict{audit::Mode::error};
        const audit::Operation op{"my step"};  // asks for no wait
        Device::synchronize();
    } catch (const sb::SyncError& e) {
        std::cout << "caught: " << e.what() << '\n';
    }
    // [caught]
}
