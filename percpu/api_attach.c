/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * api_attach.c - attached shards: spoke_attach and spoke_detach, and what the
 * attached thread's event loop calls (spoke_poll, spoke_wake_fd,
 * spoke_next_deadline); the thread-exit hook that hands on the shard of a
 * thread that exits attached.
 */
#define _GNU_SOURCE
#include "api.h"
#include "guard.h"
#include "service.h"

#include <errno.h>

/* --- attached shards ---------------------------------------------------------- */

/*
 * Does the calling thread own a shard of another live instance? Its owner
 * record holds one shard; a record left by an instance that has since been
 * destroyed does not count. A managed thread owns its shard until it ends,
 * also while its instance is being destroyed (off the live list, the thread
 * not yet joined): an attach from its inline callback then would be undone
 * by the thread's exit, leaving the other shard attached to nobody.
 */
static bool owns_shard_elsewhere(const struct spoke *s)
{
	uint64_t serial = spoke_tls_owner.serial;

	return spoke_tls_owner.sh && serial != 0 && serial != s->serial &&
	       (spoke_tls_owner.managed || spoke_instance_live(serial));
}

/*
 * spoke_any_attach as a wait of the wait-for graph (waits.c): -EDEADLK if
 * waiting for the shard's managed thread (and, from outside the pool, for
 * its runs on the pool) would close a cycle. The wait is recorded before
 * the mode changes, since an attach from a pool callback lets the managed
 * thread go at once; a shard another attach or detach holds says -EBUSY
 * first, so that only an attach that waits shows as one (a race with
 * another attach can still show it for the moment its CAS takes).
 */
static int attach_waiting(struct spoke *s, unsigned k, bool from_pool, struct arena *a)
{
	struct spoke_wait w = {.kind = SPOKE_WAIT_ATTACH,
			       .s = s,
			       .shard = k,
			       .pool_too = !from_pool,
			       .in_call = s};
	int mode = atomic_load_explicit(&s->shards[k].mode, memory_order_relaxed), err;

	if (mode != SHARD_MANAGED && mode != SHARD_UNOWNED)
		return -EBUSY;
	err = spoke_waits_enter(&w);
	if (err)
		return err;
	err = spoke_any_attach(&s->shards[k], from_pool, a);
	spoke_waits_leave(&w);
	return err;
}

