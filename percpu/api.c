/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * api.c - the public functions of spoke.h: configuration, life cycle, and
 * the start / reset / cancel paths, which any thread may take.
 *
 * Each start/reset/cancel is decided by compare-and-swap on the timer's state
 * word (state.h), never by a lock. If the caller is the owner of the timer's
 * shard (an attached thread, or a callback running inline on the shard
 * thread) it changes the engine itself; otherwise it sets SPOKE_ST_INBOX and
 * posts the handle to the owner's inbox, unless INBOX was already set (then
 * the queued message carries the new state too).
 *
 * Shutdown: every call counts itself in its thread's arena and reads
 * `stopping` (guard.h spoke_call_enter). spoke_destroy sets `stopping` and
 * waits until no call is counted: a call either saw `stopping`
 * (-ESHUTDOWN) or is waited for. A second drain before the free lets calls
 * that began while destroy ran read `stopping` in memory that is still
 * there.
 */
#define _GNU_SOURCE
#include "guard.h"
#include "probes.h"
#include "protocol.h"
#include "service.h"
#include "test_hooks.h"

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_TICK_NS	     1000000ull
#define MIN_TICK_NS	     1000ull
#define MAX_TICK_NS	     3600000000000ull
#define DEFAULT_INBOX_BATCH  4096
#define DEFAULT_RESCUE_NS    10000000ull /* spoke.h: struct spoke_config says why */
/*
 * Messages a shard's inbox may hold before other threads' starts to it are
 * refused. Each is a queued handle: 64 bytes (128 for a periodic start), so
 * a stalled shard holds at most 64 MiB of its senders' memory (128 MiB),
 * and its owner handles the backlog in about 0.1-0.7 s when it comes back
 * (docs/api.md has the figures). A healthy owner takes its inbox at least
 * every two ticks and never nears it: that would take 500 M starts/s.
 */
#define DEFAULT_INBOX_LIMIT  (1u << 20)
#define MAX_CALLBACK_THREADS 1024

static _Atomic uint64_t next_serial = 1;

static unsigned default_shards(void)
{
	unsigned n = spoke_online_cpus();

	return n > SPOKE_MAX_SHARDS ? SPOKE_MAX_SHARDS : n;
}

void spoke_config_init(struct spoke_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->shards = default_shards();
	cfg->tick_ns = DEFAULT_TICK_NS;
	cfg->engine = "hierarchical";
	cfg->callback_threads = cfg->shards;
	cfg->pin_threads = true;
	cfg->inbox_batch = DEFAULT_INBOX_BATCH;
	cfg->inbox_limit = DEFAULT_INBOX_LIMIT;
	cfg->rescue_after_ns = DEFAULT_RESCUE_NS;
}

/*
 * --- checking a configuration ------------------------------------------------
 *
 * spoke_config_check is the one validator: spoke_create calls it, and so
 * can a tool that wants to tell its user which field is wrong. Each rule is
 * a small helper that writes "field: value, the rule" into `why` and
 * returns -EINVAL; a field of a shard override is named with its index
 * ("shard_overrides[2].tick_ns"). The wheel geometry is the engines' own
 * business (lib/, spoke_engine_new): it is tried by creating the engine.
 */

/* A shard's main engine must accept every delay and never fail a start. */
static const char *const shard_engines[] = {"hierarchical", "hashed", "hashed-sorted", "list",
					    "sorted-list"};

/* What a config check writes its verdict into (why may be NULL). */
struct verdict {
	char *why;
	size_t len;
};

