/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * state.pml - a Promela model of one timer's state word (percpu/state.h) and
 * of every thread that changes it, checked exhaustively with Spin
 * (scripts/spin.sh, docs/model.md).
 *
 * One timer handle (one slot, reused by up to GENS starts), one owner shard
 * (the owner thread: its engine, its inbox, its clock), NFOREIGN foreign
 * threads making API calls, and one pool worker (the runner). Counters are
 * shrunk so that wrap-around is reachable: a 2-bit reset sequence and a
 * 2-bit generation (generation 0 spent, as in arena.c). Time is an abstract
 * clock `now` (0..TMAX) that only the owner advances; deadlines are small
 * integers. Memory is sequentially consistent (see docs/model.md).
 *
 * What each part stands for (file:function). Every change of the word is
 * one function of percpu/protocol.h, named for the thread that may make
 * it; each step below names the one it models:
 *
 *   CAS(), the d_step blocks     the transitions of protocol.h (each block
 *                                names its function)
 *   post()                       shard.c:spoke_any_post (the inbox: one
 *                                node per handle, so "queued twice" is an
 *                                assertion)
 *   arm(), disarm()              shard.c:spoke_owner_arm / spoke_owner_disarm
 *                                (engine and stage folded into one slot:
 *                                eng_on, eng_d); arm() of a new generation
 *                                (start(1), a FRESH message) is
 *                                spoke_owner_arm_new, which skips the
 *                                disarm: release() asserts such a slot is
 *                                in no engine
 *   release()                    arena.c:spoke_handle_release (checks: not
 *                                freed twice, not queued, not in an engine)
 *   start(1), start(0)           api.c:start_timer, direct (owner) branch /
 *                                posting branch: starter_publish
 *   resolve()                    api.c:resolve
 *   cancel_id                    api.c:spoke_cancel -> cancel_id -> cancel_once:
 *                                any_try_cancel; its r == 9 branch is
 *                                api.c:cancel_direct: owner_cancel_direct,
 *                                owner_free_cancelled
 *   cancel_sync                  api.c:spoke_cancel_sync
 *   wait_not_running             api.c:wait_not_running: waiter_set_waiters
 *                                (futex: futex_wait / futex_wake below stand
 *                                for eventcount.c spoke_ec_wait_word /
 *                                spoke_ec_wake_word, with no timeout, so a
 *                                lost wake-up deadlocks)
 *   reset, reset_claim           api.c:spoke_reset -> reset_once:
 *                                foreign_reset_claim; the r == 9 branches
 *                                are api.c:reset_direct: owner_reset_claim,
 *                                owner_reset_release
 *   reset_publish                api.c:reset_publish: writer_publish (later =
 *                                api.c:reset_is_later)
 *   owner_claim_run              shard.c:claim_expiry: owner_claim_expiry,
 *                                owner_ask_reset_message (+ FIXED:
 *                                owner_give_back)
 *   run_or_dispatch              shard.c:run_or_dispatch (inline when INLINE,
 *                                else spoke_owner_dispatch)
 *   handle_message               shard.c:handle_message: owner_take_message
 *                                (+ retire_cancelled,
 *                                spoke_owner_rearm_periodic)
 *   retire_cancelled             shard.c:retire_cancelled:
 *                                owner_retire_cancelled
 *   run_callback                 pool.c:spoke_runner_run
 *   runner_claim                 pool.c:claim_run: runner_claim_run (with
 *                                runner_undispatch and
 *                                runner_retire_cancelled)
 *   finish_run                   pool.c:finish_run: runner_finish (+
 *                                periodic_next_ns; not its parked case:
 *                                destroy is not modelled); `direct` is
 *                                whether the runner owns the shard, which
 *                                pool.c takes once, before the callback
 *                                (no thread here attaches or detaches)
 *   proctype owner               shard.c:spoke_owner_turn / shard_main: stage
 *                                and engine expiry (on_expire, stage_run_due),
 *                                take_messages, the clock; and API calls made
 *                                on the owner thread (owned_by_me)
 *   proctype runner              pool.c:worker_main / worker_run
 *   proctype foreign             an application thread that owns no shard
 *
 * Not modelled: runner_recall (a run handed back to an attached shard),
 * owner_make_oneshot (TTL timers and the lawn), and the words no id names
 * (starter_init_fresh, starter_mark_aux, retirer_free_aux).
 *
 * The contract (DESIGN.md section 4, docs/service.md), as assertions:
 *   exactly once       a one-shot generation runs once or one cancel returns
 *                      0, never both (checked at each), never neither (at
 *                      the end, once every thread is done and the clock is
 *                      past every deadline)
 *   not early          a run starts at now >= the deadline of the last start
 *                      or reset that returned 0; of overlapping resets, any
 *                      may be the last (ghost cand*, infl*); a one-shot's
 *                      reset begun after its run started never returns 0
 *   no run after a     a run never starts after a cancel of its generation
 *   cancel             returned 0 (also a periodic's STOP)
 *   no overlap         a periodic timer never runs concurrently with itself
 *   cancel_sync        returns with no run of its generation in progress
 *   plus               no double free, no handle freed while queued or in
 *                      an engine, one message per handle, one pool entry,
 *                      INBOX only on the statuses handle_message expects,
 *                      no deadlock (lost wake-up or lost message)
 *
 * Build switches (spin -D...): FIXED (0: shard.c claim_expiry before the
 * give-back after the claim, owner_give_back; 1: today's), DIRECT_FIX (0: api.c reset_direct
 * before it held WRITING across its store; 1: today's), NFOREIGN, FOPS (calls per foreign
 * thread), OOPS (calls made on the owner thread), TMAX, KIND (0 one-shot,
 * 1 periodic, 2 either), GENS (starts of the slot), INLINE (1: the owner may
 * run a callback itself, as with callback_threads = 0 or attached).
 */

#ifndef FIXED
#define FIXED 1
#endif
#ifndef NFOREIGN
#define NFOREIGN 2
#endif
#ifndef FOPS
#define FOPS 2
#endif
#ifndef OOPS
#define OOPS 1
#endif
#ifndef TMAX
#define TMAX 3
#endif
#ifndef PERIOD
#define PERIOD 2
#endif
#ifndef KIND
#define KIND 0
#endif
#ifndef GENS
#define GENS 1
#endif
#ifndef INLINE
#define INLINE 0
#endif
#ifndef DIRECT_FIX
#define DIRECT_FIX 1
#endif

/* --- the word (state.h), shrunk ------------------------------------------ */
#define ST_MASK	  7
#define S_FREE	  0
#define S_ARMED	  1
#define S_DISP	  2
#define S_RUNNING 3
#define S_CANC	  4
#define INBOX	  8
#define RESET	  16
#define STOP	  32
#define WAITERS	  64
#define PERIODIC  128	/* kind: 0 one-shot, 1 periodic (one bit: no TTL) */
#define SEQ_ONE	  256	/* sequence: bits 8..9 */
#define SEQ_MASK  768
#define WRITING	  1024
#define ORPHAN	  2048
#define FRESH	  4096
#define GEN_SHIFT 13	/* generation: bits 13..14 */
#define GEN_MASK  24576
#define LOW_MASK  8191	/* what the futex compares (the low 32 bits in C) */

#define status(s)	((s) & ST_MASK)
#define gen(s)		(((s) >> GEN_SHIFT) & 3)
#define with_status(s, x) (((s) & ~ST_MASK) | (x))
#define bump_seq(s)	(((s) & ~SEQ_MASK) | (((s) + SEQ_ONE) & SEQ_MASK))
#define freed(s)	(((((s) >> GEN_SHIFT) + 1) & 3) << GEN_SHIFT)
#define retired(s)	(((s) & WRITING) -> \
			 ((with_status(s, S_CANC) | ORPHAN) & ~(WAITERS | INBOX | RESET | STOP | FRESH)) : \
			 (freed(s)))

