/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * guard.h - entering and leaving a public call, against spoke_destroy.
 *
 * Every public call on an instance counts itself in its thread's home arena
 * (struct arena, in_call) from before its first look at `stopping` to its
 * return. spoke_destroy sets `stopping`, then waits until no arena counts a
 * call (spoke_calls_drain): a call either saw `stopping` (and returns
 * -ESHUTDOWN) or is waited for. Only the arena's own thread writes its
 * count, with a plain load and store, so entering costs no locked
 * instruction: the count is on a line only that thread writes.
 *
 * Ordering is a store-load handshake between the two sides (Dekker): the
 * call stores its count, then loads `stopping`; destroy stores `stopping`,
 * then loads every count. Each side needs its store visible before its
 * load. The call, which is frequent, has only a compiler barrier there
 * (spoke_light_fence); destroy, which is rare, makes every thread of the
 * process execute a full barrier (spoke_heavy_fence: membarrier), so one of
 * the two sees the other's store. Where membarrier is not available both
 * sides use a full fence.
 *
 * A thread's first call on an instance has no arena to count itself in:
 * it counts itself in the instance's `entering` with a locked add (seq_cst,
 * against destroy's seq_cst store of `stopping`) while it looks the arena
 * up or makes one (arena.c spoke_call_first), once per thread and instance.
 *
 * Why not a library's RCU (docs/design/service.md, "Entering a call", has
 * the figures): urcu-bp, which needs no registration by the user, registers
 * a thread at its first read lock and aborts the process when it cannot grow
 * its registry, where spoke promises -EAGAIN; its domain is the whole
 * process, so a destroy waits for the application's own readers too, and a
 * destroy inside one of them never returns. Concurrency Kit's ck_epoch has a
 * domain per instance and records the caller allocates, but its
 * ck_epoch_begin is a locked exchange: about 11 ns a call here, against
 * 0.1 ns for the count. The count is what both do, with the fences of
 * liburcu's membarrier flavour, on memory spoke already has per thread.
 *
 * Synchronization table (the manner of protocol.h): one row and column per
 * operation on one instance; a mark means the two never run at once.
 *
 *                          1 2 3 4
 *   1 spoke_call_enter          a
 *   2 spoke_call_leave          a
 *   3 spoke_call_first
 *   4 spoke_calls_drain  a a
 *
 *   a  not on the same arena's count while it is not zero: drain returns only
 *      once every count it sees is zero, and a count that becomes nonzero
 *      after drain's fence belongs to a call that sees `stopping` and leaves
 *      at once, touching only its count, `stopping` and the arena pointer.
 *
 * What drain promises is that of a grace period: every call that began
 * before it has ended. A call that begins while the instance is being freed
 * is a call after spoke_destroy (a use after free), as it would be with RCU.
 */
#ifndef SPOKE_PERCPU_GUARD_H
#define SPOKE_PERCPU_GUARD_H

#include "service.h"
#include "test_hooks.h"

#include <errno.h>

/* The arena's thread, before a call's body, and after it: count it in and out. */
static inline void spoke_in_call_add(struct arena *a, int d)
{
	unsigned v = atomic_load_explicit(&a->in_call, memory_order_relaxed);

	/* Release: what the call did happens before a drain that reads the count back to 0. */
	atomic_store_explicit(&a->in_call, v + (unsigned)d, memory_order_release);
}

/* arena.c: the first call of this thread on s; -ESHUTDOWN, -EAGAIN (no arena). */
int spoke_call_first(struct spoke *s, struct arena **out);
/* arena.c: spoke_destroy, after storing `stopping`: wait for every call that did not see it. */
void spoke_calls_drain(struct spoke *s);

/*
 * Any thread: enter a call on s, counted in the calling thread's home arena
 * (*out). -EINVAL for a NULL s, -ESHUTDOWN once destroy has begun, -EAGAIN
 * if the thread's arena cannot be made. Inline: every call takes it.
 */
static inline int spoke_call_enter(struct spoke *s, struct arena **out)
{
	struct arena *a;

	if (!s)
		return -EINVAL;
	if (__builtin_expect(spoke_tls_arena.serial == s->serial, 1)) {
		a = spoke_tls_arena.arena;
	} else {
		int err = spoke_call_first(s, &a);

		if (err)
			return err;
	}
	spoke_in_call_add(a, 1);
	spoke_light_fence(s);
	if (atomic_load_explicit(&s->stopping, memory_order_relaxed)) {
		spoke_in_call_add(a, -1);
		return -ESHUTDOWN;
	}
	SPOKE_HOOK(SPOKE_HOOK_CALL_GUARDED);
	*out = a;
	return 0;
}

/* Leave a call entered with spoke_call_enter; returns ret. */
static inline int spoke_call_leave(struct arena *a, int ret)
{
	spoke_in_call_add(a, -1);
	return ret;
}

#endif /* SPOKE_PERCPU_GUARD_H */
