/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * api_timers.c - the calls any thread makes on a timer: start (every form),
 * cancel, cancel_sync, reset, remaining, self, set_period. The hot paths
 * stay in this one file, inlined into each public function.
 *
 * Each start/reset/cancel is decided by compare-and-swap on the timer's state
 * word (state.h), never by a lock. If the caller is the owner of the timer's
 * shard (an attached thread, or a callback running inline on the shard
 * thread) it changes the engine itself; otherwise it sets SPOKE_ST_INBOX and
 * posts the handle to the owner's inbox, unless INBOX was already set (then
 * the queued message carries the new state too).
 */
#define _GNU_SOURCE
#include "api.h"
#include "guard.h"
#include "probes.h"
#include "protocol.h"
#include "service.h"
#include "test_hooks.h"

#include <errno.h>

/* --- starting ------------------------------------------------------------- */

/*
 * The deadline of a start or reset on sh: now + delay, saturated. Delay 0
 * means the next tick of sh (a deadline that has passed would run at the
 * owner's next turn, and a callback re-arming itself so would run once a
 * turn); any other delay is run within the slack of its deadline.
 */
static uint64_t deadline_after(const struct shard *sh, uint64_t now, uint64_t delay_ns)
{
	uint64_t d;

	if (delay_ns == 0)
		return spoke_any_next_tick_ns(sh, now);
	if (__builtin_add_overflow(now, delay_ns, &d))
		return UINT64_MAX;
	return d;
}

/* The same from the clock, now. */
static uint64_t deadline_on(const struct shard *sh, uint64_t delay_ns)
{
	return deadline_after(sh, spoke_clock_ns(), delay_ns);
}

/*
 * The deadline of spoke_start_at on sh: the one asked, unless it has passed:
 * then the next tick of sh, as delay 0 would give. The owner of sh compares
 * with the time of its last turn instead of reading the clock: the caller
 * brought the time, so an attached loop's start_at costs no clock read. A
 * deadline between that turn's time and now is armed as asked: it is due,
 * and the next turn runs it (never this one, whose time is older), which is
 * what "the next tick" promises a callback that starts one.
 */
static uint64_t deadline_at(const struct shard *sh, uint64_t deadline_ns, bool owner)
{
	uint64_t now = owner ? sh->clock_ns : spoke_clock_ns();

	return deadline_ns > now ? deadline_ns : spoke_any_next_tick_ns(sh, now);
}

/*
 * Inside a call (counted in the caller's arena, guard.h), mine:
 * spoke_any_my_shard(s): may the caller touch sh's engines itself? Only its
 * owner, and only while no rescuer holds it (rescue.c: the call's count
 * keeps a rescuer from taking it after this look). One plain load of a line
 * the owner's own path reads anyway; the word it read goes to *due_word, for
 * a start or reset that makes the shard's work earlier (spoke_owner_note_due).
 */
static inline bool owner_holds_due(const struct shard *sh, const struct shard *mine,
				   uint64_t *due_word)
{
	if (sh != mine)
		return false;
	*due_word = spoke_owner_due_word(sh);
	return !spoke_owner_rescued_in(*due_word);
}

static inline bool owner_holds(const struct shard *sh, const struct shard *mine)
{
	uint64_t unused;

	return owner_holds_due(sh, mine, &unused);
}

/* Where a start goes: a shard by index, or one of these. */
#define SHARD_HOME SPOKE_ANY_SHARD   /* the caller's own, else its CPU's */
#define SHARD_TTL  (UINT32_MAX - 1u) /* the Lawn shard of the TTL */

/* What a start asks for: when (a delay, or an absolute deadline), where, what. */
struct start_req {
	unsigned shard; /* index, SHARD_HOME or SHARD_TTL */
	unsigned kind;
	bool absolute; /* when_ns is a deadline, else a delay */
	uint64_t when_ns;
	uint64_t period_ns;
	spoke_fn *fn;
	void *arg;
	bool movable; /* SPOKE_MOVABLE: a rescue may run it on another thread (rescue.c) */
};