/* --- shared state -------------------------------------------------------- */
short W = (1 << GEN_SHIFT);	/* h->state: FREE, generation 1 */
byte deadline;			/* h->deadline_ns */
byte base;			/* spoke_periodic.base_ns */
byte now;			/* the owner's clock (sh->clock_ns) */
bool eng_on;			/* h is pending in an engine or on the stage */
byte eng_d;			/* ... for this deadline */
bool inq;			/* h is on its owner's inbox */
bool poolq;			/* h is on the pool queue */
bool slot_free = 1;		/* h is on its arena's free list */
byte cur_gen;			/* generation of the newest id handed out */
byte ngens;			/* starts so far */
byte fdone;			/* foreign threads finished */
bool runner_busy;
bool fsleep[8];			/* futex sleepers, by _pid */

/* ghosts: the contract's bookkeeping, per generation */
byte runs[4];
byte cancel0[4];
/*
 * "Not early" with overlapping calls: two resets whose calls overlap may be
 * ordered either way (docs/service.md), so a run at `now` is early only if
 * now is below the deadline of every reset that could have been ordered
 * last: the last one to return on each thread that no later-invoked reset
 * has since superseded (cand*), and every reset still in flight (infl*).
 * ep counts returns; a start supersedes everything of older generations.
 */
