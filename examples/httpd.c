/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * httpd.c - spoke-httpd: an epoll HTTP/1.1 server whose per-connection
 * timeouts live in spoke, or, for comparison, in one of the other ways
 * servers keep them (httpd_timers.h). Same loop code for every backend.
 *
 * The wiring a server copies (backend spoke, one shard per loop thread):
 *
 *     spoke_attach(s, loop_index);          this thread now owns that shard
 *     wake = spoke_wake_fd(s);              into the epoll set
 *     for (;;) {
 *             spoke_next_deadline_ns(s, &ns)  1: no timer; else ns is the epoll timeout
 *             epoll_pwait2(ep, evs, n, ns < 0 ? NULL : &ts(ns), NULL);
 *             ...I/O: spoke_start / spoke_reset / spoke_cancel (direct, no message)
 *             spoke_poll(s);                timeouts run here, inline, on this thread
 *     }
 *
 * Because timeouts run only inside spoke_poll on the loop thread, they touch
 * the connection table without locks, and the loop's own reset or cancel of
 * a connection's timer never loses a race. Only the /sleep deadline crosses
 * threads: a worker cancels it with spoke_cancel, and its return decides who
 * answers (0: the worker's 200; -ENOENT: the loop's 504, already sent or
 * being sent).
 *
 * Timeouts, one timer per connection moved between them with reset:
 *   idle    (--idle-ms)   from accept and from the end of each response until
 *                          the first byte of the next request;
 *   header  (--header-ms) from that first byte until the request is complete,
 *                          body included (a slow body is as bad as a slow header);
 *                          not pushed back by later bytes: slowloris defence;
 *   write   (--write-ms)  from a response that did not go out at once until it
 *                          has drained: slow-read defence.
 * While a /sleep request waits for its worker the connection timer is off and
 * the request's own deadline timer (--deadline-ms) covers it.
 *
 * Prints "listening on 127.0.0.1:PORT" first; on SIGINT/SIGTERM stops and
 * prints its counters, last of all one line "stats key=value ...".
 */
#define _GNU_SOURCE
#include "httpd_timers.h"

#include <errno.h>
#include <fcntl.h>
#include <http_parser.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define MS	     UINT64_C(1000000)
#define IN_SIZE	     4096
#define URL_MAX	     256
#define BIG_SIZE     (1u << 20) /* GET /big: enough to fill socket buffers (slow-read) */
#define MAX_SLEEP_MS 600000

static struct {
	uint64_t header_ns, idle_ns, write_ns, deadline_ns, tick_ns;
	unsigned threads, workers;
	int port;
	const struct tmr_ops *ops;
} opt = {10000 * MS, 5000 * MS, 10000 * MS, 1000 * MS, 1000000, 0, 16, 8080, NULL};

static char big_body[BIG_SIZE];
static atomic_bool stopping;

/* Counters of one loop (its thread only); summed at exit. */
struct counters {
	uint64_t connections, requests, close_header, close_idle, close_write, close_peer,
		close_error, close_done, close_shutdown, resp_200, resp_400, resp_404, resp_405,
		resp_504, sleep_200, accept_emfile,
		idle_late_served; /* idle timeouts that found a request waiting: served */
};

enum conn_state { C_IDLE, C_HEADER, C_WAIT, C_WRITE };

struct job;

struct conn {
	int kind; /* EP_CONN */
	int fd;	  /* -1 once closed (an event already taken may still name it) */
	struct loop *loop;
	struct conn *next, *prev; /* the loop's open connections */
	enum conn_state state;
	struct tmr timer; /* idle / header / write, after state */
	bool timer_on;
	http_parser parser;
	bool keep_alive, msg_done, bad, url_long, rd_blocked, close_after;
	size_t url_len;
	char url[URL_MAX];
	uint64_t body_bytes;
	struct job *job; /* the /sleep request waiting for its worker */
	/* the response being written: a header and a body that is not copied */
	char hdr[256];
	struct iovec iov[2];
	int iovcnt;
	size_t in_start, in_end;
	char in[IN_SIZE];
};

/* A /sleep request: the loop, its worker and its deadline timer all hold it. */
struct job {
	struct tmr deadline;
	struct loop *loop;
	struct conn *conn; /* NULL once the connection closed or was answered with 504 */
	uint64_t due_ns;   /* when the worker answers */
	unsigned ms;
	bool keep_alive;
	bool won;      /* the worker's spoke_cancel (or equivalent) returned 0 */
	bool fired;    /* the deadline callback ran */
	bool returned; /* the worker handed it back */
	struct job *next;
};

