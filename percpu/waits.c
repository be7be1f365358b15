/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * waits.c - the wait-for graph of callbacks waiting in spoke_cancel_sync
 * (docs/service.md, "cancel_sync cycles: the wait-for graph"), with its own
 * fork() child handler.
 */
#include "service.h"

#include <errno.h>
#include <pthread.h>

/*
 * The wait-for graph of callbacks: a callback that waits in cancel_sync for
 * another timer's run records that edge (its struct spoke_run, on its
 * stack) here for as long as it waits. A wait that would close a cycle (the
 * run waited for is itself waiting, directly or through others, for the
 * waiter's run) is refused with -EDEADLK instead, so no two callbacks ever
 * wait for each other. Runs are named by id (handle and generation), so an
 * edge to a run that has ended never matches the slot's next timer. One
 * process-wide list, since a cycle may cross instances; it is taken only by
 * a cancel_sync that must wait, never by a start, reset or cancel.
 *
 * api.c wait_run_end: a callback that must wait for the run of (h, id)
 * records the edge (spoke_waits_enter), waits, and removes it
 * (spoke_waits_leave).
 */
static pthread_mutex_t waits_lock = PTHREAD_MUTEX_INITIALIZER;
static struct spoke_run *waits_first;

/* Is (h, id) the run r or one that r is nested in (the same thread's stack)? */
static bool run_on_stack(const struct spoke_run *r, const struct spoke_handle *h, spoke_id id)
{
	for (; r; r = r->outer)
		if (r->h == h && r->id == id)
			return true;
	return false;
}

/*
 * Under waits_lock: the waiting run whose thread is running (h, id), or
 * NULL. An outer run waits whenever a run nested in it does: its thread is
 * blocked in that wait.
 */
static const struct spoke_run *waiting_run(const struct spoke_handle *h, spoke_id id)
{
	for (const struct spoke_run *w = waits_first; w; w = w->next_waiting)
		if (run_on_stack(w, h, id))
			return w;
	return NULL;
}

/*
 * Under waits_lock: would `me` waiting for (h, id) close a cycle? The
 * recorded waits form chains (each thread waits for one run at a time, and
 * no cycle was ever let in), so following them ends within their number.
 */
static bool wait_closes_cycle(const struct spoke_run *me, const struct spoke_handle *h, spoke_id id)
{
	unsigned waits = 0;

	for (const struct spoke_run *w = waits_first; w; w = w->next_waiting)
		waits++;
	for (unsigned hop = 0; hop <= waits; hop++) {
		const struct spoke_run *w;

		if (run_on_stack(me, h, id))
			return true;
		w = waiting_run(h, id);
		if (!w)
			return false;
		h = w->waits_for_h;
		id = w->waits_for;
	}
	return false;
}

/*
 * fork() child: the lock may be held by a thread that is not there, and the
 * waits recorded are of threads that are not there either. Registered at
 * the first wait (below), before the lock is ever taken; it can run twice.
 */
static void waits_reset_in_child(void)
{
	pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;

	waits_lock = fresh;
	waits_first = NULL;
}

static void waits_guard_fork(void)
{
	(void)pthread_atfork(NULL, NULL, waits_reset_in_child);
}

/* `me` waits no more (after spoke_waits_enter returned 0). */
void spoke_waits_leave(struct spoke_run *me)
{
	struct spoke_run **link;

	pthread_mutex_lock(&waits_lock);
	for (link = &waits_first; *link != me; link = &(*link)->next_waiting)
		;
	*link = me->next_waiting;
	pthread_mutex_unlock(&waits_lock);
}

/*
 * Record that `me` (a callback's run) waits for the run of (h, id); -EDEADLK,
 * recording nothing, if that wait would close a cycle.
 */
int spoke_waits_enter(struct spoke_run *me, const struct spoke_handle *h, spoke_id id)
{
	static pthread_once_t fork_guarded = PTHREAD_ONCE_INIT;

	(void)pthread_once(&fork_guarded, waits_guard_fork);
	pthread_mutex_lock(&waits_lock);
	if (wait_closes_cycle(me, h, id)) {
		pthread_mutex_unlock(&waits_lock);
		return -EDEADLK;
	}
	me->waits_for = id;
	me->waits_for_h = h;
	me->next_waiting = waits_first;
	waits_first = me;
	pthread_mutex_unlock(&waits_lock);
	return 0;
}
