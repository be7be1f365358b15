/* SPDX-License-Identifier: MIT */
/*
 * fault_inject.h - make the library's allocations and thread creations fail
 * on purpose, to reach its -ENOMEM and -EAGAIN paths (the handle regions
 * are mmap()ed and made read/write with mprotect(): each counts as an
 * allocation).
 *
 * The test program is linked with
 *   -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=aligned_alloc,
 *       --wrap=mmap,--wrap=mprotect,--wrap=pthread_create
 * so every call to those from the objects linked into it (libspoke.a and
 * the test itself, not shared libraries) goes through the wrappers below.
 * A wrapper fails only on the thread that armed it, so the service's own
 * threads are never disturbed by a test that arms it:
 *
 *   fault_alloc_after(n)   the next n allocations succeed, every later one
 *                          fails (returns NULL) until fault_off()
 *   fault_thread_after(n)  the next n pthread_create calls succeed, every
 *                          later one fails with EAGAIN until fault_off()
 *   fault_thread_before_fail  if set, called by a pthread_create that is
 *                          about to fail (the failure may come late)
 *   fault_off()            everything succeeds again
 *   fault_allocs_failed    allocations refused since the last arming
 *
 * Sanitizers see through it: the wrappers call the real (intercepted)
 * functions, so ASan/LSan still track every block and TSan every thread.
 * Header only; include it once per test program.
 */
#ifndef SPOKE_TESTS_FAULT_INJECT_H
#define SPOKE_TESTS_FAULT_INJECT_H

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <sys/mman.h>

/* -1: never fail; otherwise how many more calls succeed before all fail. */
static _Thread_local long fault_allocs_left = -1;
static _Thread_local long fault_threads_left = -1;
static _Thread_local unsigned long fault_allocs_failed;
static _Thread_local void (*fault_thread_before_fail)(void);

static inline void fault_alloc_after(long n)
{
	fault_allocs_left = n;
	fault_allocs_failed = 0;
}

static inline void fault_thread_after(long n)
{
	fault_threads_left = n;
}

static inline void fault_off(void)
{
	fault_allocs_left = -1;
	fault_threads_left = -1;
}

/* Counts one call against *left; true if it must fail. */
static inline int fault_take(long *left)
{
	if (*left < 0)
		return 0;
	if (*left == 0)
		return 1;
	--*left;
	return 0;
}

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t align, size_t n);
void *__real_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
int __real_mprotect(void *addr, size_t len, int prot);
int __real_pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
void *__wrap_aligned_alloc(size_t align, size_t n);
void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
int __wrap_mprotect(void *addr, size_t len, int prot);
int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg);

static inline void *fault_refuse_alloc(void)
{
	fault_allocs_failed++;
	errno = ENOMEM;
	return NULL;
}

void *__wrap_malloc(size_t n)
{
	return fault_take(&fault_allocs_left) ? fault_refuse_alloc() : __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t size)
{
	return fault_take(&fault_allocs_left) ? fault_refuse_alloc() : __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t n)
{
	return fault_take(&fault_allocs_left) ? fault_refuse_alloc() : __real_realloc(p, n);
}

void *__wrap_aligned_alloc(size_t align, size_t n)
{
	return fault_take(&fault_allocs_left) ? fault_refuse_alloc()
					      : __real_aligned_alloc(align, n);
}

void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	if (fault_take(&fault_allocs_left)) {
		(void)fault_refuse_alloc();
		return MAP_FAILED;
	}
	return __real_mmap(addr, len, prot, flags, fd, off);
}

/* As the kernel refuses read/write under strict overcommit with no memory left. */
int __wrap_mprotect(void *addr, size_t len, int prot)
{
	if (fault_take(&fault_allocs_left)) {
		(void)fault_refuse_alloc();
		return -1;
	}
	return __real_mprotect(addr, len, prot);
}

int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
	if (!fault_take(&fault_threads_left))
		return __real_pthread_create(t, attr, fn, arg);
	if (fault_thread_before_fail)
		fault_thread_before_fail();
	return EAGAIN;
}

#endif /* SPOKE_TESTS_FAULT_INJECT_H */
