/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * state_protocol.pml - the transitions of the state word, one inline per
 * function of percpu/protocol.h, under its name (included by state.pml).
 *
 * Each inline is the function's one atomic operation (a store, a
 * fetch-and, one compare-and-swap), or, where the function loops, its load
 * and its compare-and-swap as separate steps with the loop as the C writes
 * it, so that a fault in the loop (a stale next word, a missing reload, a
 * fall-through) is a model the checker can refute. Arguments and results
 * are the caller's locals: `st` is the C's uint64_t st (or *st), `ok` a
 * bool result, `nx` the next word.
 *
 * The contract's ghosts change inside the step that decides: a cancel's
 * winning compare-and-swap, the runner's DISPATCHED -> RUNNING.
 */

/* compare-and-swap on h->state, inside a d_step; on failure exp gets the word (acquire) */
#define CAS(exp, nv, ok_) \
	if :: W == (exp) -> W = (nv); ok_ = 1 :: else -> exp = W; ok_ = 0 fi
/* the same where the C passes the expected word by value (nothing reloaded) */
#define CAS_VAL(exp, nv, ok_) \
	if :: W == (exp) -> W = (nv); ok_ = 1 :: else -> ok_ = 0 fi

/* --- ghosts ------------------------------------------------------------------ */

/* a cancel of generation g returned 0 (exactly once; no run after it) */
inline ghost_cancel_won(g) {
	assert(g == cur_gen && gid == ngens && pend);	/* line 6: its own start, not a later one */
	pend = 0
}

/* a call on generation g answers -ENOENT; pl: was g pending when the word was read? */
inline ghost_enoent(pl) {
	assert(!pl)	/* -ENOENT only when nothing is left to prevent (line 3, line 5) */
}

/* the run of the word s starts: once, not after a cancel, not early, not twice at once */
inline ghost_run_starts(s) {
	assert(gen(s) == cur_gen);
	assert(pend);
	assert(!running);
	gL = 255; gi = 0;
	do
	:: gi < 3 ->
		if :: cand[gi] != 0 && cand[gi] < gL -> gL = cand[gi] :: else fi;
		if :: infl[gi] != 0 && infl_g[gi] == cur_gen && infl[gi] < gL -> gL = infl[gi] :: else fi;
		gi++
	:: else -> break
	od;
	assert(gL != 255 && now >= gL);	/* not before the last start's or reset's deadline */
	gL = 0; gi = 0;
#if RESCUE
	/* where it runs: a rescuer runs only movable timers; none of an attached shard on the pool */
	assert(self == SELF_OWNER || self == SELF_WORKER || (s & MOVABLE));
	assert(!(self == SELF_WORKER && !(s & MOVABLE) && mode == M_ATTACHED));
#endif
	running = 1;
	if :: oneshot -> pend = 0 :: else fi
}

/* --- starter --------------------------------------------------------------- */

/* protocol.h starter_init_fresh (arena.c arena_take): generation 1, FREE */
#ifdef MUTANT_FRESH_NOT_INIT
#define STARTER_INIT_FRESH skip	/* the fresh slot keeps generation 0 */
#else
#define STARTER_INIT_FRESH W = freed(0)
#endif

/* protocol.h starter_mark_aux (arena.c spoke_handle_alloc_aux) */
#define STARTER_MARK_AUX \
	assert(status(A) == S_FREE || status(A) == S_AUX_FREE); A = with_status(A, S_AUX)

/*
 * protocol.h starter_publish: the filled-in handle as `armed`; owned: the
 * owner goes on to arm it, else it travels as a message (INBOX | RESET |
 * FRESH) the caller posts. The ghost: generation g starts, by thread me,
 * at deadline d; the generation before it must have ended.
 */
inline starter_publish(armed, owned, me, d) {
	d_step {
		assert(!pend && !running);
		if
		:: owned -> W = armed
		:: else -> W = armed | INBOX | RESET | FRESH
		fi;
		cur_gen = gen(armed); oneshot = (kind(armed) != K_PERIODIC); pend = 1; ngens++;
		cand[0] = 0; cand[1] = 0; cand[2] = 0; sup[0] = 0; sup[1] = 0; sup[2] = 0;
		cand[me] = d
	}
}

/* --- any thread ---------------------------------------------------------- */

/*
 * protocol.h any_try_cancel(h, st, &post): r = 0 won, EAGAIN the word
 * changed, ENOENT nothing to cancel; post_: the caller posts.
 */
