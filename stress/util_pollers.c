/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * util_pollers.c - the stress library's pollers: threads that attach to a
 * shard and poll it, checking what spoke_attach, spoke_poll, spoke_detach
 * and spoke_next_deadline_ns return (stress_util.h: "pollers").
 */
#include "stress_util.h"

_Thread_local struct poller *tl_poller;
_Atomic uint64_t g_attached_mask;
_Atomic uint16_t g_handovers[64];
static _Thread_local uint64_t tl_inline_runs; /* callbacks run on this thread */

void poller_note_run(void)
{
	if (tl_poller)
		tl_inline_runs++;
}

/*
 * Poller: give the shard back to a managed thread (spoke_detach), let it
 * drive the shard for up to 500 us, then take it over again. Its timers run
 * on the pool meanwhile. False (reported) if a call did not do its part.
 */
static bool poller_handover(struct poller *p, struct rng *r)
{
	int rc;

	if (p->shard < 64) {
		atomic_fetch_and(&g_attached_mask, ~(1ull << p->shard));
		atomic_fetch_add(&g_handovers[p->shard], 1);
	}
	rc = spoke_detach(p->s);
	if (rc != 0) {
		VIOLATION("spoke_detach of attached shard %u returned %d", p->shard, rc);
		return false;
	}
	rc = spoke_poll(p->s);
	if (rc != -EPERM)
		VIOLATION("spoke_poll after spoke_detach returned %d, not -EPERM", rc);
	sleep_ns(rng_below(r, 500 * US));
	rc = spoke_attach(p->s, p->shard);
	if (rc != 0) {
		VIOLATION("spoke_attach(%u) after its own detach returned %d", p->shard, rc);
		return false;
	}
	if (p->shard < 64)
		atomic_fetch_or(&g_attached_mask, 1ull << p->shard);
	p->handovers++;
	return true;
}

/* A call returned -ESHUTDOWN while destroy runs (g_shutdown_ok): note it, and stop calling. */
static bool poller_shut(int64_t rc)
{
	if (rc != -ESHUTDOWN || !atomic_load(&g_shutdown_ok))
		return false;
	tl_saw_shutdown = true;
	return true;
}

void *poller_main(void *arg)
{
	struct poller *p = arg;
	struct rng r = rng_make(p->seed, 0xa77, p->shard);
	unsigned nsh;
	int rc;

	tl_poller = p;
	rc = spoke_attach(p->s, p->shard);
	if (poller_shut(rc)) {
		atomic_store(&p->stopped, 1);
		return NULL;
	}
	if (rc != 0) {
		VIOLATION("spoke_attach(%u) returned %d", p->shard, rc);
		atomic_store(&p->stopped, 1);
		return NULL;
	}
	if (p->shard < 64)
		atomic_fetch_or(&g_attached_mask, 1ull << p->shard);
	atomic_store(&p->attached, 1);
	/* The thread that owns a shard cannot take a second one (0 shards: destroy began). */
	nsh = spoke_shards(p->s);
	rc = nsh ? spoke_attach(p->s, (p->shard + 1) % nsh) : -ESHUTDOWN;
	if (rc != -EBUSY && !(rc == -ESHUTDOWN && atomic_load(&g_shutdown_ok)))
		VIOLATION("a second spoke_attach from an attached thread returned %d, not -EBUSY",
			  rc);
	while (!atomic_load_explicit(&p->stop, memory_order_relaxed)) {
		poller_work_fn *work = atomic_load(&p->work);

		uint64_t before, next;
		int n;

		if (work)
			work(p, &r);
		tally_flush(); /* a poller runs until after the settle: keep its counts current */
		before = tl_inline_runs;
		n = spoke_poll(p->s);
		tally(TK_POLL);
		p->polls++;
		if (poller_shut(n))
			break;
		if (n < 0) {
			VIOLATION("spoke_poll on attached shard %u returned %d", p->shard, n);
			break;
		}
		/* It reports at least the callbacks it ran here (a cancel that wins between
		 * dispatch and run may make it report one more). */
		if ((uint64_t)n < tl_inline_runs - before)
			VIOLATION("spoke_poll returned %d but ran %" PRIu64 " callbacks", n,
				  tl_inline_runs - before);
		else if ((uint64_t)n > tl_inline_runs - before)
			p->over_reports++;
		atomic_fetch_add(&p->loops, 1);
		n = spoke_next_deadline_ns(p->s, &next);
		if (poller_shut(n))
			break;
		if (n < 0 || n > 1)
			VIOLATION("spoke_next_deadline_ns returned %d", n);
		if (next != 0) /* UINT64_MAX when nothing is pending */
			sleep_ns(next > 100 * US ? 100 * US : next);
		/* Only while it has work: after poller_quiesce it stays attached. */
		if (work && atomic_load(&p->handover) && rng_below(&r, 32) == 0 &&
		    !poller_handover(p, &r))
			break;
	}
	/* Its exit hands the shard to a managed thread: attached no more. */
	if (p->shard < 64)
		atomic_fetch_and(&g_attached_mask, ~(1ull << p->shard));
	tally_flush();
	atomic_store(&p->stopped, 1);
	return NULL;
}

void poller_start(struct poller *p, struct spoke *s, unsigned k, poller_work_fn *work, bool wait)
{
	memset(p, 0, sizeof(*p));
	p->s = s;
	p->shard = k;
	atomic_init(&p->work, work);
	p->seed = g_seed ^ (0x51ull << 40) ^ k;
	p->tid = thread_spawn(poller_main, p);
	while (wait && !atomic_load(&p->attached) && !atomic_load(&p->stopped))
		sleep_ns(100 * US);
}

void poller_quiesce(struct poller *p)
{
	unsigned l;

	atomic_store(&p->work, NULL);
	l = atomic_load(&p->loops);
	while (atomic_load(&p->loops) - l < 2 && !atomic_load(&p->stopped))
		sleep_ns(50 * US);
}

void poller_stop(struct poller *p)
{
	atomic_store(&p->stop, 1);
	pthread_join(p->tid, NULL);
}
