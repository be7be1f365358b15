/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * httpd_timers.h - the four ways spoke-httpd can keep its timeouts, behind one
 * table of operations so that the event loop in httpd.c is the same code for
 * all of them:
 *
 *   spoke       each loop thread attaches its own spoke shard (spoke_attach);
 *               the shard's wake fd sits in the loop's epoll set and
 *               spoke_next_deadline_ns() is the epoll timeout.
 *   heap        a binary heap per loop thread, as libuv keeps its timers.
 *   timerfd     one timerfd per timer, in the loop's epoll set.
 *   mutex-heap  one heap behind a global mutex and a timer thread that hands
 *               expiries to the loops through an eventfd.
 *
 * A timer's callback always runs on the thread of the loop that started it.
 * Only the loop thread starts, resets and cancels its timers, except
 * tmr_ops.cancel_remote, which any thread may call on a timer it was handed
 * (the /sleep workers): 0 means the callback will never run, -ENOENT that it
 * has run or is running on the loop thread (the loop is then the winner).
 */
#ifndef SPOKE_HTTPD_TIMERS_H
#define SPOKE_HTTPD_TIMERS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <spoke/spoke.h>

/* The first member of every object whose address is an epoll_event's data.ptr. */
enum ep_kind { EP_LISTEN = 1, EP_CONN, EP_NOTIFY, EP_TIMER_WAKE, EP_TIMERFD };

struct tmr;
struct tmr_loop;
typedef void tmr_fn(struct tmr_loop *tl, struct tmr *t);

/* For the backends whose cancel from another thread is decided on this word. */
enum { TMR_OFF, TMR_ARMED, TMR_CANCELLED, TMR_FIRED };

struct tmr {
	int kind; /* EP_TIMERFD: an epoll tag for the timerfd backend */
	_Atomic int state;
	tmr_fn *fn;
	struct tmr_loop *tl;
	/* what the backend in use keeps */
	union {
		spoke_id id; /* spoke */
		int tfd;     /* timerfd: -1 until the first start */
		/* heap, mutex-heap */
		struct {
			uint64_t due;	      /* absolute CLOCK_MONOTONIC ns */
			uint32_t hidx;	      /* index + 1 in the heap; 0 = not in it */
			bool in_exp;	      /* mutex-heap: on its loop's list of expiries */
			struct tmr *exp_next; /* mutex-heap */
			struct tmr **exp_pprev;
		};
	};
};

struct tmr_heap {
	struct tmr **a;
	uint32_t n, cap;
};

struct tmr_counters {
	uint64_t started, reset, cancelled, fired;
};

/* One per event-loop thread; tmr_loop_init() is called on that thread. */
struct tmr_loop {
	const struct tmr_ops *ops;
	unsigned index; /* the loop's number: its shard for spoke */
	int epfd;
	int wake_kind;	       /* EP_TIMER_WAKE: epoll tag of wake_fd */
	int wake_fd;	       /* a backend fd the loop must watch (-1 = none) */
	struct tmr_heap heap;  /* heap */
	struct tmr *exp_head;  /* mutex-heap: expiries handed over, under the global mutex */
	struct tmr_counters n; /* loop-thread operations */
	uint64_t errors;       /* backend calls that failed where they cannot */
};

struct tmr_ops {
	const char *name;
	/* Once, before any loop starts: nloops loops, tick_ns the spoke tick. */
	int (*global_init)(unsigned nloops, uint64_t tick_ns);
	void (*global_fini)(void);
	int (*loop_init)(struct tmr_loop *tl);
	void (*loop_fini)(struct tmr_loop *tl);
	/* t must be off (never started, or its last run ended: fired or cancelled). */
	int (*start)(struct tmr_loop *tl, struct tmr *t, uint64_t ns);
	/* t must be armed and not cancelled from another thread. */
	int (*reset)(struct tmr_loop *tl, struct tmr *t, uint64_t ns);
	/* Loop thread, t armed: it will not run. */
	void (*cancel)(struct tmr_loop *tl, struct tmr *t);
	/* Any thread: 0 = the callback will never run, -ENOENT = it ran or is running. */
	int (*cancel_remote)(struct tmr *t);
	/* Loop thread: t's memory is about to be freed (its run ended). */
	void (*release)(struct tmr_loop *tl, struct tmr *t);
	/* ns until the loop must call poll (-1: no need, it waits on fds only). */
	int64_t (*next_ns)(struct tmr_loop *tl);
	/* Run what is due; returns callbacks run or -errno. */
	int (*poll)(struct tmr_loop *tl);
	/* timerfd: t's fd is readable. */
	void (*on_fd)(struct tmr_loop *tl, struct tmr *t);
};

const struct tmr_ops *tmr_backend(const char *name); /* NULL if unknown */
const char *tmr_backend_name(unsigned i); /* the i-th backend's name; NULL past the last */
void tmr_init(struct tmr *t, tmr_fn *fn);
uint64_t tmr_remote_cancels(void); /* cancel_remote calls that returned 0 */
extern struct spoke *tmr_spoke;	   /* the spoke backend's instance (NULL for others) */

#endif
