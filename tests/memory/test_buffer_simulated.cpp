// SPDX-License-Identifier: BSD-2-Clause
// The backend-generic SyncedBuffer suite on SimulatedDevice.

#include <tuple>

#include <syncblob/memory/simulated_device.hpp>

using SuiteAllocators = std::tuple<syncblob::Simulated>;
#include "buffer_suite.hpp"
