/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * engine_impl.h - what every scheme in lib/ fills in, and the helpers
 * lib/engine.c and the schemes share.
 *
 * The split of work. engine.c owns the public calls: argument checks, the
 * clock, the re-entry guard of advance, next() and count(); it knows no
 * scheme by name and reaches each one only through its table of operations
 * (struct spoke_engine_ops). A scheme stores timers. The plain way is five
 * operations, around which engine.c runs the start, the stop and the
 * advance loop:
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
 *   admit(delay)    optional: refuse a start before anything changes.
 *
 * A scheme whose hot paths pay for this indirection (a second lookup, a
 * call per tick it could skip) fills in the whole of an operation instead,
 * from the helpers below, and engine.c jumps to it: start (in place of
 * admit + insert), stop (in place of the due-list test + remove) and
 * advance (in place of the next_event + collect loop). `hierarchical` fills
 * in all three, `lawn` start and advance.
 *
 * The advance loop pops the due list one timer at a time and calls the
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
 * pushes timers due at the tick it runs at, and a start pushes one directly
 * only when the deadline equals now (now == UINT64_MAX, the end of time:
 * spoke_arm()); the clock never goes back. Both hold whenever code outside
 * collect() runs, i.e. in every start and stop, also from inside an expiry
 * function, so spoke_unlink_pending() knows where a pending timer is from
 * its deadline alone. A scheme with its own advance and stop may keep
 * timers due at now elsewhere while it fires them (`hierarchical`'s sorted
 * run, engine_hierarchical.c), as long as its stop finds them there.
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
	/* Release what init allocated (not e itself). Optional. */
	void (*fini)(struct spoke_engine *e);
	/* Refuse a start before anything changes: 0 or -ERANGE/-ENOMEM. Optional. */
	int (*admit)(struct spoke_engine *e, uint64_t delay_ticks);
	void (*insert)(struct spoke_engine *e, struct spoke_timer *t);
	void (*remove)(struct spoke_engine *e, struct spoke_timer *t);
	uint64_t (*next_event)(struct spoke_engine *e);
	void (*collect)(struct spoke_engine *e); /* unused when advance is set */
	/*
	 * Optional, the whole of an operation (see the top). start: all of
	 * spoke_engine_start() (re-arm, deadline, count, spoke_arm()'s due
	 * push). stop: t is pending, wherever it is; unlink it, count it
	 * out, return 0. advance: all of spoke_engine_advance(), built as
	 * spoke_advance_with(e, ticks, fn, ctx, the scheme's loop).
	 */
	int (*start)(struct spoke_engine *e, struct spoke_timer *t, uint64_t delay_ticks);
	int (*stop)(struct spoke_engine *e, struct spoke_timer *t);
	size_t (*advance)(struct spoke_engine *e, uint64_t ticks, spoke_expire_fn *fn, void *ctx);
};