/* Inside a call (s is alive): the shard a plain spoke_start uses; mine: spoke_any_my_shard(s). */
static unsigned home_shard(struct spoke *s, const struct shard *mine)
{
	int cpu;

	if (mine)
		return mine->index;
	cpu = sched_getcpu();
	return cpu >= 0 && (unsigned)cpu < s->ncpus ? s->cpu_shard[cpu] : 0;
}

/* Lawn: each TTL's queue lives on exactly one shard (Fibonacci hash of the TTL). */
static unsigned ttl_shard(struct spoke *s, uint64_t ttl_ns)
{
	uint64_t h = ttl_ns * 0x9e3779b97f4a7c15ull;

	return s->lawn_shard[(h >> 32) % s->nlawn];
}

/* Inside a call: the shard index r goes to, or -EINVAL; mine: spoke_any_my_shard(s). */
static int start_shard(struct spoke *s, const struct start_req *r, const struct shard *mine)
{
	if (r->shard == SHARD_HOME)
		return (int)home_shard(s, mine);
	if (r->shard == SHARD_TTL)
		return s->nlawn ? (int)ttl_shard(s, r->when_ns) : -EINVAL;
	return r->shard < s->nshards ? (int)r->shard : -EINVAL;
}

/* A new handle for r in arena a, filled in and not yet published; NULL: -ENOMEM. */
static inline __attribute__((always_inline)) struct spoke_handle *
start_handle(struct spoke *s, struct arena *a, const struct start_req *r, uint64_t deadline)
{
	struct spoke_handle *h = spoke_handle_alloc(a);

	if (!h)
		return NULL;
	/* Release: spoke_handle_peek reads them from other threads (service.h). */
	__atomic_store_n(&h->fn, r->fn, __ATOMIC_RELEASE);
	__atomic_store_n(&h->arg, r->arg, __ATOMIC_RELEASE);
	if (r->kind == SPOKE_KIND_PERIODIC) {
		struct spoke_handle *aux = spoke_handle_alloc_aux(a);

		if (!aux) {
			spoke_handle_release(s, h, 0); /* never armed: its generation stays */
			return NULL;
		}
		atomic_store_explicit(&aux->per.period_ns, r->period_ns, memory_order_relaxed);
		atomic_store_explicit(&aux->per.base_ns, deadline, memory_order_relaxed);
		aux->per.arg = r->arg;
		__atomic_store_n(&h->arg, (void *)aux, __ATOMIC_RELEASE);
	}
	h->node = (struct spoke_timer){0}; /* spoke_timer_init, inline */
	atomic_store_explicit(&h->deadline_ns, deadline, memory_order_release);
	return h;
}

/*
 * A start that got no handle: its place in the inbox, taken by
 * spoke_any_admit before the handle (so that a refused start touches no
 * arena), goes back.
 */
static int start_no_handle(unsigned k, struct arena *a, bool own)
{
	if (!own)
		spoke_any_unadmit(k, a);
	return -ENOMEM;
}

/*
 * Inline, with start_handle, into the plain, _at and _on starts: with the
 * request a constant the choices of shard, deadline and kind fold away, and
 * the call is one frame (35 instructions less a pair than a call of one
 * out-of-line start_timer with the request in memory). Periodic and TTL
 * starts share one copy, start_timer_outlined.
 */
