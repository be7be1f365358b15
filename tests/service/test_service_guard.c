/* SPDX-License-Identifier: MIT */
/*
 * test_service_guard.c - the call guard against spoke_destroy (percpu/guard.h)
 * where it meets the rest of the process: resources that run out on a
 * thread's first call, and an application that uses RCU of its own.
 *
 *   guard_first_calls_under_address_limit_never_abort
 *                          48 threads make their first calls on an instance
 *                          (a cancel, then a start) with the address space
 *                          limited to what the process uses: each call
 *                          returns a documented error or succeeds, and the
 *                          process is never aborted (spoke.h: -EAGAIN on a
 *                          thread's first call, -ENOMEM for handles)
 *   guard_destroy_inside_application_rcu_reader
 *                          the application holds a read-side section of its
 *                          own liburcu-bp while it destroys an instance:
 *                          destroy returns (spoke's guard is per instance)
 *   guard_destroy_not_delayed_by_other_thread_reader
 *                          another thread of the application sits in a
 *                          read-side section of liburcu-bp; destroy returns
 *                          while it is still inside it
 */
#include "service_util.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>

/*
 * liburcu 0.13 declares struct urcu_bp_reader 128-byte aligned but puts its
 * readers 32 bytes into a registry chunk: UBSan's alignment check stops in
 * its inline read lock, though every access is of an 8-byte field at an
 * 8-byte aligned address. The check is off for liburcu's own functions only.
 */
#define _LGPL_SOURCE
#if defined(__clang__)
#pragma clang attribute push(__attribute__((no_sanitize("alignment"))), apply_to = function)
#endif
#include <urcu/urcu-bp.h>
#if defined(__clang__)
#pragma clang attribute pop
#endif

/* ---- resources running out on a thread's first call ---------------------------------- */

#define FIRST_CALLERS 48

struct first_call {
	struct spoke *s;
	pthread_barrier_t *go;
	int cancel_rc, start_rc;
};

static void *first_call_main(void *arg)
{
	struct first_call *c = arg;
	spoke_id id;

	pthread_barrier_wait(c->go);
	c->cancel_rc = spoke_cancel(c->s, ((spoke_id)7 << 32) | 5);
	c->start_rc = spoke_start(c->s, 3600 * SEC, never_fn, NULL, &id);
	if (c->start_rc == 0 && spoke_cancel(c->s, id) != 0)
		c->start_rc = -EPROTO;
	return NULL;
}

/* In the child: 0 if every first call ended with an outcome spoke.h documents. */
static int first_calls_child(void)
{
	static struct first_call calls[FIRST_CALLERS];
	pthread_t t[FIRST_CALLERS];
	pthread_barrier_t go;
	struct rlimit lim;
	struct spoke *s;
	uint64_t vm;

	alarm(120);
	s = svc_new(1, 1 * MS, 1);
	if (pthread_barrier_init(&go, NULL, FIRST_CALLERS + 1) != 0)
		return 11;
	/* The threads exist (their stacks are mapped) before the limit. */
	for (unsigned i = 0; i < FIRST_CALLERS; i++) {
		calls[i] = (struct first_call){.s = s, .go = &go};
		if (pthread_create(&t[i], NULL, first_call_main, &calls[i]) != 0)
			return 12;
	}
	vm = vm_size_bytes();
	if (vm == 0)
		return 13;
	lim.rlim_cur = lim.rlim_max = vm;
	if (setrlimit(RLIMIT_AS, &lim) != 0)
		return 14;
	pthread_barrier_wait(&go);
	for (unsigned i = 0; i < FIRST_CALLERS; i++)
		pthread_join(t[i], NULL);
	for (unsigned i = 0; i < FIRST_CALLERS; i++) {
		int c = calls[i].cancel_rc, st = calls[i].start_rc;

		if (c != -ENOENT && c != -EAGAIN)
			return 20;
		if (st != 0 && st != -EAGAIN && st != -ENOMEM)
			return 21;
	}
	lim.rlim_cur = lim.rlim_max = RLIM_INFINITY;
	(void)setrlimit(RLIMIT_AS, &lim);
	svc_destroy(s);
	return 0;
}

/*
 * A child process takes the limit (it is the process's). Before the guard
 * had its own counts, a thread's first call registered it with urcu-bp,
 * whose registry aborts when it cannot grow: the 8 readers it starts with
 * were taken, and the ninth thread's spoke_cancel killed the child.
 * The sanitizers reserve terabytes of shadow: skipped there.
 */
