/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * clist.h - a circular doubly linked list of timers around a sentinel, for
 * the lists whose order or whose end matters: the sorted list, the Lawn's
 * TTL queues and the service's stage (percpu/stage.h). The wheels' slots use
 * the one-pointer list of tlist.h instead.
 *
 * The sentinel is a struct spoke_timer that never is a timer: its sp_next is
 * the first timer, its sp_link the last, itself both ways when the list is
 * empty. A timer on the list keeps sp_next forward and, in sp_link, the
 * previous node (a struct spoke_timer *): neither is NULL, so it reads as
 * pending (engine.h), and unlinking clears both. Insert, unlink and moving
 * a whole list are O(1), and a timer unlinks itself without knowing which
 * list holds it.
 */
#ifndef SPOKE_LIB_CLIST_H
#define SPOKE_LIB_CLIST_H

#include <spoke/engine.h>

static inline void spoke_clist_init(struct spoke_timer *head)
{
	head->sp_next = head;
	head->sp_link = head;
}

static inline bool spoke_clist_empty(const struct spoke_timer *head)
{
	return head->sp_next == head;
}

/* The node before t: the previous timer, or the sentinel. */
static inline struct spoke_timer *spoke_clist_prev(const struct spoke_timer *t)
{
	return (struct spoke_timer *)t->sp_link;
}

/* Link t right after prev (the sentinel or a timer of the list). */
static inline void spoke_clist_add_after(struct spoke_timer *prev, struct spoke_timer *t)
{
	struct spoke_timer *next = prev->sp_next;

	t->sp_next = next;
	t->sp_link = prev;
	next->sp_link = t;
	prev->sp_next = t;
}

static inline void spoke_clist_append(struct spoke_timer *head, struct spoke_timer *t)
{
	spoke_clist_add_after(spoke_clist_prev(head), t);
}

/*
 * Take t off its list. Returns the list's sentinel if that emptied it (t's
 * neighbours were both the sentinel), else NULL.
 */
static inline struct spoke_timer *spoke_clist_del(struct spoke_timer *t)
{
	struct spoke_timer *prev = spoke_clist_prev(t), *next = t->sp_next;

	prev->sp_next = next;
	next->sp_link = prev;
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

#endif