struct loop {
	struct tmr_loop tl;
	unsigned index;
	pthread_t thread;
	int epfd, lfd, notify_fd, reserve_fd;
	int notify_kind, listen_kind;
	struct conn *conns;
	unsigned jobs_out; /* handed to workers, not yet back */
	/* jobs handed back by workers */
	pthread_mutex_t done_lock;
	struct job *done_head;
	/* freed after the turn: an event already taken from epoll may name them */
	void **garbage;
	size_t n_garbage, cap_garbage;
	struct counters c;
	int err; /* a setup error of the thread */
};

static struct loop *loops;

/* The /sleep worker pool. */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct job *head, **tail;
	bool stop;
	pthread_t *threads;
	unsigned n;
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void die(const char *what, int err)
{
	fprintf(stderr, "spoke-httpd: %s: %s\n", what, strerror(err));
	exit(2);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void defer_free(struct loop *l, void *p)
{
	if (l->n_garbage == l->cap_garbage) {
		size_t cap = l->cap_garbage ? 2 * l->cap_garbage : 64;
		void **g = realloc(l->garbage, cap * sizeof(*g));

		if (!g)
			die("realloc", ENOMEM);
		l->garbage = g;
		l->cap_garbage = cap;
	}
	l->garbage[l->n_garbage++] = p;
}

/* --- timer wrappers: the counters the server prints -------------------------------- */

static void timer_set(struct loop *l, struct tmr *t, bool *on, uint64_t ns)
{
	int err;

	if (*on) {
		l->tl.n.reset++;
		err = opt.ops->reset(&l->tl, t, ns);
	} else {
		l->tl.n.started++;
		err = opt.ops->start(&l->tl, t, ns);
	}
	if (err)
		die("timer start/reset", -err);
	*on = true;
}

static void timer_off(struct loop *l, struct tmr *t, bool *on)
{
	if (!*on)
		return;
	l->tl.n.cancelled++;
	opt.ops->cancel(&l->tl, t);
	*on = false;
}

/* --- connections ------------------------------------------------------------------- */

enum close_why { WHY_HEADER, WHY_IDLE, WHY_WRITE, WHY_PEER, WHY_ERROR, WHY_DONE, WHY_SHUTDOWN };

static void conn_close(struct conn *c, enum close_why why)
{
	struct loop *l = c->loop;
	uint64_t *n[] = {&l->c.close_header,  &l->c.close_idle,	 &l->c.close_write,
			 &l->c.close_peer,    &l->c.close_error, &l->c.close_done,
			 &l->c.close_shutdown};

	(*n[why])++;
	timer_off(l, &c->timer, &c->timer_on);
	opt.ops->release(&l->tl, &c->timer);
	if (c->job) /* the worker still has it: the answer has nowhere to go */
		c->job->conn = NULL;
	if (close(c->fd))
		l->c.close_error++;
	c->fd = -1;
	if (c->prev)
		c->prev->next = c->next;
	else
		l->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	defer_free(l, c);
}

static void conn_read(struct conn *c);

/* Has the peer sent something the loop has not read yet? */
static bool conn_input_waiting(const struct conn *c)
{
	char b;

	return recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) >= 0; /* 0: its FIN */
}

static void on_conn_timer(struct tmr_loop *tl, struct tmr *t)
{
	struct conn *c = (struct conn *)((char *)t - offsetof(struct conn, timer));

	(void)tl;
	c->timer_on = false; /* it has run: nothing to cancel any more */
	/*
	 * An idle timeout that runs while a request waits unread means the loop
	 * itself came late (a stall between epoll_wait and this poll): the
	 * client was not idle, so the request is served, not cut off.
	 */
	if (c->state == C_IDLE && conn_input_waiting(c)) {
		c->loop->c.idle_late_served++;
		conn_read(c);
		return;
	}
	conn_close(c, c->state == C_HEADER  ? WHY_HEADER
		      : c->state == C_WRITE ? WHY_WRITE
					    : WHY_IDLE);
}

static void conn_process(struct conn *c);

/* Write what is left of the response; false if the connection was closed. */
static bool conn_flush(struct conn *c)
{
	struct loop *l = c->loop;

	while (c->iovcnt) {
		struct msghdr mh = {.msg_iov = c->iov, .msg_iovlen = (size_t)c->iovcnt};
		ssize_t n = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				if (c->state != C_WRITE) {
					c->state = C_WRITE;
					timer_set(l, &c->timer, &c->timer_on, opt.write_ns);
				}
				return true; /* EPOLLOUT (edge) brings us back */
			}
			conn_close(c, errno == EPIPE || errno == ECONNRESET ? WHY_PEER : WHY_ERROR);
			return false;
		}
		while (c->iovcnt && (size_t)n >= c->iov[0].iov_len) {
			n -= (ssize_t)c->iov[0].iov_len;
			c->iov[0] = c->iov[1];
			c->iovcnt--;
		}
		if (c->iovcnt) {
			c->iov[0].iov_base = (char *)c->iov[0].iov_base + n;
			c->iov[0].iov_len -= (size_t)n;
		}
	}
	if (c->close_after) {
		conn_close(c, WHY_DONE);
		return false;
	}
	/* Response out: the keep-alive wait begins; one reset per request. */
	c->state = C_IDLE;
	timer_set(l, &c->timer, &c->timer_on, opt.idle_ns);
	return true;
}

