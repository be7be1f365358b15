/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * latency_stolen.c - the stolen-CPU scenario of `spoke-bench latency`: how
 * late timers run when the CPU of the shard that owns them is taken away.
 *
 * A per-CPU timer is only as punctual as the thread that owns its queue.
 * Here that thread is held off its CPU on purpose: one run
 *
 *   1. creates the service from stolen_cpu_config() (the default: a shard
 *      per CPU, each pinned, shard 0 on CPU 0; a pool of one callback
 *      thread per shard, not pinned) and holds `pending` timers on the
 *      shards (5 s .. 600 s, as in every latency run);
 *   2. moves its own thread to another CPU, and starts a busy thread with
 *      SCHED_FIFO (priority 1: above every normal thread) pinned to CPU 0,
 *      which sleeps until H, then spins until H + stall: from H on, shard
 *      0's thread cannot run;
 *   3. starts `timers` timers on shard 0 (before H; the shard takes them in
 *      while it still runs), due evenly over [H + 10 ms, H + stall - 10 ms],
 *      whose callbacks run on the pool and record their lateness, as the
 *      stream of a latency run does (latency_run.c);
 *   4. waits for every callback, and checks: none early, each exactly once,
 *      the service's counters as the run made them.
 *
 * On a virtual machine the host may take the other CPUs too, for a few ms
 * at a time; whoever rescues shard 0 runs there, so such a theft lands on
 * the rescued timers' lateness. The run reports the steal time the guest's
 * kernel counted on the other CPUs from step 3 to the last callback
 * (/proc/stat, in clock ticks: 10 ms steps), so that a late outlier can be
 * told from a slow rescue.
 *
 * Without rescue (rescue_after_ns 0) the timers wait for the stall to end:
 * lateness up to the whole stall; with it, another spoke thread takes the
 * shard's expiry over once its work has waited rescue_after_ns. The
 * row reports p50, p99, p99.9 and max lateness, how many callbacks ran while
 * the CPU was still taken, and the stall as the busy thread measured it.
 *
 * Setting SCHED_FIFO needs root (CAP_SYS_NICE) or an RLIMIT_RTPRIO: without
 * it the run returns -EPERM and the row says so ("skipped"); a machine with
 * one CPU, or without CPU 0 and another in this process's affinity, cannot
 * stall one and keep the bench running: -EXDEV, skipped too.
 *
 * Columns: each entry of stolen_cpu_columns[] is one configuration of the
 * service, run on the same scenario and printed side by side.
 */
#define _GNU_SOURCE
#include "latency.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STOLEN_CPU	 0		  /* shard 0's CPU (shard k on CPU k % CPUs) */
#define STOLEN_LEAD_NS	 (50 * NS_PER_MS) /* from the setup to H */
#define STOLEN_MARGIN_NS (10 * NS_PER_MS) /* timers fall due from H + this to H + stall - this */
#define STOLEN_SEED	 UINT64_C(0x5701e2c9a1b2c3d4)

/*
 * The configurations side by side. A column that turns rescue on adds its
 * entry here and sets struct spoke_config's rescue_after_ns for it in
 * stolen_cpu_config().
 */
const struct stolen_cpu_column stolen_cpu_columns[] = {
	{"rescue off", "off", 0},
	{"rescue 10 ms", "10ms", 10 * NS_PER_MS},
};
const size_t stolen_cpu_ncolumns = sizeof(stolen_cpu_columns) / sizeof(stolen_cpu_columns[0]);

/*
 * The service of the scenario for j->column: the default configuration
 * (shards pinned to their CPUs, the default pool) with the job's tick and
 * the column's rescue_after_ns (off, or the default).
 */
static void stolen_cpu_config(struct spoke_config *cfg, const struct stolen_cpu_job *j)
{
	spoke_config_init(cfg);
	cfg->tick_ns = j->tick_ns;
	cfg->pin_threads = true;
	cfg->rescue_after_ns = stolen_cpu_columns[j->column].rescue_after_ns;
}

/* ---- the busy thread ----------------------------------------------------------- */

struct hog {
	pthread_t th;
	uint64_t from_ns, stall_ns;  /* spin over [from, from + stall) */
	uint64_t began_ns, ended_ns; /* as it measured them (read after the join) */
};

static void *hog_main(void *arg)
{
	struct hog *h = arg;
	uint64_t now;

	bench_sleep_until_ns(h->from_ns);
	h->began_ns = now = bench_now_ns();
	while (now < h->from_ns + h->stall_ns)
		now = bench_now_ns();
	h->ended_ns = now;
	return NULL;
}

/* Start the busy thread on cpu with SCHED_FIFO. 0, or -EPERM (no privilege) or another -errno. */
static int hog_start(struct hog *h, int cpu)
{
	struct sched_param sp = {.sched_priority = sched_get_priority_min(SCHED_FIFO)};
	pthread_attr_t attr;
	cpu_set_t set;
	int err;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	err = pthread_attr_init(&attr);
	if (err)
		return -err;
	err = pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED);
	if (!err)
		err = pthread_attr_setschedpolicy(&attr, SCHED_FIFO);
	if (!err)
		err = pthread_attr_setschedparam(&attr, &sp);
	if (!err)
		err = pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
	if (!err)
		err = pthread_create(&h->th, &attr, hog_main, h);
	pthread_attr_destroy(&attr);
	return -err;
}

/*
 * Whether this process may use STOLEN_CPU and one other CPU; the other
 * (the highest) in *other. 0, or -EXDEV with out->error set.
 */