static inline __attribute__((always_inline)) int
start_timer(struct spoke *s, const struct start_req *r, spoke_id *id)
{
	struct spoke_handle *h;
	struct shard *sh, *mine;
	struct arena *a;
	uint64_t now, deadline, st, due_word = 0;
	spoke_id new_id;
	bool own;
	int k, err = spoke_call_enter(s, &a); /* first: destroy waits for all that follows */

	if (err)
		return err;
	/*
	 * A delay's clock read first, so that nothing found below (the shard,
	 * whether this thread owns it) has to be kept across the call.
	 */
	now = r->absolute ? 0 : spoke_clock_ns();
	/* Once: the atomics below would make the compiler read the thread-locals again. */
	mine = spoke_any_my_shard(s);
	k = start_shard(s, r, mine);
	if (k < 0)
		return spoke_call_leave(a, k);
	sh = &s->shards[k];
	/* The owner's starts are never refused (it is the one that drains the inbox). */
	if (sh != mine && !spoke_any_admit(sh, (unsigned)k, a))
		return spoke_call_leave(a, -ENOBUFS);
	/*
	 * While a rescuer holds the shard (rescue.c) even its owner sends a
	 * message. The owner of an absolute start reads sh->clock_ns
	 * (deadline_at), so it asks first; a delay's asks where it branches.
	 */
	own = r->absolute && owner_holds_due(sh, mine, &due_word);
	deadline = r->absolute ? deadline_at(sh, r->when_ns, own)
			       : deadline_after(sh, now, r->when_ns);
	h = start_handle(s, a, r, deadline);
	if (!h)
		return spoke_call_leave(a, start_no_handle((unsigned)k, a, sh == mine));
	st = spoke_st_armed(spoke_st_gen(atomic_load_explicit(&h->state, memory_order_relaxed)),
			    r->kind, (unsigned)k) |
	     (r->movable ? SPOKE_ST_MOVABLE : 0);
	new_id = spoke_make_id(spoke_st_gen(st), spoke_handle_slot_id(h));
	if (id)
		*id = new_id;
	SPOKE_PROBE3(start, new_id, k, deadline);
	if (r->absolute ? own : owner_holds_due(sh, mine, &due_word)) {
		starter_publish(h, st, true);
		spoke_count(sh, CTR_STARTED, true);
		spoke_owner_arm_new(sh, h, deadline);
		spoke_owner_note_due(sh, deadline, due_word);
	} else {
		starter_publish(h, st, false);
		if (sh == mine)
			spoke_any_post(sh, h, deadline); /* rescued: counted, never refused */
		else
			spoke_any_post_admitted(sh, h, deadline);
	}
	return spoke_call_leave(a, 0);
}

int spoke_start(struct spoke *s, uint64_t delay_ns, spoke_fn *fn, void *arg, spoke_id *id)
{
	if (!s || !fn)
		return -EINVAL;
	return start_timer(s,
			   &(struct start_req){.shard = SHARD_HOME,
					       .kind = SPOKE_KIND_ONESHOT,
					       .when_ns = delay_ns,
					       .fn = fn,
					       .arg = arg},
			   id);
}

int spoke_start_at(struct spoke *s, uint64_t deadline_ns, spoke_fn *fn, void *arg, spoke_id *id)
{
	if (!s || !fn)
		return -EINVAL;
	return start_timer(s,
			   &(struct start_req){.shard = SHARD_HOME,
					       .kind = SPOKE_KIND_ONESHOT,
					       .absolute = true,
					       .when_ns = deadline_ns,
					       .fn = fn,
					       .arg = arg},
			   id);
}

int spoke_start_on(struct spoke *s, unsigned shard, uint64_t delay_ns, spoke_fn *fn, void *arg,
		   spoke_id *id)
{
	if (!s || !fn || shard >= SPOKE_MAX_SHARDS)
		return -EINVAL;
	return start_timer(s,
			   &(struct start_req){.shard = shard,
					       .kind = SPOKE_KIND_ONESHOT,
					       .when_ns = delay_ns,
					       .fn = fn,
					       .arg = arg},
			   id);
}

static int start_timer_outlined(struct spoke *s, const struct start_req *r, spoke_id *id)
{
	return start_timer(s, r, id);
}

