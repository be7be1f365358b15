/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * util_records.c - the stress library's records, one per one-shot timer:
 * starting, cancelling and resetting a record's timer, the record callback,
 * and the sweep that finds timers with no outcome (stress_util.h:
 * "records" says what each check catches).
 */
#include "stress_util.h"

static const char *const rec_status_name[] = {"IDLE", "ARMED", "RUNNING", "FIRED", "CANCELLED"};

struct rec *g_recs;
size_t g_nrecs;

void (*g_fire_hook)(struct rec *r, size_t idx, uint64_t gen);
uint64_t g_fire_spin_ns;
_Thread_local void *tl_running_arg;

void recs_alloc(size_t n)
{
	g_recs = stress_table_alloc(n, sizeof(*g_recs), "records");
	g_nrecs = n;
}

/* A settled REC_STRICT record that fired: not before its last successful deadline. */
static void rec_check_strict(struct rec *r, uint64_t w)
{
	uint64_t f, ok;

	if (rec_status(w) != REC_FIRED || !(atomic_load(&r->tag) & REC_STRICT))
		return;
	f = atomic_load(&r->fired_ns);
	ok = atomic_load(&r->ok_ns);
	if (f < ok)
		VIOLATION("timer (record %zu gen %" PRIu64 ") ran %" PRIu64
			  " ns before the deadline of its last start/reset that returned 0",
			  (size_t)(r - g_recs), rec_gen(w), ok - f);
}

/* Owner: a new generation of a settled record, armed for a timer due no earlier than earliest. */
static uint64_t rec_arm(struct rec *r, uint64_t earliest, uint32_t shard, uint32_t tag)
{
	uint64_t w = atomic_load_explicit(&r->word, memory_order_acquire), gen;

	if (!rec_settled(w)) {
		fprintf(stderr, "%s: internal error: arming record %zu in state %s\n", g_name,
			(size_t)(r - g_recs), rec_status_name[rec_status(w)]);
		abort();
	}
	rec_check_strict(r, w);
	gen = rec_gen(w) + 1;
	atomic_store_explicit(&r->earliest_ns, earliest, memory_order_relaxed);
	atomic_store_explicit(&r->ok_ns, earliest, memory_order_relaxed);
	atomic_store_explicit(&r->fired_ns, 0, memory_order_relaxed);
	atomic_store_explicit(&r->shard, shard, memory_order_relaxed);
	atomic_store_explicit(&r->tag, tag, memory_order_relaxed);
	atomic_store_explicit(&r->resets, 0, memory_order_relaxed);
	atomic_store_explicit(&r->word, rec_word(gen, REC_ARMED), memory_order_release);
	return gen;
}

static void rec_publish(struct rec *r, uint64_t gen, spoke_id id)
{
	atomic_store_explicit(&r->id, id, memory_order_release);
	atomic_store_explicit(&r->id_gen, gen, memory_order_release);
}

/*
 * A consistent (generation, id, status) of r, or -1 if its current
 * generation has not published its id yet. Any thread.
 */
static int rec_snapshot(struct rec *r, uint64_t *gen, spoke_id *id)
{
	uint64_t g = atomic_load_explicit(&r->id_gen, memory_order_acquire);
	spoke_id i = atomic_load_explicit(&r->id, memory_order_acquire);
	uint64_t w = atomic_load_explicit(&r->word, memory_order_acquire);

	/* id is stored after the word of its generation: a newer id means a newer word. */
	if (g == 0 || rec_gen(w) != g)
		return -1;
	*gen = g;
	*id = i;
	return (int)rec_status(w);
}

static const char *how_name(unsigned how)
{
	return how == HOW_ON	 ? "spoke_start_on"
	       : how == HOW_HOME ? "spoke_start"
				 : "spoke_start_ttl";
}

