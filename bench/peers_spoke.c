/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * peers_spoke.c - spoke itself among the peers: three engines (one tick =
 * one engine tick; the caller owns an array of struct spoke_timer), the
 * `hierarchical` engine with one clock read per start and per reset (what a
 * service start must add at the least: it needs the time of each start),
 * and the service with one shard that the bench's thread attaches.
 *
 * The engines' reset is stop + start of the pending timer.
 *
 * The service (1 shard, callbacks inline, spoke_attach on the run's main
 * thread): start is spoke_start(delay_ticks * tick_ns), stop spoke_cancel of
 * the slot's id, reset spoke_reset (all with the ids the caller keeps, on
 * the owner's thread: the owner's path); like an event loop it calls
 * spoke_poll every 4096 stops or resets (a cancel's unlink may travel
 * through the inbox). Its clock cannot be fed: W1, W3 and the resets run
 * with the default 1 ms tick (only the few timers with delays shorter than
 * the run can fire, inside a poll), W2 in real time with the tick the bench
 * asks for (at least 1 us, the service's minimum); drain(wait) sleeps
 * spoke_next_deadline_ns() and polls. Foreign (reset-foreign): an owner thread
 * attaches the shard and runs a server's loop (bench_svc.c); the bench's
 * thread starts with spoke_start_on and resets from outside, as a worker
 * thread resets the idle timer of a connection another loop owns.
 */
#include "bench_svc.h"
#include "peers.h"

#include <spoke/engine.h>

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- the engines ------------------------------------------------------- */

struct engine_peer {
	struct peer p; /* slots: struct spoke_timer */
	struct spoke_engine *e;
};

/* `wheel` would need room for every delay; the three used here ignore it. */
static const struct spoke_engine_params engine_params = {
	.max_interval = BENCH_DELAY_SPAN_TICKS,
};

static struct engine_peer *to_engine(struct peer *p)
{
	return (struct engine_peer *)p;
}

static struct spoke_timer *engine_timer(struct peer *p, size_t i)
{
	return (struct spoke_timer *)p->slots + i;
}

static void engine_expired(void *ctx, struct spoke_timer *t)
{
	(void)t;
	((struct peer *)ctx)->fired++;
}

static void engine_close(struct peer *p)
{
	spoke_engine_free(to_engine(p)->e);
	peer_free(p);
}

static int engine_open(struct peer **pp, const struct peer_ops *ops, const struct peer_setup *ps,
		       struct bench_sample *out)
{
	struct engine_peer *ep = peer_new(sizeof(*ep), sizeof(struct spoke_timer), ops, ps, out);
	int err;

	if (!ep)
		return -ENOMEM;
	for (size_t i = 0; i < ps->ntimers; i++)
		spoke_timer_init(engine_timer(&ep->p, i));
	err = spoke_engine_new(&ep->e, ops->scheme, &engine_params);
	if (err) {
		peer_free(&ep->p);
		return bench_fail(out, err, "spoke_engine_new(%s): %s", ops->scheme,
				  strerror(-err));
	}
	*pp = &ep->p;
	return 0;
}

static int engine_start(struct peer *p, size_t i, uint64_t delay_ticks)
{
	return spoke_engine_start(to_engine(p)->e, engine_timer(p, i), delay_ticks);
}

static int engine_stop(struct peer *p, size_t i)
{
	return spoke_engine_stop(to_engine(p)->e, engine_timer(p, i));
}

static int engine_reset(struct peer *p, size_t i, uint64_t delay_ticks)
{
	int err = spoke_engine_stop(to_engine(p)->e, engine_timer(p, i));

	return err ? err : spoke_engine_start(to_engine(p)->e, engine_timer(p, i), delay_ticks);
}

static int engine_advance(struct peer *p, uint64_t ticks)
{
	spoke_engine_advance(to_engine(p)->e, ticks, engine_expired, p);
	return 0;
}

#define ENGINE_PEER(scheme_name)                                                                   \
	{                                                                                          \
		.name = scheme_name, .scheme = scheme_name, .clock = PEER_TICKS,                   \
		.spoke_engine = true,                                                              \
		.how = "spoke engine: intrusive struct spoke_timer array, engine ticks",           \
		.open = engine_open, .close = engine_close, .start = engine_start,                 \
		.stop = engine_stop, .reset = engine_reset, .advance = engine_advance,             \
	}

const struct peer_ops peer_hierarchical = ENGINE_PEER("hierarchical");
const struct peer_ops peer_hashed = ENGINE_PEER("hashed");
const struct peer_ops peer_lawn = ENGINE_PEER("lawn");

/* ---- the engine plus the clock read of a start ---------------------------------- */

/* Keeps the clock reads (one peer per process, its main thread). */
static uint64_t clock_sum;

static int engine_clock_start(struct peer *p, size_t i, uint64_t delay_ticks)
{
	clock_sum += spoke_now_ns();
	return engine_start(p, i, delay_ticks);
}

static int engine_clock_reset(struct peer *p, size_t i, uint64_t delay_ticks)
{
	clock_sum += spoke_now_ns();
	return engine_reset(p, i, delay_ticks);
}

const struct peer_ops peer_engine_clock = {
	.name = "hierarchical+clock",
	.scheme = "hierarchical",
	.clock = PEER_TICKS,
	.workloads = PEER_WL(W1) | PEER_WL(RESET_OWN), /* the clock is read in start, reset only */
	.how = "hierarchical as above, plus one spoke_now_ns() per start and per reset: the "
	       "least a service start or reset adds",
	.open = engine_open,
	.close = engine_close,
	.start = engine_clock_start,
	.stop = engine_stop,
	.reset = engine_clock_reset,
};

/* ---- the service, one attached shard ------------------------------------ */

#define SERVICE_MIN_TICK_NS NS_PER_US
#define SERVICE_POLL_EVERY  4096u

struct service_peer {
	struct peer p; /* slots: spoke_id */
	struct spoke *s;
	unsigned ops;		  /* stops and resets since the last poll (attached) */
	bool foreign;		  /* the shard is the owner's, not this thread's */
	struct bench_owner owner; /* foreign: the thread that owns shard 0 */
};

static struct service_peer *to_service(struct peer *p)
{
	return (struct service_peer *)p;
}

static spoke_id *service_id(struct peer *p, size_t i)
{
	return (spoke_id *)p->slots + i;
}

/* Inline on the thread that owns the shard, inside spoke_poll. */
static void service_fired(void *arg)
{
	__atomic_fetch_add(&((struct peer *)arg)->fired, 1, __ATOMIC_RELAXED);
}

static void service_close(struct peer *p)
{
	struct service_peer *sp = to_service(p);
	struct bench_sample ignored;

	if (sp->foreign)
		(void)bench_owner_stop(&sp->owner, &ignored); /* a failure showed in the run */
	spoke_destroy(sp->s);
	peer_free(p);
}

static int service_open(struct peer **pp, const struct peer_ops *ops, const struct peer_setup *ps,
			struct bench_sample *out)
{
	struct service_peer *sp = peer_new(sizeof(*sp), sizeof(spoke_id), ops, ps, out);
	struct spoke_config cfg;
	int err;

	if (!sp)
		return -ENOMEM;
	spoke_config_init(&cfg);
	cfg.shards = 1;
	cfg.callback_threads = 0;
	cfg.pin_threads = false;
	cfg.tick_ns = ps->tick_ns < SERVICE_MIN_TICK_NS ? SERVICE_MIN_TICK_NS : ps->tick_ns;
	err = spoke_create(&sp->s, &cfg);
	if (err) {
		peer_free(&sp->p);
		return bench_fail(out, err, "spoke_create: %s", strerror(-err));
	}
	if (ps->foreign) {
		err = bench_owner_start(&sp->owner, sp->s, 0, -1, out);
		sp->foreign = err == 0;
	} else {
		err = spoke_attach(sp->s, 0);
		if (err)
			bench_fail(out, err, "spoke_attach: %s", strerror(-err));
	}
	if (err) {
		service_close(&sp->p);
		return err;
	}
	*pp = &sp->p;
	return 0;
}

static int service_start(struct peer *p, size_t i, uint64_t delay_ticks)
{
	struct service_peer *sp = to_service(p);

	if (sp->foreign)
		return spoke_start_on(sp->s, 0, delay_ticks * p->tick_ns, service_fired, p,
				      service_id(p, i));
	return spoke_start(sp->s, delay_ticks * p->tick_ns, service_fired, p, service_id(p, i));
}

/* Attached: after SERVICE_POLL_EVERY stops or resets, poll, as a loop would. */
static int service_turn(struct service_peer *sp, int err)
{
	if (sp->foreign || ++sp->ops < SERVICE_POLL_EVERY)
		return err;
	sp->ops = 0;
	return spoke_poll(sp->s) < 0 ? -EPROTO : err;
}

static int service_stop(struct peer *p, size_t i)
{
	struct service_peer *sp = to_service(p);

	return service_turn(sp, spoke_cancel(sp->s, *service_id(p, i)));
}

static int service_reset(struct peer *p, size_t i, uint64_t delay_ticks)
{
	struct service_peer *sp = to_service(p);

	return service_turn(sp, spoke_reset(sp->s, *service_id(p, i), delay_ticks * p->tick_ns));
}

/*
 * Foreign: the owner took every start. Counted by `started`, not by
 * `pending`: the clock runs, and a timer with a short delay may have fired
 * before the last start arrived (at 1e5 pending the count never reached
 * N, and the run failed; a reset that then finds it gone is late_ok's).
 */
static int service_settle(struct peer *p)
{
	struct service_peer *sp = to_service(p);
	const struct bench_svc_counts took = {p->nslots, BENCH_ANY, BENCH_ANY, BENCH_ANY,
					      BENCH_ANY};

	return sp->foreign ? bench_svc_wait(sp->s, &took, NULL) : 0;
}

static int service_drain(struct peer *p, bool wait)
{
	struct service_peer *sp = to_service(p);
	int r;

	if (wait) {
		uint64_t next;
		int err = spoke_next_deadline_ns(sp->s, &next);

		if (err < 0)
			return err;
		if (err == 0 && next > 0)
			bench_sleep_ns(next < PEER_WAIT_NS ? next : PEER_WAIT_NS);
	}
	r = spoke_poll(sp->s);
	return r < 0 ? r : 0;
}

const struct peer_ops peer_service = {
	.name = "service",
	.clock = PEER_REAL_TIME,
	.workloads = PEER_WL_DEFAULT | PEER_WL(RESET_FOREIGN),
	.how = "spoke service, 1 shard attached to the bench thread (spoke_attach), callbacks "
	       "inline in spoke_poll, ids kept by the caller; W2 in real time; reset-foreign: "
	       "an owner thread attaches it, the bench thread resets",
	.open = service_open,
	.close = service_close,
	.start = service_start,
	.stop = service_stop,
	.reset = service_reset,
	.settle = service_settle,
	.drain = service_drain,
};
