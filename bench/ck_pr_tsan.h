/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * ck_pr_tsan.h - the part of Concurrency Kit's ck_pr that ck_ec.h uses,
 * as __atomic builtins, in ThreadSanitizer builds only (the counterpart of
 * percpu/urcu_tsan.h for liburcu). Include it before <ck_ec.h>.
 *
 * Why: CK 0.7.1's x86_64 ck_pr (gcc/x86_64/ck_pr.h) is inline assembly,
 * loads and stores included ("movl"), and its CK_USE_CC_BUILTINS variant
 * (gcc/ck_pr.h) still loads and stores through volatile pointers and fences
 * with __sync_synchronize. TSan instruments neither: it does not see the
 * eventcount's counter at all, and so misses the happens-before edge that a
 * producer's increment gives a consumer that read the new value.
 *
 * How: this header takes ck_pr.h's include guard and defines, as static
 * inline functions, exactly what ck_ec.h calls: ck_pr_load_32/64 (acquire,
 * since TSan ignores the ck_pr_fence_acquire that follows), ck_pr_faa_32/64
 * (seq_cst, as lock xadd), and the fences (ck_pr_fence_acquire, _store,
 * _store_atomic: compiler barriers on x86-64 TSO, here __atomic fences that
 * TSan ignores). ck_ec32_inc / ck_ec32_add_sp are further inline assembly
 * (lock incl, xaddl) inside ck_ec.h itself, out of this header's reach:
 * TSan builds must call ck_ec32_add_mp(ec, mode, 1) instead (SPOKE_CK_INC
 * below). And the slow paths (ck_ec32_wait_slow, ck_ec32_wake) are compiled
 * into libck.so, uninstrumented whatever this header does.
 */
#ifndef SPOKE_BENCH_CK_PR_TSAN_H
#define SPOKE_BENCH_CK_PR_TSAN_H

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SPOKE_CK_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) && !defined(SPOKE_CK_TSAN)
#define SPOKE_CK_TSAN 1
#endif
#ifdef SPOKE_CK_ASM /* spoke-bench-ec-asm: keep CK's assembly, to show what TSan says */
#undef SPOKE_CK_TSAN
#endif

#ifdef SPOKE_CK_TSAN
#ifdef CK_PR_H
#error "ck_pr_tsan.h must come before every Concurrency Kit header"
#endif
#define CK_PR_H 1 /* ck_pr.h is now skipped */

#include <ck_cc.h>
#include <ck_md.h>
#include <ck_stdbool.h>
#include <ck_stdint.h>

#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wtsan"
#endif
static inline void ck_pr_barrier(void)
{
	__asm__ __volatile__("" ::: "memory");
}
static inline void ck_pr_fence_acquire(void)
{
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
}
static inline void ck_pr_fence_store(void)
{
	__atomic_thread_fence(__ATOMIC_RELEASE);
}
static inline void ck_pr_fence_store_atomic(void)
{
	__atomic_thread_fence(__ATOMIC_RELEASE);
}
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#pragma GCC diagnostic pop
#endif
static inline void ck_pr_stall(void)
{
	__builtin_ia32_pause();
}
static inline uint32_t ck_pr_load_32(const uint32_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
static inline uint64_t ck_pr_load_64(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
static inline uint32_t ck_pr_faa_32(uint32_t *p, uint32_t d)
{
	return __atomic_fetch_add(p, d, __ATOMIC_SEQ_CST);
}
static inline uint64_t ck_pr_faa_64(uint64_t *p, uint64_t d)
{
	return __atomic_fetch_add(p, d, __ATOMIC_SEQ_CST);
}
#define CK_F_PR_FAA_64 1

#define SPOKE_CK_INC(ec, mode) ((void)ck_ec32_add_mp((ec), (mode), 1))
#else
#define SPOKE_CK_INC(ec, mode) ck_ec32_inc((ec), (mode))
#endif /* SPOKE_CK_TSAN */

#endif /* SPOKE_BENCH_CK_PR_TSAN_H */
