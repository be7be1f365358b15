/* SPDX-License-Identifier: MIT */
/*
 * test_service_rescue.c - a stalled shard's timers still run
 * (rescue_after_ns, percpu/rescue.c; docs/contract.md, "Rescue"):
 *
 *   rescue_stolen_cpu_pool_timers   shard 0's managed thread is held off its
 *                                   CPU by a SCHED_FIFO thread spinning there;
 *                                   its timers (pool callbacks) still run while
 *                                   it is held, each once, none early, and the
 *                                   stats count a rescue and the absence (root
 *                                   only: skipped without SCHED_FIFO; with
 *                                   rescue off no rescue is ever counted)
 *   rescue_attached_moves_only_movable  an attached loop stops polling with two
 *                                   timers due: the SPOKE_MOVABLE one runs on
 *                                   another thread meanwhile, the other waits
 *                                   for the loop and runs inline in its poll
 *   rescue_off_leaves_stalled_shard an attached loop that stops polling, with
 *                                   rescue_after_ns 0: its movable timer waits
 *                                   for it
 *   rescue_left_run_rearms_later    a run a rescuer left for the loop re-arms
 *                                   itself with delay 0 and outlasts a tick:
 *                                   the poll that runs it does not run it
 *                                   again (delay 0 is the next tick, never the
 *                                   same pass, contract line 2's pitfall)
 *
 * The tests wait for conditions (a run while the owner is held), never on a
 * lateness bound: the figures are spoke-bench latency's stolen-CPU rows.
 */
#include "service_util.h"

#include <sched.h>
#include <unistd.h>

#define RESCUE_NS (20 * MS)

static struct spoke *rescue_instance(unsigned shards, unsigned callback_threads,
				     uint64_t rescue_after_ns)
{
	struct spoke_config c;

	svc_config(&c, shards, 1 * MS, callback_threads);
	c.rescue_after_ns = rescue_after_ns;
	return svc_create_cfg(&c);
}

/* ---- a managed thread held off its CPU ---------------------------------------------- */

#define HELD_TIMERS 40

static struct {
	atomic_int spinning, stop, no_fifo;
	_Atomic uint64_t begun_ns, ended_ns;
} hog;

/* SCHED_FIFO on CPU 0 until told to stop (or a bound, so a failing test ends). */
static void *hog_main(void *arg)
{
	struct sched_param p = {.sched_priority = 1};
	cpu_set_t cpus;
	uint64_t bound;

	(void)arg;
	CPU_ZERO(&cpus);
	CPU_SET(0, &cpus);
	if (pthread_setaffinity_np(pthread_self(), sizeof(cpus), &cpus) != 0 ||
	    pthread_setschedparam(pthread_self(), SCHED_FIFO, &p) != 0) {
		atomic_store(&hog.no_fifo, 1);
		return NULL;
	}
	atomic_store(&hog.begun_ns, spoke_now_ns());
	atomic_store(&hog.spinning, 1);
	bound = spoke_now_ns() + HOLD_LIMIT_NS;
	while (!atomic_load_explicit(&hog.stop, memory_order_relaxed) && spoke_now_ns() < bound)
		;
	atomic_store(&hog.ended_ns, spoke_now_ns());
	return NULL;
}

static struct {
	struct trec rec[HELD_TIMERS];
	atomic_uint during; /* runs that began while the hog spun */
} stalled_run;

static void held_fire(void *arg)
{
	trec_fire(arg);
	if (atomic_load(&hog.spinning) && !atomic_load(&hog.ended_ns))
		atomic_fetch_add(&stalled_run.during, 1);
}

/* The calling thread on one CPU, or (cpu -1) on every online one again. */
static void pin_self_to(int cpu)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	cpu_set_t cpus;

	CPU_ZERO(&cpus);
	for (long c = 0; c < n && c < CPU_SETSIZE; c++)
		if (cpu < 0 || c == cpu)
			CPU_SET(c, &cpus);
	assert_int_equal(pthread_setaffinity_np(pthread_self(), sizeof(cpus), &cpus), 0);
}