static void conn_respond(struct conn *c, int status, const char *body, size_t len, bool keep)
{
	static const char *reason[600] = {[200] = "OK",		  [400] = "Bad Request",
					  [404] = "Not Found",	  [405] = "Method Not Allowed",
					  [414] = "URI Too Long", [504] = "Gateway Timeout"};
	int n = snprintf(
		c->hdr, sizeof(c->hdr),
		"HTTP/1.1 %d %s\r\nContent-Length: %zu\r\nContent-Type: text/plain\r\n%s\r\n",
		status, reason[status], len, keep ? "" : "Connection: close\r\n");

	c->iov[0] = (struct iovec){c->hdr, (size_t)n};
	c->iov[1] = (struct iovec){(void *)body, len};
	c->iovcnt = len ? 2 : 1;
	c->close_after = !keep;
	(void)conn_flush(c);
}

/* After an answer that did not come from conn_process: serve what waits. */
static void conn_resume(struct conn *c)
{
	if (c->fd >= 0 && c->state == C_IDLE)
		conn_process(c); /* a pipelined request may wait in the buffer */
	if (c->fd >= 0 && c->rd_blocked) {
		c->rd_blocked = false;
		conn_read(c);
	}
}

/* --- /sleep: the worker pool ------------------------------------------------------- */

static void loop_wake(struct loop *l)
{
	uint64_t one = 1;

	if (write(l->notify_fd, &one, sizeof(one)) != sizeof(one) && errno != EAGAIN)
		die("write eventfd", errno);
}

static void *worker_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&pool.lock);
	for (;;) {
		struct job *j = pool.head;
		struct loop *l;

		if (!j) {
			if (pool.stop)
				break;
			pthread_cond_wait(&pool.cond, &pool.lock);
			continue;
		}
		pool.head = j->next;
		if (!pool.head)
			pool.tail = &pool.head;
		/* The request's "work": until its time, or until shutdown. */
		while (!pool.stop && now_ns() < j->due_ns) {
			struct timespec ts = {(time_t)(j->due_ns / 1000000000u),
					      (long)(j->due_ns % 1000000000u)};

			pthread_cond_timedwait(&pool.cond, &pool.lock, &ts);
		}
		pthread_mutex_unlock(&pool.lock);
		/* The cross-thread cancel decides who answers, exactly once. */
		j->won = opt.ops->cancel_remote(&j->deadline) == 0;
		l = j->loop;
		pthread_mutex_lock(&l->done_lock);
		j->next = l->done_head;
		l->done_head = j;
		pthread_mutex_unlock(&l->done_lock);
		loop_wake(l);
		pthread_mutex_lock(&pool.lock);
	}
	pthread_mutex_unlock(&pool.lock);
	return NULL;
}

static void job_free(struct loop *l, struct job *j)
{
	opt.ops->release(&l->tl, &j->deadline);
	defer_free(l, j);
}

/* The deadline passed before the worker cancelled it: the loop answers 504. */
static void on_deadline(struct tmr_loop *tl, struct tmr *t)
{
	struct job *j = (struct job *)((char *)t - offsetof(struct job, deadline));
	struct loop *l = j->loop;
	struct conn *c = j->conn;

	(void)tl;
	j->fired = true;
	if (c) {
		c->job = NULL;
		j->conn = NULL;
		l->c.resp_504++;
		conn_respond(c, 504, "deadline\n", 9, j->keep_alive);
		conn_resume(c);
	}
	if (j->returned) /* a lost worker came back first (no backend lets it) */
		job_free(l, j);
}

static void loop_take_done(struct loop *l)
{
	struct job *j;

	pthread_mutex_lock(&l->done_lock);
	j = l->done_head;
	l->done_head = NULL;
	pthread_mutex_unlock(&l->done_lock);
	while (j) {
		struct job *next = j->next;

		l->jobs_out--;
		j->returned = true;
		if (j->won) {
			struct conn *c = j->conn;

			if (c) {
				char body[64];
				int n = snprintf(body, sizeof(body), "slept %u ms\n", j->ms);

				/* The body must outlive the write: keep it in the header buffer's
				 * tail. */
				memcpy(c->hdr + 192, body, (size_t)n);
				c->job = NULL;
				l->c.resp_200++;
				l->c.sleep_200++;
				conn_respond(c, 200, c->hdr + 192, (size_t)n, j->keep_alive);
				conn_resume(c);
			}
			job_free(l, j);
		} else if (j->fired) {
			job_free(l, j);
		}
		j = next;
	}
}

