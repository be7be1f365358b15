/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench_svc.c - the service's counters, waits, counting callback and owner
 * loops, for every workload that drives the service (bench_svc.h).
 */
#define _GNU_SOURCE
#include "bench_svc.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

int bench_svc_create(struct spoke **s, const struct spoke_config *cfg, struct bench_sample *out)
{
	char why[160]; /* which field spoke_create would refuse, and why */
	int err = spoke_config_check(cfg, why, sizeof(why));

	if (!err)
		err = spoke_create(s, cfg);
	if (err)
		return bench_fail(out, err, "spoke_create(%u shards, %u callback threads): %s",
				  cfg ? cfg->shards : 0, cfg ? cfg->callback_threads : 0,
				  why[0] ? why : strerror(-err));
	return 0;
}

static struct spoke_stats stats_buf; /* 18 KB: one per process, main thread only */

const struct spoke_stats *bench_svc_stats(struct spoke *s)
{
	spoke_stats(s, &stats_buf);
	return &stats_buf;
}

const struct spoke_shard_stats *bench_svc_totals(struct spoke *s)
{
	return &bench_svc_stats(s)->total;
}

const char *bench_svc_stats_str(char *buf, size_t len, const struct spoke_shard_stats *t)
{
	snprintf(buf, len, "started %llu, cancelled %llu, reset %llu, fired %llu, pending %llu",
		 (unsigned long long)t->started, (unsigned long long)t->cancelled,
		 (unsigned long long)t->reset, (unsigned long long)t->fired,
		 (unsigned long long)t->pending);
	return buf;
}

/* Does a count read as wanted (BENCH_ANY: whatever it reads)? */
static bool count_is(uint64_t have, uint64_t want)
{
	return want == BENCH_ANY || have == want;
}

static bool reads_as(const struct spoke_shard_stats *t, const struct bench_svc_counts *w)
{
	return count_is(t->started, w->started) && count_is(t->cancelled, w->cancelled) &&
	       count_is(t->reset, w->reset) && count_is(t->fired, w->fired) &&
	       count_is(t->pending, w->pending);
}

int bench_svc_wait(struct spoke *s, const struct bench_svc_counts *want, uint64_t *when_ns)
{
	uint64_t limit = bench_now_ns() + BENCH_WAIT_LIMIT_NS;

	for (;;) {
		bool ok = reads_as(bench_svc_totals(s), want);
		uint64_t now = bench_now_ns();

		if (ok) {
			if (when_ns)
				*when_ns = now;
			return 0;
		}
		if (now > limit)
			return -ETIME;
		bench_sleep_ns(BENCH_WAIT_STEP_NS);
	}
}

int bench_svc_wait_pending(struct spoke *s, uint64_t n, uint64_t *when_ns)
{
	const struct bench_svc_counts w = {BENCH_ANY, BENCH_ANY, BENCH_ANY, BENCH_ANY, n};

	return bench_svc_wait(s, &w, when_ns);
}

void bench_cb_count(void *arg)
{
	atomic_fetch_add_explicit((_Atomic uint64_t *)arg, 1, memory_order_relaxed);
}

/* ---- owners ------------------------------------------------------------- */

/* Owner: record the first failure. */
static void owner_fail(struct bench_owner *o, int err, const char *what)
{
	if (!o->err) {
		o->err = err ? err : -EPROTO;
		o->what = what;
	}
}

/* Owner: attached (or failed to): main may go on. */
static void owner_up(struct bench_owner *o)
{
	pthread_mutex_lock(&o->mu);
	o->up = true;
	o->up_err = o->err;
	pthread_cond_broadcast(&o->cv);
	pthread_mutex_unlock(&o->mu);
}

/* Owner: sleep until the wake fd, the stop fd, or the next deadline; false once stopped. */
static bool owner_wait(struct bench_owner *o, int wake_fd)
{
	struct pollfd pfd[2] = {{.fd = wake_fd, .events = POLLIN},
				{.fd = o->stop_fd, .events = POLLIN}};
	struct timespec ts, *tp = NULL;
	uint64_t next;
	int err = spoke_next_deadline_ns(o->s, &next);

	if (err < 0) {
		owner_fail(o, err, "spoke_next_deadline_ns");
		return false;
	}
	if (err == 0) { /* 1: nothing pending */
		ts = (struct timespec){(time_t)(next / NS_PER_S), (long)(next % NS_PER_S)};
		tp = &ts;
	}
	if (ppoll(pfd, 2, tp, NULL) < 0 && errno != EINTR) {
		owner_fail(o, -errno, "ppoll");
		return false;
	}
	return pfd[1].revents == 0;
}

static void *owner_main(void *arg)
{
	struct bench_owner *o = arg;
	int err, wake_fd = -1;

	if (o->cpu >= 0)
		bench_pin_self((unsigned)o->cpu);
	err = spoke_attach(o->s, o->shard);
	if (err)
		owner_fail(o, err, "spoke_attach");
	else if ((wake_fd = spoke_wake_fd(o->s)) < 0)
		owner_fail(o, wake_fd, "spoke_wake_fd");
	owner_up(o);
	while (!o->err && owner_wait(o, wake_fd)) {
		int r = spoke_poll(o->s);

		if (r < 0)
			owner_fail(o, r, "spoke_poll");
	}
	if (!err) {
		err = spoke_detach(o->s);
		if (err)
			owner_fail(o, err, "spoke_detach");
	}
	return NULL;
}

int bench_owner_start(struct bench_owner *o, struct spoke *s, unsigned shard, int cpu,
		      struct bench_sample *out)
{
	int err;

	*o = (struct bench_owner){.s = s, .shard = shard, .cpu = cpu};
	o->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (o->stop_fd < 0)
		return bench_fail(out, -errno, "eventfd: %s", strerror(errno));
	pthread_mutex_init(&o->mu, NULL);
	pthread_cond_init(&o->cv, NULL);
	err = pthread_create(&o->th, NULL, owner_main, o);
	if (err) {
		close(o->stop_fd);
		pthread_cond_destroy(&o->cv);
		pthread_mutex_destroy(&o->mu);
		return bench_fail(out, -err, "pthread_create: %s", strerror(err));
	}
	pthread_mutex_lock(&o->mu);
	while (!o->up)
		pthread_cond_wait(&o->cv, &o->mu);
	err = o->up_err;
	pthread_mutex_unlock(&o->mu);
	if (err) {
		bench_owner_stop(o, out);
		return err;
	}
	return 0;
}

int bench_owner_stop(struct bench_owner *o, struct bench_sample *out)
{
	uint64_t one = 1;

	if (write(o->stop_fd, &one, sizeof(one)) != (ssize_t)sizeof(one)) {
		perror("spoke-bench: the owner loop's stop eventfd"); /* no other way to end it */
		abort();
	}
	pthread_join(o->th, NULL);
	close(o->stop_fd);
	pthread_cond_destroy(&o->cv);
	pthread_mutex_destroy(&o->mu);
	if (o->err)
		return bench_fail(out, o->err, "owner of shard %u: %s: %s", o->shard, o->what,
				  strerror(-o->err));
	return 0;
}