int rec_start(struct spoke *s, size_t idx, enum start_how how, unsigned shard, uint64_t delay_ns,
	      uint32_t tag)
{
	struct rec *r = &g_recs[idx];
	uint32_t rshard = REC_SHARD_ANY;
	uint64_t gen;
	spoke_id id = 0;
	int rc;

	if (how == HOW_ON)
		rshard = shard;
	else if (how == HOW_HOME && tl_poller)
		rshard = tl_poller->shard;
	/*
	 * Its shard was attached before this start: the callback must run in
	 * that poll, unless the shard is handed over before then (g_handovers).
	 */
	if (rshard < 64) {
		atomic_store_explicit(&r->handover, atomic_load(&g_handovers[rshard]),
				      memory_order_relaxed);
		if ((atomic_load(&g_attached_mask) >> rshard) & 1)
			tag |= REC_ON_POLLER;
	}
	atomic_store_explicit(&r->how, (uint16_t)how, memory_order_relaxed);
	gen = rec_arm(r, sat_add(now_ns(), delay_ns), rshard, tag);
	switch (how) {
	case HOW_ON:
		rc = spoke_start_on(s, shard, delay_ns, rec_fire, arg_encode(idx, gen), &id);
		break;
	case HOW_HOME:
		rc = spoke_start(s, delay_ns, rec_fire, arg_encode(idx, gen), &id);
		break;
	default:
		rc = spoke_start_ttl(s, delay_ns, rec_fire, arg_encode(idx, gen), &id);
		break;
	}
	if (rc == 0) {
		if (id == 0)
			VIOLATION("a start returned 0 with id 0");
		rec_publish(r, gen, id);
		tally(TK_START);
	} else {
		atomic_store_explicit(&r->word, rec_word(gen, REC_IDLE), memory_order_release);
		check_start_rc(how_name(how), rc);
	}
	return rc;
}

/* A cancel of generation gen returned 0: it is the one outcome of that timer. */
static void rec_cancel_won(struct rec *r, uint64_t gen, const char *how)
{
	uint64_t exp = rec_word(gen, REC_ARMED);

	if (atomic_compare_exchange_strong(&r->word, &exp, rec_word(gen, REC_CANCELLED)))
		return;
	if (rec_gen(exp) != gen)
		VIOLATION(
			"%s returned 0 for a timer that had already ended (record %zu gen %" PRIu64
			", now gen %" PRIu64 " %s): a stale id took effect",
			how, (size_t)(r - g_recs), gen, rec_gen(exp),
			rec_status_name[rec_status(exp)]);
	else if (rec_status(exp) == REC_CANCELLED)
		VIOLATION("two cancels of one timer returned 0 (record %zu gen %" PRIu64 ")",
			  (size_t)(r - g_recs), gen);
	else
		VIOLATION("%s returned 0 but the callback ran (record %zu gen %" PRIu64
			  ", callback %s)",
			  how, (size_t)(r - g_recs), gen, rec_status_name[rec_status(exp)]);
}

int rec_cancel(struct spoke *s, size_t idx, bool sync)
{
	struct rec *r = &g_recs[idx];
	uint64_t gen, w;
	spoke_id id;
	int st = rec_snapshot(r, &gen, &id), rc;
	bool own;

	if (st != REC_ARMED && st != REC_RUNNING)
		return 1;
	own = tl_running_arg == arg_encode(idx, gen);
	rc = sync ? spoke_cancel_sync(s, id) : spoke_cancel(s, id);
	if (sync && rc != -EDEADLK && rc != -ESHUTDOWN) {
		/* cancel_sync returned: no run of this timer is in progress. */
		w = atomic_load(&r->word);
		if (rec_gen(w) == gen && rec_status(w) == REC_RUNNING && !own)
			VIOLATION("spoke_cancel_sync returned %d while the callback was running "
				  "(record %zu gen %" PRIu64 ")",
				  rc, idx, gen);
	}
	if (sync && own && rc != -EDEADLK && rc != -ESHUTDOWN)
		VIOLATION(
			"spoke_cancel_sync from the timer's own callback returned %d, not -EDEADLK",
			rc);
	switch (rc) {
	case 0:
		tally(sync ? TK_SYNC_OK : TK_CANCEL_OK);
		rec_cancel_won(r, gen, sync ? "spoke_cancel_sync" : "spoke_cancel");
		break;
	case -ENOENT:
		tally(sync ? TK_SYNC_NOENT : TK_CANCEL_NOENT);
		break;
	case -EDEADLK:
		tally(TK_SYNC_DEADLK);
		if (!sync || !own)
			VIOLATION("%s returned -EDEADLK outside the timer's own callback",
				  sync ? "spoke_cancel_sync" : "spoke_cancel");
		break;
	default:
		check_rc(sync ? "spoke_cancel_sync" : "spoke_cancel", rc, true);
		break;
	}
	return rc;
}

