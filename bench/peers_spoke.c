/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * peers_spoke.c - spoke itself among the peers: three engines (one tick =
 * one engine tick; the caller owns an array of struct spoke_timer) and the
 * service with one shard that the bench's thread attaches.
 *
 * The service (1 shard, callbacks inline, spoke_attach on the run's main
 * thread): start is spoke_start(delay_ticks * tick_ns), stop spoke_cancel of
 * the slot's id; like an event loop it calls spoke_poll every 4096 stops (a
 * cancel's unlink may travel through the inbox). Its clock cannot be fed:
 * W1 and W3 run with the default 1 ms tick (nothing fires), W2 in real time
 * with the tick the bench asks for (at least 1 us, the service's minimum);
 * drain(wait) sleeps spoke_next_deadline_ns() and polls.
 */
#include "peers.h"

#include <spoke/engine.h>
#include <spoke/spoke.h>

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
		.stop = engine_stop, .advance = engine_advance,                                    \
	}

const struct peer_ops peer_hierarchical = ENGINE_PEER("hierarchical");
const struct peer_ops peer_hashed = ENGINE_PEER("hashed");
const struct peer_ops peer_lawn = ENGINE_PEER("lawn");

/* ---- the service, one attached shard ------------------------------------ */

#define SERVICE_MIN_TICK_NS 1000u
#define SERVICE_POLL_EVERY  4096u

struct service_peer {
	struct peer p; /* slots: spoke_id */
	struct spoke *s;
	unsigned stops; /* since the last poll */
};

static struct service_peer *to_service(struct peer *p)
{
	return (struct service_peer *)p;
}

static spoke_id *service_id(struct peer *p, size_t i)
{
	return (spoke_id *)p->slots + i;
}

/* Inline on the attached thread, inside spoke_poll. */
static void service_fired(void *arg)
{
	((struct peer *)arg)->fired++;
}

static void service_close(struct peer *p)
{
	spoke_destroy(to_service(p)->s);
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
	err = spoke_attach(sp->s, 0);
	if (err) {
		service_close(&sp->p);
		return bench_fail(out, err, "spoke_attach: %s", strerror(-err));
	}
	*pp = &sp->p;
	return 0;
}

static int service_start(struct peer *p, size_t i, uint64_t delay_ticks)
{
	return spoke_start(to_service(p)->s, delay_ticks * p->tick_ns, service_fired, p,
			   service_id(p, i));
}

static int service_stop(struct peer *p, size_t i)
{
	struct service_peer *sp = to_service(p);
	int err = spoke_cancel(sp->s, *service_id(p, i));

	if (++sp->stops == SERVICE_POLL_EVERY) {
		sp->stops = 0;
		if (spoke_poll(sp->s) < 0)
			return -EPROTO;
	}
	return err;
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
	.how = "spoke service, 1 shard attached to the bench thread (spoke_attach), callbacks "
	       "inline in spoke_poll; W2 in real time",
	.open = service_open,
	.close = service_close,
	.start = service_start,
	.stop = service_stop,
	.drain = service_drain,
};
