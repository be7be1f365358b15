/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * peers.h - the subjects of `spoke-bench peers` behind one table of
 * operations (as the engines are behind theirs in lib/engine_impl.h).
 *
 * A peer holds `ntimers` timer slots, named by index 0..ntimers-1, and
 * counts the expiry notifications it handled in peer->fired. The workloads
 * (bench_peers.c) drive every peer through these calls only:
 *
 *   open     create the timer facility and its ntimers idle slots (untimed)
 *   start    arm slot i to expire delay_ticks from now (slot i is idle)
 *   stop     disarm slot i (pending in W1); 0 or a negative errno
 *   advance  PEER_TICKS only: move the peer's clock forward, handling every
 *            expiry due on the way (engines and the heap count ticks; the
 *            event loops read the bench's fake clock, peers_clock_*)
 *   drain    PEER_REAL_TIME only: handle what is due now; with `wait`,
 *            first sleep until something is due (at most PEER_WAIT_NS)
 *   close    tear everything down (untimed)
 *
 * A peer that cannot hold ntimers timers because a process limit stops it
 * (open files, pending signals) fails open() with PEER_CAP and says which
 * limit, at how many timers, in out->error.
 *
 * Threading: one peer belongs to the thread that opened it (the forked
 * run's main thread).
 */
#ifndef SPOKE_BENCH_PEERS_H
#define SPOKE_BENCH_PEERS_H

#include "bench_util.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#define PEER_CAP     (-EDQUOT)		 /* open(): a process limit was reached */
#define PEER_WAIT_NS UINT64_C(100000000) /* drain(wait): longest sleep */
#define NS_PER_MS    UINT64_C(1000000)

enum peer_clock {
	PEER_TICKS,	/* W2 steps the peer's own (or fed) clock: advance() */
	PEER_REAL_TIME, /* the kernel's or the service's clock runs: drain() */
};

struct peer_setup {
	size_t ntimers;	  /* slots 0..ntimers-1 */
	uint64_t tick_ns; /* one tick, for peers that count time in ns or ms */
	bool fed_clock;	  /* the event loops: run on the fake clock (W2) */
};

struct peer {
	const struct peer_ops *ops;
	size_t fired;	  /* expiry notifications handled */
	uint64_t tick_ns; /* from the setup */
	void *slots;	  /* ntimers slots of the back end's kind (peer_new) */
};

struct peer_ops {
	const char *name;   /* row subject */
	const char *scheme; /* spoke engines: the engine scheme */
	enum peer_clock clock;
	bool spoke_engine; /* a candidate for "spoke's best engine" */
	bool kernel;	   /* timers live in the kernel: W3 adds the slab growth */
	const char *how;   /* one line for the header: how it is driven */
	int (*open)(struct peer **pp, const struct peer_ops *ops, const struct peer_setup *ps,
		    struct bench_sample *out);
	void (*close)(struct peer *p);
	int (*start)(struct peer *p, size_t i, uint64_t delay_ticks);
	int (*stop)(struct peer *p, size_t i);
	int (*advance)(struct peer *p, uint64_t ticks);
	int (*drain)(struct peer *p, bool wait);
};

/*
 * The start of every back end's open: a zeroed peer of `size` bytes (the
 * back end's struct, struct peer first) with its header set from ops and
 * ps, and its ps->ntimers slots of slot_size bytes each, zeroed. NULL, with
 * out->error said, when memory runs out.
 */
static inline void *peer_new(size_t size, size_t slot_size, const struct peer_ops *ops,
			     const struct peer_setup *ps, struct bench_sample *out)
{
	struct peer *p = calloc(1, size);

	if (!p) {
		bench_fail(out, -ENOMEM, "no memory");
		return NULL;
	}
	*p = (struct peer){.ops = ops, .tick_ns = ps->tick_ns};
	p->slots = calloc(ps->ntimers, slot_size);
	if (!p->slots) {
		free(p);
		bench_fail(out, -ENOMEM, "no memory for %zu timers", ps->ntimers);
		return NULL;
	}
	return p;
}

/* The end of every back end's close (after it let go of what the slots hold). */
static inline void peer_free(struct peer *p)
{
	free(p->slots);
	free(p);
}

/* peers_spoke.c */
extern const struct peer_ops peer_hierarchical, peer_hashed, peer_lawn, peer_service;
/* peers_heap.c */
extern const struct peer_ops peer_binheap;
/* peers_loops.c */
extern const struct peer_ops peer_libevent, peer_libuv;
/* peers_kernel.c */
extern const struct peer_ops peer_timerfd, peer_posix_timer;

/*
 * The clock (peers_loops.c). This executable defines clock_gettime(): while
 * the fake clock runs, CLOCK_MONOTONIC and its variants read it, so
 * libevent and libuv (which call clock_gettime through their PLT) see the
 * time the bench sets; otherwise every call goes to the C library's.
 * peers_real_now_ns() always reads the real CLOCK_MONOTONIC: the bench's
 * own timing. Main thread of a forked run only (start/advance/stop).
 */
uint64_t peers_real_now_ns(void);
void peers_clock_fake_start(void); /* frozen at the real time of now */
void peers_clock_fake_advance(uint64_t ns);
void peers_clock_fake_stop(void);

#endif /* SPOKE_BENCH_PEERS_H */
