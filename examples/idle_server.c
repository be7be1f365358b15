/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * idle_server.c - idle timeouts in an event loop that owns a spoke shard.
 *
 * The pattern to copy: a server's event-loop thread takes one shard of the
 * timer service over with spoke_attach() and then, in its loop,
 *
 *     wake = spoke_wake_fd(s);            once: readable when another thread's
 *                                         start/reset/cancel needs the loop sooner
 *     timeout = spoke_next_deadline(s);   ns until the next timer (-1: none)
 *     ppoll(fds + wake, timeout);         sleep until I/O, a wake or that deadline
 *     ...handle I/O...                    spoke_start / spoke_reset / spoke_cancel
 *     spoke_poll(s);                      run what is due: callbacks run here,
 *                                         inline, on this thread
 *
 * Because the shard's callbacks run only inside spoke_poll() on this thread,
 * they may touch the loop's own state (the connection table, counters)
 * without locks or atomics, and between two spoke_poll() calls a timer the
 * loop started cannot fire: spoke_reset() on an open connection's idle timer
 * always returns 0, and spoke_cancel() on it always returns 0. Starts,
 * resets and cancels from the owning thread go straight into the shard's
 * wheel (no message, no wake-up).
 *
 * Here the "connections" are fake: a client thread plays the peers and
 * writes the index of a connection that received data into a pipe (4 bytes
 * per event; a write of at most PIPE_BUF bytes is atomic). For each event the
 * loop pushes that connection's idle timer back (spoke_reset) or, if the
 * connection was closed, accepts a new one on that slot (spoke_start). A
 * connection that hears nothing for IDLE_NS is closed by its idle callback.
 * Peers are mostly chatty but now and then fall silent for longer than the
 * idle timeout. At the end the client sends QUIT and the loop closes what is
 * still open (spoke_cancel).
 *
 * The program checks what it relies on and exits 1 if any check fails (0 if
 * all pass, 2 on a setup error): every idle timer ended exactly once (its
 * callback ran, or a cancel returned 0), no callback ran before its
 * deadline, every callback ran on the loop thread inside spoke_poll(), every
 * reset and cancel of an open connection returned 0, and no callback ran
 * after the loop stopped.
 *
 * Usage: idle-server [--seconds S]   (client activity, default 2)
 */
#define _GNU_SOURCE
#include <spoke/spoke.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MS  UINT64_C(1000000)
#define SEC UINT64_C(1000000000)

#define N_CONNS 64
#define IDLE_NS (200 * MS)
#define QUIT	UINT32_MAX /* the client's last message */

struct loop;

struct conn {
	struct loop *loop;
	unsigned index;
	bool open;
	bool timer_live; /* its idle timer is started and has not ended */
	spoke_id idle_timer;
	uint64_t idle_deadline_ns; /* the idle callback must not run before this */
};

/* The event loop's state: touched only by the loop thread (callbacks included). */
struct loop {
	struct spoke *s;
	int rfd;	/* read end of the pipe the peers write to */
	pthread_t self; /* the loop thread (it stores this itself) */
	bool in_poll, running;
	struct conn conn[N_CONNS];
	unsigned open_now;
	uint64_t events, resets, accepted, closed_idle, closed_at_end, polls;
	uint64_t max_late_ns;
	unsigned failures; /* checks that failed */
	const char *first_failure;
};

static atomic_bool loop_done;		 /* set when the loop thread returns */
static _Atomic uint64_t runs_after_done; /* callbacks after that: must stay 0 */

static void fail(struct loop *l, const char *what)
{
	if (!l->failures++)
		l->first_failure = what;
}

/* --- the idle callback: runs inline in spoke_poll(), on the loop thread --------------- */

static void on_idle(void *arg)
{
	struct conn *c = arg;
	struct loop *l = c->loop;
	uint64_t now = spoke_now_ns();

	if (atomic_load(&loop_done)) {
		atomic_fetch_add(&runs_after_done, 1);
		return;
	}
	if (!pthread_equal(pthread_self(), l->self) || !l->in_poll)
		fail(l, "idle callback outside the loop's spoke_poll");
	if (!c->open || !c->timer_live)
		fail(l, "idle callback of a timer that had already ended");
	if (now < c->idle_deadline_ns)
		fail(l, "idle callback before its deadline");
	else if (now - c->idle_deadline_ns > l->max_late_ns)
		l->max_late_ns = now - c->idle_deadline_ns;
	/* Close the connection: plain loop state, no lock needed. */
	c->timer_live = false;
	c->open = false;
	l->open_now--;
	l->closed_idle++;
}

/* --- connections ------------------------------------------------------------------- */

