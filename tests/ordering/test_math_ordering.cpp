// SPDX-License-Identifier: BSD-2-Clause
// The math functions on the simulated device, with operands whose buffers are on different streams
// with work still pending, and on a second device while another is current: each ordering and
// device statement of math.hpp seen fail when it is removed, under every seed of the fixed set.

#include <catch2/catch.hpp>

#include <cstddef>
#include <vector>

#include <syncblob/blob.hpp>
#include <syncblob/math.hpp>
#include <syncblob/sim/async_device.hpp>

#include "ordering_support.hpp"

using namespace syncblob_test;
using syncblob::SimulatedAsyncDevice;

namespace {

constexpr std::int64_t n = 16;
constexpr auto un = static_cast<std::size_t>(n);

using PlainBlob = syncblob::Blob<float, syncblob::Simulated>;
using OrderedBlob = syncblob::Blob<float, syncblob::SimulatedAsync>;

// A blob whose data is fresh on the device (value `data`) and whose diff buffer is on its own
// stream, with a kernel that writes `diff` into it still queued there.
template <class Blob>
void prepare(Blob& blob, Stream data_stream, Stream diff_stream, float data, float diff) {
    blob.set_stream(data_stream);
    blob.diff_buffer()->set_stream(diff_stream);
    blob.fill(data);
    (void)blob.device_data();  // H->D, waited for: the data's head is synced
    set_kernel(diff_stream, blob.mutable_device_diff(), un, diff);
}

}  // namespace

TEMPLATE_TEST_CASE("update runs after the work pending on the diff's stream", "[ordering][math][update]", PlainBlob,
                   OrderedBlob) {
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed)};
        const auto a = SimulatedDevice::create_stream();
        const auto b = SimulatedDevice::create_stream();
        {
            TestType blob{n};
            prepare(blob, a, b, 5.0f, 1.0f);
            syncblob::update(blob);  // on the data's stream a, reading the diff written on b
            CHECK(blob.host_data()[0] == 4.0f);
            CHECK(blob.host_data()[un - 1] == 4.0f);
        }
        finish();
    }
}

TEMPLATE_TEST_CASE("The diff's block is freed only after the update that read it on another stream",
                   "[ordering][math][update][lifetime]", PlainBlob, OrderedBlob) {
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed)};
        const auto a = SimulatedDevice::create_stream();
        const auto b = SimulatedDevice::create_stream();
        {
            TestType blob{n};
            prepare(blob, a, b, 5.0f, 1.0f);
            syncblob::update(blob);  // queued on a, reads the diff
        }                            // the diff's block is freed after b's work: b must have waited for a
        finish();
    }
}

TEMPLATE_TEST_CASE("dot runs after the work pending on its second operand's stream", "[ordering][math][dot]", PlainBlob,
                   OrderedBlob) {
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed)};
        const auto a = SimulatedDevice::create_stream();
        const auto b = SimulatedDevice::create_stream();
        {
            TestType x{n};
            TestType y{n};
            x.set_stream(a);
            y.set_stream(b);
            x.fill(2.0f);
            (void)x.device_data();
            set_kernel(b, y.mutable_device_data(), un, 3.0f);  // y's values, still queued on b
            CHECK(syncblob::dot(x, y) == 2.0f * 3.0f * static_cast<float>(n));
        }
        finish();
    }
}

TEMPLATE_TEST_CASE("Math on blobs of device 1 runs there while device 0 is current", "[ordering][math][devices]",
                   PlainBlob, OrderedBlob) {
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed, 2)};
        SimulatedDevice::set_device(1);
        {
            TestType x{n};
            TestType y{n};
            x.fill(2.0f);
            y.fill(3.0f);
            (void)x.device_data();
            (void)y.device_data();
            (void)x.mutable_device_diff();  // zero, on the device
            SimulatedDevice::set_device(0);
            syncblob::scale_data(x, 2.0f);  // 4
            syncblob::update(x);            // 4 - 0
            CHECK(syncblob::asum_data(x) == 4.0f * static_cast<float>(n));
            CHECK(syncblob::sumsq_data(y) == 9.0f * static_cast<float>(n));
            CHECK(syncblob::dot(x, y) == 12.0f * static_cast<float>(n));
            CHECK(SimulatedDevice::current_device() == 0);
            CHECK(x.data_stats().device_kernels == 4);
        }
        finish();
    }
}

TEMPLATE_TEST_CASE("Math on blobs of device 0 while device 1 is current leaves device 1 current",
                   "[ordering][math][devices]", PlainBlob, OrderedBlob) {
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed, 2)};
        {
            TestType x{n};
            x.fill(1.5f);
            (void)x.device_data();  // on device 0
            SimulatedDevice::set_device(1);
            syncblob::scale_data(x, 2.0f);
            CHECK(SimulatedDevice::current_device() == 1);
            CHECK(syncblob::asum_data(x) == 3.0f * static_cast<float>(n));
            CHECK(SimulatedDevice::current_device() == 1);
            SimulatedDevice::set_device(0);
        }
        finish();
    }
}

TEMPLATE_TEST_CASE("A reduction into a device scalar is ordered after its operands and before the scalar's readers",
                   "[ordering][math][reduce_into]", PlainBlob, OrderedBlob) {
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed)};
        const auto a = SimulatedDevice::create_stream();
        const auto b = SimulatedDevice::create_stream();
        const auto c = SimulatedDevice::create_stream();
        {
            TestType x{n};
            TestType y{n};
            TestType out{1};
            x.set_stream(a);
            y.set_stream(b);
            out.set_stream(c);
            x.fill(2.0f);
            (void)x.device_data();
            set_kernel(b, y.mutable_device_data(), un, 3.0f);  // y's values, still queued on b
            float* o = out.mutable_device_data();
            read_kernel(c, o, 1);      // the scalar's last reader, still queued on c
            syncblob::dot(x, y, out);  // a kernel on a writes the scalar
            std::vector<float> seen(1);
            copy_kernel(c, seen.data(), static_cast<const float*>(o), 1);  // a later reader on c
            SimulatedDevice::synchronize();
            CHECK(seen[0] == 2.0f * 3.0f * static_cast<float>(n));
            CHECK(out.host_data()[0] == 2.0f * 3.0f * static_cast<float>(n));
        }
        finish();
    }
}

TEMPLATE_TEST_CASE("A reduction into a device scalar of device 1 runs there while device 0 is current",
                   "[ordering][math][reduce_into][devices]", PlainBlob, OrderedBlob) {
    for (const auto seed : seeds) {
        INFO("seed " << seed);
        const SimulatedDevice::Scope scope{with_seed(seed, 2)};
        SimulatedDevice::set_device(1);
        {
            TestType x{n};
            TestType out{1};
            x.fill(-1.5f);
            (void)x.device_data();
            (void)out.mutable_device_data();
            SimulatedDevice::set_device(0);
            syncblob::asum_data(x, out);
            CHECK(SimulatedDevice::current_device() == 0);
            SimulatedDevice::set_device(1);
            CHECK(out.host_data()[0] == 1.5f * static_cast<float>(n));
        }
        SimulatedDevice::set_device(0);
        finish();
    }
}
