/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * peers.h - the subjects of `spoke-bench peers` behind one table of
 * operations (as the engines are behind theirs in lib/engine_impl.h).
 *
 * A peer holds `ntimers` timer slots, named by index 0..ntimers-1, and
 * counts the expiry notifications it handled in peer->fired. The workloads
 * (bench_peers.c) drive every peer through these calls only:
 *
 *   open     create the timer facility and its ntimers idle slots (untimed);
 *            with setup.foreign, owned by another thread than the caller's
 *            (only peers with a foreign path: reset-foreign)
 *   settle   foreign only: wait until the owner took every start (untimed)
 *   start    arm slot i to expire delay_ticks from now (slot i is idle)
 *   stop     disarm slot i (pending in W1); 0 or a negative errno
 *   reset    move pending slot i's expiry to delay_ticks from now, the way
 *            this facility does it best (the engines: stop + start; libuv:
 *            uv_timer_again; the service: spoke_reset); 0 or -errno
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
 * run's main thread); a foreign one is driven by that thread but owned by
 * a thread of its own, which may handle its expiries (`fired` is then
 * counted atomically, and read after close).
 */
#ifndef SPOKE_BENCH_PEERS_H
#define SPOKE_BENCH_PEERS_H

#include "bench_util.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#define PEER_CAP     (-EDQUOT)	       /* open(): a process limit was reached */
#define PEER_WAIT_NS (100 * NS_PER_MS) /* drain(wait): longest sleep */

/* The workloads (bench_peers.c says what each measures). */
enum peer_workload { W1, W2_ADVANCE, W2_TICK, W3, RESET_OWN, RESET_FOREIGN, NWORKLOADS };

#define PEER_WL(w) (1u << (w))
#define PEER_WL_DEFAULT                                                                            \
	(PEER_WL(W1) | PEER_WL(W2_ADVANCE) | PEER_WL(W2_TICK) | PEER_WL(W3) | PEER_WL(RESET_OWN))

enum peer_clock {
	PEER_TICKS,	/* W2 steps the peer's own (or fed) clock: advance() */
	PEER_REAL_TIME, /* the kernel's or the service's clock runs: drain() */
};

struct peer_setup {
	size_t ntimers;	  /* slots 0..ntimers-1 */
	uint64_t tick_ns; /* one tick, for peers that count time in ns or ms */
	bool fed_clock;	  /* the event loops: run on the fake clock (W2) */
	bool foreign;	  /* owned by a thread of its own, not the caller's (reset-foreign) */
};

struct peer {
	const struct peer_ops *ops;
	size_t fired;	  /* expiry notifications handled */
	size_t nslots;	  /* from the setup's ntimers */
	uint64_t tick_ns; /* from the setup */
	void *slots;	  /* ntimers slots of the back end's kind (peer_new) */
};

struct peer_ops {
	const char *name;   /* row subject */
	const char *scheme; /* spoke engines: the engine scheme */
	enum peer_clock clock;
	bool spoke_engine;  /* a candidate for "spoke's best engine" */
	bool kernel;	    /* timers live in the kernel: W3 adds the slab growth */
	unsigned workloads; /* PEER_WL() bits of what it runs; 0: PEER_WL_DEFAULT */
	const char *how;    /* one line for the header: how it is driven */
	int (*open)(struct peer **pp, const struct peer_ops *ops, const struct peer_setup *ps,
		    struct bench_sample *out);
	void (*close)(struct peer *p);
	int (*start)(struct peer *p, size_t i, uint64_t delay_ticks);
	int (*stop)(struct peer *p, size_t i);
	int (*reset)(struct peer *p, size_t i, uint64_t delay_ticks);
	int (*settle)(struct peer *p); /* foreign peers; NULL: nothing to wait for */
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
	*p = (struct peer){.ops = ops, .nslots = ps->ntimers, .tick_ns = ps->tick_ns};
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

typedef enum peer_workload workload_id;

/* One run's subject: a peer, a workload, a size. */
struct cell {
	const struct peer_ops *ops;
	uint64_t n;
	uint64_t rt_tick_ns;  /* real-time peers' W2 tick */
	double floor_bytes;   /* memory floor: buffer size */
	uint64_t floor_loads; /* memory floor: at least this many loads */
	workload_id w;
};

#define RT_MARGIN_NS (2 * NS_PER_MS) /* real-time W2-advance sleeps this past the span */

static inline bool real_time(const struct peer_ops *ops)
{
	return ops->clock == PEER_REAL_TIME;
}

/* peers_run.c: a run of each workload, and of the memory floor (bench_run_fn). */
extern bench_run_fn *const peers_workload_runs[NWORKLOADS];
int peers_run_floor(void *arg, unsigned run, struct bench_sample *out);

/* peers_spoke.c */
extern const struct peer_ops peer_hierarchical, peer_hashed, peer_lawn, peer_engine_clock,
	peer_service;
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
