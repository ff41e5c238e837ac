// SPDX-License-Identifier: BSD-2-Clause
// Must NOT compile: math is only for floating element types with an accumulator (the
// FloatingElement concept): not on integers, nor (built with -DSYNCBLOB_FLOAT8) on the 8-bit floats,
// which are storage only. Built with -DSYNCBLOB_CONTROL it uses float instead and must compile,
// which proves the failure comes from the concept and not from a mistake in this file.
#include <cstdint>

#include <syncblob/math.hpp>

#if defined(SYNCBLOB_CONTROL)
using element = float;
#elif defined(SYNCBLOB_FLOAT8)
using element = syncblob::float8_e4m3fn;
#else
using element = std::int32_t;
#endif

int syncblob_compile_fail_probe();
int syncblob_compile_fail_probe() {
    syncblob::Blob<element> b({4});
    b.fill(element{1});
    syncblob::update(b);
    return static_cast<int>(syncblob::asum_data(b));
}
