/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * util_ptimers.c - the stress library's periodic timers, one `struct
 * ptimer` slot each: starting one, cancelling it from outside or from its
 * own callback, the callback's checks, and the settle before a slot is
 * reused (stress_util.h: "periodic").
 */
#include <limits.h>

#include "stress_util.h"

struct ptimer *g_pers;
size_t g_npers;
void (*g_per_hook)(struct ptimer *p, size_t idx, uint64_t gen, unsigned n);

void pers_alloc(size_t n)
{
	g_pers = stress_table_alloc(n, sizeof(*g_pers), "periodic slots");
	g_npers = n;
}

static void atomic_min_u(atomic_uint *a, unsigned v)
{
	unsigned cur = atomic_load(a);

	while (v < cur && !atomic_compare_exchange_weak(a, &cur, v))
		;
}

/* A stop of generation gen (a cancel returned 0): count it; it must be the only one. */
static void per_stopped(struct ptimer *p, uint64_t gen, const char *how)
{
	if (atomic_load(&p->gen) != gen) {
		VIOLATION("%s of a stale periodic id returned 0 (slot %zu gen %" PRIu64 ")", how,
			  (size_t)(p - g_pers), gen);
		return;
	}
	if (atomic_fetch_add(&p->stops, 1) != 0)
		VIOLATION("two cancels of one periodic timer returned 0 (slot %zu gen %" PRIu64 ")",
			  (size_t)(p - g_pers), gen);
}

static void per_fire(void *arg);

int per_start(struct spoke *s, size_t idx, uint64_t period_ns, unsigned plan, unsigned plan_arg)
{
	struct ptimer *p = &g_pers[idx];
	uint64_t gen = atomic_load(&p->gen) + 1;
	spoke_id id = 0;
	int rc;

	atomic_store(&p->gen, gen);
	while (atomic_load(&p->pins))
		sched_yield();
	atomic_store(&p->entered, 0);
	atomic_store(&p->inside, 0);
	atomic_store(&p->stops, 0);
	atomic_store(&p->max_runs, UINT_MAX);
	atomic_store(&p->plan, plan);
	atomic_store(&p->plan_arg, plan_arg);
	atomic_store(&p->period_ns, period_ns);
	atomic_store(&p->start_ns, now_ns());
	rc = spoke_start_periodic(s, period_ns, per_fire, arg_encode(idx, gen), &id);
	if (rc == 0) {
		atomic_store_explicit(&p->id, id, memory_order_release);
		atomic_store_explicit(&p->id_gen, gen, memory_order_release);
		tally(TK_START);
	} else {
		atomic_store(&p->stops, 1); /* never ran: settled */
		atomic_store(&p->max_runs, 0);
		check_start_rc("spoke_start_periodic", rc);
	}
	return rc;
}

bool per_snapshot(struct ptimer *p, uint64_t *gen, spoke_id *id)
{
	uint64_t g = atomic_load_explicit(&p->id_gen, memory_order_acquire);
	spoke_id i = atomic_load_explicit(&p->id, memory_order_acquire);

	if (g == 0 || atomic_load_explicit(&p->gen, memory_order_acquire) != g)
		return false;
	*gen = g;
	*id = i;
	return true;
}

/* per_cancel_plan, the slot pinned (per_start waits for it before resetting the fields). */
static int per_cancel_pinned(struct spoke *s, size_t idx, bool sync, int only_plan)
{
	struct ptimer *p = &g_pers[idx];
	uint64_t gen;
	spoke_id id;
	int rc;

	if (!per_snapshot(p, &gen, &id))
		return 1;
	/* The plan was stored before the id was published: it is this timer's. */
	if (only_plan >= 0 && (atomic_load(&p->plan) & 0xff) != (unsigned)only_plan)
		return 1;
	rc = sync ? spoke_cancel_sync(s, id) : spoke_cancel(s, id);
	if (rc == -ESHUTDOWN) {
		check_rc("periodic cancel", rc, true);
		return rc;
	}
	if (rc != 0 && rc != -ENOENT) {
		VIOLATION("%s of a periodic timer from outside its callback returned %d",
			  sync ? "spoke_cancel_sync" : "spoke_cancel", rc);
		return rc;
	}
	tally(rc == 0 ? (sync ? TK_SYNC_OK : TK_CANCEL_OK)
		      : (sync ? TK_SYNC_NOENT : TK_CANCEL_NOENT));
	/* Bounds first, then the stop count: the owner reuses the slot only after it. */
	if (sync && (rc == 0 || atomic_load(&p->stops))) {
		/* Stopped (by this call or an earlier one) and no run in progress: no more runs. */
		if (atomic_load(&p->inside))
			VIOLATION("spoke_cancel_sync of a periodic timer returned %d during a run "
				  "(slot %zu)",
				  rc, idx);
		atomic_min_u(&p->max_runs, atomic_load(&p->entered));
	} else if (rc == 0) {
		/* At most the run in progress (maybe not counted yet) is still to come. */
		atomic_min_u(&p->max_runs, atomic_load(&p->entered) + 1);
	}
	if (rc == 0)
		per_stopped(p, gen, sync ? "spoke_cancel_sync" : "spoke_cancel");
	return rc;
}

int per_cancel_plan(struct spoke *s, size_t idx, bool sync, int only_plan)
{
	struct ptimer *p = &g_pers[idx];
	int rc;

	atomic_fetch_add(&p->pins, 1); /* before the snapshot: see per_start */
	rc = per_cancel_pinned(s, idx, sync, only_plan);
	atomic_fetch_sub(&p->pins, 1);
	return rc;
}

int per_cancel(struct spoke *s, size_t idx, bool sync)
{
	return per_cancel_plan(s, idx, sync, -1);
}

void per_cancel_own(struct spoke *s, struct ptimer *p, uint64_t gen, unsigned n, bool sync,
		    bool counts)
{
	spoke_id id;
	int rc;

	/*
	 * The first run may begin before the starter (a worker, never a callback)
	 * has stored the id its start returned: a preempted starter is not a
	 * service bug. It stores it without waiting on anything, so wait for it.
	 */
	while (atomic_load_explicit(&p->id_gen, memory_order_acquire) != gen)
		sched_yield();
	id = atomic_load(&p->id);
	rc = sync ? spoke_cancel_sync(s, id) : spoke_cancel(s, id);
	if (sync) {
		tally(rc == -EDEADLK ? TK_SYNC_DEADLK : rc == 0 ? TK_SYNC_OK : TK_SYNC_NOENT);
		if (rc == -ESHUTDOWN)
			check_rc("spoke_cancel_sync", rc, false);
		else if (rc != -EDEADLK)
			VIOLATION("spoke_cancel_sync from a periodic timer's own callback returned "
				  "%d, not -EDEADLK",
				  rc);
		else if (counts)
			per_stopped(p, gen, "own spoke_cancel_sync");
	} else if (rc == 0) {
		tally(TK_CANCEL_OK);
		per_stopped(p, gen, "own spoke_cancel");
	} else if (rc == -ENOENT) {
		tally(TK_CANCEL_NOENT);
		if (counts)
			VIOLATION("spoke_cancel from a periodic timer's own callback returned "
				  "-ENOENT though nothing else cancelled it (slot %zu)",
				  (size_t)(p - g_pers));
	} else {
		check_rc("spoke_cancel", rc, true);
	}
	if (rc != -ESHUTDOWN)
		atomic_min_u(&p->max_runs, n);
}

static void per_fire(void *arg)
{
	uint64_t t = now_ns(), gen = arg_gen(arg), due;
	size_t idx = arg_idx(arg);
	struct ptimer *p;
	void *outer = tl_running_arg;
	unsigned n;

	poller_note_run();
	if (idx >= g_npers || gen == 0) {
		VIOLATION("periodic callback with a bad argument %p", arg);
		return;
	}
	p = &g_pers[idx];
	if (atomic_load(&p->gen) != gen) {
		VIOLATION("run of periodic slot %zu gen %" PRIu64
			  " after it was stopped and settled (now gen %" PRIu64 ")",
			  idx, gen, (uint64_t)atomic_load(&p->gen));
		return;
	}
	if (atomic_exchange(&p->inside, 1) != 0)
		VIOLATION("periodic timer overlapped itself (slot %zu gen %" PRIu64 ")", idx, gen);
	n = atomic_fetch_add(&p->entered, 1) + 1;
	due = sat_add(atomic_load(&p->start_ns), (uint64_t)n * atomic_load(&p->period_ns));
	if (t < due)
		VIOLATION("periodic run %u began %" PRIu64
			  " ns before start + %u periods (slot %zu)",
			  n, due - t, n, idx);
	if (n > atomic_load(&p->max_runs))
		VIOLATION(
			"periodic run %u began after the timer was stopped (at most %u runs; slot "
			"%zu)",
			n, atomic_load(&p->max_runs), idx);
	tally(TK_FIRED);
	tl_running_arg = arg;
	fire_spin();
	if (g_per_hook)
		g_per_hook(p, idx, gen, n);
	tl_running_arg = outer;
	tally_flush();
	atomic_store(&p->inside, 0);
}

bool per_settle(struct spoke *s, size_t idx)
{
	struct ptimer *p = &g_pers[idx];
	uint64_t gen;
	spoke_id id;
	int rc;

	if (!per_snapshot(p, &gen, &id))
		return true;
	if (atomic_load(&p->stops) == 0)
		return false;
	rc = spoke_cancel_sync(s, id);
	if (rc == -ESHUTDOWN) {
		check_rc("spoke_cancel_sync", rc, true);
		return false;
	}
	tally(rc == 0 ? TK_SYNC_OK : TK_SYNC_NOENT);
	if (rc != -ENOENT)
		VIOLATION("spoke_cancel_sync of a stopped periodic timer returned %d (slot %zu)",
			  rc, idx);
	if (atomic_load(&p->inside))
		VIOLATION("periodic run in progress after cancel_sync returned (slot %zu)", idx);
	if (atomic_load(&p->entered) > atomic_load(&p->max_runs))
		VIOLATION("periodic slot %zu ran %u times, at most %u allowed by its cancel", idx,
			  atomic_load(&p->entered), atomic_load(&p->max_runs));
	return true;
}