static void start_sleep(struct conn *c, unsigned ms)
{
	struct loop *l = c->loop;
	struct job *j = calloc(1, sizeof(*j));

	if (!j)
		die("calloc", ENOMEM);
	tmr_init(&j->deadline, on_deadline);
	j->loop = l;
	j->conn = c;
	j->ms = ms;
	j->keep_alive = c->keep_alive;
	j->due_ns = now_ns() + ms * MS;
	c->job = j;
	c->state = C_WAIT;
	timer_off(l, &c->timer, &c->timer_on); /* the deadline covers the wait */
	l->tl.n.started++;
	if (opt.ops->start(&l->tl, &j->deadline, opt.deadline_ns))
		die("deadline timer start", ENOMEM);
	l->jobs_out++;
	pthread_mutex_lock(&pool.lock);
	j->next = NULL;
	*pool.tail = j;
	pool.tail = &j->next;
	pthread_cond_broadcast(&pool.cond);
	pthread_mutex_unlock(&pool.lock);
}

/* --- requests ---------------------------------------------------------------------- */

static int on_message_begin(http_parser *p)
{
	struct conn *c = p->data;

	c->url_len = 0;
	c->url_long = false;
	c->body_bytes = 0;
	return 0;
}

static int on_url(http_parser *p, const char *at, size_t len)
{
	struct conn *c = p->data;

	if (c->url_len + len >= URL_MAX) {
		c->url_long = true;
		return 0;
	}
	memcpy(c->url + c->url_len, at, len);
	c->url_len += len;
	return 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
	struct conn *c = p->data;

	(void)at;
	c->body_bytes += len;
	return 0;
}

static int on_message_complete(http_parser *p)
{
	struct conn *c = p->data;

	c->keep_alive = http_should_keep_alive(p);
	c->msg_done = true;
	/* One request at a time: the rest of the buffer waits for the answer. */
	http_parser_pause(p, 1);
	return 0;
}

static const http_parser_settings parser_settings = {
	.on_message_begin = on_message_begin,
	.on_url = on_url,
	.on_body = on_body,
	.on_message_complete = on_message_complete,
};

static void handle_request(struct conn *c)
{
	struct loop *l = c->loop;
	static const char hello[] = "hello from spoke-httpd\n";
	char *q;

	l->c.requests++;
	c->url[c->url_len] = '\0';
	if (c->url_long) {
		l->c.resp_400++;
		conn_respond(c, 414, "", 0, false);
		return;
	}
	q = strchr(c->url, '?');
	if (q)
		*q++ = '\0';
	if (!strcmp(c->url, "/") && c->parser.method == HTTP_GET) {
		l->c.resp_200++;
		conn_respond(c, 200, hello, sizeof(hello) - 1, c->keep_alive);
	} else if (!strcmp(c->url, "/") && c->parser.method == HTTP_POST) {
		char body[64];
		int n = snprintf(body, sizeof(body), "got %" PRIu64 " bytes\n", c->body_bytes);

		memcpy(c->hdr + 192, body, (size_t)n);
		l->c.resp_200++;
		conn_respond(c, 200, c->hdr + 192, (size_t)n, c->keep_alive);
	} else if (!strcmp(c->url, "/big") && c->parser.method == HTTP_GET) {
		l->c.resp_200++;
		conn_respond(c, 200, big_body, BIG_SIZE, c->keep_alive);
	} else if (!strcmp(c->url, "/sleep") && c->parser.method == HTTP_GET) {
		char *end;
		unsigned long ms = q && !strncmp(q, "ms=", 3) ? strtoul(q + 3, &end, 10) : 0;

		if (!q || strncmp(q, "ms=", 3) || end == q + 3 || *end || ms > MAX_SLEEP_MS) {
			l->c.resp_400++;
			conn_respond(c, 400, "bad ms\n", 7, false);
			return;
		}
		start_sleep(c, (unsigned)ms);
	} else if (!strcmp(c->url, "/") || !strcmp(c->url, "/sleep") || !strcmp(c->url, "/big")) {
		l->c.resp_405++;
		conn_respond(c, 405, "", 0, c->keep_alive);
	} else {
		l->c.resp_404++;
		conn_respond(c, 404, "", 0, c->keep_alive);
	}
}

