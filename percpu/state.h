/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * state.h - the one atomic word per timer that arbitrates start, cancel,
 * reset and expiry.
 *
 *   bits 63..32  generation: bumped when the handle is freed; an id carries
 *                the generation it was issued with, so a stale id never
 *                matches a later timer in the same slot. Generation 0 is in
 *                no id: a handle freed with its last generation wraps to 0
 *                and is spent, never handed out again (arena.c), so no
 *                (generation, slot) pair ever names two timers.
 *   bit   31     FRESH    a start from another thread that the owner has not
 *                counted yet: set with the start message, cleared (and
 *                counted in `started`) when the owner takes it, so a start
 *                is counted once however many messages follow it
 *   bit   30     ORPHAN   the timer is over, but a reset still holds WRITING:
 *                that reset frees the handle when it clears WRITING
 *   bit   29     WRITING  a reset is storing deadline_ns: one from another
 *                thread (api_timers.c reset_once), or the owner's own (reset_direct);
 *                the owner fires nothing meanwhile
 *   bits 28..21  owner shard (SPOKE_MAX_SHARDS = 256)
 *   bit   20     MOVABLE  started SPOKE_MOVABLE: a rescue may run it on another
 *                spoke thread than its owner's (rescue.c); fixed for the
 *                generation
 *   bits 19..9   sequence, bumped by every reset (closes ABA windows)
 *   bits  8..7   kind: one-shot, periodic, TTL
 *   bit   6      WAITERS  a cancel_sync sleeps on the low word (futex)
 *   bit   5      STOP     periodic: no run after the current one
 *   bit   4      RESET    deadline_ns holds a deadline the owner must apply;
 *                set by the owner on an ARMED | WRITING word it meets due: the
 *                writing reset must send it as a message (protocol.h
 *                writer_publish)
 *   bit   3      INBOX    the handle is queued on its owner's inbox
 *   bits  2..0   status
 *
 * The status transitions, each a function named for the thread that makes
 * it, with which of them may race, are drawn once, in protocol.h.
 *
 * A handle is freed only while nobody holds WRITING: the reset holding it has
 * yet to store deadline_ns, and once the slot is reused that store would land
 * in someone else's timer. So the side that ends a generation while WRITING
 * is set (spoke_st_retired) leaves the word CANCELLED | ORPHAN, and the reset
 * frees the handle as it publishes (protocol.h writer_publish).
 *
 * The side whose compare-and-swap wins decides: a cancel that moves ARMED or
 * DISPATCHED to CANCELLED returns 0 and the callback never runs; a runner
 * that moves DISPATCHED to RUNNING means the cancel gets -ENOENT. A reset
 * that wins on DISPATCHED (RESET) sends the run back: the runner turns the
 * word into ARMED | INBOX and posts it to the owner (protocol.h
 * runner_undispatch). A message to the owner (start, reset, cancel, or a run
 * a pool worker hands back because the shard was attached: DISPATCHED |
 * INBOX) is sent only by the thread that sets INBOX; a second change while INBOX is set rides on
 * the message already queued, since the owner acts on the state it reads when it takes the message,
 * not on what the message said. Everything a thread other than the owner needs (owner shard, kind)
 * is in this word, so no other field is read racily.
 */
#ifndef SPOKE_PERCPU_STATE_H
#define SPOKE_PERCPU_STATE_H

#include <stdint.h>

enum spoke_status {
	SPOKE_ST_FREE = 0,
	SPOKE_ST_ARMED = 1,
	SPOKE_ST_DISPATCHED = 2,
	SPOKE_ST_RUNNING = 3,
	SPOKE_ST_CANCELLED = 4,
	SPOKE_ST_AUX = 5,      /* not a timer: a periodic timer's second slot (service.h) */
	SPOKE_ST_AUX_FREE = 6, /* a freed second slot: handed out only as one again (arena.c) */
};

