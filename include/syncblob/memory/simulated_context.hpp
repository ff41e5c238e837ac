// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Moved: SimulatedContext lives in `syncblob/sim/context.hpp`, the simulator's own folder. This path keeps working
/// for the 0.2 releases and goes in 0.3 (CHANGELOG, "What to change").

#include "../sim/context.hpp"
