// SPDX-License-Identifier: BSD-2-Clause
// Tutorial 6: streams. Overlapping an upload with compute on two streams, what syncblob orders for
// you, and what it leaves to you when your own kernels use a blob's device memory.
//
// The device is SimulatedDevice, which queues copies and kernels per stream and runs them late, as
// a GPU does, so this runs on any machine and a missing wait shows up. With a GPU the blob code is
// the same on syncblob::cuda::Allocator; your own kernels use cudaEventRecord / cudaStreamWaitEvent
// where this uses SimulatedDevice::record / stream_wait.
// needs: eigen

#include <iostream>
#include <string>

#include <syncblob/math.hpp>
#include <syncblob/sim/device.hpp>

namespace sb = syncblob;
using Device = sb::SimulatedDevice;

int main() {
    const Device::Scope scope{Device::Settings{}};

    // [overlap]
    // `layer` is computed on the `compute` stream while `next` is uploaded on the `copies` stream.
    const auto compute = Device::create_stream();
    const auto copies = Device::create_stream();
    sb::Blob<float, sb::Simulated> layer{1 << 16};
    sb::Blob<float, sb::Simulated> next{1 << 16};
    layer.set_stream(compute);  // the blob's copies and math run on `compute`
    layer.fill(1.0f);
    (void)layer.mutable_device_data();  // upload; the device side is now the fresh one
    next.fill(2.0f);
    next.data_buffer()->push_to_device_async(copies);  // issued, not waited for
    sb::scale_data(layer, 0.5f);                       // queued on `compute`, beside the upload
    std::cout << "queued: " << Device::pending_copies() << " operations (the upload and the scale)\n";
    // Each access waits for exactly what it needs: the scale for `layer`, the upload for `next`.
    std::cout << "layer[0] = " << layer.host_data()[0] << ", sum of next on the device = " << sb::asum_data(next)
              << '\n';
    // [overlap]

    // [your-kernels]
    // syncblob cannot see your kernels. One that reads a blob's device memory on another stream must
    // first wait for the blob's stream (record an event there, make your stream wait for it).
    sb::scale_data(layer, 4.0f);  // queued on `compute`
    const float* p = layer.device_data();
    auto scaled = Device::record(compute);
    Device::stream_wait(copies, scaled);  // without this line: a stale read, and a fault below
    float first = 0;
    Device::launch(copies, "my kernel", {{p, sizeof(float)}}, {}, [&first, p] { first = p[0]; });
    Device::synchronize();
    std::cout << "my kernel read " << first << "; faults: " << Device::faults().size() << '\n';
    // [your-kernels]

    // [missing-wait]
    // The same read without the wait: the simulator reports it (and a GPU would race).
    sb::scale_data(layer, 2.0f);
    Device::launch(copies, "my kernel", {{p, sizeof(float)}}, {}, [&first, p] { first = p[0]; });
    auto read = Device::record(copies);
    Device::wait(read);
    const std::string fault = Device::faults().at(0);
    std::cout << "without the wait my kernel read " << first << " (stale); the simulator says:\n    "
              << fault.substr(0, fault.rfind(' ')) << " (address)\n";
    Device::clear_faults();
    Device::synchronize();
    // [missing-wait]
    return 0;
}