#define NP 8
byte ep;
bool cand[NP]; byte cand_d[NP]; byte cand_e[NP]; byte cand_g[NP];
bool infl[NP]; byte infl_d[NP]; byte infl_e[NP]; byte infl_g[NP]; byte infl_runs[NP];
byte gi, gL;	/* scratch, inside d_step only */
bool started[4];
bool oneshot[4];
bool running;
byte run_gen;

/* --- helpers --------------------------------------------------------------- */

/* Locals every proctype declares (inlines share them; cleared after each
 * call so that dead values do not split states). */
#define LOCALS \
	short st, next, cs, cnext, rs, fs, fnext, ps, pnext; \
	short clear; byte d, d2, r, g; \
	bool ok, later, claimed, rearm

#define CLEAR_LOCALS_BODY \
	st = 0; next = 0; cs = 0; cnext = 0; rs = 0; fs = 0; fnext = 0; ps = 0; \
	pnext = 0; d = 0; d2 = 0; r = 0; g = 0; clear = 0; ok = 0; later = 0; \
	claimed = 0; rearm = 0
#define CLEAR_LOCALS atomic { CLEAR_LOCALS_BODY }

#define EAGAIN 1
#define ENOENT 2

/* compare-and-swap on h->state; on failure exp gets the current word */
#define CAS(exp, nv, ok_) \
	d_step { if :: W == (exp) -> W = (nv); ok_ = 1 :: else -> exp = W; ok_ = 0 fi }

inline post() { d_step { assert(!inq); inq = 1 } }
inline arm(dl) { eng_on = 1; eng_d = dl }
inline disarm() { eng_on = 0; eng_d = 0 }
inline release() {
	d_step { assert(!slot_free); assert(!inq); assert(!poolq); assert(!eng_on); slot_free = 1 }
}
inline futex_wake() {
	d_step { fsleep[0] = 0; fsleep[1] = 0; fsleep[2] = 0; fsleep[3] = 0;
		 fsleep[4] = 0; fsleep[5] = 0; fsleep[6] = 0; fsleep[7] = 0 }
}
inline futex_wait(val) {
	d_step { if :: (W & LOW_MASK) == ((val) & LOW_MASK) -> fsleep[_pid] = 1 :: else fi };
	(!fsleep[_pid])
}

/* a deadline from now: deadline_on (delay 0 = next tick; none past TMAX) */
inline pick_deadline(dl) {
	atomic { if
	:: now >= TMAX - 1 -> dl = TMAX
	:: else ->
		if
		:: dl = now + 1
		:: dl = TMAX
		:: (now + 2 < TMAX) -> dl = now + 2
		fi
	fi }
}

inline pick_kind(k) {
#if KIND == 0
	k = 0
#elif KIND == 1
	k = PERIODIC
#else
	if :: k = 0 :: k = PERIODIC fi
#endif
}

/*
 * api.c:start_timer, starter_publish. Owner: ARMED, into its engine; else
 * ARMED|INBOX|RESET|FRESH and a message.
 */
