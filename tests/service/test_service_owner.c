/* SPDX-License-Identifier: MIT */
/*
 * test_service_owner.c - calls made by the thread that owns the timer's
 * shard (an attached loop), which take the owner's direct paths (api_timers.c
 * cancel_direct, reset_direct) instead of messages:
 *
 *   owner_cancel_each_kind        a one-shot, a periodic and a TTL timer
 *                                 cancelled by their owner leave their engine
 *                                 (pending 0, the engines' counts whole), never
 *                                 run, and their ids are stale at once
 *   owner_reset_later_never_early an owner's reset to a later deadline leaves
 *                                 the timer where it is in its engine; it runs
 *                                 once, at the new deadline, not the old one
 *   owner_reset_earlier_moves     an owner's reset to an earlier deadline moves
 *                                 it: it runs near the new deadline
 *   owner_reset_later_then_cancel a timer reset later and then cancelled by its
 *                                 owner never runs, also past both deadlines
 */
#include "service_util.h"

/* An instance of one shard, callbacks inline, attached by the calling thread. */
static struct spoke *owned_instance(void)
{
	struct spoke *s = svc_new(1, 1 * MS, 0);

	assert_int_equal(spoke_attach(s, 0), 0);
	return s;
}

/* Poll the attached shard until cond holds (bounded: EVENTUALLY_NS fails the test). */
#define POLL_UNTIL(s, cond, what)                                                                  \
	do {                                                                                       \
		uint64_t t0_ = mono_ns();                                                          \
		while (!(cond)) {                                                                  \
			assert_true(spoke_poll(s) >= 0);                                           \
			if (mono_ns() - t0_ > EVENTUALLY_NS)                                       \
				fail_msg("timed out waiting for %s", what);                        \
			sleep_ms(1);                                                               \
		}                                                                                  \
	} while (0)

/* Poll the attached shard for ms milliseconds. */
static void poll_for_ms(struct spoke *s, unsigned ms)
{
	uint64_t end = mono_ns() + (uint64_t)ms * MS;

	while (mono_ns() < end) {
		assert_true(spoke_poll(s) >= 0);
		sleep_ms(1);
	}
}

static void owner_cancel_each_kind(void **state)
{
	struct spoke *s;
	spoke_id id[3], again;
	uint64_t nd;

	(void)state;
	atomic_store(&never_ran, 0);
	s = owned_instance();
	assert_int_equal(spoke_start(s, 3600 * SEC, never_fn, NULL, &id[0]), 0);
	assert_int_equal(spoke_start_periodic(s, 3600 * SEC, never_fn, NULL, &id[1]), 0);
	assert_int_equal(spoke_start_ttl(s, 3600 * SEC, never_fn, NULL, &id[2]), 0);
	assert_true(spoke_poll(s) >= 0); /* publishes the shard's pending count */
	assert_int_equal(stats_pending(s), 3);
	for (unsigned k = 0; k < 3; k++) {
		assert_int_equal(spoke_cancel(s, id[k]), 0);
		assert_int_equal(spoke_cancel(s, id[k]), -ENOENT);
		assert_int_equal(spoke_reset(s, id[k], MS), -ENOENT);
		assert_int_equal(spoke_remaining(s, id[k]), -ENOENT);
	}
	assert_true(spoke_poll(s) >= 0);
	/* Each engine gave its timer up: a count off by one shows here. */
	assert_int_equal(stats_pending(s), 0);
	assert_int_equal(spoke_next_deadline_ns(s, &nd), 1); /* nothing pending */
	/* The freed handles serve again, under new ids. */
	assert_int_equal(spoke_start_ttl(s, 3600 * SEC, never_fn, NULL, &again), 0);
	for (unsigned k = 0; k < 3; k++)
		assert_true(again != id[k]);
	assert_true(spoke_poll(s) >= 0);
	assert_int_equal(stats_pending(s), 1);
	assert_int_equal(spoke_cancel(s, again), 0);
	poll_for_ms(s, 60);
	assert_int_equal(stats_pending(s), 0);
	assert_int_equal(atomic_load(&never_ran), 0);
	svc_destroy(s);
}

static void owner_reset_later_never_early(void **state)
{
	struct spoke *s;
	struct trec r = {0};
	uint64_t t0;
	spoke_id id;

	(void)state;
	trec_reset_globals();
	s = owned_instance();
	assert_int_equal(spoke_start(s, 30 * MS, trec_fire, &r, &id), 0);
	t0 = spoke_now_ns();
	atomic_store(&r.earliest, t0 + 150 * MS);
	assert_int_equal(spoke_reset(s, id, 150 * MS), 0);
	assert_true(spoke_remaining(s, id) > (int64_t)(100 * MS));
	POLL_UNTIL(s, atomic_load(&r.fired) > 0, "the reset timer to run");
	poll_for_ms(s, 20);
	assert_int_equal(atomic_load(&r.fired), 1);
	assert_never_early();
	assert_int_equal(spoke_cancel(s, id), -ENOENT);
	assert_int_equal(stats_pending(s), 0);
	svc_destroy(s);
}

static void owner_reset_earlier_moves(void **state)
{
	struct spoke *s;
	struct trec r = {0};
	spoke_id id;
	uint64_t nd;

	(void)state;
	trec_reset_globals();
	s = owned_instance();
	assert_int_equal(spoke_start(s, 3600 * SEC, trec_fire, &r, &id), 0);
	atomic_store(&r.earliest, spoke_now_ns() + 20 * MS);
	assert_int_equal(spoke_reset(s, id, 20 * MS), 0);
	/* Due within the slack of the new deadline (the default: a quarter tick). */
	assert_int_equal(spoke_next_deadline_ns(s, &nd), 0);
	if (nd > 20 * MS + MS / 4)
		fail_msg("the shard next has work in %" PRIu64 " ns, after the reset's 20 ms", nd);
	POLL_UNTIL(s, atomic_load(&r.fired) > 0, "the timer moved earlier to run");
	assert_int_equal(atomic_load(&r.fired), 1);
	assert_never_early();
	assert_int_equal(stats_pending(s), 0);
	svc_destroy(s);
}

static void owner_reset_later_then_cancel(void **state)
{
	struct spoke *s;
	spoke_id id;

	(void)state;
	atomic_store(&never_ran, 0);
	s = owned_instance();
	assert_int_equal(spoke_start(s, 20 * MS, never_fn, NULL, &id), 0);
	assert_int_equal(spoke_reset(s, id, 40 * MS), 0);
	assert_int_equal(spoke_cancel(s, id), 0);
	poll_for_ms(s, 80);
	assert_int_equal(atomic_load(&never_ran), 0);
	assert_int_equal(stats_pending(s), 0);
	svc_destroy(s);
}

int main(int argc, char **argv)
{
	static const struct CMUnitTest all[] = {
		SVC_TEST(owner_cancel_each_kind),
		SVC_TEST(owner_reset_later_never_early),
		SVC_TEST(owner_reset_earlier_moves),
		SVC_TEST(owner_reset_later_then_cancel),
	};

	return svc_main(argc, argv, "service.owner", all, sizeof(all) / sizeof(all[0]));
}
