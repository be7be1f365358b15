/* SPDX-License-Identifier: MIT */
/*
 * test_service_config.c - the configuration API of include/spoke/spoke.h (struct
 * spoke_config, spoke_config_init, spoke_create; docs/contract.md, The service):
 *
 *   config_defaults                      spoke_config_init / create(NULL) / shards 0
 *   config_now_is_monotonic_clock        spoke_now_ns is CLOCK_MONOTONIC
 *   config_per_shard_overrides           per-shard tick and engine
 *   config_stats_add_up                  started == fired + cancelled + pending
 *   config_lawn_shards_mask              lawn_shards picks the TTL shards
 *   config_inline_callbacks_on_shard_thread  callback_threads = 0
 *   config_service_threads_block_signals     shard and pool threads block signals
 *   config_threads_like_creator          every service thread has the creator's policy and
 *                                        CPUs, also one that spoke_detach starts
 *
 * Usage: test_service_config [test name...]   (no name: all)
 */
#include "service_util.h"

#include <signal.h>

/* ==== configuration ==================================================================== */

/*
 * Config API defaults: spoke_config_init gives a 1 ms tick, one shard per
 * online CPU (0 or the count), the hierarchical engine, pinned threads,
 * inbox_batch 4096, inbox_limit 2^20, rescue after 10 ms, 16 spares, Lawn on every shard,
 * no overrides. spoke_create with
 * NULL and with those defaults both run one shard per online CPU at 1 ms,
 * none attached, all counters 0, and a timer runs; so does shards = 0
 * ("0 = one per online CPU").
 */
static atomic_uint cd_runs;

static void config_defaults(void **state)
{
	(void)state;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	struct spoke_stats *st = stats_new();
	struct spoke_config c;

	assert_true(ncpu > 0);
	memset(&c, 0xa5, sizeof(c));
	spoke_config_init(&c);
	assert_int_equal(c.tick_ns, MS);
	assert_true(c.shards == 0 || c.shards == (unsigned)ncpu);
	assert_true(c.engine == NULL || strcmp(c.engine, "hierarchical") == 0);
	assert_true(c.pin_threads);
	assert_int_equal(c.inbox_batch, 4096);
	assert_int_equal(c.inbox_limit, 1u << 20);
	assert_int_equal(c.rescue_after_ns, 10 * MS);
	assert_int_equal(c.callback_spares, 16);
	assert_int_equal(c.lawn_shards, 0);
	assert_null(c.shard_overrides);
	assert_int_equal(c.n_shard_overrides, 0);

	for (int v = 0; v < 2; v++) {
		struct spoke *s = NULL;

		atomic_store(&cd_runs, 0);
		assert_int_equal(spoke_create(&s, v ? &c : NULL), 0);
		svc_register(s);
		assert_int_equal(spoke_shards(s), (unsigned)ncpu);
		spoke_stats(s, st);
		assert_int_equal(st->shards, (unsigned)ncpu);
		for (unsigned k = 0; k < st->shards; k++) {
			assert_int_equal(st->shard[k].tick_ns, MS);
			assert_false(st->shard[k].attached);
			assert_int_equal(st->shard[k].started, 0);
			assert_int_equal(st->shard[k].pending, 0);
		}
		assert_int_equal(spoke_start(s, MS, count_fn, &cd_runs, NULL), 0);
		ASSERT_EVENTUALLY(atomic_load(&cd_runs) == 1, "a timer to run");
		svc_destroy(s);
	}
	/* shards 0 means one per online CPU (spoke.h) */
	{
		struct spoke *s = NULL;

		spoke_config_init(&c);
		c.shards = 0;
		assert_int_equal(spoke_create(&s, &c), 0);
		svc_register(s);
		assert_int_equal(spoke_shards(s), (unsigned)ncpu);
		svc_destroy(s);
	}
	free(st);
}

/* spoke_now_ns() is CLOCK_MONOTONIC in ns (the never-early checks rely on it). */
static void config_now_is_monotonic_clock(void **state)
{
	(void)state;
	uint64_t prev = 0;

	for (int i = 0; i < 1000; i++) {
		uint64_t a = mono_ns(), n = spoke_now_ns(), b = mono_ns();

		if (n < a || n > b)
			fail_msg("spoke_now_ns() %" PRIu64 " outside CLOCK_MONOTONIC [%" PRIu64
				 ", %" PRIu64 "]",
				 n, a, b);
		assert_true(n >= prev);
		prev = n;
	}
}

