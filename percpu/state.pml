/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * state.pml - a Promela model of one timer's state word (percpu/state.h),
 * of every transition of it (percpu/protocol.h) and of the code that makes
 * them (api_timers.c, api_attach.c, api_lifecycle.c, shard.c, managed.c,
 * run.c, pool.c, arena.c), and of the rescue handoff (rescue.c), checked
 * with Spin (scripts/spin.sh, docs/design/model.md).
 *
 * Four files:
 *   state.pml            this one: the switches, the word, the shared state,
 *                        the contract's ghost bookkeeping, the queues, the
 *                        engine slot and the arena slots, the shard's rescue
 *                        state
 *   state_protocol.pml   one inline per function of protocol.h, each one
 *                        step (one atomic operation on the word) or one
 *                        load + compare-and-swap loop, as the C writes it
 *   state_threads.pml    the callers, one inline per C function (named
 *                        file:function), and one proctype per role: the
 *                        shard's owner, a pool worker, foreign application
 *                        threads, init (the first start; destroy), the
 *                        watchdog
 *   state_rescue.pml     the handoff of the shard to a rescuer (rescue.c,
 *                        guard.h): the owner's store buffer, both sides of
 *                        the handshake, the rescuer's turn; the rescuer and
 *                        drain proctypes
 *
 * What is shrunk: one timer slot (reused by up to GENS starts) and the one
 * second slot a periodic timer needs; a 2-bit reset sequence and a 2-bit
 * generation (generation 0 is in no id and spent, as in arena.c); time is
 * the owner's clock `now` (0..TMAX), deadlines small integers; the inbox
 * and the pool queue hold this one handle or nothing. Memory is
 * sequentially consistent, but for the owner's stores of its busy counts,
 * which a store buffer may hold past its next load (state_rescue.pml). Every load, store, compare-and-swap and
 * fetch-and of the word is its own step; local work, and work on what no
 * other thread may touch at that moment (the engine, an unpublished slot,
 * deadline_ns under WRITING), is folded into the step next to it.
 *
 * Build switches (spin -D...):
 *   NFOREIGN  application threads that own no shard (0..2)
 *   FOPS      calls each of them makes (start, reset, cancel, cancel_sync)
 *   OOPS      calls the owner thread makes (start, reset, cancel: the
 *             direct paths of api_timers.c when the word allows them)
 *   TMAX      the clock's last value; PERIOD: a periodic timer's period
 *   KIND      0 one-shot, 1 periodic, 2 TTL, 3 one-shot or periodic,
 *             4 any of the three
 *   GENS      starts of the slot (slot reuse from 2)
 *   STARTER   whose arena holds the slot (arena.c: only that thread
 *             allocates from it): 0 the owner (direct starts), k foreign
 *             thread k (starts travel as messages)
 *   POOL      1: a pool worker runs the callbacks of a managed shard;
 *             0: callback_threads = 0, the owner runs them inline
 *   RECALL    1: the shard may be attached while runs are queued on the
 *             pool (modes MANAGED -> ATTACHING_NOWAIT -> ATTACHED), so the
 *             worker hands them back (runner_recall)
 *   LAWN_FAILS 1: the lawn may refuse a TTL timer (owner_make_oneshot)
 *   DESTROY   1: spoke_destroy_release ends the run (parked periodic
 *             timers, runs left on the pool, arguments handed back)
 *   RESCUE    peers that may take the shard over for a turn (rescue.c,
 *             state_rescue.pml): 0..2; each tries RTRIES times
 *   OSTALLS   times the owner lets go of the shard between turns (its
 *             sleep, or a stall) with RESCUE
 *   ATTACHED  1: the owner is an attached thread (its calls count in its
 *             arena's in_call; spoke_poll is its turn), else the managed
 *             thread (turning)
 *   DETACH    1: the attached owner detaches (spoke_detach) once, and the
 *             new managed thread drives the shard; its thread may fail to
 *             start (the shard stays attached)
 *   ASYM      1: membarrier: the owner's light fence is a compiler barrier
 *             and the rescuer's heavy fence drains every thread's store
 *             buffer; 0: both are full fences
 *   MUTANT_*  a known-bad variant (scripts/spin.sh --mutants, docs/design/model.md)
 */

#ifndef NFOREIGN
#define NFOREIGN 1
#endif
#ifndef FOPS
#define FOPS 2
#endif
#ifndef OOPS
#define OOPS 0
#endif
#ifndef TMAX
#define TMAX 2
#endif
#ifndef PERIOD
#define PERIOD 1
#endif
#ifndef KIND
#define KIND 0
#endif
#ifndef GENS
#define GENS 1
#endif
#ifndef STARTER
#define STARTER 0
#endif
#ifndef POOL
#define POOL 1
#endif
#ifndef RECALL
#define RECALL 0
#endif
#ifndef LAWN_FAILS
#define LAWN_FAILS 0
#endif
#ifndef DESTROY
#define DESTROY 0
#endif
#ifndef RESCUE
#define RESCUE 0
#endif
#ifndef RTRIES
#define RTRIES 1
#endif
#ifndef OSTALLS
#define OSTALLS 1
#endif
#ifndef ATTACHED
#define ATTACHED 0
#endif
#ifndef DETACH
#define DETACH 0
#endif
#ifndef ASYM
#define ASYM 1
#endif

/* --- the word (state.h), shrunk ------------------------------------------- */
#define ST_MASK	    7
#define S_FREE	    0
#define S_ARMED	    1
#define S_DISP	    2
#define S_RUNNING   3
#define S_CANC	    4
#define S_AUX	    5
#define S_AUX_FREE  6
#define INBOX	    8
#define RESET	    16
#define STOP	    32
#define WAITERS	    64
#define KIND_MASK   384	/* bits 7..8 */
#define K_ONESHOT   0
#define K_PERIODIC  128
#define K_TTL	    256
#define SEQ_ONE	    512	/* sequence: bits 9..10 */
#define SEQ_MASK    1536
#define WRITING	    2048
#define ORPHAN	    4096
#define FRESH	    8192
#define GEN_SHIFT   14	/* generation: bits 14..15 */
#define MOVABLE	    65536	/* bit 16: started SPOKE_MOVABLE (fixed for the generation) */
#define LOW_MASK    (16383 | MOVABLE)	/* what the futex compares (the low 32 bits in C) */

#define status(s)	  ((s) & ST_MASK)
#define kind(s)		  ((s) & KIND_MASK)
#define gen(s)		  (((s) >> GEN_SHIFT) & 3)
#define with_status(s, x) (((s) & ~ST_MASK) | (x))
#define bump_seq(s)	  (((s) & ~SEQ_MASK) | (((s) + SEQ_ONE) & SEQ_MASK))
#define armed_word(g, k)  (((g) << GEN_SHIFT) | (k) | S_ARMED)	/* spoke_st_armed */
#define freed(s)	  (((gen(s) + 1) & 3) << GEN_SHIFT)		/* spoke_st_freed */
#ifdef MUTANT_ORPHAN_IGNORES_WRITING
#define retired(s)	  (freed(s))	/* WRITING ignored: no ORPHAN */
#else
#define retired(s)	  (((s) & WRITING) -> \
			   ((with_status(s, S_CANC) | ORPHAN) & ~(WAITERS | INBOX | RESET | STOP | FRESH)) : \
			   (freed(s)))	/* spoke_st_retired */
