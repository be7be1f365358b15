/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * spoke/engine.h - the single-threaded timer schemes of Varghese & Lauck
 * ("Hashed and Hierarchical Timing Wheels", schemes 1-7) and Lev-Libfeld's
 * Timer Lawn, behind one interface.
 *
 * Threading: an engine is not thread-safe. One thread at a time may call any
 * function on one engine (the service in spoke.h gives each shard its own).
 *
 * Time is counted in integer ticks. A timer started with delay D at time N
 * has the deadline N + max(D, 1) (saturating at UINT64_MAX) and fires when
 * spoke_engine_advance() moves the clock onto that tick, never before.
 *
 * Timers are intrusive: the caller owns each struct spoke_timer (embed it in
 * its own object and find that object back with container_of in the expiry
 * function); starting a timer allocates nothing, except that `heap` grows its
 * array (doubling) and `lawn` its hash table (doubling) and its pool of TTL
 * queues (in chunks) as needed, so a start there may return -ENOMEM.
 * Timers due at the same tick fire in an unspecified order, except that
 * `lawn` fires the timers of one TTL in the order they were started.
 *
 * spoke_engine_free() forgets pending timers without touching them: call
 * spoke_timer_init() on a timer before using it with another engine.
 */
#ifndef SPOKE_ENGINE_H
#define SPOKE_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <spoke/version.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * One timer. All fields are private to the engine that holds the timer; use
 * spoke_timer_init() once before the first start and the functions below.
 * 24 bytes on LP64 (16 on ILP32): two pointer-sized links and the deadline.
 * Each scheme encodes in these what it needs (a back link, a heap position,
 * its list neighbours), so the embedding object pays for nothing more. The
 * timer is pending exactly while sp_link is not NULL: every scheme keeps it
 * set while it holds the timer, and every way out leaves it NULL.
 */
struct spoke_timer {
	struct spoke_timer *sp_next; /* list link (meaning depends on the scheme) */
	void *sp_link;		     /* back link or heap position; NULL iff not pending */
	uint64_t sp_deadline;	     /* absolute tick at which it fires */
};

struct spoke_engine;

/* The expiry action. Runs on the thread that called spoke_engine_advance(). */
typedef void spoke_expire_fn(void *ctx, struct spoke_timer *t);

/*
 * Tunables. Zero in any field means "the scheme's default"; a field that the
 * chosen scheme does not have is ignored. Out-of-range values give -EINVAL.
 */
struct spoke_engine_params {
	/* hierarchical: log2 of the slots per level (1..16), default 10 */
	unsigned level_bits;
	/*
	 * hierarchical: number of levels (1..64), default enough to cover 64
	 * bits (7 with 10 bits). Fewer levels keep far timers on an overflow
	 * list; more than 64 bits need are not allocated.
	 */
	unsigned levels;
	/* hashed, hashed-sorted: buckets, a power of two (1..2^24), default 4096 */
	size_t table_size;
	/* wheel: longest accepted delay in ticks (1..2^28), default 65535 */
	uint64_t max_interval;
	/* heap: initial capacity in timers (1..2^32, grows as needed), default 64 */
	size_t initial_capacity;
};

/* NULL-terminated list of the scheme names, in the paper's order. */
const char *const *spoke_engine_schemes(void);

/*
 * Create an engine of the named scheme at tick 0. params NULL = defaults.
 * -EINVAL: NULL out or scheme, unknown scheme, or bad params; -ENOMEM.
 * *out is set only on success.
 */
int spoke_engine_new(struct spoke_engine **out, const char *scheme,
		     const struct spoke_engine_params *params);

/* Free the engine (NULL is a no-op). Pending timers are forgotten (see above). */
void spoke_engine_free(struct spoke_engine *e);

/* The scheme's name, as given to spoke_engine_new(). */
const char *spoke_engine_scheme(const struct spoke_engine *e);

/* Prepare a timer for its first use (not pending). */
void spoke_timer_init(struct spoke_timer *t);

/*
 * Arm t to fire at now + max(delay_ticks, 1). A pending timer is re-armed.
 * -ERANGE: `wheel` and delay > max_interval (t unchanged); -ENOMEM: `heap`
 * or `lawn` could not grow (t unchanged; room is reserved before a pending t
 * is unlinked, so even a re-arm, which needs none in `heap`, can get it).
 */
int spoke_engine_start(struct spoke_engine *e, struct spoke_timer *t, uint64_t delay_ticks);

/* Disarm t: 0 if it was pending, -ENOENT if not. */
int spoke_engine_stop(struct spoke_engine *e, struct spoke_timer *t);

static inline bool spoke_timer_pending(const struct spoke_timer *t)
{
	return t->sp_link != NULL;
}

/* Absolute tick at which a pending timer fires (undefined if not pending). */
static inline uint64_t spoke_timer_deadline(const struct spoke_timer *t)
{
	return t->sp_deadline;
}

/*
 * Move the clock ticks forward. Every timer whose deadline is reached fires
 * exactly once, in deadline order, with spoke_engine_now() equal to its
 * deadline while fn runs; t is no longer pending then. fn may start and stop
 * any timer of this engine; one started with delay 0 fires at the next tick.
 * The cost depends on the timers fired and slots passed, not on ticks.
 * Returns the number of timers fired. Called from inside fn (re-entered) it
 * does nothing and returns 0.
 */
size_t spoke_engine_advance(struct spoke_engine *e, uint64_t ticks, spoke_expire_fn *fn, void *ctx);

/* Current tick. */
uint64_t spoke_engine_now(const struct spoke_engine *e);

/*
 * Ticks until the engine next has something to do: never later than the
 * earliest deadline, never 0 while timers are pending, UINT64_MAX when none.
 * advance(next()) in a loop reaches each deadline in a bounded number of
 * steps (one per wheel level it cascades through).
 */
uint64_t spoke_engine_next(const struct spoke_engine *e);

/* Number of pending timers. */
size_t spoke_engine_count(const struct spoke_engine *e);

#ifdef __cplusplus
}
#endif

#endif /* SPOKE_ENGINE_H */
