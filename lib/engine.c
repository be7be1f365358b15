/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * engine.c - the scheme-independent half of every engine: names, the clock,
 * the count, deadline arithmetic and the advance loop.
 * See engine_impl.h for the contract a scheme fills in.
 */
#include "engine_hierarchical.h"
#include "engine_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const struct spoke_engine_ops *const scheme_table[] = {
	&spoke_list_ops,	  &spoke_sorted_list_ops, &spoke_heap_ops,	   &spoke_wheel_ops,
	&spoke_hashed_sorted_ops, &spoke_hashed_ops,	  &spoke_hierarchical_ops, &spoke_lawn_ops,
};

#define NSCHEMES (sizeof(scheme_table) / sizeof(scheme_table[0]))

static const char *const scheme_names[NSCHEMES + 1] = {
	"list",	  "sorted-list",  "heap", "wheel", "hashed-sorted",
	"hashed", "hierarchical", "lawn", NULL,
};

const char *const *spoke_engine_schemes(void)
{
	return scheme_names;
}

static const struct spoke_engine_ops *find_scheme(const char *name)
{
	for (size_t i = 0; i < NSCHEMES; i++)
		if (strcmp(scheme_table[i]->name, name) == 0)
			return scheme_table[i];
	return NULL;
}

int spoke_engine_new(struct spoke_engine **out, const char *scheme,
		     const struct spoke_engine_params *params)
{
	static const struct spoke_engine_params defaults;
	const struct spoke_engine_ops *ops;
	struct spoke_engine *e;
	int err;

	if (!out || !scheme)
		return -EINVAL;
	ops = find_scheme(scheme);
	if (!ops)
		return -EINVAL;
	e = calloc(1, ops->size);
	if (!e)
		return -ENOMEM;
	e->ops = ops;
	spoke_tlist_init(&e->due);
	spoke_tlist_init(&e->firing);
	err = ops->init(e, params ? params : &defaults);
	if (err) {
		free(e);
		return err;
	}
	*out = e;
	return 0;
}

void spoke_engine_free(struct spoke_engine *e)
{
	if (!e)
		return;
	e->ops->fini(e);
	free(e);
}

const char *spoke_engine_scheme(const struct spoke_engine *e)
{
	return e->ops->name;
}

void spoke_timer_init(struct spoke_timer *t)
{
	memset(t, 0, sizeof(*t));
}

/*
 * Take a pending timer out of wherever it is: the due (or firing) list or
 * the scheme, told apart by its deadline (engine_impl.h). Both leave
 * sp_link NULL, which is what makes t no longer pending. `hierarchical`,
 * the scheme most callers run, is reached inline rather than through the
 * ops table (engine_hierarchical.h), and there both are the same unlink;
 * every other scheme out of line, so that the fast path makes no call that
 * needs a frame.
 */
static __attribute__((noinline)) void unlink_other(struct spoke_engine *e, struct spoke_timer *t)
{
	if (t->sp_deadline <= e->now)
		spoke_tlist_del(t);
	else
		e->ops->remove(e, t);
}

static inline void unlink_pending(struct spoke_engine *e, struct spoke_timer *t)
{
	if (__builtin_expect(e->ops == &spoke_hierarchical_ops, 1))
		spoke_hier_remove(spoke_to_hier(e), t);
	else
		unlink_other(e, t);
	e->count--;
}

static inline uint64_t deadline_after(uint64_t now, uint64_t delay_ticks)
{
	uint64_t d;

	delay_ticks += delay_ticks == 0; /* max(delay, 1) without a branch */
	if (__builtin_add_overflow(now, delay_ticks, &d))
		return UINT64_MAX;
	return d;
}

/* A start that admit() (if any) accepted: nothing can fail from here. */
static inline int start_admitted(struct spoke_engine *e, struct spoke_timer *t,
				 uint64_t delay_ticks)
{
	uint64_t d;

	if (spoke_timer_pending(t))
		unlink_pending(e, t);
	d = deadline_after(e->now, delay_ticks);
	t->sp_deadline = d;
	e->count++;
	/*
	 * The clock saturates: once now == UINT64_MAX no later tick exists, so
	 * a new timer is due at once and fires in the next advance call.
	 */
	if (__builtin_expect(d == e->now, 0))
		spoke_due_push(e, t);
	else if (__builtin_expect(e->ops == &spoke_hierarchical_ops, 1))
		spoke_hier_insert(spoke_to_hier(e), t);
	else
		e->ops->insert(e, t);
	return 0;
}