/* Parse what is buffered and serve the requests it completes, one at a time. */
static void conn_process(struct conn *c)
{
	while (c->fd >= 0 && (c->state == C_IDLE || c->state == C_HEADER) &&
	       c->in_start < c->in_end) {
		size_t len = c->in_end - c->in_start, n;
		enum http_errno e;

		if (HTTP_PARSER_ERRNO(&c->parser) == HPE_PAUSED)
			http_parser_pause(&c->parser, 0);
		if (c->state == C_IDLE) {
			/* The first bytes of a request: the header timer from now on, which
			 * later bytes (of the header or of the body) do not push back. */
			c->state = C_HEADER;
			timer_set(c->loop, &c->timer, &c->timer_on, opt.header_ns);
		}
		c->msg_done = false;
		n = http_parser_execute(&c->parser, &parser_settings, c->in + c->in_start, len);
		c->in_start += n;
		e = HTTP_PARSER_ERRNO(&c->parser);
		if (e != HPE_OK && e != HPE_PAUSED) {
			c->loop->c.resp_400++;
			conn_respond(c, 400, "", 0, false);
			return;
		}
		if (!c->msg_done) {
			/* Mid-request: everything was taken, wait for more. */
			c->in_start = c->in_end = 0;
			return;
		}
		handle_request(c);
		if (c->fd >= 0 && c->state == C_IDLE && c->in_start == c->in_end)
			c->in_start = c->in_end = 0;
	}
}

static void conn_read(struct conn *c)
{
	for (;;) {
		ssize_t n;

		if (c->in_end == IN_SIZE) {
			if (c->in_start == 0) {
				/* Full while busy: read again once it is taken. */
				c->rd_blocked = true;
				return;
			}
			memmove(c->in, c->in + c->in_start, c->in_end - c->in_start);
			c->in_end -= c->in_start;
			c->in_start = 0;
		}
		n = read(c->fd, c->in + c->in_end, IN_SIZE - c->in_end);
		if (n == 0) {
			conn_close(c, WHY_PEER);
			return;
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				conn_close(c, errno == ECONNRESET ? WHY_PEER : WHY_ERROR);
			return;
		}
		c->in_end += (size_t)n;
		conn_process(c);
		if (c->fd < 0)
			return;
	}
}

static void conn_accept(struct loop *l)
{
	for (;;) {
		int fd = accept4(l->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), one = 1;
		struct epoll_event ev;
		struct conn *c;

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE) {
				/* Out of fds: take one connection with the reserve and drop
				 * it, so that the listener does not stay readable forever. */
				l->c.accept_emfile++;
				if (l->reserve_fd >= 0 && close(l->reserve_fd) == 0) {
					fd = accept4(l->lfd, NULL, NULL, SOCK_CLOEXEC);
					if (fd >= 0)
						close(fd);
					l->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
				}
				return;
			}
			if (errno != EAGAIN)
				die("accept4", errno);
			return;
		}
		if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)))
			die("setsockopt TCP_NODELAY", errno);
		c = malloc(sizeof(*c));
		if (!c)
			die("malloc", ENOMEM);
		memset(c, 0, offsetof(struct conn, in));
		c->kind = EP_CONN;
		c->fd = fd;
		c->loop = l;
		tmr_init(&c->timer, on_conn_timer);
		http_parser_init(&c->parser, HTTP_REQUEST);
		c->parser.data = c;
		c->next = l->conns;
		if (l->conns)
			l->conns->prev = c;
		l->conns = c;
		l->c.connections++;
		c->state = C_IDLE;
		timer_set(l, &c->timer, &c->timer_on, opt.idle_ns);
		ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
		ev.data.ptr = c;
		if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev))
			die("epoll_ctl", errno);
	}
}

/* --- the event loop: the same code for every timer backend ------------------------- */

static void loop_collect(struct loop *l)
{
	for (size_t i = 0; i < l->n_garbage; i++)
		free(l->garbage[i]);
	l->n_garbage = 0;
}

static void loop_wait(struct loop *l, struct epoll_event *evs, int max, int *n)
{
	int64_t ns = opt.ops->next_ns(&l->tl);
	struct timespec ts, *tsp = NULL;

	if (ns < -1)
		die("next deadline", (int)-ns);
	if (ns >= 0) {
		ts.tv_sec = (time_t)(ns / 1000000000);
		ts.tv_nsec = (long)(ns % 1000000000);
		tsp = &ts;
	}
	*n = epoll_pwait2(l->epfd, evs, max, tsp, NULL);
	if (*n < 0) {
		if (errno != EINTR)
			die("epoll_pwait2", errno);
		*n = 0;
	}
}