#define PS_SHARDS  7
#define PS_THREADS 3

struct ps_ctx {
	struct spoke *s;
	unsigned per; /* per thread per shard */
	struct trec *rec;
	unsigned started[PS_SHARDS];
};

static struct ps_ctx ps;

static void ps_worker(unsigned idx, void *p)
{
	struct ps_ctx *c = p;
	struct rng rng = {0x9500 + idx};

	for (unsigned k = 0; k < PS_SHARDS; k++) {
		for (unsigned j = 0; j < c->per; j++) {
			struct trec *r = &c->rec[(idx * PS_SHARDS + k) * c->per + j];
			uint64_t d = rng_below(&rng, 6 * MS);
			spoke_id id;

			atomic_store(&r->earliest, spoke_now_ns() + d);
			BG_CHECK_INT(spoke_start_on(c->s, k, d, trec_fire, r, &id), ==, 0);
			if (rng_below(&rng, 5) == 0)
				trec_cancel(c->s, id, r);
		}
	}
}

/*
 * Config API, per-shard overrides ("per-core tuning"): 7 shards, 6 with
 * their own tick (100 us to 2 ms) and engine (list, sorted-list, hashed
 * with 16 and 256 buckets, hashed-sorted, hierarchical with its own
 * geometry), the 7th on the
 * global values; stats report each shard's tick; 3 threads start timers on
 * every shard (a fifth cancelled): each ends exactly once, never early, and
 * each shard's stats add up with its own started count.
 */
static void config_per_shard_overrides(void **state)
{
	(void)state;
	static const char *engines[] = {"list",		 "sorted-list", "hashed",
					"hashed-sorted", "hashed",	"hierarchical"};
	static const uint64_t ticks[] = {100 * US, 250 * US, 500 * US, 1 * MS, 2 * MS, 300 * US};
	struct spoke_shard_config ov[6];
	struct spoke_config c;
	struct spoke_stats *st = stats_new();
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned total;

	memset(&ps, 0, sizeof(ps));
	trec_reset_globals();
	memset(ov, 0, sizeof(ov));
	for (unsigned k = 0; k < 6; k++) {
		ov[k].cpu = (int)(k % (unsigned)ncpu);
		ov[k].engine = engines[k];
		ov[k].tick_ns = ticks[k];
	}
	ov[2].table_size = 16;
	ov[3].table_size = 64;
	ov[4].table_size = 256;
	ov[5].level_bits = 6;
	ov[5].levels = 11;
	svc_config(&c, PS_SHARDS, 700 * US, 2);
	c.shard_overrides = ov;
	c.n_shard_overrides = 6;
	ps.s = svc_create_cfg(&c);
	assert_int_equal(spoke_shards(ps.s), PS_SHARDS);
	spoke_stats(ps.s, st);
	for (unsigned k = 0; k < 6; k++)
		assert_int_equal(st->shard[k].tick_ns, ticks[k]);
	assert_int_equal(st->shard[6].tick_ns, 700 * US);

	ps.per = SCALE(200);
	total = PS_THREADS * PS_SHARDS * ps.per;
	ps.rec = calloc(total, sizeof(*ps.rec));
	assert_non_null(ps.rec);
	run_workers(PS_THREADS, ps_worker, &ps);
	assert_trecs_end_once(ps.s, ps.rec, total, NULL, NULL);
	spoke_stats(ps.s, st);
	for (unsigned k = 0; k < PS_SHARDS; k++)
		assert_int_equal(st->shard[k].started, PS_THREADS * ps.per);
	free(st);
	svc_destroy(ps.s);
	free(ps.rec);
}

#define SA_THREADS 6
#define SA_EACH	   100

struct sa_ctx {
	struct spoke *s;
	struct trec rec[SA_THREADS][5 * SA_EACH];
	spoke_id kept[SA_THREADS][SA_EACH];
	atomic_uint resets_ok, cancels_won;
};

static struct sa_ctx sa;

/* Callbacks that have run, by the records (the stats count a run as it starts). */
static uint64_t sa_fired(void)
{
	uint64_t fired = 0;

	for (unsigned t = 0; t < SA_THREADS; t++)
		for (unsigned i = 0; i < 5 * SA_EACH; i++)
			fired += atomic_load(&sa.rec[t][i].fired);
	return fired;
}

