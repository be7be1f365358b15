/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * spoke/spoke.h - the multicore timer service.
 *
 * Each shard (by default one per online CPU) owns a timer engine (the
 * `hierarchical` wheel unless configured otherwise) and, if it takes Lawn
 * buckets, a `lawn` engine for TTL timers. Only the shard's owner thread
 * touches its engines: its managed thread (pinned to its CPU, asleep until
 * the next deadline or message), or the server thread that took it over with
 * spoke_attach(). Starts, resets and cancels from other threads reach the
 * owner through a wait-free MPSC inbox; the verdict of a cancel or reset is
 * decided at once, on the timer's atomic state word, from any thread.
 * Expiry callbacks run on a callback pool, or inline on the shard thread
 * (callback_threads = 0), and always inline on attached shards (and on the
 * managed thread while spoke_attach takes its shard over).
 *
 * Every function may be called from any thread, including from inside a
 * callback (except spoke_destroy), unless its comment says otherwise. No
 * start, reset or cancel path takes a lock. Functions return 0 or a negative
 * errno unless stated. None is a cancellation point: a pending pthread_cancel
 * takes effect after the call, never inside it.
 *
 * Errors every function taking a struct spoke * may return besides its own:
 * -EINVAL for a NULL s; -ESHUTDOWN once spoke_destroy has begun (a call
 * made while destroy runs gets it; one made after destroy returned is a
 * use after free), and in a child of fork() on an instance inherited from
 * the parent; and, on a thread's first call into this service, -EAGAIN if
 * its per-thread handle arena cannot be set up (4096 arenas in use, or no
 * memory for one). In those cases spoke_shards() returns 0 and
 * spoke_stats() fills *out with zeros.
 */
#ifndef SPOKE_SPOKE_H
#define SPOKE_SPOKE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <spoke/version.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The version of the library loaded, "MAJOR.MINOR.PATCH" (static storage),
 * as `pkg-config --modversion spoke` prints it; the headers' version is in
 * SPOKE_VERSION_MAJOR, _MINOR and _PATCH (spoke/version.h). Any thread.
 */
const char *spoke_version(void);

typedef uint64_t spoke_id; /* 0 is never a valid id */
typedef void spoke_fn(void *arg);

struct spoke;

#define SPOKE_MAX_SHARDS 256

/* Marks a function that a later minor version may remove (CHANGELOG.md). */
#if defined(__GNUC__) || defined(__clang__)
#define SPOKE_DEPRECATED(msg) __attribute__((deprecated(msg)))
#else
#define SPOKE_DEPRECATED(msg)
#endif

/*
 * Per-shard overrides ("per-core tuning"): zero / NULL fields keep the global value,
 * except cpu, where -1 is the default (0 pins the shard to CPU 0).
 */
struct spoke_shard_config {
	int cpu;	      /* CPU to pin the managed thread to; -1 = shard index mod CPUs */
	uint64_t tick_ns;     /* tick length of this shard (1 us .. 1 h) */
	uint64_t slack_ns;    /* expiry slack of this shard (see struct spoke_config) */
	const char *engine;   /* engine scheme for one-shot and periodic timers */
	unsigned level_bits;  /* wheel geometry (hierarchical): bits per level */
	unsigned levels;      /* wheel geometry (hierarchical): number of levels */
	size_t table_size;    /* hashed schemes: buckets */
	unsigned inbox_limit; /* backpressure (see struct spoke_config); 0 = the global one */
};

