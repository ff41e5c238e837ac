// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Loading checkpoints into arenas: the checkpoint layer. It joins the IO layer's sharded
/// checkpoints (`checkpoint::Checkpoint`, `checkpoint::Writer`) and the arena layer's `ParameterArena`:
/// `checkpoint::load<T, A>(checkpoint)` lays the tensors out in one arena and streams the shards
/// into it in large chunks, read in parallel into pinned staging blocks and copied to the device
/// one chunk at a time while the next is read (docs/checkpoints.md). Needs the `syncblob::json`
/// target. For `cuda::Device` arenas, include `syncblob/checkpoint/cuda.cuh` from a .cu file too.

#include "checkpoint/arena_loader.hpp"
#include "checkpoint/device_convert.hpp"
#include "checkpoint/options.hpp"
#include "checkpoint/reader.hpp"
#include "checkpoint/sim.hpp"
#include "checkpoint/writer.hpp"
