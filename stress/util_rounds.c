/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * util_rounds.c - the stress library's rounds: the service of a round, its
 * share of the options' budget, and the skeleton every program's rounds
 * share (create, run the workers, settle, report, destroy).
 */
#include "stress_util.h"

/* A service of that shape (exits if spoke_create fails). */
static struct spoke *svc_make(const struct svc_shape *sh)
{
	struct spoke_config c;
	struct spoke *s = NULL;
	int rc;

	spoke_config_init(&c);
	c.shards = sh->shards;
	c.tick_ns = sh->tick_ns;
	c.callback_threads = sh->pool;
	c.lawn_shards = sh->lawn_shards;
	if (sh->inbox_limit)
		c.inbox_limit = sh->inbox_limit;
	rc = spoke_create(&s, &c);
	if (rc != 0) {
		fprintf(stderr, "%s: spoke_create: %d (%s)\n", g_name, rc, strerror(-rc));
		exit(2);
	}
	return s;
}

/* "4 shards, tick 1000 us, pool of 2, 16 threads" */
static void svc_describe(char *buf, size_t len, const struct svc_shape *sh, unsigned threads)
{
	char pool[32] = "callbacks inline";

	if (sh->pool)
		snprintf(pool, sizeof(pool), "pool of %u", sh->pool);
	snprintf(buf, len, "%u shards, tick %" PRIu64 " us, %s, %u threads", sh->shards,
		 sh->tick_ns / US, pool, threads);
}

bool round_next(struct round *rd, unsigned n)
{
	unsigned i = rd->begun;
	double elapsed = (double)(now_ns() - g_t0_ns) / 1e9;

	if (g_opt.soak ? elapsed >= g_opt.seconds : i >= n)
		return false;
	rd->ops = g_opt.ops ? (g_opt.ops + n - 1) / n : 0;
	rd->secs = g_opt.seconds / n;
	if (g_opt.soak) {
		if (rd->secs > 60)
			rd->secs = 60;
		if (rd->secs > g_opt.seconds - elapsed)
			rd->secs = g_opt.seconds - elapsed;
	}
	rd->i = i;
	rd->cfg = i % n;
	rd->begun = i + 1;
	rd->t0_ns = now_ns();
	rd->seed = g_seed + i;
	rd->s = NULL;
	return true;
}

void round_begin(struct round *rd, const struct round_cfg *c, const char *note)
{
	char desc[128];

	rd->shape = c->shape;
	rd->threads = g_opt.threads ? g_opt.threads : c->threads;
	if (!rd->quiet) {
		svc_describe(desc, sizeof(desc), &rd->shape, rd->threads);
		printf("round %u: %s%s\n", rd->i + 1, desc, note ? note : "");
	}
	rd->s = svc_make(&rd->shape);
	tally_snapshot(rd->created);
}

void round_budget(struct round *rd, const char *phase)
{
	stress_phase(phase);
	budget_begin(rd->ops, rd->secs);
}

void round_run(struct round *rd, const char *phase, void (*fn)(unsigned idx, void *ctx), void *ctx)
{
	round_budget(rd, phase);
	run_threads(rd->threads, fn, ctx);
}

void round_settle_recs(struct round *rd)
{
	stress_phase("settle");
	recs_settle(rd->s, rd->created);
}

void round_report(const struct round *rd, const char *label)
{
	if (!rd->quiet)
		tally_report(label, rd->created, (double)(now_ns() - rd->t0_ns) / 1e9);
}

void round_end(struct round *rd)
{
	stress_phase("destroy");
	if (rd->s)
		spoke_destroy(rd->s);
	rd->s = NULL;
	/* The round's tables (recs_alloc, pers_alloc), forgotten for the next round. */
	free(g_recs);
	g_recs = NULL;
	g_nrecs = 0;
	free(g_pers);
	g_pers = NULL;
	g_npers = 0;
}