int rec_reset(struct spoke *s, size_t idx, uint64_t delay_ns)
{
	struct rec *r = &g_recs[idx];
	uint64_t gen, d, e;
	spoke_id id;
	int rc;

	if (rec_snapshot(r, &gen, &id) != REC_ARMED)
		return 1;
	d = sat_add(now_ns(), delay_ns);
	/* Lower the bound before the call: the timer may run at d right after it. */
	e = atomic_load(&r->earliest_ns);
	while (d < e && !atomic_compare_exchange_weak(&r->earliest_ns, &e, d))
		;
	rc = spoke_reset(s, id, delay_ns);
	if (rc == 0) {
		tally(TK_RESET_OK);
		atomic_fetch_add_explicit(&r->resets, 1, memory_order_relaxed);
		if (atomic_load_explicit(&r->tag, memory_order_relaxed) & REC_STRICT)
			atomic_store(&r->ok_ns, d);
	} else if (rc == -ENOENT) {
		tally(TK_RESET_NOENT);
	} else {
		check_rc("spoke_reset", rc, true);
	}
	return rc;
}

int rec_step(struct spoke *s, size_t idx, struct rng *r, const struct step_mix *m)
{
	uint64_t w = atomic_load_explicit(&g_recs[idx].word, memory_order_acquire);
	unsigned pick = (unsigned)rng_below(r, 100), how;

	if (rec_status(w) == REC_ARMED) {
		if (pick < m->cancel_pct)
			return rec_cancel(s, idx, rng_pct(r, m->sync_pct));
		if (pick < m->cancel_pct + m->reset_pct)
			return rec_reset(s, idx, m->reset_delay(r, m->ctx));
		return 1;
	}
	if (!rec_settled(w))
		return 1;
	how = (unsigned)rng_below(r, 100);
	return rec_start(s, idx,
			 how < m->on_pct		 ? HOW_ON
			 : how < m->on_pct + m->home_pct ? HOW_HOME
							 : HOW_TTL,
			 (unsigned)rng_below(r, m->nshards), m->start_delay(r, m->ctx), m->tag);
}

struct step_mix step_mix_strict(unsigned cancel_pct, unsigned sync_pct, unsigned on_pct,
				unsigned nshards, uint64_t (*delay)(struct rng *r, const void *ctx))
{
	return (struct step_mix){
		.cancel_pct = cancel_pct,
		.sync_pct = sync_pct,
		.reset_pct = 25,
		.on_pct = on_pct,
		.home_pct = 25,
		.nshards = nshards,
		.tag = REC_STRICT,
		.start_delay = delay,
		.reset_delay = delay,
	};
}

struct step_mix step_mix_poller(struct step_mix m)
{
	m.on_pct = 30;
	m.home_pct = 70;
	return m;
}

/*
 * Callback side: claim the run of (idx, gen), checking that it is the first
 * and only outcome, not early, and on the right thread. Returns the record,
 * or NULL if the run must not happen (reported).
 */
static struct rec *rec_fire_begin(void *arg, uint64_t *gen_out)
{
	uint64_t t = now_ns(), gen = arg_gen(arg), exp, e;
	size_t idx = arg_idx(arg);
	struct rec *r;
	uint32_t tag, shard;