static void *loop_main(void *arg)
{
	struct loop *l = arg;
	struct epoll_event ev, evs[256];
	bool closing = false;
	int err;

	l->tl.ops = opt.ops;
	l->tl.index = l->index;
	l->tl.epfd = l->epfd;
	l->tl.wake_kind = EP_TIMER_WAKE;
	err = opt.ops->loop_init(&l->tl);
	if (err) {
		l->err = err;
		return NULL;
	}
	if (l->tl.wake_fd >= 0) {
		ev = (struct epoll_event){.events = EPOLLIN, .data.ptr = &l->tl.wake_kind};
		if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->tl.wake_fd, &ev))
			die("epoll_ctl wake fd", errno);
	}
	for (;;) {
		int n;

		if (atomic_load(&stopping) && !closing) {
			/* Stop taking work; close what is open; wait for the workers'
			 * jobs, whose deadline timers must end before the loop does. */
			closing = true;
			if (epoll_ctl(l->epfd, EPOLL_CTL_DEL, l->lfd, NULL))
				die("epoll_ctl del", errno);
			while (l->conns)
				conn_close(l->conns, WHY_SHUTDOWN);
		}
		if (closing && l->jobs_out == 0)
			break;
		loop_wait(l, evs, 256, &n);
		for (int i = 0; i < n; i++) {
			int kind = *(int *)evs[i].data.ptr;

			if (kind == EP_CONN) {
				struct conn *c = evs[i].data.ptr;

				if (c->fd < 0)
					continue; /* closed earlier in this turn */
				if ((evs[i].events & EPOLLOUT) && c->state == C_WRITE &&
				    conn_flush(c))
					conn_resume(c);
				if (c->fd >= 0 &&
				    (evs[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
					conn_read(c);
			} else if (kind == EP_LISTEN) {
				if (!closing)
					conn_accept(l);
			} else if (kind == EP_NOTIFY) {
				uint64_t v;

				if (read(l->notify_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
					die("read eventfd", errno);
				loop_take_done(l);
			} else if (kind == EP_TIMERFD) {
				opt.ops->on_fd(&l->tl, evs[i].data.ptr);
			}
			/* EP_TIMER_WAKE: the poll below empties it */
		}
		err = opt.ops->poll(&l->tl);
		if (err < 0)
			die("timer poll", -err);
		loop_collect(l);
	}
	loop_collect(l);
	opt.ops->loop_fini(&l->tl);
	return NULL;
}

/* --- setup, signals, counters ------------------------------------------------------ */

static int listen_on(int port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0)
		die("socket", errno);
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)))
		die("setsockopt", errno);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)))
		die("bind 127.0.0.1", errno);
	if (listen(fd, 4096))
		die("listen", errno);
	return fd;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: spoke-httpd [--port P] [--threads N] [--workers N] [--tick-us U]\n"
		"                   [--timers spoke|heap|timerfd|mutex-heap] [--header-ms MS]\n"
		"                   [--idle-ms MS] [--write-ms MS] [--deadline-ms MS]\n");
	exit(2);
}

static uint64_t arg_num(const char *s, uint64_t min, uint64_t max)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		usage();
	return v;
}

static void parse_args(int argc, char **argv)
{
	opt.ops = tmr_backend("spoke");
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!v)
			usage();
		i++;
		if (!strcmp(a, "--port"))
			opt.port = (int)arg_num(v, 0, 65535);
		else if (!strcmp(a, "--threads"))
			opt.threads = (unsigned)arg_num(v, 1, SPOKE_MAX_SHARDS);
		else if (!strcmp(a, "--workers"))
			opt.workers = (unsigned)arg_num(v, 1, 4096);
		else if (!strcmp(a, "--tick-us"))
			opt.tick_ns = arg_num(v, 1, 3600000000ull) * 1000;
		else if (!strcmp(a, "--header-ms"))
			opt.header_ns = arg_num(v, 1, 86400000) * MS;
		else if (!strcmp(a, "--idle-ms"))
			opt.idle_ns = arg_num(v, 1, 86400000) * MS;
		else if (!strcmp(a, "--write-ms"))
			opt.write_ns = arg_num(v, 1, 86400000) * MS;
		else if (!strcmp(a, "--deadline-ms"))
			opt.deadline_ns = arg_num(v, 1, 86400000) * MS;
		else if (!strcmp(a, "--timers")) {
			opt.ops = tmr_backend(v);
			if (!opt.ops)
				usage();
		} else
			usage();
	}
	if (!opt.threads) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);

		opt.threads = n < 1 ? 1 : n > SPOKE_MAX_SHARDS ? SPOKE_MAX_SHARDS : (unsigned)n;
	}
}

