// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The umbrella header: core, memory and Blob. Plain C++20; pulls in no third-party header.
/// Eigen views and math (`syncblob/math.hpp`), JSON and files (`syncblob/io/...`) and CUDA
/// (`syncblob/cuda/...`) have headers and CMake targets of their own.

#include "core/config.hpp"
#include "core/element.hpp"
#include "core/error.hpp"
#include "core/half.hpp"
#include "core/shape.hpp"
#include "memory/allocator.hpp"
#include "memory/device_backend.hpp"
#include "memory/host_allocator.hpp"
#include "memory/no_device.hpp"
#include "memory/pinned_pool.hpp"
#include "memory/pool_stats.hpp"
#include "memory/synced_buffer.hpp"
#include "memory/transfer_stats.hpp"
#include "sim/device.hpp"
#if __has_include("blob.hpp")
#include "blob/blob.hpp"
#endif