int spoke_start_periodic(struct spoke *s, uint64_t period_ns, spoke_fn *fn, void *arg, spoke_id *id)
{
	return spoke_start_flags(s, SPOKE_ANY_SHARD, period_ns, SPOKE_PERIODIC, fn, arg, id);
}

int spoke_start_ttl(struct spoke *s, uint64_t ttl_ns, spoke_fn *fn, void *arg, spoke_id *id)
{
	return spoke_start_flags(s, SPOKE_ANY_SHARD, ttl_ns, SPOKE_TTL, fn, arg, id);
}

int spoke_start_flags(struct spoke *s, unsigned shard, uint64_t when_ns, unsigned flags,
		      spoke_fn *fn, void *arg, spoke_id *id)
{
	unsigned how = flags & (SPOKE_PERIODIC | SPOKE_TTL | SPOKE_ABSOLUTE);
	struct start_req r = {.shard = shard,
			      .kind = SPOKE_KIND_ONESHOT,
			      .absolute = how == SPOKE_ABSOLUTE,
			      .when_ns = when_ns,
			      .fn = fn,
			      .arg = arg,
			      .movable = (flags & SPOKE_MOVABLE) != 0};

	if (!s || !fn || (flags & ~(SPOKE_PERIODIC | SPOKE_TTL | SPOKE_ABSOLUTE | SPOKE_MOVABLE)) ||
	    (how & (how - 1)) || (shard != SPOKE_ANY_SHARD && shard >= SPOKE_MAX_SHARDS))
		return -EINVAL;
	if (how == SPOKE_PERIODIC) {
		if (when_ns == 0)
			return -EINVAL;
		r.kind = SPOKE_KIND_PERIODIC;
		r.period_ns = when_ns;
	} else if (how == SPOKE_TTL) {
		if (shard != SPOKE_ANY_SHARD)
			return -EINVAL;
		r.kind = SPOKE_KIND_TTL;
		r.shard = SHARD_TTL;
	}
	return start_timer_outlined(s, &r, id);
}

/* --- cancel and reset -------------------------------------------------------- */

/*
 * Resolve an id to its handle and current state word; NULL if the id is
 * malformed or its generation is over.
 */
static struct spoke_handle *resolve(struct spoke *s, spoke_id id, uint64_t *st)
{
	struct spoke_handle *h = spoke_handle_lookup(s, id);

	if (!h)
		return NULL;
	*st = atomic_load_explicit(&h->state, memory_order_acquire);
	return spoke_st_gen(*st) == spoke_st_gen(id) ? h : NULL;
}

/*
 * Cancel on the owner thread (its home arena `home`): end the generation,
 * unlink and free at once (no message).
 */
static int cancel_direct(struct shard *sh, struct arena *home, struct spoke_handle *h, uint64_t st)
{
	if (!owner_cancel_direct(h, st))
		return -EAGAIN;
	spoke_owner_disarm_word(sh, h, st);
	spoke_count(sh, CTR_CANCELLED, true);
	spoke_handle_release_mine(sh->s, home, h, st);
	return 0;
}

/*
 * One attempt at cancelling; -EAGAIN means the state changed under us. The
 * owner cancels its own armed timer directly; anyone else marks the word
 * (protocol.h any_try_cancel) and, if it set INBOX, tells the owner.
 */
static int cancel_once(struct spoke *s, struct arena *a, struct spoke_handle *h, uint64_t st)
{
	struct shard *sh = &s->shards[spoke_st_shard(st)];
	bool post = false;
	int r;

	if (spoke_st_status(st) == SPOKE_ST_ARMED && !(st & (SPOKE_ST_INBOX | SPOKE_ST_WRITING)) &&
	    owner_holds(sh, spoke_any_my_shard(s)))
		return cancel_direct(sh, a, h, st);
	r = any_try_cancel(h, st, &post);
	if (r == 0 && post)
		spoke_any_post(sh, h, UINT64_MAX); /* unlink: not urgent */
	return r;
}

