/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * engine_impl.h - what every scheme in lib/ fills in, and what lib/engine.c
 * does for all of them.
 *
 * The split of work: engine.c owns the clock, the count, deadline
 * arithmetic (now + max(delay, 1), saturating) and the advance loop. A
 * scheme only stores timers:
 *
 *   insert(t)       t->sp_deadline is set and > now; put t where it will be
 *                   found no later than that tick, with t->sp_link != NULL.
 *   remove(t)       t is pending and held by this scheme; take it out and
 *                   leave t->sp_link NULL.
 *   next_event()    the earliest tick > now at which the scheme has work
 *                   (a timer to fire, or a slot to cascade or re-examine);
 *                   never later than the earliest deadline; UINT64_MAX if
 *                   it holds nothing.
 *   collect(now)    called with the clock set to a tick returned by
 *                   next_event(): move every timer whose deadline is now onto
 *                   the engine's due list (spoke_due_push), cascade whatever
 *                   else the tick asks for. Must not fire anything.
 *
 * The advance loop then pops the due list one timer at a time and calls the
 * expiry function. Timers still on the due list are pending: the expiry
 * function of one may stop another or re-arm it. A timer armed from inside
 * an expiry function has a deadline > now, so it is never collected in the
 * same pass.
 *
 * No field says whether a timer is pending or on the due list; two
 * invariants do.
 *
 * Pending iff sp_link != NULL. spoke_timer_init() zeroes the timer; every
 * scheme and the due list keep sp_link set while they hold it (a back link,
 * a heap position + 1, a neighbour or a sentinel), and every way out - a
 * scheme's remove(), spoke_tlist_del() when fired or stopped - clears it.
 *
 * On the due list iff sp_deadline <= now. A scheme holds only deadlines
 * > now: insert() is given one; the clock moves only to a next_event() tick,
 * never later than the earliest deadline held, followed at once by collect(),
 * which moves every timer due at that tick (a cascade included) to the due
 * list; the advance ends at a target before the next event. The due list
 * (and the firing list taken from it) holds only deadlines <= now: collect()
 * pushes timers due at the tick it runs at, and start pushes one directly
 * only when the deadline equals now (now == UINT64_MAX, the end of time);
 * the clock never goes back. Both hold whenever code outside collect() runs,
 * i.e. in every start and stop, also from inside an expiry function, so
 * unlink_pending() in engine.c knows where a pending timer is from its
 * deadline alone. `hierarchical` is the one exception, and needs neither
 * collect() nor this rule: a member of its sorted run that ties the one
 * firing waits on the run list with sp_deadline == now, and its remove()
 * is a plain list unlink wherever the timer is (engine_hierarchical.h).
 */
#ifndef SPOKE_LIB_ENGINE_IMPL_H
#define SPOKE_LIB_ENGINE_IMPL_H

#include <spoke/engine.h>

#include "tlist.h"

/*
 * Every object that embeds a timer pays for each byte of it, and the
 * encodings above and in the schemes need only two links and the deadline
 * (24 bytes on LP64, as engine.h promises): a field added here would be a
 * cost, not a need.
 */
_Static_assert(sizeof(struct spoke_timer) == 2 * sizeof(void *) + sizeof(uint64_t),
	       "struct spoke_timer is two links and a deadline (24 bytes on LP64)");

struct spoke_engine_ops {
	const char *name;
	size_t size; /* bytes of the scheme's engine struct (embeds struct spoke_engine first) */
	/* Validate params (already defaulted to zeros if NULL) and set up e. -EINVAL/-ENOMEM. */
	int (*init)(struct spoke_engine *e, const struct spoke_engine_params *p);
	/* Release what init allocated (not e itself). */
	void (*fini)(struct spoke_engine *e);
	/* Refuse a start before anything changes: 0 or -ERANGE/-ENOMEM. Optional. */
	int (*admit)(struct spoke_engine *e, uint64_t delay_ticks);
	void (*insert)(struct spoke_engine *e, struct spoke_timer *t);
	/*
	 * Optional, in place of admit + insert: the whole of
	 * spoke_engine_start() (re-arm, deadline, count, the end-of-time due
	 * push included), for a scheme whose admit would look up what its
	 * insert needs again (`lawn`).
	 */
	int (*start)(struct spoke_engine *e, struct spoke_timer *t, uint64_t delay_ticks);
	void (*remove)(struct spoke_engine *e, struct spoke_timer *t);
	uint64_t (*next_event)(struct spoke_engine *e);
	/* NULL for `hierarchical`, whose advance engine.c runs inline (advance_hier) */
	void (*collect)(struct spoke_engine *e);
};

/* The part of every engine that engine.c owns. Schemes embed it first. */
struct spoke_engine {
	const struct spoke_engine_ops *ops;
	uint64_t now;		   /* current tick */
	size_t count;		   /* pending timers, due list included */
	struct spoke_tlist due;	   /* collected at `now`, not yet fired */
	struct spoke_tlist firing; /* taken from `due` by the running advance */
	bool advancing;		   /* inside spoke_engine_advance() */
};

/* Put a collected timer on the due list (scheme side of collect()). */
static inline void spoke_due_push(struct spoke_engine *e, struct spoke_timer *t)
{
	spoke_tlist_push(&e->due, t);
}

/* The scheme tables, one per file in lib/. */
extern const struct spoke_engine_ops spoke_list_ops;
extern const struct spoke_engine_ops spoke_sorted_list_ops;
extern const struct spoke_engine_ops spoke_heap_ops;
extern const struct spoke_engine_ops spoke_wheel_ops;
extern const struct spoke_engine_ops spoke_hashed_sorted_ops;
extern const struct spoke_engine_ops spoke_hashed_ops;
extern const struct spoke_engine_ops spoke_hierarchical_ops;
extern const struct spoke_engine_ops spoke_lawn_ops;

#endif /* SPOKE_LIB_ENGINE_IMPL_H */
