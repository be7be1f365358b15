/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * api_lifecycle.c - an instance's life: spoke_create, spoke_destroy and
 * spoke_shards, called by the thread that makes or ends it (and any thread,
 * for spoke_shards).
 *
 * Shutdown: every call counts itself in its thread's arena and reads
 * `stopping` (guard.h spoke_call_enter). spoke_destroy sets `stopping` and
 * waits until no call is counted: a call either saw `stopping`
 * (-ESHUTDOWN) or is waited for. A second drain before the free lets calls
 * that began while destroy ran read `stopping` in memory that is still
 * there.
 */
#define _GNU_SOURCE
#include "api.h"
#include "guard.h"
#include "service.h"
#include "test_hooks.h"

#include <errno.h>

static _Atomic uint64_t next_serial = 1;

static int build_maps(struct spoke *s)
{
	s->ncpus = spoke_online_cpus();
	s->cpu_shard = calloc(s->ncpus, sizeof(*s->cpu_shard));
	s->lawn_shard = calloc(s->nshards, sizeof(*s->lawn_shard));
	if (!s->cpu_shard || !s->lawn_shard)
		return -ENOMEM;
	for (unsigned c = 0; c < s->ncpus; c++)
		s->cpu_shard[c] = c % s->nshards;
	for (unsigned k = s->nshards; k-- > 0;) {
		if (s->shards[k].cpu >= 0 && (unsigned)s->shards[k].cpu < s->ncpus)
			s->cpu_shard[s->shards[k].cpu] = k; /* lowest shard of a CPU wins */
		if (s->shards[k].lawn)
			s->lawn_shard[s->nlawn++] = k;
	}
	return 0;
}

static void free_all(struct spoke *s)
{
	if (s->shards)
		for (unsigned k = 0; k < s->nshards; k++)
			if (s->shards[k].wheel)
				spoke_shard_fini(&s->shards[k]);
	free(s->shards);
	free(s->cpu_shard);
	free(s->lawn_shard);
	spoke_arenas_free(s);
	if (s->arena_key_live)
		spoke_arena_key_delete(s);
	spoke_thread_attr_fini(s);
	free(s);
}

/* Also on spoke_create's error path: the shard array may not exist yet. */
static void stop_threads(struct spoke *s)
{
	for (unsigned k = 0; s->shards && k < s->nshards; k++)
		spoke_shard_stop(&s->shards[k]);
	SPOKE_HOOK(SPOKE_HOOK_SHARDS_STOPPED);
	spoke_pool_stop(s);
}

int spoke_create(struct spoke **out, const struct spoke_config *cfg)
{
	struct spoke_config defaults;
	struct spoke *s;
	int err;

	if (!out)
		return -EINVAL;
	if (!cfg) {
		spoke_config_init(&defaults);
		cfg = &defaults;
	}
	err = spoke_config_check(cfg, NULL, 0);
	if (err)
		return err;
	s = spoke_zalloc_lines(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->cfg = *cfg;
	if (s->cfg.shards == 0)
		s->cfg.shards = default_shards();
	if (!s->cfg.engine)
		s->cfg.engine = "hierarchical";
	s->cfg.shard_overrides = NULL; /* copied below as needed by shard init */
	s->serial = atomic_fetch_add(&next_serial, 1);
	s->nshards = s->cfg.shards;
	s->nworkers = cfg->callback_threads_per_shard ? cfg->callback_threads_per_shard * s->nshards
						      : cfg->callback_threads;
	spoke_fence_init(s);
	err = spoke_arena_key_create(s, spoke_detach_at_exit);
	if (err) {
		free(s);
		return err;
	}
	s->arena_key_live = true;
	err = spoke_thread_attr_init(s);
	s->shards = spoke_zalloc_lines(s->nshards, sizeof(*s->shards));
	if (!err && !s->shards)
		err = -ENOMEM;
	s->ncpus = spoke_online_cpus();
	s->cfg.shard_overrides = cfg->shard_overrides;
	for (unsigned k = 0; !err && k < s->nshards; k++)
		err = spoke_shard_init(s, &s->shards[k], k);
	s->cfg.shard_overrides = NULL; /* the caller's array need not outlive create */
	s->cfg.n_shard_overrides = 0;
	if (!err)
		err = build_maps(s);
	if (!err)
		err = spoke_pool_start(s);
	for (unsigned k = 0; !err && k < s->nshards; k++)
		err = spoke_shard_launch(&s->shards[k]);
	if (err) {
		stop_threads(s);
		free_all(s);
		return err;
	}
	*out = s;
	return 0;
}

/*
 * A callback that destroys its own instance would wait for itself (its run,
 * its thread's join): no return value can report that, so it stops the
 * process with a message naming the misuse, not a crash or a hang.
 */
static void abort_if_destroy_in_callback(struct spoke *s)
{
	if (spoke_in_callback_of(s))
		abort_misuse(
			"spoke_destroy called from inside a timer callback of the same instance",
			"it would wait for that callback to return");
}

/*
 * In a child of fork(), an instance inherited from the parent has none of
 * its threads (arena.c marked it stopping and forked): free what it holds,
 * waiting for nothing, joining nothing. Also from a callback of it, when
 * the child was forked inside one: the callback then waits for nothing
 * either, as no other thread runs there (it must not return into the
 * freed instance: such a child leaves with _exit or exec).
 */
static void destroy_in_fork_child(struct spoke *s, spoke_fn *release)
{
	if (release)
		spoke_arenas_release_pending(s, release);
	spoke_pool_forget(s);
	free_all(s);
}

static void destroy_with(struct spoke *s, spoke_fn *release)
{
	struct spoke_wait wait = {.kind = SPOKE_WAIT_DESTROY, .s = s};
	int cancel_state;

	if (!s)
		return;
	/* First: a child forked inside a callback has that callback on its stack. */
	if (s->forked) {
		destroy_in_fork_child(s, release);
		return;
	}
	abort_if_destroy_in_callback(s);
	/* A cycle through this destroy aborts, or a cancel_sync in it is broken (waits.c). */
	spoke_waits_enter_destroy(&wait);
	/* nanosleep and pthread_join are cancellation points: destroy runs to its end. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);
	atomic_store_explicit(&s->stopping, 1, memory_order_seq_cst);
	/* Attached loops asleep on their wake fd: come and see -ESHUTDOWN. */
	for (unsigned k = 0; k < s->nshards; k++)
		spoke_shard_signal_stop(&s->shards[k]);
	/* Calls that did not see `stopping` end; the others return -ESHUTDOWN. */
	spoke_calls_drain(s);
	/* From now on a thread that exits leaves its arena alone (arena.c: a
	 * destructor already running finishes first, under the arena lock). */
	spoke_arena_key_delete(s);
	s->arena_key_live = false;
	stop_threads(s);
	spoke_waits_leave(&wait);
	if (release)
		spoke_arenas_release_pending(s, release);
	/* Calls that began while we ran have read `stopping` and left. */
	spoke_calls_drain(s);
	free_all(s);
	pthread_setcancelstate(cancel_state, NULL);
}

void spoke_destroy(struct spoke *s)
{
	destroy_with(s, NULL);
}

void spoke_destroy_release(struct spoke *s, spoke_fn *release)
{
	destroy_with(s, release);
}

unsigned spoke_shards(const struct spoke *s)
{
	struct spoke *me = (struct spoke *)s; /* the call guard looks up the caller's arena */
	struct arena *a;
	unsigned n;

	if (spoke_call_enter(me, &a) != 0)
		return 0;
	n = s->nshards;
	spoke_call_leave(a, 0);
	return n;
}
