// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Moved: The checkpoint writer (`Writer`, `SaveOptions`, `SaveReport`, namespace `checkpoint`) lives in
/// `syncblob/checkpoint/writer.hpp`, with the rest of the checkpoint layer; its names in namespace `io` are deprecated
/// aliases. This path keeps working for the 0.2 releases and goes in 0.3 (CHANGELOG, "What to change").

#include "../checkpoint/writer.hpp"