inline start(direct) {
	d_step { slot_free = 0; ngens++ }; /* spoke_handle_alloc */
	pick_deadline(d);
	pick_kind(cnext);
	d_step {
		deadline = d; base = d;
		g = gen(W); cur_gen = g; started[g] = 1; oneshot[g] = (cnext == 0);
		runs[g] = 0; cancel0[g] = 0;
		gi = 0;
		do
		:: gi < NP -> cand[gi] = 0; gi++
		:: else -> break
		od;
		ep++; cand[_pid] = 1; cand_d[_pid] = d; cand_e[_pid] = ep; cand_g[_pid] = g; gi = 0
	};
	if
	:: direct -> W = (g << GEN_SHIFT) | cnext | S_ARMED; arm(d)
	:: else -> W = (g << GEN_SHIFT) | cnext | S_ARMED | INBOX | RESET | FRESH; post()
	fi
}

/*
 * A loop of "load the word, decide from it alone, compare-and-swap, retry
 * on failure" has exactly the effect of one atomic read-modify-write at
 * its successful CAS, so such loops are one d_step here (it shrinks the
 * state space; no interleaving is lost that could change an outcome).
 * Where a decision also reads another shared field (deadline_ns), the load,
 * that read and the CAS stay separate steps: shard.c claim_expiry.
 */

/* api.c:resolve: the word, and whether the id (generation g) still names it */
inline resolve() { atomic { st = W; ok = (gen(st) == g) } }

/* --- cancel ---------------------------------------------------------------- */

/*
 * api.c:cancel_id -> resolve -> cancel_once, up to its CAS (the loop on
 * -EAGAIN folded into one step); r: 0, ENOENT (any_try_cancel), or 9 =
 * cancel_direct's CAS (owner_cancel_direct: ARMED -> CANCELLED by the owner). The CAS that makes a cancel return 0
 * marks the ghosts "exactly once" and "no run after".
 */
inline cancel_id(me_owner) {
	d_step {
		st = W;
		if
		:: gen(st) != g -> r = ENOENT
		:: else ->
			if
			:: status(st) == S_ARMED ->
				if
				:: !(st & (INBOX | WRITING)) && me_owner -> next = with_status(st, S_CANC); r = 9
				:: else -> next = with_status(st, S_CANC) | INBOX; r = 0
				fi
			:: status(st) == S_DISP -> next = with_status(st, S_CANC); r = 0
			:: status(st) == S_RUNNING ->
				if
				:: !(st & PERIODIC) || (st & STOP) -> r = ENOENT
				:: else -> next = st | STOP; r = 0
				fi
			:: else -> r = ENOENT
			fi;
			if
			:: r != ENOENT ->
				W = next; cancel0[g]++;
				assert(!oneshot[g] || runs[g] + cancel0[g] <= 1)
			:: else
			fi
		fi
	};
	if
	:: r == 9 ->	/* api.c:cancel_direct, after its CAS */
		disarm();
		d_step { assert(W == next); W = freed(next) };	/* owner_free_cancelled */
		release();
		r = 0
	:: r == 0 && status(st) == S_ARMED && !(st & INBOX) -> post()
	:: else
	fi
}

/* api.c:wait_not_running (protocol.h waiter_set_waiters) */
inline wait_not_running() {
	do
	:: d_step {	/* load; set WAITERS by CAS unless set (the retry folded in) */
		st = W;
		if
		:: gen(st) != g || status(st) != S_RUNNING -> ok = 1
		:: else -> ok = 0; W = st | WAITERS; st = W
		fi
	   };
		if
		:: ok -> break
		:: else -> futex_wait(st)
		fi
	od;
	assert(!(running && run_gen == g))	/* cancel_sync: no run in progress */
}

/* api.c:spoke_cancel_sync (not from the timer's own callback: -EDEADLK is not modelled) */
inline cancel_sync(me_owner) {
	cancel_id(me_owner);
	resolve();
	if
	:: ok && status(st) == S_RUNNING -> wait_not_running()
	:: else
	fi
}

/* --- reset ----------------------------------------------------------------- */

/*
 * api.c:reset_publish; its CAS loop, protocol.h writer_publish, depends on
 * the word, `later` and nothing else
 */
inline reset_publish() {
	d_step {
		ps = W;
		pnext = ps & ~WRITING;
		if
		:: ps & ORPHAN -> pnext = freed(ps)
		:: else ->
			if
			:: status(ps) == S_ARMED && (!later || (ps & RESET)) -> pnext = pnext | RESET | INBOX
			:: status(ps) != S_CANC && status(ps) != S_ARMED -> pnext = pnext | RESET
			:: else
			fi
		fi;
		W = pnext
	};
	if
	:: ps & ORPHAN -> release()
	:: (pnext & INBOX) && !(ps & INBOX) -> post()
	:: else /* nudge: no queue change */
	fi
}