/* Inline: spoke_cancel is this and the guard, one frame. */
static inline __attribute__((always_inline)) int cancel_id(struct spoke *s, struct arena *a,
							   spoke_id id)
{
	for (;;) {
		uint64_t st;
		struct spoke_handle *h = resolve(s, id, &st);
		int r;

		if (!h)
			return -ENOENT;
		r = cancel_once(s, a, h, st);
		if (r != -EAGAIN)
			return r;
	}
}

int spoke_cancel(struct spoke *s, spoke_id id)
{
	struct arena *a;
	int err = spoke_call_enter(s, &a);

	if (err)
		return err;
	err = cancel_id(s, a, id);
	SPOKE_PROBE2(cancel, id, err);
	return spoke_call_leave(a, err);
}

/*
 * Sleep until no run of generation `gen` of h is in progress: 0, or
 * -EDEADLK once a destroy has broken the wait w (waits.c).
 */
static int wait_not_running(struct spoke_handle *h, uint32_t gen, const struct spoke_wait *w)
{
	for (;;) {
		uint64_t st = atomic_load_explicit(&h->state, memory_order_acquire);

		if (spoke_st_gen(st) != gen || spoke_st_status(st) != SPOKE_ST_RUNNING)
			return 0;
		if (spoke_wait_broken(w))
			return -EDEADLK;
		if (!(st & SPOKE_ST_WAITERS) && !waiter_set_waiters(h, &st))
			continue;
		/* Bounded sleep: a missed wake-up costs at most a millisecond. */
		spoke_ec_wait_word(spoke_state_futex(h), (uint32_t)(st | SPOKE_ST_WAITERS),
				   1000000);
	}
}

/*
 * Sleep until the run of (h, id) of s ends; -EDEADLK, without waiting, if
 * it is the caller's own run or the wait would close a cycle (waits.c),
 * and as soon as a destroy closing one breaks it.
 */
static int wait_run_end(struct spoke *s, struct spoke_handle *h, spoke_id id)
{
	struct spoke_wait w = {.kind = SPOKE_WAIT_RUN, .s = s, .h = h, .id = id, .in_call = s};
	int err;

	if (spoke_running_in_callback(h))
		return -EDEADLK;
	err = spoke_waits_enter(&w);
	if (err)
		return err;
	err = wait_not_running(h, spoke_st_gen(id), &w);
	spoke_waits_leave(&w);
	return err;
}

int spoke_cancel_sync(struct spoke *s, spoke_id id)
{
	struct spoke_handle *h;
	struct arena *a;
	uint64_t st;
	int err, r;

	err = spoke_call_enter(s, &a);
	if (err)
		return err;
	r = cancel_id(s, a, id);
	h = resolve(s, id, &st);
	if (h && spoke_st_status(st) == SPOKE_ST_RUNNING) {
		err = wait_run_end(s, h, id);
		if (err)
			r = err;
	}
	SPOKE_PROBE2(cancel, id, r);
	return spoke_call_leave(a, r);
}

/*
 * Can a reset of word st (just claimed) to deadline d leave the timer where
 * it is? Yes for a one-shot timer in its engine or on the stage, with no
 * message queued, moved later: its place there is still at or before d, so
 * the owner meets it in time, and then re-arms it for d (shard.c claim_expiry).
 * An idle timeout reset on every request so costs its owner nothing until it
 * comes due: a foreign reset sends no message, the owner's own moves nothing.
 * Periodic timers keep their phase from a message, TTL timers must change
 * queue, and an earlier deadline must move now.
 */
static bool reset_is_later(const struct spoke_handle *h, uint64_t st, uint64_t d)
{
	return spoke_st_status(st) == SPOKE_ST_ARMED && spoke_st_kind(st) == SPOKE_KIND_ONESHOT &&
	       !(st & SPOKE_ST_INBOX) &&
	       d >= atomic_load_explicit(&h->deadline_ns, memory_order_relaxed);
}