static void print_counters(const struct counters *c, const struct tmr_counters *t, uint64_t remote,
			   double user_s, double sys_s)
{
	printf("connections        %" PRIu64 "\n"
	       "requests           %" PRIu64 "\n"
	       "closed by header   %" PRIu64 "  (--header-ms %" PRIu64 ")\n"
	       "closed by idle     %" PRIu64 "  (--idle-ms %" PRIu64 ")\n"
	       "closed by write    %" PRIu64 "  (--write-ms %" PRIu64 ")\n"
	       "closed by peer     %" PRIu64 "\n"
	       "closed after resp  %" PRIu64 "  (Connection: close, or 400)\n"
	       "closed at shutdown %" PRIu64 "\n"
	       "504 (deadline)     %" PRIu64 "  (--deadline-ms %" PRIu64 ")\n"
	       "timers             started %" PRIu64 ", reset %" PRIu64 ", cancelled %" PRIu64
	       " (%" PRIu64 " from workers), fired %" PRIu64 "\n"
	       "cpu                user %.3f s, sys %.3f s\n",
	       c->connections, c->requests, c->close_header, opt.header_ns / MS, c->close_idle,
	       opt.idle_ns / MS, c->close_write, opt.write_ns / MS, c->close_peer, c->close_done,
	       c->close_shutdown, c->resp_504, opt.deadline_ns / MS, t->started, t->reset,
	       t->cancelled + remote, remote, t->fired, user_s, sys_s);
	printf("stats timers=%s connections=%" PRIu64 " requests=%" PRIu64 " close_header=%" PRIu64
	       " close_idle=%" PRIu64 " close_write=%" PRIu64 " close_peer=%" PRIu64
	       " close_error=%" PRIu64 " close_done=%" PRIu64 " close_shutdown=%" PRIu64
	       " resp_200=%" PRIu64 " sleep_200=%" PRIu64 " resp_400=%" PRIu64 " resp_404=%" PRIu64
	       " resp_405=%" PRIu64 " resp_504=%" PRIu64 " accept_emfile=%" PRIu64
	       " timers_started=%" PRIu64 " timers_reset=%" PRIu64 " timers_cancelled=%" PRIu64
	       " timers_fired=%" PRIu64 " idle_late_served=%" PRIu64 " cpu_user_s=%.3f"
	       " cpu_sys_s=%.3f\n",
	       opt.ops->name, c->connections, c->requests, c->close_header, c->close_idle,
	       c->close_write, c->close_peer, c->close_error, c->close_done, c->close_shutdown,
	       c->resp_200, c->sleep_200, c->resp_400, c->resp_404, c->resp_405, c->resp_504,
	       c->accept_emfile, t->started, t->reset, t->cancelled + remote, t->fired,
	       c->idle_late_served, user_s, sys_s);
}