/*
 * api.c:spoke_reset -> resolve -> reset_once, up to its CAS (the -EAGAIN
 * loop folded in): r = 9 after reset_direct's CAS (owner_reset_claim: owner,
 * ARMED, no INBOX), 8 after the CAS that claims WRITING
 * (foreign_reset_claim), else the call's result.
 */
inline reset_claim(me_owner) {
	d_step {
		st = W;
		r = 8;
		if
		:: gen(st) != g -> r = ENOENT
		:: else ->
			if
			:: status(st) == S_ARMED ->
				if
				:: st & WRITING -> r = 0
				:: else -> if :: !(st & INBOX) && me_owner -> r = 9 :: else fi
				fi
			:: status(st) == S_DISP -> if :: st & WRITING -> r = 0 :: else fi
			:: status(st) == S_RUNNING ->
				if
				:: !(st & PERIODIC) || (st & STOP) -> r = ENOENT
				:: else -> if :: st & WRITING -> r = 0 :: else fi
				fi
			:: else -> r = ENOENT
			fi
		fi;
		if
#if DIRECT_FIX
		:: r == 9 -> W = bump_seq(st) | WRITING	/* hold WRITING across the store */
#else
		:: r == 9 -> W = bump_seq(st)
#endif
		:: r == 8 -> W = bump_seq(st) | WRITING
		:: else
		fi
	}
}

/* ghost: a reset call begins (deadline d, id generation g) */
inline reset_begins() {
	d_step { infl[_pid] = 1; infl_d[_pid] = d; infl_e[_pid] = ep; infl_g[_pid] = g;
		 infl_runs[_pid] = runs[g] }
}

/* ghost: it returns r */
inline reset_returns() {
	d_step {
		if
		:: r == 0 ->
			/* a one-shot's reset that began after its run started cannot return 0 */
			assert(!oneshot[g] || infl_runs[_pid] == 0);
			gi = 0;
			do
			:: gi < NP ->
				if :: cand[gi] && cand_e[gi] <= infl_e[_pid] -> cand[gi] = 0 :: else fi;
				gi++
			:: else -> break
			od;
			ep++; cand[_pid] = 1; cand_d[_pid] = d; cand_e[_pid] = ep; cand_g[_pid] = g; gi = 0
		:: else
		fi;
		infl[_pid] = 0; infl_d[_pid] = 0; infl_e[_pid] = 0; infl_g[_pid] = 0; infl_runs[_pid] = 0
	}
}

/* api.c:spoke_reset */
inline reset(me_owner) {
	pick_deadline(d);
	reset_begins();
	reset_claim(me_owner);
	if
	:: r == 9 ->	/* api.c:reset_direct, after its CAS */
		deadline = d;
		if :: st & PERIODIC -> base = d :: else fi;	/* spoke_handle_set_base */
		arm(d);
#if DIRECT_FIX
		d_step { W = W & ~WRITING };	/* owner_reset_release: a foreign cancel may have won */
#endif
		r = 0
	:: r == 8 ->	/* api.c:reset_once, WRITING claimed */
		later = (status(st) == S_ARMED && !(st & PERIODIC) && !(st & INBOX) &&
			 d >= deadline);	/* reset_is_later */
		deadline = d;
		reset_publish();
		r = 0
	:: else
	fi;
	reset_returns()
}

/* --- running --------------------------------------------------------------- */