struct spoke_config {
	unsigned shards;	   /* 0 = one per online CPU; at most SPOKE_MAX_SHARDS */
	uint64_t tick_ns;	   /* default 1000000 (1 ms); 1000 ns .. 3600 s */
	uint64_t slack_ns;	   /* how late past its deadline a timer may run (besides
				      scheduling delay) so that timers close together share
				      a wake-up: 0 = tick/4 (the default); at least tick/64;
				      tick or more = round deadlines up to the tick */
	const char *engine;	   /* default (and NULL) "hierarchical"; also hashed, hashed-sorted,
				      list, sorted-list (wheel: bounded; heap, lawn: allocate) */
	unsigned level_bits;	   /* 0 = engine default */
	unsigned levels;	   /* 0 = engine default */
	size_t table_size;	   /* 0 = engine default */
	unsigned callback_threads; /* pool size (default: one per shard, at most 1024);
				      0 = callbacks inline on the shard thread */
	/*
	 * How the pool is spread over the shards. 0 (the default): the
	 * callback_threads workers are dealt round-robin, and each shard with
	 * a worker of its own has its own queue (with fewer workers than
	 * shards, shard k shares the queue of worker k mod callback_threads).
	 * n > 0: n workers per shard, n x shards in all (at most 1024), in
	 * place of callback_threads' count, which must then not be 0. A worker
	 * with nothing to do takes callbacks from neighbouring shards' queues.
	 */
	unsigned callback_threads_per_shard;
	bool pin_threads;     /* pin managed shard threads to their CPUs (default true) */
	unsigned inbox_batch; /* messages a shard takes per turn before it looks at
				 the clock again (default 4096; 0 = all) */
	uint64_t lawn_shards; /* bit k set: shard k takes Lawn TTL buckets (k < 64);
				 0 = every shard (default) */
	/* Optional: overrides for shards 0 .. n_shard_overrides-1 (NULL = none). */
	const struct spoke_shard_config *shard_overrides;
	unsigned n_shard_overrides;
	/*
	 * Backpressure: a start from a thread that does not own the shard is
	 * refused with -ENOBUFS while the shard's inbox holds this many messages
	 * its owner has not handled, counting the places starting threads have
	 * taken and not used yet (up to 63 each; default 1048576: 64 MiB of
	 * queued handles; 0 = no limit). Cancels and resets are never refused.
	 */
	unsigned inbox_limit;
	/*
	 * Rescue: when a shard has had work due for this long and its owner
	 * (managed thread or attached loop) has taken no turn, another spoke
	 * thread (the managed thread of the shard before it, or one of its
	 * pool workers) runs a turn of it in its place, and hands it back.
	 * What it dispatches runs exactly once and never early; callbacks that
	 * would run inline on the owner's thread stay there unless started
	 * SPOKE_MOVABLE (spoke_start_flags). 0 = off; a shard waits at least
	 * two of its ticks. Default 10 ms (10 ticks of the default tick): above
	 * a scheduler's timeslice, so a busy but healthy machine does not
	 * trigger it, far below a stall anyone would accept.
	 */
	uint64_t rescue_after_ns;
	/*
	 * Spare workers: when a callback has waited rescue_after_ns on its
	 * pool queue and no worker that could run it has taken any (each busy
	 * in a callback, perhaps one that waits for that very timer), the
	 * queue's shard thread starts a spare worker for it, up to this many
	 * in the pool at once; a spare leaves after 2 s without a callback.
	 * 0 = a fixed pool; rescue_after_ns 0 also turns spares off. Default
	 * 16, at most 1024.
	 */
	unsigned callback_spares;
};

struct spoke_shard_stats {
	uint64_t started; /* timers this shard took on (starts and re-arms of periodic do not count
			     twice) */
	uint64_t cancelled;   /* cancels that won */
	uint64_t reset;	      /* resets applied */
	uint64_t fired;	      /* callback runs dispatched (each periodic run counts) */
	uint64_t pending;     /* timers in the shard's engines now */
	uint64_t inbox_hwm;   /* most messages taken from the inbox in one turn */
	uint64_t max_late_ns; /* worst lateness: callback start - deadline (pool wait included) */
	/*
	 * The lateness of every run so far as percentiles, each the top of its
	 * histogram bucket (buckets are at most 12.5 % wide; 0 when none ran).
	 */
	uint64_t late_p50_ns, late_p99_ns, late_p999_ns;
	uint64_t late_runs; /* runs the percentiles are of */
	uint64_t rescues;   /* turns other threads ran in its owner's place (rescue_after_ns) */
	uint64_t
		max_absence_ns; /* the longest owner absence a rescue found (since its last turn) */
	uint64_t tick_ns;
	uint64_t slack_ns; /* the slack in effect: tick / ceil(tick / asked slack), rounded up */
	bool attached;
	/*
	 * Messages other threads have queued to the shard (starts, resets,
	 * cancels) that its owner has not handled yet: read live, also while
	 * the owner is stalled. Starts refused with -ENOBUFS because it had
	 * reached inbox_limit.
	 */
	uint64_t inbox_queued;
	uint64_t refused;
};

struct spoke_stats {
	unsigned shards;
	struct spoke_shard_stats total; /* sums (max for inbox_hwm, max_late_ns, max_absence_ns;
					   percentiles of all shards' runs together) */
	struct spoke_shard_stats shard[SPOKE_MAX_SHARDS];
	/* Spare pool workers (callback_spares): running now, and started so far. */
	unsigned spares;
	uint64_t spares_started;
};

/* Fill cfg with the defaults; edit it, then pass it to spoke_create(). */
void spoke_config_init(struct spoke_config *cfg);