static void sa_worker(unsigned idx, void *p)
{
	struct sa_ctx *c = p;
	struct rng rng = {0x5a5a + idx};

	for (unsigned j = 0; j < SA_EACH; j++) {
		struct trec *r = &c->rec[idx][5 * j];
		spoke_id id;

		/* a one-shot that runs */
		BG_CHECK_INT(spoke_start_on(c->s, (unsigned)rng_below(&rng, 4),
					    rng_below(&rng, 3 * MS), trec_fire, &r[0], NULL),
			     ==, 0);
		/* one cancelled (it may run first if the delay is 0) */
		BG_CHECK_INT(spoke_start(c->s, rng_below(&rng, 2) ? 0 : 3600 * SEC, trec_fire,
					 &r[1], &id),
			     ==, 0);
		if (spoke_cancel(c->s, id) == 0) {
			atomic_fetch_add(&r[1].cancelled, 1);
			atomic_fetch_add(&c->cancels_won, 1);
		}
		/* one kept pending */
		BG_CHECK_INT(spoke_start_on(c->s, (unsigned)rng_below(&rng, 4), 3600 * SEC,
					    trec_fire, &r[2], &c->kept[idx][j]),
			     ==, 0);
		/* one reset from an hour to 1 ms */
		BG_CHECK_INT(spoke_start(c->s, 3600 * SEC, trec_fire, &r[3], &id), ==, 0);
		if (spoke_reset(c->s, id, MS) == 0)
			atomic_fetch_add(&c->resets_ok, 1);
		/* a TTL timer */
		BG_CHECK_INT(spoke_start_ttl(c->s, (1 + rng_below(&rng, 3)) * MS, trec_fire, &r[4],
					     NULL),
			     ==, 0);
	}
}

/*
 * Config API, spoke_stats counters add up (no periodic timers): after 6
 * threads ran one-shots, cancels, resets and TTL timers on 4 shards and
 * some stay pending, at quiescence every shard has started == fired +
 * cancelled + pending and the totals are the sums (max for inbox_hwm and
 * max_late_ns); total.fired is the number of callbacks, total.cancelled the
 * number of winning cancels, total.pending the timers kept, total.reset at
 * least 1 and at most the successful resets. Cancelling the kept ones
 * brings pending to 0 and cancelled up by as many.
 */
static void config_stats_add_up(void **state)
{
	(void)state;
	struct spoke_stats *st = stats_new();
	unsigned total = SA_THREADS * 5 * SA_EACH, kept = SA_THREADS * SA_EACH;
	uint64_t fired;

	memset(&sa, 0, sizeof(sa));
	sa.s = svc_new(4, 250 * US, 2);
	run_workers(SA_THREADS, sa_worker, &sa);
	assert_no_bg_failures();
	ASSERT_EVENTUALLY(stats_settled(sa.s, total, kept), "the stats to settle");
	sleep_ms(10);
	assert_stats_settled(sa.s, total, kept);
	/* a pool thread can stall between counting a run and running it */
	ASSERT_EVENTUALLY(sa_fired() == stats_total(sa.s).fired, "the counted runs to be made");
	fired = sa_fired();
	spoke_stats(sa.s, st);
	assert_int_equal(st->shards, 4);
	for (unsigned k = 0; k < 4; k++)
		assert_int_equal(st->shard[k].tick_ns, 250 * US);
	assert_int_equal(st->total.fired, fired);
	assert_int_equal(st->total.cancelled, atomic_load(&sa.cancels_won));
	assert_int_equal(st->total.pending, kept);
	assert_in_range(st->total.reset, 1, atomic_load(&sa.resets_ok));
	assert_true(st->total.inbox_hwm >= 1);
	for (unsigned t = 0; t < SA_THREADS; t++)
		for (unsigned j = 0; j < SA_EACH; j++)
			assert_int_equal(spoke_cancel(sa.s, sa.kept[t][j]), 0);
	ASSERT_EVENTUALLY(stats_settled(sa.s, total, 0), "pending to drop to 0");
	spoke_stats(sa.s, st);
	assert_int_equal(st->total.cancelled, atomic_load(&sa.cancels_won) + kept);
	free(st);
	svc_destroy(sa.s);
}

struct lm_ctx {
	struct spoke *s;
	struct trec rec[4][400];
};

static struct lm_ctx lm;

static void lm_worker(unsigned idx, void *p)
{
	struct lm_ctx *c = p;

	for (unsigned j = 0; j < 400; j++) {
		uint64_t ttl = j % 2 ? MS : 300 * US + (idx * 400 + j) * 997;

		atomic_store(&c->rec[idx][j].earliest, spoke_now_ns() + ttl);
		BG_CHECK_INT(spoke_start_ttl(c->s, ttl, trec_fire, &c->rec[idx][j], NULL), ==, 0);
	}
}