static void rescue_stolen_cpu_pool_timers(void **state)
{
	struct spoke_shard_stats st;
	atomic_uint ticks = 0;
	spoke_id tick_id;
	struct spoke *s;
	pthread_t t;
	uint64_t t0;

	(void)state;
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		skip();
	memset(&hog, 0, sizeof(hog));
	memset(&stalled_run, 0, sizeof(stalled_run));
	trec_reset_globals();
	pin_self_to(1);
	s = rescue_instance(2, 2, RESCUE_NS); /* shard k pinned to CPU k */
	t = thread_start(hog_main, NULL);
	ASSERT_EVENTUALLY(atomic_load(&hog.spinning) || atomic_load(&hog.no_fifo),
			  "the SCHED_FIFO thread to spin on CPU 0");
	if (atomic_load(&hog.no_fifo)) {
		pthread_join(t, NULL);
		svc_destroy(s);
		pin_self_to(-1);
		skip(); /* not allowed to run SCHED_FIFO here */
	}
	/* Due while shard 0's thread cannot run: from 10 to 50 ms after the hog began. */
	t0 = spoke_now_ns();
	for (unsigned i = 0; i < HELD_TIMERS; i++) {
		uint64_t delay = 10 * MS + i * MS;

		atomic_store(&stalled_run.rec[i].earliest, t0 + delay);
		assert_int_equal(spoke_start_on(s, 0, delay, held_fire, &stalled_run.rec[i], NULL),
				 0);
	}
	/*
	 * And a periodic timer, so that shard 0 keeps having work due: if the
	 * kernel's RT throttling lets its thread run for a moment (50 ms a
	 * second) before a rescuer got the CPU it shares with other processes,
	 * the next period is rescued. The busy thread spins until a rescue is
	 * counted (or its bound).
	 */
	assert_int_equal(
		spoke_start_flags(s, 0, 2 * MS, SPOKE_PERIODIC, count_fn, &ticks, &tick_id), 0);
	ASSERT_EVENTUALLY_MSG(trecs_ended(stalled_run.rec, HELD_TIMERS) &&
				      stats_of(s, 0).rescues >= 1,
			      "shard 0's timers to run, and a rescue of it, while its thread was "
			      "held off its CPU");
	atomic_store(&hog.stop, 1);
	pthread_join(t, NULL);
	assert_trecs_once(stalled_run.rec, HELD_TIMERS, NULL, NULL);
	assert_never_early();
	if (atomic_load(&stalled_run.during) == 0)
		fail_msg("no timer of shard 0 ran while its thread was held (they ran after)");
	assert_int_equal(spoke_cancel_sync(s, tick_id), 0);
	st = stats_of(s, 0);
	assert_true(st.rescues >= 1);
	assert_true(st.max_absence_ns > 0);
	assert_int_equal(st.fired, HELD_TIMERS + atomic_load(&ticks));
	svc_destroy(s);
	pin_self_to(-1);
}

/* ---- an attached loop that stops polling ------------------------------------------- */

static struct {
	struct spoke *s;
	pthread_t loop;
	struct trec movable, fixed;
	atomic_int stalled, resume;
	atomic_int fixed_on_loop, movable_on_loop, fixed_in_stall;
} att;

static void att_movable_fire(void *arg)
{
	trec_fire(arg);
	if (pthread_equal(pthread_self(), att.loop))
		atomic_store(&att.movable_on_loop, 1);
}

static void att_fixed_fire(void *arg)
{
	trec_fire(arg);
	if (pthread_equal(pthread_self(), att.loop))
		atomic_store(&att.fixed_on_loop, 1);
	if (atomic_load(&att.stalled))
		atomic_store(&att.fixed_in_stall, 1);
}

static void *att_loop_main(void *arg)
{
	uint64_t t0;

	(void)arg;
	att.loop = pthread_self();
	BG_CHECK_INT(spoke_attach(att.s, 0), ==, 0);
	t0 = spoke_now_ns();
	atomic_store(&att.movable.earliest, t0 + 5 * MS);
	atomic_store(&att.fixed.earliest, t0 + 5 * MS);
	BG_CHECK_INT(spoke_start_flags(att.s, SPOKE_ANY_SHARD, 5 * MS, SPOKE_MOVABLE,
				       att_movable_fire, &att.movable, NULL),
		     ==, 0);
	BG_CHECK_INT(spoke_start(att.s, 5 * MS, att_fixed_fire, &att.fixed, NULL), ==, 0);
	/* A slow handler: no poll until the test says so. */
	atomic_store(&att.stalled, 1);
	while (!atomic_load(&att.resume))
		sleep_ms(1);
	atomic_store(&att.stalled, 0);
	while (atomic_load(&att.fixed.fired) == 0 && spoke_now_ns() - t0 < EVENTUALLY_NS) {
		BG_CHECK_INT(spoke_poll(att.s), >=, 0);
		sleep_ms(1);
	}
	BG_CHECK_INT(spoke_detach(att.s), ==, 0);
	return NULL;
}

