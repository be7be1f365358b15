/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * peers_loops.c - the event loops among the peers, and the clock that lets
 * the bench run them without sleeping.
 *
 *   libevent  one event_base (epoll backend, no locking, min-heap timers);
 *             the caller owns an array of struct event (evtimer_assign,
 *             event_get_struct_event_size()); start = evtimer_add(tv),
 *             stop = event_del, reset = evtimer_add(tv) of the pending
 *             event (it moves it). One tick = 1 ms.
 *   libuv     one uv_loop_t, an array of uv_timer_t (uv_timer_init once);
 *             start = uv_timer_start(timeout ms, repeat 0), stop =
 *             uv_timer_stop, reset = uv_timer_set_repeat(timeout ms) +
 *             uv_timer_again, libuv's idle-timeout idiom (a server sets
 *             the repeat once; here each reset has its own timeout). One
 *             tick = 1 ms (libuv's resolution). libuv's "now" is the loop
 *             time cached at its last turn: its starts and resets read no
 *             clock.
 *
 * W2 without sleeping. Both loops take "now" from clock_gettime(
 * CLOCK_MONOTONIC or _COARSE) - libuv in uv__hrtime() when uv_run updates
 * loop->time, libevent in gettime() at evtimer_add and at each loop turn -
 * and both call it through their PLT, from their shared objects. This
 * executable defines clock_gettime() itself (and exports it, see
 * bench/CMakeLists.txt), so the dynamic linker binds their calls to the
 * definition below: while the fake clock runs, the monotonic clocks read a
 * value that only peers_clock_fake_advance() moves; all other clocks, and
 * all calls while it is off (the service's, the other subcommands'), go on
 * to the C library's clock_gettime, found with dlsym(RTLD_NEXT) (a raw
 * syscall before that lookup has run). The bench's own timing reads the
 * real clock through peers_real_now_ns(). W2 starts the fake clock before
 * the loop is created; advance(ticks) moves it by ticks ms and runs one
 * non-blocking loop turn: event_base_loop(EVLOOP_ONCE | EVLOOP_NONBLOCK),
 * uv_run(UV_RUN_NOWAIT). That it really works is checked by every W2 run:
 * each of the N callbacks must have run, exactly once, by the end.
 * W1 and W3 run on the real clock. The cost of the pass-through (one
 * relaxed load and an indirect call, ~1 ns on a ~20 ns clock read) is paid
 * by every clock read in this executable.
 *
 * Either loop is compiled in only if bench/CMakeLists.txt found it
 * (SPOKE_BENCH_LIBEVENT, SPOKE_BENCH_LIBUV); the clock is always there.
 */
#define _GNU_SOURCE
#include "peers.h"

#include <dlfcn.h>
#if SPOKE_BENCH_LIBEVENT
#include <event2/event.h>
#endif
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#if SPOKE_BENCH_LIBUV
#include <uv.h>
#endif

/* ---- the clock --------------------------------------------------------- */

typedef int clock_gettime_fn(clockid_t id, struct timespec *ts);

static clock_gettime_fn *real_clock_gettime; /* set once, before main */
static bool fake_on;			     /* __atomic: read by every thread */
static uint64_t fake_ns;

__attribute__((constructor)) static void find_real_clock_gettime(void)
{
	clock_gettime_fn *fn = (clock_gettime_fn *)dlsym(RTLD_NEXT, "clock_gettime");

	__atomic_store_n(&real_clock_gettime, fn, __ATOMIC_RELEASE);
}

static int real_gettime(clockid_t id, struct timespec *ts)
{
	clock_gettime_fn *fn = __atomic_load_n(&real_clock_gettime, __ATOMIC_ACQUIRE);

	if (fn)
		return fn(id, ts);
	return (int)syscall(SYS_clock_gettime, id, ts);
}

static bool is_monotonic(clockid_t id)
{
	return id == CLOCK_MONOTONIC || id == CLOCK_MONOTONIC_COARSE || id == CLOCK_MONOTONIC_RAW ||
	       id == CLOCK_BOOTTIME;
}

