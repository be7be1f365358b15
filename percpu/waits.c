/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * waits.c - the wait-for graph of every wait a call can enter (docs/design/service.md,
 * "The wait-for graph"), with its own fork() child handler.
 */
#define _GNU_SOURCE
#include "protocol.h"
#include "service.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

/*
 * The wait-for graph. A call that may wait for another thread records what
 * it waits for (a struct spoke_wait, on its stack) here for as long as it
 * waits, and a wait that would close a cycle is refused instead, so no two
 * threads ever wait for each other through spoke:
 *
 *   wait     the call                 waits for the threads that
 *   RUN      spoke_cancel_sync        run the timer's run (h, id)
 *   ATTACH   spoke_attach(s, k)       are shard k's managed thread, and, but
 *                                     for an attach from a pool callback,
 *                                     s's pool workers in a run of shard k
 *                                     (the managed thread waits for them)
 *   DESTROY  spoke_destroy(s)         are in a waiting call on s, run a
 *                                     callback of s (spoke_poll's too), or
 *                                     are s's managed or pool threads
 *
 * A thread is known by what it is: its runs (a callback run and the runs
 * it is nested in), the shard it is the managed thread of, the pool it is a
 * worker of, the instance of its waiting call. Following a wait to the
 * threads it waits for, and from each of those that waits itself to what
 * that one waits for, reaches the waiting thread again only through a
 * cycle. A cancel_sync or an attach that would close one returns -EDEADLK.
 * A destroy cannot refuse: one that would close a cycle makes a
 * cancel_sync in it return -EDEADLK (marked broken, woken), which lets the
 * cycle go, and aborts with a message naming the cycle when no cancel_sync
 * is in it (two callbacks destroying each other's instances, or one
 * attaching a shard whose callback destroys its instance): no return value
 * could report it, and waiting would never end.
 *
 * Waits that are not recorded wait for no one who can wait: a destroy's
 * grace periods wait for calls that never wait, and a spoke_poll's wait
 * for a producer between its tail swap and its link (shard.c) waits for
 * one store.
 *
 * Runs are named by id (handle and generation), so a wait for a run that
 * has ended never matches the slot's next timer. One process-wide list,
 * since a cycle may cross instances; it is taken only by a call that is
 * about to wait (and twice by each destroy), never by a start, reset or
 * cancel. Synchronization: the list, the marks and the cycle links are
 * waits_lock's; `broken` is set under it and read by its waiter without it.
 */
static pthread_mutex_t waits_lock = PTHREAD_MUTEX_INITIALIZER;
static struct spoke_wait *waits_first;
static unsigned waits_mark; /* this search's mark: the waits it has been through */

/* Is (h, id) the run r or one that r is nested in (the same thread's stack)? */
static bool run_on_stack(const struct spoke_run *r, const struct spoke_handle *h, spoke_id id)
{
	for (; r; r = r->outer)
		if (r->h == h && r->id == id)
			return true;
	return false;
}

/* Is a run of s, of shard k if k >= 0, on the stack of runs r? */
static bool run_of_on_stack(const struct spoke_run *r, const struct spoke *s, int k)
{
	for (; r; r = r->outer) {
		/* The run goes on while its thread waits: the word's shard is its generation's. */
		uint64_t st = atomic_load_explicit(&((struct spoke_handle *)r->h)->state,
						   memory_order_relaxed);

		if (r->s == s && (k < 0 || spoke_st_shard(st) == (unsigned)k))
			return true;
	}
	return false;
}

/* Under waits_lock: does the wait t wait for the thread of `who` (waiting, or about to)? */
static bool waits_for_thread(const struct spoke_wait *t, const struct spoke_wait *who)
{
	switch (t->kind) {
	case SPOKE_WAIT_RUN:
		return run_on_stack(who->runs, t->h, t->id);
	case SPOKE_WAIT_ATTACH:
		return who->managed == &t->s->shards[t->shard] ||
		       (t->pool_too && who->pool_of == t->s &&
			run_of_on_stack(who->runs, t->s, (int)t->shard));
	case SPOKE_WAIT_DESTROY:
		return who->in_call == t->s || who->pool_of == t->s ||
		       (who->managed && who->managed->s == t->s) ||
		       run_of_on_stack(who->runs, t->s, -1);
	}
	return false;
}

/*
 * Under waits_lock: does a chain of recorded waits lead from t to the
 * thread of me? t waits for the threads it matches; one of them that waits
 * itself passes the chain on to what it waits for. Each recorded wait is
 * looked at once per search (the recorded waits have no cycle, but may
 * share a tail), and a broken one is on its way out. On true, the recorded
 * waits along the chain are linked through cycle_next from *first (NULL:
 * t waits for me's thread directly).
 */