/*
 * Config API, lawn_shards: with bit 1 only, shard 1 takes every TTL timer
 * (1600 from 4 threads, few and many distinct TTLs): shard 1's started and
 * fired count them all, shards 0 and 2 none; each runs once, never early.
 */
static void config_lawn_shards_mask(void **state)
{
	(void)state;
	struct spoke_config c;
	struct spoke_stats *st = stats_new();

	memset(&lm, 0, sizeof(lm));
	trec_reset_globals();
	svc_config(&c, 3, 250 * US, 2);
	c.lawn_shards = 1u << 1;
	lm.s = svc_create_cfg(&c);
	run_workers(4, lm_worker, &lm);
	ASSERT_EVENTUALLY(stats_settled(lm.s, 1600, 0), "stats to settle");
	for (unsigned t = 0; t < 4; t++)
		for (unsigned j = 0; j < 400; j++)
			ASSERT_EVENTUALLY(atomic_load(&lm.rec[t][j].fired) == 1,
					  "TTL timers to run");
	assert_no_bg_failures();
	assert_never_early();
	spoke_stats(lm.s, st);
	assert_int_equal(st->shard[1].started, 1600);
	assert_int_equal(st->shard[1].fired, 1600);
	assert_int_equal(st->shard[0].started, 0);
	assert_int_equal(st->shard[2].started, 0);
	free(st);
	svc_destroy(lm.s);
}

#define IC_SHARDS 3
#define IC_EACH	  50

struct ic_rec {
	atomic_int done;
	pthread_t tid;
};

static struct ic_rec icr[IC_SHARDS][IC_EACH];

static void ic_fn(void *arg)
{
	struct ic_rec *r = arg;

	r->tid = pthread_self();
	atomic_store(&r->done, 1);
}

/*
 * Config API, callback_threads = 0: callbacks run inline on their shard's
 * thread: all of a shard's callbacks on one thread, a different one per
 * shard, never the thread that started them.
 */
static void config_inline_callbacks_on_shard_thread(void **state)
{
	(void)state;
	struct spoke *s = svc_new(IC_SHARDS, 250 * US, 0);
	struct rng rng = {0x1c};

	memset(icr, 0, sizeof(icr));
	for (unsigned k = 0; k < IC_SHARDS; k++)
		for (unsigned i = 0; i < IC_EACH; i++)
			assert_int_equal(spoke_start_on(s, k, rng_below(&rng, 2 * MS), ic_fn,
							&icr[k][i], NULL),
					 0);
	for (unsigned k = 0; k < IC_SHARDS; k++)
		for (unsigned i = 0; i < IC_EACH; i++)
			ASSERT_EVENTUALLY(atomic_load(&icr[k][i].done), "callbacks to run");
	for (unsigned k = 0; k < IC_SHARDS; k++) {
		assert_false(pthread_equal(icr[k][0].tid, pthread_self()));
		for (unsigned i = 1; i < IC_EACH; i++)
			assert_true(pthread_equal(icr[k][i].tid, icr[k][0].tid));
		for (unsigned j = 0; j < k; j++)
			assert_false(pthread_equal(icr[k][0].tid, icr[j][0].tid));
	}
	svc_destroy(s);
}

/* ==== the service's own threads block every signal ========================================
 */

struct sigrec {
	atomic_uint runs, unblocked; /* runs that found SIGINT, SIGTERM or SIGUSR1 deliverable */
};

static void sig_fn(void *arg)
{
	struct sigrec *r = arg;
	sigset_t cur;

	pthread_sigmask(SIG_BLOCK, NULL, &cur);
	if (!sigismember(&cur, SIGINT) || !sigismember(&cur, SIGTERM) ||
	    !sigismember(&cur, SIGUSR1))
		atomic_fetch_add(&r->unblocked, 1);
	atomic_fetch_add(&r->runs, 1);
}

static void *sig_attach_detach(void *s)
{
	BG_CHECK_INT(spoke_attach(s, 1), ==, 0);
	BG_CHECK_INT(spoke_detach(s), ==, 0); /* starts shard 1's thread from here */
	return NULL;
}

/*
 * The application's signals go to its own threads: callbacks on pool
 * workers, on shard threads (callback_threads = 0) and on a shard thread
 * started by spoke_detach from a thread that blocks nothing all run with
 * SIGINT, SIGTERM and SIGUSR1 blocked.
 */
