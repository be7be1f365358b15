/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * spoke_demo.c - spoke-demo: the timer service under a server-like load.
 *
 * Runs the service with its default configuration (a shard and a callback
 * thread per CPU) for --seconds S (default 10) while --threads T producer
 * threads (default 4) each play a small server:
 *
 *   idle timeouts      1000 connections per thread, each with an idle timer
 *                      (200..500 ms) that spoke_reset() pushes back on every
 *                      bit of activity (about 20 per second per connection).
 *                      A connection goes quiet after 0..3 s of activity, its
 *                      idle timer fires, and the thread opens a new one.
 *   request deadlines  5000 requests/s per thread, each with a 100 ms deadline
 *                      started on a random shard (spoke_start_on: most starts
 *                      cross shards); 97% complete within 30 ms and cancel it
 *                      (one in ten with spoke_cancel_sync), 3% hang and time out.
 *   heartbeats         2 periodic timers per thread (10 + 5 t ms and 100 ms).
 *   Lawn sessions      up to 512 sessions per thread with one of a handful of
 *                      TTLs (spoke_start_ttl: 250 ms, 500 ms, 1 s, 2 s),
 *                      refreshed (spoke_reset) 2000 times/s, logged out
 *                      (spoke_cancel) 200 times/s, the rest expire.
 *
 * Once a second the main thread reads spoke_stats() and prints a progress
 * line (in place on a terminal, one line per second otherwise; --quiet: none):
 * timers started / cancelled / reset / fired per second, and the average and
 * worst lateness of the one-shot callbacks that ran in that second. At the end each thread
 * cancels what it still has (spoke_cancel_sync), the main thread prints a
 * table per shard and checks:
 *
 *   1. exactly once: every one-shot timer (idle, request, session) ended in
 *      exactly one way: its callback ran once, or one cancel returned 0;
 *   2. never early: no callback ran before its earliest allowed time;
 *   3. heartbeats: no run overlapped another run of the same timer, run k
 *      never started before start + k * period, the final cancel_sync
 *      returned 0 and no run happened after it;
 *   4. the service's own counters (spoke_stats) agree with the demo's: timers
 *      started, cancels that won, resets applied, callbacks run.
 *
 * Exit status: 0 if every check passed, 1 if one failed, 2 on bad usage or if
 * the service could not be created.
 *
 * How the checks are kept honest
 * ------------------------------
 * Every one-shot timer gets a record (struct rec, 24 bytes). The callback
 * adds 1 to rec.fired; a cancel that returns 0 adds 1 to rec.cancelled;
 * fired + cancelled must end up exactly 1 for every record. Records live in
 * chunks of 16384 that are never freed during the run, so a late or second
 * callback always lands on a valid record. To keep memory bounded on long
 * runs, a chunk is checked and reused once it is 10 s old and all its
 * records have an outcome (the longest timer here lives a few seconds). A
 * stray extra outcome after that would land on the record's new occupant,
 * which then counts two: still caught, only attributed to the wrong timer.
 * The chunks still in use are checked after spoke_destroy(). Only the
 * producer thread that owns a timer ever cancels or resets it, so for each
 * record there is one writer of its expected time.
 *
 * rec.expected_ns is a lower bound of the time the callback may run. Before a
 * start it is set to now + delay, read before the call (the service reads
 * the clock again inside, later, so its deadline is at least this). A reset
 * races the callback: the timer may fire while spoke_reset() is in progress,
 * and then the reset returns -ENOENT and the run belongs to the old deadline.
 * So a reset to `want` (= now + delay, read before the call) does:
 *
 *   expected = min(expected, want)    before spoke_reset(): while the call is
 *                                     in progress either deadline may hold;
 *   expected = want                   after it returned 0: a reset that
 *                                     succeeded moved the deadline, and the
 *                                     one run left is at or after it;
 *   (unchanged)                       after -ENOENT: the run is the old one.
 *
 * The store before the call happens before the service's compare-and-swap
 * that publishes the reset, so a callback that runs for the new deadline
 * sees it (or the later store); a callback for the old deadline reads either
 * the old value or the minimum, both at most the old deadline. Idle timeouts
 * and session refreshes only ever move later, so in practice the check is
 * exact: against the start for never-reset timers, against the last
 * successful reset for the others.
 */
#define _GNU_SOURCE
#include "demo_options.h"

#include <spoke/spoke.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#define MS  UINT64_C(1000000)
#define SEC UINT64_C(1000000000)