#endif

/* enum shard_mode, the modes the model visits; takes back: spoke_any_takes_back_runs */
#define M_MANAGED   0
#define M_NOWAIT    1	/* SHARD_ATTACHING_NOWAIT */
#define M_ATTACHED  2
#define M_STOPPING  3
#define M_DETACHING 4
#define takes_back(m) ((m) == M_NOWAIT || (m) == M_ATTACHED || (m) == M_DETACHING)
#define rescuable(m)  ((m) == M_MANAGED || (m) == M_ATTACHED)	/* rescue.c rescuable_mode */

/* arena.c: where the timer slot is */
#define SL_FRESH    0	/* never handed out: the zero word of a fresh mapping */
#define SL_LISTED   1	/* on its arena's free list or return queue */
#define SL_TAKEN    2	/* handed out */
#define SL_SPENT    3	/* its generations are used up: never handed out again */

#define EAGAIN 1
#define ENOENT 2

/* --- shared state ---------------------------------------------------------- */
int W = 0;		/* h->state; the slot starts fresh (generation 0) */
int A = 0;		/* the state word of the periodic part's second slot (SPOKE_ST_AUX) */
byte deadline;		/* h->deadline_ns */
byte base;		/* spoke_periodic.base_ns (in the second slot) */
byte now;		/* the owner's clock (sh->clock_ns); deadlines are read from it */
bool eng_on;		/* h is pending in an engine or on the stage ... */
byte eng_d;		/* ... for this deadline ... */
byte eng_in;		/* ... there: */
#define E_WHEEL	    0	/* the wheel (a one-shot or periodic timer: the wheel or the stage) */
#define E_LAWN	    1	/* the lawn */
#define E_STAGE	    2	/* the stage (a TTL timer: spoke_stage_takes) */
bool inq;		/* h is on its owner's inbox (one node per handle) */
bool poolq;		/* h is on its shard's pool queue */
byte slot = SL_FRESH;	/* the timer slot (arena.c) */
byte aslot = SL_FRESH;	/* the second slot: SL_LISTED = on its arena's aux_list */
byte mode = M_MANAGED;	/* sh->mode */
bool stopping;		/* s->stopping: destroy has begun */
bool pool_stop;		/* s->pool_stop */
bool fsleep[3];		/* futex sleepers (cancel_sync), by thread */
byte fdone;		/* foreign threads that made all their calls */
byte owner_ops = OOPS;	/* calls the owner thread has left */
bool owner_done, worker_done, worker_busy;
bool finished;		/* the end's checks passed */

