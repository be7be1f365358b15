/* SPDX-License-Identifier: MIT */
/*
 * test_service_destroy_race.c - DESIGN.md §4 line 8 ("spoke_destroy ...
 * waits for calls in progress") at the very start of a call.
 *
 *   line8_destroy_waits_for_call_in_progress   a start / reset stopped inside
 *                                              the library when destroy begins
 *
 * To hold a call inside the library at a known point, this program replaces
 * clock_gettime() (the service reads CLOCK_MONOTONIC in spoke_now_ns()): on
 * the one thread that arms it, the next clock_gettime() reports that it was
 * reached and sleeps 200 ms. Whatever the library does in between, the call
 * has begun before destroy does, so destroy must not return (and free the
 * service) before that call has returned. In its own program because the
 * replacement applies to the whole process.
 *
 * Usage: test_service_destroy_race [test name...]   (no name: all)
 */
#include "service_util.h"

#include <sys/syscall.h>

static _Thread_local int hook_armed;
static atomic_int in_hook, hook_done;

int clock_gettime(clockid_t clk, struct timespec *ts)
{
	long r = syscall(SYS_clock_gettime, clk, ts);

	if (hook_armed) {
		struct timespec d = { 0, 200 * 1000 * 1000 };

		hook_armed = 0;
		atomic_store(&in_hook, 1);
		while (syscall(SYS_nanosleep, &d, &d) == -1 && errno == EINTR)
			;
		atomic_store(&hook_done, 1);
	}
	return (int)r;
}

struct dr_ctx {
	struct spoke *s;
	int how; /* 0 start, 1 reset */
	spoke_id id;
	int rc;
};

static struct dr_ctx dr;

static void *dr_thread(void *p)
{
	struct dr_ctx *c = p;

	hook_armed = 1;
	if (c->how == 0)
		c->rc = spoke_start(c->s, 3600 * SEC, never_fn, NULL, NULL);
	else
		c->rc = spoke_reset(c->s, c->id, 3600 * SEC);
	hook_armed = 0;
	return NULL;
}

/*
 * Contract line 8 (destroy waits for calls in progress): a thread is inside
 * spoke_start (then spoke_reset), held 200 ms at the library's first clock
 * read, when the main thread calls spoke_destroy. destroy returns only after
 * that call has returned (which gives 0 or -ESHUTDOWN); it does not free the
 * service under it (the ASan build would also see the use after free).
 */
static void line8_destroy_waits_for_call_in_progress(void **state)
{
	(void)state;

	for (int how = 0; how < 2; how++) {
		pthread_t t;
		int done;

		memset(&dr, 0, sizeof(dr));
		atomic_store(&in_hook, 0);
		atomic_store(&hook_done, 0);
		atomic_store(&never_ran, 0);
		dr.how = how;
		dr.s = svc_new(2, 500 * US, 1);
		assert_int_equal(spoke_start(dr.s, 3600 * SEC, never_fn, NULL, &dr.id), 0);
		t = thread_start(dr_thread, &dr);
		ASSERT_EVENTUALLY(atomic_load(&in_hook), "the call to reach the library's clock read");
		svc_destroy(dr.s);
		done = atomic_load(&hook_done);
		if (!done)
			fail_msg("spoke_destroy returned while a spoke_%s begun before it was still in "
				 "progress (the service is freed under it)",
				 how ? "reset" : "start");
		pthread_join(t, NULL);
		if (dr.rc != 0 && dr.rc != -ESHUTDOWN)
			fail_msg("the call in progress returned %d", dr.rc);
		assert_int_equal(atomic_load(&never_ran), 0);
	}
}

int main(int argc, char **argv)
{
	static const struct CMUnitTest tests[] = {
		SVC_TEST(line8_destroy_waits_for_call_in_progress),
	};

	return svc_main(argc, argv, "service destroy race", tests, ARRAY_SIZE(tests));
}
