/* SPDX-License-Identifier: MIT */
/*
 * test_service_errors.c - every error include/spoke/spoke.h documents (and
 * the NULL-pointer errors it does not spell out), one named test per
 * (function, error), each checking the code and that nothing changed.
 *
 * "Nothing changed", for calls on a live service (the scene): two witness
 * timers, one per shard, pending an hour away; after the refused calls the
 * stats of every shard (started, cancelled, reset, fired, pending, attached)
 * are what they were, *id still holds its sentinel, no callback ran; then
 * each witness is reset to 1 ms and runs exactly once, not early. For
 * spoke_create: *out untouched and the process has as many threads as
 * before (nothing left running); leaks are LeakSanitizer's (ASan build).
 * -ENOMEM and -EAGAIN are reached with tests/fault_inject.h (--wrap).
 *
 * Covered elsewhere, not repeated here (docs/contract.md line tests):
 *   cancel / cancel_sync / reset -ENOENT (fired, running, cancelled, id 0,
 *     garbage ids)                          test_service_contract line3_cancel_verdicts
 *   stale generations after cancel / fire   test_service_reset line6_stale_id_after_*
 *   cancel_sync -EDEADLK from own callback  test_service_contract
 * line4_cancel_sync_own_callback_edeadlk start*, reset, cancel, cancel_sync -ESHUTDOWN
 *                                           test_service_lifecycle
 * line8_destroy_shutdown_during_destroy
 *
 * Usage: test_service_errors [test name...]   (no name: all)
 */
#include "service_util.h"

#include <dirent.h>

#include "../fault_inject.h"

#define SENTINEL_ID ((spoke_id)0x5eed5eed5eed5eedull)

/* ==== spoke_create ============================================================================ */

static void *idle_thread(void *p)
{
	return p;
}

