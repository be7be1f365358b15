/* SPDX-License-Identifier: MIT */
/*
 * test_service_clock.c - contract line 2 on the attached path: every start
 * reads a fresh CLOCK_MONOTONIC time (docs/design/service.md, "What a call
 * costs"). The owner of a shard has a time at hand, its last turn's,
 * and using it would save the clock read; these tests fail if a start takes
 * it, because a loop (or a callback inside its poll) may run long between
 * turns.
 *
 *   clock_attached_start_reads_fresh_time   an attached loop that runs 3 ms
 *                                           past its last poll, then starts
 *                                           a 1 ms timer: it runs no sooner
 *                                           than 1 ms after the start; the
 *                                           same from a callback that runs
 *                                           3 ms inside the poll
 *   clock_attached_pairs_never_early_threads two threads, each attached to a
 *                                           shard, start timers (delays 0 to
 *                                           1 ms, after 0 to 300 us of work
 *                                           without a poll) and cancel every
 *                                           other one, so handles are reused
 *                                           off the free list: no callback
 *                                           runs before its start's time +
 *                                           delay, each runs or is cancelled
 */
#include "service_util.h"
#include "splitmix.h"

/* Work without polling until the clock passes `until`. */
static void spin_until(uint64_t until)
{
	while (mono_ns() < until)
		;
}

/* ---- one timer started long after the turn ------------------------------------- */

#define FRESH_DELAY_NS (1 * MS)
#define FRESH_STALL_NS (3 * MS)

struct fresh_rec {
	uint64_t earliest; /* the time read just before the start call + the delay */
	_Atomic uint64_t ran_ns;
};

static void fresh_fn(void *arg)
{
	struct fresh_rec *r = arg;

	atomic_store(&r->ran_ns, mono_ns());
}

static struct spoke *fresh_s;
static struct fresh_rec fresh_inner;

/* Inline in the poll: stall, then start; the turn's time is then 3 ms old. */
static void fresh_outer_fn(void *arg)
{
	uint64_t t0;

	fresh_fn(arg);
	spin_until(mono_ns() + FRESH_STALL_NS);
	t0 = mono_ns();
	fresh_inner.earliest = t0 + FRESH_DELAY_NS;
	BG_CHECK_INT(spoke_start(fresh_s, FRESH_DELAY_NS, fresh_fn, &fresh_inner, NULL), ==, 0);
}

static void assert_not_early(const struct fresh_rec *r, const char *what)
{
	uint64_t ran = atomic_load(&r->ran_ns);

	if (ran < r->earliest)
		fail_msg("%s ran %" PRIu64 " ns before its deadline", what, r->earliest - ran);
}

static void clock_attached_start_reads_fresh_time(void **state)
{
	struct spoke *s = svc_new(1, 100 * US, 0);
	struct fresh_rec loop = {0}, outer = {0};

	(void)state;
	fresh_s = s;
	memset(&fresh_inner, 0, sizeof(fresh_inner));
	assert_int_equal(spoke_attach(s, 0), 0);
	assert_int_equal(spoke_poll(s), 0); /* a turn: its time is now */
	spin_until(mono_ns() + FRESH_STALL_NS);
	loop.earliest = mono_ns() + FRESH_DELAY_NS;
	assert_int_equal(spoke_start(s, FRESH_DELAY_NS, fresh_fn, &loop, NULL), 0);
	ASSERT_EVENTUALLY((spoke_poll(s), atomic_load(&loop.ran_ns) != 0), "the loop's timer");
	assert_not_early(&loop, "a timer started 3 ms after the last poll");

	outer.earliest = mono_ns();
	assert_int_equal(spoke_start(s, 0, fresh_outer_fn, &outer, NULL), 0);
	ASSERT_EVENTUALLY((spoke_poll(s), atomic_load(&fresh_inner.ran_ns) != 0),
			  "the timer its callback started");
	assert_no_bg_failures();
	assert_not_early(&fresh_inner, "a timer started 3 ms into a callback");
	svc_destroy(s);
}

/* ---- many attached starts on two threads, handles reused ------------------------- */

#define PAIRS_PER_THREAD 2000u

struct pair_rec {
	uint64_t earliest;
	atomic_uint runs;
};

static atomic_uint pairs_early;

static void pair_fn(void *arg)
{
	struct pair_rec *r = arg;

	if (mono_ns() < r->earliest)
		atomic_fetch_add(&pairs_early, 1);
	atomic_fetch_add(&r->runs, 1);
}

struct pair_ctx {
	struct spoke *s;
	struct pair_rec *recs; /* PAIRS_PER_THREAD per thread */
	bool *cancelled;
};

/* Thread idx: attach shard idx, start, cancel every other timer, poll until all ran. */
static void pair_worker(unsigned idx, void *p)
{
	struct pair_ctx *c = p;
	struct pair_rec *r = c->recs + (size_t)idx * PAIRS_PER_THREAD;
	bool *cancelled = c->cancelled + (size_t)idx * PAIRS_PER_THREAD;
	struct rng rng = {idx + 1};
	uint64_t end;
	unsigned left = 0;

	BG_CHECK_INT(spoke_attach(c->s, idx), ==, 0);
	for (unsigned i = 0; i < PAIRS_PER_THREAD; i++) {
		uint64_t delay = rng_below(&rng, 1 * MS + 1), t0;
		spoke_id id;

		spin_until(mono_ns() + rng_below(&rng, 300 * US));
		t0 = mono_ns();
		r[i].earliest = t0 + delay;
		BG_CHECK_INT(spoke_start(c->s, delay, pair_fn, &r[i], &id), ==, 0);
		cancelled[i] = i % 2 == 0 && spoke_cancel(c->s, id) == 0;
		left += !cancelled[i];
		if (i % 16 == 0)
			BG_CHECK_INT(spoke_poll(c->s) >= 0, ==, 1);
	}
	end = mono_ns() + EVENTUALLY_NS;
	while (left && mono_ns() < end) {
		BG_CHECK_INT(spoke_poll(c->s) >= 0, ==, 1);
		left = 0;
		for (unsigned i = 0; i < PAIRS_PER_THREAD; i++)
			left += !cancelled[i] && atomic_load(&r[i].runs) == 0;
	}
	for (unsigned i = 0; i < PAIRS_PER_THREAD; i++)
		BG_CHECK_INT(atomic_load(&r[i].runs), ==, cancelled[i] ? 0 : 1);
	BG_CHECK_INT(spoke_detach(c->s), ==, 0);
}

static void clock_attached_pairs_never_early_threads(void **state)
{
	struct pair_ctx c = {.s = svc_new(2, 100 * US, 1)};

	(void)state;
	atomic_store(&pairs_early, 0);
	c.recs = calloc(2 * PAIRS_PER_THREAD, sizeof(*c.recs));
	c.cancelled = calloc(2 * PAIRS_PER_THREAD, sizeof(*c.cancelled));
	assert_non_null(c.recs);
	assert_non_null(c.cancelled);
	run_workers(2, pair_worker, &c);
	assert_no_bg_failures();
	assert_int_equal(atomic_load(&pairs_early), 0);
	svc_destroy(c.s);
	free(c.recs);
	free(c.cancelled);
}

int main(int argc, char **argv)
{
	static const struct CMUnitTest all[] = {
		SVC_TEST(clock_attached_start_reads_fresh_time),
		SVC_TEST(clock_attached_pairs_never_early_threads),
	};

	return svc_main(argc, argv, "clock", all, ARRAY_SIZE(all));
}
