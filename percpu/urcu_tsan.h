/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * urcu_tsan.h - liburcu's primitive layer as __atomic builtins, in
 * ThreadSanitizer builds only, so that TSan sees liburcu's atomics.
 *
 * Why: liburcu 0.13 (Debian 12) implements uatomic_* on x86 as inline
 * assembly (lock cmpxchg, xchg, lock xadd, ...) and CMM_LOAD_SHARED /
 * CMM_STORE_SHARED as volatile plain accesses. TSan instruments neither:
 * it treats the volatile accesses as plain reads and writes, does not see
 * the assembly at all, and does not model standalone fences. So in a
 * correct program it reports data races inside cds_wfcq (and every other
 * liburcu structure), and it misses the happens-before edges the queue
 * creates, which is what would let it check the caller's own data.
 * Here those primitives are re-expressed as __atomic builtins, which both
 * gcc and clang turn into __tsan_atomic* calls under -fsanitize=thread.
 * This works only for liburcu code that is compiled into our own
 * translation units, i.e. the static inline code pulled in by
 * _LGPL_SOURCE (see urcu_wfcq.h); the code inside liburcu*.so stays
 * invisible.
 *
 * Mapping (TSan builds; x86-64 code is the same except where noted):
 *   uatomic_xchg, uatomic_cmpxchg,      __atomic_exchange_n,
 *   uatomic_add_return,                 __atomic_compare_exchange_n,
 *   uatomic_sub_return, uatomic_add,    __atomic_{add,sub}_fetch,
 *   uatomic_sub, uatomic_inc,           __atomic_fetch_{and,or}, all
 *   uatomic_dec, uatomic_and,           __ATOMIC_SEQ_CST: the same
 *   uatomic_or                          xchg / lock cmpxchg / lock xadd /
 *                                       lock add|and|or; liburcu documents
 *                                       these as full barriers.
 *   CMM_LOAD_SHARED, _CMM_LOAD_SHARED,  __atomic_load_n(__ATOMIC_ACQUIRE)
 *   uatomic_read                        (a plain mov on x86-64)
 *   CMM_STORE_SHARED, _CMM_STORE_SHARED, __atomic_store_n(__ATOMIC_RELEASE)
 *   uatomic_set                         (a plain mov on x86-64)
 *   cmm_smp_mb, cmm_mb                  __atomic_thread_fence(SEQ_CST), mfence
 *   cmm_smp_rmb                         __atomic_thread_fence(ACQUIRE)
 *   cmm_smp_wmb                         __atomic_thread_fence(RELEASE)
 *   cmm_smp_read_barrier_depends        __atomic_thread_fence(ACQUIRE)
 *                                       (the three: compiler barriers only
 *                                       on x86-64, as in liburcu)
 * Left as liburcu defines them: cmm_barrier and caa_cpu_relax (compiler
 * barrier and "pause", no memory access); cmm_rmb / cmm_wmb (lfence /
 * sfence, which order SSE and I/O accesses, beyond __atomic); the
 * cmm_smp_mb__{before,after}_uatomic_* helpers (the RMWs above are full
 * barriers already); CMM_ACCESS_ONCE (an lvalue, cannot become a
 * builtin; liburcu's structures use it only through the macros above).
 *
 * Why acquire/release for the plain shared accesses, when relaxed would
 * already make TSan treat them as atomic: liburcu orders them with
 * explicit barriers, and TSan (gcc 12's libtsan, clang 14's runtime)
 * ignores fences, so the ordering has to sit on the accesses themselves.
 * In cds_wfcq, a producer writes its node, xchg()es the tail (a full
 * barrier in liburcu's model) and then CMM_STORE_SHARED()s the old
 * tail's ->next; the consumer CMM_LOAD_SHARED()s ->next and relies on
 * cmm_smp_read_barrier_depends() (a consume) before reading the node.
 * For TSan to see "node written before the consumer reads it", that
 * store must be a release and that load an acquire; likewise
 * cmm_smp_rmb() in __cds_wfcq_next() orders the load of node->next
 * before the load of tail->p, which an acquire load of node->next gives.
 * (Measured with tests/service/test_wfcq_tsan.c: an owner that splices
 * first is already ordered after every spliced node by the seq_cst
 * exchanges on the tail, so relaxed would pass there; an owner that
 * dequeues from the shared queue itself reaches nodes through ->next
 * only, and with relaxed loads/stores TSan reports a race in
 * ___cds_wfcq_dequeue_with_state on node->next against the producer's
 * cds_wfcq_node_init.)
 * Every load and store on x86-64 has these semantics in hardware (TSO),
 * so the program TSan checks is the one that runs on x86-64. The price:
 * TSan cannot tell whether a liburcu user forgot a barrier that only a
 * weakly ordered CPU needs. Project code should therefore use __atomic
 * (or ck_pr) with explicit orders rather than CMM_LOAD_SHARED itself.
 *
 * How liburcu is made to use these: in TSan builds this header includes
 * liburcu's own primitive headers (compiler.h, arch.h, system.h,
 * uatomic.h, which define macros and the unused assembly helpers, but no
 * function that uses the macros) and then #undefs and redefines the
 * macros. Everything included later (urcu/static/wfcqueue.h, ...) expands
 * our definitions; macros liburcu derives from them (e.g. rcu_xchg_pointer)
 * pick them up too. This does not depend on the name of an
 * architecture-specific include guard. It must be included before any
 * other liburcu header that defines code (the check below stops the
 * build otherwise); include it through urcu_wfcq.h.
 *
 * Upstream answer: liburcu 0.14+ has the configure option
 * --enable-compiler-atomic-builtins (reworked in 0.15 for TSan); Debian
 * 12's 0.13.2 predates it, and the option is off in distribution builds.
 *
 * In non-TSan builds this header includes nothing and defines only its
 * include guard: the preprocessed output and the object code of a file
 * that includes it are the same as without it.
 */
#ifndef SPOKE_PERCPU_URCU_TSAN_H
#define SPOKE_PERCPU_URCU_TSAN_H

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SPOKE_URCU_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) && !defined(SPOKE_URCU_TSAN)
#define SPOKE_URCU_TSAN 1
#endif