	poller_note_run();
	if (idx >= g_nrecs || gen == 0) {
		VIOLATION("callback with a bad argument %p", arg);
		return NULL;
	}
	r = &g_recs[idx];
	exp = rec_word(gen, REC_ARMED);
	if (!atomic_compare_exchange_strong(&r->word, &exp, rec_word(gen, REC_RUNNING))) {
		if (rec_gen(exp) != gen)
			VIOLATION("callback of record %zu gen %" PRIu64
				  " ran after that timer had ended (record now gen %" PRIu64 " %s)",
				  idx, gen, rec_gen(exp), rec_status_name[rec_status(exp)]);
		else if (rec_status(exp) == REC_CANCELLED)
			VIOLATION("callback ran after a cancel returned 0 (record %zu gen %" PRIu64
				  ")",
				  idx, gen);
		else
			VIOLATION("callback ran twice or overlapped itself (record %zu gen %" PRIu64
				  ", %s)",
				  idx, gen, rec_status_name[rec_status(exp)]);
		return NULL;
	}
	e = atomic_load(&r->earliest_ns);
	if (t < e)
		VIOLATION("callback ran %" PRIu64 " ns early (record %zu gen %" PRIu64
			  ", started by %s on shard %d, %u resets returned 0, ran %s)",
			  e - t, idx, gen, how_name(atomic_load(&r->how)),
			  (int)atomic_load(&r->shard), atomic_load(&r->resets),
			  tl_poller ? "in a poll" : "on a pool or shard thread");
	atomic_store_explicit(&r->fired_ns, t, memory_order_relaxed);
	tag = atomic_load_explicit(&r->tag, memory_order_relaxed);
	shard = atomic_load_explicit(&r->shard, memory_order_relaxed);
	if (tl_poller && shard != REC_SHARD_ANY && shard != tl_poller->shard)
		VIOLATION("callback of a timer on shard %u ran inside spoke_poll of shard %u",
			  shard, tl_poller->shard);
	if ((tag & REC_ON_POLLER) && (!tl_poller || tl_poller->shard != shard) &&
	    atomic_load(&g_handovers[shard]) == atomic_load(&r->handover))
		VIOLATION("callback of a timer on attached shard %u ran off its polling thread",
			  shard);
	/*
	 * Whenever it was started: between an attach's return and the detach,
	 * nothing of the shard runs off its poller (not even a run that was on
	 * the pool queue before the attach; one already running then ended
	 * before the attach returned).
	 */
	if (shard < 64 && (!tl_poller || tl_poller->shard != shard) &&
	    ((atomic_load(&g_attached_mask) >> shard) & 1))
		VIOLATION("callback of a timer on shard %u ran off its poller while attached",
			  shard);
	tally(TK_FIRED);
	*gen_out = gen;
	return r;
}

/* Callback side, last touch of the record: the run is over. */
static void rec_fire_end(struct rec *r, uint64_t gen)
{
	tally_flush();
	atomic_store_explicit(&r->word, rec_word(gen, REC_FIRED), memory_order_release);
}

void fire_spin(void)
{
	uint64_t d;

	if (!g_fire_spin_ns)
		return;
	d = rng_below(tl_rng(), g_fire_spin_ns + 1);
	if (d) {
		uint64_t end = now_ns() + d;

		while (now_ns() < end)
			;
	}
}

void rec_fire(void *arg)
{
	uint64_t gen;
	struct rec *r = rec_fire_begin(arg, &gen);
	void *outer = tl_running_arg;

	if (!r)
		return;
	tl_running_arg = arg;
	fire_spin();
	if (g_fire_hook)
		g_fire_hook(r, (size_t)(r - g_recs), gen);
	tl_running_arg = outer;
	rec_fire_end(r, gen);
}

bool rec_wait_settled(size_t idx)
{
	struct rec *r = &g_recs[idx];
	uint64_t end = 0;

	while (!rec_settled(atomic_load_explicit(&r->word, memory_order_acquire))) {
		if (!end)
			end = now_ns() + EVENTUALLY_NS;
		if (now_ns() > end) {
			uint64_t w = atomic_load(&r->word);

			VIOLATION("timer of record %zu gen %" PRIu64
				  " has no outcome (%s) long after its deadline",
				  idx, rec_gen(w), rec_status_name[rec_status(w)]);
			return false;
		}
		sched_yield();
	}
	return true;
}

void recs_cancel_remaining(struct spoke *s, size_t lo, size_t hi)
{
	for (size_t i = lo; i < hi; i++)
		(void)rec_cancel(s, i, false);
	tally_flush();
}

size_t recs_sweep(size_t lo, size_t hi)
{
	uint64_t end = now_ns() + EVENTUALLY_NS;
	size_t lost = 0;

	for (size_t i = lo; i < hi; i++) {
		struct rec *r = &g_recs[i];
		uint64_t w;

		while (!rec_settled(w = atomic_load_explicit(&r->word, memory_order_acquire)) &&
		       now_ns() < end)
			sleep_ns(100 * US);
		if (!rec_settled(w)) {
			if (++lost <= 5)
				VIOLATION("timer of record %zu gen %" PRIu64 " id %#" PRIx64
					  " has no outcome: neither ran nor was cancelled (%s)",
					  i, rec_gen(w), (uint64_t)atomic_load(&r->id),
					  rec_status_name[rec_status(w)]);
			continue;
		}
		rec_check_strict(r, w);
		atomic_store(&r->word, rec_word(rec_gen(w), REC_IDLE));
	}
	if (lost > 5)
		VIOLATION("%zu timers in all had no outcome", lost);
	return lost;
}