/* Interposes the C library's clock_gettime for the whole executable. Any thread. */
int clock_gettime(clockid_t id, struct timespec *ts)
{
	if (__builtin_expect(__atomic_load_n(&fake_on, __ATOMIC_RELAXED), 0) && is_monotonic(id)) {
		uint64_t ns = __atomic_load_n(&fake_ns, __ATOMIC_RELAXED);

		ts->tv_sec = (time_t)(ns / NS_PER_S);
		ts->tv_nsec = (long)(ns % NS_PER_S);
		return 0;
	}
	return real_gettime(id, ts);
}

uint64_t peers_real_now_ns(void)
{
	struct timespec ts;

	real_gettime(CLOCK_MONOTONIC, &ts);
	return bench_ts_ns(&ts);
}

void peers_clock_fake_start(void)
{
	__atomic_store_n(&fake_ns, peers_real_now_ns(), __ATOMIC_RELAXED);
	__atomic_store_n(&fake_on, true, __ATOMIC_RELAXED);
}

void peers_clock_fake_advance(uint64_t ns)
{
	__atomic_store_n(&fake_ns, __atomic_load_n(&fake_ns, __ATOMIC_RELAXED) + ns,
			 __ATOMIC_RELAXED);
}

void peers_clock_fake_stop(void)
{
	__atomic_store_n(&fake_on, false, __ATOMIC_RELAXED);
}

#if SPOKE_BENCH_LIBEVENT || SPOKE_BENCH_LIBUV
/* A slot's delay in ms (both loops count ms). */
static uint64_t delay_ms(const struct peer *p, uint64_t delay_ticks)
{
	return delay_ticks * p->tick_ns / NS_PER_MS;
}

/*
 * Open: a loop that runs on the fed clock (W2) starts it before the loop
 * exists, which reads it. Whether it did, for fed_clock_stop at close.
 */
static bool fed_clock_start(const struct peer_setup *ps)
{
	if (ps->fed_clock)
		peers_clock_fake_start();
	return ps->fed_clock;
}

static void fed_clock_stop(bool started)
{
	if (started)
		peers_clock_fake_stop();
}

#endif

/* ---- libevent ---------------------------------------------------------- */
#if SPOKE_BENCH_LIBEVENT

struct event_peer {
	struct peer p; /* slots: ntimers struct event of ev_size bytes */
	struct event_base *base;
	size_t ev_size;
	bool fake;
};

static struct event_peer *to_event(struct peer *p)
{
	return (struct event_peer *)p;
}

static struct event *event_at(struct event_peer *ep, size_t i)
{
	return (struct event *)((char *)ep->p.slots + i * ep->ev_size);
}

static void event_fired(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	((struct peer *)arg)->fired++;
}

static void event_close(struct peer *p)
{
	struct event_peer *ep = to_event(p);

	if (ep->base)
		event_base_free(ep->base); /* deletes the events still pending */
	fed_clock_stop(ep->fake);
	peer_free(p);
}

static int event_open(struct peer **pp, const struct peer_ops *ops, const struct peer_setup *ps,
		      struct bench_sample *out)
{
	size_t ev_size = (event_get_struct_event_size() + 15) & ~(size_t)15;
	struct event_peer *ep = peer_new(sizeof(*ep), ev_size, ops, ps, out);

	if (!ep)
		return -ENOMEM;
	ep->ev_size = ev_size;
	ep->fake = fed_clock_start(ps);
	ep->base = event_base_new();
	if (!ep->base) {
		event_close(&ep->p);
		return bench_fail(out, -ENOMEM, "no memory for the event base");
	}
	for (size_t i = 0; i < ps->ntimers; i++)
		if (evtimer_assign(event_at(ep, i), ep->base, event_fired, &ep->p) != 0) {
			event_close(&ep->p);
			return bench_fail(out, -EINVAL, "evtimer_assign failed");
		}
	*pp = &ep->p;
	return 0;
}

static int event_start(struct peer *p, size_t i, uint64_t delay_ticks)
{
	uint64_t ms = delay_ms(p, delay_ticks);
	struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000 * 1000)};

	return evtimer_add(event_at(to_event(p), i), &tv) == 0 ? 0 : -EIO;
}

static int event_stop(struct peer *p, size_t i)
{
	return event_del(event_at(to_event(p), i)) == 0 ? 0 : -EIO;
}

/* evtimer_add of a pending event moves it. */
static int event_reset(struct peer *p, size_t i, uint64_t delay_ticks)
{
	return event_start(p, i, delay_ticks);
}