/*
 * Reset on the owner thread: move the engine node at once, unless the
 * deadline moved later (reset_is_later). The owner holds
 * WRITING while it stores the deadline, as a foreign reset does: a foreign
 * reset that came after its claim and stored its own deadline first would
 * otherwise be overwritten by an earlier reset, and a third reset riding on
 * that one's WRITING (returning 0 "just before it") would see the timer run
 * at the overwritten deadline. Finding WRITING, a foreign reset returns 0
 * at once, ordered before this one; a foreign cancel sets CANCELLED | INBOX
 * and the owner retires it in its next turn, after this has cleared WRITING.
 */
static int reset_direct(struct shard *sh, struct spoke_handle *h, uint64_t st, uint64_t d,
			uint64_t due_word)
{
	bool later;

	if (!owner_reset_claim(h, st))
		return -EAGAIN;
	SPOKE_HOOK(SPOKE_HOOK_DIRECT_RESET_CLAIMED);
	/* On the stage it moves anyway: its slot would wake the owner for nothing. */
	later = reset_is_later(h, st, d) && !spoke_stage_holds(&h->node);
	atomic_store_explicit(&h->deadline_ns, d, memory_order_relaxed);
	spoke_handle_set_base(h, st, d);
	if (!later) {
		spoke_owner_arm(sh, h, d);
		spoke_owner_note_due(sh, d, due_word);
	}
	owner_reset_release(h);
	return 0;
}

/*
 * Second half of a foreign reset: we hold WRITING and have stored deadline_ns;
 * publish it (RESET, and a message if the timer is armed and must move),
 * whatever else changed meanwhile. A `later` reset sends no message: the
 * owner finds the new deadline when the old one comes (shard.c claim_expiry),
 * unless it has met the timer meanwhile and asked for one (RESET). A cancel
 * (or the end of a run) may have won in between: then the timer never runs
 * again, this reset is ordered before its end, and if that end already came
 * (ORPHAN) it is ours to free the handle.
 */
static void reset_publish(struct shard *sh, struct spoke_handle *h, uint64_t d, bool later)
{
	uint64_t next, st = writer_publish(h, later, &next);

	if (st & SPOKE_ST_ORPHAN)
		spoke_handle_release(sh->s, h, st);
	else if ((next & SPOKE_ST_INBOX) && !(st & SPOKE_ST_INBOX))
		spoke_any_post(sh, h, d);
	else if ((next & SPOKE_ST_INBOX) && spoke_st_status(next) == SPOKE_ST_ARMED)
		spoke_any_nudge(sh, d); /* rides on a message queued for a later deadline */
}

/*
 * One attempt at a reset; -EAGAIN means the state changed under us. A foreign
 * reset first claims WRITING (bumping the sequence), then stores
 * deadline_ns, then publishes: so only the reset that will be published ever
 * writes deadline_ns, and a reset that loses a race never leaves its deadline
 * behind. A reset that finds another one WRITING returns 0 at once: the two
 * overlap, and it is ordered just before the one in progress, whose deadline
 * wins. While WRITING is set the owner does not fire the timer.
 */
