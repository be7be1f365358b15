/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * state_rescue.pml - the handoff of a shard between its owner and a peer
 * that rescues it (percpu/rescue.c; guard.h for the attached owner's call
 * count), included by state_threads.pml before the roles.
 *
 * The handshake is a store-load one on each side: the owner stores its
 * count (turning, or in_call for an attached thread), runs the light fence,
 * loads `rescue`; a rescuer sets `rescue` by a locked or (going on only if
 * it found it 0), runs the heavy fence, loads the counts. Sequential
 * consistency would make any such pair correct without fences, so the
 * model gives the owner what x86-TSO gives it: a store buffer. Its store of a count is first buffered
 * (turning_sb, in_call_sb), and becomes visible to other threads only when
 * the buffer drains: at any moment (proctype drain), at a full fence of its
 * own (the light fence without membarrier, ASYM=0), or when the rescuer's
 * membarrier makes every thread of the process run a full barrier (the
 * heavy fence, ASYM=1). Its loads read memory (its own buffered stores are
 * never loaded back by the code modelled). With membarrier the light fence
 * is only a compiler barrier: it keeps the load after the store in program
 * order, and the model's steps are in program order.
 *
 * One buffered store per variable is enough: the other side reads the
 * owner's counts only after its heavy fence, which drains the whole buffer,
 * so what it reads is the same however many stores were queued; a second
 * store of the same variable drains the first (FIFO, nothing lost that a
 * reader after a drain could tell). The rescuer's own stores need no
 * buffer: its or is a locked instruction (visible at once, and a full
 * barrier); its release of `rescue` (a locked and) is modelled visible at
 * once, since delaying it only delays the owner, which waits for it.
 *
 * `rescue` is the top bit of the shard's due_word (SPOKE_DUE_RESCUED), whose
 * other bits say when the shard next has work. The due is not modelled (a
 * rescuer looks whenever it likes), but its writes share the bit's word:
 * a lowering (spoke_any_lower_due, reached from every post) and the holder's
 * publish at the end of a turn (spoke_holder_publish_due) are each a
 * compare-and-swap that carries the bit over from the word it replaces, so
 * on the model's state they change nothing, and the correct model leaves
 * them out (due_write). Its mutants write the word the wrong ways: a store
 * of the due alone, or a load and a later store of what it computed.
 */

/* The owner's store buffer (x86-TSO) for a variable v, entry sb. */
#define SB_DRAIN(v, sb) if :: sb != 0 -> v = (sb == 1); sb = 0 :: else fi
#define SB_STORE(v, sb, x) SB_DRAIN(v, sb); sb = ((x) -> 1 : 2)
#define SB_DRAIN_ALL SB_DRAIN(turning, turning_sb); SB_DRAIN(in_call, in_call_sb)

/*
 * The owner counts itself busy (x 1) or not (x 0) on its shard: the
 * managed thread's store of turning (spoke_owner_hold, spoke_owner_unhold),
 * the attached thread's of its arena's in_call (guard.h spoke_in_call_add);
 * att says which thread it is. Not busy: no longer past its check (ocs).
 */
inline busy_store(att, x) {
	d_step {
		if
		:: att -> SB_STORE(in_call, in_call_sb, x)
		:: else -> SB_STORE(turning, turning_sb, x)
		fi;
		if :: !(x) -> ocs = 0 :: else fi
	}
}

/* service.h spoke_light_fence: a full fence without membarrier, else a compiler barrier */
inline light_fence() {
#if !ASYM && !defined(MUTANT_OWNER_NO_FENCE)
	d_step { SB_DRAIN_ALL }
#else
	skip
#endif
}

/*
 * The owner's side (rescue.c spoke_owner_hold; guard.h spoke_call_enter and
 * the call's spoke_owner_rescued; api_attach.c enter_attached_holding): count
 * itself busy, the light fence, then look at `rescue`. ok: no rescuer holds
 * it, and none will take it until the count drops.
 */
inline owner_handshake(att, ok) {
#ifdef MUTANT_OWNER_CHECKS_BEFORE_BUSY
	d_step { ok = !rescue };	/* looks before it counts itself */
	busy_store(att, 1);
	d_step { ocs = ok; if :: ok -> assert(rcs == 0) :: else fi }
#else
	busy_store(att, 1);
	light_fence();
	d_step { ok = !rescue; ocs = ok; if :: ok -> assert(rcs == 0) :: else fi }
#endif
}

/*
 * rescue.c spoke_owner_hold (managed) or api_attach.c enter_attached_holding
 * (attached): until the handshake finds no rescuer, let go again
 * (spoke_owner_unhold, spoke_call_leave) and wait for the hand-back
 * (spoke_owner_await_rescue: the futex on `rescue`).
 */
