// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Moved: SimulatedTimeline lives in `syncblob/sim/timeline.hpp`, the simulator's own folder. This path keeps working
/// for the 0.2 releases and goes in 0.3 (CHANGELOG, "What to change").

#include "../sim/timeline.hpp"
