/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * api.h - what the files of the public functions (api_*.c) share: a few
 * small static helpers, and the instance's thread-exit hook.
 *
 *   api_config.c     spoke_config_init, spoke_config_check: the caller's config
 *   api_lifecycle.c  spoke_create, spoke_destroy, spoke_shards: the thread that
 *                    makes or ends an instance
 *   api_timers.c     start / reset / cancel / cancel_sync / remaining / self /
 *                    set_period: any thread, on a timer (the hot paths, inlined
 *                    into one another there)
 *   api_attach.c     attach, detach, poll, wake fd, next deadline: the thread
 *                    that drives an attached shard
 *   api_stats.c      spoke_stats, spoke_dump: any thread, reading every shard
 */
#ifndef SPOKE_PERCPU_API_H
#define SPOKE_PERCPU_API_H

#include "service.h"

#include <stdio.h>
#include <stdlib.h>

/* The shards a config of 0 shards gets: one per online CPU, up to the maximum. */
static inline unsigned default_shards(void)
{
	unsigned n = spoke_online_cpus();

	return n > SPOKE_MAX_SHARDS ? SPOKE_MAX_SHARDS : n;
}

/* A misuse that no return value can report: name it and stop the process. */
static inline _Noreturn void abort_misuse(const char *what, const char *why)
{
	fprintf(stderr, "spoke: %s (misuse: %s); aborting\n", what, why);
	abort();
}

/*
 * The deadline of the next run of h, whose word was st (generation of the
 * id), or 0 if h's generation ended while we read: a periodic timer's part
 * lives in its second slot, which is freed only after the first slot's
 * generation has moved on, so an unchanged generation after the (acquire)
 * read says the read was of this timer. A reset its owner has not applied
 * yet (RESET: the owner, or the runner as the run ends, moves the next run
 * to deadline_ns) decides over a periodic timer's base_ns. While RUNNING,
 * base_ns is the deadline of the run in progress (run.c finish_run stores
 * the next one only after the run has ended), so the next run is a period
 * on, or earlier if the run ends late and periods are skipped.
 */
static inline uint64_t next_run_ns(struct spoke_handle *h, uint64_t st)
{
	struct spoke_periodic *per;
	uint64_t d, period;
	spoke_fn *fn;
	void *aux;

	if (!spoke_handle_peek(h, spoke_st_gen(st), &fn, &aux))
		return 0;
	if (spoke_st_kind(st) != SPOKE_KIND_PERIODIC || (st & SPOKE_ST_RESET)) {
		d = atomic_load_explicit(&h->deadline_ns, memory_order_acquire);
	} else {
		per = &((struct spoke_handle *)aux)->per;
		period = atomic_load_explicit(&per->period_ns, memory_order_relaxed);
		d = atomic_load_explicit(&per->base_ns, memory_order_acquire);
		/* Running: base is this run's deadline; the next one is a period on. */
		if (spoke_st_status(st) == SPOKE_ST_RUNNING &&
		    __builtin_add_overflow(d, period, &d))
			d = UINT64_MAX;
	}
	if (spoke_st_gen(atomic_load_explicit(&h->state, memory_order_acquire)) != spoke_st_gen(st))
		return 0;
	return d;
}

/* Is a timer whose word is st pending (its next run still to come)? */
static inline bool pending_word(uint64_t st)
{
	switch (spoke_st_status(st)) {
	case SPOKE_ST_ARMED:
	case SPOKE_ST_DISPATCHED:
		return true;
	case SPOKE_ST_RUNNING:
		return spoke_st_kind(st) == SPOKE_KIND_PERIODIC && !(st & SPOKE_ST_STOP);
	default:
		return false;
	}
}

/*
 * The instance's thread-exit hook (api_attach.c; spoke_create registers it
 * with spoke_arena_key_create, arena.c runs it on the exiting thread).
 */
void spoke_detach_at_exit(struct arena *a);

#endif /* SPOKE_PERCPU_API_H */