inline owner_hold(att) {
	do
	:: owner_handshake(att, ok);
		if
		:: ok -> break
		:: else -> busy_store(att, 0); !rescue
		fi
	od;
	ok = 0
}

/* --- the rescuer -------------------------------------------------------------- */

/* rescue.c rescuer_release: `rescue` back to 0 (release), then rescue_gen bumped and woken */
inline rescuer_release() {
	d_step { rcs = 0; rescue = 0 }
}

/*
 * rescue.c rescuer_take: the mode; the locked or of `rescue`; the
 * heavy fence; owner_busy (turning, then owner_arena and its in_call); the
 * mode again. ok: this rescuer holds the shard.
 */
inline rescuer_take(ok) {
	d_step { ok = rescuable(mode) };
	if
	:: ok ->
		d_step { ok = !rescue; if :: ok -> rescue = 1 :: else fi };
		if
		:: ok ->
#if ASYM && !defined(MUTANT_RESCUER_NO_FENCE)
			d_step { SB_DRAIN_ALL };	/* membarrier: every thread's full barrier */
#endif
			d_step { r = turning };
			if
			:: !r ->
				d_step { r = oarena };
				if :: r -> d_step { r = in_call } :: else fi
			:: else
			fi;
#ifdef MUTANT_RESCUER_IGNORES_BUSY
			r = 0;	/* does not look at the owner's counts */
#endif
			d_step {
				ok = !r && rescuable(mode);
				if :: ok -> assert(!ocs && rcs == 0); rcs = self :: else fi;
				r = 0
			};
			if :: !ok -> rescuer_release() :: else fi
		:: else
		fi
	:: else
	fi
}

/*
 * shard.c rescuer_place, for run_or_dispatch in a rescuer's turn: h
 * is DISPATCHED. To the pool what may run there (movable, or a managed
 * shard's, which runs on the pool anyway); on rescued_runs what moves but
 * has no pool; on owner_runs what must run on the owner's thread.
 */
inline rescuer_place() {
	d_step {
		st = W;
		ok = POOL && ((st & MOVABLE) || mode == M_MANAGED)
	};
	if
	:: ok -> owner_dispatch()
#ifdef MUTANT_RESCUER_RUNS_NON_MOVABLE
	:: !ok -> d_step { assert(!rrun); rrun = 1 }	/* movable or not: the rescuer runs it */
#else
	:: !ok && (st & MOVABLE) -> d_step { assert(!rrun); rrun = 1 }
	:: !ok && !(st & MOVABLE) -> d_step { assert(!orun); orun = 1 }
#endif
	fi;
	ok = 0
}

/*
 * rescue.c rescue: one turn of the shard as its owner would take it (what
 * is due, the messages; run_left_by_rescue is the owner's only), with
 * rescuing set so that run_or_dispatch places the runs; then the hand-back,
 * and the runs it kept, run after it let go. A turn may stop at any point
 * (the C's takes every due timer and a batch of messages: what it leaves,
 * the owner's next turn or another rescue takes).
 */
inline do_rescue() {
	d_step { rrun = 0; rescuing = 1 };	/* SPOKE_HOOK_RESCUE_HELD */
	do
	:: ENGINE_EXPIRES; claim_expiry(); CLEAR_LOCALS
	:: inq && mode != M_NOWAIT && mode != M_STOPPING -> handle_message(); CLEAR_LOCALS
	:: break
	od;
#ifdef MUTANT_RESCUER_RELEASES_EARLY
	atomic { rescuing = 0 };
	rescuer_release();	/* lets go before it has taken its runs */
	d_step { runs = rrun; rrun = 0 };
#else
	atomic { rescuing = 0; runs = rrun; rrun = 0 };	/* runs = sh->rescued_runs */
	due_write();	/* spoke_holder_publish_due */
	rescuer_release();
#endif
	if
	:: runs -> runs = 0; runner_run(0)	/* spoke_runner_run: not the owner */
	:: else
	fi
}

/*
 * A peer watching the shard (a managed thread of another shard, or an idle
 * pool worker: spoke_watcher_look): RTRIES times, at any moment (the model
 * has no due_ns: a watcher may look whenever it likes), try to take the
 * shard and rescue it.
 */
proctype rescuer(byte self)
{
	LOCALS;
	bool runs;
	byte tries = RTRIES;

	do
	:: tries > 0 -> tries--;
		rescuer_take(ok);
		if :: ok -> do_rescue() :: else fi;
		CLEAR_LOCALS
	:: tries == 0 -> break
	od;
	rdone++
}

/* The owner's store buffer drains on its own, at any moment. */
proctype drain()
{
end_drain:
	do
	:: d_step { turning_sb != 0 -> SB_DRAIN(turning, turning_sb) }
	:: d_step { in_call_sb != 0 -> SB_DRAIN(in_call, in_call_sb) }
	od
}
