/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * clist.h - a circular doubly linked list of timers around a sentinel, for
 * the lists whose order or whose end matters: the sorted list, the Lawn's
 * TTL queues and wheel of heads, and the service's stage (percpu/stage.h).
 * The wheels' slots use the one-pointer list of tlist.h instead.
 *
 * The sentinel is a struct spoke_timer that never is a timer: its sp_next is
 * the first timer, its sp_link the last, itself both ways when the list is
 * empty. A timer on the list keeps sp_next forward and, in sp_link, the
 * previous node (a struct spoke_timer *): neither is NULL, so it reads as
 * pending (engine.h), and unlinking clears both. Insert, unlink and moving
 * a whole list are O(1), and a timer unlinks itself without knowing which
 * list holds it.
 *
 * The first mark. A list may set bit 0 (SPOKE_CLIST_FIRST) in the one back
 * link that names its sentinel: the first timer's sp_link, or the
 * sentinel's own while the list is empty (spoke_clist_init_marked). Then a
 * timer tells from its own link alone that it is first, and which list it
 * heads (the Lawn: a stop of a queue's head moves the queue's key). Nodes
 * are found through spoke_clist_node(), which drops the bit, and unlink
 * and append hand a back link on as they found it, so the mark moves to
 * the next first timer and back to the sentinel: append, unlink and
 * move_due keep it; add_after, splice and prev are for unmarked lists (or
 * a timer not first). An unmarked list pays one `and` per unlink.
 */
#ifndef SPOKE_LIB_CLIST_H
#define SPOKE_LIB_CLIST_H

#include <spoke/engine.h>

#include "tlist.h"

#define SPOKE_CLIST_FIRST ((uintptr_t)1)

/* The node a back link names, the first mark dropped. */
static inline struct spoke_timer *spoke_clist_node(void *link)
{
	return (struct spoke_timer *)((uintptr_t)link & ~SPOKE_CLIST_FIRST);
}

/* Whether a back link carries the first mark: its timer is first. */
static inline bool spoke_clist_first(const void *link)
{
	return (uintptr_t)link & SPOKE_CLIST_FIRST;
}

static inline void spoke_clist_init(struct spoke_timer *head)
{
	head->sp_next = head;
	head->sp_link = head;
}

/* An empty list whose first timer will carry the first mark (see above). */
static inline void spoke_clist_init_marked(struct spoke_timer *head)
{
	head->sp_next = head;
	head->sp_link = (void *)((uintptr_t)head | SPOKE_CLIST_FIRST);
}

static inline bool spoke_clist_empty(const struct spoke_timer *head)
{
	return head->sp_next == head;
}

/*
 * The node before t: the previous timer, or the sentinel. In a marked list,
 * for t not first only (the walks of the sorted list pay for no mask).
 */
static inline struct spoke_timer *spoke_clist_prev(const struct spoke_timer *t)
{
	return (struct spoke_timer *)t->sp_link;
}

/* Link t right after prev (the sentinel or a timer of an unmarked list). */
static inline void spoke_clist_add_after(struct spoke_timer *prev, struct spoke_timer *t)
{
	struct spoke_timer *next = prev->sp_next;

	t->sp_next = next;
	t->sp_link = prev;
	next->sp_link = t;
	prev->sp_next = t;
}

/* Link t last. Into an empty marked list it takes the mark with its back link. */
static inline void spoke_clist_append(struct spoke_timer *head, struct spoke_timer *t)
{
	void *last = head->sp_link;

	t->sp_next = head;
	t->sp_link = last;
	spoke_clist_node(last)->sp_next = t;
	head->sp_link = t;
}

/*
 * Take t off its list. Returns the list's sentinel if that emptied it (t's
 * neighbours were both the sentinel), else NULL.
 */
static inline struct spoke_timer *spoke_clist_del(struct spoke_timer *t)
{
	void *link = t->sp_link;
	struct spoke_timer *prev = spoke_clist_node(link), *next = t->sp_next;

	prev->sp_next = next;
	next->sp_link = link;
	t->sp_next = NULL;
	t->sp_link = NULL;
	return prev == next ? prev : NULL;
}

/* Move every timer of the list around `from` to the end of the list around `to`. */
static inline void spoke_clist_splice_tail(struct spoke_timer *from, struct spoke_timer *to)
{
	struct spoke_timer *first = from->sp_next, *last = spoke_clist_prev(from);
	struct spoke_timer *tail = spoke_clist_prev(to);

	if (first == from)
		return;
	tail->sp_next = first;
	first->sp_link = tail;
	last->sp_next = to;
	to->sp_link = last;
	spoke_clist_init(from);
}

/*
 * Move the due timers (deadline <= now) at the front of a list sorted by
 * deadline onto `due` (a due list, tlist.h), keeping their order: `due`
 * is pushed at its front and popped from there, so they go on from the
 * last due one back to the first.
 */
static inline void spoke_clist_move_due(struct spoke_timer *head, uint64_t now,
					struct spoke_tlist *due)
{
	struct spoke_timer *last = head;

	while (last->sp_next != head && last->sp_next->sp_deadline <= now)
		last = last->sp_next;
	while (last != head) {
		struct spoke_timer *t = last;

		last = spoke_clist_node(t->sp_link);
		(void)spoke_clist_del(t);
		spoke_tlist_push(due, t);
	}
}

#endif
