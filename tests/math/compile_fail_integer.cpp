// SPDX-License-Identifier: BSD-2-Clause
// Must NOT compile: math is only for floating element types (the FloatingElement concept).
// Built with -DSYNCBLOB_CONTROL it uses float instead and must compile, which proves the failure
// comes from the concept and not from a mistake in this file.
#include <cstdint>

#include <syncblob/math.hpp>

#ifdef SYNCBLOB_CONTROL
using element = float;
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
