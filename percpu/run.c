/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * run.c - running an expiry callback: the one routine every callback runs
 * through, wherever it runs (the owner's turn, a pool worker, a rescuer),
 * and what the calling thread is while it does (its run, the shard it owns).
 *
 * Run (spoke_runner_call): DISPATCHED -> RUNNING, call fn(arg), then a
 * one-shot ends as FREE with a new generation; a periodic timer without STOP
 * goes back to ARMED and to its owner for re-arming at previous deadline +
 * period, only after its run returned, so it never overlaps itself. Threads
 * waiting in cancel_sync (WAITERS) are woken when RUNNING ends.
 *
 * This file calls nothing of the shard above it: what the shard must do
 * once the run has ended (re-arm the timer, or post it to its owner) is
 * returned (enum runner_next), and spoke_runner_run (service.h, inline in
 * each runner) does it.
 */
#define _GNU_SOURCE
#include "probes.h"
#include "protocol.h"
#include "service.h"
#include "test_hooks.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* The run in progress on this thread, innermost first (spoke_runner_call). */
static _Thread_local struct spoke_run *tls_run;

/*
 * The shard the calling thread owns (service.h spoke_any_owns_shard):
 * here, below every file that reads it; set by managed.c as a thread takes
 * a shard over and lets it go.
 */
_Thread_local struct spoke_tls_owner spoke_tls_owner;

struct spoke_run *spoke_current_run(void)
{
	return tls_run;
}

/*
 * A callback that never returns to its run (pthread_exit inside it, or a
 * cancellation acted on there) leaves the service waiting for that run for
 * ever: a spoke_poll's call never ends, so destroy hangs; a shard or pool
 * thread is gone, so its timers never run again. No error can be returned
 * to anyone, so it stops the process, naming the misuse. Seen at the
 * thread's exit, at no cost to the runs: every thread that runs callbacks
 * holds a value under this key (set once, as it begins to), whose
 * destructor finds the thread still inside a run.
 */
static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;
static bool exit_key_once_failed; /* no key (EAGAIN): such an exit goes unseen */

static void abort_if_exit_in_run(void *unused)
{
	(void)unused;
	if (!tls_run)
		return;
	fprintf(stderr, "spoke: a thread exited inside a timer callback (pthread_exit, or a "
			"cancellation acted on in it; misuse: a callback must return, or spoke "
			"would wait for that run for ever); aborting\n");
	abort();
}

static void exit_key_create(void)
{
	if (pthread_key_create(&exit_key, abort_if_exit_in_run) != 0)
		exit_key_once_failed = true;
}

/* The calling thread runs callbacks from now on (a shard or pool thread, an attached one). */
void spoke_runner_watch_exit(void)
{
	(void)pthread_once(&exit_key_once, exit_key_create);
	if (!exit_key_once_failed)
		(void)pthread_setspecific(exit_key, &exit_key);
}

bool spoke_running_in_callback(const struct spoke_handle *h)
{
	return tls_run && tls_run->h == h;
}

bool spoke_in_callback_of(const struct spoke *s)
{
	for (const struct spoke_run *r = tls_run; r; r = r->outer)
		if (r->s == s)
			return true;
	return false;
}

/*
 * How late a run of sh due at deadline_ns starts: counted in a histogram
 * and a maximum, and returned. Without a pool, the shard's owner is the
 * only thread that records in `late` (lateness.h), so neither needs a
 * locked instruction; a rescuer running a movable timer there records in
 * `late_moved` (with a locked add: rescuers may run at once). With a pool
 * every runner adds to `late`. In a burst every run is later than the
 * last, so the maximum moves on every run.
 */
static uint64_t note_lateness(struct shard *sh, uint64_t deadline_ns, bool owner)
{
	uint64_t now, late, cur;
	bool pool, sole, apart;
	_Atomic uint64_t *max;

	SPOKE_HOOK(SPOKE_HOOK_RUN_NOTING);
	now = spoke_clock_ns(); /* first: nothing derived is kept across the call */
	late = now > deadline_ns ? now - deadline_ns : 0;
	pool = sh->pool != NULL;
	sole = owner && !pool;
	apart = !owner && !pool;
	max = apart ? &sh->ctr.max_late_moved_ns : &sh->ctr.max_late_ns;
	spoke_late_record(apart ? &sh->ctr.late_moved : &sh->ctr.late, late, sole);
	cur = atomic_load_explicit(max, memory_order_relaxed);
	if (late <= cur)
		return late;
	if (sole)
		atomic_store_explicit(max, late, memory_order_relaxed);
	else
		while (late > cur &&
		       !atomic_compare_exchange_weak_explicit(max, &cur, late, memory_order_relaxed,
							      memory_order_relaxed))
			;
	return late;
}

/*
 * Next deadline of a periodic timer after a run: base + period, skipping
 * periods that already passed (it runs once, then keeps its phase).
 */
static uint64_t periodic_next_ns(uint64_t base, uint64_t period, uint64_t now)
{
	uint64_t next, k;

	if (__builtin_add_overflow(base, period, &next))
		return UINT64_MAX;
	if (next > now)
		return next;
	k = (now - base) / period + 1;
	if (__builtin_mul_overflow(k, period, &next) || __builtin_add_overflow(next, base, &next))
		return UINT64_MAX;
	return next;
}

/*
 * After the run: free a one-shot (or a stopped periodic); for a periodic
 * timer, store its next deadline and say how it goes back to its shard.
 * Which periods were missed is decided here, on the clock of the run's end:
 * an owner that takes the re-arm message late then runs the next period
 * late instead of skipping it. While RUNNING, base_ns stays the deadline of
 * this run, so that spoke_remaining (api_timers.c next_run_ns) can add a period to
 * it; the next one is stored only once the CAS has ended the run, before the
 * re-arm (this thread is the owner) or its message (the owner reads base_ns
 * after taking it): until then a reader sees this run's deadline, which is
 * past (due), never a period too far. sh: h's shard (fixed for
 * the generation); direct: the runner owned it when the run began. A
 * callback cannot give its own shard up (spoke_detach refuses inside the
 * turn); a pool callback that attaches its own shard ends its run as any
 * non-owner does, through the inbox.
 */
static enum runner_next finish_run(struct shard *sh, struct spoke_handle *h, bool direct)
{
	uint64_t st = atomic_load_explicit(&h->state, memory_order_acquire), next_ns = 0;
	struct spoke *s = sh->s;
	enum runner_end end;

	if (spoke_st_kind(st) == SPOKE_KIND_PERIODIC && !(st & SPOKE_ST_STOP)) {
		struct spoke_periodic *per = spoke_periodic_of(h);

		next_ns = periodic_next_ns(
			spoke_periodic_base(per),
			atomic_load_explicit(&per->period_ns, memory_order_relaxed),
			spoke_clock_ns());
	}
	SPOKE_HOOK(SPOKE_HOOK_RUN_FINISHING);
	/*
	 * Once destroy has begun nothing is re-armed; a periodic timer that
	 * would run again is parked ARMED in no engine (protocol.h runner_finish).
	 */
	end = runner_finish(h, &st, &s->stopping, direct);
	if (st & SPOKE_ST_WAITERS)
		spoke_ec_wake_word(spoke_state_futex(h));
	switch (end) {
	case RUNNER_END_PARKED:
		break;
	case RUNNER_END_RETIRED:
		if (st & SPOKE_ST_STOP)
			spoke_count(sh, CTR_CANCELLED, direct);
		spoke_handle_retired(s, h, st);
		break;
	case RUNNER_END_REARM:
		spoke_periodic_set_base(spoke_periodic_of(h), next_ns);
		return (st & SPOKE_ST_RESET) ? RUNNER_NEXT_REARM_RESET : RUNNER_NEXT_REARM;
	case RUNNER_END_POST:
		spoke_periodic_set_base(spoke_periodic_of(h), next_ns);
		return RUNNER_NEXT_POST;
	}
	return RUNNER_NEXT_DONE;
}

/*
 * Claim h's run (st: its word, just read): DISPATCHED -> RUNNING; or, if a
 * cancel won first, h is retired here; or, if a reset did, the timer is
 * pending again, at the reset's deadline, and goes back to its owner as a
 * start travels (ARMED | INBOX: the caller posts it). protocol.h
 * runner_claim_run decides.
 */
static enum runner_claim claim_run(struct shard *sh, struct spoke_handle *h, uint64_t st)
{
	enum runner_claim claim;

	SPOKE_HOOK(SPOKE_HOOK_RUN_LOADED);
	claim = runner_claim_run(h, &st);
	if (claim == RUNNER_RETIRED) {
		spoke_handle_retired(sh->s, h, st);
		spoke_count(sh, CTR_CANCELLED, spoke_any_owns_shard(sh));
	}
	return claim;
}

/*
 * Run h's callback on this thread (h is DISPATCHED, taken off any queue;
 * sh: its shard): whether it ran, and what its shard must do next (enum
 * runner_next).
 * Without a pool (nworkers 0) the runner is always the shard's owner, the
 * only thread that records its runs: the counters take plain adds.
 */
enum runner_next spoke_runner_call(struct shard *sh, struct spoke_handle *h)
{
	uint64_t st = atomic_load_explicit(&h->state, memory_order_acquire);
	struct spoke *s = sh->s;
	enum runner_claim claim = claim_run(sh, h, st);
	struct spoke_run run;
	uint64_t due, late;
	bool owner;
	void *arg;

	if (claim != RUNNER_RUNS)
		return claim == RUNNER_RETIRED ? RUNNER_NEXT_NOT_RUN : RUNNER_NEXT_UNDISPATCHED;
	owner = spoke_any_owns_shard(sh);
	if (spoke_st_kind(st) == SPOKE_KIND_PERIODIC) {
		const struct spoke_periodic *per = spoke_periodic_of(h);

		due = spoke_periodic_base(per);
		arg = per->arg;
	} else {
		due = atomic_load_explicit(&h->deadline_ns, memory_order_relaxed);
		arg = h->arg;
	}
	/*
	 * The run's one count: spoke_stats' `fired` is the histogram's total.
	 * Outside the probe: without <sys/sdt.h> its arguments are not evaluated.
	 */
	late = note_lateness(sh, due, owner);
	run.s = s;
	run.h = h;
	run.id = spoke_make_id(spoke_st_gen(st), spoke_handle_slot_id(h));
	run.due_ns = due;
	run.outer = tls_run;
	SPOKE_PROBE3(fire, run.id, sh->index, late);
	tls_run = &run;
	h->fn(arg);
	tls_run = run.outer;
	return finish_run(sh, h, owner);
}
