/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * tlist.h - the intrusive timer list every slot, bucket and due list uses.
 *
 * A list head is one pointer (8 bytes per wheel slot). Each timer keeps
 * sp_next and, in sp_link, the address of the pointer that points at it
 * (the head's `first` or the previous timer's sp_next), so a timer unlinks
 * itself in O(1) without knowing which list holds it - the hlist of the
 * Linux kernel. Push is at the head: order within a list is LIFO, which no
 * scheme relies on except where it says so. sp_link is never NULL on a list
 * and del leaves it NULL: that is the pending flag (engine_impl.h).
 */
#ifndef SPOKE_LIB_TLIST_H
#define SPOKE_LIB_TLIST_H

#include <spoke/engine.h>

struct spoke_tlist {
	struct spoke_timer *first;
};

static inline void spoke_tlist_init(struct spoke_tlist *l)
{
	l->first = NULL;
}

static inline bool spoke_tlist_empty(const struct spoke_tlist *l)
{
	return l->first == NULL;
}

/*
 * Push and unlink update the neighbour's back link only if there is a
 * neighbour. With few timers per list that is a coin flip for the branch
 * predictor, so instead the store goes to t's own sp_link when there is no
 * neighbour (a conditional select of the address, not a jump); that field
 * is written again right after.
 */
static inline void spoke_tlist_push(struct spoke_tlist *l, struct spoke_timer *t)
{
	struct spoke_timer *first = l->first;
	void **back = first ? &first->sp_link : &t->sp_link;

	t->sp_next = first;
	*back = &t->sp_next;
	l->first = t;
	t->sp_link = &l->first;
}

/* Insert t right after `prev` (which is on some list). */
static inline void spoke_tlist_add_after(struct spoke_timer *prev, struct spoke_timer *t)
{
	t->sp_next = prev->sp_next;
	if (t->sp_next)
		t->sp_next->sp_link = &t->sp_next;
	prev->sp_next = t;
	t->sp_link = &prev->sp_next;
}

static inline void spoke_tlist_del(struct spoke_timer *t)
{
	struct spoke_timer **pprev = (struct spoke_timer **)t->sp_link;
	struct spoke_timer *next = t->sp_next;
	void **back = next ? &next->sp_link : &t->sp_link;

	*pprev = next;
	*back = pprev;
	t->sp_next = NULL;
	t->sp_link = NULL;
}

/* Take the first timer off l (NULL if empty). */
static inline struct spoke_timer *spoke_tlist_pop(struct spoke_tlist *l)
{
	struct spoke_timer *t = l->first;

	if (t)
		spoke_tlist_del(t);
	return t;
}

/* Move all of src onto the (empty) dst in O(1). */
static inline void spoke_tlist_move(struct spoke_tlist *dst, struct spoke_tlist *src)
{
	dst->first = src->first;
	if (dst->first)
		dst->first->sp_link = &dst->first;
	src->first = NULL;
}

#endif /* SPOKE_LIB_TLIST_H */