static bool chain_to(const struct spoke_wait *t, const struct spoke_wait *me,
		     struct spoke_wait **first)
{
	if (waits_for_thread(t, me)) {
		*first = NULL;
		return true;
	}
	for (struct spoke_wait *w = waits_first; w; w = w->next) {
		struct spoke_wait *rest;

		if (w->mark == waits_mark ||
		    atomic_load_explicit(&w->broken, memory_order_relaxed) ||
		    !waits_for_thread(t, w))
			continue;
		w->mark = waits_mark;
		if (chain_to(w, me, &rest)) {
			w->cycle_next = rest;
			*first = w;
			return true;
		}
	}
	return false;
}

/* Under waits_lock: would me, about to wait, close a cycle? (*first: as chain_to.) */
static bool wait_closes_cycle(const struct spoke_wait *me, struct spoke_wait **first)
{
	if (++waits_mark == 0) { /* wrapped: no wait may carry the new mark already */
		for (struct spoke_wait *w = waits_first; w; w = w->next)
			w->mark = 0;
		waits_mark = 1;
	}
	return chain_to(me, me, first);
}

/* me is the calling thread's wait: say who the thread is. */
static void wait_identify(struct spoke_wait *me)
{
	me->runs = spoke_current_run();
	me->managed = spoke_tls_owner.managed ? spoke_tls_owner.sh : NULL;
	me->pool_of = spoke_pool_of_thread();
	me->mark = 0;
	me->cycle_next = NULL;
	atomic_init(&me->broken, 0);
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

static void waits_lock_taken(void)
{
	static pthread_once_t fork_guarded = PTHREAD_ONCE_INIT;

	(void)pthread_once(&fork_guarded, waits_guard_fork);
	pthread_mutex_lock(&waits_lock);
}

static void wait_record(struct spoke_wait *me)
{
	me->next = waits_first;
	waits_first = me;
}

/* me waits no more (after spoke_waits_enter returned 0, or spoke_waits_enter_destroy). */
void spoke_waits_leave(struct spoke_wait *me)
{
	struct spoke_wait **link;

	pthread_mutex_lock(&waits_lock);
	for (link = &waits_first; *link != me; link = &(*link)->next)
		;
	*link = me->next;
	pthread_mutex_unlock(&waits_lock);
}

/*
 * Record that the calling thread waits as me says (kind and target set by
 * the caller); -EDEADLK, recording nothing, if that wait would close a cycle.
 */
int spoke_waits_enter(struct spoke_wait *me)
{
	struct spoke_wait *first;

	wait_identify(me);
	waits_lock_taken();
	if (wait_closes_cycle(me, &first)) {
		pthread_mutex_unlock(&waits_lock);
		return -EDEADLK;
	}
	wait_record(me);
	pthread_mutex_unlock(&waits_lock);
	return 0;
}

static void describe_wait(const struct spoke_wait *w)
{
	switch (w->kind) {
	case SPOKE_WAIT_RUN:
		fprintf(stderr, "spoke_cancel_sync(%p, %#" PRIx64 ")", (const void *)w->s, w->id);
		break;
	case SPOKE_WAIT_ATTACH:
		fprintf(stderr, "spoke_attach(%p, %u)", (const void *)w->s, w->shard);
		break;
	case SPOKE_WAIT_DESTROY:
		fprintf(stderr, "spoke_destroy(%p)", (const void *)w->s);
		break;
	}
}

/* Under waits_lock, the cycle me closes has no cancel_sync in it: say it, and abort. */
static void abort_destroy_cycle(const struct spoke_wait *me, const struct spoke_wait *first)
{
	fprintf(stderr, "spoke: spoke_destroy would deadlock: ");
	describe_wait(me);
	fprintf(stderr, " on this thread");
	for (const struct spoke_wait *w = first; w; w = w->cycle_next) {
		fprintf(stderr, " waits for a thread in ");
		describe_wait(w);
		fprintf(stderr, ", which");
	}
	fprintf(stderr, " waits for this thread (misuse: callbacks that destroy each other's "
			"instances, or one that attaches a shard of an instance whose callback "
			"destroys its own); aborting\n");
	abort();
}

/*
 * spoke_destroy: record that the calling thread waits for all of me->s.
 * Every cycle that wait would close is opened first by breaking a
 * cancel_sync in it (it returns -EDEADLK, its cancel done); a cycle
 * without one aborts the process, naming it.
 */
void spoke_waits_enter_destroy(struct spoke_wait *me)
{
	struct spoke_wait *first, *c;

	wait_identify(me);
	waits_lock_taken();
	while (wait_closes_cycle(me, &first)) {
		for (c = first; c && c->kind != SPOKE_WAIT_RUN; c = c->cycle_next)
			;
		if (!c)
			abort_destroy_cycle(me, first);
		atomic_store_explicit(&c->broken, 1, memory_order_relaxed);
		spoke_ec_wake_word(spoke_state_futex((struct spoke_handle *)c->h));
	}
	wait_record(me);
	pthread_mutex_unlock(&waits_lock);
}

/* The waiter of w, while it waits: has a destroy broken its wait? */
bool spoke_wait_broken(const struct spoke_wait *w)
{
	return atomic_load_explicit(&w->broken, memory_order_relaxed);
}
