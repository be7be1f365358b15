/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * httpd_timers.c - spoke-httpd's timer backends (see httpd_timers.h).
 *
 * The three backends that are not spoke decide a cancel from another thread
 * the way a server built on them would have to: on an atomic state word that
 * the worker moves ARMED -> CANCELLED and the loop ARMED -> FIRED just before
 * it runs the callback; the loser leaves the heap entry or timerfd to the
 * loop, which drops it when the memory is released. spoke decides it inside
 * spoke_cancel.
 */
#define _GNU_SOURCE
#include "httpd_timers.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

struct spoke *tmr_spoke;
static _Atomic uint64_t remote_cancels;

uint64_t tmr_remote_cancels(void)
{
	return atomic_load(&remote_cancels);
}

void tmr_init(struct tmr *t, tmr_fn *fn)
{
	memset(t, 0, sizeof(*t));
	t->kind = EP_TIMERFD;
	t->fn = fn;
	t->tfd = -1; /* the other backends set their members of the union at start */
	atomic_init(&t->state, TMR_OFF);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The shared ARMED -> CANCELLED race of the non-spoke backends. */
static int cancel_by_state(struct tmr *t)
{
	int armed = TMR_ARMED;

	if (!atomic_compare_exchange_strong(&t->state, &armed, TMR_CANCELLED))
		return -ENOENT;
	atomic_fetch_add_explicit(&remote_cancels, 1, memory_order_relaxed);
	return 0;
}

/* Loop thread: claim t for its callback; false if another thread cancelled it. */
static bool claim_fire(struct tmr *t)
{
	int armed = TMR_ARMED;

	return atomic_compare_exchange_strong(&t->state, &armed, TMR_FIRED);
}

/* --- binary min-heap on due, shared by heap and mutex-heap --------------------------- */

static void heap_set(struct tmr_heap *h, uint32_t i, struct tmr *t)
{
	h->a[i] = t;
	t->hidx = i + 1;
}

static void heap_up(struct tmr_heap *h, uint32_t i)
{
	struct tmr *t = h->a[i];

	while (i > 0) {
		uint32_t p = (i - 1) / 2;

		if (h->a[p]->due <= t->due)
			break;
		heap_set(h, i, h->a[p]);
		i = p;
	}
	heap_set(h, i, t);
}

static void heap_down(struct tmr_heap *h, uint32_t i)
{
	struct tmr *t = h->a[i];

	for (;;) {
		uint32_t c = 2 * i + 1;

		if (c >= h->n)
			break;
		if (c + 1 < h->n && h->a[c + 1]->due < h->a[c]->due)
			c++;
		if (t->due <= h->a[c]->due)
			break;
		heap_set(h, i, h->a[c]);
		i = c;
	}
	heap_set(h, i, t);
}

static int heap_push(struct tmr_heap *h, struct tmr *t)
{
	if (h->n == h->cap) {
		uint32_t cap = h->cap ? 2 * h->cap : 1024;
		struct tmr **a = realloc(h->a, cap * sizeof(*a));

		if (!a)
			return -ENOMEM;
		h->a = a;
		h->cap = cap;
	}
	heap_set(h, h->n++, t);
	heap_up(h, h->n - 1);
	return 0;
}

static void heap_remove(struct tmr_heap *h, struct tmr *t)
{
	uint32_t i = t->hidx - 1;

	t->hidx = 0;
	if (i == --h->n)
		return;
	heap_set(h, i, h->a[h->n]);
	heap_up(h, i);
	heap_down(h, h->a[i]->hidx - 1);
}

/* t's due changed while in the heap. */
static void heap_fix(struct tmr_heap *h, struct tmr *t)
{
	heap_up(h, t->hidx - 1);
	heap_down(h, t->hidx - 1);
}

/* --- spoke: each loop thread owns a shard ------------------------------------------ */

static int sp_global_init(unsigned nloops, uint64_t tick_ns)
{
	struct spoke_config cfg;

	spoke_config_init(&cfg);
	cfg.shards = nloops;
	cfg.tick_ns = tick_ns;
	/* Every shard is attached, so nothing runs on a pool: keep none. */
	cfg.callback_threads = 0;
	return spoke_create(&tmr_spoke, &cfg);
}

static void sp_global_fini(void)
{
	spoke_destroy(tmr_spoke);
	tmr_spoke = NULL;
}

static int sp_loop_init(struct tmr_loop *tl)
{
	int err = spoke_attach(tmr_spoke, tl->index);

	if (err)
		return err;
	tl->wake_fd = spoke_wake_fd(tmr_spoke);
	return tl->wake_fd < 0 ? tl->wake_fd : 0;
}

static void sp_loop_fini(struct tmr_loop *tl)
{
	/* Every timer of the loop has ended by now; hand the shard back so that
	 * spoke_destroy finds it as spoke_create left it. */
	if (spoke_detach(tmr_spoke) != 0)
		tl->errors++;
}

static void sp_trampoline(void *arg)
{
	struct tmr *t = arg;

	t->tl->n.fired++;
	t->fn(t->tl, t);
}

static int sp_start(struct tmr_loop *tl, struct tmr *t, uint64_t ns)
{
	t->tl = tl;
	return spoke_start(tmr_spoke, ns, sp_trampoline, t, &t->id);
}

static int sp_reset(struct tmr_loop *tl, struct tmr *t, uint64_t ns)
{
	(void)tl;
	/* 0 always: an attached shard's timer runs only inside our own spoke_poll. */
	return spoke_reset(tmr_spoke, t->id, ns);
}

static void sp_cancel(struct tmr_loop *tl, struct tmr *t)
{
	if (spoke_cancel(tmr_spoke, t->id) != 0)
		tl->errors++;
}

static int sp_cancel_remote(struct tmr *t)
{
	int r = spoke_cancel(tmr_spoke, t->id);

	if (r == 0)
		atomic_fetch_add_explicit(&remote_cancels, 1, memory_order_relaxed);
	return r;
}

static void sp_release(struct tmr_loop *tl, struct tmr *t)
{
	(void)tl;
	(void)t;
}

static int64_t sp_next_ns(struct tmr_loop *tl)
{
	uint64_t ns;
	int next = spoke_next_deadline_ns(tmr_spoke, &ns);

	(void)tl;
	if (next < 0) /* next_ns says an error below -1 */
		return next == -EPERM ? -EINVAL : next;
	return next == 1 ? -1 : (int64_t)ns;
}

static int sp_poll(struct tmr_loop *tl)
{
	(void)tl;
	return spoke_poll(tmr_spoke);
}

/* --- heap: a binary heap per loop thread -------------------------------------------- */

static int nop_global_init(unsigned nloops, uint64_t tick_ns)
{
	(void)nloops;
	(void)tick_ns;
	return 0;
}

static void nop_global_fini(void)
{
}

static int hp_loop_init(struct tmr_loop *tl)
{
	tl->wake_fd = -1;
	return 0;
}

static void hp_loop_fini(struct tmr_loop *tl)
{
	free(tl->heap.a);
	tl->heap.a = NULL;
}

static int hp_start(struct tmr_loop *tl, struct tmr *t, uint64_t ns)
{
	t->tl = tl;
	t->due = now_ns() + ns;
	atomic_store_explicit(&t->state, TMR_ARMED, memory_order_relaxed);
	return heap_push(&tl->heap, t);
}

static int hp_reset(struct tmr_loop *tl, struct tmr *t, uint64_t ns)
{
	if (!t->hidx)
		return -ENOENT;
	t->due = now_ns() + ns;
	heap_fix(&tl->heap, t);
	return 0;
}

static void hp_cancel(struct tmr_loop *tl, struct tmr *t)
{
	atomic_store_explicit(&t->state, TMR_CANCELLED, memory_order_relaxed);
	if (t->hidx)
		heap_remove(&tl->heap, t);
}

static void hp_release(struct tmr_loop *tl, struct tmr *t)
{
	if (t->hidx) /* cancelled by a worker: the entry was left to us */
		heap_remove(&tl->heap, t);
}

static int64_t hp_next_ns(struct tmr_loop *tl)
{
	uint64_t now;

	if (!tl->heap.n)
		return -1;
	now = now_ns();
	return tl->heap.a[0]->due <= now ? 0 : (int64_t)(tl->heap.a[0]->due - now);
}

static int hp_poll(struct tmr_loop *tl)
{
	uint64_t now = now_ns();
	int ran = 0;

	while (tl->heap.n && tl->heap.a[0]->due <= now) {
		struct tmr *t = tl->heap.a[0];

		heap_remove(&tl->heap, t);
		if (!claim_fire(t))
			continue;
		tl->n.fired++;
		ran++;
		t->fn(tl, t);
	}
	return ran;
}

/* --- timerfd: one timerfd per timer in the loop's epoll set ------------------------- */

static int tf_arm(struct tmr *t, uint64_t ns)
{
	struct itimerspec its = {
		.it_value = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)}};

	if (ns == 0)
		its.it_value.tv_nsec = 1; /* 0 would disarm it */
	return timerfd_settime(t->tfd, 0, &its, NULL) ? -errno : 0;
}