static void config_service_threads_block_signals(void **state)
{
	static const unsigned pools[] = {1, 0};
	sigset_t none, old;

	(void)state;
	sigemptyset(&none);
	pthread_sigmask(SIG_SETMASK, &none, &old); /* threads inherit this mask */
	for (unsigned v = 0; v < ARRAY_SIZE(pools); v++) {
		struct spoke *s = svc_new(2, 250 * US, pools[v]);
		struct sigrec r = {0};

		pthread_join(thread_start(sig_attach_detach, s), NULL);
		for (unsigned k = 0; k < 2; k++)
			assert_int_equal(spoke_start_on(s, k, MS, sig_fn, &r, NULL), 0);
		ASSERT_EVENTUALLY(atomic_load(&r.runs) == 2, "the callbacks to run");
		assert_int_equal(atomic_load(&r.unblocked), 0);
		assert_no_bg_failures();
		svc_destroy(s);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* ==== the service's threads are like the creator's ===========================================
 */

struct schedrec {
	atomic_uint runs,
		unlike; /* runs on a thread whose policy or CPUs differ from the creator's */
	cpu_set_t cpus; /* the creator's */
};

static void sched_fn(void *arg)
{
	struct schedrec *r = arg;
	cpu_set_t cur;

	if (sched_getaffinity(0, sizeof(cur), &cur) != 0 || !CPU_EQUAL(&cur, &r->cpus) ||
	    sched_getscheduler(0) != SCHED_BATCH)
		atomic_fetch_add(&r->unlike, 1);
	atomic_fetch_add(&r->runs, 1);
}

/* The creator: SCHED_BATCH (no privilege needed), on the last CPU it may use only. */
static void *sched_creator(void *arg)
{
	struct schedrec *r = arg;
	struct sched_param none = {0};
	struct spoke_config c;
	struct spoke *s = NULL;
	cpu_set_t allowed;
	int last = 0;

	BG_CHECK_INT(sched_getaffinity(0, sizeof(allowed), &allowed), ==, 0);
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
		if (CPU_ISSET(cpu, &allowed))
			last = cpu;
	CPU_ZERO(&r->cpus);
	CPU_SET(last, &r->cpus);
	BG_CHECK_INT(pthread_setschedparam(pthread_self(), SCHED_BATCH, &none), ==, 0);
	BG_CHECK_INT(pthread_setaffinity_np(pthread_self(), sizeof(r->cpus), &r->cpus), ==, 0);
	svc_config(&c, 2, 250 * US, 0);
	c.pin_threads = false;
	BG_CHECK_INT(spoke_create(&s, &c), ==, 0);
	return s;
}

/*
 * Every thread spoke starts has the scheduling policy and CPUs of the thread
 * that called spoke_create, also the managed thread that a spoke_detach
 * starts from a loop thread with other ones (default policy, every CPU):
 * callbacks run inline on the shard threads (callback_threads = 0), on
 * both shards, one of them handed back by this thread.
 */
static void config_threads_like_creator(void **state)
{
	struct schedrec r = {0};
	struct spoke *s;
	void *ret;

	(void)state;
	pthread_join(thread_start(sched_creator, &r), &ret);
	assert_no_bg_failures();
	s = ret;
	svc_register(s);
	assert_int_equal(spoke_start_on(s, 0, MS, sched_fn, &r, NULL), 0);
	ASSERT_EVENTUALLY(atomic_load(&r.runs) == 1, "the callback on shard 0");
	assert_int_equal(spoke_attach(s, 1), 0);
	assert_int_equal(spoke_detach(s), 0); /* shard 1's new thread: started from here */
	assert_int_equal(spoke_start_on(s, 1, MS, sched_fn, &r, NULL), 0);
	ASSERT_EVENTUALLY(atomic_load(&r.runs) == 2, "the callback on shard 1");
	assert_int_equal(atomic_load(&r.unlike), 0);
	svc_destroy(s);
}

int main(int argc, char **argv)
{
	static const struct CMUnitTest tests[] = {
		SVC_TEST(config_defaults),
		SVC_TEST(config_now_is_monotonic_clock),
		SVC_TEST(config_per_shard_overrides),
		SVC_TEST(config_stats_add_up),
		SVC_TEST(config_lawn_shards_mask),
		SVC_TEST(config_inline_callbacks_on_shard_thread),
		SVC_TEST(config_service_threads_block_signals),
		SVC_TEST(config_threads_like_creator),
	};

	return svc_main(argc, argv, "service config", tests, ARRAY_SIZE(tests));
}
