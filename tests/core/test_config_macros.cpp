// SPDX-License-Identifier: BSD-2-Clause
// A consumer may set syncblob's configuration macros before including it (here: no forced inlining
// and no noinline, as a profiling build might want), and syncblob's internal macros do not leak out
// of its headers.

// The consumer's settings, before any syncblob header.
#define SYNCBLOB_ALWAYS_INLINE inline
#define SYNCBLOB_NOINLINE
#define SYNCBLOB_HOST_DEVICE

#include <catch2/catch.hpp>

#include <string_view>

#include <syncblob/arena.hpp>
#include <syncblob/core/hardware.hpp>
#include <syncblob/core/thread_pool.hpp>
#include <syncblob/sim/async_device.hpp>
#include <syncblob/syncblob.hpp>

#define SYNCBLOB_TEST_TEXT(...) #__VA_ARGS__
#define SYNCBLOB_TEST_EXPANDED(macro) SYNCBLOB_TEST_TEXT(macro)

static_assert(std::string_view(SYNCBLOB_TEST_EXPANDED(SYNCBLOB_ALWAYS_INLINE)) == "inline");
static_assert(std::string_view(SYNCBLOB_TEST_EXPANDED(SYNCBLOB_NOINLINE)).empty());
static_assert(std::string_view(SYNCBLOB_TEST_EXPANDED(SYNCBLOB_HOST_DEVICE)).empty());

// Macros the headers use internally are undefined at their end.
#ifdef SYNCBLOB_FORK_LOCKS
#error "SYNCBLOB_FORK_LOCKS leaked out of core/fork_lock.hpp"
#endif

TEST_CASE("a blob works with the consumer's inlining settings", "[core][config]") {
    syncblob::Blob<float, syncblob::Simulated> b{2, 3};
    b.fill(2.0f);
    (void)b.mutable_device_data();
    CHECK(b.host_data()[5] == 2.0f);
    CHECK(b.data_stats().device_to_host == 1);
}
