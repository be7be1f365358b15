/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * httpd_report.c - spoke-httpd's counters and idle-close lateness (httpd_report.h).
 */
#include "httpd_report.h"
#include "httpd_options.h"

#include <inttypes.h>
#include <stdio.h>

void count_response(struct counters *n, int status)
{
	n->requests++;
	switch (status) {
	case 200:
		n->resp_200++;
		break;
	case 404:
		n->resp_404++;
		break;
	case 405:
		n->resp_405++;
		break;
	case 503:
		n->resp_503++;
		break;
	case 504:
		n->resp_504++;
		break;
	default:
		n->resp_400++; /* the request was refused: 400, 414, 417, 431, 501, 505 */
	}
}

static unsigned late_bucket(uint64_t us)
{
	unsigned k;

	if (us < 16)
		return (unsigned)us;
	k = 63u - (unsigned)__builtin_clzll(us) - 3u;
	return 8 * k + (unsigned)(us >> k);
}

/* The largest value that falls in bucket b. */
static uint64_t late_bucket_top(unsigned b)
{
	unsigned k;

	if (b < 16)
		return b;
	k = b / 8 - 1;
	return ((uint64_t)(b % 8 + 8) << k) + (UINT64_C(1) << k) - 1;
}

void late_record(struct lateness *h, uint64_t close_ns, uint64_t due_ns)
{
	uint64_t us;

	if (close_ns < due_ns) {
		h->early++;
		return;
	}
	us = (close_ns - due_ns) / 1000;
	h->n[late_bucket(us)]++;
	if (us > h->max_us)
		h->max_us = us;
}

/* Upper end of the bucket holding the p-th permille value; 0 if empty. */
static uint64_t late_permille(const struct lateness *h, unsigned p)
{
	uint64_t total = 0, seen = 0, want;

	for (unsigned b = 0; b < LATE_BUCKETS; b++)
		total += h->n[b];
	if (!total)
		return 0;
	want = (total * p + 999) / 1000;
	for (unsigned b = 0; b < LATE_BUCKETS; b++) {
		seen += h->n[b];
		if (seen >= want)
			return late_bucket_top(b) < h->max_us ? late_bucket_top(b) : h->max_us;
	}
	return h->max_us;
}

_Static_assert(sizeof(struct counters) % sizeof(uint64_t) == 0, "counters: uint64_t only");

void sum_counters(struct counters *sum, const struct counters *c)
{
	uint64_t *d = (uint64_t *)sum;
	const uint64_t *s = (const uint64_t *)c;

	for (size_t i = 0; i < sizeof(*c) / sizeof(uint64_t); i++)
		d[i] += s[i];
}

void sum_lateness(struct lateness *sum, const struct lateness *h)
{
	for (unsigned b = 0; b < LATE_BUCKETS; b++)
		sum->n[b] += h->n[b];
	sum->early += h->early;
	if (h->max_us > sum->max_us)
		sum->max_us = h->max_us;
}

void print_counters(const struct counters *c, const struct tmr_counters *t,
		    const struct lateness *late, uint64_t remote, const struct rusage *ru,
		    int linger_ms)
{
	double user_s = (double)ru->ru_utime.tv_sec + (double)ru->ru_utime.tv_usec / 1e6;
	double sys_s = (double)ru->ru_stime.tv_sec + (double)ru->ru_stime.tv_usec / 1e6;

	printf("connections        %" PRIu64 " (%" PRIu64 " dropped: out of fds or memory)\n"
	       "requests           %" PRIu64 " (%" PRIu64 " refused with 4xx/5xx)\n"
	       "closed by header   %" PRIu64 "  (--header-ms %" PRIu64 ")\n"
	       "closed by idle     %" PRIu64 "  (--idle-ms %" PRIu64 "; late p50 %" PRIu64
	       " us, p99 %" PRIu64 " us, max %" PRIu64 " us, early %" PRIu64 ")\n"
	       "closed by write    %" PRIu64 "  (--write-ms %" PRIu64 ")\n"
	       "closed by peer     %" PRIu64 "\n"
	       "closed after resp  %" PRIu64 "  (Connection: close, or refused; %" PRIu64
	       " more after %d ms of lingering)\n"
	       "closed at shutdown %" PRIu64 "\n"
	       "504 (deadline)     %" PRIu64 "  (--deadline-ms %" PRIu64 ")\n"
	       "timers             started %" PRIu64 ", reset %" PRIu64 ", cancelled %" PRIu64
	       " (%" PRIu64 " from workers), fired %" PRIu64 "\n"
	       "cpu                user %.3f s, sys %.3f s\n",
	       c->connections, c->accept_dropped, c->requests, c->resp_400, c->close_header,
	       opt.header_ms, c->close_idle, opt.idle_ms, late_permille(late, 500),
	       late_permille(late, 990), late->max_us, late->early, c->close_write, opt.write_ms,
	       c->close_peer, c->close_done, c->close_linger, linger_ms, c->close_shutdown,
	       c->resp_504, opt.deadline_ms, t->started, t->reset, t->cancelled + remote, remote,
	       t->fired, user_s, sys_s);
	printf("stats timers=%s connections=%" PRIu64 " accept_dropped=%" PRIu64
	       " requests=%" PRIu64 " close_header=%" PRIu64 " close_idle=%" PRIu64
	       " close_write=%" PRIu64 " close_peer=%" PRIu64 " close_error=%" PRIu64
	       " close_done=%" PRIu64 " close_linger=%" PRIu64 " close_shutdown=%" PRIu64
	       " resp_200=%" PRIu64 " sleep_200=%" PRIu64 " resp_400=%" PRIu64 " resp_404=%" PRIu64
	       " resp_405=%" PRIu64 " resp_503=%" PRIu64 " resp_504=%" PRIu64
	       " timers_started=%" PRIu64 " timers_reset=%" PRIu64 " timers_cancelled=%" PRIu64
	       " timers_fired=%" PRIu64 " idle_late_served=%" PRIu64 " idle_close_early=%" PRIu64
	       " idle_close_late_p50_us=%" PRIu64 " idle_close_late_p99_us=%" PRIu64
	       " idle_close_late_max_us=%" PRIu64 " cpu_user_s=%.3f cpu_sys_s=%.3f\n",
	       opt.ops->name, c->connections, c->accept_dropped, c->requests, c->close_header,
	       c->close_idle, c->close_write, c->close_peer, c->close_error, c->close_done,
	       c->close_linger, c->close_shutdown, c->resp_200, c->sleep_200, c->resp_400,
	       c->resp_404, c->resp_405, c->resp_503, c->resp_504, t->started, t->reset,
	       t->cancelled + remote, t->fired, c->idle_late_served, late->early,
	       late_permille(late, 500), late_permille(late, 990), late->max_us, user_s, sys_s);
}
