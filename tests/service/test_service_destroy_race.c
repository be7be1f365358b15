/* SPDX-License-Identifier: MIT */
/*
 * test_service_destroy_race.c - docs/contract.md line 8 ("spoke_destroy
 * waits for the calls in progress") at the very start of a call.
 *
 *   line8_destroy_waits_for_call_in_progress   a call held inside the library
 *                                              when destroy begins
 *
 * To hold a call inside the library at a known point, this program replaces
 * two libc functions the service calls: clock_gettime() (spoke_now_ns) and
 * pthread_getspecific() (a thread's per-thread state on its first call). On
 * the one thread that arms a hook, the next such call reports that it was
 * reached and sleeps 200 ms, then does the real work. Whatever the library
 * does around it, that call has begun before destroy does, so destroy must
 * not return (and free the service) before the call has returned. If the
 * library never calls the hooked function during the call, that case proves
 * nothing and is skipped. In its own program because the replacements apply
 * to the whole process.
 *
 * Usage: test_service_destroy_race [test name...]   (no name: all)
 */
#include "service_util.h"

#include <dlfcn.h>
#include <sys/syscall.h>

enum { HOOK_NONE, HOOK_CLOCK, HOOK_TSD };

static _Thread_local int hook_armed;
static atomic_int in_hook, hook_done;

static void hook_hold(void)
{
	struct timespec d = {0, 200 * 1000 * 1000};

	hook_armed = HOOK_NONE;
	atomic_store(&in_hook, 1);
	while (syscall(SYS_nanosleep, &d, &d) == -1 && errno == EINTR)
		;
	atomic_store(&hook_done, 1);
}

int clock_gettime(clockid_t clk, struct timespec *ts)
{
	if (hook_armed == HOOK_CLOCK)
		hook_hold();
	return (int)syscall(SYS_clock_gettime, clk, ts);
}

void *pthread_getspecific(pthread_key_t key)
{
	static void *(*real)(pthread_key_t);

	if (!real)
		real = (void *(*)(pthread_key_t))dlsym(RTLD_NEXT, "pthread_getspecific");
	if (hook_armed == HOOK_TSD)
		hook_hold();
	return real(key);
}

struct dr_ctx {
	struct spoke *s;
	int how;  /* 0 start, 1 reset */
	int hook; /* HOOK_CLOCK, HOOK_TSD */
	spoke_id id;
	int rc;
	atomic_int returned;
};

static struct dr_ctx dr;
static struct spoke *dr_other; /* another live instance, for the thread's first call */

static void *dr_thread(void *p)
{
	struct dr_ctx *c = p;

	/*
	 * A thread's very first call into spoke sets up its thread-local state
	 * before any instance's guard (docs/design/service.md, "Entering a call,
	 * and destroy"). So the thread makes that first call on another
	 * instance, and the call held below is its first on dr.s: counted in
	 * dr.s's `entering` while it finds its arena there, then in the arena.
	 */
	if (spoke_shards(dr_other) == 0)
		c->rc = -EPROTO;
	hook_armed = c->hook;
	if (c->rc != 0)
		;
	else if (c->how == 0)
		c->rc = spoke_start(c->s, 3600 * SEC, never_fn, NULL, NULL);
	else
		c->rc = spoke_reset(c->s, c->id, 3600 * SEC);
	hook_armed = HOOK_NONE;
	atomic_store(&c->returned, 1);
	return NULL;
}

/*
 * Contract line 8 (destroy waits for calls in progress): a thread new to
 * this instance is inside spoke_start (then spoke_reset), held 200 ms at the
 * library's first clock read, or at its first per-thread-state lookup, when the main thread
 * calls spoke_destroy. destroy returns only after that call has returned
 * (which gives 0 or -ESHUTDOWN); it does not free the service under it (the
 * ASan build would also see the use after free).
 */
static void line8_destroy_waits_for_call_in_progress(void **state)
{
	(void)state;
	static const char *const hook_name[] = {"", "clock_gettime", "pthread_getspecific"};
	int checked = 0;

	dr_other = svc_new(1, 1 * MS, 0);
	for (int hook = HOOK_CLOCK; hook <= HOOK_TSD; hook++) {
		for (int how = 0; how < 2; how++) {
			pthread_t t;
			int done;

			memset(&dr, 0, sizeof(dr));
			atomic_store(&in_hook, 0);
			atomic_store(&hook_done, 0);
			atomic_store(&never_ran, 0);
			dr.how = how;
			dr.hook = hook;
			dr.s = svc_new(2, 500 * US, 1);
			assert_int_equal(spoke_start(dr.s, 3600 * SEC, never_fn, NULL, &dr.id), 0);
			t = thread_start(dr_thread, &dr);
			ASSERT_EVENTUALLY(atomic_load(&in_hook) || atomic_load(&dr.returned),
					  "the call to reach the hook or return");
			if (!atomic_load(&in_hook)) {
				/* the library did not call it here: nothing to prove */
				pthread_join(t, NULL);
				svc_destroy(dr.s);
				continue;
			}
			checked++;
			svc_destroy(dr.s);
			done = atomic_load(&hook_done);
			if (!done)
				fail_msg("spoke_destroy returned while a spoke_%s begun before it "
					 "(held in "
					 "%s) was still in progress: the service is freed under it",
					 how ? "reset" : "start", hook_name[hook]);
			pthread_join(t, NULL);
			if (dr.rc != 0 && dr.rc != -ESHUTDOWN)
				fail_msg("the call in progress returned %d", dr.rc);
			assert_int_equal(atomic_load(&never_ran), 0);
		}
	}
	if (!checked)
		print_message("note: no hooked libc call inside spoke_start/spoke_reset; nothing "
			      "checked\n");
}

int main(int argc, char **argv)
{
	static const struct CMUnitTest tests[] = {
		SVC_TEST(line8_destroy_waits_for_call_in_progress),
	};

	return svc_main(argc, argv, "service destroy race", tests, ARRAY_SIZE(tests));
}