/*
 * Check cfg as spoke_create() does, creating nothing: 0 if it is valid (cfg
 * NULL = the defaults), -EINVAL if not, and then one line in why (at most
 * len bytes with its NUL; why may be NULL) naming the field, its value and
 * the rule it breaks, e.g. "tick_ns: 500 is below the minimum of 1000 ns".
 * On success why holds "". -ENOMEM if there was no memory to try the wheel
 * geometry (a nonzero level_bits, levels or table_size is tried by creating
 * the engine once and freeing it). Any thread.
 */
int spoke_config_check(const struct spoke_config *cfg, char *why, size_t len);

/*
 * Create the service and start its threads. cfg NULL = defaults. *out is set
 * only on success; on failure nothing is left allocated or running.
 * -EINVAL: NULL out, or a field out of its range (see struct spoke_config;
 * tick_ns 0 is invalid, not a default; a slack_ns, global or an override's,
 * below 1/64 of the tick of a shard it applies to; lawn_shards bits at or
 * above the shard count; an override cpu below -1 or not below CPU_SETSIZE;
 * more overrides than shards, or a count with a NULL array; callback_threads_per_shard
 * times the shards above 1024, or with callback_threads 0): spoke_config_check()
 * says which field and why. -ENOMEM: no memory. -EAGAIN: a thread could not
 * be started.
 */
int spoke_create(struct spoke **out, const struct spoke_config *cfg);

/*
 * Stop the service: from the moment it begins, every call returns
 * -ESHUTDOWN and nothing is re-armed; it waits for calls in progress and
 * running callbacks, joins its threads, and frees everything. Pending timers
 * never run. Called from inside a callback of the same instance it aborts
 * the process with a message naming the misuse (it would wait for itself).
 * Called from a callback of another instance, where waiting would close a
 * cycle of threads waiting for each other (a callback of s waits for the
 * destroying one), it makes a spoke_cancel_sync waiting in that cycle return
 * -EDEADLK, and goes on; a cycle without one (callbacks destroying each
 * other's instances, or attaching a shard whose callback destroys) aborts
 * the process with a message naming the cycle: it can neither return early
 * nor wait.
 * In a child of fork(), on an instance inherited from the parent, it frees
 * what it can without waiting for threads that do not exist there.
 */
void spoke_destroy(struct spoke *s);

/*
 * As spoke_destroy, and then, on the calling thread once every spoke thread
 * has stopped, release(arg) once for each timer that was still pending: a
 * one-shot that never ran, a periodic timer not stopped (counted once, also
 * when a run of it was in progress as destroy began), and no cancel returned
 * 0 for it; so that whoever owns the args can free them. release NULL:
 * spoke_destroy.
 */
void spoke_destroy_release(struct spoke *s, spoke_fn *release);

/*
 * The start functions write the new timer's id to *id (if id is not NULL)
 * before the timer can run. Errors: -EINVAL (NULL s or fn, bad shard or
 * period), -ESHUTDOWN (destroy has begun), -EAGAIN (a thread's first call:
 * no arena for it, see above), -ENOMEM (no memory or address space for more
 * handles: a thread's first start reserves 64 MiB of address space for its
 * handles, and each further 512 KiB of them is made read/write as needed),
 * -ENOBUFS (the caller does not own the shard, and the shard's inbox holds
 * inbox_limit messages its owner has not handled: a stalled or overrun
 * owner; nothing was started, try again later or elsewhere).
 */

/* One-shot timer on the caller's shard (its attached shard, else its CPU's). */
int spoke_start(struct spoke *s, uint64_t delay_ns, spoke_fn *fn, void *arg, spoke_id *id);
/*
 * One-shot timer at an absolute CLOCK_MONOTONIC deadline (spoke_now_ns()
 * time), on the caller's shard as spoke_start: never runs before it; a
 * deadline that has already passed runs at the shard's next tick.
 */
int spoke_start_at(struct spoke *s, uint64_t deadline_ns, spoke_fn *fn, void *arg, spoke_id *id);
/*
 * Every start in one call: where (shard: an index, or SPOKE_ANY_SHARD for
 * the caller's shard as spoke_start; a SPOKE_TTL timer goes to its TTL's
 * shard and needs SPOKE_ANY_SHARD), when (when_ns: a delay, an absolute
 * CLOCK_MONOTONIC deadline with SPOKE_ABSOLUTE, the period with
 * SPOKE_PERIODIC, the TTL with SPOKE_TTL) and how:
 *
 *   SPOKE_PERIODIC  periodic, as spoke_start_periodic (when_ns 0: -EINVAL)
 *   SPOKE_TTL       in the Timer Lawn, as spoke_start_ttl
 *   SPOKE_ABSOLUTE  one-shot at the deadline when_ns, as spoke_start_at
 *   SPOKE_MOVABLE   while its shard's owner is stalled, a rescue
 *                   (rescue_after_ns) may run it on another spoke thread
 *                   than the owner's, even where its callbacks run inline
 *                   (an attached loop, callback_threads 0); see
 *                   docs/contract.md for what such a callback may assume
 *
 * At most one of PERIODIC, TTL and ABSOLUTE; other bits: -EINVAL. The
 * errors of the start functions above.
 */
