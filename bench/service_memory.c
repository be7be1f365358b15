/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * service_memory.c - bytes per pending timer (service.h): RSS growth / N
 * for N timers pending (1 h), started from one thread on the shards in
 * turn. bench_service.c says more.
 */
#define _GNU_SOURCE
#include "service.h"

#include <errno.h>
#include <malloc.h>
#include <string.h>

int run_memory(void *arg, unsigned run, struct bench_sample *out)
{
	const struct job *j = arg;
	const struct spoke_shard_stats *t;
	struct spoke *s;
	long before, after;
	unsigned nshards;
	spoke_id id;
	char sb[160];
	int err;

	(void)run;
	err = create_service(&s, 0, bench_ncpus(), 0, NS_PER_MS, out);
	if (err)
		return err;
	nshards = spoke_shards(s);
	/* This thread's arena exists from its first call on. */
	err = spoke_start_on(s, 0, LONG_DELAY_NS, bench_cb_count, &stall_fires, &id);
	if (!err)
		err = spoke_cancel(s, id);
	if (!err && bench_svc_wait(s, &(struct bench_svc_counts){1, 1, 0, 0, 0}, NULL) != 0)
		err = -ETIME;
	if (err) {
		spoke_destroy(s);
		return bench_fail(out, err, "warm-up start + cancel: %s", strerror(-err));
	}
	malloc_trim(0);
	before = bench_rss_bytes();
	for (uint64_t i = 0; !err && i < j->n; i++)
		err = spoke_start_on(s, (unsigned)(i % nshards), LONG_DELAY_NS, bench_cb_count,
				     &stall_fires, NULL);
	if (err)
		err = bench_fail(out, err, "spoke_start_on: %s", strerror(-err));
	else if (bench_svc_wait_pending(s, j->n, NULL) != 0)
		err = bench_fail(out, -ETIME, "%llu timers did not reach the wheels: %s",
				 (unsigned long long)j->n,
				 bench_svc_stats_str(sb, sizeof(sb), bench_svc_totals(s)));
	after = bench_rss_bytes();
	t = bench_svc_totals(s);
	if (!err && t->started != j->n + 1)
		err = bench_fail(out, -EPROTO, "%s", bench_svc_stats_str(sb, sizeof(sb), t));
	spoke_destroy(s);
	if (err)
		return err;
	if (before < 0 || after < 0)
		return bench_fail(out, -EIO, "cannot read /proc/self/statm");
	out->value = (double)(after - before) / (double)j->n;
	return 0;
}