/* pool.c:finish_run (the CAS loop: protocol.h runner_finish) */
inline finish_run(direct) {
	fs = W;
	if
	:: (fs & PERIODIC) && !(fs & STOP) ->	/* periodic_next_ns */
		if
		:: base + PERIOD > now -> base = base + PERIOD
		:: else -> base = base + ((now - base) / PERIOD + 1) * PERIOD
		fi
	:: else
	fi;
	d_step {	/* the CAS loop: RUNNING -> retired, or ARMED (re-arm) */
		fs = W;
		rearm = (fs & PERIODIC) && !(fs & STOP);
		if
		:: !rearm -> fnext = retired(fs)
		:: rearm && direct -> fnext = with_status(fs, S_ARMED) & ~(WAITERS | RESET)
		:: rearm && !direct -> fnext = (with_status(fs, S_ARMED) | INBOX) & ~WAITERS
		fi;
		assert(status(fs) == S_RUNNING);
		W = fnext; running = 0
	};
	if :: fs & WAITERS -> futex_wake() :: else fi;
	if
	:: !rearm -> if :: !(fs & WRITING) -> release() :: else fi
	:: rearm && direct ->	/* spoke_owner_rearm_periodic */
		if :: fs & RESET -> base = deadline :: else fi;
		arm(base)
	:: rearm && !direct -> post()
	fi
}

/*
 * pool.c:claim_run: protocol.h runner_claim_run (with runner_undispatch
 * and runner_retire_cancelled); its loop decides on the word alone:
 * claimed = 1, run it.
 */
inline runner_claim() {
	d_step {
		rs = W;
		if
		:: status(rs) == S_DISP && !(rs & (RESET | WRITING)) ->
			W = with_status(rs, S_RUNNING); claimed = 1;
			/* the run starts: the contract */
			g = gen(rs);
			assert(cancel0[g] == 0);	/* no run after a cancel returned 0 */
			gL = 255; gi = 0;	/* not before the last reset's deadline */
			do
			:: gi < NP ->
				if
				:: cand[gi] && cand_g[gi] == g && cand_d[gi] < gL -> gL = cand_d[gi]
				:: else
				fi;
				if
				:: infl[gi] && infl_g[gi] == g && infl_d[gi] < gL -> gL = infl_d[gi]
				:: else
				fi;
				gi++
			:: else -> break
			od;
			assert(gL != 255 && now >= gL);
			gL = 0; gi = 0;
			assert(!running);		/* no overlap */
			running = 1; run_gen = g; runs[g]++;
			assert(!oneshot[g] || runs[g] + cancel0[g] <= 1)	/* exactly once */
		:: status(rs) == S_CANC ->
			W = retired(rs); claimed = 0
		:: else ->
			assert(status(rs) == S_DISP);	/* a reset won: undispatch */
			W = with_status(rs, S_ARMED) | INBOX; claimed = 0
		fi
	};
	if
	:: claimed -> skip
	:: status(rs) == S_CANC -> if :: !(rs & WRITING) -> release() :: else fi
	:: else -> post()
	fi
}


/* pool.c:spoke_runner_run */
inline run_callback(direct) {
	runner_claim();
	if
	:: claimed ->
		skip;	/* h->fn(arg): any other thread may step meanwhile */
		finish_run(direct)
	:: else
	fi
}

/* shard.c:run_or_dispatch */
inline run_or_dispatch() {
#if INLINE
	if
	:: run_callback(1)
	:: d_step { assert(!poolq); poolq = 1 }
	fi
#else
	d_step { assert(!poolq); poolq = 1 }	/* spoke_owner_dispatch */
#endif
}

/*
 * shard.c:claim_expiry: the owner met h leaving its engine or the stage;
 * its CASes are protocol.h owner_ask_reset_message (cs | RESET),
 * owner_claim_expiry (ARMED -> DISPATCHED) and owner_give_back.
 */
inline owner_claim_run() {
	cs = W;
	do
	:: (cs & INBOX) || status(cs) != S_ARMED -> cnext = 0; break	/* a message decides */
	:: else ->
		if
		:: cs & WRITING ->
			if
			:: cs & RESET -> cnext = 0; break
			:: else -> cnext = cs | RESET
			fi
		:: else ->
			/* armed_deadline */
			if :: cs & PERIODIC -> d = base :: else -> d = deadline fi;
			if
			:: d > now -> arm(d); cnext = 0; break
			:: else -> cnext = with_status(cs, S_DISP)
			fi
		fi;
		CAS(cs, cnext, ok);
		if :: ok -> break :: else fi
	od;
	if
	:: cnext == 0 || (cnext & WRITING) -> skip
	:: else ->
#if FIXED
		/* the fix: re-read the deadline; give the timer back if it moved later */
		if :: cs & PERIODIC -> d2 = base :: else -> d2 = deadline fi;
		if
		:: d2 > now ->
			CAS(cnext, cs, ok);	/* exactly next -> exactly s */
			if
			:: ok -> arm(d2)
			:: else -> run_or_dispatch()
			fi
		:: else -> run_or_dispatch()
		fi
#else
		run_or_dispatch()
#endif
	fi
}