#define SPOKE_ANY_SHARD 0xffffffffu
#define SPOKE_PERIODIC	0x1u
#define SPOKE_TTL	0x2u
#define SPOKE_ABSOLUTE	0x4u
#define SPOKE_MOVABLE	0x8u
int spoke_start_flags(struct spoke *s, unsigned shard, uint64_t when_ns, unsigned flags,
		      spoke_fn *fn, void *arg, spoke_id *id);
/* One-shot timer on a given shard (-EINVAL if out of range). */
int spoke_start_on(struct spoke *s, unsigned shard, uint64_t delay_ns, spoke_fn *fn, void *arg,
		   spoke_id *id);
/*
 * Periodic timer: runs at start + period, + 2 period, ... (no drift); never
 * overlaps itself. If a run ends after the next due time, the missed periods
 * are skipped: it runs once, then keeps its phase. period_ns 0 is -EINVAL.
 */
int spoke_start_periodic(struct spoke *s, uint64_t period_ns, spoke_fn *fn, void *arg,
			 spoke_id *id);
/* TTL timer in the Timer Lawn of the shard that owns this TTL. */
int spoke_start_ttl(struct spoke *s, uint64_t ttl_ns, spoke_fn *fn, void *arg, spoke_id *id);

/*
 * Move a pending timer's next run to now + delay_ns. A timer is pending until
 * its callback starts (one due and waiting for a pool thread still is).
 * -ENOENT if it is no longer pending (one-shot started or done, cancelled,
 * stale id).
 */
int spoke_reset(struct spoke *s, spoke_id id, uint64_t delay_ns);

/* 0: this call prevented the (next) run. -ENOENT: nothing left to prevent. */
int spoke_cancel(struct spoke *s, spoke_id id);

/*
 * As spoke_cancel, and on return no run of the timer is in progress.
 * -EDEADLK, without waiting, from inside that timer's own callback, and
 * where the wait would close a cycle of threads waiting for each other
 * (A's callback waits for B's run while B's waits for A's, or a longer
 * chain, across instances too, also through spoke_attach and spoke_destroy,
 * which wait as well); and while it waits, once a spoke_destroy closes
 * such a cycle through it. The cancel itself still takes effect. Only a
 * cancel_sync that must wait takes a lock (process-wide, held to check for
 * a cycle, never while waiting).
 */
int spoke_cancel_sync(struct spoke *s, spoke_id id);

/*
 * ns until the timer is due (0 if it is due now, or due and waiting for a
 * callback thread); a periodic timer: until its next run (also from inside
 * its callback). -ENOENT if it is not pending (a one-shot that ran or runs,
 * cancelled, stale id).
 */
int64_t spoke_remaining(struct spoke *s, spoke_id id);

/*
 * From inside a callback: the id of the timer whose callback the calling
 * thread runs, and in *due_ns (if not NULL) the deadline that run was due at
 * (spoke_now_ns() - *due_ns is its lateness). 0 outside any callback.
 */
spoke_id spoke_self(uint64_t *due_ns);

/*
 * Change a periodic timer's period: the runs after the one already
 * scheduled (or running) are period_ns apart. Only from inside that timer's
 * own callback, or from the thread that owns its shard (an attached loop,
 * or a callback running inline on that shard's thread; then -EPERM if a
 * start, reset or cancel of it from another thread is still queued).
 * -EINVAL (NULL s, period_ns 0, not a periodic timer), -ENOENT (not
 * pending), -EPERM (another thread).
 */
int spoke_set_period(struct spoke *s, spoke_id id, uint64_t period_ns);

unsigned spoke_shards(const struct spoke *s);