static void conn_accept(struct loop *l, struct conn *c)
{
	int err;

	c->idle_deadline_ns = spoke_now_ns() + IDLE_NS; /* spoke reads the clock later */
	err = spoke_start(l->s, IDLE_NS, on_idle, c, &c->idle_timer); /* on our shard */
	if (err) {
		fail(l, "spoke_start failed");
		return;
	}
	c->open = true;
	c->timer_live = true;
	l->open_now++;
	l->accepted++;
}

/* Data arrived on connection c. */
static void conn_activity(struct loop *l, struct conn *c)
{
	l->events++;
	if (!c->open) {
		conn_accept(l, c); /* the peer came back: a new connection */
		return;
	}
	/* Not fired: its callback could only have run inside our spoke_poll. */
	c->idle_deadline_ns = spoke_now_ns() + IDLE_NS;
	if (spoke_reset(l->s, c->idle_timer, IDLE_NS) != 0)
		fail(l, "spoke_reset of an open connection did not return 0");
	l->resets++;
}

static void conn_close(struct loop *l, struct conn *c)
{
	if (spoke_cancel(l->s, c->idle_timer) != 0)
		fail(l, "spoke_cancel of an open connection did not return 0");
	c->timer_live = false;
	c->open = false;
	l->open_now--;
	l->closed_at_end++;
}

/* Read what the peers sent; returns false on QUIT. */
static bool read_events(struct loop *l)
{
	static uint8_t buf[4096];
	static size_t have; /* bytes of an event split across reads (none with a pipe) */
	ssize_t n;

	while ((n = read(l->rfd, buf + have, sizeof(buf) - have)) > 0) {
		size_t len = have + (size_t)n, i;

		for (i = 0; i + 4 <= len; i += 4) {
			uint32_t idx;

			memcpy(&idx, buf + i, 4);
			if (idx == QUIT)
				return false;
			if (idx < N_CONNS)
				conn_activity(l, &l->conn[idx]);
		}
		have = len - i;
		memmove(buf, buf + i, have);
	}
	if (n == 0)
		return false; /* the peers are gone */
	if (errno != EAGAIN && errno != EINTR)
		fail(l, "read from the pipe failed");
	return true;
}

/* --- the event loop ------------------------------------------------------------------ */

static void *loop_main(void *arg)
{
	struct loop *l = arg;
	int err = spoke_attach(l->s, 0); /* this thread now owns shard 0 */
	int wake_fd;

	l->self = pthread_self();
	if (err) {
		fprintf(stderr, "idle-server: spoke_attach: %s\n", strerror(-err));
		fail(l, "spoke_attach failed");
		atomic_store(&loop_done, true);
		return NULL;
	}
	wake_fd = spoke_wake_fd(l->s);
	if (wake_fd < 0) {
		fail(l, "spoke_wake_fd failed");
		atomic_store(&loop_done, true);
		return NULL;
	}
	for (unsigned i = 0; i < N_CONNS; i++)
		conn_accept(l, &l->conn[i]);
	l->running = true;
	while (l->running) {
		struct pollfd pfd[2] = {{.fd = l->rfd, .events = POLLIN},
					{.fd = wake_fd, .events = POLLIN}};
		int64_t ns = spoke_next_deadline(l->s); /* -1: no timer pending */
		struct timespec ts, *timeout = NULL;
		int ran;

		if (ns < -1) {
			fail(l, "spoke_next_deadline failed");
			break;
		}
		if (ns >= 0) {
			ts.tv_sec = (time_t)(ns / (int64_t)SEC);
			ts.tv_nsec = (long)(ns % (int64_t)SEC);
			timeout = &ts;
		}
		if (ppoll(pfd, 2, timeout, NULL) < 0 && errno != EINTR) {
			fail(l, "ppoll failed");
			break;
		}
		if (pfd[0].revents & (POLLIN | POLLHUP))
			l->running = read_events(l);
		l->in_poll = true;
		ran = spoke_poll(l->s); /* idle callbacks run here */
		l->in_poll = false;
		l->polls++;
		if (ran < 0)
			fail(l, "spoke_poll failed");
	}
	for (unsigned i = 0; i < N_CONNS; i++)
		if (l->conn[i].open)
			conn_close(l, &l->conn[i]);
	atomic_store(&loop_done, true);
	return NULL;
}

/* --- the peers (another thread) ---------------------------------------------------- */

struct client {
	int wfd;
	uint64_t run_ns;
};