static int event_advance(struct peer *p, uint64_t ticks)
{
	peers_clock_fake_advance(ticks * p->tick_ns);
	return event_base_loop(to_event(p)->base, EVLOOP_ONCE | EVLOOP_NONBLOCK) < 0 ? -EIO : 0;
}

const struct peer_ops peer_libevent = {
	.name = "libevent",
	.clock = PEER_TICKS,
	.how = "libevent 2.1 event_base, struct event array (evtimer_assign), evtimer_add/"
	       "event_del, 1 tick = 1 ms; W2 on the fed clock, one EVLOOP_ONCE|NONBLOCK turn "
	       "per advance",
	.open = event_open,
	.close = event_close,
	.start = event_start,
	.stop = event_stop,
	.reset = event_reset,
	.advance = event_advance,
};

#endif /* SPOKE_BENCH_LIBEVENT */

/* ---- libuv ------------------------------------------------------------- */
#if SPOKE_BENCH_LIBUV

struct uv_peer {
	struct peer p; /* slots: uv_timer_t */
	uv_loop_t loop;
	size_t ntimers; /* initialized handles */
	bool loop_ok, fake;
};

static struct uv_peer *to_uv(struct peer *p)
{
	return (struct uv_peer *)p;
}

static uv_timer_t *uv_timers(struct peer *p)
{
	return p->slots;
}

static void uv_fired(uv_timer_t *t)
{
	((struct peer *)t->data)->fired++;
}

static void uv_peer_close(struct peer *p)
{
	struct uv_peer *up = to_uv(p);

	for (size_t i = 0; i < up->ntimers; i++)
		uv_close((uv_handle_t *)&uv_timers(p)[i], NULL);
	if (up->loop_ok) {
		uv_run(&up->loop, UV_RUN_DEFAULT); /* runs the close callbacks */
		uv_loop_close(&up->loop);
	}
	fed_clock_stop(up->fake);
	peer_free(p);
}

static int uv_peer_open(struct peer **pp, const struct peer_ops *ops, const struct peer_setup *ps,
			struct bench_sample *out)
{
	struct uv_peer *up = peer_new(sizeof(*up), sizeof(uv_timer_t), ops, ps, out);
	int err;

	if (!up)
		return -ENOMEM;
	up->fake = fed_clock_start(ps);
	err = uv_loop_init(&up->loop);
	if (err) {
		uv_peer_close(&up->p);
		return bench_fail(out, err, "uv_loop_init: %s", uv_strerror(err));
	}
	up->loop_ok = true;
	for (; up->ntimers < ps->ntimers; up->ntimers++) {
		uv_timer_init(&up->loop, &uv_timers(&up->p)[up->ntimers]);
		uv_timers(&up->p)[up->ntimers].data = &up->p;
	}
	*pp = &up->p;
	return 0;
}

static int uv_peer_start(struct peer *p, size_t i, uint64_t delay_ticks)
{
	return uv_timer_start(&uv_timers(p)[i], uv_fired, delay_ms(p, delay_ticks), 0);
}

static int uv_peer_stop(struct peer *p, size_t i)
{
	return uv_timer_stop(&uv_timers(p)[i]);
}

static int uv_peer_reset(struct peer *p, size_t i, uint64_t delay_ticks)
{
	uv_timer_set_repeat(&uv_timers(p)[i], delay_ms(p, delay_ticks));
	return uv_timer_again(&uv_timers(p)[i]);
}

static int uv_peer_advance(struct peer *p, uint64_t ticks)
{
	peers_clock_fake_advance(ticks * p->tick_ns);
	uv_run(&to_uv(p)->loop, UV_RUN_NOWAIT);
	return 0;
}

const struct peer_ops peer_libuv = {
	.name = "libuv",
	.clock = PEER_TICKS,
	.how = "libuv 1.x loop, uv_timer_t array, uv_timer_start/uv_timer_stop, 1 tick = 1 ms; "
	       "W2 on the fed clock, one UV_RUN_NOWAIT turn per advance",
	.open = uv_peer_open,
	.close = uv_peer_close,
	.start = uv_peer_start,
	.stop = uv_peer_stop,
	.reset = uv_peer_reset,
	.advance = uv_peer_advance,
};
#endif /* SPOKE_BENCH_LIBUV */