static int tf_start(struct tmr_loop *tl, struct tmr *t, uint64_t ns)
{
	t->tl = tl;
	if (t->tfd < 0) {
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = t};

		t->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
		if (t->tfd < 0)
			return -errno;
		if (epoll_ctl(tl->epfd, EPOLL_CTL_ADD, t->tfd, &ev)) {
			int err = -errno;

			close(t->tfd);
			t->tfd = -1;
			return err;
		}
	}
	atomic_store_explicit(&t->state, TMR_ARMED, memory_order_relaxed);
	return tf_arm(t, ns);
}

static int tf_reset(struct tmr_loop *tl, struct tmr *t, uint64_t ns)
{
	(void)tl;
	return tf_arm(t, ns);
}

static void tf_cancel(struct tmr_loop *tl, struct tmr *t)
{
	struct itimerspec off = {0};

	atomic_store_explicit(&t->state, TMR_CANCELLED, memory_order_relaxed);
	if (timerfd_settime(t->tfd, 0, &off, NULL))
		tl->errors++;
}

static void tf_release(struct tmr_loop *tl, struct tmr *t)
{
	/* Closing drops it from the epoll set; an event for it already taken
	 * from epoll_wait finds tfd -1 (the memory itself is freed after the
	 * loop's turn). */
	if (t->tfd >= 0 && close(t->tfd))
		tl->errors++;
	t->tfd = -1;
}