/* Write "<at><field>: <what>" into v and return -EINVAL. */
static int __attribute__((format(printf, 4, 5)))
refuse(struct verdict *v, const char *at, const char *field, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (!v->why || v->len == 0)
		return -EINVAL;
	n = snprintf(v->why, v->len, "%s%s: ", at, field);
	if (n >= 0 && (size_t)n < v->len) {
		va_start(ap, fmt);
		vsnprintf(v->why + n, v->len - (size_t)n, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

static int check_tick(struct verdict *v, const char *at, uint64_t tick_ns, bool zero_keeps)
{
	if (tick_ns == 0 && zero_keeps)
		return 0;
	if (tick_ns < MIN_TICK_NS)
		return refuse(
			v, at, "tick_ns", "%" PRIu64 " is below the minimum of %llu ns%s", tick_ns,
			MIN_TICK_NS,
			tick_ns ? ""
				: " (a zeroed config is invalid: start from spoke_config_init)");
	if (tick_ns > MAX_TICK_NS)
		return refuse(v, at, "tick_ns", "%" PRIu64 " is above the maximum of %llu ns (1 h)",
			      tick_ns, MAX_TICK_NS);
	return 0;
}

static int check_engine(struct verdict *v, const char *at, const char *name)
{
	char list[96] = "";

	if (!name)
		return 0;
	for (size_t i = 0; i < sizeof(shard_engines) / sizeof(shard_engines[0]); i++) {
		if (strcmp(name, shard_engines[i]) == 0)
			return 0;
		strcat(strcat(list, i ? ", " : ""), shard_engines[i]);
	}
	return refuse(v, at, "engine",
		      "\"%.32s\" is not a shard's engine (one of: %s; wheel is bounded, heap and "
		      "lawn allocate on a start)",
		      name, list);
}

/* The slack of a shard whose tick is tick_ns: at least tick/64, rounded up. */
static int check_slack(struct verdict *v, const char *at, uint64_t slack_ns, uint64_t tick_ns)
{
	if (spoke_stage_slots(tick_ns, slack_ns) != 0)
		return 0;
	return refuse(v, at, "slack_ns",
		      "%" PRIu64 " is below 1/64 of the tick of %" PRIu64 " ns it applies to "
		      "(at least %" PRIu64 " ns, or 0 for tick/4)",
		      slack_ns, tick_ns, spoke_div_round_up(tick_ns, 64));
}

static int check_override(struct verdict *v, const struct spoke_config *c, unsigned i)
{
	const struct spoke_shard_config *o = &c->shard_overrides[i];
	char at[32];
	int err;

	snprintf(at, sizeof(at), "shard_overrides[%u].", i);
	if (o->cpu < -1 || o->cpu >= CPU_SETSIZE)
		return refuse(v, at, "cpu", "%d is neither -1 (the default) nor a CPU below %d",
			      o->cpu, CPU_SETSIZE);
	err = check_tick(v, at, o->tick_ns, true);
	if (!err)
		err = check_engine(v, at, o->engine);
	if (!err)
		err = check_slack(v, o->slack_ns ? at : "", o->slack_ns ? o->slack_ns : c->slack_ns,
				  o->tick_ns ? o->tick_ns : c->tick_ns);
	return err;
}

static int check_pool(struct verdict *v, const struct spoke_config *c, unsigned shards)
{
	if (c->callback_threads > MAX_CALLBACK_THREADS)
		return refuse(v, "", "callback_threads", "%u is above the maximum of %u",
			      c->callback_threads, MAX_CALLBACK_THREADS);
	if (c->callback_threads_per_shard && c->callback_threads == 0)
		return refuse(v, "", "callback_threads_per_shard",
			      "%u asks for a pool, but callback_threads 0 asks for none",
			      c->callback_threads_per_shard);
	if (c->callback_threads_per_shard > MAX_CALLBACK_THREADS / shards)
		return refuse(v, "", "callback_threads_per_shard",
			      "%u workers x %u shards is above the maximum of %u workers",
			      c->callback_threads_per_shard, shards, MAX_CALLBACK_THREADS);
	return 0;
}

static int check_shards(struct verdict *v, const struct spoke_config *c, unsigned shards)
{
	if (shards > SPOKE_MAX_SHARDS)
		return refuse(v, "", "shards", "%u is above the maximum of %u (SPOKE_MAX_SHARDS)",
			      shards, SPOKE_MAX_SHARDS);
	if (shards < 64 && (c->lawn_shards >> shards) != 0)
		return refuse(v, "", "lawn_shards", "bit %d is set, but there are %u shards",
			      __builtin_ctzll(c->lawn_shards >> shards) + (int)shards, shards);
	if (c->n_shard_overrides > shards)
		return refuse(v, "", "n_shard_overrides", "%u is more than the %u shards",
			      c->n_shard_overrides, shards);
	if (c->n_shard_overrides && !c->shard_overrides)
		return refuse(v, "", "shard_overrides", "NULL, with n_shard_overrides %u",
			      c->n_shard_overrides);
	return 0;
}

/*
 * The engine and geometry of shard k, as shard.c spoke_shard_init reads them;
 * mine[f] tells whether geometry field f (level_bits, levels, table_size)
 * comes from the shard's override.
 */
static const char *shard_geometry(const struct spoke_config *c, unsigned k,
				  struct spoke_engine_params *p, bool mine[3])
{
	const struct spoke_shard_config *o =
		k < c->n_shard_overrides ? &c->shard_overrides[k] : NULL;

	mine[0] = o && o->level_bits;
	mine[1] = o && o->levels;
	mine[2] = o && o->table_size;
	*p = (struct spoke_engine_params){
		.level_bits = mine[0] ? o->level_bits : c->level_bits,
		.levels = mine[1] ? o->levels : c->levels,
		.table_size = mine[2] ? o->table_size : c->table_size,
	};
	if (o && o->engine)
		return o->engine;
	return c->engine ? c->engine : "hierarchical";
}

/* 0, -EINVAL or -ENOMEM: whether spoke_engine_new takes this geometry. */
static int try_geometry(const char *engine, const struct spoke_engine_params *p)
{
	struct spoke_engine *e;
	int err = spoke_engine_new(&e, engine, p);

	if (!err)
		spoke_engine_free(e);
	return err;
}

/* The geometry of shard k; when it is refused, each field alone names the culprit. */
static int check_geometry(struct verdict *v, const struct spoke_config *c, unsigned k)
{
	static const char *const field[] = {"level_bits", "levels", "table_size"};
	struct spoke_engine_params p, one[3];
	bool mine[3];
	const char *engine = shard_geometry(c, k, &p, mine);
	char at[32];
	int err;

	if (!p.level_bits && !p.levels && !p.table_size)
		return 0; /* the engine's defaults */
	err = try_geometry(engine, &p);
	if (err != -EINVAL)
		return err;
	one[0] = (struct spoke_engine_params){.level_bits = p.level_bits};
	one[1] = (struct spoke_engine_params){.levels = p.levels};
	one[2] = (struct spoke_engine_params){.table_size = p.table_size};
	for (unsigned f = 0; f < 3; f++) {
		size_t value = f == 0 ? p.level_bits : f == 1 ? p.levels : p.table_size;

		if (!value || try_geometry(engine, &one[f]) != -EINVAL)
			continue;
		at[0] = '\0';
		if (mine[f])
			snprintf(at, sizeof(at), "shard_overrides[%u].", k);
		return refuse(v, at, field[f],
			      "%zu is refused by engine %s (its valid values: struct "
			      "spoke_engine_params in spoke/engine.h)",
			      value, engine);
	}
	return refuse(v, "", "level_bits, levels, table_size",
		      "refused together by engine %s (shard %u)", engine, k);
}

int spoke_config_check(const struct spoke_config *c, char *why, size_t len)
{
	struct verdict v = {why, len};
	unsigned shards;
	int err;

	if (why && len)
		why[0] = '\0';
	if (!c)
		return 0; /* the defaults */
	shards = c->shards ? c->shards : default_shards();
	err = check_shards(&v, c, shards);
	if (!err)
		err = check_tick(&v, "", c->tick_ns, false);
	if (!err)
		err = check_engine(&v, "", c->engine);
	if (!err)
		err = check_pool(&v, c, shards);
	/* The global slack applies to the shards without an override. */
	if (!err && c->n_shard_overrides < shards)
		err = check_slack(&v, "", c->slack_ns, c->tick_ns);
	for (unsigned i = 0; !err && i < c->n_shard_overrides; i++)
		err = check_override(&v, c, i);
	/* Shards past the overrides all run the global geometry: one try covers them. */
	for (unsigned k = 0; !err && k < shards && k <= c->n_shard_overrides; k++)
		err = check_geometry(&v, c, k);
	return err;
}

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

static void detach_at_exit(struct arena *a); /* the instance's thread-exit hook */

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
	err = spoke_arena_key_create(s, detach_at_exit);
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

/* A misuse that no return value can report: name it and stop the process. */
static _Noreturn void abort_misuse(const char *what, const char *why)
{
	fprintf(stderr, "spoke: %s (misuse: %s); aborting\n", what, why);
	abort();
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

/* --- starting ------------------------------------------------------------- */

/*
 * The deadline of a start or reset on sh: now + delay, saturated. Delay 0
 * means the next tick of sh (a deadline that has passed would run at the
 * owner's next turn, and a callback re-arming itself so would run once a
 * turn); any other delay is run within the slack of its deadline.
 */
static uint64_t deadline_on(const struct shard *sh, uint64_t delay_ns)
{
	uint64_t now = spoke_clock_ns(), d;

	if (delay_ns == 0)
		return spoke_shard_next_tick_ns(sh, now);
	if (__builtin_add_overflow(now, delay_ns, &d))
		return UINT64_MAX;
	return d;
}

/*
 * The deadline of spoke_start_at on sh: the one asked, unless it has passed:
 * then the next tick of sh, as delay 0 would give. The owner of sh compares
 * with the time of its last turn instead of reading the clock: the caller
 * brought the time, so an attached loop's start_at costs no clock read. A
 * deadline between that turn's time and now is armed as asked: it is due,
 * and the next turn runs it (never this one, whose time is older), which is
 * what "the next tick" promises a callback that starts one.
 */
static uint64_t deadline_at(const struct shard *sh, uint64_t deadline_ns, bool owner)
{
	uint64_t now = owner ? sh->clock_ns : spoke_clock_ns();

	return deadline_ns > now ? deadline_ns : spoke_shard_next_tick_ns(sh, now);
}

/* Where a start goes: a shard by index, or one of these. */
#define SHARD_HOME SPOKE_ANY_SHARD   /* the caller's own, else its CPU's */
#define SHARD_TTL  (UINT32_MAX - 1u) /* the Lawn shard of the TTL */

/* What a start asks for: when (a delay, or an absolute deadline), where, what. */
struct start_req {
	unsigned shard; /* index, SHARD_HOME or SHARD_TTL */
	unsigned kind;
	bool absolute; /* when_ns is a deadline, else a delay */
	uint64_t when_ns;
	uint64_t period_ns;
	spoke_fn *fn;
	void *arg;
	bool movable; /* SPOKE_MOVABLE: a rescue may run it on another thread (rescue.c) */
};

/* Inside a call (s is alive): the shard a plain spoke_start uses; mine: spoke_shard_mine(s). */
static unsigned home_shard(struct spoke *s, const struct shard *mine)
{
	int cpu;

	if (mine)
		return mine->index;
	cpu = sched_getcpu();
	return cpu >= 0 && (unsigned)cpu < s->ncpus ? s->cpu_shard[cpu] : 0;
}

/* Lawn: each TTL's queue lives on exactly one shard (Fibonacci hash of the TTL). */
static unsigned ttl_shard(struct spoke *s, uint64_t ttl_ns)
{
	uint64_t h = ttl_ns * 0x9e3779b97f4a7c15ull;

	return s->lawn_shard[(h >> 32) % s->nlawn];
}

/* Inside a call: the shard index r goes to, or -EINVAL; mine: spoke_shard_mine(s). */
static int start_shard(struct spoke *s, const struct start_req *r, const struct shard *mine)
{
	if (r->shard == SHARD_HOME)
		return (int)home_shard(s, mine);
	if (r->shard == SHARD_TTL)
		return s->nlawn ? (int)ttl_shard(s, r->when_ns) : -EINVAL;
	return r->shard < s->nshards ? (int)r->shard : -EINVAL;
}

/* A new handle for r in arena a, filled in and not yet published; NULL: -ENOMEM. */
static inline __attribute__((always_inline)) struct spoke_handle *
start_handle(struct spoke *s, struct arena *a, const struct start_req *r, uint64_t deadline)
{
	struct spoke_handle *h = spoke_handle_alloc(a);

	if (!h)
		return NULL;
	/* Release: spoke_handle_peek reads them from other threads (service.h). */
	__atomic_store_n(&h->fn, r->fn, __ATOMIC_RELEASE);
	__atomic_store_n(&h->arg, r->arg, __ATOMIC_RELEASE);
	if (r->kind == SPOKE_KIND_PERIODIC) {
		struct spoke_handle *aux = spoke_handle_alloc_aux(a);

		if (!aux) {
			spoke_handle_release(s, h, 0); /* never armed: its generation stays */
			return NULL;
		}
		atomic_store_explicit(&aux->per.period_ns, r->period_ns, memory_order_relaxed);
		atomic_store_explicit(&aux->per.base_ns, deadline, memory_order_relaxed);
		aux->per.arg = r->arg;
		__atomic_store_n(&h->arg, (void *)aux, __ATOMIC_RELEASE);
	}
	h->node = (struct spoke_timer){0}; /* spoke_timer_init, inline */
	atomic_store_explicit(&h->deadline_ns, deadline, memory_order_release);
	return h;
}

/*
 * A start that got no handle: its place in the inbox, taken by
 * spoke_any_admit before the handle (so that a refused start touches no
 * arena), goes back.
 */
static int start_no_handle(unsigned k, struct arena *a, bool own)
{
	if (!own)
		spoke_any_unadmit(k, a);
	return -ENOMEM;
}

/*
 * Inline, with start_handle, into the plain, _at and _on starts: with the
 * request a constant the choices of shard, deadline and kind fold away, and
 * the call is one frame (35 instructions less a pair than a call of one
 * out-of-line start_timer with the request in memory). Periodic and TTL
 * starts share one copy, start_timer_outlined.
 */
static inline __attribute__((always_inline)) int
start_timer(struct spoke *s, const struct start_req *r, spoke_id *id)
{
	struct spoke_handle *h;
	struct shard *sh, *mine;
	struct arena *a;
	uint64_t deadline, st;
	spoke_id new_id;
	bool own;
	int k, err = spoke_call_enter(s, &a); /* first: destroy waits for all that follows */

	if (err)
		return err;
	/* Once: the atomics below would make the compiler read the thread-locals again. */
	mine = spoke_shard_mine(s);
	k = start_shard(s, r, mine);
	if (k < 0)
		return spoke_call_leave(a, k);
	sh = &s->shards[k];
	/*
	 * While a rescuer holds the shard (rescue.c) even its owner sends a
	 * message; the owner's starts are never refused (it is the one that
	 * drains the inbox).
	 */
	own = sh == mine && !spoke_owner_rescued(sh);
	if (sh != mine && !spoke_any_admit(sh, (unsigned)k, a))
		return spoke_call_leave(a, -ENOBUFS);
	deadline = r->absolute ? deadline_at(sh, r->when_ns, own) : deadline_on(sh, r->when_ns);
	h = start_handle(s, a, r, deadline);
	if (!h)
		return spoke_call_leave(a, start_no_handle((unsigned)k, a, sh == mine));
	st = spoke_st_armed(spoke_st_gen(atomic_load_explicit(&h->state, memory_order_relaxed)),
			    r->kind, (unsigned)k) |
	     (r->movable ? SPOKE_ST_MOVABLE : 0);
	new_id = spoke_make_id(spoke_st_gen(st), spoke_handle_slot_id(h));
	if (id)
		*id = new_id;
	SPOKE_PROBE3(start, new_id, k, deadline);
	if (own) {
		starter_publish(h, st, true);
		spoke_count(sh, CTR_STARTED, true);
		spoke_owner_arm_new(sh, h, deadline);
		spoke_note_due(sh, deadline);
	} else {
		starter_publish(h, st, false);
		if (sh == mine)
			spoke_any_post(sh, h, deadline); /* rescued: counted, never refused */
		else
			spoke_any_post_admitted(sh, h, deadline);
	}
	return spoke_call_leave(a, 0);
}

int spoke_start(struct spoke *s, uint64_t delay_ns, spoke_fn *fn, void *arg, spoke_id *id)
{
	if (!s || !fn)
		return -EINVAL;
	return start_timer(s,
			   &(struct start_req){.shard = SHARD_HOME,
					       .kind = SPOKE_KIND_ONESHOT,
					       .when_ns = delay_ns,
					       .fn = fn,
					       .arg = arg},
			   id);
}

int spoke_start_at(struct spoke *s, uint64_t deadline_ns, spoke_fn *fn, void *arg, spoke_id *id)
{
	if (!s || !fn)
		return -EINVAL;
	return start_timer(s,
			   &(struct start_req){.shard = SHARD_HOME,
					       .kind = SPOKE_KIND_ONESHOT,
					       .absolute = true,
					       .when_ns = deadline_ns,
					       .fn = fn,
					       .arg = arg},
			   id);
}

int spoke_start_on(struct spoke *s, unsigned shard, uint64_t delay_ns, spoke_fn *fn, void *arg,
		   spoke_id *id)
{
	if (!s || !fn || shard >= SPOKE_MAX_SHARDS)
		return -EINVAL;
	return start_timer(s,
			   &(struct start_req){.shard = shard,
					       .kind = SPOKE_KIND_ONESHOT,
					       .when_ns = delay_ns,
					       .fn = fn,
					       .arg = arg},
			   id);
}

static int start_timer_outlined(struct spoke *s, const struct start_req *r, spoke_id *id)
{
	return start_timer(s, r, id);
}

int spoke_start_periodic(struct spoke *s, uint64_t period_ns, spoke_fn *fn, void *arg, spoke_id *id)
{
	return spoke_start_flags(s, SPOKE_ANY_SHARD, period_ns, SPOKE_PERIODIC, fn, arg, id);
}

int spoke_start_ttl(struct spoke *s, uint64_t ttl_ns, spoke_fn *fn, void *arg, spoke_id *id)
{
	return spoke_start_flags(s, SPOKE_ANY_SHARD, ttl_ns, SPOKE_TTL, fn, arg, id);
}

int spoke_start_flags(struct spoke *s, unsigned shard, uint64_t when_ns, unsigned flags,
		      spoke_fn *fn, void *arg, spoke_id *id)
{
	unsigned how = flags & (SPOKE_PERIODIC | SPOKE_TTL | SPOKE_ABSOLUTE);
	struct start_req r = {.shard = shard,
			      .kind = SPOKE_KIND_ONESHOT,
			      .absolute = how == SPOKE_ABSOLUTE,
			      .when_ns = when_ns,
			      .fn = fn,
			      .arg = arg,
			      .movable = (flags & SPOKE_MOVABLE) != 0};

	if (!s || !fn || (flags & ~(SPOKE_PERIODIC | SPOKE_TTL | SPOKE_ABSOLUTE | SPOKE_MOVABLE)) ||
	    (how & (how - 1)) || (shard != SPOKE_ANY_SHARD && shard >= SPOKE_MAX_SHARDS))
		return -EINVAL;
	if (how == SPOKE_PERIODIC) {
		if (when_ns == 0)
			return -EINVAL;
		r.kind = SPOKE_KIND_PERIODIC;
		r.period_ns = when_ns;
	} else if (how == SPOKE_TTL) {
		if (shard != SPOKE_ANY_SHARD)
			return -EINVAL;
		r.kind = SPOKE_KIND_TTL;
		r.shard = SHARD_TTL;
	}
	return start_timer_outlined(s, &r, id);
}

/* --- cancel and reset -------------------------------------------------------- */

/*
 * Resolve an id to its handle and current state word; NULL if the id is
 * malformed or its generation is over.
 */
static struct spoke_handle *resolve(struct spoke *s, spoke_id id, uint64_t *st)
{
	struct spoke_handle *h = spoke_handle_lookup(s, id);

	if (!h)
		return NULL;
	*st = atomic_load_explicit(&h->state, memory_order_acquire);
	return spoke_st_gen(*st) == spoke_st_gen(id) ? h : NULL;
}

/*
 * Cancel on the owner thread (its home arena `home`): end the generation,
 * unlink and free at once (no message).
 */
static int cancel_direct(struct shard *sh, struct arena *home, struct spoke_handle *h, uint64_t st)
{
	if (!owner_cancel_direct(h, st))
		return -EAGAIN;
	spoke_owner_disarm_word(sh, h, st);
	spoke_count(sh, CTR_CANCELLED, true);
	spoke_handle_release_mine(sh->s, home, h, st);
	return 0;
}

/*
 * One attempt at cancelling; -EAGAIN means the state changed under us. The
 * owner cancels its own armed timer directly; anyone else marks the word
 * (protocol.h any_try_cancel) and, if it set INBOX, tells the owner.
 */
static int cancel_once(struct spoke *s, struct arena *a, struct spoke_handle *h, uint64_t st)
{
	struct shard *sh = &s->shards[spoke_st_shard(st)];
	bool post = false;
	int r;

	if (spoke_st_status(st) == SPOKE_ST_ARMED && !(st & (SPOKE_ST_INBOX | SPOKE_ST_WRITING)) &&
	    spoke_shard_mine(s) == sh && !spoke_owner_rescued(sh))
		return cancel_direct(sh, a, h, st);
	r = any_try_cancel(h, st, &post);
	if (r == 0 && post)
		spoke_any_post(sh, h, UINT64_MAX); /* unlink: not urgent */
	return r;
}

/* Inline: spoke_cancel is this and the guard, one frame. */
static inline __attribute__((always_inline)) int cancel_id(struct spoke *s, struct arena *a,
							   spoke_id id)
{
	for (;;) {
		uint64_t st;
		struct spoke_handle *h = resolve(s, id, &st);
		int r;

		if (!h)
			return -ENOENT;
		r = cancel_once(s, a, h, st);
		if (r != -EAGAIN)
			return r;
	}
}

int spoke_cancel(struct spoke *s, spoke_id id)
{
	struct arena *a;
	int err = spoke_call_enter(s, &a);

	if (err)
		return err;
	err = cancel_id(s, a, id);
	SPOKE_PROBE2(cancel, id, err);
	return spoke_call_leave(a, err);
}

/*
 * Sleep until no run of generation `gen` of h is in progress: 0, or
 * -EDEADLK once a destroy has broken the wait w (waits.c).
 */
static int wait_not_running(struct spoke_handle *h, uint32_t gen, const struct spoke_wait *w)
{
	for (;;) {
		uint64_t st = atomic_load_explicit(&h->state, memory_order_acquire);

		if (spoke_st_gen(st) != gen || spoke_st_status(st) != SPOKE_ST_RUNNING)
			return 0;
		if (spoke_wait_broken(w))
			return -EDEADLK;
		if (!(st & SPOKE_ST_WAITERS) && !waiter_set_waiters(h, &st))
			continue;
		/* Bounded sleep: a missed wake-up costs at most a millisecond. */
		spoke_ec_wait_word(spoke_state_futex(h), (uint32_t)(st | SPOKE_ST_WAITERS),
				   1000000);
	}
}

/*
 * Sleep until the run of (h, id) of s ends; -EDEADLK, without waiting, if
 * it is the caller's own run or the wait would close a cycle (waits.c),
 * and as soon as a destroy closing one breaks it.
 */
static int wait_run_end(struct spoke *s, struct spoke_handle *h, spoke_id id)
{
	struct spoke_wait w = {.kind = SPOKE_WAIT_RUN, .s = s, .h = h, .id = id, .in_call = s};
	int err;

	if (spoke_running_in_callback(h))
		return -EDEADLK;
	err = spoke_waits_enter(&w);
	if (err)
		return err;
	err = wait_not_running(h, spoke_st_gen(id), &w);
	spoke_waits_leave(&w);
	return err;
}

int spoke_cancel_sync(struct spoke *s, spoke_id id)
{
	struct spoke_handle *h;
	struct arena *a;
	uint64_t st;
	int err, r;

	err = spoke_call_enter(s, &a);
	if (err)
		return err;
	r = cancel_id(s, a, id);
	h = resolve(s, id, &st);
	if (h && spoke_st_status(st) == SPOKE_ST_RUNNING) {
		err = wait_run_end(s, h, id);
		if (err)
			r = err;
	}
	SPOKE_PROBE2(cancel, id, r);
	return spoke_call_leave(a, r);
}

/*
 * Can a reset of word st (just claimed) to deadline d leave the timer where
 * it is? Yes for a one-shot timer in its engine or on the stage, with no
 * message queued, moved later: its place there is still at or before d, so
 * the owner meets it in time, and then re-arms it for d (shard.c claim_expiry).
 * An idle timeout reset on every request so costs its owner nothing until it
 * comes due: a foreign reset sends no message, the owner's own moves nothing.
 * Periodic timers keep their phase from a message, TTL timers must change
 * queue, and an earlier deadline must move now.
 */
static bool reset_is_later(const struct spoke_handle *h, uint64_t st, uint64_t d)
{
	return spoke_st_status(st) == SPOKE_ST_ARMED && spoke_st_kind(st) == SPOKE_KIND_ONESHOT &&
	       !(st & SPOKE_ST_INBOX) &&
	       d >= atomic_load_explicit(&h->deadline_ns, memory_order_relaxed);
}

/*
 * Reset on the owner thread: move the engine node at once, unless the
 * deadline moved later (reset_is_later). The owner holds
 * WRITING while it stores the deadline, as a foreign reset does: a foreign
 * reset that came after its claim and stored its own deadline first would
 * otherwise be overwritten by an earlier reset, and a third reset riding on
 * that one's WRITING (returning 0 "just before it") would see the timer run
 * at the overwritten deadline. Finding WRITING, a foreign reset returns 0
 * at once, ordered before this one; a foreign cancel sets CANCELLED | INBOX
 * and the owner retires it in its next turn, after this has cleared WRITING.
 */
static int reset_direct(struct shard *sh, struct spoke_handle *h, uint64_t st, uint64_t d)
{
	bool later;

	if (!owner_reset_claim(h, st))
		return -EAGAIN;
	SPOKE_HOOK(SPOKE_HOOK_DIRECT_RESET_CLAIMED);
	/* On the stage it moves anyway: its slot would wake the owner for nothing. */
	later = reset_is_later(h, st, d) && !spoke_stage_holds(&h->node);
	atomic_store_explicit(&h->deadline_ns, d, memory_order_relaxed);
	spoke_handle_set_base(h, st, d);
	if (!later) {
		spoke_owner_arm(sh, h, d);
		spoke_note_due(sh, d);
	}
	owner_reset_release(h);
	return 0;
}

/*
 * Second half of a foreign reset: we hold WRITING and have stored deadline_ns;
 * publish it (RESET, and a message if the timer is armed and must move),
 * whatever else changed meanwhile. A `later` reset sends no message: the
 * owner finds the new deadline when the old one comes (shard.c claim_expiry),
 * unless it has met the timer meanwhile and asked for one (RESET). A cancel
 * (or the end of a run) may have won in between: then the timer never runs
 * again, this reset is ordered before its end, and if that end already came
 * (ORPHAN) it is ours to free the handle.
 */
static void reset_publish(struct shard *sh, struct spoke_handle *h, uint64_t d, bool later)
{
	uint64_t next, st = writer_publish(h, later, &next);

	if (st & SPOKE_ST_ORPHAN)
		spoke_handle_release(sh->s, h, st);
	else if ((next & SPOKE_ST_INBOX) && !(st & SPOKE_ST_INBOX))
		spoke_any_post(sh, h, d);
	else if ((next & SPOKE_ST_INBOX) && spoke_st_status(next) == SPOKE_ST_ARMED)
		spoke_any_nudge(sh, d); /* rides on a message queued for a later deadline */
}

/*
 * One attempt at a reset; -EAGAIN means the state changed under us. A foreign
 * reset first claims WRITING (bumping the sequence), then stores
 * deadline_ns, then publishes: so only the reset that will be published ever
 * writes deadline_ns, and a reset that loses a race never leaves its deadline
 * behind. A reset that finds another one WRITING returns 0 at once: the two
 * overlap, and it is ordered just before the one in progress, whose deadline
 * wins. While WRITING is set the owner does not fire the timer.
 */
static int reset_once(struct spoke *s, struct spoke_handle *h, uint64_t st, uint64_t delay_ns)
{
	struct shard *sh = &s->shards[spoke_st_shard(st)];
	uint64_t d = deadline_on(sh, delay_ns);
	bool periodic = spoke_st_kind(st) == SPOKE_KIND_PERIODIC, later;

	switch (spoke_st_status(st)) {
	case SPOKE_ST_ARMED:
		if (st & SPOKE_ST_WRITING)
			return 0;
		if (!(st & SPOKE_ST_INBOX) && spoke_shard_owned_by_me(sh) &&
		    !spoke_owner_rescued(sh))
			return reset_direct(sh, h, st, d);
		break;
	case SPOKE_ST_DISPATCHED:
		/* Due, its callback not started: the runner hands it back (runner_undispatch). */
		if (st & SPOKE_ST_WRITING)
			return 0;
		break;
	case SPOKE_ST_RUNNING:
		/* A periodic timer between runs: the reset moves its next run. */
		if (!periodic || (st & SPOKE_ST_STOP))
			return -ENOENT;
		if (st & SPOKE_ST_WRITING)
			return 0;
		break;
	default:
		return -ENOENT;
	}
	if (!foreign_reset_claim(h, st))
		return -EAGAIN;
	SPOKE_HOOK(SPOKE_HOOK_RESET_CLAIMED);
	later = reset_is_later(h, st, d);
	atomic_store_explicit(&h->deadline_ns, d, memory_order_relaxed);
	SPOKE_HOOK(SPOKE_HOOK_RESET_STORED);
	reset_publish(sh, h, d, later);
	return 0;
}

int spoke_reset(struct spoke *s, spoke_id id, uint64_t delay_ns)
{
	struct arena *a;
	int err, r;

	err = spoke_call_enter(s, &a);
	if (err)
		return err;
	do {
		uint64_t st;
		struct spoke_handle *h = resolve(s, id, &st);

		r = h ? reset_once(s, h, st, delay_ns) : -ENOENT;
		if (r == 0)
			spoke_count(&s->shards[spoke_st_shard(st)], CTR_RESET,
				    spoke_shard_owned_by_me(&s->shards[spoke_st_shard(st)]));
	} while (r == -EAGAIN);
	SPOKE_PROBE3(reset, id, delay_ns, r);
	return spoke_call_leave(a, r);
}

/* --- what a timer has left, and what a callback runs for ------------------- */

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
static uint64_t next_run_ns(struct spoke_handle *h, uint64_t st)
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

static bool pending_word(uint64_t st)
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

int64_t spoke_remaining(struct spoke *s, spoke_id id)
{
	struct spoke_handle *h;
	struct arena *a;
	uint64_t st, d, now;
	int err;

	err = spoke_call_enter(s, &a);
	if (err)
		return err;
	h = resolve(s, id, &st);
	if (!h || !pending_word(st) || (d = next_run_ns(h, st)) == 0)
		return spoke_call_leave(a, -ENOENT);
	now = spoke_clock_ns();
	spoke_call_leave(a, 0);
	if (d <= now)
		return 0;
	return d - now > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)(d - now);
}

spoke_id spoke_self(uint64_t *due_ns)
{
	const struct spoke_run *r = spoke_current_run();

	if (!r)
		return 0;
	if (due_ns)
		*due_ns = r->due_ns;
	return r->id;
}

/*
 * The period of a periodic timer is read by its runner when a run ends
 * (run.c finish_run), and its second slot may be freed by whoever ends the
 * timer. Two threads can write it without racing that: the timer's runner
 * (from inside its callback), and its shard's owner while it is armed with
 * no message queued (a foreign cancel then leaves the freeing to this very
 * owner, after the call).
 */
int spoke_set_period(struct spoke *s, spoke_id id, uint64_t period_ns)
{
	struct spoke_handle *h;
	struct arena *a;
	uint64_t st;
	int err;

	if (!s || period_ns == 0)
		return -EINVAL;
	err = spoke_call_enter(s, &a);
	if (err)
		return err;
	h = resolve(s, id, &st);
	if (!h || !pending_word(st))
		return spoke_call_leave(a, -ENOENT);
	if (spoke_st_kind(st) != SPOKE_KIND_PERIODIC)
		return spoke_call_leave(a, -EINVAL);
	if (!spoke_running_in_callback(h) &&
	    !(spoke_st_status(st) == SPOKE_ST_ARMED && !(st & SPOKE_ST_INBOX) &&
	      spoke_shard_owned_by_me(&s->shards[spoke_st_shard(st)]) &&
	      !spoke_owner_rescued(&s->shards[spoke_st_shard(st)])))
		return spoke_call_leave(a, -EPERM);
	atomic_store_explicit(&spoke_periodic_of(h)->period_ns, period_ns, memory_order_relaxed);
	return spoke_call_leave(a, 0);
}

/* --- attached shards ---------------------------------------------------------- */

/*
 * Does the calling thread own a shard of another live instance? Its owner
 * record holds one shard; a record left by an instance that has since been
 * destroyed does not count. A managed thread owns its shard until it ends,
 * also while its instance is being destroyed (off the live list, the thread
 * not yet joined): an attach from its inline callback then would be undone
 * by the thread's exit, leaving the other shard attached to nobody.
 */
static bool owns_shard_elsewhere(const struct spoke *s)
{
	uint64_t serial = spoke_tls_owner.serial;

	return spoke_tls_owner.sh && serial != 0 && serial != s->serial &&
	       (spoke_tls_owner.managed || spoke_instance_live(serial));
}

/*
 * spoke_shard_attach as a wait of the wait-for graph (waits.c): -EDEADLK if
 * waiting for the shard's managed thread (and, from outside the pool, for
 * its runs on the pool) would close a cycle. The wait is recorded before
 * the mode changes, since an attach from a pool callback lets the managed
 * thread go at once; a shard another attach or detach holds says -EBUSY
 * first, so that only an attach that waits shows as one (a race with
 * another attach can still show it for the moment its CAS takes).
 */
static int attach_waiting(struct spoke *s, unsigned k, bool from_pool, struct arena *a)
{
	struct spoke_wait w = {.kind = SPOKE_WAIT_ATTACH,
			       .s = s,
			       .shard = k,
			       .pool_too = !from_pool,
			       .in_call = s};
	int mode = atomic_load_explicit(&s->shards[k].mode, memory_order_relaxed), err;

	if (mode != SHARD_MANAGED && mode != SHARD_UNOWNED)
		return -EBUSY;
	err = spoke_waits_enter(&w);
	if (err)
		return err;
	err = spoke_shard_attach(&s->shards[k], from_pool, a);
	spoke_waits_leave(&w);
	return err;
}

int spoke_attach(struct spoke *s, unsigned shard)
{
	struct arena *a;
	int err, cancel_state;

	err = spoke_call_enter(s, &a);
	if (err)
		return err;
	if (shard >= s->nshards)
		return spoke_call_leave(a, -EINVAL);
	if (spoke_shard_mine(s) || owns_shard_elsewhere(s))
		return spoke_call_leave(a, -EBUSY);
	/* It joins the managed thread, a cancellation point; no call may be cut short. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);
	err = attach_waiting(s, shard, spoke_on_pool_thread(), a);
	pthread_setcancelstate(cancel_state, NULL);
	return spoke_call_leave(a, err);
}

/* Enter a call that only the thread attached to a shard may make. */
static int enter_attached(struct spoke *s, struct arena **a, struct shard **sh)
{
	int err;

	err = spoke_call_enter(s, a);
	if (err)
		return err;
	*sh = spoke_shard_mine(s);
	if (!*sh || atomic_load_explicit(&(*sh)->mode, memory_order_relaxed) != SHARD_ATTACHED)
		return spoke_call_leave(*a, -EPERM);
	return 0;
}

/*
 * Enter a call of the attached thread that touches its shard's engines,
 * queues or turn state: as enter_attached, and once no rescuer holds the shard (rescue.c;
 * the call's count keeps one from taking it after this).
 */
static int enter_attached_holding(struct spoke *s, struct arena **a, struct shard **sh)
{
	for (;;) {
		int err = enter_attached(s, a, sh);

		if (err || !spoke_owner_rescued(*sh))
			return err;
		spoke_call_leave(*a, 0);
		spoke_owner_await_rescue(*sh);
	}
}

int spoke_detach(struct spoke *s)
{
	struct shard *sh;
	struct arena *a;
	int err = enter_attached_holding(s, &a, &sh);

	if (err)
		return err;
	if (sh->in_turn)
		return spoke_call_leave(a, -EBUSY); /* from a callback inside its own spoke_poll */
	return spoke_call_leave(a, spoke_owner_detach(sh));
}

/*
 * The thread whose home arena is a is exiting (its key destructor, under the
 * arena lock, so a->s is alive). If it is still attached to a shard of a->s,
 * hand the shard to a managed thread, so that its timers keep firing instead
 * of waiting for a poll that will never come; if no thread can be started,
 * leave the shard unowned so that another thread can attach it. Counted in
 * the arena like any call, so destroy cannot overlap it. The instance's
 * thread-exit hook (spoke_arena_key_create), so that arena.c needs nothing
 * of this file.
 */
static void detach_at_exit(struct arena *a)
{
	struct spoke *s = a->s;
	struct shard *sh = spoke_shard_mine(s);

	if (!sh || atomic_load_explicit(&sh->mode, memory_order_relaxed) != SHARD_ATTACHED)
		return;
	/* spoke_call_enter on the arena the destructor was handed, once no rescuer holds sh. */
	for (;;) {
		spoke_in_call_add(a, 1);
		spoke_light_fence(s);
		if (atomic_load_explicit(&s->stopping, memory_order_relaxed)) {
			spoke_in_call_add(a, -1);
			return;
		}
		if (!spoke_owner_rescued(sh))
			break;
		spoke_in_call_add(a, -1);
		spoke_owner_await_rescue(sh);
	}
	if (sh->in_turn) { /* it exits from a callback of its own poll: a misuse */
		spoke_in_call_add(a, -1);
		return;
	}
	if (spoke_owner_detach(sh))
		spoke_owner_abandon(sh); /* no thread to start: left for the next attach */
	spoke_call_leave(a, 0);
}

int spoke_poll(struct spoke *s)
{
	struct shard *sh;
	struct arena *a;
	int cancel_state, n, err = enter_attached_holding(s, &a, &sh);

	if (err)
		return err;
	/* Its callbacks may reach cancellation points: the turn must not be cut short. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);
	spoke_owner_attached_awake(sh);
	n = spoke_owner_turn(sh, true);
	/* Not from a callback's poll (no turn then): the outer turn publishes. */
	if (sh->rescue_on && !sh->in_turn)
		spoke_owner_turned(sh, sh->clock_ns, spoke_owner_next_ns(sh));
	pthread_setcancelstate(cancel_state, NULL);
	return spoke_call_leave(a, n);
}

int spoke_wake_fd(struct spoke *s)
{
	struct shard *sh;
	struct arena *a;
	int err = enter_attached(s, &a, &sh);

	if (err)
		return err;
	return spoke_call_leave(a, spoke_owner_wake_fd(sh));
}

int spoke_next_deadline_ns(struct spoke *s, uint64_t *ns)
{
	struct shard *sh;
	struct arena *a;
	int64_t next;
	int err;

	if (!ns)
		return -EINVAL;
	err = enter_attached_holding(s, &a, &sh);
	if (err)
		return err;
	next = spoke_owner_attached_sleep(sh, spoke_owner_next_ns(sh));
	spoke_call_leave(a, 0);
	*ns = next < 0 ? UINT64_MAX : (uint64_t)next;
	return next < 0; /* 1: nothing pending */
}

int64_t spoke_next_deadline(struct spoke *s)
{
	uint64_t ns;
	int ret = spoke_next_deadline_ns(s, &ns);

	/* -EPERM is -1, which means "no timer" here: say -EINVAL instead. */
	if (ret < 0)
		return ret == -EPERM ? -EINVAL : ret;
	return ret == 1 ? -1 : (int64_t)ns;
}

/* --- statistics ------------------------------------------------------------------ */

static uint64_t counter(struct shard *sh, enum shard_counter c)
{
	return atomic_load_explicit(&sh->ctr.own[c], memory_order_relaxed) +
	       atomic_load_explicit(&sh->ctr.remote[c], memory_order_relaxed);
}

/*
 * The percentiles of a lateness histogram (copied: the counts move while
 * runs land) into o: the top of the bucket holding the q-th run.
 */
static void late_percentiles(const uint64_t *counts, struct spoke_shard_stats *o)
{
	static const struct {
		uint64_t per_mille;
		size_t field;
	} q[] = {{500, offsetof(struct spoke_shard_stats, late_p50_ns)},
		 {990, offsetof(struct spoke_shard_stats, late_p99_ns)},
		 {999, offsetof(struct spoke_shard_stats, late_p999_ns)}};
	uint64_t total = 0, seen = 0;
	unsigned b = 0;

	for (unsigned i = 0; i < SPOKE_LATE_BUCKETS; i++)
		total += counts[i];
	o->late_runs = total;
	for (size_t k = 0; k < sizeof(q) / sizeof(q[0]); k++) {
		/* The rank of the run at this percentile, 1-based, rounded up. */
		uint64_t rank = (total * q[k].per_mille + 999) / 1000;

		while (total && seen < rank && b < SPOKE_LATE_BUCKETS)
			seen += counts[b++];
		*(uint64_t *)((char *)o + q[k].field) =
			total ? spoke_late_bucket_top(b ? b - 1 : 0) : 0;
	}
}

/*
 * The messages queued to sh and not handled yet: its count, less the places
 * threads have taken in it and not used (spoke_any_admit). Read while both
 * move, it can be off by a few; 0 rather than below.
 */
static uint64_t inbox_backlog(struct shard *sh)
{
	uint64_t counted = atomic_load_explicit(&sh->inbox_queued, memory_order_relaxed),
		 places = spoke_arenas_places(sh->s, sh->index);

	return counted > places ? counted - places : 0;
}

static void shard_stats(struct shard *sh, struct spoke_shard_stats *o, uint64_t *sum)
{
	uint64_t counts[SPOKE_LATE_BUCKETS];

	o->started = counter(sh, CTR_STARTED);
	o->cancelled = counter(sh, CTR_CANCELLED);
	o->reset = counter(sh, CTR_RESET);
	o->pending = atomic_load_explicit(&sh->pending, memory_order_relaxed);
	o->inbox_hwm = atomic_load_explicit(&sh->ctr.inbox_hwm, memory_order_relaxed);
	o->max_late_ns = atomic_load_explicit(&sh->ctr.max_late_ns, memory_order_relaxed);
	o->rescues = atomic_load_explicit(&sh->ctr.rescues, memory_order_relaxed);
	o->max_absence_ns = atomic_load_explicit(&sh->ctr.max_absence_ns, memory_order_relaxed);
	o->tick_ns = sh->tick_ns;
	o->slack_ns = sh->stage.width_ns;
	o->attached = atomic_load_explicit(&sh->mode, memory_order_relaxed) == SHARD_ATTACHED;
	o->inbox_queued = inbox_backlog(sh);
	o->refused = counter(sh, CTR_REFUSED);
	for (unsigned i = 0; i < SPOKE_LATE_BUCKETS; i++) {
		counts[i] = atomic_load_explicit(&sh->ctr.late.bucket[i], memory_order_relaxed);
		sum[i] += counts[i];
	}
	late_percentiles(counts, o);
	/* Every run is counted once, in the histogram (run.c note_lateness). */
	o->fired = o->late_runs;
}

void spoke_stats(struct spoke *s, struct spoke_stats *out)
{
	uint64_t sum[SPOKE_LATE_BUCKETS] = {0};
	struct spoke_shard_stats *t;
	struct arena *a;

	if (!out)
		abort_misuse("spoke_stats called with a NULL out",
			     "it returns nothing, so it cannot report the error");
	t = &out->total;
	memset(out, 0, sizeof(*out));
	if (!s || spoke_call_enter(s, &a) != 0)
		return; /* all zero: no service, or it is being destroyed */
	out->shards = s->nshards;
	for (unsigned k = 0; k < s->nshards; k++) {
		struct spoke_shard_stats *o = &out->shard[k];

		shard_stats(&s->shards[k], o, sum);
		t->started += o->started;
		t->cancelled += o->cancelled;
		t->reset += o->reset;
		t->fired += o->fired;
		t->pending += o->pending;
		t->inbox_queued += o->inbox_queued;
		t->refused += o->refused;
		if (o->inbox_hwm > t->inbox_hwm)
			t->inbox_hwm = o->inbox_hwm;
		if (o->max_late_ns > t->max_late_ns)
			t->max_late_ns = o->max_late_ns;
		t->rescues += o->rescues;
		if (o->max_absence_ns > t->max_absence_ns)
			t->max_absence_ns = o->max_absence_ns;
	}
	late_percentiles(sum, t);
	spoke_call_leave(a, 0);
}

/* --- the debug dump ------------------------------------------------------------- */

/* One pending timer as the dump shows it. */
struct dump_entry {
	uint64_t due_ns;
	spoke_id id;
	spoke_fn *fn;
	unsigned kind;
};

/* What the walk over the handles collects: per shard, the `keep` earliest. */
struct dump_walk {
	struct dump_entry *earliest; /* nshards rows of keep entries, by deadline */
	unsigned *held;		     /* entries in each row */
	uint64_t *pending;	     /* timers seen pending, per shard */
	unsigned keep, nshards;
};

/* Insert e into shard k's row if it is among the `keep` earliest (a row is short). */
static void dump_keep(struct dump_walk *w, unsigned k, struct dump_entry e)
{
	struct dump_entry *row = w->earliest + (size_t)k * w->keep;
	unsigned n = w->held[k], i;

	if (n == w->keep && (n == 0 || e.due_ns >= row[n - 1].due_ns))
		return;
	if (n < w->keep)
		n = ++w->held[k];
	for (i = n - 1; i > 0 && row[i - 1].due_ns > e.due_ns; i--)
		row[i] = row[i - 1];
	row[i] = e;
}

static void dump_visit(struct spoke_handle *h, uint64_t st, void *ctx)
{
	struct dump_walk *w = ctx;
	unsigned k = spoke_st_shard(st);
	struct dump_entry e;
	void *arg;

	if (!pending_word(st) || k >= w->nshards)
		return;
	e.due_ns = next_run_ns(h, st);
	if (e.due_ns == 0 || !spoke_handle_peek(h, spoke_st_gen(st), &e.fn, &arg))
		return; /* it ended while we looked */
	e.id = spoke_make_id(spoke_st_gen(st), spoke_handle_slot_id(h));
	e.kind = spoke_st_kind(st);
	w->pending[k]++;
	dump_keep(w, k, e);
}

/* "on_idle+0x10 (/usr/bin/server)", or the bare address without symbols. */
static void dump_symbol(FILE *out, spoke_fn *fn)
{
	Dl_info info;

	if (dladdr((void *)(uintptr_t)fn, &info) && info.dli_sname)
		fprintf(out, "%s+0x%zx", info.dli_sname,
			(size_t)((uintptr_t)fn - (uintptr_t)info.dli_saddr));
	else if (dladdr((void *)(uintptr_t)fn, &info) && info.dli_fname)
		fprintf(out, "%s+0x%zx", info.dli_fname,
			(size_t)((uintptr_t)fn - (uintptr_t)info.dli_fbase));
	else
		fprintf(out, "%p", (void *)(uintptr_t)fn);
}

static void dump_shard(FILE *out, struct shard *sh, const struct dump_walk *w, uint64_t now)
{
	static const char *const kind[] = {"one-shot", "periodic", "ttl"};
	struct spoke_shard_stats o;
	uint64_t ignore[SPOKE_LATE_BUCKETS] = {0};
	const struct dump_entry *row = w->earliest + (size_t)sh->index * w->keep;

	shard_stats(sh, &o, ignore);
	fprintf(out,
		"shard %u: %s, cpu %d, tick %" PRIu64 " ns, pending %" PRIu64 " (engines), %" PRIu64
		" (handles), started %" PRIu64 ", fired %" PRIu64 ", cancelled %" PRIu64
		", late p50/p99/p99.9/max %" PRIu64 "/%" PRIu64 "/%" PRIu64 "/%" PRIu64 " us\n",
		sh->index, o.attached ? "attached" : "managed", sh->cpu, sh->tick_ns, o.pending,
		w->pending[sh->index], o.started, o.fired, o.cancelled, o.late_p50_ns / 1000,
		o.late_p99_ns / 1000, o.late_p999_ns / 1000, o.max_late_ns / 1000);
	for (unsigned i = 0; i < w->held[sh->index]; i++) {
		int64_t in = row[i].due_ns > now ? (int64_t)(row[i].due_ns - now) : 0;

		fprintf(out, "  in %" PRId64 ".%06" PRId64 " s  %-8s id %#" PRIx64 "  ",
			in / 1000000000, (in % 1000000000) / 1000,
			kind[row[i].kind < 3 ? row[i].kind : 0], row[i].id);
		dump_symbol(out, row[i].fn);
		fputc('\n', out);
	}
}

int spoke_dump(struct spoke *s, FILE *out, unsigned earliest)
{
	struct dump_walk w = {.keep = earliest};
	struct arena *a;
	uint64_t now;
	int err;

	if (!s || !out)
		return -EINVAL;
	err = spoke_call_enter(s, &a);
	if (err)
		return err;
	w.nshards = s->nshards;
	w.held = calloc(w.nshards, sizeof(*w.held));
	w.pending = calloc(w.nshards, sizeof(*w.pending));
	w.earliest = earliest ? calloc((size_t)w.nshards * earliest, sizeof(*w.earliest)) : NULL;
	if (!w.held || !w.pending || (earliest && !w.earliest)) {
		err = -ENOMEM;
		goto out;
	}
	spoke_arenas_each(s, dump_visit, &w);
	now = spoke_clock_ns();
	fprintf(out, "spoke %s: %u shards, %u callback threads, at %" PRIu64 " ns\n",
		spoke_version(), s->nshards, s->nworkers, now);
	for (unsigned k = 0; k < s->nshards; k++)
		dump_shard(out, &s->shards[k], &w, now);
	if (fflush(out) != 0)
		err = -errno;
out:
	free(w.held);
	free(w.pending);
	free(w.earliest);
	return spoke_call_leave(a, err);
}