static void *client_main(void *arg)
{
	struct client *cl = arg;
	uint64_t next_send[N_CONNS], x = 0x2545f4914f6cdd1dull, t0 = spoke_now_ns();
	struct timespec one_ms = {0, 1000000};

	for (unsigned i = 0; i < N_CONNS; i++)
		next_send[i] = t0;
	for (;;) {
		uint64_t now = spoke_now_ns();
		uint32_t batch[N_CONNS + 1];
		size_t n = 0;

		if (now - t0 >= cl->run_ns || atomic_load(&loop_done))
			break;
		for (unsigned i = 0; i < N_CONNS; i++) {
			if (now < next_send[i])
				continue;
			batch[n++] = i;
			x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
			/* Mostly chatty (gaps of 0..100 ms); one gap in 8 outlasts the idle
			 * timeout. */
			if ((x >> 32) % 8)
				next_send[i] = now + (x >> 40) % (100 * MS);
			else
				next_send[i] = now + IDLE_NS + 50 * MS + (x >> 40) % (300 * MS);
		}
		/* Non-blocking: if the pipe were ever full, this batch would just be lost. */
		if (n)
			(void)!write(cl->wfd, batch, n * 4);
		nanosleep(&one_ms, NULL);
	}
	for (uint32_t quit = QUIT; !atomic_load(&loop_done) && write(cl->wfd, &quit, 4) != 4;)
		nanosleep(&one_ms, NULL);
	return NULL;
}

static int shutdown_pipe(struct client *cl)
{
	int r = cl->wfd >= 0 ? close(cl->wfd) : 0;

	cl->wfd = -1;
	return r;
}

int main(int argc, char **argv)
{
	static struct loop l;
	struct client cl = {.run_ns = 2 * SEC};
	pthread_t loop_thread, client;
	int fds[2], err;
	bool ok;

	if (argc == 3 && !strcmp(argv[1], "--seconds") && atof(argv[2]) > 0) {
		cl.run_ns = (uint64_t)(atof(argv[2]) * 1e9);
	} else if (argc != 1) {
		fprintf(stderr, "usage: idle-server [--seconds S]\n");
		return 2;
	}
	err = spoke_create(&l.s, NULL);
	if (err) {
		fprintf(stderr, "idle-server: spoke_create: %s\n", strerror(-err));
		return 2;
	}
	if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
		perror("idle-server: pipe");
		return 2;
	}
	l.rfd = fds[0];
	cl.wfd = fds[1];
	for (unsigned i = 0; i < N_CONNS; i++)
		l.conn[i] = (struct conn){.loop = &l, .index = i};

	printf("idle-server: %u connections, idle timeout %" PRIu64 " ms, %.1f s of activity; "
	       "the loop thread owns shard 0 of %u\n",
	       N_CONNS, IDLE_NS / MS, (double)cl.run_ns / 1e9, spoke_shards(l.s));
	err = pthread_create(&loop_thread, NULL, loop_main, &l);
	if (err == 0) {
		err = pthread_create(&client, NULL, client_main, &cl);
		if (err == 0)
			pthread_join(client, NULL);
		else
			(void)shutdown_pipe(&cl); /* the loop sees end of file and stops */
		pthread_join(loop_thread, NULL);
	}
	if (err) {
		fprintf(stderr, "idle-server: pthread_create: %s\n", strerror(err));
		return 2;
	}
	spoke_destroy(l.s); /* never from the loop thread */

	printf("  events from peers     %8" PRIu64 "\n"
	       "  idle timer resets     %8" PRIu64 "\n"
	       "  connections accepted  %8" PRIu64 "  (%u at start)\n"
	       "  closed when idle      %8" PRIu64
	       "  (by the idle callback, inline in spoke_poll)\n"
	       "  closed at shutdown    %8" PRIu64 "  (spoke_cancel)\n"
	       "  loop turns            %8" PRIu64 "\n"
	       "  worst idle lateness   %8.3f ms\n",
	       l.events, l.resets, l.accepted, N_CONNS, l.closed_idle, l.closed_at_end, l.polls,
	       (double)l.max_late_ns / 1e6);
	if (l.accepted != l.closed_idle + l.closed_at_end || l.open_now != 0)
		fail(&l, "a connection's idle timer did not end exactly once");
	if (l.closed_idle == 0)
		fail(&l, "no idle timeout fired");
	if (atomic_load(&runs_after_done))
		fail(&l, "a callback ran after the loop stopped");
	ok = l.failures == 0;
	if (ok)
		printf("idle-server: PASS (every idle timer ended exactly once, never early, "
		       "on the loop thread)\n");
	else
		printf("idle-server: FAIL: %u failed checks, first: %s\n", l.failures,
		       l.first_failure);
	close(fds[0]);
	(void)shutdown_pipe(&cl);
	return ok ? 0 : 1;
}