/*
 * Make the calling thread the owner of shard k: its managed thread stops
 * driving it before this returns. Callbacks of the shard running on the
 * pool are waited for (the managed thread drives the shard meanwhile),
 * except by an attach from a pool callback (of any instance's pool); those
 * queued on the pool come back to the shard instead of running there.
 * -EINVAL (k out of range), -EBUSY (shard already attached, or being handed
 * over by another thread's attach or detach at this moment, or this thread
 * already owns a shard, of this or of another live instance: a thread owns
 * at most one shard at a time), -EDEADLK (without waiting, nothing changed:
 * waiting for the shard's thread would close a cycle of threads waiting for
 * each other, as for spoke_cancel_sync).
 */
int spoke_attach(struct spoke *s, unsigned shard);

/*
 * Attached thread only: give the shard back to a managed thread (started by
 * this call like those of spoke_create: pinned if pin_threads, all signals
 * blocked, with the scheduling policy and CPUs of spoke_create's caller).
 * Its pending timers keep their deadlines and from then on run on the
 * callback pool (inline on that thread with callback_threads = 0); the
 * caller may attach again later. Its wake fd stops being signalled (a
 * message racing the detach may still make it readable once: take it out
 * of the loop's poll set) and stays open until spoke_destroy; a later owner
 * of the shard gets the same fd back. A thread that exits while attached
 * (returning from its function, not from inside a callback) is detached
 * this way at its exit; if no thread can be started then, the shard is left
 * unowned (not attached) and its timers wait for the next spoke_attach.
 * -EPERM if the caller is not attached, -EBUSY from inside its own
 * spoke_poll (a callback), -EAGAIN if no thread could be started (the
 * shard stays attached).
 */
int spoke_detach(struct spoke *s);

/*
 * Attached thread only: run, inline, every timer of the shard that is due
 * when it is called, including starts, resets and cancels other threads
 * queued before the call (it takes every message queued at its entry, and
 * no more, so producers cannot keep it running). From inside one of its
 * callbacks it does nothing and returns 0. Returns callbacks run, or -errno
 * (-EPERM if not attached).
 */
int spoke_poll(struct spoke *s);

/*
 * Attached thread only: when the shard next has work. 0 with *ns the ns
 * until then (never later than its next deadline; 0 if work waits); 1 if
 * nothing is pending (*ns = UINT64_MAX: sleep until woken). -EPERM if the
 * caller is not attached, -EINVAL for a NULL s or ns, -ESHUTDOWN during
 * destroy; *ns is untouched on an error. A loop sleeps for *ns, or without a
 * timeout when the result is 1.
 */
int spoke_next_deadline_ns(struct spoke *s, uint64_t *ns);

/*
 * Deprecated since 0.4 (kept for every 0.x): spoke_next_deadline_ns() says the same
 * without mixing the value and the errors. ns until the shard next has work,
 * -1 if none; -EINVAL (not -EPERM, which is -1) if the caller is not attached
 * or s is NULL, -ESHUTDOWN during destroy.
 */
int64_t spoke_next_deadline(struct spoke *s) SPOKE_DEPRECATED("use spoke_next_deadline_ns");

/*
 * Attached thread only: an eventfd (non-blocking, close-on-exec, owned and
 * closed by spoke_destroy) for the loop to wait on beside its own fds. Once
 * it exists, after spoke_next_deadline() returned t, a start, reset or
 * cancel from another thread that matters before t (or any message while t
 * is more than two ticks away, or none) makes it readable, and so does
 * spoke_destroy beginning; spoke_poll() empties it. Without it a loop only
 * notices such messages at its next deadline. Returns the fd (the same one
 * on every call), -EINVAL/-EPERM as spoke_poll(), or -errno of eventfd().
 */
int spoke_wake_fd(struct spoke *s);

/*
 * Fill *out (see struct spoke_stats). s NULL, or a call that would fail
 * (destroy under way, no arena): *out all zeros. out NULL is a misuse that
 * no return value can report: the process aborts with a message naming it.
 */
void spoke_stats(struct spoke *s, struct spoke_stats *out);

/*
 * A debug dump for an operator (from a signal-driven admin command, say):
 * a line per shard (owner, CPU, tick, pending, counters, lateness
 * percentiles) and its `earliest` earliest pending timers, each with the
 * time left, its kind, its id and its callback's symbol (dladdr: a function
 * of the main program shows by name only if it is linked with -rdynamic).
 * Read while the service runs, so a timer that starts or ends meanwhile
 * may be missing or shown once more. -EINVAL (NULL s or out), -ENOMEM,
 * -errno of the write. Any thread; cost O(handles ever allocated).
 */
int spoke_dump(struct spoke *s, FILE *out, unsigned earliest);

/* CLOCK_MONOTONIC in ns. */
uint64_t spoke_now_ns(void);

#ifdef __cplusplus
}
#endif

#endif /* SPOKE_SPOKE_H */