#ifdef SPOKE_URCU_TSAN

/* Any liburcu header that defines code includes one of these first. */
#if defined(_URCU_SYSTEM_H) || defined(_URCU_UATOMIC_H)
#error "urcu_tsan.h must come before every liburcu header: include urcu_wfcq.h first"
#endif

#include <urcu/arch.h>
#include <urcu/compiler.h>
#include <urcu/system.h>
#include <urcu/uatomic.h>

/*
 * The unqualified type of lvalue x (drops const/volatile, which
 * __atomic's "expected" and result temporaries must not carry); the
 * statement expression yields an rvalue, as in liburcu's rcu_dereference.
 */
#define _SPOKE_URCU_TSAN_TYPE(x)                                                                   \
	__typeof__(__extension__({                                                                 \
		__typeof__(x) __attribute__((unused)) _spoke_q = {0};                              \
		_spoke_q;                                                                          \
	}))

/* Shared loads and stores (urcu/system.h, urcu/uatomic/generic.h) -------- */

#undef _CMM_LOAD_SHARED
#define _CMM_LOAD_SHARED(p) __atomic_load_n(&(p), __ATOMIC_ACQUIRE)

#undef CMM_LOAD_SHARED
#define CMM_LOAD_SHARED(p) _CMM_LOAD_SHARED(p)

#undef _CMM_STORE_SHARED
#define _CMM_STORE_SHARED(x, v)                                                                    \
	__extension__({                                                                            \
		_SPOKE_URCU_TSAN_TYPE(x) _spoke_v = (v);                                           \
		__atomic_store_n(&(x), _spoke_v, __ATOMIC_RELEASE);                                \
		_spoke_v;                                                                          \
	})

/* Returns v, as liburcu's does. */
#undef CMM_STORE_SHARED
#define CMM_STORE_SHARED(x, v) _CMM_STORE_SHARED(x, v)

#undef uatomic_read
#define uatomic_read(addr) __atomic_load_n((addr), __ATOMIC_ACQUIRE)

