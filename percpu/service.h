/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * service.h - the internal structures of the timer service (percpu/).
 *
 * Who owns what:
 *
 *   struct spoke_handle  one per timer (two for a periodic timer: struct
 *                        spoke_periodic), in a per-thread arena (arena.c).
 *                        Its 64-bit state word (state.h) is the one field
 *                        any thread may change at any time (protocol.h);
 *                        deadline_ns is stored by the reset holding WRITING
 *                        (or the owner's own reset); the engine node and a
 *                        periodic timer's base_ns belong to the owner shard
 *                        (base_ns to the runner from RUNNING until it
 *                        stores the next deadline, after the CAS that ends
 *                        the run, before the re-arm); fn, arg and the
 *                        periodic part are written by the starting thread
 *                        before the handle is published. Any thread may
 *                        read these others of a handle it does not own
 *                        (spoke_remaining, spoke_dump: spoke_handle_peek),
 *                        and keeps what it read only if the generation is
 *                        unchanged after.
 *   struct shard         one per CPU: its engines belong to its owner thread
 *                        (managed thread, or the attached server thread);
 *                        any thread enqueues handles on its inbox (a
 *                        liburcu wfcqueue: wait-free enqueue, the node inside
 *                        the handle, so a cross-core message allocates nothing).
 *   struct arena         one per thread that calls the service: the region
 *                        its handles live in (64 MiB of address space, made
 *                        read/write as needed), a private free list of
 *                        handles, plus a wfcqueue on which other threads
 *                        return the handles they free.
 *   struct pool_queue    one per shard with workers of its own (fewer when
 *                        there are fewer workers than shards): the shard's
 *                        expired handles, and the eventcount its workers
 *                        sleep on (pool.c).
 *   struct pool_worker   one per callback thread, serving one pool queue
 *                        (its home) and stealing from its neighbours'; and
 *                        a slot per spare a starved queue may add (pool.c).
 *
 * A handle's queue node is in at most one queue at a time: the owner's
 * inbox only while the state word has SPOKE_ST_INBOX, its shard's pool
 * queue only while DISPATCHED without INBOX, an arena return queue only
 * while FREE.
 */
#ifndef SPOKE_PERCPU_SERVICE_H
#define SPOKE_PERCPU_SERVICE_H

#include <spoke/engine.h>
#include <spoke/spoke.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lateness.h"
#include "stage.h"
#include "state.h"
#include "urcu_wfcq.h"

#define SPOKE_CACHELINE	  64
#define SPOKE_ARENA_SHIFT 20 /* id bits 0..19: slot, 20..31: arena */
#define SPOKE_ARENAS	  4096
#define SPOKE_ARENA_SLOTS (1u << SPOKE_ARENA_SHIFT) /* per arena; slot 0: its header */

enum spoke_kind {
	SPOKE_KIND_ONESHOT = 0,
	SPOKE_KIND_PERIODIC = 1,
	SPOKE_KIND_TTL = 2,
};

/*
 * What a periodic timer needs beyond a one-shot. It lives in a second handle
 * slot of its own (state SPOKE_ST_AUX, so no id ever acts on it), which the
 * timer's handle points at in place of the caller's arg: a one-shot, by far
 * the common timer, pays nothing for it. base_ns, the deadline of the run
 * due or running, has the owner of `node` as its owner, the runner from
 * RUNNING until it stores the next one (run.c finish_run: after the CAS
 * that ends the run, before the re-arm or its message).
 *
 * A slot that has been a second slot stays one (arena.c keeps them on a
 * list of their own): spoke_remaining and spoke_dump read period_ns and
 * base_ns through a periodic timer's handle from any thread, and with a
 * stale id they may read a second slot that its timer has given up
 * meanwhile. Reused as a timer, the slot's `node` would be written with
 * plain stores by an engine while that atomic read is under way, a data
 * race; reused as a second slot, it is only ever written by the atomic
 * stores below, and the reader throws away what it read once it sees the
 * generation moved on.
 */
struct spoke_periodic {
	/*
	 * Atomic (relaxed) because spoke_remaining and spoke_self read them
	 * from any thread, and spoke_set_period writes period_ns from the
	 * owner or the runner; each still has one writer at a time.
	 */
	_Atomic uint64_t period_ns;
	_Atomic uint64_t base_ns;
	void *arg; /* the caller's */
};

struct spoke_handle {
	union {
		struct spoke_timer node;   /* a timer: owner: position in an engine */
		struct spoke_periodic per; /* SPOKE_ST_AUX: its periodic timer's */
	};
	_Atomic uint64_t state;	    /* state.h */
	struct cds_wfcq_node qnode; /* inbox / pool / arena return queue */
	spoke_fn *fn;
	void *arg; /* the caller's; a periodic timer: its SPOKE_ST_AUX handle */
	/*
	 * The deadline asked by the last start or reset. A one-shot is never
	 * reset once it runs (RUNNING: -ENOENT), so there it is also the
	 * deadline of the run, which lateness is measured from.
	 */
	_Atomic uint64_t deadline_ns;
};

/* A cache line per timer on LP64: 64 bytes per timer (docs/design/service.md, Memory per timer). */
_Static_assert(sizeof(void *) != 8 || sizeof(struct spoke_handle) == 64,
	       "a timer handle is 64 bytes on LP64");

/* The periodic part of h (kind SPOKE_KIND_PERIODIC). */
static inline struct spoke_periodic *spoke_periodic_of(const struct spoke_handle *h)
{
	return &((struct spoke_handle *)h->arg)->per;
}

/*
 * Any thread, for a handle it does not own (spoke_remaining, spoke_dump):
 * what h's generation gen was started with, or false if the slot has moved
 * on. fn and arg are stored with release by the start (api_timers.c start_handle),
 * so a value of a later generation read here makes the second look at the
 * word see that generation. Memory stays mapped until destroy, so reading
 * through a stale pointer to a periodic part is safe; its values count only
 * if the generation is still gen after they were read.
 */
static inline bool spoke_handle_peek(struct spoke_handle *h, uint32_t gen, spoke_fn **fn,
				     void **arg)
{
	*fn = __atomic_load_n(&h->fn, __ATOMIC_ACQUIRE);
	*arg = __atomic_load_n(&h->arg, __ATOMIC_ACQUIRE);
	return spoke_st_gen(atomic_load_explicit(&h->state, memory_order_acquire)) == gen;
}

static inline uint64_t spoke_periodic_base(const struct spoke_periodic *per)
{
	return atomic_load_explicit(&per->base_ns, memory_order_relaxed);
}

static inline void spoke_periodic_set_base(struct spoke_periodic *per, uint64_t d)
{
	atomic_store_explicit(&per->base_ns, d, memory_order_relaxed);
}

/* Owner: h (word st) will run next at d; a periodic timer keeps its phase from there. */
static inline void spoke_handle_set_base(struct spoke_handle *h, uint64_t st, uint64_t d)
{
	if (spoke_st_kind(st) == SPOKE_KIND_PERIODIC)
		spoke_periodic_set_base(spoke_periodic_of(h), d);
}

/*
 * Where an arena's handles live (arena.c): one region of SPOKE_ARENA_SLOTS
 * slots of SPOKE_SLOT_BYTES (64 MiB), aligned to its size, so the address
 * of slot k is base + 64 k and a handle finds the region by masking its own
 * address. Slot 0 is the region's header, the one place that names the
 * arena, and in no id: a handle stores neither its arena nor its id.
 */
#define SPOKE_SLOT_BYTES   64u
#define SPOKE_REGION_BYTES ((size_t)SPOKE_ARENA_SLOTS * SPOKE_SLOT_BYTES)
/* Slots made read/write at a time, as the arena's fresh slots reach them (512 KiB). */
#define SPOKE_REGION_STEP_SLOTS 8192u
#define SPOKE_REGION_STEPS	(SPOKE_ARENA_SLOTS / SPOKE_REGION_STEP_SLOTS)
_Static_assert(sizeof(struct spoke_handle) <= SPOKE_SLOT_BYTES, "a handle fits its slot");
_Static_assert(SPOKE_ARENA_SLOTS % SPOKE_REGION_STEP_SLOTS == 0, "steps tile a region");

struct arena_region {
	struct arena *arena;
	uint32_t slot_id_base; /* arena index << SPOKE_ARENA_SHIFT */
};
_Static_assert(sizeof(struct arena_region) <= SPOKE_SLOT_BYTES, "the header fits slot 0");

static inline struct arena_region *spoke_region_of(const struct spoke_handle *h)
{
	return (struct arena_region *)((uintptr_t)h & ~(uintptr_t)(SPOKE_REGION_BYTES - 1));
}

/* The arena << 20 | slot part of h's ids. */
static inline uint32_t spoke_handle_slot_id(const struct spoke_handle *h)
{
	const struct arena_region *r = spoke_region_of(h);

	return r->slot_id_base | (uint32_t)(((uintptr_t)h - (uintptr_t)r) / SPOKE_SLOT_BYTES);
}

struct arena {
	struct spoke *s;
	unsigned index;
	struct arena *home; /* the thread's first arena (itself if first); immutable */
	/* Home only: the token (arena.c) of the live thread that uses it and its spills; 0 = none.
	 */
	_Atomic uintptr_t owner;
	_Atomic unsigned in_call; /* home only: calls of its thread in progress (guard.h) */
	/* Owner thread only. */
	struct arena *spill;		 /* home: further arenas of the same thread, a chain */
	struct spoke_handle *free_list;	 /* linked through qnode.next */
	struct spoke_handle *aux_list;	 /* freed second slots (AUX_FREE), likewise */
	size_t fresh;			 /* slots below it handed out (1: none; 0: no region) */
	struct cds_wfcq_head taken_head; /* spliced from ret, not yet on free_list */
	struct cds_wfcq_tail taken_tail;

	/* Owner only: steps given back to the kernel, and their reuse (arena.c arena_trim). */
	uint64_t trimmed[SPOKE_REGION_STEPS / 64]; /* bit k: step k, no slot of it in use */
	uint32_t trimmed_gen[SPOKE_REGION_STEPS];  /* step k's first generation from now on */
	size_t refill, refill_end;		   /* slots of a trimmed step handed out again */
	uint32_t refill_gen;
	uint64_t grown_ns; /* when the arena last took a step to hand out: fresh, or trimmed */
	size_t last_taken; /* handles the last take_returned left on the free list */
	/* Owner only, read by spoke_stats: places taken in each shard's inbox, not used yet. */
	_Atomic uint16_t inbox_places[SPOKE_MAX_SHARDS];
	/* Other threads return freed handles here (wfcqueue, MPSC). */
	struct cds_wfcq_head ret_head __attribute__((aligned(SPOKE_CACHELINE)));
	struct cds_wfcq_tail ret_tail __attribute__((aligned(SPOKE_CACHELINE)));
	/*
	 * Read by any thread resolving an id (own line: no false sharing with
	 * ret_tail, which every returning thread writes, nor with the owner's
	 * fields). base is set once, before ready first leaves 0; slots below
	 * ready are read/write, published with release (arena.c).
	 */
	char *base __attribute__((aligned(SPOKE_CACHELINE))); /* the region; NULL: none yet */
	_Atomic size_t ready;
};

/* Slot k of a's region (k < a->ready). */
static inline struct spoke_handle *spoke_arena_slot(const struct arena *a, size_t k)
{
	return (struct spoke_handle *)(void *)(a->base + k * SPOKE_SLOT_BYTES);
}

/*
 * Who drives a shard. MANAGED -> ATTACHING -> ATTACHED (spoke_attach: the
 * managed thread is joined in between), ATTACHED -> DETACHING -> MANAGED
 * (spoke_detach, or the attached thread's exit: a new managed thread is
 * started in between, and waits for MANAGED before its first turn), ATTACHED -> UNOWNED (the
 * attached thread exited and no thread could be started) -> ATTACHING,
 * any -> STOPPING (destroy). Only MANAGED and UNOWNED can be attached, so a
 * shard never has two owners. Pool workers hand back, rather than run, the
 * callbacks of a shard in the modes of spoke_any_takes_back_runs().
 */
enum shard_mode {
	SHARD_MANAGED = 0,	/* driven by its own thread */
	SHARD_ATTACHING,	/* spoke_attach() asked the thread to stop */
	SHARD_ATTACHING_NOWAIT, /* ... from a pool callback: it need not wait for the pool */
	SHARD_ATTACHED,		/* driven by a server thread through spoke_poll */
	SHARD_DETACHING,	/* the attached thread handed it to a new managed thread */
	SHARD_UNOWNED,		/* nobody drives it: waits for the next spoke_attach */
	SHARD_STOPPING,		/* spoke_destroy() */
};

/*
 * The shard's callbacks must not start on the pool: it is attached, being
 * attached, unowned, or being detached (its thread may still fail to start,
 * and then it stays attached).
 */
static inline bool spoke_any_takes_back_runs(int mode)
{
	return mode == SHARD_ATTACHING || mode == SHARD_ATTACHING_NOWAIT ||
	       mode == SHARD_ATTACHED || mode == SHARD_UNOWNED || mode == SHARD_DETACHING;
}

/*
 * Counters come in two copies: `own` is bumped only by the shard's owner
 * thread (a plain load and store, no locked instruction on the hot path),
 * `remote` by any other thread (pool workers, resetting threads) with an
 * atomic add. spoke_stats adds them up. Runs have no counter here: each is
 * counted once, in `late` (lateness.h), whose total is spoke_stats' `fired`.
 */
enum shard_counter {
	CTR_STARTED,
	CTR_CANCELLED,
	CTR_RESET,
	CTR_REFUSED, /* starts refused: the inbox was at its limit (remote only) */
	CTR_COUNT,
};

struct shard_counters {
	_Atomic uint64_t own[CTR_COUNT];
	_Atomic uint64_t remote[CTR_COUNT] __attribute__((aligned(SPOKE_CACHELINE)));
	_Atomic uint64_t inbox_hwm, max_late_ns;
	/* Rescues of the shard (rescue.c), by the rescuers: how many, and the longest absence. */
	_Atomic uint64_t rescues, max_absence_ns;
	struct spoke_late_hist late __attribute__((aligned(SPOKE_CACHELINE))); /* lateness.h */
	/*
	 * A rescuer's runs of the shard's movable timers in an instance without
	 * a pool, recorded apart (rescue.c), so that the owner, the one other
	 * thread that runs them, records in `late` with plain stores.
	 */
	_Atomic uint64_t max_late_moved_ns;
	struct spoke_late_hist late_moved __attribute__((aligned(SPOKE_CACHELINE)));
};

struct shard {
	struct spoke *s;
	unsigned index;
	int cpu;
	uint64_t tick_ns;
	struct spoke_divisor tick_div; /* divides by tick_ns (divide.h) */
	uint64_t epoch_ns;	       /* tick 0 of the engines */
	struct pool_queue *pool;       /* where its expiries go (pool.c); NULL: no pool */
	/* Owner only. */
	struct spoke_engine *wheel;	 /* one-shot and periodic timers */
	struct spoke_engine *lawn;	 /* TTL timers, if this shard takes Lawn buckets */
	struct cds_wfcq_head taken_head; /* spliced from the inbox, not yet handled */
	struct cds_wfcq_tail taken_tail;
	uint64_t clock_ns;	/* the time the current turn runs at */
	int fired_inline;	/* callbacks run inline in this turn */
	unsigned took_messages; /* messages taken in this turn */
	bool in_turn;		/* inside spoke_owner_turn (callbacks run inline) */
	/* The managed thread's watch of its pool queue for a starved head (pool.c). */
	uint64_t pool_taken_seen, pool_seen_ns;
	/*
	 * Rescue (rescue.c). The holder's: a rescuer's turn (rescuing), the
	 * movable runs it keeps to run once it has let go, and the runs it left
	 * to the owner (the owner's next turn runs them first). The owner's:
	 * turning (a managed thread is busy on the shard; rescuers read it) and
	 * the start of its last turn.
	 */
	bool rescue_on;		  /* rescue_after_ns is not 0: constant */
	uint64_t rescue_after_ns; /* in effect here: at least two ticks (rescue.c); constant */
	bool rescuing;
	struct spoke_handle *rescued_runs;
	struct spoke_handle *owner_runs;
	_Atomic uint32_t turning;
	_Atomic uint64_t owner_turn_ns;
	_Atomic uint64_t rescued_ns; /* when a rescuer last took a turn of it */
	/* The stage: timers of the current tick, by slack-wide slot (stage.h). */
	struct spoke_stage stage;
	/*
	 * Timers in the engines and on the stage after the owner's last
	 * change: written by the owner every busy turn, read only by
	 * spoke_stats, so it sits among the owner's own lines, not on the
	 * wake line every sender reads.
	 */
	_Atomic uint64_t pending;
	/* Producers: the inbox tail and the sleeper's wake word. */
	struct cds_wfcq_head inbox_head __attribute__((aligned(SPOKE_CACHELINE)));
	struct cds_wfcq_tail inbox_tail __attribute__((aligned(SPOKE_CACHELINE)));
	/*
	 * On the tail's line, which every producer writes anyway: the messages
	 * queued and not yet handled, plus the places starting threads have
	 * taken for their next starts and not used yet (spoke_any_admit; the
	 * owner subtracts what it handled once a turn), and the limit a
	 * foreign start is refused at (UINT64_MAX: none; set before the
	 * shard's threads start, then read only).
	 */
	_Atomic uint64_t inbox_queued;
	uint64_t inbox_limit;
	_Atomic uint32_t wake_seq __attribute__((aligned(SPOKE_CACHELINE)));
	_Atomic uint64_t sleep_until_ns; /* owner asleep until then; 0 = awake */
	_Atomic uint32_t long_sleep;	 /* ... for longer than two ticks */
	_Atomic int wake_fd;		 /* attached: eventfd of spoke_wake_fd, or -1 */
	/*
	 * Rescue (rescue.c), on the line producers already read and the owner
	 * reads on its fast path. due_word: whether a rescuer holds the shard
	 * (SPOKE_DUE_RESCUED) and when the shard next has work (the rest; the
	 * holder's turn sets it, any start or message lowers it; SPOKE_DUE_NONE:
	 * nothing; 0 for good with rescue off), in one word so that the owner's
	 * start learns both from one load. rescue_gen: a futex word the owner
	 * waits on for the hand-back, bumped at each. owner_arena: the home
	 * arena of the thread attached to the shard (its calls' count; NULL
	 * while managed).
	 */
	_Atomic uint64_t due_word;
	_Atomic uint32_t rescue_gen;
	struct arena *_Atomic owner_arena;
	int wake_fd_made;	   /* that eventfd while detached (closed by destroy), or -1 */
	_Atomic int mode;	   /* enum shard_mode */
	_Atomic int attach_fenced; /* the attach's heavy fence is done: spoke_any_attach */
	pthread_t thread;
	bool thread_running;
	struct shard_counters ctr;
};

/* A spare worker's slot (pool.c says who moves it from which to which). */
enum { SPARE_FREE, SPARE_STARTING, SPARE_RUNNING, SPARE_LEFT };

/*
 * busy_shard: the shard (index + 1; 0 = none) whose callback the worker is
 * about to run or running, written by the worker only, read by that
 * shard's managed thread while an attach waits (pool.c worker_run). One
 * cache line per worker (the array is aligned to one: spoke_pool_start), so
 * no worker writes a line another worker reads. The first nworkers are the
 * pool's own; the nspares after them are slots for spares (spare_state).
 */
struct pool_worker {
	union {
		struct {
			struct spoke *s;
			pthread_t thread;
			bool running;  /* a worker of the pool's own, started */
			unsigned home; /* index of its pool queue in spoke.pools */
			_Atomic uint32_t busy_shard;
			_Atomic int spare_state; /* SPARE_*: pool.c */
			/* Its own: when it last looked at its shards, and its next look planned. */
			uint64_t looked_ns, look_at_ns;
		};
		char line[SPOKE_CACHELINE];
	};
};

/*
 * A callback pool queue: the shards it serves (one, unless there are fewer
 * workers than shards) enqueue (wait-free), its workers and stealing
 * neighbours take one handle at a time under the queue's consumer lock
 * (liburcu's cds_wfcq_dequeue_lock; held for one non-blocking dequeue,
 * never on a start, reset or cancel path). Its workers sleep on its
 * eventcount (wake_seq, sleepers). No line of it is written by the shards
 * or workers of another queue, except by a worker that steals (pool.c).
 */
struct pool_queue {
	struct cds_wfcq_head head __attribute__((aligned(SPOKE_CACHELINE)));
	/* Handles taken so far, under the consumer lock: the starvation watch's progress mark. */
	_Atomic uint64_t taken;
	struct cds_wfcq_tail tail __attribute__((aligned(SPOKE_CACHELINE)));
	_Atomic uint32_t wake_seq __attribute__((aligned(SPOKE_CACHELINE)));
	_Atomic uint32_t sleepers;
	/* Its sleeping workers' wake-up for watching their shards (rescue.c); UINT64_MAX: none. */
	_Atomic uint64_t watch_until_ns;
	unsigned index; /* in spoke.pools */
};

struct spoke {
	struct spoke_config cfg;
	uint64_t serial; /* tells instances apart in thread-local caches */
	unsigned nshards;
	struct shard *shards;
	unsigned nlawn;
	unsigned *lawn_shard; /* shards that take Lawn buckets */
	unsigned ncpus;
	unsigned *cpu_shard; /* CPU -> shard for spoke_start */
	unsigned nworkers;
	unsigned nspares;	     /* slots for spares after the nworkers (pool.c) */
	struct pool_worker *workers; /* spoke_zalloc_lines */
	unsigned npools;	     /* pool queues: one per shard, or per worker if fewer */
	struct pool_queue *pools;    /* spoke_zalloc_lines */
	_Atomic int stopping;	     /* spoke_destroy() has begun */
	_Atomic unsigned entering;   /* first calls of threads looking up their arena (guard.h) */
	bool asym_fence;	     /* membarrier registered: platform.c */
	/* Every thread spoke starts gets the scheduling and CPU affinity of the thread
	 * that called spoke_create, whoever starts it later (platform.c spoke_thread_attr_init). */
	pthread_attr_t thread_attr; /* the affinity */
	bool thread_attr_live;
	int sched_policy; /* applied by each thread as it starts: spoke_thread_adopt_sched */
	struct sched_param sched_param;
	bool forked; /* inherited by a child of fork(): its threads are not there (arena.c) */
	/* arena.c calls it as a thread exits (spoke_arena_key_create); api_lifecycle.c sets it. */
	void (*thread_exit_hook)(struct arena *home);
	_Atomic int pool_stop;
	/* Spares running now, and started so far (pool.c). */
	_Atomic unsigned spares;
	_Atomic uint64_t spares_started;
	pthread_key_t arena_key;
	bool arena_key_live;
	struct spoke *live_next; /* arena.c: instances whose key exists (under its lock) */
	_Atomic unsigned narenas;
	_Atomic(struct arena *) arenas[SPOKE_ARENAS];
};

/*
 * The handle an id names, or NULL if it names none (then the id is stale or
 * forged). Any thread: reads only slots below the arena's published `ready`.
 * Inline: every cancel and reset resolves an id.
 */
static inline struct spoke_handle *spoke_handle_lookup(struct spoke *s, spoke_id id)
{
	uint32_t slot_id = (uint32_t)id, slot = slot_id & (SPOKE_ARENA_SLOTS - 1);
	struct arena *a;

	if (spoke_st_gen(id) == 0 || slot == 0)
		return NULL; /* slot 0: the region's header, in no id */
	a = atomic_load_explicit(&s->arenas[slot_id >> SPOKE_ARENA_SHIFT], memory_order_acquire);
	if (!a || slot >= atomic_load_explicit(&a->ready, memory_order_acquire))
		return NULL;
	return spoke_arena_slot(a, slot);
}

/* arena.c. Any thread (its own arenas; any handle for release and lookup): */
bool spoke_instance_live(uint64_t serial);
struct spoke_handle *spoke_handle_alloc_slow(struct arena *home);
struct spoke_handle *spoke_handle_alloc_aux(struct arena *home);
void spoke_handle_release(struct spoke *s, struct spoke_handle *h, uint64_t old);
void spoke_arenas_each(struct spoke *s, void (*fn)(struct spoke_handle *h, uint64_t st, void *ctx),
		       void *ctx);
/* arena.c. Create and destroy: */
int spoke_arena_key_create(struct spoke *s, void (*on_exit)(struct arena *home));
void spoke_arena_key_delete(struct spoke *s);
void spoke_arenas_free(struct spoke *s);
void spoke_arenas_release_pending(struct spoke *s, spoke_fn *release);
uint64_t spoke_arenas_places(struct spoke *s, unsigned shard);

/* Inbox places a starting thread takes at a time (spoke_any_admit). */
#define SPOKE_INBOX_PLACES 64

/* Owner of the list: its head, taken off it (linked through qnode.next); NULL if empty. */
static inline struct spoke_handle *spoke_handle_list_pop(struct spoke_handle **list)
{
	struct spoke_handle *h = *list;

	if (h)
		*list = (struct spoke_handle *)h->qnode.next;
	return h;
}

/* Owner of a: the head of its private free list, taken off it; NULL if empty. */
static inline struct spoke_handle *spoke_arena_pop_free(struct arena *a)
{
	return spoke_handle_list_pop(&a->free_list);
}

/*
 * A handle from the calling thread's arenas (home), not yet published;
 * NULL: no memory. Inline for the steady state, where the start takes the
 * handle a cancel has just pushed on the home's free list; the rest
 * (returned handles, fresh slots, spills) is arena.c's.
 */
static inline struct spoke_handle *spoke_handle_alloc(struct arena *home)
{
	struct spoke_handle *h = spoke_arena_pop_free(home);

	return h ? h : spoke_handle_alloc_slow(home);
}

/*
 * The calling thread, whose home arena is home, ends a timer whose last word
 * of its generation was old: spoke_handle_release, with the common case
 * inline (a one-shot or TTL handle of the caller's own arenas goes straight
 * back on its arena's free list; handle_return in arena.c says why a spent
 * generation goes nowhere).
 */
static inline void spoke_handle_release_mine(struct spoke *s, struct arena *home,
					     struct spoke_handle *h, uint64_t old)
{
	struct arena *a = spoke_region_of(h)->arena;

	if (a->home == home && spoke_st_kind(old) != SPOKE_KIND_PERIODIC &&
	    spoke_st_gen(old) != UINT32_MAX) {
		h->qnode.next = (struct cds_wfcq_node *)a->free_list;
		a->free_list = h;
		return;
	}
	spoke_handle_release(s, h, old);
}

/*
 * The word of h just moved from old to spoke_st_retired(old): free h, unless
 * a reset holds WRITING, in which case that reset frees it (state.h).
 */
static inline void spoke_handle_retired(struct spoke *s, struct spoke_handle *h, uint64_t old)
{
	if (!(old & SPOKE_ST_WRITING))
		spoke_handle_release(s, h, old);
}

/*
 * Thread-local caches, keyed by the instance's serial so that a new instance
 * at a freed one's address never matches: the calling thread's home arena,
 * and the shard it owns (managed thread or attached thread), if any.
 */
struct spoke_tls_arena {
	uint64_t serial;
	struct arena *arena;
};
struct spoke_tls_owner {
	uint64_t serial;
	struct shard *sh;
	bool managed; /* the shard's managed thread: owns it until it ends */
};
extern _Thread_local struct spoke_tls_arena spoke_tls_arena;
extern _Thread_local struct spoke_tls_owner spoke_tls_owner;

/* Is the calling thread sh's owner? */
static inline bool spoke_any_owns_shard(const struct shard *sh)
{
	return spoke_tls_owner.sh == sh && spoke_tls_owner.serial == sh->s->serial;
}

/* The shard the calling thread owns, or NULL. */
static inline struct shard *spoke_any_my_shard(const struct spoke *s)
{
	return spoke_tls_owner.serial == s->serial ? spoke_tls_owner.sh : NULL;
}

/*
 * Zeroed memory for n objects of a type with cache-line-aligned members
 * (struct spoke, shards, arenas, pool workers): calloc only guarantees 16
 * bytes, and such a member off its line would be undefined behaviour and
 * false sharing. NULL on overflow or no memory; release with free().
 */
static inline void *spoke_zalloc_lines(size_t n, size_t size)
{
	size_t bytes;
	void *p;

	if (__builtin_mul_overflow(n, size, &bytes) || bytes > SIZE_MAX - SPOKE_CACHELINE)
		return NULL;
	/* aligned_alloc wants a multiple of the alignment (C11 7.22.3.1). */
	bytes = (bytes + SPOKE_CACHELINE - 1) & ~(size_t)(SPOKE_CACHELINE - 1);
	p = aligned_alloc(SPOKE_CACHELINE, bytes ? bytes : SPOKE_CACHELINE);
	if (p)
		memset(p, 0, bytes);
	return p;
}

/* Count one event of kind c on shard sh, from whichever thread we are on. */
static inline void spoke_count(struct shard *sh, enum shard_counter c, bool owner)
{
	if (owner)
		atomic_store_explicit(&sh->ctr.own[c],
				      atomic_load_explicit(&sh->ctr.own[c], memory_order_relaxed) +
					      1,
				      memory_order_relaxed);
	else
		atomic_fetch_add_explicit(&sh->ctr.remote[c], 1, memory_order_relaxed);
}

/*
 * The end of one of s's wfcqueues: its consumer lock is destroyed, but not in
 * a fork child (s->forked), where a thread that does not exist there may
 * have held it at the fork: destroying a locked mutex fails, and liburcu
 * asserts that it does not (a default mutex holds no resource to free).
 */
static inline void spoke_queue_fini(const struct spoke *s, struct cds_wfcq_head *head,
				    struct cds_wfcq_tail *tail)
{
	if (!s->forked)
		cds_wfcq_destroy(head, tail);
}

static inline spoke_id spoke_make_id(uint32_t gen, uint32_t slot_id)
{
	return ((uint64_t)gen << 32) | slot_id;
}

/* eventcount.c: sleep until a queue has work; wake the sleeper */
void spoke_ec_wake_one(_Atomic uint32_t *seq, _Atomic uint32_t *sleeping);
bool spoke_ec_wake_if_sleeping(_Atomic uint32_t *seq, _Atomic uint32_t *sleeping);
void spoke_ec_kick(_Atomic uint32_t *seq);
void spoke_ec_sleep(_Atomic uint32_t *seq, _Atomic uint32_t *sleeping, bool (*has_work)(void *),
		    void *arg, int64_t timeout_ns);
void spoke_ec_wait_word(_Atomic uint32_t *word, uint32_t expect, int64_t timeout_ns);
void spoke_ec_wake_word(_Atomic uint32_t *word);

/*
 * A callback run in progress on a thread (run.c spoke_runner_call, on its
 * stack): what spoke_self reports, and how the wait-for graph (waits.c)
 * knows the thread that runs it.
 */
struct spoke_run {
	struct spoke *s;
	const struct spoke_handle *h;
	spoke_id id; /* h's id for this run's generation */
	uint64_t due_ns;
	struct spoke_run *outer; /* a run this one is nested in, or NULL */
};

/*
 * A wait a call is in, on its stack, recorded in the wait-for graph
 * (waits.c) for as long as it waits: what it waits for (set by the
 * caller), and who waits (set by waits.c).
 */
enum spoke_wait_kind {
	SPOKE_WAIT_RUN,	    /* spoke_cancel_sync: the run (h, id) to end */
	SPOKE_WAIT_ATTACH,  /* spoke_attach: shard `shard`'s managed thread to leave */
	SPOKE_WAIT_DESTROY, /* spoke_destroy: s's calls, callbacks and threads */
};

struct spoke_wait {
	enum spoke_wait_kind kind;
	const struct spoke *s; /* the instance it waits on */
	const struct spoke_handle *h;
	spoke_id id;	/* RUN */
	unsigned shard; /* ATTACH */
	bool pool_too;	/* ATTACH: and for its runs on the pool (not from a pool callback) */
	const struct spoke *in_call; /* the instance of the waiting call (RUN, ATTACH), or NULL */
	/* Who waits, as waits.c finds the thread: */
	const struct spoke_run *runs;
	const struct shard *managed; /* it is this shard's managed thread */
	const struct spoke *pool_of; /* it is a pool worker of this instance */
	_Atomic int broken;	     /* RUN: a destroy opened a cycle through it: -EDEADLK */
	struct spoke_wait *next, *cycle_next;
	unsigned mark;
};

/* --- platform.c: the ground floor (calls nothing above it) ----------------- */

/*
 * CLOCK_MONOTONIC in ns: what spoke_now_ns (spoke.h, platform.c) returns,
 * inline here so that the start path's clock read is not also a call.
 */
static inline uint64_t spoke_clock_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

unsigned spoke_online_cpus(void);

/*
 * A full fence for the store-load handshakes (eventcount, shutdown). gcc 12
 * refuses atomic_thread_fence under -fsanitize=thread (-Wtsan: TSan does not
 * model fences; the handshakes are about lost wake-ups, not data races, and
 * every datum they order is itself atomic), so the warning is silenced for
 * this one function only.
 */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wtsan"
#endif
static inline __attribute__((always_inline)) void spoke_full_fence(void)
{
	atomic_thread_fence(memory_order_seq_cst);
}
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#pragma GCC diagnostic pop
#endif

/*
 * Asymmetric store-load handshakes (a call vs destroy, a worker vs an
 * attach): the frequent side stores, runs spoke_light_fence, then loads;
 * the rare side stores, runs spoke_heavy_fence (platform.c: membarrier makes
 * every thread of the process execute a full barrier), then loads. With
 * membarrier the light fence is only a compiler barrier, so the frequent
 * side has no locked instruction; without it (not registered at create),
 * both are full fences. A membarrier that fails once registered aborts.
 */

static inline void spoke_light_fence(const struct spoke *s)
{
	if (s->asym_fence)
		atomic_signal_fence(memory_order_seq_cst);
	else
		spoke_full_fence();
}
void spoke_fence_init(struct spoke *s); /* create: register membarrier if it can */
void spoke_heavy_fence(const struct spoke *s);

/*
 * The service's own threads (shard and pool threads) get the CPUs and the
 * scheduling of the thread that called spoke_create, whoever starts them.
 */
int spoke_thread_attr_init(struct spoke *s); /* create: what they inherit */
void spoke_thread_attr_fini(struct spoke *s);
int spoke_thread_start(const struct spoke *s, pthread_t *t, void *(*fn)(void *), void *arg);
/* The new thread, first thing: */
void spoke_thread_name(const char *kind, unsigned index);
void spoke_thread_pin(int cpu);
void spoke_thread_adopt_sched(const struct spoke *s);
/* Any thread, waiting for another with a few instructions left to run (attempt: 0, 1, ...). */
void spoke_yield_to_other_thread(unsigned attempt);

/* --- waits.c: the wait-for graph (any thread about to wait in a call) ------- */

int spoke_waits_enter(struct spoke_wait *me); /* 0, or -EDEADLK: it would close a cycle */
void spoke_waits_enter_destroy(struct spoke_wait *me);
void spoke_waits_leave(struct spoke_wait *me);
bool spoke_wait_broken(const struct spoke_wait *me);

/*
 * Shards (shard.c, managed.c, rescue.c), runs (run.c) and the pool (pool.c,
 * pool.h), by the thread that may call them.
 * A function's name says which thread may call it:
 *
 *   spoke_owner_*    only the owner thread of sh (its managed thread, or the
 *                    thread attached to it)
 *   spoke_any_*      any thread, the owner too
 *   spoke_holder_*   whoever holds sh for a turn: its owner, or a rescuer
 *   spoke_watcher_*  a thread watching other shards for a stall (a managed
 *                    thread, a pool worker: rescue.c)
 *   rescuer_*        (static, rescue.c, shard.c) a watcher that took a
 *                    stalled shard, until it lets go
 *   spoke_runner_*   the thread holding a DISPATCHED handle (protocol.h
 *                    "runner": a pool worker, a rescuer, or the owner)
 *   spoke_shard_*,   named for what they act on: the thread in spoke_create
 *   spoke_pool_*     or spoke_destroy (init, start, stop, free)
 *
 * The state-word transitions behind them are protocol.h's, named the same
 * way without spoke_ (its legend: starter_, any_, writer_, waiter_,
 * owner_, runner_, retirer_).
 */

/* Any thread. */
void spoke_any_post(struct shard *sh, struct spoke_handle *h, uint64_t due_ns);
void spoke_any_post_admitted(struct shard *sh, struct spoke_handle *h, uint64_t due_ns);
bool spoke_any_admit_slow(struct shard *sh, _Atomic uint16_t *places);

/*
 * Any thread but sh's owner, starting a timer there (sh is shard k, passed
 * as well: the line sh->index is on is the owner's, written every turn;
 * home: the thread's arena): may sh's inbox take one more message? If so it is counted (then
 * spoke_any_post_admitted, or spoke_any_unadmit if the start fails after
 * all); if the inbox holds inbox_limit messages its owner has not handled,
 * the start is refused (-ENOBUFS), counted in `refused`. Cancels, resets and
 * a runner's messages are never refused: each rides on a handle already
 * counted among the live timers (spoke_any_post counts them without a
 * limit). A starting thread takes its places SPOKE_INBOX_PLACES at a time
 * (one atomic add on the tail's line) while that many fit under the limit,
 * one at a time near it, and keeps the unused ones in its arena: most
 * starts use one of those, a plain decrement, and no locked instruction is
 * added beside the enqueue's exchange (one costs as much as 15% of a start
 * on the 2-vCPU VM of docs/design/service.md). The backlog spoke_stats shows
 * leaves the unused places out (spoke_arenas_places).
 */
static inline bool spoke_any_admit(struct shard *sh, unsigned k, struct arena *home)
{
	_Atomic uint16_t *places = &home->inbox_places[k];
	uint16_t n = atomic_load_explicit(places, memory_order_relaxed);

	if (__builtin_expect(n != 0, 1)) {
		atomic_store_explicit(places, (uint16_t)(n - 1), memory_order_relaxed);
		return true;
	}
	return spoke_any_admit_slow(sh, places);
}

/* The start spoke_any_admit let in posts nothing after all (no handle): its place is kept. */
static inline void spoke_any_unadmit(unsigned k, struct arena *home)
{
	_Atomic uint16_t *places = &home->inbox_places[k];

	atomic_store_explicit(places,
			      (uint16_t)(atomic_load_explicit(places, memory_order_relaxed) + 1),
			      memory_order_relaxed);
}
void spoke_any_nudge(struct shard *sh, uint64_t due_ns);
void spoke_any_wake_owner(struct shard *sh);
uint64_t spoke_any_next_tick_ns(const struct shard *sh, uint64_t now_ns); /* pure */
/* Any thread that owns no shard (spoke_attach); from_pool: a pool callback. */
int spoke_any_attach(struct shard *sh, bool from_pool, struct arena *home);
/* Any thread: about the calling thread's callbacks (run.c, pool.c). */
struct spoke_run *spoke_current_run(void);
bool spoke_running_in_callback(const struct spoke_handle *h);
bool spoke_in_callback_of(const struct spoke *s);
bool spoke_on_pool_thread(void);
const struct spoke *spoke_pool_of_thread(void);

/* The owner of sh: its engines and the stage. */
void spoke_owner_arm(struct shard *sh, struct spoke_handle *h, uint64_t deadline_ns);
void spoke_owner_arm_new(struct shard *sh, struct spoke_handle *h, uint64_t deadline_ns);
void spoke_owner_disarm(struct shard *sh, struct spoke_handle *h);
void spoke_owner_disarm_word(struct shard *sh, struct spoke_handle *h, uint64_t st);
void spoke_owner_rearm_periodic(struct shard *sh, struct spoke_handle *h, bool reset);
int spoke_owner_turn(struct shard *sh, bool all_messages);
int64_t spoke_owner_next_ns(struct shard *sh);
/* The owner of sh, attached (spoke_poll and friends). */
int spoke_owner_detach(struct shard *sh);
void spoke_owner_abandon(struct shard *sh);
int spoke_owner_wake_fd(struct shard *sh);
int64_t spoke_owner_attached_sleep(struct shard *sh, int64_t wait_ns);
void spoke_owner_attached_awake(struct shard *sh);
/* The owner of sh, about to sleep; the managed thread: may it stop driving sh? */
bool spoke_owner_announce_sleep(struct shard *sh, int64_t wait_ns);
bool spoke_owner_may_leave(struct shard *sh);

/*
 * sh->due_word (rescue.c): the top bit says a rescuer holds the shard, the
 * rest when it next has work (SPOKE_DUE_NONE: nothing).
 */
#define SPOKE_DUE_RESCUED (UINT64_C(1) << 63)
#define SPOKE_DUE_NONE	  (SPOKE_DUE_RESCUED - 1)

/* The owner of sh: its due word, for spoke_owner_rescued_in and spoke_owner_note_due. */
static inline uint64_t spoke_owner_due_word(const struct shard *sh)
{
	return atomic_load_explicit(&sh->due_word, memory_order_acquire);
}

/*
 * Rescue (rescue.c). The owner of sh: is a rescuer holding it? (After the
 * owner counted itself busy and ran the light fence: then a rescuer that
 * takes the shard later sees the owner and lets go.)
 */
static inline bool spoke_owner_rescued_in(uint64_t due_word)
{
	return (due_word & SPOKE_DUE_RESCUED) != 0;
}

static inline bool spoke_owner_rescued(const struct shard *sh)
{
	return spoke_owner_rescued_in(spoke_owner_due_word(sh));
}
void spoke_owner_hold(struct shard *sh);
void spoke_owner_unhold(struct shard *sh);
void spoke_owner_await_rescue(struct shard *sh);
/* The due (shard.c): the owner at the end of a turn, the holder of sh, any thread. */
void spoke_owner_turned(struct shard *sh, uint64_t now, int64_t next_ns);
void spoke_holder_publish_due(struct shard *sh, uint64_t due);
void spoke_any_lower_due(struct shard *sh, uint64_t due);

/* The sooner of two waits in ns, each -1 for none (as the sleeps take them). */
static inline int64_t spoke_sooner_ns(int64_t a, int64_t b)
{
	return a < 0 || (b >= 0 && b < a) ? b : a;
}

/*
 * The moment sh, whose work is due at due, becomes stalled: rescue_after_ns
 * after it, or at once if its owner has not taken a turn since the last
 * rescue (its absence has been counted already; waiting again would add
 * rescue_after_ns to every timer due during one long stall).
 */

static inline uint64_t spoke_stalled_at(const struct shard *sh, uint64_t due)
{
	uint64_t x;

	if (atomic_load_explicit(&sh->rescued_ns, memory_order_relaxed) >
	    atomic_load_explicit(&sh->owner_turn_ns, memory_order_relaxed))
		return due;
	return __builtin_add_overflow(due, sh->rescue_after_ns, &x) ? UINT64_MAX : x;
}

/*
 * Any thread: sh has work due at d; lower its due if d is earlier. With
 * rescue off due_word stays 0 (spoke_shard_init), below every d: one
 * compare with memory, and no flag to test first. While a rescuer holds sh
 * the word is above every d, and spoke_any_lower_due looks closer.
 */
static inline void spoke_note_due(struct shard *sh, uint64_t d)
{
	if (d < atomic_load_explicit(&sh->due_word, memory_order_relaxed))
		spoke_any_lower_due(sh, d);
}

/*
 * The owner holding sh, with the due word it loaded when it found no
 * rescuer (spoke_owner_due_word): the same, without a second load. The
 * word may since have gone down, never up: while the owner holds sh nobody
 * else publishes a later due (only a holder does), and another thread's
 * lowering below d makes d's own unneeded.
 */
static inline void spoke_owner_note_due(struct shard *sh, uint64_t d, uint64_t seen)
{
	if (d < seen)
		spoke_any_lower_due(sh, d);
}

/* Any thread: when sh next has work (UINT64_MAX: nothing), for its watchers. */
static inline uint64_t spoke_any_due_ns(const struct shard *sh)
{
	uint64_t due =
		atomic_load_explicit(&sh->due_word, memory_order_acquire) & ~SPOKE_DUE_RESCUED;

	return due == SPOKE_DUE_NONE ? UINT64_MAX : due;
}
int64_t spoke_watcher_look(struct shard *sh, uint64_t now);
int64_t spoke_watcher_look_ring(struct shard *mine, uint64_t now);
bool spoke_watcher_look_moved(const struct shard *sh, uint64_t looked, uint64_t planned);
bool spoke_watcher_ring_moved(const struct shard *mine, uint64_t looked, uint64_t planned);
int64_t spoke_holder_next_ns(struct shard *sh, bool owner_runs);

/*
 * The runner: a pool worker, a rescuer, or the owner running a callback
 * inline. spoke_runner_call (run.c) runs the callback and says what the
 * shard must do next; spoke_runner_run, below, does it (shard.c
 * spoke_runner_settle): run.c calls nothing of the shard above it.
 */
enum runner_next {
	RUNNER_NEXT_NOT_RUN,	  /* a cancel won before the run: h retired */
	RUNNER_NEXT_UNDISPATCHED, /* a reset won before the run: post h for its deadline */
	RUNNER_NEXT_DONE,	  /* ran; nothing more (retired, or parked by destroy) */
	RUNNER_NEXT_REARM,	  /* ran; periodic, on its owner thread: re-arm at base_ns */
	RUNNER_NEXT_REARM_RESET,  /* the same, at the deadline of a reset made during the run */
	RUNNER_NEXT_POST,	  /* ran; periodic, elsewhere: post h for its owner to re-arm */
};
enum runner_next spoke_runner_call(struct shard *sh, struct spoke_handle *h);
void spoke_runner_watch_exit(void);
void spoke_runner_recall(struct shard *sh, struct spoke_handle *h);

/*
 * The runner: run h's callback on this thread (h is DISPATCHED, taken off
 * any queue; sh its shard, fixed for h's generation, which the run may
 * end), then give the timer back to its shard as the run's end says
 * (spoke_runner_settle, shard.c). true if the callback ran. Inline: the end
 * of every run, where the common end (nothing to give back) costs a compare.
 */
bool spoke_runner_settle(struct shard *sh, struct spoke_handle *h, enum runner_next next);
static inline bool spoke_runner_run(struct shard *sh, struct spoke_handle *h)
{
	enum runner_next next = spoke_runner_call(sh, h);

	return __builtin_expect(next == RUNNER_NEXT_DONE, 1) || spoke_runner_settle(sh, h, next);
}

/* Create and destroy (the thread in spoke_create / spoke_destroy). */
int spoke_shard_init(struct spoke *s, struct shard *sh, unsigned index);
void spoke_shard_fini(struct shard *sh);
int spoke_shard_launch(struct shard *sh);
void spoke_shard_stop(struct shard *sh);
void spoke_shard_signal_stop(struct shard *sh);
int spoke_pool_start(struct spoke *s);
void spoke_pool_stop(struct spoke *s);
void spoke_pool_forget(struct spoke *s);
/*
 * The managed thread of sh, after its turn: start a spare worker if sh's
 * pool queue is starved (pool.c); the ns until it should look again (-1:
 * no need).
 */
int64_t spoke_owner_watch_pool(struct shard *sh, uint64_t now);

#endif /* SPOKE_PERCPU_SERVICE_H */