int spoke_attach(struct spoke *s, unsigned shard)
{
	struct arena *a;
	int err, cancel_state;

	err = spoke_call_enter(s, &a);
	if (err)
		return err;
	if (shard >= s->nshards)
		return spoke_call_leave(a, -EINVAL);
	if (spoke_any_my_shard(s) || owns_shard_elsewhere(s))
		return spoke_call_leave(a, -EBUSY);
	/* It joins the managed thread, a cancellation point; no call may be cut short. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);
	err = attach_waiting(s, shard, spoke_on_pool_thread(), a);
	pthread_setcancelstate(cancel_state, NULL);
	return spoke_call_leave(a, err);
}

/* Enter a call that only the thread attached to a shard may make. */
static int enter_attached(struct spoke *s, struct arena **a, struct shard **sh)
{
	int err;

	err = spoke_call_enter(s, a);
	if (err)
		return err;
	*sh = spoke_any_my_shard(s);
	if (!*sh || atomic_load_explicit(&(*sh)->mode, memory_order_relaxed) != SHARD_ATTACHED)
		return spoke_call_leave(*a, -EPERM);
	return 0;
}

/*
 * Enter a call of the attached thread that touches its shard's engines,
 * queues or turn state: as enter_attached, and once no rescuer holds the shard (rescue.c;
 * the call's count keeps one from taking it after this).
 */
static int enter_attached_holding(struct spoke *s, struct arena **a, struct shard **sh)
{
	for (;;) {
		int err = enter_attached(s, a, sh);

		if (err || !spoke_owner_rescued(*sh))
			return err;
		spoke_call_leave(*a, 0);
		spoke_owner_await_rescue(*sh);
	}
}

int spoke_detach(struct spoke *s)
{
	struct shard *sh;
	struct arena *a;
	int err = enter_attached_holding(s, &a, &sh);

	if (err)
		return err;
	if (sh->in_turn)
		return spoke_call_leave(a, -EBUSY); /* from a callback inside its own spoke_poll */
	return spoke_call_leave(a, spoke_owner_detach(sh));
}

/*
 * The thread whose home arena is a is exiting (its key destructor, under the
 * arena lock, so a->s is alive). If it is still attached to a shard of a->s,
 * hand the shard to a managed thread, so that its timers keep firing instead
 * of waiting for a poll that will never come; if no thread can be started,
 * leave the shard unowned so that another thread can attach it. Counted in
 * the arena like any call, so destroy cannot overlap it. The instance's
 * thread-exit hook (spoke_arena_key_create), so that arena.c needs nothing
 * of this file.
 */
void spoke_detach_at_exit(struct arena *a)
{
	struct spoke *s = a->s;
	struct shard *sh = spoke_any_my_shard(s);

	if (!sh || atomic_load_explicit(&sh->mode, memory_order_relaxed) != SHARD_ATTACHED)
		return;
	/* spoke_call_enter on the arena the destructor was handed, once no rescuer holds sh. */
	for (;;) {
		spoke_in_call_add(a, 1);
		spoke_light_fence(s);
		if (atomic_load_explicit(&s->stopping, memory_order_relaxed)) {
			spoke_in_call_add(a, -1);
			return;
		}
		if (!spoke_owner_rescued(sh))
			break;
		spoke_in_call_add(a, -1);
		spoke_owner_await_rescue(sh);
	}
	if (sh->in_turn) { /* it exits from a callback of its own poll: a misuse */
		spoke_in_call_add(a, -1);
		return;
	}
	if (spoke_owner_detach(sh))
		spoke_owner_abandon(sh); /* no thread to start: left for the next attach */
	spoke_call_leave(a, 0);
}

int spoke_poll(struct spoke *s)
{
	struct shard *sh;
	struct arena *a;
	int cancel_state, n, err = enter_attached_holding(s, &a, &sh);

	if (err)
		return err;
	/* Its callbacks may reach cancellation points: the turn must not be cut short. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);
	spoke_owner_attached_awake(sh);
	n = spoke_owner_turn(sh, true);
	/* Not from a callback's poll (no turn then): the outer turn publishes. */
	if (sh->rescue_on && !sh->in_turn)
		spoke_owner_turned(sh, sh->clock_ns, spoke_owner_next_ns(sh));
	pthread_setcancelstate(cancel_state, NULL);
	return spoke_call_leave(a, n);
}

int spoke_wake_fd(struct spoke *s)
{
	struct shard *sh;
	struct arena *a;
	int err = enter_attached(s, &a, &sh);

	if (err)
		return err;
	return spoke_call_leave(a, spoke_owner_wake_fd(sh));
}

int spoke_next_deadline_ns(struct spoke *s, uint64_t *ns)
{
	struct shard *sh;
	struct arena *a;
	int64_t next;
	int err;

	if (!ns)
		return -EINVAL;
	err = enter_attached_holding(s, &a, &sh);
	if (err)
		return err;
	next = spoke_owner_attached_sleep(sh, spoke_owner_next_ns(sh));
	spoke_call_leave(a, 0);
	*ns = next < 0 ? UINT64_MAX : (uint64_t)next;
	return next < 0; /* 1: nothing pending */
}

int64_t spoke_next_deadline(struct spoke *s)
{
	uint64_t ns = UINT64_MAX; /* set whenever ret >= 0; gcc -O2 cannot tell */
	int ret = spoke_next_deadline_ns(s, &ns);

	/* -EPERM is -1, which means "no timer" here: say -EINVAL instead. */
	if (ret < 0)
		return ret == -EPERM ? -EINVAL : ret;
	return ret == 1 ? -1 : (int64_t)ns;
}
