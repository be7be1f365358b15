/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * state_threads.pml - the code around the transitions (api_timers.c,
 * api_attach.c, api_lifecycle.c, shard.c, managed.c, run.c, pool.c,
 * arena.c), one inline per C function under its name, and one proctype
 * per role (included by state.pml):
 *
 *   owner      the shard's owner thread: shard.c spoke_owner_turn (expiry,
 *              messages, the clock), the calls made on the owner thread
 *              (api_timers.c's direct paths), callbacks run inline, the attach
 *              and the detach (mode changes), and with RESCUE its holds
 *              and let-gos of the shard
 *   worker     a pool worker: pool.c worker_main / worker_run
 *   foreign    an application thread that owns no shard: start, reset,
 *              cancel, cancel_sync
 *   init       the first start, then (DESTROY) spoke_destroy_release
 *   rescuer    a peer taking the shard over for a turn (state_rescue.pml)
 *   drain      the owner's store buffer emptying on its own
 *
 * A new role is a new proctype calling these inlines; a new transition is
 * an inline in state_protocol.pml and a call here.
 */

/* Locals every proctype declares (the inlines share them). */
#if defined(MUTANT_DUE_WRITE_NOT_ATOMIC)
#define LOCALS_DUE ; bool dseen	/* state_rescue.pml due_write */
#else
#define LOCALS_DUE
#endif
#define LOCALS \
	int st, nx; short k; byte d, r, g, gid; bool ok, pl, post_, later LOCALS_DUE
/*
 * gid: the ghost identity of the start an id names (ngens when the id was
 * read), which the 2-bit generation shrinks away. Each proctype also has
 * `self` (SELF_*): who it is, for the checks of who runs and who holds.
 * Dead values cleared after each call, so that they do not split states.
 */
#define CLEAR_LOCALS \
	atomic { st = 0; nx = 0; d = 0; r = 0; g = 0; gid = 0; k = 0; ok = 0; pl = 0; post_ = 0; later = 0 }

/* --- the inbox, the pool queue, the futex ------------------------------------ */

/*
 * shard.c spoke_any_post: one node per handle, posted by whoever set INBOX;
 * then spoke_any_nudge, which may lower the shard's due (due_write)
 */
inline any_post() {
	d_step { assert(!inq); assert(W & INBOX); inq = 1 };
	due_write()
}

/* shard.c owner_dispatch */
inline owner_dispatch() {
	d_step { assert(!poolq); assert(status(W) == S_DISP || status(W) == S_CANC); poolq = 1 }
}

/*
 * eventcount.c spoke_ec_wait_word / spoke_ec_wake_word, without the
 * C's 1 ms timeout: a lost wake-up is a deadlock here.
 */
inline futex_wait(val, me) {
	d_step { if :: (W & LOW_MASK) == ((val) & LOW_MASK) -> fsleep[me] = 1 :: else fi };
	!fsleep[me]
}
inline futex_wake() {
	d_step { fsleep[0] = 0; fsleep[1] = 0; fsleep[2] = 0 }
}

/* --- arena.c ----------------------------------------------------------------- */

/*
 * spoke_handle_release(s, h, old): the slot goes back to its arena (spent
 * if its generation wrapped to 0, handle_return); then a periodic timer's
 * second slot, retirer_free_aux, back on the aux list. The caller has
 * moved the word to FREE, and the handle is in no queue and no engine.
 */
inline handle_release(old) {
	d_step {
		assert(slot == SL_TAKEN);
		assert(!inq && !poolq && !eng_on);
		assert(status(W) == S_FREE);
		if :: gen(W) == 0 -> slot = SL_SPENT :: else -> slot = SL_LISTED fi
	};
	if
	:: kind(old) == K_PERIODIC ->
#ifdef MUTANT_AUX_NOT_FREED
		skip
#else
		d_step { assert(aslot == SL_TAKEN); RETIRER_FREE_AUX; aslot = SL_LISTED }
#endif
	:: else
	fi
}

/* service.h spoke_handle_retired: a writer holding WRITING frees it instead */
inline handle_retired(old) {
#ifdef MUTANT_ORPHAN_IGNORES_WRITING
	handle_release(old)
#else
	if :: !(old & WRITING) -> handle_release(old) :: else fi
#endif
}

/* --- shard.c: the engine (engine and stage as one slot) ------------------------ */

/*
 * spoke_owner_disarm_word(sh, h, s): off the stage, or stopped in the engine
 * that holds it (engine_of: the lawn for a TTL timer, else the wheel), by
 * the kind in s, a word of its generation (owner_cancel_direct's FREE word
 * has no kind); spoke_owner_disarm: by the word as it is now.
 */
inline owner_disarm_word(s) {
	ENGINE_TOUCH;
	if
	:: eng_on && eng_in == E_STAGE -> eng_on = 0; eng_d = 0; eng_in = 0
	:: eng_on && eng_in != E_STAGE ->
		assert((eng_in == E_LAWN) == (kind(s) == K_TTL)); eng_on = 0; eng_d = 0; eng_in = 0
	:: else
	fi
}
#define owner_disarm() owner_disarm_word(W)

/*
 * spoke_owner_arm_new: a timer pending nowhere, on the stage (a deadline
 * in its window) or into engine_of(kind); the lawn may refuse a TTL timer
 * (-ENOMEM): the wheel takes it as a one-shot (owner_make_oneshot). Only a
 * TTL timer's place matters: the wheel and the stage are one for the others.
 */
inline owner_arm_new(dl) {
	ENGINE_TOUCH;
	assert(!eng_on);
	if
	:: kind(W) == K_TTL -> eng_on = 1; eng_d = dl; eng_in = E_STAGE
	:: kind(W) == K_TTL -> eng_on = 1; eng_d = dl; eng_in = E_LAWN
#if LAWN_FAILS
	:: kind(W) == K_TTL ->
#ifndef MUTANT_MAKE_ONESHOT_MISSING
		owner_make_oneshot();
#endif
		eng_on = 1; eng_d = dl; eng_in = E_WHEEL
#endif
	:: kind(W) != K_TTL -> eng_on = 1; eng_d = dl; eng_in = E_WHEEL
	fi
}

/* spoke_owner_arm: wherever it is, moved (the engine is the owner's: one step) */
inline owner_arm(dl) {
	atomic { owner_disarm(); owner_arm_new(dl) }
}

/* armed_deadline: a periodic timer's base (in its second slot), else deadline_ns */
#define ARMED_DEADLINE(d) \
	if \
	:: kind(W) == K_PERIODIC -> assert(status(A) == S_AUX); d = base \
	:: else -> d = deadline \
	fi

/* spoke_owner_rearm_periodic(sh, h, reset) */
inline owner_rearm_periodic(reset_) {
	atomic {
		assert(status(A) == S_AUX);
		if :: reset_ -> base = deadline :: else fi;
		owner_arm(base)
	}
}

/* --- run.c: the runner (a pool worker, a rescuer, or the owner inline) --------- */

/*
 * run.c finish_run(sh, h, direct), then shard.c spoke_runner_settle: the next deadline of a periodic timer
 * (periodic_next_ns, base is the runner's while RUNNING), runner_finish,
 * the wake-up, then what the end asks for.
 */
inline finish_run(direct) {
	d_step {
		st = W;
		if
		:: kind(st) == K_PERIODIC && !(st & STOP) ->
			assert(status(A) == S_AUX);
			if
			:: base + PERIOD > now -> base = base + PERIOD
			:: else -> base = base + ((now - base) / PERIOD + 1) * PERIOD
			fi
		:: else
		fi
	};
#ifdef MUTANT_RUNNER_FREES_BEFORE_FINISH
	if :: !(kind(st) == K_PERIODIC && !(st & STOP)) -> handle_release(st) :: else fi;
#endif
	runner_finish(st, direct, r, ok);
	if
	:: st & WAITERS ->
#ifdef MUTANT_LOST_WAKEUP
		skip
#else
		futex_wake()
#endif
	:: else
	fi;
	if
	:: r == E_PARKED -> skip
	:: r == E_RETIRED ->
#ifdef MUTANT_RUNNER_FREES_BEFORE_FINISH
		skip
#else
		handle_retired(st)
#endif
	:: r == E_REARM -> owner_rearm_periodic(st & RESET)
	:: r == E_POST -> any_post()
	fi
}

/*
 * service.h spoke_runner_run(sh, h): run.c spoke_runner_call with claim_run: the word, runner_claim_run,
 * then the callback (any thread may step meanwhile) and finish_run.
 */
inline runner_run(direct) {
	d_step { st = W };
	runner_claim_run(st, r, ok);
	if
	:: r == R_RETIRED -> handle_retired(st)
	:: r == R_UNDISPATCHED -> any_post()
	:: r == R_RUNS -> finish_run(direct)
	fi
}

/* shard.c spoke_runner_recall(sh, h): back to the owner, or retired if a cancel won */
inline runner_recall_or_run(direct) {
	runner_recall(st, ok);
	if
	:: ok -> any_post()
	:: else -> runner_run(direct)
	fi
}

/* --- shard.c: the owner's turn ------------------------------------------------- */

/*
 * shard.c run_or_dispatch: the claimed run, by the shard's mode; in a
 * rescuer's turn, where rescuer_place puts it (state_rescue.pml)
 */
inline run_or_dispatch() {
	if
	:: rescuing -> rescuer_place()	/* a rescuer's turn: rescue.c */
	:: !rescuing && mode == M_NOWAIT -> runner_recall_or_run(1)
	:: !rescuing && mode != M_NOWAIT && (!POOL || takes_back(mode)) -> runner_run(1)
	:: !rescuing && mode != M_NOWAIT && POOL && !takes_back(mode) -> owner_dispatch()
	fi
}

/*
 * armed_deadline(h), as claim_expiry reads it: the deadline of the last
 * start or reset (a lazy later reset left the node filed earlier)
 */
#ifdef MUTANT_LAZY_FIRES_AT_FILED
#define EXPIRY_DEADLINE(d) skip	/* d: the deadline the node was filed for (ENGINE_EXPIRES) */
#define FILED(d) d = eng_d;
#else
#define EXPIRY_DEADLINE(d) d_step { ARMED_DEADLINE(d) }
#define FILED(d)
#endif

/*
 * The engine (or the stage) gives up h, due at now (on_expire): its node
 * leaves; claim_expiry follows. The holder's step (ENGINE_TOUCH).
 */
#define ENGINE_EXPIRES \
	d_step { eng_on && eng_d <= now && mode != M_STOPPING && HOLDS -> \
		ENGINE_TOUCH; FILED(d) eng_on = 0; eng_d = 0; eng_in = 0 }

/*
 * shard.c claim_expiry: h has left its engine. A message decides; a reset
 * holding WRITING is asked for one (owner_ask_reset_message); a deadline
 * still ahead goes back; else owner_claim_expiry, the deadline read again,
 * owner_give_back if it moved later, else run_or_dispatch.
 */
inline claim_expiry() {
	d_step { st = W };
	do
	:: (st & INBOX) || status(st) != S_ARMED -> ok = 0; break
	:: !(st & INBOX) && status(st) == S_ARMED && (st & WRITING) && (st & RESET) -> ok = 0; break
	:: !(st & INBOX) && status(st) == S_ARMED && (st & WRITING) && !(st & RESET) ->
#ifdef MUTANT_NO_ASK_RESET_MESSAGE
		ok = 0; break
#else
		owner_ask_reset_message(st, ok);
		if :: ok -> ok = 0; break :: else fi
#endif
	:: !(st & INBOX) && status(st) == S_ARMED && !(st & WRITING) ->
		EXPIRY_DEADLINE(d);
		if
		:: d > now -> owner_arm(d); ok = 0; break
		:: else ->	/* SPOKE_HOOK_EXPIRY_CHECKED */
#ifdef MUTANT_CLAIM_NO_RELOAD
			d_step { CAS_VAL(st, with_status(st, S_DISP), ok) };	/* retries the word it read */
#else
			owner_claim_expiry(st, ok);
#endif
			if :: ok -> break :: else fi
		fi
	od;
	if
	:: ok ->
#ifdef MUTANT_CLAIM_NO_GIVE_BACK
		run_or_dispatch()
#else
		EXPIRY_DEADLINE(d);
		if
		:: d > now ->
			owner_give_back(st, ok);
			if :: ok -> owner_arm(d) :: else -> run_or_dispatch() fi
		:: else -> run_or_dispatch()
		fi
#endif
	:: else
	fi
}

/* shard.c retire_cancelled(sh, h, s): s, the word as the take left it */
inline retire_cancelled(s) {
	st = s;
	atomic { owner_disarm() };
	do
	:: owner_retire_cancelled(st, ok);
		if
		:: ok -> break
#ifdef MUTANT_RETIRE_GIVES_UP
		:: else -> break	/* no retry */
#else
		:: else
#endif
		fi
	od;
	if :: ok -> handle_retired(st) :: else fi
}

/* shard.c handle_message: owner_take_message, then what the word says */
inline handle_message() {
	owner_take_message(st);
	if
	:: status(st) == S_ARMED ->
		atomic {
			assert(st & INBOX);
			if
			:: st & RESET ->
				d = deadline;
				if :: kind(st) == K_PERIODIC -> assert(status(A) == S_AUX); base = d :: else fi;
				if
				:: st & FRESH -> owner_arm_new(d)	/* its start: in no engine yet */
				:: else -> owner_disarm(); owner_arm_new(d)
				fi
			:: !(st & RESET) && kind(st) == K_PERIODIC && !eng_on ->
				assert(status(A) == S_AUX); owner_disarm(); owner_arm_new(base)
			:: else
			fi
		}
	:: status(st) == S_CANC -> assert(st & INBOX); retire_cancelled(nx)
	:: status(st) == S_DISP -> assert(st & INBOX); run_or_dispatch()
	:: else -> assert(0)	/* INBOX only on ARMED, CANCELLED and recalled runs */
	fi
}

/* --- api_timers.c ------------------------------------------------------------------- */

/* a deadline from now (deadline_on; nothing past TMAX) */
inline pick_deadline(dl) {
	if
	:: now >= TMAX - 1 -> dl = TMAX
	:: now < TMAX - 1 -> dl = now + 1
	:: now < TMAX - 1 -> dl = TMAX
	fi
}

/* the kind of a start (KIND); a periodic timer needs the second slot free */
inline pick_kind(kd) {
	if
	:: (KIND == 0 || KIND >= 3) -> kd = K_ONESHOT
	:: (KIND == 1 || KIND >= 3) && aslot != SL_TAKEN -> kd = K_PERIODIC
	:: (KIND == 2 || KIND == 4) -> kd = K_TTL
	fi
}

/*
 * api_timers.c start_timer: spoke_handle_alloc (arena.c: one step, by the thread
 * whose arena holds the slot: its free list, or a fresh slot and
 * starter_init_fresh), spoke_handle_alloc_aux for a periodic timer,
 * start_handle fills it in; starter_publish; then spoke_owner_arm_new on
 * the owner (owned) and its lowering of the due, else the message.
 */
inline start_timer(me, owned) {
	atomic {
		STARTER == me && (slot == SL_FRESH || slot == SL_LISTED) && ngens < GENS &&
		(KIND != 1 || aslot != SL_TAKEN) ->
		assert(status(W) == S_FREE);
		if :: slot == SL_FRESH -> STARTER_INIT_FRESH :: else fi;
		slot = SL_TAKEN;
		pick_deadline(d);
		pick_kind(k);
		deadline = d;
		if
		:: k == K_PERIODIC ->
			if :: aslot == SL_FRESH -> A = freed(0) :: else fi;
			STARTER_MARK_AUX; aslot = SL_TAKEN; base = d
		:: else
		fi;
		g = gen(W)
	};
#if RESCUE
	/* SPOKE_MOVABLE or not (api_timers.c spoke_start_flags) */
	if :: starter_publish(armed_word(g, k), owned, me, d) :: starter_publish(armed_word(g, k) | MOVABLE, owned, me, d) fi;
#else
	starter_publish(armed_word(g, k), owned, me, d);
#endif
	if
	:: owned -> atomic { owner_arm_new(d) };	/* spoke_owner_arm_new */
		due_write()	/* spoke_owner_note_due */
	:: else -> any_post()
	fi
}

/* api_timers.c resolve: the word, and whether the id (generation g) still names it
 * (spoke_handle_lookup refuses generation 0); pl: is g pending (a ghost) */
#define RESOLVE(st, ok, g, pl) \
	st = W; ok = (g != 0 && gen(st) == g); pl = (g == cur_gen && gid == ngens && pend)

/*
 * api_timers.c cancel_id: resolve, cancel_once (cancel_direct on the owner thread
 * for its own armed timer with no message and no writer, while no rescuer
 * holds the shard: owner_cancel_direct ends the generation, then
 * spoke_owner_disarm_word with the word before it, and the release; else
 * any_try_cancel and the post),
 * again on -EAGAIN. g: the id's generation, read from cur_gen on entry (the
 * newest id the application holds); r: the result.
 */
#ifdef MUTANT_CANCEL_DIRECT_IGNORES_WRITING
#define DIRECT_CANCEL_OK(st) (status(st) == S_ARMED && !(st & INBOX))
#else
#define DIRECT_CANCEL_OK(st) (status(st) == S_ARMED && !(st & (INBOX | WRITING)))
#endif

inline cancel_id(owner_call) {
	d_step { g = cur_gen; gid = ngens; RESOLVE(st, ok, g, pl) };
	do
	:: !ok -> d_step { r = ENOENT; ghost_enoent(pl) }; break
	:: ok && owner_call && DIRECT_CANCEL_OK(st) ->
		owner_cancel_direct(st, ok, g);
		if
		:: ok ->
#if defined(MUTANT_CANCEL_DIRECT_NO_DISARM)
			skip;	/* freed while still in its engine */
#elif defined(MUTANT_DISARM_BY_NEW_WORD)
			atomic { owner_disarm() };	/* the engine named by the FREE word */
#else
			atomic { owner_disarm_word(st) };
#endif
			handle_release(st);
			r = 0; break
		:: else -> d_step { RESOLVE(st, ok, g, pl) }	/* -EAGAIN */
		fi
	:: ok && !(owner_call && DIRECT_CANCEL_OK(st)) ->
		any_try_cancel(st, r, post_, g, pl);
		if
		:: r == 0 && post_ -> any_post(); break
		:: r == 0 && !post_ -> break
		:: r == ENOENT -> break
		:: r == EAGAIN -> d_step { RESOLVE(st, ok, g, pl) }
		fi
	od
}

/* api_timers.c wait_not_running(h, gen): waiter_set_waiters, then the futex */
inline wait_not_running(me) {
	do
	:: d_step {
		st = W; ok = (gen(st) != g || status(st) != S_RUNNING);
		if :: ok -> assert(!(running && cur_gen == g && gid == ngens)) :: else fi
	   };
		if
		:: ok -> break
		:: else ->
			if
			:: !(st & WAITERS) -> waiter_set_waiters(st, ok)
			:: else -> ok = 1
			fi;
			if
			:: ok -> futex_wait(st | WAITERS, me)
			:: else	/* continue */
			fi
		fi
	od
}

/* api_timers.c spoke_cancel_sync (never from the timer's own callback: -EDEADLK is not modelled) */
inline cancel_sync(me) {
	cancel_id(0);
	atomic {
		RESOLVE(st, ok, g, pl);
		ok = ok && status(st) == S_RUNNING;
		if :: !ok -> assert(!(running && cur_gen == g && gid == ngens)) :: else fi	/* line 4 */
	};
	if :: ok -> wait_not_running(me) :: else fi
}

/* --- reset ------------------------------------------------------------------- */

/* ghost: a reset by thread me (id generation g, deadline d) begins */
inline ghost_reset_begins(me, g, d) {
	infl[me] = d; infl_g[me] = g;
	late[me] = !(g == cur_gen && gid == ngens && pend);
	sup[me] = (cand[0] != 0 -> 1 : 0) | (cand[1] != 0 -> 2 : 0) | (cand[2] != 0 -> 4 : 0)
}

/* ghost: it returns r; a 0 supersedes what it found returned when it began */
inline ghost_reset_returns(me, r) {
	atomic {
		if
		:: r == 0 ->
			assert(!late[me]);	/* no reset of a timer no longer pending returns 0 */
			if
			:: infl_g[me] == cur_gen ->
				if :: sup[me] & 1 -> cand[0] = 0 :: else fi;
				if :: sup[me] & 2 -> cand[1] = 0 :: else fi;
				if :: sup[me] & 4 -> cand[2] = 0 :: else fi;
				cand[me] = infl[me];
				sup[0] = sup[0] & ~(1 << me); sup[1] = sup[1] & ~(1 << me);
				sup[2] = sup[2] & ~(1 << me)
			:: else
			fi
		:: else
		fi;
		infl[me] = 0; infl_g[me] = 0; late[me] = 0; sup[me] = 0
	}
}

/* what reset_once does with the word st: */
#define A_ENOENT 1	/* -ENOENT */
#define A_RIDE	 2	/* 0 at once: a reset in progress holds WRITING */
#define A_DIRECT 3	/* reset_direct */
#define A_CLAIM	 4	/* any_reset_claim */

#define RESET_DECIDE(st, owner_call) \
	if \
	:: !ok -> k = A_ENOENT \
	:: ok && status(st) == S_ARMED && (st & WRITING) -> k = A_RIDE \
	:: ok && status(st) == S_ARMED && !(st & WRITING) && !(st & INBOX) && owner_call -> k = A_DIRECT \
	:: ok && status(st) == S_ARMED && !(st & WRITING) && !(!(st & INBOX) && owner_call) -> k = A_CLAIM \
	:: ok && status(st) == S_DISP && (st & WRITING) -> k = A_RIDE \
	:: ok && status(st) == S_DISP && !(st & WRITING) -> k = A_CLAIM \
	:: ok && status(st) == S_RUNNING && (kind(st) != K_PERIODIC || (st & STOP)) -> k = A_ENOENT \
	:: ok && status(st) == S_RUNNING && kind(st) == K_PERIODIC && !(st & STOP) && (st & WRITING) -> k = A_RIDE \
	:: ok && status(st) == S_RUNNING && kind(st) == K_PERIODIC && !(st & STOP) && !(st & WRITING) -> k = A_CLAIM \
	:: ok && status(st) != S_ARMED && status(st) != S_DISP && status(st) != S_RUNNING -> k = A_ENOENT \
	fi; \
	if :: k == A_ENOENT -> ghost_enoent(pl) :: else fi

/*
 * api_timers.c reset_is_later(h, st, d): a one-shot ARMED in its engine or on the
 * stage, no message queued, moved later: its place there is still at or
 * before d, and claim_expiry re-files it for d when it comes
 */
#define RESET_IS_LATER(st, d) \
	(status(st) == S_ARMED && kind(st) == K_ONESHOT && !(st & INBOX) && (d) >= deadline)

/*
 * api_timers.c reset_direct: owner_reset_claim, then, holding WRITING, deadline_ns
 * and base stored and the timer moved, unless the reset is later (lazy: it
 * stays where it is; the stage moves it anyway, spoke_stage_holds, which
 * the model leaves open); owner_reset_release. r: 0 or EAGAIN.
 */
inline reset_direct(d) {
#ifdef MUTANT_DIRECT_RESET_NO_WRITING
	d_step { CAS_VAL(st, bump_seq(st), ok) };	/* the sequence bumped, WRITING not taken */
#else
	owner_reset_claim(st, ok);
#endif
	if
	:: !ok -> r = EAGAIN
	:: else ->	/* SPOKE_HOOK_DIRECT_RESET_CLAIMED */
		atomic {
			later = RESET_IS_LATER(st, d);
			deadline = d;
			if :: kind(st) == K_PERIODIC -> assert(status(A) == S_AUX); base = d :: else fi;
			if
			:: later -> skip		/* in its engine: found at the old deadline */
			:: later -> owner_disarm(); owner_arm_new(d)	/* on the stage: moved */
			:: !later -> owner_disarm(); owner_arm_new(d)
			fi;
			later = 0
		};
#ifndef MUTANT_DIRECT_RESET_NO_WRITING
		owner_reset_release(st);
#endif
		r = 0
	fi
}

/*
 * api_timers.c reset_publish: writer_publish; the writer frees an ORPHAN, posts
 * if it set INBOX (else nudges: no step here).
 */
inline reset_publish() {
	writer_publish(later, st, ok);
	if
	:: st & ORPHAN -> handle_release(st)
	:: !(st & ORPHAN) && (nx & INBOX) && !(st & INBOX) -> any_post()
	:: !(st & ORPHAN) && !((nx & INBOX) && !(st & INBOX))
	fi
}

/*
 * api_timers.c spoke_reset: resolve and reset_once until it is not -EAGAIN. A
 * foreign reset: any_reset_claim, reset_is_later and the store of
 * deadline_ns (one step: only the WRITING holder writes it), reset_publish.
 */
inline reset(me, owner_call) {
	atomic {
		g = cur_gen; gid = ngens;
		pick_deadline(d);
		ghost_reset_begins(me, g, d);
		RESOLVE(st, ok, g, pl);
		RESET_DECIDE(st, owner_call)
	};
	do
	:: k == A_ENOENT -> r = ENOENT; break
	:: k == A_RIDE -> r = 0; break
	:: k == A_DIRECT ->
		reset_direct(d);
		if
		:: r == 0 -> break
		:: else -> d_step { RESOLVE(st, ok, g, pl); RESET_DECIDE(st, owner_call) }
		fi
	:: k == A_CLAIM ->
		any_reset_claim(st, ok);
		if
		:: ok ->	/* SPOKE_HOOK_RESET_CLAIMED */
			d_step {
				later = RESET_IS_LATER(st, d);
				deadline = d
			};	/* SPOKE_HOOK_RESET_STORED */
			reset_publish();
			r = 0; break
		:: else -> d_step { RESOLVE(st, ok, g, pl); RESET_DECIDE(st, owner_call) }
		fi
	od;
	ghost_reset_returns(me, r)
}

#include "state_rescue.pml"

/* --- roles ------------------------------------------------------------------- */

#if RESCUE
#define OWNER_HOLDS	  ocs &&	/* past its handshake (state_rescue.pml) */
#define OWNER_RESCUE_END  rdone == RESCUE && !orun &&
#else
#define OWNER_HOLDS
#define OWNER_RESCUE_END
#endif

/*
 * The shard's owner thread. Each pass is one thing a turn does (expire a
 * due timer, take the message, move the clock), one call made on the
 * owner thread, or a change of the shard's mode (RECALL: attached from a
 * pool callback, ATTACHING_NOWAIT, then ATTACHED; or attached at once).
 * In ATTACHING_NOWAIT the managed thread only ends its turn. With RESCUE a
 * turn's passes need the shard held (ocs, after the handshake); it lets go
 * OSTALLS times (a sleep between turns, or a stall), and its calls check
 * `rescue` (the managed thread calls only from its inline callbacks).
 */
proctype owner()
{
	byte self = SELF_OWNER;
	LOCALS;
#if RESCUE
	bool att = ATTACHED, own, ent;
	byte stalls = OSTALLS, dets = DETACH;
#endif

	do
	:: ENGINE_EXPIRES; claim_expiry(); CLEAR_LOCALS	/* engine expiry: on_expire */
	:: OWNER_HOLDS inq && mode != M_NOWAIT && mode != M_STOPPING -> handle_message(); CLEAR_LOCALS
	:: d_step { now < TMAX && mode != M_STOPPING -> now++ }
#if RESCUE
	:: ocs && orun -> d_step { orun = 0 }; run_or_dispatch(); CLEAR_LOCALS	/* shard.c run_left_by_rescue */
	/*
	 * A call: the managed thread makes them from its inline callbacks,
	 * inside its turn; the attached thread at any time, counted in its
	 * arena (spoke_call_enter, then the call's spoke_owner_rescued). While
	 * a rescuer holds the shard the call goes the way another thread's
	 * would: through the inbox.
	 */
	:: owner_ops > 0 && (mode == M_MANAGED || mode == M_ATTACHED) && (ocs || att) -> owner_ops--;
		if
		:: ocs -> d_step { own = !rescue }
		:: !ocs -> owner_handshake(1, own); ent = 1
		fi;
		if
		:: start_timer(0, own)	/* if its arena holds the slot, free */
		:: reset(0, own)
		:: cancel_id(own)
		fi;
		if :: ent -> busy_store(1, 0); ent = 0 :: else fi;	/* spoke_call_leave */
		own = 0; CLEAR_LOCALS
	/* its turn begins: spoke_owner_hold as it wakes (managed); spoke_poll (attached) */
	:: !ocs && mode != M_DETACHING -> owner_hold(att)
	/* its turn ends and it sleeps, or stalls: spoke_owner_unhold, spoke_call_leave */
	:: ocs && stalls > 0 -> stalls--; due_write(); busy_store(att, 0)	/* spoke_owner_turned first */
	/*
	 * api_attach.c spoke_detach (enter_attached_holding, then managed.c
	 * spoke_owner_detach): a new managed thread drives the shard, this
	 * process plays it from here (the attached thread touches nothing
	 * more); or none could be started and the shard stays attached.
	 */
	:: dets > 0 && att && !ocs && mode == M_ATTACHED -> dets--;
		owner_hold(1);
		d_step { ocs = 0; mode = M_DETACHING };	/* drop_owner: it touches the shard no more */
		oarena = 0;
		if
		:: mode = M_MANAGED; busy_store(1, 0); att = 0
		:: oarena = 1; mode = M_ATTACHED; busy_store(1, 0)
		fi
#else
	:: owner_ops > 0 && (mode == M_MANAGED || mode == M_ATTACHED) -> owner_ops--;
		if
		:: start_timer(0, 1)	/* if its arena holds the slot, free */
		:: reset(0, 1)
		:: cancel_id(1)
		fi;
		CLEAR_LOCALS
#endif
#if RECALL
	:: mode == M_MANAGED -> mode = M_NOWAIT
	:: mode == M_MANAGED -> mode = M_ATTACHED
	:: mode == M_NOWAIT -> mode = M_ATTACHED
#endif
#if DESTROY
	:: OWNER_HOLDS mode == M_STOPPING -> break	/* spoke_shard_stop joins it */
#else
	:: OWNER_HOLDS OWNER_RESCUE_END fdone == NFOREIGN && !worker_busy && !poolq && !inq &&
	   now == TMAX && !(eng_on && eng_d <= now) && mode != M_NOWAIT -> break
#endif
	od;
	owner_done = 1;
#if !DESTROY
	/* the end: every thread done, every deadline passed, nothing queued */
	d_step {
		assert(!(W & (WRITING | ORPHAN | INBOX)) && !running);
		if
		:: pend -> assert(!oneshot && status(W) == S_ARMED && eng_on)	/* a periodic timer, armed */
		:: else -> assert(slot != SL_TAKEN)	/* ended: its slot went back */
		fi;
		assert(aslot != SL_TAKEN || pend);	/* the second slot lives with its timer */
		assert(!rescue && rcs == 0 && !orun && !rrun);	/* handed back, no run left behind */
		finished = 1
	}
#endif
}

proctype worker()
{
	byte self = SELF_WORKER;
	LOCALS;
end_idle:
	do
	:: d_step { poolq -> poolq = 0; worker_busy = 1 };
		/* pool.c worker_run: the mode, after busy_shard and the light fence; MOVABLE */
		d_step { k = mode; ok = (W & MOVABLE) != 0 };
		if
		:: takes_back(k) && !ok -> runner_recall_or_run(0)
		:: k == M_STOPPING	/* a run that never starts: destroy hands its arg back */
		:: k != M_STOPPING && (!takes_back(k) || ok) -> runner_run(0)
		fi;
		d_step { worker_busy = 0; st = 0; nx = 0; d = 0; r = 0; g = 0; k = 0; ok = 0; pl = 0 }
	:: pool_stop -> break
	od;
	worker_done = 1
}

proctype foreign(byte self)
{
	LOCALS;
	byte ops = FOPS;

	do
	:: ops > 0 -> ops--;
		if
		:: start_timer(self, 0)	/* if its arena holds the slot, free */
		:: reset(self, 0)
		:: cancel_id(0)
		:: cancel_sync(self)
		fi;
		CLEAR_LOCALS
	:: ops == 0 -> break
	od;
	fdone++
}

init
{
	byte self = SELF_INIT;
	LOCALS;

	atomic {
#if ATTACHED
		mode = M_ATTACHED;
#endif
		ok = (STARTER == 0);
		start_timer(STARTER, ok);	/* the first start, before the others run */
		CLEAR_LOCALS;
		run owner();
#if RESCUE
		run drain();
		run rescuer(SELF_RESCUER);
#endif
#if RESCUE >= 2
		run rescuer(SELF_RESCUER + 1);
#endif
#if POOL
		run worker();
#endif
#if NFOREIGN >= 1
		run foreign(1);
#endif
#if NFOREIGN >= 2
		run foreign(2);
#endif
	}
#if DESTROY
	/* api_lifecycle.c destroy_with, after the last call returned */
	(fdone == NFOREIGN && owner_ops == 0) -> stopping = 1;
	mode = M_STOPPING;	/* stop_threads: spoke_shard_stop ... */
	owner_done;
	pool_stop = 1;		/* ... spoke_pool_stop */
#if POOL
	worker_done;
#endif
	rdone == RESCUE;	/* rescuers are other shards' threads or pool workers: joined */
	/* spoke_arenas_release_pending: each timer that will never run hands its arg back */
	d_step {
		if
		:: status(W) == S_ARMED || status(W) == S_DISP -> assert(pend); pend = 0
		:: else
		fi;
		assert(!pend && !running && !(W & WRITING));	/* every started timer ended once */
		assert(!rescue);
		finished = 1
	}
#endif
}

/*
 * Nothing can move any more (timeout): that must be the end, every check
 * above passed. Else a thread waits for ever (a lost wake-up, a lost
 * message the owner waits on). A run that never ends is a cycle: the
 * non-progress search (pan -l) finds it.
 */
active proctype watchdog()
{
end_watch:
	timeout -> assert(finished)
}
