// SPDX-License-Identifier: BSD-2-Clause
// The backend-generic SyncedBuffer suite on SimulatedDevice, and on SimulatedAsyncDevice (device
// blocks allocated and freed in stream order from its caching pool).

#include <tuple>

#include <syncblob/sim/async_device.hpp>
#include <syncblob/sim/device.hpp>

using SuiteAllocators = std::tuple<syncblob::Simulated, syncblob::SimulatedAsync>;
#include "buffer_suite.hpp"