/*
 * Rescue (rescue.c), the shard's side. turning and in_call are what other
 * threads see of the owner's stores; the owner's store buffer (x86-TSO)
 * holds a store of each it has not yet made visible: 0 none, 1 a 1, 2 a 0
 * (state_rescue.pml: the encoding, and why one entry suffices).
 */
bool rescue;		/* sh->due_word's SPOKE_DUE_RESCUED: a rescuer holds the shard */
bool turning;		/* sh->turning: the managed thread is busy on it */
byte turning_sb;
bool in_call;		/* the attached thread's arena count (nonzero) */
byte in_call_sb;
bool oarena = ATTACHED;	/* sh->owner_arena is set */
bool rescuing;		/* sh->rescuing: the holder's turn is a rescue */
bool orun;		/* h is on sh->owner_runs */
bool rrun;		/* h is on sh->rescued_runs */
byte rdone;		/* rescuers that made all their tries */

/*
 * A write of the due beside `rescue` (spoke_any_lower_due,
 * spoke_holder_publish_due): in the C a compare-and-swap keeping the bit,
 * which changes nothing of the model's state: no step (state_rescue.pml
 * says why). dseen: the bit as a non-atomic write read it.
 */
#if defined(MUTANT_DUE_STORE_DROPS_RESCUE)
#define due_write() d_step { rescue = 0 }	/* a store of the due alone */
#elif defined(MUTANT_DUE_WRITE_NOT_ATOMIC)
#define due_write() d_step { dseen = rescue }; d_step { rescue = dseen; dseen = 0 }	/* load, store */
#else
#define due_write()	/* nothing changes */
#endif

/* Who a process is (its local `self`): the checks of who holds and who runs. */
#define SELF_OWNER   0	/* foreign threads: 1, 2 */
#define SELF_WORKER  3
#define SELF_RESCUER 4	/* rescuers: 4, 5 */
#define SELF_INIT    7
#define is_rescuer(x) ((x) >= SELF_RESCUER && (x) < SELF_INIT)

/*
 * Ghosts of the handshake: the owner is past its check of `rescue` (it may
 * touch the engines, stage and queues: ocs), a rescuer past its check of
 * the owner's counts (rcs: which). The two never overlap; every touch of
 * the engine asserts that its thread is the one holder (ENGINE_TOUCH).
 */
bool ocs;
byte rcs;
#if RESCUE
#define HOLDS	     ((self == SELF_OWNER && ocs) || (is_rescuer(self) && rcs == self))
#define ENGINE_TOUCH \
	assert(self == SELF_INIT || (self == SELF_OWNER && ocs && rcs == 0) || \
	       (is_rescuer(self) && rcs == self && !ocs))
#else
#define HOLDS	     1
#define ENGINE_TOUCH skip
#endif
#if RESCUE && RECALL
#error "RESCUE and RECALL are separate configurations"
#endif

/*
 * Ghosts: the contract's bookkeeping for the newest generation (one slot:
 * a generation starts only after the one before it ended).
 *   pend      the generation can still run or be cancelled (contract line
 *             1: set by its start; cleared by the cancel that returns 0, by
 *             a one-shot's run, by destroy handing its argument back). A
 *             run or a cancel returning 0 asserts it, so neither happens
 *             twice, nor both; a -ENOENT asserts it is clear (line 3); a
 *             new start asserts the generation before it ended; the end
 *             asserts every started timer ended.
 *   cand, infl, sup  "not early" with overlapping calls: of resets whose
 *             calls overlap any may be ordered last (docs/design/service.md,
 *             "Memory ordering"), so a
 *             run at `now` is early only if now is below the deadline of
 *             every start or reset that could be the last: the last one to
 *             return on each thread that no reset begun after it returned
 *             has superseded (cand, by thread; sup[p]: the candidates that
 *             p's reset in flight found when it began), and every reset in
 *             flight (infl, with the generation of its id in infl_g).
 *   late      the reset in flight began when its generation was no longer
 *             pending: it must not return 0
 */
byte cur_gen;		/* generation of the newest id handed out (0: none yet) */
bool oneshot;		/* its kind runs once (one-shot, TTL) */
bool pend;
bool running;		/* a run of it is in progress */
byte cand[3];		/* deadlines; 0: none */
byte infl[3];
byte infl_g[3];
byte sup[3];		/* bit q: thread q's candidate */
bool late[3];
byte ngens;		/* starts so far */
byte gi, gL;		/* scratch, inside d_step only */

#include "state_protocol.pml"
#include "state_threads.pml"