#undef uatomic_set
#define uatomic_set(addr, v)                                                                       \
	((void)__atomic_store_n((addr), (_SPOKE_URCU_TSAN_TYPE(*(addr)))(v), __ATOMIC_RELEASE))

/* Read-modify-write (urcu/uatomic/x86.h): full barriers, seq_cst ---------- */

#undef uatomic_xchg
#define uatomic_xchg(addr, v)                                                                      \
	__atomic_exchange_n((addr), (_SPOKE_URCU_TSAN_TYPE(*(addr)))(v), __ATOMIC_SEQ_CST)

/* Returns the value found at addr, as liburcu's does. */
#undef uatomic_cmpxchg
#define uatomic_cmpxchg(addr, old, _new)                                                           \
	__extension__({                                                                            \
		_SPOKE_URCU_TSAN_TYPE(*(addr)) _spoke_old = (_SPOKE_URCU_TSAN_TYPE(*(addr)))(old); \
		(void)__atomic_compare_exchange_n((addr), &_spoke_old,                             \
						  (_SPOKE_URCU_TSAN_TYPE(*(addr)))(_new), 0,       \
						  __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);             \
		_spoke_old;                                                                        \
	})

#undef uatomic_add_return
#define uatomic_add_return(addr, v) __atomic_add_fetch((addr), (v), __ATOMIC_SEQ_CST)

#undef uatomic_sub_return
#define uatomic_sub_return(addr, v) __atomic_sub_fetch((addr), (v), __ATOMIC_SEQ_CST)

#undef uatomic_add
#define uatomic_add(addr, v) ((void)__atomic_add_fetch((addr), (v), __ATOMIC_SEQ_CST))

#undef uatomic_sub
#define uatomic_sub(addr, v) ((void)__atomic_sub_fetch((addr), (v), __ATOMIC_SEQ_CST))

#undef uatomic_inc
#define uatomic_inc(addr) uatomic_add((addr), 1)

#undef uatomic_dec
#define uatomic_dec(addr) uatomic_sub((addr), 1)

#undef uatomic_and
#define uatomic_and(addr, v) ((void)__atomic_fetch_and((addr), (v), __ATOMIC_SEQ_CST))

#undef uatomic_or
#define uatomic_or(addr, v) ((void)__atomic_fetch_or((addr), (v), __ATOMIC_SEQ_CST))

/*
 * Barriers (urcu/arch/x86.h, urcu/arch/generic.h). gcc 12 warns (-Wtsan,
 * an error with -Werror) that TSan does not instrument atomic_thread_fence:
 * we know, see above; the warning is silenced for these three functions
 * only, so fences written in project code still get it.
 */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#define _SPOKE_URCU_TSAN_NO_WTSAN 1
#endif
#ifdef _SPOKE_URCU_TSAN_NO_WTSAN
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wtsan"
#endif
static inline __attribute__((always_inline)) void _spoke_urcu_tsan_fence_seq_cst(void)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

static inline __attribute__((always_inline)) void _spoke_urcu_tsan_fence_acquire(void)
{
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
}

static inline __attribute__((always_inline)) void _spoke_urcu_tsan_fence_release(void)
{
	__atomic_thread_fence(__ATOMIC_RELEASE);
}
#ifdef _SPOKE_URCU_TSAN_NO_WTSAN
#pragma GCC diagnostic pop
#endif

#undef cmm_mb
#define cmm_mb() _spoke_urcu_tsan_fence_seq_cst()

#undef cmm_smp_mb
#define cmm_smp_mb() _spoke_urcu_tsan_fence_seq_cst()

#undef cmm_smp_rmb
#define cmm_smp_rmb() _spoke_urcu_tsan_fence_acquire()

#undef cmm_smp_wmb
#define cmm_smp_wmb() _spoke_urcu_tsan_fence_release()

#undef cmm_smp_read_barrier_depends
#define cmm_smp_read_barrier_depends() _spoke_urcu_tsan_fence_acquire()

#endif /* SPOKE_URCU_TSAN */

#endif /* SPOKE_PERCPU_URCU_TSAN_H */
