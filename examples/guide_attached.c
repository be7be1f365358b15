/* SPDX-License-Identifier: MIT */
/*
 * guide_attached.c - a shard driven by the application's own event loop
 * (docs/guide.md, "An attached event loop").
 *
 * The loop thread takes shard 0 over (spoke_attach): from then on that
 * shard's timers expire only inside the loop's spoke_poll, and their
 * callbacks run there, on the loop thread, so they touch the loop's state
 * without a lock. The loop sleeps in ppoll on its own fds (here a pipe) and
 * on the shard's wake fd, for as long as spoke_next_deadline_ns says.
 * It keeps an idle timeout per connection and pushes it back on activity.
 * A worker thread puts request deadlines on the loop's shard
 * (spoke_start_on) and cancels those it finishes in time; the deadlines it
 * does not cancel run on the loop too. The program checks that every
 * callback ran on the loop thread, once, never early. Exit status 0 if so.
 */
#define _GNU_SOURCE /* ppoll */
#include <spoke/spoke.h>

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#define MS	  UINT64_C(1000000)
#define CONNS	  64
#define DEADLINES 64
#define LOOP	  0 /* the loop's shard */

struct conn {
	spoke_id idle;
	uint64_t not_before_ns;
	bool open;
};

/* The loop's state: only the loop thread touches it, its callbacks included. */
static struct {
	struct spoke *s;
	pthread_t thread;
	struct conn conn[CONNS];
	unsigned open, deadlines_run, bad; /* bad: a callback off the loop, or early */
	bool worker_done;
} loop;

static atomic_uint deadlines_cancelled; /* the worker's cancels that won */
static int pipefd[2];			/* the worker tells the loop it is done */

static void check_on_loop(uint64_t not_before_ns)
{
	if (!pthread_equal(pthread_self(), loop.thread) || spoke_now_ns() < not_before_ns)
		loop.bad++;
}

static void on_idle(void *arg) /* the loop thread, inside spoke_poll */
{
	struct conn *c = arg;

	check_on_loop(c->not_before_ns);
	c->open = false; /* close(c->fd) ... no lock: nothing else runs on this thread */
	loop.open--;
}

static void on_deadline(void *arg) /* the loop thread too: the timer is on its shard */
{
	check_on_loop((uint64_t)(uintptr_t)arg);
	loop.deadlines_run++; /* answer "504" on the connection ... */
}

static void *worker(void *arg)
{
	(void)arg;
	for (int i = 0; i < DEADLINES; i++) {
		uint64_t delay = (5 + i % 10) * MS;
		spoke_id id;

		if (spoke_start_on(loop.s, LOOP, delay, on_deadline,
				   (void *)(uintptr_t)(spoke_now_ns() + delay), &id) != 0)
			continue;
		if (i % 2 == 0 && spoke_cancel(loop.s, id) == 0) /* done in time */
			atomic_fetch_add(&deadlines_cancelled, 1);
	}
	if (write(pipefd[1], "x", 1) != 1)
		perror("guide_attached: write");
	return NULL;
}

static void open_conns(void)
{
	for (int i = 0; i < CONNS; i++) {
		struct conn *c = &loop.conn[i];
		uint64_t delay = (10 + i % 20) * MS;

		c->not_before_ns = spoke_now_ns() + delay;
		if (spoke_start(loop.s, delay, on_idle, c, &c->idle) ==
		    0) { /* goes to shard LOOP */
			c->open = true;
			loop.open++;
		}
	}
}

static bool loop_done(void)
{
	return loop.open == 0 && loop.worker_done &&
	       loop.deadlines_run + atomic_load(&deadlines_cancelled) == DEADLINES;
}

static void *loop_main(void *arg)
{
	struct pollfd fds[2] = {{.fd = pipefd[0], .events = POLLIN}};
	pthread_t w;
	char byte;
	int turns = 0;

	(void)arg;
	if (spoke_attach(loop.s, LOOP) != 0 || (fds[1].fd = spoke_wake_fd(loop.s)) < 0)
		return NULL;
	fds[1].events = POLLIN;
	open_conns();
	pthread_create(&w, NULL, worker, NULL);
	while (!loop_done()) {
		uint64_t ns;
		int next = spoke_next_deadline_ns(loop.s, &ns); /* 1: nothing pending */
		struct timespec ts;

		if (next < 0)
			break;
		ts.tv_sec = (time_t)(ns / 1000000000);
		ts.tv_nsec = (long)(ns % 1000000000);
		if (ppoll(fds, 2, next == 1 ? NULL : &ts, NULL) > 0 && (fds[0].revents & POLLIN))
			loop.worker_done = read(pipefd[0], &byte, 1) == 1;
		/* Activity on the even connections, in the first turns: push their idle back. */
		for (int i = 0; turns < 5 && i < CONNS; i += 2) {
			uint64_t now = spoke_now_ns();

			if (loop.conn[i].open &&
			    spoke_reset(loop.s, loop.conn[i].idle, 20 * MS) == 0)
				loop.conn[i].not_before_ns = now + 20 * MS;
		}
		turns++;
		if (spoke_poll(loop.s) < 0) /* due callbacks run here, inline */
			break;
	}
	pthread_join(w, NULL);
	spoke_detach(loop.s); /* the loop ends: its shard goes back to a managed thread */
	return NULL;
}

int main(void)
{
	struct spoke_config cfg;

	spoke_config_init(&cfg);
	cfg.shards = 1;		  /* one shard per event loop */
	cfg.callback_threads = 0; /* attached shards run their callbacks inline */
	if (pipe(pipefd) != 0 || spoke_create(&loop.s, &cfg) != 0)
		return 1;
	pthread_create(&loop.thread, NULL, loop_main, NULL);
	pthread_join(loop.thread, NULL);
	spoke_destroy(loop.s); /* after the loop thread is gone */
	printf("guide_attached: %d connections closed idle, %u deadlines run on the loop, %u "
	       "cancelled, %u bad\n",
	       CONNS - (int)loop.open, loop.deadlines_run, atomic_load(&deadlines_cancelled),
	       loop.bad);
	return loop_done() && loop.bad == 0 ? 0 : 1;
}
