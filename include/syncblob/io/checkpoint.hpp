// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Moved: The checkpoint reader (`Checkpoint`, `Tensor`, `Shard`, namespace `checkpoint`) lives in
/// `syncblob/checkpoint/reader.hpp`, with the rest of the checkpoint layer; its names in namespace `io` are deprecated
/// aliases. This path keeps working for the 0.2 releases and goes in 0.3 (CHANGELOG, "What to change").

#include "../checkpoint/reader.hpp"
