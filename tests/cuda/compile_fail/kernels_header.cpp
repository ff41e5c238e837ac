// SPDX-License-Identifier: BSD-2-Clause
// Must not compile: the kernel header needs nvcc.
#include <syncblob/cuda/kernels.cuh>