static int64_t tf_next_ns(struct tmr_loop *tl)
{
	(void)tl;
	return -1;
}

static int tf_poll(struct tmr_loop *tl)
{
	(void)tl;
	return 0;
}

static void tf_on_fd(struct tmr_loop *tl, struct tmr *t)
{
	uint64_t expirations;

	if (t->tfd < 0)
		return;
	/* EAGAIN: reset or cancelled after the event was queued. */
	if (read(t->tfd, &expirations, sizeof(expirations)) != sizeof(expirations))
		return;
	if (!claim_fire(t))
		return;
	tl->n.fired++;
	t->fn(tl, t);
}

/* --- mutex-heap: one heap behind a global mutex, a timer thread hands out expiries --- */

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* the timer thread waits on it for an earlier top or stop */
	struct tmr_heap heap;
	pthread_t thread;
	bool stop, running;
} mh = {.lock = PTHREAD_MUTEX_INITIALIZER};

static struct tmr_loop **mh_loops; /* to signal a loop's eventfd */

static void mh_exp_unlink(struct tmr *t)
{
	*t->exp_pprev = t->exp_next;
	if (t->exp_next)
		t->exp_next->exp_pprev = t->exp_pprev;
	t->in_exp = false;
}

static void *mh_thread(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&mh.lock);
	while (!mh.stop) {
		uint64_t now = now_ns();

		while (mh.heap.n && mh.heap.a[0]->due <= now) {
			struct tmr *t = mh.heap.a[0];
			struct tmr_loop *tl = t->tl;
			bool was_empty = tl->exp_head == NULL;
			uint64_t one = 1;

			heap_remove(&mh.heap, t);
			t->exp_next = tl->exp_head;
			t->exp_pprev = &tl->exp_head;
			if (tl->exp_head)
				tl->exp_head->exp_pprev = &t->exp_next;
			tl->exp_head = t;
			t->in_exp = true;
			/* One wake-up per batch the loop has not yet taken. */
			if (was_empty && write(tl->wake_fd, &one, sizeof(one)) != sizeof(one))
				tl->errors++;
		}
		if (mh.heap.n) {
			uint64_t due = mh.heap.a[0]->due;
			struct timespec ts = {(time_t)(due / 1000000000u),
					      (long)(due % 1000000000u)};

			pthread_cond_timedwait(&mh.cond, &mh.lock, &ts);
		} else {
			pthread_cond_wait(&mh.cond, &mh.lock);
		}
	}
	pthread_mutex_unlock(&mh.lock);
	return NULL;
}

static int mh_global_init(unsigned nloops, uint64_t tick_ns)
{
	pthread_condattr_t ca;
	int err;

	(void)tick_ns;
	mh_loops = calloc(nloops, sizeof(*mh_loops));
	if (!mh_loops)
		return -ENOMEM;
	if ((err = pthread_condattr_init(&ca)) ||
	    (err = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC)) ||
	    (err = pthread_cond_init(&mh.cond, &ca)))
		return -err;
	pthread_condattr_destroy(&ca);
	err = pthread_create(&mh.thread, NULL, mh_thread, NULL);
	if (err)
		return -err;
	mh.running = true;
	return 0;
}

static void mh_global_fini(void)
{
	if (mh.running) {
		pthread_mutex_lock(&mh.lock);
		mh.stop = true;
		pthread_cond_signal(&mh.cond);
		pthread_mutex_unlock(&mh.lock);
		pthread_join(mh.thread, NULL);
		mh.running = false;
	}
	pthread_cond_destroy(&mh.cond);
	free(mh.heap.a);
	free(mh_loops);
}

static int mh_loop_init(struct tmr_loop *tl)
{
	tl->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (tl->wake_fd < 0)
		return -errno;
	mh_loops[tl->index] = tl;
	return 0;
}

