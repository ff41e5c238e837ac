// SPDX-License-Identifier: BSD-2-Clause
#pragma once
// Which sanitizer this test program is built with, as g++ (`__SANITIZE_ADDRESS__`, ...) and clang
// (`__has_feature`) each say it: SYNCBLOB_TEST_ASAN and SYNCBLOB_TEST_TSAN are 1 under
// AddressSanitizer and ThreadSanitizer, 0 otherwise. Both replace the C library's allocator.

#if defined(__SANITIZE_ADDRESS__)
#define SYNCBLOB_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SYNCBLOB_TEST_ASAN 1
#endif
#endif
#ifndef SYNCBLOB_TEST_ASAN
#define SYNCBLOB_TEST_ASAN 0
#endif

#if defined(__SANITIZE_THREAD__)
#define SYNCBLOB_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SYNCBLOB_TEST_TSAN 1
#endif
#endif
#ifndef SYNCBLOB_TEST_TSAN
#define SYNCBLOB_TEST_TSAN 0
#endif