/* The part of every engine that engine.c owns. Schemes embed it first. */
struct spoke_engine {
	/*
	 * The start, stop and advance this engine runs: its scheme's own, or
	 * engine.c's plain ones, chosen by spoke_engine_new(), so that each
	 * public call is one load and one jump.
	 */
	int (*start)(struct spoke_engine *e, struct spoke_timer *t, uint64_t delay_ticks);
	int (*stop)(struct spoke_engine *e, struct spoke_timer *t);
	size_t (*advance)(struct spoke_engine *e, uint64_t ticks, spoke_expire_fn *fn, void *ctx);
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

/* The deadline of a start at now: now + max(delay, 1), saturating at UINT64_MAX. */
static inline uint64_t spoke_deadline_after(uint64_t now, uint64_t delay_ticks)
{
	uint64_t d;

	delay_ticks += delay_ticks == 0; /* max(delay, 1) without a branch */
	if (__builtin_add_overflow(now, delay_ticks, &d))
		return UINT64_MAX;
	return d;
}

/*
 * Count t, not pending, in with deadline d (spoke_deadline_after). The
 * clock saturates: once now == UINT64_MAX no later tick exists, so a timer
 * armed then is due at once and goes on the due list, to fire in the next
 * advance call; false then. True: the scheme is to insert t.
 */
static inline bool spoke_arm(struct spoke_engine *e, struct spoke_timer *t, uint64_t d)
{
	t->sp_deadline = d;
	e->count++;
	if (__builtin_expect(d == e->now, 0)) {
		spoke_due_push(e, t);
		return false;
	}
	return true;
}

/*
 * Take a pending timer out of wherever it is, for a scheme whose remove()
 * knows only its own structure: the due (or firing) list or the scheme,
 * told apart by its deadline (see the top). Both leave sp_link NULL, which
 * is what makes t no longer pending.
 */
static inline void spoke_unlink_pending(struct spoke_engine *e, struct spoke_timer *t)
{
	if (t->sp_deadline <= e->now)
		spoke_tlist_del(t);
	else
		e->ops->remove(e, t);
	e->count--;
}

/*
 * Fire the timers on e->firing, one at a time. Firing from a private list:
 * at the end of time (now == UINT64_MAX) a timer armed by fn goes straight
 * onto e->due, and must wait for the next call instead of firing in this
 * pass. Timers on e->firing stay pending (deadline <= now) and fn may still
 * stop them; next() answers 1 while any are left. The pop clears sp_link:
 * t is no longer pending when fn runs.
 */
static inline size_t spoke_fire_firing(struct spoke_engine *e, spoke_expire_fn *fn, void *ctx)
{
	struct spoke_timer *t;
	size_t fired = 0;

	while ((t = spoke_tlist_pop(&e->firing)) != NULL) {
		e->count--;
		fired++;
		fn(ctx, t);
	}
	return fired;
}

/* Fire what is on the due list (collected, or armed at the end of time). */
static inline size_t spoke_fire_due(struct spoke_engine *e, spoke_expire_fn *fn, void *ctx)
{
	spoke_tlist_move(&e->firing, &e->due);
	return spoke_fire_firing(e, fn, ctx);
}

/*
 * The loop of an advance: called with the due list fired and timers
 * pending, the clock at or before target; fires every timer due up to
 * target, each at its deadline (the clock set to it while fn runs), and
 * leaves the clock anywhere up to target. Returns how many fired.
 */
typedef size_t spoke_advance_loop_fn(struct spoke_engine *e, uint64_t target, spoke_expire_fn *fn,
				     void *ctx);

/*
 * spoke_engine_advance() around a scheme's loop (engine.c's, or a
 * scheme's own advance): the target, the re-entry guard (engine.h), the
 * due list first (only at the end of time: spoke_arm()), and the clock at
 * the target after. Inline, so that each advance is one function with its
 * loop in it, one stack frame.
 */
static inline __attribute__((always_inline)) size_t
spoke_advance_with(struct spoke_engine *e, uint64_t ticks, spoke_expire_fn *fn, void *ctx,
		   spoke_advance_loop_fn *loop)
{
	uint64_t target = spoke_deadline_after(e->now, ticks);
	size_t fired;

	if (ticks == 0 || e->advancing)
		return 0; /* re-entered from fn: refused */
	e->advancing = true;
	fired = spoke_fire_due(e, fn, ctx);
	if (e->count > 0)
		fired += loop(e, target, fn, ctx);
	e->now = target;
	e->advancing = false;
	return fired;
}

/*
 * Whether an advance by ticks has nothing to do: not re-entered, nothing on
 * the due list, and its target before work_tick, the first tick at which
 * the scheme has anything to fire or to cascade. If so the clock moves to
 * the target (true), and the scheme's advance returns 0 with no more work.
 */
static inline bool spoke_advance_idle(struct spoke_engine *e, uint64_t ticks, uint64_t work_tick)
{
	uint64_t target = spoke_deadline_after(e->now, ticks);

	if (ticks == 0 || e->advancing || !spoke_tlist_empty(&e->due) || work_tick <= target)
		return false;
	e->now = target;
	return true;
}

/*
 * Fire t, a timer the scheme has just taken out (not pending), at now: a
 * scheme's advance that fires a lone due timer with no due list.
 */
static inline size_t spoke_fire_one(struct spoke_engine *e, struct spoke_timer *t,
				    spoke_expire_fn *fn, void *ctx)
{
	e->count--;
	fn(ctx, t);
	return 1;
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
