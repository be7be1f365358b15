/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * engine_wheel.c - scheme 4 of Varghese & Lauck: the basic timing wheel.
 *
 * One slot per tick of the longest accepted delay, MaxInterval: the ring has
 * nslots = the next power of two > max_interval (default 65535 -> 65536
 * slots, 512 KiB of list heads; the maximum 2^28 -> 2^29 slots, 4 GiB of
 * calloc'ed address space, only the touched pages of which get backed), and
 * a deadline d lives in slot d & (nslots - 1). Every pending deadline lies
 * in (now, now + max_interval] and max_interval < nslots, so a slot never
 * holds two different deadlines: the slot IS the deadline, and the timers
 * in it all fire together.
 *
 * Start is O(1) (push), stop is O(1) (unlink, clear the slot's bitmap bit if
 * it emptied). A delay > max_interval is refused with -ERANGE before anything
 * changes (delay 0 counts as 1). The paper's per-tick step "move the index
 * one slot" becomes a bit scan: next_event() finds the first occupied slot
 * going round from (now + 1) & mask with the occupancy bitmap (wheel_slots.h)
 * and returns the tick of its visit - exactly the earliest deadline - so an
 * empty stretch costs a few word loads however long it is. collect() empties
 * the slot of `now` onto the due list, O(timers fired); ties fire in start
 * order.
 */
#include "wheel_slots.h"

#include <errno.h>

#define WHEEL_DEFAULT_MAX_INTERVAL_TICKS 65535u
#define WHEEL_LIMIT_MAX_INTERVAL_TICKS	 (1ull << 28)

struct wheel_engine {
	struct spoke_engine base;
	struct spoke_wheel_slots slots;
	uint64_t max_interval_ticks;
};

static struct wheel_engine *to_wheel(struct spoke_engine *e)
{
	return (struct wheel_engine *)e;
}

/* The smallest power of two > max_interval_ticks (<= 2^29 here). */
static size_t slots_for_interval(uint64_t max_interval_ticks)
{
	return (size_t)1 << (64 - __builtin_clzll(max_interval_ticks));
}

static int wheel_init(struct spoke_engine *e, const struct spoke_engine_params *p)
{
	struct wheel_engine *w = to_wheel(e);
	uint64_t max_interval_ticks = p->max_interval;

	if (max_interval_ticks == 0)
		max_interval_ticks = WHEEL_DEFAULT_MAX_INTERVAL_TICKS;
	if (max_interval_ticks > WHEEL_LIMIT_MAX_INTERVAL_TICKS)
		return -EINVAL;
	w->max_interval_ticks = max_interval_ticks;
	return spoke_slots_init(&w->slots, slots_for_interval(max_interval_ticks));
}

static void wheel_fini(struct spoke_engine *e)
{
	spoke_slots_fini(&to_wheel(e)->slots);
}

static int wheel_admit(struct spoke_engine *e, uint64_t delay_ticks)
{
	return delay_ticks > to_wheel(e)->max_interval_ticks ? -ERANGE : 0;
}

static void wheel_insert(struct spoke_engine *e, struct spoke_timer *t)
{
	struct wheel_engine *w = to_wheel(e);

	spoke_slots_push(&w->slots, spoke_slots_index(&w->slots, t->sp_deadline), t);
}

static void wheel_remove(struct spoke_engine *e, struct spoke_timer *t)
{
	spoke_slots_unlink(&to_wheel(e)->slots, t);
}

static uint64_t wheel_next_event(struct spoke_engine *e)
{
	struct wheel_engine *w = to_wheel(e);
	size_t j = spoke_slots_first_after(&w->slots, e->now);

	if (j == SPOKE_BITMAP_NONE)
		return UINT64_MAX;
	return spoke_slots_visit_tick(&w->slots, e->now, j);
}

static void wheel_collect(struct spoke_engine *e)
{
	struct wheel_engine *w = to_wheel(e);
	struct spoke_tlist *slot = &w->slots.slot[spoke_slots_index(&w->slots, e->now)];

	/* The slot holds one deadline, now's; newest first, so due ends oldest first. */
	while (!spoke_tlist_empty(slot))
		spoke_slots_to_due(&w->slots, e, slot->first);
}

const struct spoke_engine_ops spoke_wheel_ops = {
	.name = "wheel",
	.size = sizeof(struct wheel_engine),
	.init = wheel_init,
	.fini = wheel_fini,
	.admit = wheel_admit,
	.insert = wheel_insert,
	.remove = wheel_remove,
	.next_event = wheel_next_event,
	.collect = wheel_collect,
};