inline any_try_cancel(st, r, post_, g, pl) {
	d_step {
		if
		:: status(st) == S_ARMED -> nx = with_status(st, S_CANC) | INBOX; r = 0
		:: status(st) == S_DISP -> nx = with_status(st, S_CANC); r = 0
		:: status(st) == S_RUNNING && kind(st) == K_PERIODIC && !(st & STOP) ->
#ifdef MUTANT_PERIODIC_CANCEL_NO_STOP
			nx = st; r = 0		/* 0, but no STOP */
#else
			nx = st | STOP; r = 0
#endif
		:: else -> r = ENOENT
		fi;
		if
		:: r == 0 ->
			if
			:: W == st -> W = nx; ghost_cancel_won(g);
#ifdef MUTANT_CANCEL_POSTS_TWICE
				post_ = (status(st) == S_ARMED)	/* posts though a message is queued */
#else
				post_ = (status(st) == S_ARMED && !(st & INBOX))
#endif
			:: else -> r = EAGAIN
			fi
		:: else -> ghost_enoent(pl)
		fi;
		nx = 0
	}
}

/* protocol.h any_reset_claim(h, st): bump the sequence, take WRITING */
inline any_reset_claim(st, ok) {
	d_step { CAS_VAL(st, bump_seq(st) | WRITING, ok) }
}

/* the next word writer_publish writes over st */
#define PUBLISH_NEXT(st, later) \
	nx = st & ~WRITING; \
	if \
	:: st & ORPHAN -> nx = freed(st) \
	:: !(st & ORPHAN) && status(st) == S_ARMED && (!later || (st & RESET)) -> nx = nx | RESET | INBOX \
	:: !(st & ORPHAN) && status(st) != S_CANC && status(st) != S_ARMED -> nx = nx | RESET \
	:: else \
	fi

/*
 * protocol.h writer_publish(h, later, &next): load, then CAS until it
 * wins, the next word computed from each word the CAS reloaded. st: the
 * word replaced; nx: the word written.
 */
inline writer_publish(later, st, ok) {
	st = W;
#ifdef MUTANT_PUBLISH_STALE_NEXT
	d_step { PUBLISH_NEXT(st, later) };	/* computed once, outside the loop */
	do
	:: d_step { CAS(st, nx, ok) } -> if :: ok -> break :: else fi
	od
#else
	do
	:: d_step { PUBLISH_NEXT(st, later); CAS(st, nx, ok) } -> if :: ok -> break :: else fi
	od
#endif
}

/* protocol.h waiter_set_waiters(h, &st) */
inline waiter_set_waiters(st, ok) {
	d_step { CAS(st, st | WAITERS, ok) }
}

/* --- owner ----------------------------------------------------------------- */

/*
 * protocol.h owner_cancel_direct(h, st): ARMED -> FREE with the next
 * generation, in one compare-and-swap (the generation ends here)
 */
inline owner_cancel_direct(st, ok, g) {
	d_step {
#ifdef MUTANT_OWNER_CANCEL_SAME_GEN
		CAS_VAL(st, gen(st) << GEN_SHIFT, ok);	/* FREE, the generation not bumped */
#else
		CAS_VAL(st, freed(st), ok);
#endif
		if :: ok -> ghost_cancel_won(g) :: else fi
	}
}

/* protocol.h owner_reset_claim(h, st) */
inline owner_reset_claim(st, ok) {
	d_step { CAS_VAL(st, bump_seq(st) | WRITING, ok) }
}

/* protocol.h owner_reset_release(h): fetch_and ~WRITING; st: the word the claim replaced */
inline owner_reset_release(st) {
#ifdef MUTANT_OWNER_RESET_RELEASE_STORE
	d_step { W = bump_seq(st) }	/* a plain store of the claimed word without WRITING */
#else
	d_step { W = W & ~WRITING }
#endif
}

/* protocol.h owner_make_oneshot(h): fetch_and ~kind */
inline owner_make_oneshot() {
	d_step { W = W & ~KIND_MASK }
}

/*
 * protocol.h owner_take_message(h, &after): a relaxed load decides what to
 * clear (a recalled run keeps RESET), then the fetch_and. st: the word
 * before; nx: after.
 */
inline owner_take_message(st) {
	d_step {
		inq = 0;	/* taken off the inbox (take_messages) */
		st = W;
#ifdef MUTANT_RECALL_CLEARS_RESET
		nx = INBOX | RESET | FRESH
#else
		if :: status(st) == S_DISP -> nx = INBOX :: else -> nx = INBOX | RESET | FRESH fi
#endif
	};
	d_step { st = W; W = W & ~nx; nx = st & ~nx }
}

/* protocol.h owner_retire_cancelled(h, &st) */
inline owner_retire_cancelled(st, ok) {
	d_step { CAS(st, retired(st), ok) }
}

/* protocol.h owner_claim_expiry(h, &st): ARMED -> DISPATCHED */
inline owner_claim_expiry(st, ok) {
	d_step { CAS(st, with_status(st, S_DISP), ok) }
}

/* protocol.h owner_ask_reset_message(h, &st) */
inline owner_ask_reset_message(st, ok) {
	d_step { CAS(st, st | RESET, ok) }
}