static void guard_first_calls_under_address_limit_never_abort(void **state)
{
	int status;
	pid_t pid;

	(void)state;
	if (TEST_TSAN || TEST_ASAN)
		skip();
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(first_calls_child());
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (WIFSIGNALED(status))
		fail_msg("a thread's first calls under an address-space limit killed the process "
			 "(signal %d%s)",
			 WTERMSIG(status), WTERMSIG(status) == SIGABRT ? ": abort" : "");
	if (WEXITSTATUS(status) != 0)
		fail_msg("the child exited with %d (20: a cancel gave something else than -ENOENT "
			 "or -EAGAIN, 21: a start something else than 0, -EAGAIN or -ENOMEM)",
			 WEXITSTATUS(status));
}

/* ---- an application with RCU of its own --------------------------------------------- */

struct destroy_call {
	struct spoke *s;
	atomic_int done;
};

static void *destroy_main(void *arg)
{
	struct destroy_call *d = arg;

	spoke_destroy(d->s);
	atomic_store(&d->done, 1);
	return NULL;
}

/* Destroy s on another thread and wait for it to return (bounded: a hang fails). */
static void destroy_returns(struct spoke *s, const char *while_what)
{
	struct destroy_call d = {.s = s};
	pthread_t t = thread_start(destroy_main, &d);
	uint64_t t0 = mono_ns();

	while (!atomic_load(&d.done) && mono_ns() - t0 < HOLD_LIMIT_NS)
		sleep_ms(1);
	if (!atomic_load(&d.done))
		fail_msg("spoke_destroy did not return in %" PRIu64 " s while %s",
			 HOLD_LIMIT_NS / SEC, while_what);
	pthread_join(t, NULL);
}

static atomic_uint fired;

/* An instance with a timer pending, one that has run, and one cancelled. */
static struct spoke *instance_in_use(void)
{
	struct spoke *s = svc_new(2, 1 * MS, 1);
	spoke_id id;

	atomic_store(&fired, 0);
	assert_int_equal(spoke_start_on(s, 0, 3600 * SEC, never_fn, NULL, &id), 0);
	assert_int_equal(spoke_start_on(s, 1, 3600 * SEC, never_fn, NULL, NULL), 0);
	assert_int_equal(spoke_start_on(s, 1, 1 * MS, count_fn, &fired, NULL), 0);
	assert_int_equal(spoke_cancel(s, id), 0);
	ASSERT_EVENTUALLY(atomic_load(&fired) == 1, "the 1 ms timer to run");
	return s;
}

static void guard_destroy_inside_application_rcu_reader(void **state)
{
	struct spoke *s;

	(void)state;
	s = instance_in_use();
	svc_abandon_all(); /* destroyed below, by another thread */
	urcu_bp_read_lock();
	destroy_returns(s, "the destroying thread's caller held a read-side section of urcu-bp");
	urcu_bp_read_unlock();
}

static struct {
	atomic_int inside, leave;
} reader;

static void *reader_main(void *arg)
{
	(void)arg;
	urcu_bp_read_lock();
	atomic_store(&reader.inside, 1);
	while (!atomic_load(&reader.leave))
		sleep_ms(1);
	urcu_bp_read_unlock();
	return NULL;
}

static void guard_destroy_not_delayed_by_other_thread_reader(void **state)
{
	struct spoke *s;
	pthread_t t;

	(void)state;
	memset(&reader, 0, sizeof(reader));
	s = instance_in_use();
	svc_abandon_all();
	t = thread_start(reader_main, NULL);
	ASSERT_EVENTUALLY(atomic_load(&reader.inside), "the reader to enter its section");
	destroy_returns(s, "another thread held a read-side section of urcu-bp");
	atomic_store(&reader.leave, 1);
	pthread_join(t, NULL);
}

int main(int argc, char **argv)
{
	static const struct CMUnitTest all[] = {
		SVC_TEST(guard_first_calls_under_address_limit_never_abort),
		SVC_TEST(guard_destroy_inside_application_rcu_reader),
		SVC_TEST(guard_destroy_not_delayed_by_other_thread_reader),
	};

	return svc_main(argc, argv, "service.guard", all, sizeof(all) / sizeof(all[0]));
}
