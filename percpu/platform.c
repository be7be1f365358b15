/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * platform.c - the ground floor of percpu/: the clock, the fences, and the
 * service's own threads (start, name, CPU pinning, the creator's scheduling).
 * Everything above calls down here; nothing here calls up (service.h,
 * "platform.c").
 */
#define _GNU_SOURCE
#include "service.h"
#include "test_hooks.h"

#include <errno.h>
#include <linux/membarrier.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifdef SPOKE_TEST_HOOKS
void (*_Atomic spoke_test_hook)(enum spoke_hook point);
#endif

/* --- the clock ---------------------------------------------------------------- */

uint64_t spoke_now_ns(void)
{
	return spoke_clock_ns();
}

unsigned spoke_online_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n < 1 ? 1 : (unsigned)n;
}

/* --- fences --------------------------------------------------------------------- */

/*
 * A store-load handshake between a frequent side and a rare one (a pool
 * worker and an attach, managed.c): spoke_light_fence on the frequent side,
 * spoke_heavy_fence on the rare one.
 */
void spoke_heavy_fence(const struct spoke *s)
{
	struct timespec pause = {0, 1000000};

	if (!s->asym_fence) {
		spoke_full_fence();
		return;
	}
	/*
	 * Registered, so it cannot be unsupported; it may fail for want of
	 * memory (a cpumask), and then the light side's compiler barrier is
	 * not enough: no fallback is sound, since threads already rely on it.
	 * Retry for a second, then stop loudly rather than race silently.
	 */
	for (int i = 0; i < 1000; i++) {
		if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0)
			return;
		if (errno != ENOMEM && errno != EAGAIN && errno != EINTR)
			break;
		nanosleep(&pause, NULL);
	}
	fprintf(stderr, "spoke: membarrier failed (%s) after it was registered: aborting\n",
		strerror(errno));
	abort();
}

/* Register for spoke_heavy_fence's membarrier; without it both fences are full ones. */
void spoke_fence_init(struct spoke *s)
{
	s->asym_fence =
		syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
}

/* --- the service's own threads ------------------------------------------------ */

/*
 * What every thread spoke starts inherits from the thread that calls
 * spoke_create, written down now rather than inherited from whichever
 * thread starts it, so that a managed thread that spoke_detach starts on a
 * server's loop thread (its own policy, priority or CPUs) is like the ones
 * spoke_create starts. The CPUs go into the thread attributes; the policy
 * is applied by the thread itself as it starts (spoke_thread_adopt_sched),
 * since thread attributes cannot carry SCHED_BATCH or SCHED_IDLE. An
 * affinity glibc cannot read (more CPUs than a cpu_set_t holds) is left to
 * inheritance.
 */
int spoke_thread_attr_init(struct spoke *s)
{
	cpu_set_t cpus;
	int err = pthread_attr_init(&s->thread_attr);

	if (err)
		return -err;
	s->thread_attr_live = true;
	err = pthread_getschedparam(pthread_self(), &s->sched_policy, &s->sched_param);
	if (!err && pthread_getaffinity_np(pthread_self(), sizeof(cpus), &cpus) == 0)
		err = pthread_attr_setaffinity_np(&s->thread_attr, sizeof(cpus), &cpus);
	return -err;
}

/* Undo spoke_thread_attr_init (also after a failed or partial one). */
void spoke_thread_attr_fini(struct spoke *s)
{
	if (s->thread_attr_live)
		pthread_attr_destroy(&s->thread_attr);
	s->thread_attr_live = false;
}

/*
 * A thread spoke started, first thing: take the creator's policy. Best
 * effort: raising it (to a real-time one) may need a privilege that the
 * process has lost since; the thread then keeps the starter's.
 */
void spoke_thread_adopt_sched(const struct spoke *s)
{
	(void)pthread_setschedparam(pthread_self(), s->sched_policy, &s->sched_param);
}

/*
 * A spoke thread, first thing: its name, as top, ps -L and /proc/PID/task/
 * show it ("spoke-shard-3", "spoke-pool-0"; at most 15 characters, which
 * 256 shards and 1024 workers fit).
 */
void spoke_thread_name(const char *kind, unsigned index)
{
	char name[16];

	snprintf(name, sizeof(name), "spoke-%s-%u", kind, index);
	(void)pthread_setname_np(pthread_self(), name);
}

/* Pin the calling thread to cpu (-1: leave it). */
void spoke_thread_pin(int cpu)
{
	cpu_set_t set;

	if (cpu < 0 || cpu >= CPU_SETSIZE)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	/* Best effort: a CPU outside the allowed set (containers) just stays unpinned. */
	(void)pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

/*
 * Start one of the service's own threads (shard or pool). It is created with
 * every signal blocked, so the application's signals go to its own threads,
 * and so that a thread started by spoke_detach does not take on the mask of
 * the event loop that detached. Returns 0 or -errno of pthread_create.
 */
int spoke_thread_start(const struct spoke *s, pthread_t *t, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	int err;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(t, &s->thread_attr, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return -err;
}

/*
 * A thread waiting for another that only has a few instructions left to run
 * (a producer between its tail swap and its link, a detach about to record
 * its new thread): yield at first, then sleep 20 us at a time, so that a
 * waiter of a higher real-time priority on the same CPU lets it run.
 */
void spoke_yield_to_other_thread(unsigned attempt)
{
	const struct timespec pause = {.tv_nsec = 20000};

	if (attempt < 16)
		sched_yield();
	else
		nanosleep(&pause, NULL);
}