/* protocol.h owner_give_back(h, armed): exactly the claimed word back to `armed` */
inline owner_give_back(armed, ok) {
	d_step {
		if :: W == with_status(armed, S_DISP) -> W = armed; ok = 1 :: else -> ok = 0 fi
	}
}

/* --- runner ---------------------------------------------------------------- */

/* protocol.h runner_undispatch(h, &st): ARMED | INBOX, RESET kept */
inline runner_undispatch(st, ok) {
	d_step { CAS(st, with_status(st, S_ARMED) | INBOX, ok) }
}

/* protocol.h runner_retire_cancelled(h, &st) */
inline runner_retire_cancelled(st, ok) {
	d_step { CAS(st, retired(st), ok) }
}

#define R_RUNS	       1
#define R_RETIRED      2
#define R_UNDISPATCHED 3

/* the DISPATCHED -> RUNNING compare-and-swap of runner_claim_run, with the run's ghost */
inline runner_cas_run(st, ok) {
	d_step {
		CAS(st, with_status(st, S_RUNNING), ok);
		if :: ok -> ghost_run_starts(st) :: else fi
	}
}

/*
 * protocol.h runner_claim_run(h, &st): every failed compare-and-swap
 * reloads the word and decides again. r: R_RUNS, R_RETIRED, R_UNDISPATCHED.
 */
inline runner_claim_run(st, r, ok) {
	do
	:: status(st) == S_DISP && !(st & (RESET | WRITING)) ->
		runner_cas_run(st, ok);
		if :: ok -> r = R_RUNS; break :: else fi
	:: status(st) == S_CANC ->
		runner_retire_cancelled(st, ok);
		if
		:: ok -> r = R_RETIRED; break
#ifdef MUTANT_RUNNER_RETIRE_FALLS_INTO_RUN
		:: else ->	/* falls through (`continue` in a do-while) into the run's CAS, on the reloaded word */
			runner_cas_run(st, ok);
			if :: ok -> r = R_RUNS; break :: else fi
#else
		:: else
#endif
		fi
	:: !(status(st) == S_DISP && !(st & (RESET | WRITING))) && status(st) != S_CANC ->
		runner_undispatch(st, ok);
		if :: ok -> r = R_UNDISPATCHED; break :: else fi
	od
}

/* protocol.h runner_recall(h): DISPATCHED -> DISPATCHED | INBOX; ok = 0: no longer DISPATCHED */
inline runner_recall(st, ok) {
	st = W;
	do
	:: status(st) != S_DISP -> ok = 0; break
	:: else -> d_step { CAS(st, st | INBOX, ok) }; if :: ok -> break :: else fi
	od
}

#define E_PARKED  1
#define E_RETIRED 2
#define E_REARM	  3
#define E_POST	  4

/* the next word runner_finish writes over the RUNNING word st; r: how the run ends */
#ifdef MUTANT_PARK_RETIRES
#define FINISH_PARK(st) r = E_RETIRED; nx = retired(st)	/* stopped: retired, not parked */
#else
#define FINISH_PARK(st) r = E_PARKED; nx = with_status(st, S_ARMED) & ~(WAITERS | RESET | INBOX)
#endif
#define FINISH_NEXT(st, owned, stop_) \
	if \
	:: kind(st) == K_PERIODIC && !(st & STOP) && (stop_) -> FINISH_PARK(st) \
	:: !(kind(st) == K_PERIODIC && !(st & STOP)) -> r = E_RETIRED; nx = retired(st) \
	:: kind(st) == K_PERIODIC && !(st & STOP) && !(stop_) && (owned) -> \
		r = E_REARM; nx = with_status(st, S_ARMED) & ~(WAITERS | RESET) \
	:: kind(st) == K_PERIODIC && !(st & STOP) && !(stop_) && !(owned) -> \
		r = E_POST; nx = (with_status(st, S_ARMED) | INBOX) & ~WAITERS \
	fi

/*
 * protocol.h runner_finish(h, &st, &stopping, owned): CAS until it wins,
 * `stopping` read on each pass; st: the word replaced; r: how it ended.
 */
inline runner_finish(st, owned, r, ok) {
	do
	::
#if DESTROY
		ok = stopping;	/* atomic_load_explicit(stopping) */
#endif
		d_step {
			assert(status(st) == S_RUNNING);
			FINISH_NEXT(st, owned, (DESTROY && ok));
			CAS(st, nx, ok);
			if :: ok -> running = 0 :: else fi;
			nx = 0
		};
		if :: ok -> break :: else fi
	od
}

/* protocol.h retirer_free_aux(aux): the next generation, AUX_FREE */
#define RETIRER_FREE_AUX \
	assert(status(A) == S_AUX); A = with_status(freed(A), S_AUX_FREE)