static void mh_loop_fini(struct tmr_loop *tl)
{
	if (close(tl->wake_fd))
		tl->errors++;
	tl->wake_fd = -1;
}

/* Under mh.lock: put t in the heap at due, waking the timer thread if it is the new top. */
static int mh_place(struct tmr *t, uint64_t due)
{
	int err = 0;

	if (t->in_exp)
		mh_exp_unlink(t);
	t->due = due;
	if (t->hidx)
		heap_fix(&mh.heap, t);
	else
		err = heap_push(&mh.heap, t);
	if (!err && t->hidx == 1)
		pthread_cond_signal(&mh.cond);
	return err;
}

static int mh_start(struct tmr_loop *tl, struct tmr *t, uint64_t ns)
{
	int err;

	t->tl = tl;
	pthread_mutex_lock(&mh.lock);
	atomic_store_explicit(&t->state, TMR_ARMED, memory_order_relaxed);
	err = mh_place(t, now_ns() + ns);
	pthread_mutex_unlock(&mh.lock);
	return err;
}

static int mh_reset(struct tmr_loop *tl, struct tmr *t, uint64_t ns)
{
	int err;

	(void)tl;
	pthread_mutex_lock(&mh.lock);
	err = mh_place(t, now_ns() + ns);
	pthread_mutex_unlock(&mh.lock);
	return err;
}

/* Under mh.lock: take t out of the heap or its loop's expiries; false if in neither. */
static bool mh_take_out(struct tmr *t)
{
	if (t->hidx) {
		heap_remove(&mh.heap, t);
		return true;
	}
	if (t->in_exp) {
		mh_exp_unlink(t);
		return true;
	}
	return false;
}

static void mh_cancel(struct tmr_loop *tl, struct tmr *t)
{
	(void)tl;
	pthread_mutex_lock(&mh.lock);
	(void)mh_take_out(t);
	atomic_store_explicit(&t->state, TMR_CANCELLED, memory_order_relaxed);
	pthread_mutex_unlock(&mh.lock);
}

static int mh_cancel_remote(struct tmr *t)
{
	bool won;

	pthread_mutex_lock(&mh.lock);
	won = mh_take_out(t);
	if (won)
		atomic_store_explicit(&t->state, TMR_CANCELLED, memory_order_relaxed);
	pthread_mutex_unlock(&mh.lock);
	if (!won)
		return -ENOENT;
	atomic_fetch_add_explicit(&remote_cancels, 1, memory_order_relaxed);
	return 0;
}

static void mh_release(struct tmr_loop *tl, struct tmr *t)
{
	(void)tl;
	pthread_mutex_lock(&mh.lock);
	(void)mh_take_out(t);
	pthread_mutex_unlock(&mh.lock);
}

static int mh_poll(struct tmr_loop *tl)
{
	uint64_t v;
	int ran = 0;

	if (read(tl->wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		return -errno;
	/* One at a time: a callback may cancel another timer of this loop that
	 * is still on the list (closing a connection), so nothing is held aside. */
	for (;;) {
		struct tmr *t;

		pthread_mutex_lock(&mh.lock);
		t = tl->exp_head;
		if (t) {
			mh_exp_unlink(t);
			atomic_store_explicit(&t->state, TMR_FIRED, memory_order_relaxed);
		}
		pthread_mutex_unlock(&mh.lock);
		if (!t)
			return ran;
		tl->n.fired++;
		ran++;
		t->fn(tl, t);
	}
}

/* --- the table --------------------------------------------------------------------- */

static const struct tmr_ops backends[] = {
	{"spoke", sp_global_init, sp_global_fini, sp_loop_init, sp_loop_fini, sp_start, sp_reset,
	 sp_cancel, sp_cancel_remote, sp_release, sp_next_ns, sp_poll, NULL},
	{"heap", nop_global_init, nop_global_fini, hp_loop_init, hp_loop_fini, hp_start, hp_reset,
	 hp_cancel, cancel_by_state, hp_release, hp_next_ns, hp_poll, NULL},
	{"timerfd", nop_global_init, nop_global_fini, hp_loop_init, hp_loop_fini, tf_start,
	 tf_reset, tf_cancel, cancel_by_state, tf_release, tf_next_ns, tf_poll, tf_on_fd},
	{"mutex-heap", mh_global_init, mh_global_fini, mh_loop_init, mh_loop_fini, mh_start,
	 mh_reset, mh_cancel, mh_cancel_remote, mh_release, tf_next_ns, mh_poll, NULL},
};

const char *tmr_backend_name(unsigned i)
{
	return i < sizeof(backends) / sizeof(backends[0]) ? backends[i].name : NULL;
}

const struct tmr_ops *tmr_backend(const char *name)
{
	for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++)
		if (!strcmp(backends[i].name, name))
			return &backends[i];
	return NULL;
}