static void attached_stall(uint64_t rescue_after_ns)
{
	pthread_t t;

	memset(&att, 0, sizeof(att));
	trec_reset_globals();
	att.s = rescue_instance(2, 0, rescue_after_ns); /* callbacks inline */
	t = thread_start(att_loop_main, NULL);
	ASSERT_EVENTUALLY(atomic_load(&att.stalled), "the loop to start its timers and stall");
	if (rescue_after_ns) {
		ASSERT_EVENTUALLY_MSG(atomic_load(&att.movable.fired) == 1,
				      "the movable timer to run while its loop stalls");
		assert_int_equal(atomic_load(&att.movable_on_loop), 0);
		assert_true(stats_of(att.s, 0).rescues >= 1);
	} else {
		/* Both are due; neither may run until the loop polls (nothing to wait for). */
		sleep_ms(60);
		assert_int_equal(atomic_load(&att.movable.fired), 0);
	}
	assert_int_equal(atomic_load(&att.fixed.fired), 0);
	atomic_store(&att.resume, 1);
	pthread_join(t, NULL);
	assert_no_bg_failures();
	assert_int_equal(atomic_load(&att.fixed.fired), 1);
	assert_int_equal(atomic_load(&att.fixed_on_loop), 1);
	assert_int_equal(atomic_load(&att.fixed_in_stall), 0);
	assert_int_equal(atomic_load(&att.movable.fired), 1);
	if (!rescue_after_ns)
		assert_int_equal(atomic_load(&att.movable_on_loop), 1);
	assert_never_early();
	svc_destroy(att.s);
}

static void rescue_attached_moves_only_movable(void **state)
{
	(void)state;
	attached_stall(RESCUE_NS);
}

static void rescue_off_leaves_stalled_shard(void **state)
{
	(void)state;
	attached_stall(0);
}

/* ---- a run left by a rescue, re-armed from its callback --------------------------- */

static struct {
	struct spoke *s;
	atomic_int runs, stalled, resume;
	int polled[2];
} left;

static void left_fire(void *arg)
{
	(void)arg;
	if (atomic_fetch_add(&left.runs, 1) == 0) {
		BG_CHECK_INT(spoke_start(left.s, 0, left_fire, NULL, NULL), ==, 0);
		sleep_ms(3); /* past the re-armed deadline: the next tick */
	}
}

static void *left_loop_main(void *arg)
{
	(void)arg;
	BG_CHECK_INT(spoke_attach(left.s, 0), ==, 0);
	BG_CHECK_INT(spoke_start(left.s, 2 * MS, left_fire, NULL, NULL), ==, 0);
	atomic_store(&left.stalled, 1);
	while (!atomic_load(&left.resume))
		sleep_ms(1);
	left.polled[0] = spoke_poll(left.s);
	sleep_ms(3);
	left.polled[1] = spoke_poll(left.s);
	BG_CHECK_INT(spoke_detach(left.s), ==, 0);
	return NULL;
}

static void rescue_left_run_rearms_later(void **state)
{
	pthread_t t;

	(void)state;
	memset(&left, 0, sizeof(left));
	left.s = rescue_instance(2, 0, RESCUE_NS); /* callbacks inline: the run stays the loop's */
	t = thread_start(left_loop_main, NULL);
	ASSERT_EVENTUALLY(atomic_load(&left.stalled), "the loop to start its timer and stall");
	ASSERT_EVENTUALLY_MSG(stats_of(left.s, 0).rescues >= 1,
			      "a rescuer to take the stalled shard's due timer");
	assert_int_equal(atomic_load(&left.runs), 0);
	atomic_store(&left.resume, 1);
	pthread_join(t, NULL);
	assert_no_bg_failures();
	if (left.polled[0] != 1)
		fail_msg("the poll after the rescue ran %d callbacks (expected 1: the re-armed "
			 "timer is due at the next tick, not in the same pass)",
			 left.polled[0]);
	assert_int_equal(left.polled[1], 1);
	assert_int_equal(atomic_load(&left.runs), 2);
	svc_destroy(left.s);
}

int main(int argc, char **argv)
{
	static const struct CMUnitTest all[] = {
		SVC_TEST(rescue_stolen_cpu_pool_timers),
		SVC_TEST(rescue_attached_moves_only_movable),
		SVC_TEST(rescue_off_leaves_stalled_shard),
		SVC_TEST(rescue_left_run_rearms_later),
	};

	return svc_main(argc, argv, "service.rescue", all, sizeof(all) / sizeof(all[0]));
}
