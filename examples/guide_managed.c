/* SPDX-License-Identifier: MIT */
/*
 * guide_managed.c - the managed service (docs/guide.md, "Managed shards"):
 * spoke runs a shard thread per CPU and a callback pool; any thread starts,
 * resets and cancels timers.
 *
 * Worker threads give each request a deadline and cancel it when the work is
 * done in time: whichever of the cancel and the callback wins owns the
 * request and frees it. A session's idle timeout is pushed back by every
 * request, from every worker. A periodic timer reports on the pool. The
 * program checks what it shows: every deadline ended exactly once and no
 * callback ran early. Exit status 0 if so, 1 if not.
 */
#include <spoke/spoke.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define MS	 UINT64_C(1000000)
#define WORKERS	 4
#define REQUESTS 500 /* per worker */
#define IDLE_NS	 (100 * MS)

struct request {
	uint64_t not_before_ns; /* its deadline: the callback must not run earlier */
				/* ... the request itself ... */
};

static struct spoke *svc;
static spoke_id session_idle; /* reset by every request */
static atomic_uint timed_out, done_in_time, early, idle_runs, reports;

/* A pool thread. The deadline won: the request is this callback's to end. */
static void on_deadline(void *arg)
{
	struct request *r = arg;

	if (spoke_now_ns() < r->not_before_ns)
		atomic_fetch_add(&early, 1);
	atomic_fetch_add(&timed_out, 1); /* answer "504", log, ... */
	free(r);
}

static void on_session_idle(void *arg)
{
	(void)arg;
	atomic_fetch_add(&idle_runs, 1); /* log the session out */
}

static void on_report(void *arg)
{
	(void)arg;
	atomic_fetch_add(&reports, 1); /* e.g. spoke_stats() into a metrics exporter */
}

/* A worker thread: a deadline for each request, cancelled when the work is done in time. */
static void *worker(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;

	for (int i = 0; i < REQUESTS; i++) {
		struct request *r = malloc(sizeof(*r));
		uint64_t delay = (1 + rand_r(&seed) % 20) * MS;
		spoke_id id; /* r may be freed by its callback: keep the id here */

		if (!r)
			return NULL;
		r->not_before_ns = spoke_now_ns() + delay;
		if (spoke_start(svc, delay, on_deadline, r, &id) != 0) {
			free(r);
			continue;
		}
		spoke_reset(svc, session_idle, IDLE_NS); /* activity: push the idle timeout back */
		/* ... the work: here every other request is done at once ... */
		if (rand_r(&seed) % 2 == 0 && spoke_cancel(svc, id) == 0) {
			atomic_fetch_add(&done_in_time, 1); /* the callback will never run */
			free(r);
		} /* else the deadline won: on_deadline frees r */
	}
	return NULL;
}

int main(void)
{
	struct spoke_config cfg;
	pthread_t t[WORKERS];
	spoke_id report;
	char why[128];
	unsigned ended;

	spoke_config_init(&cfg); /* a shard per CPU, 1 ms ticks, a pool thread per shard */
	if (spoke_config_check(&cfg, why, sizeof(why)) != 0) {
		fprintf(stderr, "guide_managed: config: %s\n", why);
		return 1;
	}
	if (spoke_create(&svc, &cfg) != 0)
		return 1;
	if (spoke_start(svc, IDLE_NS, on_session_idle, NULL, &session_idle) != 0 ||
	    spoke_start_periodic(svc, 10 * MS, on_report, NULL, &report) != 0)
		return 1;
	for (uintptr_t i = 0; i < WORKERS; i++)
		pthread_create(&t[i], NULL, worker, (void *)(i + 1));
	for (int i = 0; i < WORKERS; i++)
		pthread_join(t[i], NULL);
	/* Every deadline ends one way or the other; the session goes idle after the last. */
	for (int waited_ms = 0; waited_ms < 30000; waited_ms++) {
		ended = atomic_load(&timed_out) + atomic_load(&done_in_time);
		if (ended == WORKERS * REQUESTS && atomic_load(&idle_runs) == 1 &&
		    atomic_load(&reports) > 0)
			break;
		nanosleep(&(struct timespec){0, 1000000}, NULL);
	}
	spoke_cancel_sync(svc, report); /* no report runs after this returns */
	spoke_destroy(svc);
	printf("guide_managed: %u deadlines: %u done in time, %u timed out; idle %u, "
	       "reports %u, early %u\n",
	       WORKERS * REQUESTS, atomic_load(&done_in_time), atomic_load(&timed_out),
	       atomic_load(&idle_runs), atomic_load(&reports), atomic_load(&early));
	return ended == WORKERS * REQUESTS && atomic_load(&idle_runs) == 1 &&
			       atomic_load(&reports) > 0 && atomic_load(&early) == 0
		       ? 0
		       : 1;
}