/* Every scheme but `hierarchical` and those with their own start: admit(), then insert(). */
static __attribute__((noinline)) int start_other(struct spoke_engine *e, struct spoke_timer *t,
						 uint64_t delay_ticks)
{
	if (e->ops->admit) {
		int err = e->ops->admit(e, delay_ticks);

		if (err)
			return err;
	}
	return start_admitted(e, t, delay_ticks);
}

/*
 * The slow half of every start: a re-arm, the end of time, every scheme
 * but `hierarchical` that has no start of its own.
 */
static __attribute__((noinline)) int start_slow(struct spoke_engine *e, struct spoke_timer *t,
						uint64_t delay_ticks)
{
	if (e->ops == &spoke_hierarchical_ops)
		return start_admitted(e, t, delay_ticks);
	return start_other(e, t, delay_ticks);
}

/*
 * The common case, `hierarchical`, a timer not pending and a delay in [1,
 * UINT64_MAX - now], with no call on its path (so no stack frame): there
 * the deadline is now + delay with no max() and no saturation, and the one
 * test that it lies after now (a sum that does not wrap) tells the case.
 * Everything else, a delay of 0 included, is start_slow's.
 */
int spoke_engine_start(struct spoke_engine *e, struct spoke_timer *t, uint64_t delay_ticks)
{
	if (__builtin_expect(e->ops == &spoke_hierarchical_ops && !spoke_timer_pending(t), 1)) {
		uint64_t now = e->now, d = now + delay_ticks;

		if (__builtin_expect(d > now, 1)) {
			t->sp_deadline = d;
			e->count++;
			return spoke_hier_place_x(spoke_to_hier(e), t, d ^ now);
		}
	}
	if (e->ops->start) /* a jump: `lawn` */
		return e->ops->start(e, t, delay_ticks);
	return start_slow(e, t, delay_ticks);
}

static __attribute__((noinline)) int stop_slow(struct spoke_engine *e, struct spoke_timer *t)
{
	unlink_pending(e, t);
	return 0;
}

/* As start: `hierarchical` with no call on its path, the rest out of line. */
int spoke_engine_stop(struct spoke_engine *e, struct spoke_timer *t)
{
	if (!spoke_timer_pending(t))
		return -ENOENT;
	if (__builtin_expect(e->ops == &spoke_hierarchical_ops, 1)) {
		spoke_hier_remove(spoke_to_hier(e), t);
		e->count--;
		return 0;
	}
	return stop_slow(e, t);
}

/*
 * Fire the timers on e->firing, one at a time. Firing from a private list:
 * at the end of time (now == UINT64_MAX) a timer armed by fn goes straight
 * onto e->due, and must wait for the next call instead of firing in this
 * pass. Timers on e->firing stay pending (deadline <= now) and fn may still
 * stop them; next() answers 1 while any are left. The pop clears sp_link:
 * t is no longer pending when fn runs.
 */
static inline size_t fire_firing(struct spoke_engine *e, spoke_expire_fn *fn, void *ctx)
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

/* Fire what collect() put on the due list (see engine_impl.h). */
static size_t fire_due(struct spoke_engine *e, spoke_expire_fn *fn, void *ctx)
{
	spoke_tlist_move(&e->firing, &e->due);
	return fire_firing(e, fn, ctx);
}

static size_t fire_run(struct spoke_engine *e, spoke_expire_fn *fn, void *ctx);

/*
 * One step of `hierarchical`'s advance: the first occupied slot, the
 * earliest event (engine_hierarchical.h), with the clock allowed up to
 * limit. A whole slot due by then is fired at its deadline, straight from
 * the slot; any other whose first tick is due is emptied at that tick (a
 * whole one too, when its deadline is past the limit: the clock may not
 * pass a slot's first tick with the slot still in place): into a sorted
 * run when it is a level-1 slot within the limit and no run is under way,
 * else by a cascade, after which what that makes due is fired. False if
 * the slot's first tick is past the limit.
 */
static inline __attribute__((always_inline)) bool hier_step(struct spoke_engine *e, size_t slot,
							    uint64_t limit, spoke_expire_fn *fn,
							    void *ctx, size_t *fired)
{
	struct hier_engine *h = spoke_to_hier(e);
	struct spoke_timer *first = h->slots[slot].first;
	uint64_t ev;

	if (spoke_hier_slot_whole(h, slot) && first->sp_deadline <= limit) {
		e->now = first->sp_deadline;
		spoke_hier_take_whole(h, slot, &e->firing);
		*fired += fire_firing(e, fn, ctx);
		return true;
	}
	ev = spoke_hier_slot_tick(h, slot);
	if (ev > limit)
		return false;
	e->now = ev;
	if (spoke_tlist_empty(&h->run) && spoke_hier_run_fits(h, slot, ev, limit) &&
	    spoke_hier_take_run(h, slot, limit)) {
		*fired += fire_run(e, fn, ctx);
		return true;
	}
	spoke_hier_cascade(h, slot);
	spoke_tlist_move(&e->firing, &e->due);
	*fired += fire_firing(e, fn, ctx);
	return true;
}