static int reset_once(struct spoke *s, struct spoke_handle *h, uint64_t st, uint64_t delay_ns)
{
	struct shard *sh = &s->shards[spoke_st_shard(st)];
	uint64_t d = deadline_on(sh, delay_ns), due_word;
	bool periodic = spoke_st_kind(st) == SPOKE_KIND_PERIODIC, later;

	switch (spoke_st_status(st)) {
	case SPOKE_ST_ARMED:
		if (st & SPOKE_ST_WRITING)
			return 0;
		if (!(st & SPOKE_ST_INBOX) && owner_holds_due(sh, spoke_any_my_shard(s), &due_word))
			return reset_direct(sh, h, st, d, due_word);
		break;
	case SPOKE_ST_DISPATCHED:
		/* Due, its callback not started: the runner hands it back (runner_undispatch). */
		if (st & SPOKE_ST_WRITING)
			return 0;
		break;
	case SPOKE_ST_RUNNING:
		/* A periodic timer between runs: the reset moves its next run. */
		if (!periodic || (st & SPOKE_ST_STOP))
			return -ENOENT;
		if (st & SPOKE_ST_WRITING)
			return 0;
		break;
	default:
		return -ENOENT;
	}
	if (!any_reset_claim(h, st))
		return -EAGAIN;
	SPOKE_HOOK(SPOKE_HOOK_RESET_CLAIMED);
	later = reset_is_later(h, st, d);
	atomic_store_explicit(&h->deadline_ns, d, memory_order_relaxed);
	SPOKE_HOOK(SPOKE_HOOK_RESET_STORED);
	reset_publish(sh, h, d, later);
	return 0;
}

int spoke_reset(struct spoke *s, spoke_id id, uint64_t delay_ns)
{
	struct arena *a;
	int err, r;

	err = spoke_call_enter(s, &a);
	if (err)
		return err;
	do {
		uint64_t st;
		struct spoke_handle *h = resolve(s, id, &st);

		r = h ? reset_once(s, h, st, delay_ns) : -ENOENT;
		if (r == 0)
			spoke_count(&s->shards[spoke_st_shard(st)], CTR_RESET,
				    spoke_any_owns_shard(&s->shards[spoke_st_shard(st)]));
	} while (r == -EAGAIN);
	SPOKE_PROBE3(reset, id, delay_ns, r);
	return spoke_call_leave(a, r);
}

/* --- what a timer has left, and what a callback runs for ------------------- */

int64_t spoke_remaining(struct spoke *s, spoke_id id)
{
	struct spoke_handle *h;
	struct arena *a;
	uint64_t st, d, now;
	int err;

	err = spoke_call_enter(s, &a);
	if (err)
		return err;
	h = resolve(s, id, &st);
	if (!h || !pending_word(st) || (d = next_run_ns(h, st)) == 0)
		return spoke_call_leave(a, -ENOENT);
	now = spoke_clock_ns();
	spoke_call_leave(a, 0);
	if (d <= now)
		return 0;
	return d - now > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)(d - now);
}

spoke_id spoke_self(uint64_t *due_ns)
{
	const struct spoke_run *r = spoke_current_run();

	if (!r)
		return 0;
	if (due_ns)
		*due_ns = r->due_ns;
	return r->id;
}

/*
 * The period of a periodic timer is read by its runner when a run ends
 * (run.c finish_run), and its second slot may be freed by whoever ends the
 * timer. Two threads can write it without racing that: the timer's runner
 * (from inside its callback), and its shard's owner while it is armed with
 * no message queued (a foreign cancel then leaves the freeing to this very
 * owner, after the call).
 */
int spoke_set_period(struct spoke *s, spoke_id id, uint64_t period_ns)
{
	struct spoke_handle *h;
	struct arena *a;
	uint64_t st;
	int err;

	if (!s || period_ns == 0)
		return -EINVAL;
	err = spoke_call_enter(s, &a);
	if (err)
		return err;
	h = resolve(s, id, &st);
	if (!h || !pending_word(st))
		return spoke_call_leave(a, -ENOENT);
	if (spoke_st_kind(st) != SPOKE_KIND_PERIODIC)
		return spoke_call_leave(a, -EINVAL);
	if (!spoke_running_in_callback(h) &&
	    !(spoke_st_status(st) == SPOKE_ST_ARMED && !(st & SPOKE_ST_INBOX) &&
	      owner_holds(&s->shards[spoke_st_shard(st)], spoke_any_my_shard(s))))
		return spoke_call_leave(a, -EPERM);
	atomic_store_explicit(&spoke_periodic_of(h)->period_ns, period_ns, memory_order_relaxed);
	return spoke_call_leave(a, 0);
}
