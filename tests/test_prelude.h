/* SPDX-License-Identifier: MIT */
/*
 * test_prelude.h - the few definitions every test, stress program and fuzzer
 * would otherwise write again: ARRAY_SIZE, the time units, which sanitizer
 * the build runs under, and an uninterrupted sleep.
 *
 * Included as "test_prelude.h": tests/ finds it next to itself; the
 * CMakeLists.txt of tests/service, tests/hooks, stress and fuzz put tests/ on
 * their include path.
 */
#ifndef SPOKE_TESTS_TEST_PRELUDE_H
#define SPOKE_TESTS_TEST_PRELUDE_H

#include <errno.h>
#include <stdint.h>
#include <time.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Nanoseconds. */
#define US  ((uint64_t)1000)
#define MS  ((uint64_t)1000000)
#define SEC ((uint64_t)1000000000)

/* ---- build flavour: 1 under ThreadSanitizer / AddressSanitizer (gcc or clang) -- */

#if defined(__SANITIZE_THREAD__)
#define TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TEST_TSAN 1
#endif
#endif
#ifndef TEST_TSAN
#define TEST_TSAN 0
#endif

#if defined(__SANITIZE_ADDRESS__)
#define TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_ASAN 1
#endif
#endif
#ifndef TEST_ASAN
#define TEST_ASAN 0
#endif

/* Sleeps ns nanoseconds, resuming after a signal. */
static inline void sleep_ns(uint64_t ns)
{
	struct timespec ts = {.tv_sec = (time_t)(ns / SEC), .tv_nsec = (long)(ns % SEC)};

	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

#endif