static int pick_cpus(int *other, struct bench_sample *out)
{
	cpu_set_t set;

	if (bench_ncpus() < 2)
		return bench_fail(out, -EXDEV,
				  "one CPU: stalling it would stop the bench's own thread too");
	if (sched_getaffinity(0, sizeof(set), &set) != 0 || !CPU_ISSET(STOLEN_CPU, &set))
		return bench_fail(out, -EXDEV, "CPU %d (shard 0's) is not in this process's CPUs",
				  STOLEN_CPU);
	for (*other = CPU_SETSIZE - 1; *other > STOLEN_CPU; (*other)--)
		if (CPU_ISSET(*other, &set))
			return 0;
	return bench_fail(out, -EXDEV, "no CPU but %d in this process's CPUs", STOLEN_CPU);
}

/*
 * The host's steal time so far on every CPU but STOLEN_CPU, in ms (the
 * guest kernel's count, /proc/stat's eighth field; USER_HZ ticks); -1 if it
 * cannot be read.
 */
static double steal_ms_other_cpus(void)
{
	unsigned long long user, nice, sys, idle, iowait, irq, softirq, steal, total = 0;
	long hz = sysconf(_SC_CLK_TCK);
	FILE *f = fopen("/proc/stat", "r");
	char line[256];
	bool any = false;
	int cpu;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "cpu%d %llu %llu %llu %llu %llu %llu %llu %llu", &cpu, &user,
			   &nice, &sys, &idle, &iowait, &irq, &softirq, &steal) == 9 &&
		    cpu != STOLEN_CPU) {
			total += steal;
			any = true;
		}
	fclose(f);
	return any && hz > 0 ? (double)total * 1000.0 / (double)hz : -1;
}

/* Start the measured timers on shard 0, due evenly over the stall. 0 or an error. */
static int start_timers(struct spoke *s, const struct stolen_cpu_job *j, uint64_t h_ns,
			struct late_sample *smp, struct bench_sample *out)
{
	uint64_t span = j->stall_ns - 2 * STOLEN_MARGIN_NS;

	for (size_t i = 0; i < j->timers; i++) {
		uint64_t due = h_ns + STOLEN_MARGIN_NS + span * i / j->timers, now = spoke_now_ns();
		int err;

		if (now >= due)
			return bench_fail(out, -ETIME,
					  "starting the timers took past the stall (%zu of %zu)", i,
					  j->timers);
		smp[i].expected = due;
		err = spoke_start_on(s, 0, due - now, late_cb, &smp[i], NULL);
		if (err)
			return bench_fail(out, err, "spoke_start_on(shard 0): %s", strerror(-err));
	}
	return 0;
}

int stolen_cpu_run(const struct stolen_cpu_job *j, unsigned run, uint64_t *late_ns,
		   struct bench_late_result *r, struct bench_sample *out)
{
	struct late_pending pend = {0};
	struct late_sample *smp;
	struct spoke_config cfg;
	struct hog hog = {0};
	struct bench_rng rng;
	bool hogging = false;
	struct spoke *s;
	int other, err;

	memset(r, 0, sizeof(*r));
	late_counters_reset();
	if (j->stall_ns <= 2 * STOLEN_MARGIN_NS || j->timers == 0)
		return bench_fail(out, -EINVAL, "a stall over %llu ms and timers, please",
				  (unsigned long long)(2 * STOLEN_MARGIN_NS / NS_PER_MS));
	err = pick_cpus(&other, out);
	if (err)
		return err;
	smp = calloc(j->timers, sizeof(*smp));
	if (!smp)
		return bench_fail(out, -ENOMEM, "no memory for %zu samples", j->timers);
	bench_rng_seed(&rng, STOLEN_SEED + run);
	stolen_cpu_config(&cfg, j);
	err = bench_svc_create(&s, &cfg,
			       out); /* before the pinning below: the pool may go anywhere */
	if (err) {
		free(smp);
		return err;
	}
	err = late_fill(s, &pend, j->pending, LATE_PENDING_MIN_NS, &rng, out);
	if (!err) {
		bench_pin_self((unsigned)other);
		hog.from_ns = bench_now_ns() + STOLEN_LEAD_NS;
		hog.stall_ns = j->stall_ns;
		err = hog_start(&hog, STOLEN_CPU);
		hogging = err == 0;
		if (err == -EPERM)
			bench_fail(out, err,
				   "SCHED_FIFO refused (EPERM): stealing a CPU needs root "
				   "(CAP_SYS_NICE) or an RLIMIT_RTPRIO");
		else if (err)
			bench_fail(out, err, "the busy thread: pthread_create: %s", strerror(-err));
	}
	r->steal_ms = steal_ms_other_cpus();
	if (!err)
		err = start_timers(s, j, hog.from_ns, smp, out);
	if (hogging)
		pthread_join(hog.th, NULL); /* it ends at H + stall, whatever happened here */
	if (!err)
		err = late_wait_stream(j->timers, out);
	if (r->steal_ms >= 0) {
		double after = steal_ms_other_cpus();

		r->steal_ms = after >= r->steal_ms ? after - r->steal_ms : -1;
	}
	if (!err)
		err = late_finish(s, &pend, j->timers, 0, &r->pending_ran, out);
	spoke_destroy(s); /* every callback has run when it returns */
	if (!err)
		err = late_check_callbacks(r->pending_ran, out);
	if (!err) {
		for (size_t i = 0; i < j->timers; i++)
			r->in_stall += smp[i].ran_at < hog.ended_ns;
		r->stall_ms = (double)(hog.ended_ns - hog.began_ns) / 1e6;
		late_summarize(smp, j->timers, late_ns, r);
	}
	free(pend.ids);
	free(smp);
	return err;
}
