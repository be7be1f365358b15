/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * engine_sorted_list.c - scheme 2 of Varghese & Lauck: one doubly linked
 * list of timers ordered by deadline.
 *
 * The list is circular around a sentinel timer kept in the engine struct:
 * sentinel.sp_next is the earliest timer (the head), sentinel.sp_link the
 * latest (the tail); an empty list points at the sentinel both ways. Equal
 * deadlines keep start order: a new timer goes after every timer whose
 * deadline is <= its own, so timers due on the same tick fire FIFO.
 *
 * Costs: start is O(n) in the worst case - it walks from the tail backwards,
 * which is O(1) when deadlines are started in non-decreasing order (the
 * common case of one fixed timeout); stop is O(1) (unlink); next_event() is
 * O(1) (the head's deadline); collect() is O(1) per timer it moves to the
 * due list and nothing else. The paper's per-tick cost is O(1) as well.
 * Choose it when most timers share a timeout or there are few of them.
 *
 * Fields of struct spoke_timer while the timer is on the list:
 *   sp_next      next (later) timer, or &sentinel after the tail
 *   sp_link      previous (earlier) timer, a struct spoke_timer *, or
 *                &sentinel before the head
 *   sp_deadline  the key (set by engine.c)
 * Neither link is NULL while the timer is on the list (it reads as pending)
 * and unlinking clears both. Once collected the timer is unlinked first: the
 * due list (tlist.h) reuses sp_next and sp_link with its own meaning.
 */
#include "clist.h"
#include "engine_impl.h"

struct sorted_list_engine {
	struct spoke_engine base;
	/* sp_next = head, sp_link = tail; its sp_deadline stays 0 (see insert). */
	struct spoke_timer sentinel;
};

static struct sorted_list_engine *to_sorted(struct spoke_engine *e)
{
	return (struct sorted_list_engine *)e;
}

static int sorted_init(struct spoke_engine *e, const struct spoke_engine_params *p)
{
	struct sorted_list_engine *s = to_sorted(e);

	(void)p;
	spoke_clist_init(&s->sentinel);
	s->sentinel.sp_deadline = 0;
	return 0;
}

static void sorted_insert(struct spoke_engine *e, struct spoke_timer *t)
{
	struct sorted_list_engine *s = to_sorted(e);
	struct spoke_timer *prev = spoke_clist_prev(&s->sentinel);

	/*
	 * Walk back from the tail past every later timer. The sentinel's
	 * deadline is 0 and every inserted deadline is > now >= 0, so the walk
	 * stops at the sentinel without a separate test.
	 */
	while (prev->sp_deadline > t->sp_deadline)
		prev = spoke_clist_prev(prev);
	spoke_clist_add_after(prev, t);
}

static void sorted_remove(struct spoke_engine *e, struct spoke_timer *t)
{
	(void)e;
	(void)spoke_clist_del(t);
}

static uint64_t sorted_next_event(struct spoke_engine *e)
{
	struct sorted_list_engine *s = to_sorted(e);

	return spoke_clist_empty(&s->sentinel) ? UINT64_MAX : s->sentinel.sp_next->sp_deadline;
}

/* Move the due prefix of the list onto the due list; ties fire in start order. */
static void sorted_collect(struct spoke_engine *e)
{
	spoke_clist_move_due(&to_sorted(e)->sentinel, e->now, &e->due);
}

const struct spoke_engine_ops spoke_sorted_list_ops = {
	.name = "sorted-list",
	.size = sizeof(struct sorted_list_engine),
	.init = sorted_init,
	.insert = sorted_insert,
	.remove = sorted_remove,
	.next_event = sorted_next_event,
	.collect = sorted_collect,
};