/* shard.c:retire_cancelled (protocol.h owner_retire_cancelled) */
inline retire_cancelled() {
	disarm();
	d_step {	/* the try_retire loop: only a reset clearing WRITING changes the word */
		st = W; assert(status(st) == S_CANC); W = retired(st)
	};
	if :: !(st & WRITING) -> release() :: else fi
}

/* shard.c:handle_message (taken off the inbox; protocol.h owner_take_message) */
inline handle_message() {
	inq = 0;
	if
	:: status(W) == S_DISP -> clear = INBOX
	:: else -> clear = INBOX | RESET | FRESH
	fi;
	d_step { st = W; W = W & ~clear };	/* owner_take_message's fetch_and */
	if
	:: status(st) == S_ARMED ->
		if
		:: st & RESET ->
			d = deadline;
			if :: st & PERIODIC -> base = d :: else fi;
			arm(d)
		:: else ->
			if
			:: (st & PERIODIC) && !eng_on -> arm(base)	/* spoke_owner_rearm_periodic */
			:: else
			fi
		fi
	:: status(st) == S_CANC -> st = st & ~clear; retire_cancelled()
	:: else -> assert(0)	/* recall (DISPATCHED|INBOX) is not modelled; nothing else has INBOX */
	fi
}

/* --- threads --------------------------------------------------------------- */

proctype owner()
{
	LOCALS;
	byte ops = OOPS;

	do
	:: inq -> handle_message(); CLEAR_LOCALS
	:: eng_on && eng_d <= now -> disarm(); owner_claim_run(); CLEAR_LOCALS	/* expiry */
	:: now < TMAX -> now++
	:: ops > 0 && slot_free && ngens < GENS && gen(W) != 0 -> ops--; start(1); CLEAR_LOCALS
	:: ops > 0 && !slot_free -> ops--; g = cur_gen; reset(1); CLEAR_LOCALS
	:: ops > 0 && !slot_free -> ops--; g = cur_gen; cancel_id(1); CLEAR_LOCALS
	:: fdone == NFOREIGN && !runner_busy && !poolq && !inq && now == TMAX &&
	   (!eng_on || eng_d > now) -> break
	od;
	/* the end: every thread done, every deadline passed */
	assert(!(W & (WRITING | ORPHAN | INBOX)));
	g = 1;
	do
	:: g < 4 ->
		if
		:: started[g] && oneshot[g] -> assert(runs[g] + cancel0[g] == 1)	/* never neither */
		:: else
		fi;
		g++
	:: else -> break
	od;
	/* nothing leaks: freed, or a periodic timer still pending */
	assert(slot_free || ((W & PERIODIC) && status(W) == S_ARMED && eng_on))
}

proctype runner()
{
	LOCALS;
end_idle:
	do
	:: atomic { poolq -> poolq = 0; runner_busy = 1 };
		run_callback(0);
		d_step { runner_busy = 0; CLEAR_LOCALS_BODY }
	od
}

proctype foreign()
{
	LOCALS;
	byte ops = FOPS;

	do
	:: ops > 0 -> ops--;
		g = cur_gen;
		if
		:: slot_free && ngens < GENS && gen(W) != 0 -> start(0)
		:: !slot_free -> reset(0)
		:: !slot_free -> cancel_id(0)
		:: !slot_free -> cancel_sync(0)
		:: else -> skip	/* the timer is over and the slot spent: nothing to call */
		fi;
		CLEAR_LOCALS
	:: ops == 0 -> break
	od;
	fdone++
}

init
{
	LOCALS;
	atomic {
		/* the first start: by the owner or by another thread */
		if
		:: start(1)
		:: start(0)
		fi;
		CLEAR_LOCALS;
		run owner();
		run runner();
		g = 0;
		do
		:: g < NFOREIGN -> run foreign(); g++
		:: else -> break
		od
	}
}