/*
 * Fire h->run member by member, each at its deadline (engine_hierarchical.h,
 * "Sorted runs"). A slot that an expiry function filled meanwhile is
 * stepped first if its first tick comes no later than the next member (so
 * the clock never passes a slot's first tick with the slot in place).
 * Out of line: once per run, and hier_step, which it calls, calls it.
 */
static __attribute__((noinline)) size_t fire_run(struct spoke_engine *e, spoke_expire_fn *fn,
						 void *ctx)
{
	struct hier_engine *h = spoke_to_hier(e);
	struct spoke_timer *t;
	size_t fired = 0;

	while ((t = h->run.first) != NULL) {
		if (__builtin_expect(!spoke_hier_run_alone(h), 0)) {
			size_t slot = spoke_hier_first_slot(h);

			if (slot != SPOKE_BITMAP_NONE &&
			    hier_step(e, slot, t->sp_deadline, fn, ctx, &fired))
				continue;
		}
		e->now = t->sp_deadline;
		spoke_tlist_del(t);
		e->count--;
		fired++;
		fn(ctx, t);
	}
	return fired;
}

/*
 * `hierarchical`'s advance: advance_ops() (below) for every other scheme,
 * with the scheme's steps inline (hier_step). With the wheels empty, the
 * overflow list is visited at its tick.
 */
static size_t advance_hier(struct spoke_engine *e, uint64_t target, spoke_expire_fn *fn, void *ctx)
{
	struct hier_engine *h = spoke_to_hier(e);
	size_t fired = 0;

	while (e->count > 0) {
		size_t slot = spoke_hier_first_slot(h);

		if (__builtin_expect(slot == SPOKE_BITMAP_NONE, 0)) {
			uint64_t ev = h->overflow_visit;

			/* nothing ahead, or the end of time: no tick left to collect */
			if (ev > target || ev == UINT64_MAX || e->now == UINT64_MAX)
				break;
			if (ev > e->now) /* else stale-low: visit at now */
				e->now = ev;
			spoke_hier_visit_overflow(h);
			fired += fire_due(e, fn, ctx);
			continue;
		}
		if (!hier_step(e, slot, target, fn, ctx, &fired))
			break;
	}
	return fired;
}

/* Every other scheme's advance: next_event() and collect() through its ops table. */
static size_t advance_ops(struct spoke_engine *e, uint64_t target, spoke_expire_fn *fn, void *ctx)
{
	size_t fired = 0;

	while (e->count > 0) {
		uint64_t ev = e->ops->next_event(e);

		if (ev > target || ev <= e->now)
			break;
		e->now = ev;
		e->ops->collect(e);
		fired += fire_due(e, fn, ctx);
	}
	return fired;
}

size_t spoke_engine_advance(struct spoke_engine *e, uint64_t ticks, spoke_expire_fn *fn, void *ctx)
{
	uint64_t target = deadline_after(e->now, ticks);
	size_t fired;

	if (ticks == 0 || e->advancing)
		return 0; /* re-entered from fn: refused, see engine.h */
	e->advancing = true;
	fired = fire_due(e, fn, ctx); /* only at the end of time, see start */
	if (e->ops == &spoke_hierarchical_ops)
		fired += advance_hier(e, target, fn, ctx);
	else
		fired += advance_ops(e, target, fn, ctx);
	e->now = target;
	e->advancing = false;
	return fired;
}

uint64_t spoke_engine_now(const struct spoke_engine *e)
{
	return e->now;
}

uint64_t spoke_engine_next(const struct spoke_engine *e)
{
	/*
	 * Logically const: next_event() may refresh a cached minimum that
	 * a stop left stale, which changes no observable state.
	 */
	struct spoke_engine *me = (struct spoke_engine *)e;
	uint64_t ev;

	if (e->count == 0)
		return UINT64_MAX;
	if (!spoke_tlist_empty(&e->due) || !spoke_tlist_empty(&e->firing))
		return 1;
	ev = e->ops->next_event(me);
	return ev > e->now ? ev - e->now : 1;
}

size_t spoke_engine_count(const struct spoke_engine *e)
{
	return e->count;
}
