/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * stage.h - a shard's stage: where a timer its engines expired waits out
 * the rest of its tick, so that it runs within the slack of its deadline
 * instead of at the end of the tick.
 *
 * Engines count whole ticks, so a wheel alone runs a timer at the end of its
 * tick: up to a tick late, nearly a whole tick at p99. The stage gives back
 * the part of the tick a timer did not ask for. A turn at time now advances
 * the engines to W, the first tick at or after now (one ahead of the last
 * tick that has passed); a timer they expire whose deadline is still ahead
 * goes on the stage.
 *
 * Window and slots: the stage holds the window (tick W - 1, tick W], kept as
 * the times start_ns and end_ns (the shard, which knows its epoch and tick,
 * computes them when it moves the window: spoke_stage_move), cut into
 * nslots slots of width_ns, the slack in effect:
 *
 *   slot of deadline d   (d - start_ns - 1) / width_ns    for d in the window
 *   end of slot j        min(start_ns + (j + 1) * width_ns, end_ns)
 *   nslots               ceil(tick / slack): 1 for a slack of a tick or
 *                        more, SPOKE_STAGE_DEFAULT_SLOTS for slack 0, at
 *                        most SPOKE_STAGE_MAX_SLOTS (create refuses a finer
 *                        slack: spoke_stage_slots answers 0)
 *
 * A take at time now takes every slot whose end has come (each deadline in
 * it has passed, none by more than the slack, plus the wake-up), and from
 * the first slot whose end has not come the timers whose deadline has
 * passed: a turn that happens anyway (a message, a poll) runs every due
 * timer, and the slack only spares wake-ups. Timers close together share a
 * slot, so a busy shard wakes at most nslots times a tick; a lone timer
 * wakes its shard once at the end of the window's first slot (where the
 * advance stages it) and, unless it is in that slot, again at the end of
 * its own. A take at a time past end_ns has taken every slot, and the
 * window can move on.
 *
 * The late list: a deadline at or before start_ns (the message of a start,
 * a reset or a periodic timer's re-arm waited past it) goes on `late`, which
 * the next take takes whole. A start or reset with delay 0 is not late: it is given the
 * next tick as its deadline (api_timers.c deadline_on), so it runs at the end of
 * the tick, never in the pass that armed it, and a callback that re-arms
 * itself with delay 0 runs once a tick.
 *
 * The staged mark: a slot and the late list are circular lists (lib/clist.h)
 * around their heads here, threaded through the timer's engine node, which
 * no engine holds meanwhile (so the node still reads pending); sp_deadline 0
 * marks it staged. No engine holds a node with deadline 0: the owner starts
 * nothing in an engine for the window's tick or earlier (spoke_stage_takes
 * says what goes on the stage instead), so every engine deadline is tick 1
 * or later. The node thus does not keep the deadline: a take asks the
 * caller for it (spoke_stage_deadline_fn). Bit j of `bits` is set while
 * slot j is not empty.
 *
 * Costs: put is a compare and, in the window, one division (a multiplication:
 * divide.h); remove, the
 * wake time and moving the window are O(1) (the first slot to end is a bit
 * scan); a take is O(slots it takes), plus one deadline read per timer of
 * the one slot it looks into. A tick with a million timers costs what it
 * costs the wheel. Memory: 65 list heads of 24 bytes (1.6 KB) per shard.
 *
 * Threads: the shard's owner only (shard.c), like its engines, so there are
 * no atomics and no fences here: as a synchronization table (protocol.h)
 * every pair of its functions would be marked, one thread. Callbacks the owner runs inline are on
 * the same thread and may cancel or reset a timer that a take has moved to its run list: such a
 * timer still counts in `count` and still reads staged, and spoke_stage_remove takes it off
 * whichever list holds it. Two fields are read elsewhere: width_ns, by spoke_stats from any thread
 * (it never changes after spoke_stage_init, which runs before the shard's threads start); and
 * count, only through the shard's `pending`, which the owner publishes.
 */
#ifndef SPOKE_PERCPU_STAGE_H
#define SPOKE_PERCPU_STAGE_H

#include "../lib/clist.h"
#include "divide.h"

#include <spoke/engine.h>

#include <stdbool.h>
#include <stdint.h>

#define SPOKE_STAGE_MAX_SLOTS	  64 /* one bit each in spoke_stage.bits */
#define SPOKE_STAGE_DEFAULT_SLOTS 4  /* slack_ns 0: tick / 4 */

struct spoke_stage {
	uint64_t tick;			/* the window is (tick - 1, tick] */
	uint64_t start_ns;		/* the time of tick - 1 (0 while tick is 0) */
	uint64_t end_ns;		/* the time of tick: the last deadline the window takes */
	uint64_t width_ns;		/* a slot's width: the slack in effect */
	struct spoke_divisor width_div; /* divides by width_ns (divide.h) */
	uint64_t bits;			/* bit j: slot j is not empty */
	uint64_t count;			/* timers on the stage, and on a take's run list */
	unsigned nslots;		/* 1 .. SPOKE_STAGE_MAX_SLOTS */
	struct spoke_timer slot[SPOKE_STAGE_MAX_SLOTS]; /* the slots' list heads */
	struct spoke_timer late; /* deadlines before the window: due at once */
};

/* The deadline (ns) of a staged timer: its node holds 0 (see above). */
typedef uint64_t spoke_stage_deadline_fn(struct spoke_timer *t);

/* a / b rounded up (b > 0), without the overflow of (a + b - 1) / b. */
static inline uint64_t spoke_div_round_up(uint64_t a, uint64_t b)
{
	return a / b + (a % b != 0);
}

/* Any thread: the slots of a tick for a slack (0: the default), or 0 if too many. */
static inline unsigned spoke_stage_slots(uint64_t tick_ns, uint64_t slack_ns)
{
	uint64_t n;

	if (slack_ns == 0)
		return SPOKE_STAGE_DEFAULT_SLOTS;
	if (slack_ns >= tick_ns)
		return 1;
	n = spoke_div_round_up(tick_ns, slack_ns);
	return n > SPOKE_STAGE_MAX_SLOTS ? 0 : (unsigned)n;
}

/* Move the window to (tick - 1, tick], whose times are start_ns and end_ns. */
static inline void spoke_stage_move(struct spoke_stage *st, uint64_t tick, uint64_t start_ns,
				    uint64_t end_ns)
{
	st->tick = tick;
	st->start_ns = start_ns;
	st->end_ns = end_ns;
}

/*
 * An empty stage for a slack create accepted (spoke_stage_slots > 0), its
 * window (-1, tick 0] ending at epoch_ns, the time of tick 0.
 */
static inline void spoke_stage_init(struct spoke_stage *st, uint64_t tick_ns, uint64_t slack_ns,
				    uint64_t epoch_ns)
{
	st->nslots = spoke_stage_slots(tick_ns, slack_ns);
	st->width_ns = spoke_div_round_up(tick_ns, st->nslots);
	st->width_div = spoke_divisor_of(st->width_ns);
	st->bits = 0;
	st->count = 0;
	for (unsigned j = 0; j < SPOKE_STAGE_MAX_SLOTS; j++)
		spoke_clist_init(&st->slot[j]);
	spoke_clist_init(&st->late);
	spoke_stage_move(st, 0, 0, epoch_ns);
}

/* Is t on a stage (or on a take's run list)? */
static inline bool spoke_stage_holds(const struct spoke_timer *t)
{
	return t->sp_link != NULL && t->sp_deadline == 0;
}

/* Does a deadline belong on the stage (up to the window's end), not in an engine? */
static inline bool spoke_stage_takes(const struct spoke_stage *st, uint64_t deadline_ns)
{
	return deadline_ns <= st->end_ns;
}

/* The slot of a deadline in the window (clamped, though callers pass one inside). */
static inline unsigned spoke_stage_slot_of(const struct spoke_stage *st, uint64_t deadline_ns)
{
	uint64_t j = deadline_ns > st->start_ns
			     ? spoke_divide(deadline_ns - st->start_ns - 1, &st->width_div)
			     : 0;

	return j < st->nslots ? (unsigned)j : st->nslots - 1;
}

static inline uint64_t spoke_stage_slot_end(const struct spoke_stage *st, unsigned j)
{
	uint64_t x;

	if (__builtin_add_overflow(st->start_ns, (uint64_t)(j + 1) * st->width_ns, &x) ||
	    x > st->end_ns)
		return st->end_ns;
	return x;
}

/*
 * Stage t for a deadline the stage takes: in its slot, or on the late list
 * if it is before the window.
 */
static inline void spoke_stage_put(struct spoke_stage *st, struct spoke_timer *t,
				   uint64_t deadline_ns)
{
	if (deadline_ns <= st->start_ns) {
		spoke_clist_append(&st->late, t);
	} else {
		unsigned j = spoke_stage_slot_of(st, deadline_ns);

		spoke_clist_append(&st->slot[j], t);
		st->bits |= UINT64_C(1) << j;
	}
	t->sp_deadline = 0;
	st->count++;
}

static inline bool spoke_stage_is_slot(const struct spoke_stage *st, const struct spoke_timer *t)
{
	return (uintptr_t)t - (uintptr_t)st->slot < sizeof(st->slot);
}

/* Take t off the stage (or off a take's run list). */
static inline void spoke_stage_remove(struct spoke_stage *st, struct spoke_timer *t)
{
	struct spoke_timer *emptied = spoke_clist_del(t);

	st->count--;
	if (emptied && spoke_stage_is_slot(st, emptied))
		st->bits &= ~(UINT64_C(1) << (emptied - st->slot));
}

/* When the stage next has work: 0 if the late list holds any, else the first slot's end. */
static inline uint64_t spoke_stage_wake_ns(const struct spoke_stage *st)
{
	if (!spoke_clist_empty(&st->late))
		return 0;
	return st->bits ? spoke_stage_slot_end(st, (unsigned)__builtin_ctzll(st->bits))
			: UINT64_MAX;
}

/*
 * From slot j, whose end has not come, move the timers whose deadline has
 * passed at now to the run list.
 */
static inline void spoke_stage_take_due_in_slot(struct spoke_stage *st, unsigned j, uint64_t now,
						struct spoke_timer *run,
						spoke_stage_deadline_fn *deadline)
{
	struct spoke_timer *t = st->slot[j].sp_next, *next;

	for (; t != &st->slot[j]; t = next) {
		next = t->sp_next;
		if (deadline(t) > now)
			continue;
		if (spoke_clist_del(t))
			st->bits &= ~(UINT64_C(1) << j);
		spoke_clist_append(run, t);
	}
}

/*
 * Move what is due at now to the end of the run list (an initialized clist
 * head of the caller's): the late list, the slots whose end has come, and
 * the due timers of the first slot whose end has not. The timers stay
 * counted and marked staged until the caller spoke_stage_remove()s each,
 * so what runs before that can still remove one; what is put meanwhile
 * waits for a later take.
 */
static inline void spoke_stage_take_due(struct spoke_stage *st, uint64_t now,
					struct spoke_timer *run, spoke_stage_deadline_fn *deadline)
{
	spoke_clist_splice_tail(&st->late, run);
	for (uint64_t bits = st->bits; bits; bits &= bits - 1) {
		unsigned j = (unsigned)__builtin_ctzll(bits);

		if (spoke_stage_slot_end(st, j) > now) {
			spoke_stage_take_due_in_slot(st, j, now, run, deadline);
			break;
		}
		spoke_clist_splice_tail(&st->slot[j], run);
		st->bits &= ~(UINT64_C(1) << j);
	}
}

#endif /* SPOKE_PERCPU_STAGE_H */