/* Load per producer thread (rates per second). */
#define CONNS		     1000	/* connections */
#define CONN_ACTIVITY_RATE   20000	/* activity events over all connections */
#define CONN_IDLE_MIN	     (200 * MS) /* idle timeout: 200..500 ms per connection */
#define CONN_IDLE_SPAN	     (300 * MS)
#define CONN_LIFE_MAX	     (3000 * MS) /* active for 0..3 s, then quiet */
#define REQ_RATE	     5000	 /* requests started */
#define REQ_SLOTS	     1024	 /* requests in flight, at most */
#define REQ_DEADLINE	     (100 * MS)
#define REQ_FAST_MAX	     (30 * MS) /* most requests take 0..30 ms ... */
#define REQ_HANG_PERMILLE    30	       /* ... 3% hang for 150..300 ms (time out) */
#define SESSIONS	     512       /* Lawn sessions, at most */
#define SESSION_LOGIN_RATE   500
#define SESSION_REFRESH_RATE 2000
#define SESSION_LOGOUT_RATE  200
#define HEARTBEATS	     2
#define STEP_NS		     (1 * MS)  /* a producer's turn */
#define STEP_MAX_NS	     (10 * MS) /* a late turn does at most this much work */

static const uint64_t session_ttl_ns[] = {250 * MS, 500 * MS, 1000 * MS, 2000 * MS};
#define N_TTLS (sizeof(session_ttl_ns) / sizeof(session_ttl_ns[0]))

enum kind { K_IDLE, K_REQ, K_TTL, K_HEARTBEAT, N_KINDS };
static const char *const kind_name[N_KINDS] = {"idle timeouts", "request deadlines",
					       "Lawn sessions", "heartbeats"};

/* --- records: one per one-shot timer, alive for the whole run ----------------------------- */

struct rec {
	_Atomic uint64_t expected_ns; /* the callback must not run before this */
	_Atomic uint32_t fired;	      /* callback runs */
	_Atomic uint32_t cancelled;   /* cancels that returned 0 */
	_Atomic uint32_t early;	      /* runs before expected_ns */
	uint8_t kind;
};

#define CHUNK_RECS     16384
#define CHUNK_REUSE_NS (10 * SEC) /* a chunk may be reused this long after it filled up */

struct chunk {
	struct chunk *next; /* the next younger chunk */
	uint64_t filled_ns;
	size_t used;
	struct rec rec[CHUNK_RECS];
};

/* Records checked so far. */
struct tally {
	uint64_t nrec, fired, cancelled, early, bad_outcome;
};

/* --- periodic heartbeats ------------------------------------------------------------------ */

struct heartbeat {
	uint64_t start_ns, period_ns; /* written before the start, read by the callback */
	spoke_id id;
	_Atomic int in_callback;
	_Atomic uint64_t runs, overlaps, early;
	uint64_t runs_at_stop;
	int stop_rc;
};

/* --- a producer thread's world -------------------------------------------------------------- */

struct conn {
	struct rec *rec; /* current idle timer */
	spoke_id id;
	uint64_t idle_ns;
	uint64_t active_until_ns;
};

struct request {
	struct rec *rec; /* NULL: slot free */
	spoke_id id;
	uint64_t done_ns;
};

struct session {
	struct rec *rec; /* NULL: slot free */
	spoke_id id;
	uint64_t ttl_ns;
};

struct counts {
	uint64_t started[N_KINDS];
	uint64_t cancelled[N_KINDS];  /* cancels that returned 0 */
	uint64_t reset_ok[N_KINDS];   /* resets that returned 0 */
	uint64_t reset_lost[N_KINDS]; /* resets that found the timer fired (-ENOENT) */
	uint64_t errors;	      /* any other error from the service */
	int first_error;
};

struct producer {
	unsigned index;
	pthread_t thread;
	uint64_t rng;
	struct chunk *oldest, *newest; /* records, oldest chunk first */
	unsigned nchunks;
	struct tally checked; /* records of reused chunks */
	struct conn conn[CONNS];
	struct request req[REQ_SLOTS];
	struct session sess[SESSIONS];
	struct heartbeat hb[HEARTBEATS];
	double acc_activity, acc_req, acc_login, acc_refresh, acc_logout;
	unsigned reopen_cursor;
	struct counts c;
	bool oom;
};

static struct spoke *svc;
static unsigned nshards;
static atomic_bool stop_load;

/* Written by callbacks (pool threads), read by the main thread. */
static _Atomic uint64_t cb_runs[N_KINDS];
static _Atomic uint64_t cb_early;
static _Atomic uint64_t late_sum_ns, late_n, late_max_ns; /* this progress interval */

/* --- small helpers ------------------------------------------------------------------------ */

static uint64_t rng_next(uint64_t *x) /* xorshift64* */
{
	*x ^= *x >> 12;
	*x ^= *x << 25;
	*x ^= *x >> 27;
	return *x * 0x2545f4914f6cdd1dull;
}