static unsigned task_entries(void)
{
	struct dirent *e;
	unsigned n = 0;
	DIR *d = opendir("/proc/self/task");

	assert_non_null(d);
	while ((e = readdir(d)) != NULL)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/*
 * Threads of this process when no service is running. The first thread
 * created starts the sanitizer's own background thread (TSan), which stays:
 * create one before counting. A joined thread leaves /proc/self/task a
 * moment after pthread_join, so a count taken right after a spoke_destroy can
 * be one too high; the baseline is the count once it has held still for
 * 20 ms, and callers wait for the count to come back to it. A stall can
 * still leave it one too high: tasks_back_to_baseline lowers it to any
 * lower count it sees (the threads it counts never exit).
 */
static unsigned baseline_tasks;

static unsigned task_baseline(void)
{
	unsigned n, same = 0;
	uint64_t end;

	if (baseline_tasks)
		return baseline_tasks;
	pthread_join(thread_start(idle_thread, NULL), NULL);
	n = task_entries();
	for (end = spoke_now_ns() + 5 * SEC; same < 20 && spoke_now_ns() < end; same++) {
		unsigned m;

		sleep_ns(MS);
		m = task_entries();
		if (m != n)
			same = 0, n = m;
	}
	baseline_tasks = n;
	return baseline_tasks;
}

/* Waits until only the baseline threads are left; false after HOLD_LIMIT_NS. */
static bool tasks_back_to_baseline(void)
{
	unsigned base = task_baseline(), n;

	if (!WAIT_UNTIL(task_entries() <= base, HOLD_LIMIT_NS))
		return false;
	n = task_entries();
	if (n < baseline_tasks)
		baseline_tasks = n;
	return true;
}

static int sentinel_storage;
#define SENTINEL_SERVICE ((struct spoke *)(void *)&sentinel_storage)

/* spoke_create(cfg) gives `expect`, leaves *out alone and no thread behind. */
static void create_refused(const struct spoke_config *c, int expect, const char *what)
{
	struct spoke *const sentinel = SENTINEL_SERVICE;
	struct spoke *out = sentinel;
	int rc;

	if (!tasks_back_to_baseline())
		fail_msg("%s: %u threads before the call, %u expected (an earlier service's?)",
			 what, task_entries(), task_baseline());
	rc = spoke_create(&out, c);
	if (rc == 0)
		spoke_destroy(out);
	if (rc != expect)
		fail_msg("%s: spoke_create gave %d, expected %d", what, rc, expect);
	if (out != sentinel)
		fail_msg("%s: *out written on failure", what);
	if (!tasks_back_to_baseline())
		fail_msg("%s: %u threads after, %u before", what, task_entries(), task_baseline());
}

static void create_accepted(const struct spoke_config *c, const char *what)
{
	struct spoke *s = NULL;
	int rc = spoke_create(&s, c);

	if (rc != 0)
		fail_msg("%s: spoke_create gave %d, expected 0", what, rc);
	spoke_destroy(s);
}

static struct spoke_config cfg;
static struct spoke_shard_config ov[2];

/* A valid base: 2 shards, 1 ms ticks, 1 pool thread; overrides zeroed (cpu -1). */
static void cfg_base(void)
{
	svc_config(&cfg, 2, MS, 1);
	memset(ov, 0, sizeof(ov));
	ov[0].cpu = ov[1].cpu = -1;
}

#define BAD(edit)                                                                                  \
	do {                                                                                       \
		cfg_base();                                                                        \
		edit;                                                                              \
		create_refused(&cfg, -EINVAL, #edit);                                              \
	} while (0)
#define GOOD(edit)                                                                                 \
	do {                                                                                       \
		cfg_base();                                                                        \
		edit;                                                                              \
		create_accepted(&cfg, #edit);                                                      \
	} while (0)
#define OVERRIDES(n) (cfg.shard_overrides = ov, cfg.n_shard_overrides = (n))

static void spoke_create_null_out_einval(void **state)
{
	(void)state;
	assert_true(tasks_back_to_baseline());
	cfg_base();
	assert_int_equal(spoke_create(NULL, &cfg), -EINVAL);
	assert_int_equal(spoke_create(NULL, NULL), -EINVAL);
	assert_int_equal(task_entries(), task_baseline());
}

static void spoke_create_bad_shards_einval(void **state)
{
	(void)state;
	BAD(cfg.shards = SPOKE_MAX_SHARDS + 1);
	BAD(cfg.shards = UINT_MAX);
	GOOD((cfg.shards = SPOKE_MAX_SHARDS, cfg.pin_threads = false));
	GOOD(cfg.shards = 0); /* one per online CPU */
}

static void spoke_create_bad_tick_einval(void **state)
{
	(void)state;
	BAD(cfg.tick_ns = 0);
	BAD(cfg.tick_ns = 999);
	BAD(cfg.tick_ns = 3600 * SEC + 1);
	BAD(cfg.tick_ns = UINT64_MAX);
	GOOD(cfg.tick_ns = 1000);
	GOOD(cfg.tick_ns = 3600 * SEC);
}

static void spoke_create_bad_engine_einval(void **state)
{
	(void)state;
	BAD(cfg.engine = "wheel"); /* bounded */
	BAD(cfg.engine = "heap");  /* allocates as it grows */
	BAD(cfg.engine = "lawn");
	BAD(cfg.engine = "no-such-scheme");
	BAD(cfg.engine = "");
	BAD(cfg.engine = "Hierarchical");
	GOOD(cfg.engine = NULL); /* "default (and NULL)" */
	GOOD(cfg.engine = "hashed");
	GOOD(cfg.engine = "hashed-sorted");
	GOOD(cfg.engine = "list");
	GOOD(cfg.engine = "sorted-list");
}

static void spoke_create_bad_geometry_einval(void **state)
{
	(void)state;
	BAD(cfg.level_bits = 17);
	BAD(cfg.levels = 65);
	BAD((cfg.engine = "hashed", cfg.table_size = 1000));
	BAD((cfg.engine = "hashed-sorted", cfg.table_size = ((size_t)1 << 24) + 1));
	GOOD((cfg.level_bits = 16, cfg.levels = 1));
	GOOD(cfg.table_size = 1000); /* hierarchical has no table: ignored */
}

static void spoke_create_bad_callback_threads_einval(void **state)
{
	(void)state;
	BAD(cfg.callback_threads = 1025);
	BAD(cfg.callback_threads = UINT_MAX);
	GOOD(cfg.callback_threads = 0);
	BAD(cfg.callback_spares = 1025);
	BAD(cfg.callback_spares = UINT_MAX);
	GOOD(cfg.callback_spares = 1024);
	GOOD(cfg.callback_spares = 0);
}

static void spoke_create_bad_callback_threads_per_shard_einval(void **state)
{
	(void)state;
	BAD(cfg.callback_threads_per_shard = 513); /* 2 shards: 1026 workers */
	BAD(cfg.callback_threads_per_shard = UINT_MAX);
	BAD((cfg.callback_threads = 0, cfg.callback_threads_per_shard = 1)); /* inline and a pool */
	GOOD(cfg.callback_threads_per_shard = 1);
	GOOD((cfg.callback_threads = 5, cfg.callback_threads_per_shard = 2));
}

static void spoke_create_bad_lawn_shards_einval(void **state)
{
	(void)state;
	BAD(cfg.lawn_shards = 4); /* shard 2 of 2 */
	BAD(cfg.lawn_shards = 1ull << 63);
	BAD(cfg.lawn_shards = UINT64_MAX);
	GOOD(cfg.lawn_shards = 2);
	GOOD(cfg.lawn_shards = 3);
}

static void spoke_create_bad_shard_overrides_einval(void **state)
{
	(void)state;
	BAD(cfg.n_shard_overrides = 1); /* array NULL */
	BAD(OVERRIDES(3));		/* more than shards */
	GOOD(OVERRIDES(2));		/* zero fields, cpu -1: all defaults */
	GOOD(OVERRIDES(0));
}

static void spoke_create_bad_override_cpu_einval(void **state)
{
	(void)state;
	BAD((ov[0].cpu = -2, OVERRIDES(1)));
	BAD((ov[1].cpu = INT_MIN, OVERRIDES(2)));
	BAD((ov[1].cpu = CPU_SETSIZE, OVERRIDES(2)));
	BAD((ov[0].cpu = INT_MAX, OVERRIDES(1)));
	GOOD((ov[0].cpu = 0, OVERRIDES(1)));
}

static void spoke_create_bad_override_tick_einval(void **state)
{
	(void)state;
	BAD((ov[0].tick_ns = 999, OVERRIDES(1)));
	BAD((ov[1].tick_ns = 3600 * SEC + 1, OVERRIDES(2)));
	GOOD((ov[1].tick_ns = 1000, OVERRIDES(2)));
	GOOD((ov[0].tick_ns = 0, OVERRIDES(1))); /* keep the global tick */
}

static void spoke_create_bad_override_engine_einval(void **state)
{
	(void)state;
	BAD((ov[0].engine = "wheel", OVERRIDES(1)));
	BAD((ov[1].engine = "heap", OVERRIDES(2)));
	BAD((ov[1].engine = "nonsense", OVERRIDES(2)));
	GOOD((ov[0].engine = "sorted-list", OVERRIDES(1)));
}

static void spoke_create_bad_override_geometry_einval(void **state)
{
	(void)state;
	BAD((ov[0].level_bits = 17, OVERRIDES(1)));
	BAD((ov[1].levels = 65, OVERRIDES(2)));
	BAD((ov[0].engine = "hashed", ov[0].table_size = 3, OVERRIDES(1)));
	BAD((cfg.engine = "hashed", ov[1].table_size = 12, OVERRIDES(2)));
	GOOD((ov[0].engine = "hashed", ov[0].table_size = 4, OVERRIDES(1)));
}

/* At most 64 slots a tick: a slack below tick / 64 is refused, for any shard it applies to. */
static void spoke_create_bad_slack_einval(void **state)
{
	(void)state;
	BAD(cfg.slack_ns = MS / 64 - 1); /* 65 slots */
	BAD(cfg.slack_ns = 1);
	BAD((ov[0].slack_ns = 1000, OVERRIDES(1)));
	BAD((cfg.slack_ns = 20000, ov[1].tick_ns = 3600 * SEC,
	     OVERRIDES(2)));		 /* global, long tick */
	GOOD(cfg.slack_ns = MS / 64);	 /* 64 slots */
	GOOD(cfg.slack_ns = UINT64_MAX); /* a slot per tick */
	GOOD((ov[0].slack_ns = MS, OVERRIDES(1)));
	GOOD((cfg.slack_ns = 20000, ov[1].tick_ns = 1000, OVERRIDES(2))); /* over the short tick */
	/* A global slack too fine for the tick counts only for a shard that uses it. */
	BAD((cfg.slack_ns = 1000, ov[0].slack_ns = MS, OVERRIDES(1)));
	GOOD((cfg.slack_ns = 1000, ov[0].slack_ns = MS, ov[1].slack_ns = MS, OVERRIDES(2)));
}

#undef BAD
#undef GOOD

/*
 * -ENOMEM: the first allocation of spoke_create fails, then the second, ...
 * until it succeeds; every refused create frees what it had and leaves no
 * thread (the pool's threads are started before the later allocations).
 */
static void spoke_create_enomem(void **state)
{
	(void)state;
	long k;

	(void)task_baseline(); /* its warm-up thread must not meet the armed fault */
	for (k = 0; k < 400; k++) {
		struct spoke *s = SENTINEL_SERVICE;
		int rc;

		cfg_base();
		cfg.callback_threads = 2;
		fault_alloc_after(k);
		rc = spoke_create(&s, &cfg);
		fault_off();
		if (rc == 0) {
			spoke_destroy(s);
			break;
		}
		if (rc != -ENOMEM)
			fail_msg("allocation %ld refused: spoke_create gave %d", k + 1, rc);
		assert_true(s == SENTINEL_SERVICE);
		if (!tasks_back_to_baseline())
			fail_msg("allocation %ld refused: %u threads after, %u before", k + 1,
				 task_entries(), task_baseline());
	}
	assert_true(k > 0 && k < 400);
}

/* -EAGAIN: the n-th thread (pool workers, then shard threads) cannot be created. */
static void spoke_create_eagain(void **state)
{
	(void)state;
	unsigned threads = 2 + 2; /* 2 pool workers, 2 shards */

	(void)task_baseline(); /* its warm-up thread must not meet the armed fault */

	for (unsigned k = 0; k < threads; k++) {
		cfg_base();
		cfg.callback_threads = 2;
		fault_thread_after(k);
		create_refused(&cfg, -EAGAIN, "a thread could not be created");
		fault_off();
	}
	fault_thread_after(threads);
	create_accepted(&cfg, "every thread could be created");
	fault_off();
}

/* ==== the scene: a live service with a witness timer on each shard ======================== */

struct scene {
	struct spoke *s;
	spoke_id w[2];
	struct trec rec[2];
	struct spoke_stats before, now;
};

static struct scene sc;

static void scene_begin(unsigned callback_threads)
{
	memset(&sc, 0, sizeof(sc));
	atomic_store(&never_ran, 0);
	trec_reset_globals();
	sc.s = svc_new(2, 250 * US, callback_threads);
	for (unsigned k = 0; k < 2; k++) {
		atomic_store(&sc.rec[k].earliest, UINT64_MAX);
		assert_int_equal(
			spoke_start_on(sc.s, k, 3600 * SEC, trec_fire, &sc.rec[k], &sc.w[k]), 0);
	}
	ASSERT_EVENTUALLY(stats_settled(sc.s, 2, 2), "the witnesses to be taken on");
	spoke_stats(sc.s, &sc.before);
}

static void stats_same(const struct spoke_shard_stats *a, const struct spoke_shard_stats *b,
		       const char *where)
{
#define SAME(f)                                                                                    \
	if (a->f != b->f)                                                                          \
	fail_msg("%s: stats " #f " %" PRIu64 " -> %" PRIu64, where, (uint64_t)a->f, (uint64_t)b->f)
	SAME(started);
	SAME(cancelled);
	SAME(reset);
	SAME(fired);
	SAME(pending);
	SAME(attached);
#undef SAME
}

/* Nothing changed since scene_begin (or the last scene_rebase). */
static void scene_unchanged(void)
{
	spoke_stats(sc.s, &sc.now);
	assert_int_equal(sc.now.shards, 2);
	stats_same(&sc.before.total, &sc.now.total, "total");
	stats_same(&sc.before.shard[0], &sc.now.shard[0], "shard 0");
	stats_same(&sc.before.shard[1], &sc.now.shard[1], "shard 1");
	assert_int_equal(atomic_load(&never_ran), 0);
	for (unsigned k = 0; k < 2; k++)
		assert_int_equal(atomic_load(&sc.rec[k].fired), 0);
}

/* The witnesses are live and whole: each, reset to 1 ms, runs exactly once, not early. */
static void scene_end(void)
{
	scene_unchanged();
	for (unsigned k = 0; k < 2; k++) {
		atomic_store(&sc.rec[k].earliest, spoke_now_ns() + MS);
		assert_int_equal(spoke_reset(sc.s, sc.w[k], MS), 0);
	}
	ASSERT_EVENTUALLY(atomic_load(&sc.rec[0].fired) && atomic_load(&sc.rec[1].fired),
			  "the witnesses to run");
	sleep_ms(10);
	for (unsigned k = 0; k < 2; k++)
		assert_int_equal(atomic_load(&sc.rec[k].fired), 1);
	assert_never_early();
	assert_int_equal(atomic_load(&never_ran), 0);
	assert_no_bg_failures();
	svc_destroy(sc.s);
}

/* ==== start functions ==========================================================================
 */

#define ASSERT_REFUSED(call, err)                                                                  \
	do {                                                                                       \
		spoke_id id_ = SENTINEL_ID;                                                        \
		int rc_ = (call);                                                                  \
		if (rc_ != (err))                                                                  \
			fail_msg("%s: %d, expected %d", #call, rc_, err);                          \
		assert_true(id_ == SENTINEL_ID);                                                   \
	} while (0)

/* The start functions that take (s, ns, fn, arg, id). */
typedef int start_call(struct spoke *s, uint64_t ns, spoke_fn *fn, void *arg, spoke_id *id);

/*
 * The -EINVAL cases of such a start: no instance, no callback, no id to
 * write to; zero_ns_refused (a period): 0 ns. Each leaves the id alone.
 */
static void start_einval(start_call *start, bool zero_ns_refused)
{
	scene_begin(1);
	ASSERT_REFUSED(start(NULL, MS, never_fn, NULL, &id_), -EINVAL);
	ASSERT_REFUSED(start(sc.s, MS, NULL, NULL, &id_), -EINVAL);
	if (zero_ns_refused)
		ASSERT_REFUSED(start(sc.s, 0, never_fn, NULL, &id_), -EINVAL);
	ASSERT_REFUSED(start(sc.s, 0, zero_ns_refused ? never_fn : NULL, NULL, NULL), -EINVAL);
	scene_end();
}

static void spoke_start_einval(void **state)
{
	(void)state;
	start_einval(spoke_start, false);
}

static void spoke_start_on_einval(void **state)
{
	(void)state;
	scene_begin(1);
	ASSERT_REFUSED(spoke_start_on(NULL, 0, MS, never_fn, NULL, &id_), -EINVAL);
	ASSERT_REFUSED(spoke_start_on(sc.s, 0, MS, NULL, NULL, &id_), -EINVAL);
	ASSERT_REFUSED(spoke_start_on(sc.s, 2, MS, never_fn, NULL, &id_), -EINVAL);
	ASSERT_REFUSED(spoke_start_on(sc.s, SPOKE_MAX_SHARDS, MS, never_fn, NULL, &id_), -EINVAL);
	ASSERT_REFUSED(spoke_start_on(sc.s, UINT_MAX, MS, never_fn, NULL, &id_), -EINVAL);
	ASSERT_REFUSED(spoke_start_on(sc.s, 2, MS, never_fn, NULL, NULL), -EINVAL);
	scene_end();
}

static void spoke_start_periodic_einval(void **state)
{
	(void)state;
	start_einval(spoke_start_periodic, true);
}

static void spoke_start_ttl_einval(void **state)
{
	(void)state;
	start_einval(spoke_start_ttl, false);
}

/* Each start function once (rcs[0..3]); rcs[4]: *id kept its sentinel. */
static void try_all_starts(int *rcs, spoke_id *id)
{
	rcs[0] = spoke_start(sc.s, MS, never_fn, NULL, id);
	rcs[1] = spoke_start_on(sc.s, 1, MS, never_fn, NULL, id);
	rcs[2] = spoke_start_periodic(sc.s, MS, never_fn, NULL, id);
	rcs[3] = spoke_start_ttl(sc.s, MS, never_fn, NULL, id);
	rcs[4] = *id == SENTINEL_ID;
}

/* A scene, then fn on a new thread: its starts (try_all_starts) all gave err. */
static void starts_on_new_thread(void *(*fn)(void *), int *rcs, int err)
{
	scene_begin(1);
	pthread_join(thread_start(fn, rcs), NULL);
	for (unsigned i = 0; i < 4; i++)
		assert_int_equal(rcs[i], err);
	assert_true(rcs[4]);
}

/*
 * -ENOMEM: a thread with an arena but no handle region, and no memory: every
 * start function is refused, *id untouched, nothing started.
 */
static void *enomem_thread(void *p)
{
	int *rcs = p;
	spoke_id id = SENTINEL_ID;

	/* the first call makes the thread's arena: let that allocation through */
	fault_alloc_after(1);
	try_all_starts(rcs, &id);
	fault_off();
	return NULL;
}

static void start_functions_enomem(void **state)
{
	(void)state;
	int rcs[5];

	starts_on_new_thread(enomem_thread, rcs, -ENOMEM);
	scene_end();
}

/*
 * -ENOMEM when a region's slots cannot be made read/write (mprotect refused,
 * as under strict overcommit with no memory left): first as the thread's
 * region is reserved, which must then be given back (no 64 MiB reservation
 * left behind for every refused start), then at the next step of a region in
 * use, whose first step holds live timers. Every start function is refused
 * there, *id untouched, nothing started; with memory back, the next start
 * works. The counts come from percpu/service.h: SPOKE_REGION_BYTES, and
 * SPOKE_REGION_STEP_SLOTS less slot 0 (the region's header).
 */
#define STEP_TIMERS  8191u
#define REGION_BYTES (64ul << 20)

struct step_result {
	int first[5], step[5], after;
	bool given_back;
	unsigned started;
};

/* Reserved regions not yet in use: PROT_NONE mappings of exactly one region. */
static unsigned reserved_regions(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512], perms[8];
	unsigned long lo, hi;
	unsigned n = 0;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 && hi - lo == REGION_BYTES &&
		    strcmp(perms, "---p") == 0)
			n++;
	fclose(f);
	return n;
}

static void *enomem_step_thread(void *p)
{
	struct step_result *r = p;
	spoke_id id = SENTINEL_ID, *live = calloc(STEP_TIMERS, sizeof(*live));
	unsigned regions;

	if (!live)
		abort();
	(void)spoke_cancel(sc.s, 0); /* makes this thread's arena, not its region */
	regions = reserved_regions();
	fault_alloc_after(1); /* the region's reservation passes, its first step does not */
	try_all_starts(r->first, &id);
	fault_off();
	r->given_back = reserved_regions() == regions;
	for (unsigned i = 0; i < STEP_TIMERS; i++)
		r->started += spoke_start_on(sc.s, 0, 3600 * SEC, never_fn, NULL, &live[i]) == 0;
	fault_alloc_after(0);
	try_all_starts(r->step, &id);
	fault_off();
	r->after = spoke_start_on(sc.s, 0, 3600 * SEC, never_fn, NULL, &id);
	if (r->after == 0)
		(void)spoke_cancel(sc.s, id);
	for (unsigned i = 0; i < STEP_TIMERS; i++)
		(void)spoke_cancel(sc.s, live[i]);
	free(live);
	return NULL;
}

static void start_functions_enomem_region_step(void **state)
{
	struct step_result r = {0};

	(void)state;
	scene_begin(1);
	pthread_join(thread_start(enomem_step_thread, &r), NULL);
	for (unsigned i = 0; i < 4; i++) {
		assert_int_equal(r.first[i], -ENOMEM);
		assert_int_equal(r.step[i], -ENOMEM);
	}
	assert_true(r.first[4] && r.step[4]);
	assert_true(r.given_back);
	assert_int_equal(r.started, STEP_TIMERS);
	assert_int_equal(r.after, 0);
	/* Started: the witnesses, the step's timers and the one after; none by a refused call. */
	ASSERT_EVENTUALLY(stats_settled(sc.s, 2 + STEP_TIMERS + 1, 2),
			  "the thread's timers to be cancelled");
	spoke_stats(sc.s, &sc.before);
	scene_end();
}

/*
 * Not an error: a TTL start the lawn cannot grow for (-ENOMEM) goes to the
 * wheel instead, and from then on cancel, reset and expiry must find it
 * there. The lawn's first hash table holds 32 TTLs; the next new TTL needs
 * it doubled, which the armed fault refuses.
 */
#define LAWN_FIRST_TABLE_TTLS 32

static void start_ttl_lawn_enomem_goes_to_wheel(void **state)
{
	struct spoke *s = svc_new(1, 1 * MS, 0);
	spoke_id far[LAWN_FIRST_TABLE_TTLS], soon = 0, stopped = 0, moved = 0;
	atomic_uint ran = 0, far_ran = 0;
	unsigned long refused;
	int rc[3];
	uint64_t give_up;

	(void)state;
	assert_int_equal(spoke_attach(s, 0), 0);
	for (unsigned i = 0; i < LAWN_FIRST_TABLE_TTLS; i++)
		assert_int_equal(spoke_start_ttl(s, (3600 + i) * SEC, count_fn, &far_ran, &far[i]),
				 0);
	fault_alloc_after(0);
	rc[0] = spoke_start_ttl(s, 5 * MS, count_fn, &ran, &soon);
	rc[1] = spoke_start_ttl(s, 7200 * SEC, count_fn, &far_ran, &stopped);
	rc[2] = spoke_start_ttl(s, 7300 * SEC, count_fn, &ran, &moved);
	refused = fault_allocs_failed;
	fault_off();
	assert_true(refused > 0); /* the lawn did ask for memory */
	for (unsigned i = 0; i < 3; i++)
		assert_int_equal(rc[i], 0);
	assert_int_equal(spoke_cancel(s, stopped), 0);
	assert_int_equal(spoke_reset(s, moved, 10 * MS), 0);
	give_up = mono_ns() + EVENTUALLY_NS;
	while (atomic_load(&ran) < 2 && mono_ns() < give_up) {
		assert_true(spoke_poll(s) >= 0);
		sleep_ns(200 * US);
	}
	assert_int_equal(atomic_load(&ran), 2);
	assert_int_equal(spoke_cancel(s, soon), -ENOENT);
	assert_int_equal(spoke_cancel(s, moved), -ENOENT);
	assert_int_equal(stats_pending(s), LAWN_FIRST_TABLE_TTLS);
	for (unsigned i = 0; i < LAWN_FIRST_TABLE_TTLS; i++)
		assert_int_equal(spoke_cancel(s, far[i]), 0);
	assert_true(spoke_poll(s) >= 0);
	assert_stats_settled(s, LAWN_FIRST_TABLE_TTLS + 3, 0);
	assert_int_equal(atomic_load(&far_ran), 0);
	assert_int_equal(spoke_detach(s), 0);
}

/*
 * -EAGAIN: a new thread whose arena cannot be allocated: every start
 * function is refused, *id untouched. (cancel, cancel_sync and reset give
 * -EAGAIN there too, which spoke.h does not say: they are checked to leave
 * the witnesses alone.)
 */
static void *eagain_thread(void *p)
{
	int *rcs = p;
	spoke_id id = SENTINEL_ID;

	fault_alloc_after(0);
	try_all_starts(rcs, &id);
	rcs[5] = spoke_cancel(sc.s, sc.w[0]);
	rcs[6] = spoke_cancel_sync(sc.s, sc.w[1]);
	rcs[7] = spoke_reset(sc.s, sc.w[0], 0);
	fault_off();
	rcs[8] = spoke_start(sc.s, 3600 * SEC, never_fn, NULL, &id); /* memory back */
	rcs[9] = spoke_cancel(sc.s, id);
	return NULL;
}

static void start_functions_eagain(void **state)
{
	(void)state;
	int rcs[10];

	starts_on_new_thread(eagain_thread, rcs, -EAGAIN);
	assert_true(rcs[5] < 0 && rcs[6] < 0 && rcs[7] < 0);
	assert_int_equal(rcs[8], 0);
	assert_int_equal(rcs[9], 0);
	/* that start and its cancel are the only change */
	ASSERT_EVENTUALLY(stats_settled(sc.s, 3, 2), "the cancelled timer to be unlinked");
	spoke_stats(sc.s, &sc.now);
	assert_int_equal(sc.now.total.cancelled, sc.before.total.cancelled + 1);
	assert_int_equal(sc.now.total.reset, sc.before.total.reset);
	sc.before = sc.now;
	scene_end();
}

/* ==== reset, cancel, cancel_sync ===============================================================
 */

static void id_calls_null_service_einval(void **state)
{
	(void)state;
	scene_begin(1);
	for (unsigned k = 0; k < 2; k++) {
		assert_int_equal(spoke_reset(NULL, sc.w[k], 0), -EINVAL);
		assert_int_equal(spoke_cancel(NULL, sc.w[k]), -EINVAL);
		assert_int_equal(spoke_cancel_sync(NULL, sc.w[k]), -EINVAL);
	}
	scene_end();
}

/*
 * -ENOENT for ids next to the live ones: the same slot with another
 * generation (older, newer, far), the same generation in slots never issued,
 * another arena's bits, the generation alone, id 0. None touches a witness.
 */
static void id_calls_bad_ids_enoent(void **state)
{
	(void)state;
	spoke_id bad[32];
	unsigned n = 0;

	scene_begin(1);
	for (unsigned k = 0; k < 2; k++) {
		uint64_t w = sc.w[k], gen = w >> 32, slot = w & 0xffffffffu;

		bad[n++] = ((gen - 1) << 32) | slot;
		bad[n++] = ((gen + 1) << 32) | slot;
		bad[n++] = ((gen ^ 0x80000000u) << 32) | slot;
		bad[n++] = (gen << 32) | ((slot + 7) & 0xffffffffu);	/* never issued */
		bad[n++] = (gen << 32) | ((slot + 1000) & 0xffffffffu); /* never issued */
		bad[n++] = (gen << 32) | (slot ^ (1u << 20));		/* another arena */
		bad[n++] = (gen << 32) | (slot | 0xfff00000u);		/* the last arena */
		bad[n++] = (gen << 32) | (slot & 0xfff00000u);		/* its region's header */
		bad[n++] = gen << 32;
		bad[n++] = slot;
	}
	bad[n++] = 0;
	for (unsigned i = 0; i < n; i++) {
		if (bad[i] == sc.w[0] || bad[i] == sc.w[1])
			continue;
		if (spoke_cancel(sc.s, bad[i]) != -ENOENT ||
		    spoke_cancel_sync(sc.s, bad[i]) != -ENOENT ||
		    spoke_reset(sc.s, bad[i], 0) != -ENOENT)
			fail_msg("id %#" PRIx64 " (witnesses %#" PRIx64 ", %#" PRIx64
				 "): not -ENOENT",
				 bad[i], sc.w[0], sc.w[1]);
	}
	scene_end();
}

/* ==== attach, poll, next_deadline ================================================================
 */

/* A server thread: attaches to a shard and polls until told to stop, running jobs between. */
struct owner {
	unsigned shard;
	int attach_rc, range_rc[3];
	pthread_t tid;
	atomic_int attached, stop, stopped;
	void (*_Atomic job)(struct owner *o);
	atomic_int job_done;
	int job_rc;
};

static struct owner own;
static pthread_t own_thread; /* while own_running: joined by the teardown if a test failed */
static bool own_running;

static void *owner_main(void *p)
{
	struct owner *o = p;

	o->tid = pthread_self();
	/* refused attaches do not count as owning a shard */
	o->range_rc[0] = spoke_attach(sc.s, 2);
	o->range_rc[1] = spoke_attach(sc.s, UINT_MAX);
	o->range_rc[2] = spoke_attach(sc.s, SPOKE_MAX_SHARDS);
	o->attach_rc = spoke_attach(sc.s, o->shard);
	atomic_store(&o->attached, 1);
	while (!atomic_load(&o->stop)) {
		void (*job)(struct owner *) = atomic_exchange(&o->job, NULL);

		if (job) {
			job(o);
			atomic_store(&o->job_done, 1);
		}
		BG_CHECK_INT(spoke_poll(sc.s), >=, 0);
		sleep_ns(100 * US);
	}
	atomic_store(&o->stopped, 1);
	return NULL;
}

/* The witness of the owner's shard runs on the owner thread, inline in its poll. */
static void owner_witness_fn(void *arg)
{
	BG_CHECK(pthread_equal(pthread_self(), own.tid));
	trec_fire(arg);
}

/* A scene whose shard `k` is attached to the owner thread; witness k runs in its poll. */
static pthread_t owner_begin(unsigned k)
{
	pthread_t t;

	scene_begin(1);
	memset(&own, 0, sizeof(own));
	own.shard = k;
	assert_int_equal(spoke_cancel(sc.s, sc.w[k]), 0);
	assert_int_equal(
		spoke_start_on(sc.s, k, 3600 * SEC, owner_witness_fn, &sc.rec[k], &sc.w[k]), 0);
	t = thread_start(owner_main, &own);
	own_thread = t;
	own_running = true;
	ASSERT_EVENTUALLY(atomic_load(&own.attached), "the attach");
	assert_int_equal(own.attach_rc, 0);
	/*
	 * The old witness's cancel and the new one's start are messages: wait
	 * until the shard took both (started 3, cancelled 1), not just for
	 * pending 2, which holds before either is taken too.
	 */
	ASSERT_EVENTUALLY((spoke_stats(sc.s, &sc.before),
			   sc.before.total.started == 3 && sc.before.total.cancelled == 1 &&
				   sc.before.total.pending == 2 && sc.before.shard[k].attached),
			  "the shard to be attached and the new witness taken on");
	return t;
}

static void owner_run(void (*job)(struct owner *o))
{
	atomic_store(&own.job_done, 0);
	atomic_store(&own.job, job);
	ASSERT_EVENTUALLY(atomic_load(&own.job_done), "the owner's job");
}

static void owner_end(pthread_t t)
{
	scene_unchanged();
	/* the owner's witness runs in its poll, the other on its managed shard */
	for (unsigned k = 0; k < 2; k++) {
		atomic_store(&sc.rec[k].earliest, spoke_now_ns() + MS);
		assert_int_equal(spoke_reset(sc.s, sc.w[k], MS), 0);
	}
	ASSERT_EVENTUALLY(atomic_load(&sc.rec[0].fired) && atomic_load(&sc.rec[1].fired),
			  "the witnesses to run");
	atomic_store(&own.stop, 1);
	pthread_join(t, NULL);
	own_running = false;
	/* scene_end's resets find nothing pending: both ran once */
	for (unsigned k = 0; k < 2; k++)
		assert_int_equal(atomic_load(&sc.rec[k].fired), 1);
	assert_never_early();
	assert_no_bg_failures();
	svc_destroy(sc.s);
}

static void spoke_attach_out_of_range_einval(void **state)
{
	(void)state;
	pthread_t t;

	scene_begin(1);
	assert_int_equal(spoke_attach(NULL, 0), -EINVAL);
	assert_int_equal(spoke_attach(sc.s, 2), -EINVAL);
	assert_int_equal(spoke_attach(sc.s, UINT_MAX), -EINVAL);
	assert_int_equal(spoke_poll(sc.s), -EPERM); /* the main thread owns nothing */
	scene_unchanged();
	svc_destroy(sc.s);
	/* the thread whose attaches were refused may still attach */
	t = owner_begin(1);
	assert_int_equal(own.range_rc[0], -EINVAL);
	assert_int_equal(own.range_rc[1], -EINVAL);
	assert_int_equal(own.range_rc[2], -EINVAL);
	owner_end(t);
}

static void spoke_attach_held_shard_ebusy(void **state)
{
	(void)state;
	pthread_t t = owner_begin(1);

	assert_int_equal(spoke_attach(sc.s, 1), -EBUSY);
	assert_int_equal(spoke_poll(sc.s), -EPERM); /* the refused thread did not get it */
	assert_int_equal(spoke_next_deadline_ns(sc.s, &(uint64_t){0}), -EPERM);
	owner_end(t);
}

static void second_attach_job(struct owner *o)
{
	o->job_rc = spoke_attach(sc.s, 1 - o->shard);
}

static void spoke_attach_second_shard_ebusy(void **state)
{
	(void)state;
	pthread_t t = owner_begin(0);

	owner_run(second_attach_job);
	assert_int_equal(own.job_rc, -EBUSY);
	/* shard 1 stays managed (scene_unchanged compares `attached`): the main thread can take it
	 */
	owner_end(t);
}

/* A callback inline on a managed shard thread of one instance tries to attach in another. */
struct cross_attach {
	struct spoke *other;
	atomic_int rc, ran;
};

static void cross_attach_fn(void *arg)
{
	struct cross_attach *x = arg;

	atomic_store(&x->rc, spoke_attach(x->other, 0));
	atomic_store(&x->ran, 1);
}

/*
 * A thread owns one shard at a time across instances: attached in one live
 * instance, or a managed shard thread of one (an inline callback), it gets
 * -EBUSY from another, which stays as it was; after a detach it may attach
 * there, and so it may once the first instance is destroyed (its stale
 * owner record does not count).
 */
static void spoke_attach_other_instance_ebusy(void **state)
{
	struct spoke *a = svc_new(2, 250 * US, 1), *b = svc_new(2, 250 * US, 0);
	struct spoke_stats *st = stats_new();
	struct cross_attach x = {.other = a};

	(void)state;
	assert_int_equal(spoke_attach(a, 0), 0);
	assert_int_equal(spoke_attach(b, 0), -EBUSY);
	assert_int_equal(spoke_attach(b, 1), -EBUSY);
	spoke_stats(b, st);
	assert_false(st->shard[0].attached || st->shard[1].attached);
	assert_int_equal(spoke_detach(a), 0);
	assert_int_equal(spoke_attach(b, 0), 0);
	assert_int_equal(spoke_detach(b), 0);

	/* b's shard 1 runs callbacks inline on its managed thread, which owns that shard. */
	atomic_store(&x.rc, 1);
	assert_int_equal(spoke_start_on(b, 1, 0, cross_attach_fn, &x, NULL), 0);
	ASSERT_EVENTUALLY(atomic_load(&x.ran), "the callback on b's shard thread");
	assert_int_equal(atomic_load(&x.rc), -EBUSY);
	spoke_stats(a, st);
	assert_false(st->shard[0].attached);

	assert_int_equal(spoke_attach(a, 1), 0);
	svc_destroy(a); /* from its attached thread, after the "loop" */
	assert_int_equal(spoke_attach(b, 1), 0);
	assert_int_equal(spoke_detach(b), 0);
	free(st);
	svc_destroy(b);
}

/*
 * A call only an attached thread may make, from one that is not while
 * another thread owns shard 0 (owner_begin): `want` on sc.s, -EINVAL on
 * NULL. Shard 0 stays attached, so its witness runs in the owner's poll.
 */
#define ASSERT_NOT_ATTACHED(call, want)                                                            \
	do {                                                                                       \
		pthread_t t_ = owner_begin(0);                                                     \
                                                                                                   \
		assert_int_equal(call(sc.s), want);                                                \
		assert_int_equal(call(NULL), -EINVAL);                                             \
		owner_end(t_);                                                                     \
	} while (0)

static void spoke_poll_not_attached_eperm(void **state)
{
	(void)state;
	ASSERT_NOT_ATTACHED(spoke_poll, -EPERM);
}

static void spoke_wake_fd_not_attached_eperm(void **state)
{
	(void)state;
	ASSERT_NOT_ATTACHED(spoke_wake_fd, -EPERM);
}

/* The deprecated call keeps its encoding: -EINVAL, since -EPERM is -1, "nothing pending". */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static void spoke_next_deadline_not_attached_einval(void **state)
{
	(void)state;
	ASSERT_NOT_ATTACHED(spoke_next_deadline, -EINVAL);
}
#pragma GCC diagnostic pop

static void spoke_detach_not_attached_eperm(void **state)
{
	(void)state;
	ASSERT_NOT_ATTACHED(spoke_detach, -EPERM); /* shard 0 is the owner's, not ours */
}

/* -EBUSY: spoke_detach from a callback inside the owner's own spoke_poll. */
static atomic_int detach_in_poll_rc = 1;

static void detach_in_poll_fn(void *arg)
{
	(void)arg;
	atomic_store(&detach_in_poll_rc, spoke_detach(sc.s));
}

static void detach_in_poll_job(struct owner *o)
{
	o->job_rc = spoke_start(sc.s, 0, detach_in_poll_fn, NULL, NULL);
}

static void spoke_detach_in_poll_ebusy(void **state)
{
	(void)state;
	pthread_t t = owner_begin(1);

	atomic_store(&detach_in_poll_rc, 1);
	owner_run(detach_in_poll_job);
	assert_int_equal(own.job_rc, 0);
	ASSERT_EVENTUALLY(atomic_load(&detach_in_poll_rc) != 1, "the callback to run in the poll");
	assert_int_equal(atomic_load(&detach_in_poll_rc), -EBUSY);
	/* that timer was started and fired; everything else is as it was */
	ASSERT_EVENTUALLY((spoke_stats(sc.s, &sc.now), sc.now.shard[1].fired == 1),
			  "the shard's stats to count the run");
	sc.before.total.started++;
	sc.before.total.fired++;
	sc.before.shard[1].started++;
	sc.before.shard[1].fired++;
	owner_end(t); /* shard 1 still attached: its witness runs in the owner's poll */
}

/* -EAGAIN: no managed thread could be started; the caller stays attached. */
static void detach_eagain_job(struct owner *o)
{
	fault_thread_after(0);
	o->job_rc = spoke_detach(sc.s);
	fault_off();
}

static void spoke_detach_eagain(void **state)
{
	(void)state;
	pthread_t t = owner_begin(1);

	owner_run(detach_eagain_job);
	assert_int_equal(own.job_rc, -EAGAIN);
	owner_end(t); /* still attached: its witness runs in the owner's poll */
}

/*
 * -EAGAIN leaves the shard attached, also for its callbacks that were on the
 * pool queue (since before the attach) while the detach tried to start a
 * thread: one pool worker, held by a callback of shard 0, is let go inside
 * the failing pthread_create and takes shard 1's `victim`. It must not run
 * it on the pool: the caller is still attached, and gets it in its poll.
 */
static void dq_let_the_worker_go(void)
{
	atomic_store(&held.release, 1);
	sleep_ms(20); /* it takes the victim meanwhile */
}

static void spoke_detach_eagain_keeps_pool_runs(void **state)
{
	struct spoke *s = svc_new(2, 250 * US, 1);
	int rc;

	(void)state;
	held_pool_begin(s, 0, 1);
	assert_int_equal(spoke_attach(s, 1), 0);
	fault_thread_before_fail = dq_let_the_worker_go;
	fault_thread_after(0);
	rc = spoke_detach(s);
	fault_off();
	fault_thread_before_fail = NULL;
	assert_int_equal(rc, -EAGAIN);
	assert_int_equal(atomic_load(&held.victim_ran), 0); /* not on the pool */
	ASSERT_EVENTUALLY((spoke_poll(s), atomic_load(&held.victim_ran)), "the victim in the poll");
	assert_int_equal(atomic_load(&held.victim_off_main), 0);
	assert_int_equal(spoke_detach(s), 0);
	svc_destroy(s);
}

/*
 * -EAGAIN at exit: an attached thread exits while no thread can be started.
 * Its shard is left without a driver but free (not attached): its timer
 * waits, and the next spoke_attach takes the shard and runs it.
 */
struct abandon {
	struct spoke *s;
	int attach_rc;
	struct trec rec;
};

static void *abandon_main(void *arg)
{
	struct abandon *b = arg;

	b->attach_rc = spoke_attach(b->s, 1);
	atomic_store(&b->rec.earliest, spoke_now_ns() + MS);
	BG_CHECK_INT(spoke_start(b->s, MS, trec_fire, &b->rec, NULL), ==, 0);
	fault_thread_after(0); /* the detach at its exit cannot start a thread */
	return NULL;
}

static void spoke_detach_at_exit_eagain(void **state)
{
	struct abandon b = {.s = svc_new(2, 250 * US, 1)};
	struct spoke_stats *st = stats_new();

	(void)state;
	trec_reset_globals();
	pthread_join(thread_start(abandon_main, &b), NULL);
	assert_int_equal(b.attach_rc, 0);
	spoke_stats(b.s, st);
	assert_false(st->shard[1].attached);
	sleep_ms(20);
	assert_int_equal(atomic_load(&b.rec.fired), 0); /* nobody drives shard 1 */
	assert_int_equal(spoke_attach(b.s, 1), 0);
	ASSERT_EVENTUALLY((spoke_poll(b.s), atomic_load(&b.rec.fired) == 1),
			  "the abandoned timer to run in the new owner's poll");
	assert_int_equal(spoke_detach(b.s), 0);
	assert_never_early();
	assert_no_bg_failures();
	assert_stats_settled(b.s, 1, 0);
	free(st);
	svc_destroy(b.s);
}

/* ==== after destroy began ========================================================================
 */

struct late {
	struct spoke *s;
	atomic_int running, saw_shutdown;
	int attach_rc, poll_rc, wake_fd_rc, detach_rc, nd;
	unsigned shards;
	struct spoke_stats st;
	bool stats_zero;
};

static struct late late;

/* A callback that outlives the start of destroy and calls in once it has begun. */
static void late_fn(void *arg)
{
	struct late *l = arg;
	uint64_t end = spoke_now_ns() + 30 * SEC;
	static const struct spoke_stats zero;

	atomic_store(&l->running, 1);
	while (spoke_start(l->s, 3600 * SEC, never_fn, NULL, NULL) != -ESHUTDOWN &&
	       spoke_now_ns() < end)
		sleep_ns(50 * US);
	l->attach_rc = spoke_attach(l->s, 0);
	l->poll_rc = spoke_poll(l->s);
	l->nd = spoke_next_deadline_ns(l->s, &(uint64_t){0});
	l->wake_fd_rc = spoke_wake_fd(l->s);
	l->detach_rc = spoke_detach(l->s);
	l->shards = spoke_shards(l->s);
	memset(&l->st, 0xa5, sizeof(l->st));
	spoke_stats(l->s, &l->st);
	l->stats_zero = memcmp(&l->st, &zero, sizeof(zero)) == 0;
	atomic_store(&l->saw_shutdown, 1);
}

/*
 * -ESHUTDOWN from attach, poll, next_deadline, wake_fd and detach once destroy has begun
 * (spoke_shards gives 0 and spoke_stats all zeros then): called from a pool
 * callback that destroy waits for.
 */
static void after_destroy_began_eshutdown(void **state)
{
	(void)state;
	struct spoke *s = svc_new(2, 250 * US, 1);

	memset(&late, 0, sizeof(late));
	atomic_store(&never_ran, 0);
	late.s = s;
	assert_int_equal(spoke_start(s, 0, late_fn, &late, NULL), 0);
	ASSERT_EVENTUALLY(atomic_load(&late.running), "the callback to run");
	svc_destroy(s);
	assert_int_equal(atomic_load(&late.saw_shutdown), 1);
	assert_int_equal(late.attach_rc, -ESHUTDOWN);
	assert_int_equal(late.poll_rc, -ESHUTDOWN);
	assert_int_equal(late.nd, -ESHUTDOWN);
	assert_int_equal(late.wake_fd_rc, -ESHUTDOWN);
	assert_int_equal(late.detach_rc, -ESHUTDOWN);
	assert_int_equal(late.shards, 0);
	assert_true(late.stats_zero);
	assert_int_equal(atomic_load(&never_ran), 0);
}

/* A test that failed half way may have left fault injection armed. */
static int err_teardown(void **state)
{
	fault_off();
	/* A test that failed half way: stop its owner thread before the service goes. */
	if (own_running) {
		atomic_store(&own.stop, 1);
		pthread_join(own_thread, NULL);
		own_running = false;
	}
	return svc_test_teardown(state);
}

#define ERR_TEST(f) cmocka_unit_test_setup_teardown(f, svc_test_setup, err_teardown)

int main(int argc, char **argv)
{
	static const struct CMUnitTest tests[] = {
		ERR_TEST(spoke_create_null_out_einval),
		ERR_TEST(spoke_create_bad_shards_einval),
		ERR_TEST(spoke_create_bad_tick_einval),
		ERR_TEST(spoke_create_bad_engine_einval),
		ERR_TEST(spoke_create_bad_geometry_einval),
		ERR_TEST(spoke_create_bad_callback_threads_einval),
		ERR_TEST(spoke_create_bad_callback_threads_per_shard_einval),
		ERR_TEST(spoke_create_bad_lawn_shards_einval),
		ERR_TEST(spoke_create_bad_shard_overrides_einval),
		ERR_TEST(spoke_create_bad_override_cpu_einval),
		ERR_TEST(spoke_create_bad_override_tick_einval),
		ERR_TEST(spoke_create_bad_override_engine_einval),
		ERR_TEST(spoke_create_bad_override_geometry_einval),
		ERR_TEST(spoke_create_bad_slack_einval),
		ERR_TEST(spoke_create_enomem),
		ERR_TEST(spoke_create_eagain),
		ERR_TEST(spoke_start_einval),
		ERR_TEST(spoke_start_on_einval),
		ERR_TEST(spoke_start_periodic_einval),
		ERR_TEST(spoke_start_ttl_einval),
		ERR_TEST(start_functions_enomem),
		ERR_TEST(start_functions_enomem_region_step),
		ERR_TEST(start_functions_eagain),
		ERR_TEST(start_ttl_lawn_enomem_goes_to_wheel),
		ERR_TEST(id_calls_null_service_einval),
		ERR_TEST(id_calls_bad_ids_enoent),
		ERR_TEST(spoke_attach_out_of_range_einval),
		ERR_TEST(spoke_attach_held_shard_ebusy),
		ERR_TEST(spoke_attach_second_shard_ebusy),
		ERR_TEST(spoke_attach_other_instance_ebusy),
		ERR_TEST(spoke_poll_not_attached_eperm),
		ERR_TEST(spoke_wake_fd_not_attached_eperm),
		ERR_TEST(spoke_next_deadline_not_attached_einval),
		ERR_TEST(spoke_detach_not_attached_eperm),
		ERR_TEST(spoke_detach_in_poll_ebusy),
		ERR_TEST(spoke_detach_eagain),
		ERR_TEST(spoke_detach_eagain_keeps_pool_runs),
		ERR_TEST(spoke_detach_at_exit_eagain),
		ERR_TEST(after_destroy_began_eshutdown),
	};

	return svc_main(argc, argv, "service errors", tests, ARRAY_SIZE(tests));
}