int main(int argc, char **argv)
{
	struct counters sum = {0};
	struct tmr_counters tsum = {0};
	struct signalfd_siginfo si;
	struct rlimit rl;
	struct rusage ru;
	pthread_condattr_t ca;
	sigset_t set;
	int sfd, err, port;
	uint64_t errors = 0;

	parse_args(argc, argv);
	/* Idle floods need an fd per connection: take all the hard limit allows. */
	if (getrlimit(RLIMIT_NOFILE, &rl))
		die("getrlimit", errno);
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl))
		die("setrlimit", errno);
	memset(big_body, 'x', sizeof(big_body));

	/* Every thread inherits the mask: the signals come only through signalfd. */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGPIPE);
	if ((err = pthread_sigmask(SIG_BLOCK, &set, NULL)))
		die("pthread_sigmask", err);
	sigdelset(&set, SIGPIPE);
	sfd = signalfd(-1, &set, SFD_CLOEXEC);
	if (sfd < 0)
		die("signalfd", errno);

	err = opt.ops->global_init(opt.threads, opt.tick_ns);
	if (err)
		die("timer backend setup", -err);
	loops = calloc(opt.threads, sizeof(*loops));
	if (!loops)
		die("calloc", ENOMEM);
	port = opt.port;
	for (unsigned i = 0; i < opt.threads; i++) {
		struct loop *l = &loops[i];
		struct epoll_event ev;
		struct sockaddr_in sa;
		socklen_t sl = sizeof(sa);

		l->index = i;
		l->lfd = listen_on(port);
		if (port == 0) {
			if (getsockname(l->lfd, (struct sockaddr *)&sa, &sl))
				die("getsockname", errno);
			port = ntohs(sa.sin_port);
		}
		l->epfd = epoll_create1(EPOLL_CLOEXEC);
		l->notify_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		l->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (l->epfd < 0 || l->notify_fd < 0 || l->reserve_fd < 0)
			die("epoll_create1/eventfd/open", errno);
		l->listen_kind = EP_LISTEN;
		l->notify_kind = EP_NOTIFY;
		ev = (struct epoll_event){.events = EPOLLIN, .data.ptr = &l->listen_kind};
		if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->lfd, &ev))
			die("epoll_ctl", errno);
		ev = (struct epoll_event){.events = EPOLLIN, .data.ptr = &l->notify_kind};
		if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->notify_fd, &ev))
			die("epoll_ctl", errno);
		if ((err = pthread_mutex_init(&l->done_lock, NULL)))
			die("pthread_mutex_init", err);
	}
	printf("listening on 127.0.0.1:%d\n", port);
	printf("timers %s, %u loop threads, %u workers, tick %" PRIu64 " us, header %" PRIu64
	       " ms, idle %" PRIu64 " ms, write %" PRIu64 " ms, deadline %" PRIu64
	       " ms, fd limit %llu\n",
	       opt.ops->name, opt.threads, opt.workers, opt.tick_ns / 1000, opt.header_ns / MS,
	       opt.idle_ns / MS, opt.write_ns / MS, opt.deadline_ns / MS,
	       (unsigned long long)rl.rlim_cur);
	fflush(stdout);

	pool.tail = &pool.head;
	/* The workers wait until a CLOCK_MONOTONIC due time. */
	if ((err = pthread_condattr_init(&ca)) ||
	    (err = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC)) ||
	    (err = pthread_cond_init(&pool.cond, &ca)))
		die("pthread_cond_init", err);
	pthread_condattr_destroy(&ca);
	pool.threads = calloc(opt.workers, sizeof(*pool.threads));
	if (!pool.threads)
		die("calloc", ENOMEM);
	for (pool.n = 0; pool.n < opt.workers; pool.n++)
		if ((err = pthread_create(&pool.threads[pool.n], NULL, worker_main, NULL)))
			die("pthread_create", err);
	for (unsigned i = 0; i < opt.threads; i++)
		if ((err = pthread_create(&loops[i].thread, NULL, loop_main, &loops[i])))
			die("pthread_create", err);

	for (;;) {
		ssize_t n = read(sfd, &si, sizeof(si));

		if (n == sizeof(si))
			break;
		if (n < 0 && errno != EINTR)
			die("read signalfd", errno);
	}
	atomic_store(&stopping, true);
	/* Workers cut their sleeps short; their jobs still go back through the
	 * cancel, so the loops can wait for them. */
	pthread_mutex_lock(&pool.lock);
	pool.stop = true;
	pthread_cond_broadcast(&pool.cond);
	pthread_mutex_unlock(&pool.lock);
	for (unsigned i = 0; i < opt.threads; i++)
		loop_wake(&loops[i]);
	for (unsigned i = 0; i < opt.threads; i++) {
		struct loop *l = &loops[i];

		pthread_join(l->thread, NULL);
		if (l->err)
			die("loop setup (spoke_attach / timer backend)", -l->err);
		sum.connections += l->c.connections;
		sum.requests += l->c.requests;
		sum.close_header += l->c.close_header;
		sum.close_idle += l->c.close_idle;
		sum.close_write += l->c.close_write;
		sum.close_peer += l->c.close_peer;
		sum.close_error += l->c.close_error;
		sum.close_done += l->c.close_done;
		sum.close_shutdown += l->c.close_shutdown;
		sum.resp_200 += l->c.resp_200;
		sum.sleep_200 += l->c.sleep_200;
		sum.resp_400 += l->c.resp_400;
		sum.resp_404 += l->c.resp_404;
		sum.resp_405 += l->c.resp_405;
		sum.resp_504 += l->c.resp_504;
		sum.accept_emfile += l->c.accept_emfile;
		sum.idle_late_served += l->c.idle_late_served;
		tsum.started += l->tl.n.started;
		tsum.reset += l->tl.n.reset;
		tsum.cancelled += l->tl.n.cancelled;
		tsum.fired += l->tl.n.fired;
		errors += l->tl.errors;
		free(l->garbage);
		if (close(l->lfd) || close(l->epfd) || close(l->notify_fd) || close(l->reserve_fd))
			die("close", errno);
		pthread_mutex_destroy(&l->done_lock);
	}
	for (unsigned i = 0; i < pool.n; i++)
		pthread_join(pool.threads[i], NULL);
	opt.ops->global_fini();
	if (getrusage(RUSAGE_SELF, &ru))
		die("getrusage", errno);
	print_counters(&sum, &tsum, tmr_remote_cancels(),
		       (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6,
		       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6);
	free(pool.threads);
	free(loops);
	pthread_cond_destroy(&pool.cond);
	close(sfd);
	if (errors) {
		fprintf(stderr, "spoke-httpd: %" PRIu64 " timer calls failed that cannot\n",
			errors);
		return 1;
	}
	return 0;
}