static uint64_t rng_below(uint64_t *x, uint64_t n)
{
	return n ? rng_next(x) % n : 0;
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = {.tv_sec = (time_t)(ns / SEC), .tv_nsec = (long)(ns % SEC)};

	while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
		;
}

static void sleep_until_ns(uint64_t t)
{
	struct timespec ts = {.tv_sec = (time_t)(t / SEC), .tv_nsec = (long)(t % SEC)};

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/* How many events of `rate` per second fall in dt_ns (carrying the fraction). */
static unsigned events(double *acc, double rate, uint64_t dt_ns)
{
	unsigned n;

	*acc += rate * (double)dt_ns / 1e9;
	n = (unsigned)*acc;
	*acc -= n;
	return n;
}

static void atomic_max(_Atomic uint64_t *a, uint64_t v)
{
	uint64_t cur = atomic_load_explicit(a, memory_order_relaxed);

	while (v > cur && !atomic_compare_exchange_weak_explicit(a, &cur, v, memory_order_relaxed,
								 memory_order_relaxed))
		;
}

static void note_error(struct counts *c, int err)
{
	if (!c->errors++)
		c->first_error = err;
}

/* --- callbacks (any pool thread) -------------------------------------------------------- */

static void note_lateness(uint64_t late_ns)
{
	atomic_fetch_add_explicit(&late_sum_ns, late_ns, memory_order_relaxed);
	atomic_fetch_add_explicit(&late_n, 1, memory_order_relaxed);
	atomic_max(&late_max_ns, late_ns);
}

/* One-shot timers: idle timeout, request deadline, session expiry. */
static void on_expire(void *arg)
{
	struct rec *r = arg;
	uint64_t now = spoke_now_ns(), expected = atomic_load(&r->expected_ns);

	if (now < expected) {
		atomic_fetch_add(&r->early, 1);
		atomic_fetch_add(&cb_early, 1);
	} else {
		note_lateness(now - expected);
	}
	atomic_fetch_add(&r->fired, 1);
	atomic_fetch_add_explicit(&cb_runs[r->kind], 1, memory_order_relaxed);
}

static void on_heartbeat(void *arg)
{
	struct heartbeat *h = arg;
	uint64_t now = spoke_now_ns(), k;

	if (atomic_exchange(&h->in_callback, 1) != 0)
		atomic_fetch_add(&h->overlaps, 1);
	k = atomic_fetch_add(&h->runs, 1) + 1;
	/* Run k is due at start + j * period for some j >= k (missed periods are skipped). */
	if (now < h->start_ns + k * h->period_ns)
		atomic_fetch_add(&h->early, 1);
	atomic_fetch_add_explicit(&cb_runs[K_HEARTBEAT], 1, memory_order_relaxed);
	atomic_store(&h->in_callback, 0);
}

/* --- producer side: start, reset, cancel with bookkeeping ------------------------------- */

static void tally_chunk(struct tally *t, struct chunk *c)
{
	for (size_t j = 0; j < c->used; j++) {
		struct rec *x = &c->rec[j];
		uint32_t f = atomic_load(&x->fired), n = atomic_load(&x->cancelled);

		t->nrec++;
		t->fired += f;
		t->cancelled += n;
		t->early += atomic_load(&x->early);
		t->bad_outcome += f + n != 1;
	}
}

/* The oldest chunk, if it can be checked and reused (see the top of the file). */
static struct chunk *chunk_reusable(struct producer *p, uint64_t now)
{
	struct chunk *c = p->oldest;

	if (c == p->newest || now < c->filled_ns + CHUNK_REUSE_NS)
		return NULL;
	for (size_t j = 0; j < c->used; j++)
		if (atomic_load(&c->rec[j].fired) + atomic_load(&c->rec[j].cancelled) == 0)
			return NULL; /* still pending */
	return c;
}

static struct rec *rec_new(struct producer *p, enum kind k)
{
	struct chunk *c = p->newest;
	struct rec *r;

	if (!c || c->used == CHUNK_RECS) {
		uint64_t now = spoke_now_ns();

		if (c)
			c->filled_ns = now;
		c = p->oldest ? chunk_reusable(p, now) : NULL;
		if (c) {
			tally_chunk(&p->checked, c);
			p->oldest = c->next;
		} else {
			c = malloc(sizeof(*c));
			if (!c) {
				p->oom = true;
				return NULL;
			}
			p->nchunks++;
		}
		c->next = NULL;
		c->used = 0;
		if (p->newest)
			p->newest->next = c;
		else
			p->oldest = c;
		p->newest = c;
	}
	r = &c->rec[c->used++];
	atomic_store(&r->expected_ns, 0);
	atomic_store(&r->fired, 0);
	atomic_store(&r->cancelled, 0);
	atomic_store(&r->early, 0);
	r->kind = (uint8_t)k;
	return r;
}

/* Start a one-shot timer of kind k (shard < 0: the caller's own; K_TTL: a Lawn TTL). */
static struct rec *arm(struct producer *p, enum kind k, int shard, uint64_t delay_ns, spoke_id *id)
{
	struct rec *r = rec_new(p, k);
	int err;

	if (!r)
		return NULL;
	atomic_store(&r->expected_ns, spoke_now_ns() + delay_ns);
	if (k == K_TTL)
		err = spoke_start_ttl(svc, delay_ns, on_expire, r, id);
	else if (shard < 0)
		err = spoke_start(svc, delay_ns, on_expire, r, id);
	else
		err = spoke_start_on(svc, (unsigned)shard, delay_ns, on_expire, r, id);
	if (err) {
		p->newest->used--; /* nobody saw it */
		note_error(&p->c, err);
		return NULL;
	}
	p->c.started[k]++;
	return r;
}

/* Reset with the expected-time protocol described at the top. Returns spoke_reset's result. */
static int reset(struct producer *p, struct rec *r, spoke_id id, uint64_t delay_ns)
{
	uint64_t want = spoke_now_ns() + delay_ns;
	int err;

	if (want < atomic_load(&r->expected_ns))
		atomic_store(&r->expected_ns, want);
	err = spoke_reset(svc, id, delay_ns);
	if (err == 0) {
		atomic_store(&r->expected_ns, want);
		p->c.reset_ok[r->kind]++;
	} else if (err == -ENOENT) {
		p->c.reset_lost[r->kind]++;
	} else {
		note_error(&p->c, err);
	}
	return err;
}

/* Cancel; true if this call prevented the run. */
static bool cancel(struct producer *p, struct rec *r, spoke_id id, bool sync)
{
	int err = sync ? spoke_cancel_sync(svc, id) : spoke_cancel(svc, id);

	if (err == 0) {
		atomic_fetch_add(&r->cancelled, 1);
		p->c.cancelled[r->kind]++;
		return true;
	}
	if (err != -ENOENT)
		note_error(&p->c, err);
	return false;
}

static bool rec_done(const struct rec *r)
{
	return atomic_load(&r->fired) != 0;
}

/* --- the producer's server ---------------------------------------------------------------- */

static void conn_open(struct producer *p, struct conn *c, uint64_t now)
{
	c->idle_ns = CONN_IDLE_MIN + rng_below(&p->rng, CONN_IDLE_SPAN);
	c->active_until_ns = now + rng_below(&p->rng, CONN_LIFE_MAX);
	c->rec = arm(p, K_IDLE, -1, c->idle_ns, &c->id);
}

/* Activity on random connections: push their idle timeout back. */
static void conns_activity(struct producer *p, uint64_t now, unsigned n)
{
	while (n--) {
		struct conn *c = &p->conn[rng_below(&p->rng, CONNS)];

		if (!c->rec) {
			conn_open(p, c, now); /* a new connection on this slot */
			continue;
		}
		if (now >= c->active_until_ns)
			continue; /* gone quiet: its idle timer will fire */
		if (reset(p, c->rec, c->id, c->idle_ns) == -ENOENT)
			conn_open(p, c, now); /* it had timed out: a new connection */
	}
}

/* Reopen, a slice per turn, the connections whose idle timer fired. */
static void conns_reopen(struct producer *p, uint64_t now)
{
	for (unsigned i = 0; i < CONNS / 50; i++) {
		struct conn *c = &p->conn[p->reopen_cursor];

		p->reopen_cursor = (p->reopen_cursor + 1) % CONNS;
		if (!c->rec || rec_done(c->rec))
			conn_open(p, c, now);
	}
}

static void requests(struct producer *p, uint64_t now, unsigned n_new)
{
	for (unsigned i = 0; i < REQ_SLOTS; i++) {
		struct request *q = &p->req[i];

		if (q->rec && now >= q->done_ns) {
			/* Done: cancel its deadline (lost if it timed out). */
			cancel(p, q->rec, q->id, rng_below(&p->rng, 10) == 0);
			q->rec = NULL;
		}
		if (!q->rec && n_new) {
			n_new--;
			q->done_ns = now + (rng_below(&p->rng, 1000) < REQ_HANG_PERMILLE
						    ? 150 * MS + rng_below(&p->rng, 150 * MS)
						    : rng_below(&p->rng, REQ_FAST_MAX));
			q->rec = arm(p, K_REQ, (int)rng_below(&p->rng, nshards), REQ_DEADLINE,
				     &q->id);
		}
	}
}

static void sessions(struct producer *p, unsigned logins, unsigned refreshes, unsigned logouts)
{
	while (logins--) {
		struct session *x = &p->sess[rng_below(&p->rng, SESSIONS)];

		if (x->rec && !rec_done(x->rec))
			continue; /* slot taken */
		x->ttl_ns = session_ttl_ns[rng_below(&p->rng, N_TTLS)];
		x->rec = arm(p, K_TTL, -1, x->ttl_ns, &x->id);
	}
	while (refreshes--) {
		struct session *x = &p->sess[rng_below(&p->rng, SESSIONS)];

		if (x->rec && !rec_done(x->rec))
			(void)reset(p, x->rec, x->id, x->ttl_ns);
	}
	while (logouts--) {
		struct session *x = &p->sess[rng_below(&p->rng, SESSIONS)];

		if (x->rec && !rec_done(x->rec)) {
			cancel(p, x->rec, x->id, false);
			x->rec = NULL;
		}
	}
}

static void heartbeats_start(struct producer *p)
{
	for (unsigned i = 0; i < HEARTBEATS; i++) {
		struct heartbeat *h = &p->hb[i];
		int err;

		h->period_ns = i == 0 ? (10 + 5 * p->index) * MS : 100 * MS;
		h->start_ns = spoke_now_ns();
		err = spoke_start_periodic(svc, h->period_ns, on_heartbeat, h, &h->id);
		if (err) {
			h->id = 0;
			note_error(&p->c, err);
		} else {
			p->c.started[K_HEARTBEAT]++;
		}
	}
}

/*
 * End of the run: cancel (spoke_cancel_sync) every timer still tracked. On
 * return none of them is running or will run; timers dropped earlier after a
 * cancel or reset returned -ENOENT may still have a callback queued (see settle()).
 */
static void drain(struct producer *p)
{
	for (unsigned i = 0; i < CONNS; i++)
		if (p->conn[i].rec)
			cancel(p, p->conn[i].rec, p->conn[i].id, true);
	for (unsigned i = 0; i < REQ_SLOTS; i++)
		if (p->req[i].rec)
			cancel(p, p->req[i].rec, p->req[i].id, true);
	for (unsigned i = 0; i < SESSIONS; i++)
		if (p->sess[i].rec)
			cancel(p, p->sess[i].rec, p->sess[i].id, true);
	for (unsigned i = 0; i < HEARTBEATS; i++) {
		struct heartbeat *h = &p->hb[i];

		if (!h->id)
			continue;
		h->stop_rc = spoke_cancel_sync(svc, h->id);
		if (h->stop_rc == 0)
			p->c.cancelled[K_HEARTBEAT]++;
		h->runs_at_stop = atomic_load(&h->runs);
	}
}

static void *producer_main(void *arg)
{
	struct producer *p = arg;
	uint64_t last = spoke_now_ns();

	for (unsigned i = 0; i < CONNS; i++)
		conn_open(p, &p->conn[i], last);
	heartbeats_start(p);
	while (!atomic_load_explicit(&stop_load, memory_order_relaxed) && !p->oom) {
		uint64_t now, dt;

		sleep_ns(STEP_NS);
		now = spoke_now_ns();
		dt = now - last < STEP_MAX_NS ? now - last : STEP_MAX_NS;
		last = now;
		conns_activity(p, now, events(&p->acc_activity, CONN_ACTIVITY_RATE, dt));
		conns_reopen(p, now);
		requests(p, now, events(&p->acc_req, REQ_RATE, dt));
		sessions(p, events(&p->acc_login, SESSION_LOGIN_RATE, dt),
			 events(&p->acc_refresh, SESSION_REFRESH_RATE, dt),
			 events(&p->acc_logout, SESSION_LOGOUT_RATE, dt));
	}
	drain(p);
	return NULL;
}

/* --- main thread: progress line ------------------------------------------------------------ */

/* A rate in at most 5 characters: 950, 22.9k, 123k, 1.23M. */
static void fmt_rate(char *buf, size_t n, double v)
{
	if (v >= 999.5e3)
		snprintf(buf, n, "%.2fM", v / 1e6);
	else if (v >= 99.95e3)
		snprintf(buf, n, "%.0fk", v / 1e3);
	else if (v >= 999.5)
		snprintf(buf, n, "%.1fk", v / 1e3);
	else
		snprintf(buf, n, "%.0f", v);
}

static unsigned terminal_columns(void)
{
	struct winsize ws;

	return ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 ? ws.ws_col : 0;
}

/*
 * One progress line: the service's counters per second over the last interval
 * (spoke_stats deltas) and the lateness of the one-shot callbacks that ran in
 * it (now - the earliest allowed time, so it includes the wait for the end
 * of the deadline's slot, up to the slack: docs/design/service.md). On a terminal it
 * is rewritten in place, cut to the terminal's width.
 */
static void progress(bool tty, double t_s, const struct spoke_stats *now,
		     const struct spoke_stats *prev, double dt_s)
{
	char st[16], ca[16], re[16], fi[16], line[256];
	uint64_t sum = atomic_exchange(&late_sum_ns, 0), n = atomic_exchange(&late_n, 0);
	uint64_t max = atomic_exchange(&late_max_ns, 0);
	unsigned cols;

	fmt_rate(st, sizeof(st), (double)(now->total.started - prev->total.started) / dt_s);
	fmt_rate(ca, sizeof(ca), (double)(now->total.cancelled - prev->total.cancelled) / dt_s);
	fmt_rate(re, sizeof(re), (double)(now->total.reset - prev->total.reset) / dt_s);
	fmt_rate(fi, sizeof(fi), (double)(now->total.fired - prev->total.fired) / dt_s);
	snprintf(line, sizeof(line),
		 "%4.1fs start %5s cancel %5s reset %5s fire %5s /s  late %.2f ms max %.2f", t_s,
		 st, ca, re, fi, n ? (double)sum / (double)n / 1e6 : 0.0, (double)max / 1e6);
	if (tty) {
		cols = terminal_columns();
		if (cols > 1 && strlen(line) >= cols)
			line[cols - 1] = 0;
		printf("\r%s\033[K", line);
	} else {
		printf("%s\n", line);
	}
	fflush(stdout);
}

/* --- main thread: the run's phases ------------------------------------------------------- */

/* What the main thread gathers; the verdict is computed from it in check(). */
struct run {
	struct demo_options opt;
	struct producer *prod;
	struct spoke_stats *st, *prev_st; /* st: the latest snapshot */
	struct counts tot;		  /* the producers' counts, summed */
	uint64_t t0_ns, load_end_ns, drained_ns;
	bool oom, settled, stats_agree;
	/* From the records, after spoke_destroy(). */
	struct tally rec;
	uint64_t rec_bytes; /* memory the records took */
	uint64_t hb_runs, hb_overlaps, hb_early, hb_bad_stop, runs_after;
};

static void print_shard_row(const char *name, const struct spoke_shard_stats *x)
{
	printf("  %-6s %10" PRIu64 " %10" PRIu64 " %10" PRIu64 " %10" PRIu64 " %8" PRIu64
	       " %9" PRIu64 " %9.3f ms\n",
	       name, x->started, x->cancelled, x->reset, x->fired, x->pending, x->inbox_hwm,
	       (double)x->max_late_ns / 1e6);
}

/* Start the producers, print progress once a second, stop them; they drain on their way out. */
static int run_load(struct run *r)
{
	uint64_t end, next;
	bool tty = isatty(STDOUT_FILENO);

	spoke_stats(svc, r->prev_st);
	r->t0_ns = spoke_now_ns();
	end = r->t0_ns + (uint64_t)(r->opt.seconds * 1e9);
	for (unsigned i = 0; i < r->opt.threads; i++) {
		struct producer *p = &r->prod[i];
		int err;

		p->index = i;
		p->rng = 0x9e3779b97f4a7c15ull * (i + 1);
		err = pthread_create(&p->thread, NULL, producer_main, p);
		if (err) {
			fprintf(stderr, "spoke-demo: pthread_create: %s\n", strerror(err));
			return -1;
		}
	}
	for (next = r->t0_ns; next < end;) {
		uint64_t prev = next;
		struct spoke_stats *tmp;

		next = next + SEC < end ? next + SEC : end;
		sleep_until_ns(next);
		spoke_stats(svc, r->st);
		if (!r->opt.quiet)
			progress(tty, (double)(next - r->t0_ns) / 1e9, r->st, r->prev_st,
				 (double)(next - prev) / 1e9);
		tmp = r->prev_st;
		r->prev_st = r->st;
		r->st = tmp;
	}
	if (!r->opt.quiet && tty)
		printf("\n");
	atomic_store(&stop_load, true);
	r->load_end_ns = spoke_now_ns();

	/* Each producer cancels what it still has (spoke_cancel_sync), then returns. */
	for (unsigned i = 0; i < r->opt.threads; i++)
		pthread_join(r->prod[i].thread, NULL);
	r->drained_ns = spoke_now_ns();
	for (unsigned i = 0; i < r->opt.threads; i++) {
		const struct counts *c = &r->prod[i].c;

		for (unsigned k = 0; k < N_KINDS; k++) {
			r->tot.started[k] += c->started[k];
			r->tot.cancelled[k] += c->cancelled[k];
			r->tot.reset_ok[k] += c->reset_ok[k];
			r->tot.reset_lost[k] += c->reset_lost[k];
		}
		if (c->errors && !r->tot.errors)
			r->tot.first_error = c->first_error;
		r->tot.errors += c->errors;
		r->oom |= r->prod[i].oom;
	}
	return 0;
}

/*
 * Settle (at most 5 s). A timer whose cancel or reset returned -ENOENT may
 * still have its callback queued on the pool, and nobody waited for it: wait
 * until the one-shot outcomes add up (fired + cancelled = started; the record
 * check tells a lost timer from a doubled one). The owners count cancels when
 * they take the message: wait until nothing is pending and the service's
 * counters agree with the demo's.
 */
#define SETTLE_LIMIT_S 30 /* far past a drain's 0.1 s, for a loaded or sanitized run */

static void settle(struct run *r)
{
	const struct counts *t = &r->tot;
	uint64_t started = 0, cancelled = 0, resets = 0, fired = 0, outcomes;
	uint64_t give_up = spoke_now_ns() + SETTLE_LIMIT_S * SEC;

	for (unsigned k = 0; k < N_KINDS; k++) {
		started += t->started[k];
		cancelled += t->cancelled[k];
		resets += t->reset_ok[k];
	}
	for (;;) {
		fired = outcomes = 0;
		for (unsigned k = 0; k < N_KINDS; k++) {
			fired += atomic_load(&cb_runs[k]);
			if (k != K_HEARTBEAT)
				outcomes += atomic_load(&cb_runs[k]) + t->cancelled[k];
		}
		spoke_stats(svc, r->st);
		r->settled = outcomes == started - t->started[K_HEARTBEAT];
		r->stats_agree = r->st->total.pending == 0 && r->st->total.started == started &&
				 r->st->total.cancelled == cancelled &&
				 r->st->total.reset == resets && r->st->total.fired == fired;
		if ((r->settled && r->stats_agree) || spoke_now_ns() >= give_up)
			break;
		sleep_ns(1 * MS);
	}
	if (!r->stats_agree)
		printf("service stats / demo: started %" PRIu64 "/%" PRIu64 ", cancelled %" PRIu64
		       "/%" PRIu64 ", reset %" PRIu64 "/%" PRIu64 ", fired %" PRIu64 "/%" PRIu64
		       ", pending %" PRIu64 "\n",
		       r->st->total.started, started, r->st->total.cancelled, cancelled,
		       r->st->total.reset, resets, r->st->total.fired, fired, r->st->total.pending);
}

/* After spoke_destroy(): read every record and heartbeat. */
static void tally(struct run *r, const uint64_t runs_before_destroy[N_KINDS])
{
	for (unsigned i = 0; i < r->opt.threads; i++) {
		struct producer *p = &r->prod[i];

		r->rec.nrec += p->checked.nrec;
		r->rec.fired += p->checked.fired;
		r->rec.cancelled += p->checked.cancelled;
		r->rec.early += p->checked.early;
		r->rec.bad_outcome += p->checked.bad_outcome;
		for (struct chunk *c = p->oldest; c; c = c->next)
			tally_chunk(&r->rec, c);
		r->rec_bytes += p->nchunks * sizeof(struct chunk);
		for (unsigned j = 0; j < HEARTBEATS; j++) {
			struct heartbeat *h = &p->hb[j];

			if (!h->id)
				continue;
			r->hb_runs += atomic_load(&h->runs);
			r->hb_overlaps += atomic_load(&h->overlaps);
			r->hb_early += atomic_load(&h->early);
			r->hb_bad_stop += h->stop_rc != 0;
			r->runs_after += atomic_load(&h->runs) - h->runs_at_stop;
		}
	}
	for (unsigned k = 0; k < N_KINDS; k++)
		r->runs_after += atomic_load(&cb_runs[k]) - runs_before_destroy[k];
}

static void summary(const struct run *r)
{
	const struct counts *t = &r->tot;

	printf("\nper shard (spoke_stats after the drain):\n");
	printf("  %-6s %10s %10s %10s %10s %8s %9s %12s\n", "shard", "started", "cancelled",
	       "reset", "fired", "pending", "inbox hwm", "max late");
	for (unsigned k = 0; k < r->st->shards; k++) {
		char name[16];

		snprintf(name, sizeof(name), "%u", k);
		print_shard_row(name, &r->st->shard[k]);
	}
	print_shard_row("total", &r->st->total);

	printf("\nper kind (the demo's own counts):\n");
	printf("  %-18s %10s %10s %10s %10s %10s\n", "timers", "started", "fired", "cancelled",
	       "resets", "reset lost");
	for (unsigned k = 0; k < N_KINDS; k++)
		printf("  %-18s %10" PRIu64 " %10" PRIu64 " %10" PRIu64 " %10" PRIu64 " %10" PRIu64
		       "\n",
		       kind_name[k], t->started[k], atomic_load(&cb_runs[k]), t->cancelled[k],
		       t->reset_ok[k], t->reset_lost[k]);
	printf("  (heartbeats: fired = runs; reset lost = the timer had fired first)\n");
	printf("\nload %.2f s, drain %.3f s; %" PRIu64 " one-shot timers tracked in %.1f MiB of "
	       "records\n",
	       (double)(r->load_end_ns - r->t0_ns) / 1e9,
	       (double)(r->drained_ns - r->load_end_ns) / 1e9, r->rec.nrec,
	       (double)r->rec_bytes / (1 << 20));
}

static bool check_line(bool pass, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static bool check_line(bool pass, const char *fmt, ...)
{
	va_list ap;

	printf("  [%s] ", pass ? " ok " : "FAIL");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	return pass;
}

static bool check(const struct run *r)
{
	const struct counts *t = &r->tot;
	bool ok = true;

	printf("\nchecks:\n");
	ok &= check_line(r->rec.bad_outcome == 0 && r->rec.fired + r->rec.cancelled == r->rec.nrec,
			 "exactly once: %" PRIu64 " one-shot timers, %" PRIu64 " fired + %" PRIu64
			 " cancelled, %" PRIu64 " with other than one outcome",
			 r->rec.nrec, r->rec.fired, r->rec.cancelled, r->rec.bad_outcome);
	ok &= check_line(r->rec.early == 0 && atomic_load(&cb_early) == 0,
			 "never early: %" PRIu64 " one-shot callbacks ran before their time",
			 r->rec.early);
	ok &= check_line(r->hb_overlaps == 0 && r->hb_early == 0 && r->hb_bad_stop == 0,
			 "heartbeats: %" PRIu64 " runs, %" PRIu64 " overlapping, %" PRIu64
			 " early, %" PRIu64 " final cancel_sync not 0",
			 r->hb_runs, r->hb_overlaps, r->hb_early, r->hb_bad_stop);
	ok &= check_line(r->settled,
			 "every one-shot timer fired or was cancelled within %d s of the drain",
			 SETTLE_LIMIT_S);
	ok &= check_line(r->runs_after == 0,
			 "no run after the final cancel_sync or during destroy: %" PRIu64,
			 r->runs_after);
	ok &= check_line(r->stats_agree, "spoke_stats agrees with the demo (started, cancelled, "
					 "reset, fired; 0 pending)");
	ok &= check_line(t->errors == 0 && !r->oom,
			 "no unexpected errors from the service: %" PRIu64 "%s%s%s", t->errors,
			 t->errors ? ", first: " : "", t->errors ? strerror(-t->first_error) : "",
			 r->oom ? " (and the demo ran out of memory)" : "");
	return ok;
}

int main(int argc, char **argv)
{
	struct run r = {0};
	uint64_t runs_before_destroy[N_KINDS];
	bool ok;
	int err;

	err = demo_parse_options(argc, argv, &r.opt);
	if (err >= 0)
		return err;
	err = spoke_create(&svc, NULL); /* the default configuration */
	if (err) {
		fprintf(stderr, "spoke-demo: spoke_create: %s\n", strerror(-err));
		return 2;
	}
	nshards = spoke_shards(svc);
	r.prod = calloc(r.opt.threads, sizeof(*r.prod));
	r.st = malloc(sizeof(*r.st));
	r.prev_st = malloc(sizeof(*r.prev_st));
	if (!r.prod || !r.st || !r.prev_st) {
		fprintf(stderr, "spoke-demo: out of memory\n");
		return 2;
	}
	printf("spoke-demo: %u shards (default configuration), %u producer threads, %.1f s\n"
	       "  each thread: %u connections (idle timeout 200..500 ms, reset on activity),\n"
	       "  %u requests/s (100 ms deadline, mostly cancelled), %u heartbeats,\n"
	       "  Lawn sessions (TTL 250 ms, 500 ms, 1 s, 2 s)\n",
	       nshards, r.opt.threads, r.opt.seconds, CONNS, REQ_RATE, HEARTBEATS);
	fflush(stdout);

	if (run_load(&r) != 0)
		return 2;
	settle(&r);
	for (unsigned k = 0; k < N_KINDS; k++)
		runs_before_destroy[k] = atomic_load(&cb_runs[k]);
	spoke_destroy(svc); /* nothing is pending now: no timer is lost here */
	tally(&r, runs_before_destroy);
	summary(&r);
	ok = check(&r);
	printf("\nspoke-demo: %s\n", ok ? "PASS" : "FAIL");

	for (unsigned i = 0; i < r.opt.threads; i++) {
		while (r.prod[i].oldest) {
			struct chunk *c = r.prod[i].oldest;

			r.prod[i].oldest = c->next;
			free(c);
		}
	}
	free(r.prod);
	free(r.st);
	free(r.prev_st);
	return ok ? 0 : 1;
}
