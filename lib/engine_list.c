/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * engine_list.c - scheme 1 of Varghese & Lauck: an unordered timer list.
 *
 * Start and stop are O(1) (push and unlink). The paper decrements every
 * timer on every tick; here each timer keeps its absolute deadline and the
 * engine caches the earliest one, so only ticks on which something fires
 * cost anything - and those cost O(n): collect() walks the whole list to
 * find what is due and the new earliest deadline. A stop of the earliest
 * timer only marks the cache stale; next_event() rescans once.
 * Choose it for a handful of timers; nothing else.
 */
#include "engine_impl.h"

#include <errno.h>

struct list_engine {
	struct spoke_engine base;
	struct spoke_tlist timers;
	uint64_t earliest; /* earliest deadline, exact unless `stale` */
	bool stale;
};

static struct list_engine *to_list(struct spoke_engine *e)
{
	return (struct list_engine *)e;
}

static int list_init(struct spoke_engine *e, const struct spoke_engine_params *p)
{
	struct list_engine *l = to_list(e);

	(void)p;
	spoke_tlist_init(&l->timers);
	l->earliest = UINT64_MAX;
	return 0;
}

static void list_insert(struct spoke_engine *e, struct spoke_timer *t)
{
	struct list_engine *l = to_list(e);

	spoke_tlist_push(&l->timers, t);
	if (t->sp_deadline < l->earliest)
		l->earliest = t->sp_deadline;
}

static void list_remove(struct spoke_engine *e, struct spoke_timer *t)
{
	struct list_engine *l = to_list(e);

	spoke_tlist_del(t);
	if (t->sp_deadline == l->earliest)
		l->stale = true;
}

static uint64_t scan_earliest(const struct list_engine *l)
{
	uint64_t min = UINT64_MAX;

	for (const struct spoke_timer *t = l->timers.first; t; t = t->sp_next)
		if (t->sp_deadline < min)
			min = t->sp_deadline;
	return min;
}

static uint64_t list_next_event(struct spoke_engine *e)
{
	struct list_engine *l = to_list(e);

	if (l->stale) {
		l->earliest = scan_earliest(l);
		l->stale = false;
	}
	return l->earliest;
}

static void list_collect(struct spoke_engine *e)
{
	struct list_engine *l = to_list(e);
	struct spoke_timer *t = l->timers.first;
	uint64_t min = UINT64_MAX;

	while (t) {
		struct spoke_timer *next = t->sp_next;

		if (t->sp_deadline <= e->now) {
			spoke_tlist_del(t);
			spoke_due_push(e, t);
		} else if (t->sp_deadline < min) {
			min = t->sp_deadline;
		}
		t = next;
	}
	l->earliest = min;
	l->stale = false;
}

const struct spoke_engine_ops spoke_list_ops = {
	.name = "list",
	.size = sizeof(struct list_engine),
	.init = list_init,
	.insert = list_insert,
	.remove = list_remove,
	.next_event = list_next_event,
	.collect = list_collect,
};