#define SPOKE_ST_STATUS_MASK 0x7ull
#define SPOKE_ST_INBOX	     (1ull << 3)
#define SPOKE_ST_RESET	     (1ull << 4)
#define SPOKE_ST_STOP	     (1ull << 5)
#define SPOKE_ST_WAITERS     (1ull << 6)
#define SPOKE_ST_KIND_SHIFT  7
#define SPOKE_ST_KIND_MASK   (0x3ull << SPOKE_ST_KIND_SHIFT)
#define SPOKE_ST_SEQ_SHIFT   9
#define SPOKE_ST_SEQ_MASK    (0x7ffull << SPOKE_ST_SEQ_SHIFT)
#define SPOKE_ST_MOVABLE     (1ull << 20)
#define SPOKE_ST_SHARD_SHIFT 21
#define SPOKE_ST_SHARD_MASK  (0xffull << SPOKE_ST_SHARD_SHIFT)
#define SPOKE_ST_WRITING     (1ull << 29) /* a reset holds the right to store deadline_ns */
#define SPOKE_ST_ORPHAN	     (1ull << 30) /* over; the WRITING reset frees it */
#define SPOKE_ST_FRESH	     (1ull << 31) /* foreign start, not counted in `started` yet */
#define SPOKE_ST_GEN_SHIFT   32

static inline unsigned spoke_st_status(uint64_t s)
{
	return (unsigned)(s & SPOKE_ST_STATUS_MASK);
}

static inline uint64_t spoke_st_with_status(uint64_t s, unsigned status)
{
	return (s & ~SPOKE_ST_STATUS_MASK) | status;
}

static inline uint32_t spoke_st_gen(uint64_t s)
{
	return (uint32_t)(s >> SPOKE_ST_GEN_SHIFT);
}

static inline unsigned spoke_st_kind(uint64_t s)
{
	return (unsigned)((s & SPOKE_ST_KIND_MASK) >> SPOKE_ST_KIND_SHIFT);
}

static inline unsigned spoke_st_shard(uint64_t s)
{
	return (unsigned)((s & SPOKE_ST_SHARD_MASK) >> SPOKE_ST_SHARD_SHIFT);
}

static inline uint64_t spoke_st_bump_seq(uint64_t s)
{
	return (s & ~SPOKE_ST_SEQ_MASK) | ((s + (1ull << SPOKE_ST_SEQ_SHIFT)) & SPOKE_ST_SEQ_MASK);
}

/* A fresh ARMED word for generation gen. */
static inline uint64_t spoke_st_armed(uint32_t gen, unsigned kind, unsigned shard)
{
	return ((uint64_t)gen << SPOKE_ST_GEN_SHIFT) | ((uint64_t)shard << SPOKE_ST_SHARD_SHIFT) |
	       ((uint64_t)kind << SPOKE_ST_KIND_SHIFT) | SPOKE_ST_ARMED;
}

/* FREE with the next generation; 0 after the last one: spent (see the top). */
static inline uint64_t spoke_st_freed(uint64_t s)
{
	uint32_t gen = spoke_st_gen(s) + 1;

	return (uint64_t)gen << SPOKE_ST_GEN_SHIFT;
}

/*
 * The word that ends the generation of word s: FREE with the next
 * generation, or, while a reset holds WRITING, CANCELLED | ORPHAN (same
 * generation, so that reset still recognises it; no WAITERS: nothing runs).
 */
static inline uint64_t spoke_st_retired(uint64_t s)
{
	if (s & SPOKE_ST_WRITING)
		return (spoke_st_with_status(s, SPOKE_ST_CANCELLED) | SPOKE_ST_ORPHAN) &
		       ~(SPOKE_ST_WAITERS | SPOKE_ST_INBOX | SPOKE_ST_RESET | SPOKE_ST_STOP |
			 SPOKE_ST_FRESH);
	return spoke_st_freed(s);
}

#endif /* SPOKE_PERCPU_STATE_H */
