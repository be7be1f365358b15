/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * httpd.c - spoke-httpd: an epoll HTTP/1.1 server whose per-connection
 * timeouts live in spoke, or, for comparison, in one of the other ways
 * servers keep them (httpd_timers.h). Same loop code for every backend.
 *
 * The wiring a server copies (backend spoke, one shard per loop thread; the
 * spoke calls are in httpd_timers.c, the loop that makes them is loop_run):
 *
 *     spoke_attach(s, loop_index);          this thread now owns that shard
 *     wake = spoke_wake_fd(s);              into the epoll set
 *     for (;;) {
 *             spoke_next_deadline_ns(s, &ns)  1: no timer; else ns is the epoll timeout
 *             epoll_pwait2(ep, evs, n, ns < 0 ? NULL : &ts(ns), NULL);
 *             ...I/O: spoke_start / spoke_reset / spoke_cancel (direct, no message)
 *             spoke_poll(s);                timeouts run here, inline, on this thread
 *     }
 *     spoke_detach(s);                      after the loop's last timer ended
 *
 * Because timeouts run only inside spoke_poll on the loop thread, they touch
 * the connection table without locks, and the loop's own reset or cancel of
 * a connection's timer never loses a race. Only the /sleep deadline crosses
 * threads: a worker cancels it with spoke_cancel, and its return decides who
 * answers (0: the worker's 200; -ENOENT: the loop's 504, already sent or
 * being sent). The deadline also tells the worker to stop: a request whose
 * answer is no longer wanted does not hold a worker.
 *
 * Timeouts, one timer per connection moved between them with reset:
 *   idle    (--idle-ms)   from accept and from the end of each response until
 *                          the first byte of the next request;
 *   header  (--header-ms) from that first byte until the request is complete,
 *                          body included (a slow body is as bad as a slow header);
 *                          not pushed back by later bytes: slowloris defence;
 *   write   (--write-ms)  from a response that did not go out at once until it
 *                          has drained: slow-read defence;
 *   linger  (LINGER_MS)   after a response that closes the connection: the write
 *                          side is shut down and what the client still sends is
 *                          read and dropped until it closes, so that unread
 *                          input never turns the close into a reset that could
 *                          destroy the response before the client read it.
 * While a /sleep request waits for its worker the connection timer is off and
 * the request's own deadline timer (--deadline-ms) covers it.
 *
 * Requests are read by httpd_request.c (libhttp-parser plus the checks that
 * make it safe on untrusted input). A connection holds its buffers (struct
 * req, about 5 KiB) only while a request is in flight: a connection waiting
 * for its next request is a struct conn and its timer, nothing more. Out of
 * file descriptors (or memory for a timer), new connections are dropped and
 * the server goes on. The command line is httpd_options.c, the counters and
 * the report at exit httpd_report.c.
 *
 * Prints "listening on 127.0.0.1:PORT" first; on SIGINT/SIGTERM stops and
 * prints its counters, last of all one line "stats key=value ...".
 */
#define _GNU_SOURCE
#include "httpd_options.h"
#include "httpd_report.h"
#include "httpd_request.h"
#include "httpd_timers.h"

#include <errno.h>
#include <fcntl.h>
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

#define MS_NS	     UINT64_C(1000000)
#define IN_SIZE	     4096
#define BIG_SIZE     (1u << 20) /* GET /big: enough to fill socket buffers (slow-read) */
#define MAX_SLEEP_MS 600000
#define LINGER_MS    5000 /* at most, after a closing response, for the client's close */
#define REQ_CACHE    64	  /* request buffers a loop keeps for reuse */

static char big_body[BIG_SIZE];
static atomic_bool stopping;

/* --- connections, requests, /sleep jobs, loops --------------------------------------- */

enum conn_state { C_IDLE, C_HEADER, C_WAIT, C_WRITE, C_LINGER };

/*
 * One connection, as small as it can be: everything a request needs while it
 * is read and answered is in struct req, taken from the loop's cache at the
 * first byte and given back once the response is out and nothing is buffered.
 */
struct conn {
	int kind; /* EP_CONN */
	int fd;	  /* -1 once closed (an event already taken may still name it) */
	uint8_t state;
	bool timer_on;
	struct loop *loop;
	struct conn *next, *prev; /* the loop's open connections */
	struct req *req;	  /* NULL while waiting for a request */
	uint64_t idle_since_ns;	  /* when the idle wait began (lateness) */
	struct tmr timer;	  /* idle / header / write / linger, after state */
};

struct job;

/* The request in flight on a connection, and its response. */
struct req {
	struct http_req http;
	struct job *job; /* the /sleep request waiting for its worker */
	bool close_after, rd_blocked, continue_sent;
	int iovcnt;
	struct iovec iov[2]; /* the response: header, then a body that is not copied */
	char hdr[256];
	char body[64]; /* a short body made for this response */
	struct req *next_free;
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
	bool abandoned; /* under pool.lock: the answer is no longer wanted */
	bool won;	/* the worker's spoke_cancel (or equivalent) returned 0 */
	bool fired;	/* the deadline callback ran */
	bool returned;	/* the worker handed it back */
	struct job *next;
};

struct loop {
	struct tmr_loop tl;
	unsigned index;
	pthread_t thread;
	int epfd, lfd, notify_fd, reserve_fd;
	int notify_kind, listen_kind;
	bool listen_paused; /* out of fds with no reserve: not watching the listener */
	struct conn *conns;
	unsigned jobs_out; /* handed to workers, not yet back */
	/* jobs handed back by workers */
	pthread_mutex_t done_lock;
	struct job *done_head;
	/* freed after the turn: an event already taken from epoll may name them */
	void **garbage;
	size_t n_garbage, cap_garbage;
	struct req *free_reqs;
	unsigned n_free_reqs;
	struct counters c;
	struct lateness idle_late;
	int err; /* a setup error of the thread */
};

static struct loop *loops;

/* The /sleep worker pool. */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* new jobs, abandoned jobs, stop */
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

/* --- the connection timer: the counters the server prints ----------------------------- */

/* Arm (or move) c's timer to ns from now; false if the backend could not (out of fds or memory). */
static bool conn_timer(struct conn *c, uint64_t ns)
{
	struct loop *l = c->loop;
	int err;

	if (c->timer_on) {
		l->tl.n.reset++;
		err = opt.ops->reset(&l->tl, &c->timer, ns);
		if (err) /* the loop's own armed timer: this cannot fail */
			l->tl.errors++;
		return !err;
	}
	err = opt.ops->start(&l->tl, &c->timer, ns);
	if (err)
		return false;
	l->tl.n.started++;
	c->timer_on = true;
	return true;
}

static void conn_timer_off(struct conn *c)
{
	struct loop *l = c->loop;

	if (!c->timer_on)
		return;
	l->tl.n.cancelled++;
	opt.ops->cancel(&l->tl, &c->timer);
	c->timer_on = false;
}

/* --- request buffers: taken at a request's first byte, given back when it is done ----- */

static struct req *loop_req_get(struct loop *l)
{
	struct req *q = l->free_reqs;

	if (q) {
		l->free_reqs = q->next_free;
		l->n_free_reqs--;
	} else {
		q = malloc(sizeof(*q));
		if (!q)
			return NULL;
	}
	q->job = NULL;
	q->close_after = q->rd_blocked = q->continue_sent = false;
	q->iovcnt = 0;
	q->in_start = q->in_end = 0;
	return q;
}

static void loop_req_put(struct loop *l, struct req *q)
{
	if (l->n_free_reqs >= REQ_CACHE) {
		free(q);
		return;
	}
	q->next_free = l->free_reqs;
	l->free_reqs = q;
	l->n_free_reqs++;
}

/* Give the buffers back if nothing in them is needed any more. */
static void conn_settle(struct conn *c)
{
	struct req *q = c->req;

	if (c->fd < 0 || !q)
		return;
	if (c->state == C_LINGER ||
	    (c->state == C_IDLE && q->in_start == q->in_end && !q->rd_blocked)) {
		c->req = NULL;
		loop_req_put(c->loop, q);
	}
}

/* --- connections ------------------------------------------------------------------- */

enum close_why {
	WHY_HEADER,
	WHY_IDLE,
	WHY_WRITE,
	WHY_PEER,
	WHY_ERROR,
	WHY_DONE,
	WHY_LINGER,
	WHY_SHUTDOWN
};

static void job_abandon(struct job *j);
static void loop_listen_resume(struct loop *l);

static void conn_close(struct conn *c, enum close_why why)
{
	struct loop *l = c->loop;
	uint64_t *n[] = {&l->c.close_header, &l->c.close_idle,	  &l->c.close_write,
			 &l->c.close_peer,   &l->c.close_error,	  &l->c.close_done,
			 &l->c.close_linger, &l->c.close_shutdown};

	(*n[why])++;
	conn_timer_off(c);
	opt.ops->release(&l->tl, &c->timer);
	if (c->req) {
		if (c->req->job) { /* the worker still has it: the answer has nowhere to go */
			c->req->job->conn = NULL;
			job_abandon(c->req->job);
		}
		loop_req_put(l, c->req);
		c->req = NULL;
	}
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
	if (l->listen_paused)
		loop_listen_resume(l);
}

/* Waiting for the next request: the idle timeout, counted from now. */
static void conn_wait_idle(struct conn *c)
{
	c->state = C_IDLE;
	c->idle_since_ns = now_ns();
	if (!conn_timer(c, opt.idle_ms * MS_NS))
		conn_close(c, WHY_ERROR);
}

/* Read and drop what a lingering connection's client still sends, until it closes. */
static void conn_drain(struct conn *c)
{
	char sink[4096];

	for (;;) {
		ssize_t n = read(c->fd, sink, sizeof(sink));

		if (n > 0)
			continue;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		conn_close(c, WHY_DONE); /* its close (or reset): done */
		return;
	}
}

/* The response that ends the connection is out: an orderly close, not a reset. */
static void conn_linger(struct conn *c)
{
	if (shutdown(c->fd, SHUT_WR)) {
		conn_close(c, errno == ENOTCONN ? WHY_PEER : WHY_ERROR);
		return;
	}
	c->state = C_LINGER;
	if (!conn_timer(c, LINGER_MS * MS_NS)) {
		conn_close(c, WHY_ERROR);
		return;
	}
	conn_drain(c);
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
	struct loop *l = c->loop;

	(void)tl;
	c->timer_on = false; /* it has run: nothing to cancel any more */
	switch ((enum conn_state)c->state) {
	case C_IDLE:
		/*
		 * An idle timeout that runs while a request waits unread means the
		 * loop itself came late (a stall between epoll_wait and this poll):
		 * the client was not idle, so the request is served, not cut off.
		 */
		if (conn_input_waiting(c)) {
			l->c.idle_late_served++;
			conn_read(c);
			return;
		}
		late_record(&l->idle_late, now_ns(), c->idle_since_ns + opt.idle_ms * MS_NS);
		conn_close(c, WHY_IDLE);
		return;
	case C_HEADER:
		conn_close(c, WHY_HEADER);
		return;
	case C_WRITE:
		conn_close(c, WHY_WRITE);
		return;
	case C_LINGER:
		conn_close(c, WHY_LINGER);
		return;
	case C_WAIT: /* the timer is off while a job is out */
		break;
	}
	l->tl.errors++;
}

/* Advance the response's iovecs past n written bytes. */
static void iov_consume(struct req *q, size_t n)
{
	while (q->iovcnt && n >= q->iov[0].iov_len) {
		n -= q->iov[0].iov_len;
		q->iov[0] = q->iov[1];
		q->iovcnt--;
	}
	if (q->iovcnt) {
		q->iov[0].iov_base = (char *)q->iov[0].iov_base + n;
		q->iov[0].iov_len -= n;
	}
}

/*
 * Write what is left of the response. When all of it is out the connection
 * lingers to its close, or waits for the next request; when the socket is
 * full it waits for EPOLLOUT under the write timeout. Check c->fd and
 * c->state afterwards: it may have closed.
 */
static void conn_flush(struct conn *c)
{
	struct req *q = c->req;

	while (q->iovcnt) {
		struct msghdr mh = {.msg_iov = q->iov, .msg_iovlen = (size_t)q->iovcnt};
		ssize_t n = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				if (c->state != C_WRITE) {
					c->state = C_WRITE;
					if (!conn_timer(c, opt.write_ms * MS_NS))
						conn_close(c, WHY_ERROR);
				}
				return; /* EPOLLOUT (edge) brings us back */
			}
			conn_close(c, errno == EPIPE || errno == ECONNRESET ? WHY_PEER : WHY_ERROR);
			return;
		}
		iov_consume(q, (size_t)n);
	}
	if (q->close_after)
		conn_linger(c);
	else
		conn_wait_idle(c); /* one reset per request */
}

static const char *reason(int status)
{
	switch (status) {
	case 200:
		return "OK";
	case 400:
		return "Bad Request";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 414:
		return "URI Too Long";
	case 417:
		return "Expectation Failed";
	case 431:
		return "Request Header Fields Too Large";
	case 503:
		return "Service Unavailable";
	case 504:
		return "Gateway Timeout";
	case 501:
		return "Not Implemented";
	case 505:
		return "HTTP Version Not Supported";
	}
	return "Error";
}

/*
 * Answer the request in c->req: status, an extra header line (or ""), a body
 * that must stay valid until written. keep: the connection may stay open (the
 * request asked for it and was not refused). A HEAD request gets the header only.
 */
static void conn_respond(struct conn *c, int status, const char *extra, const char *body,
			 size_t len, bool keep)
{
	struct req *q = c->req;
	bool head = q->http.head_done && q->http.parser.method == HTTP_HEAD;
	const char *connection = !keep				? "Connection: close\r\n"
				 : http_req_is_http10(&q->http) ? "Connection: keep-alive\r\n"
								: "";
	int n = snprintf(q->hdr, sizeof(q->hdr),
			 "HTTP/1.1 %d %s\r\nContent-Length: %zu\r\nContent-Type: text/plain\r\n"
			 "%s%s\r\n",
			 status, reason(status), len, extra, connection);

	count_response(&c->loop->c, status);
	q->iov[0] = (struct iovec){q->hdr, (size_t)n};
	q->iov[1] = (struct iovec){(void *)body, len};
	q->iovcnt = len && !head ? 2 : 1;
	q->close_after = !keep;
	conn_flush(c);
}

/* A request that must not be served: its status, then an orderly close. */
static void conn_refuse(struct conn *c, int status)
{
	conn_respond(c, status, "", "", 0, false);
}

/* RFC 9110 10.1.1: the client waits for this before it sends the body. */
static void conn_send_continue(struct conn *c)
{
	static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
	struct req *q = c->req;
	ssize_t n;

	if (q->continue_sent || !q->http.head_done || !q->http.expect_continue ||
	    http_req_is_http10(&q->http))
		return;
	q->continue_sent = true;
	n = send(c->fd, cont, sizeof(cont) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
	/* Nothing else is being written now; a full socket only means the client
	 * sends its body unprompted after its own wait. Half a line would be wrong. */
	if (n > 0 && n != (ssize_t)sizeof(cont) - 1)
		conn_close(c, WHY_ERROR);
}

static void conn_process(struct conn *c);

/* After an answer that did not come from conn_process: serve what waits. */
static void conn_resume(struct conn *c)
{
	if (c->fd >= 0 && c->state == C_IDLE && c->req)
		conn_process(c); /* a pipelined request may wait in the buffer */
	if (c->fd >= 0 && c->req && c->req->rd_blocked) {
		c->req->rd_blocked = false;
		conn_read(c);
	}
	conn_settle(c);
}

/* --- /sleep: the worker pool ------------------------------------------------------- */

static void loop_wake(struct loop *l)
{
	uint64_t one = 1;

	if (write(l->notify_fd, &one, sizeof(one)) != sizeof(one) && errno != EAGAIN)
		die("write eventfd", errno);
}

/* Worker thread, under pool.lock: the request's "work", until its time, or until it is
 * abandoned or the server stops. */
static void worker_do_job(struct job *j)
{
	while (!pool.stop && !j->abandoned && now_ns() < j->due_ns) {
		struct timespec ts = {(time_t)(j->due_ns / 1000000000u),
				      (long)(j->due_ns % 1000000000u)};

		pthread_cond_timedwait(&pool.cond, &pool.lock, &ts);
	}
}

/* Worker thread: hand the job back to its loop. The cross-thread cancel decides
 * who answers, exactly once. */
static void worker_return_job(struct job *j)
{
	struct loop *l = j->loop;

	j->won = opt.ops->cancel_remote(&j->deadline) == 0;
	pthread_mutex_lock(&l->done_lock);
	j->next = l->done_head;
	l->done_head = j;
	pthread_mutex_unlock(&l->done_lock);
	loop_wake(l);
}

static void *worker_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&pool.lock);
	for (;;) {
		struct job *j = pool.head;

		if (!j) {
			if (pool.stop)
				break;
			pthread_cond_wait(&pool.cond, &pool.lock);
			continue;
		}
		pool.head = j->next;
		if (!pool.head)
			pool.tail = &pool.head;
		worker_do_job(j);
		pthread_mutex_unlock(&pool.lock);
		worker_return_job(j);
		pthread_mutex_lock(&pool.lock);
	}
	pthread_mutex_unlock(&pool.lock);
	return NULL;
}

/* Loop thread: nobody waits for j's answer any more; its worker stops at once. */
static void job_abandon(struct job *j)
{
	pthread_mutex_lock(&pool.lock);
	j->abandoned = true;
	pthread_cond_broadcast(&pool.cond);
	pthread_mutex_unlock(&pool.lock);
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
	job_abandon(j);
	if (c) {
		c->req->job = NULL;
		j->conn = NULL;
		conn_respond(c, 504, "", "deadline\n", 9, http_req_keep_alive(&c->req->http));
		conn_resume(c);
	}
	if (j->returned) /* a lost worker came back first (no backend lets it) */
		job_free(l, j);
}

/* The worker won: its 200. */
static void job_answer(struct loop *l, struct job *j)
{
	struct conn *c = j->conn;
	struct req *q;
	int n;

	if (!c)
		return;
	q = c->req;
	n = snprintf(q->body, sizeof(q->body), "slept %u ms\n", j->ms);
	q->job = NULL;
	l->c.sleep_200++;
	conn_respond(c, 200, "", q->body, (size_t)n, http_req_keep_alive(&q->http));
	conn_resume(c);
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
			job_answer(l, j);
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

	if (!j) {
		conn_respond(c, 503, "", "", 0, http_req_keep_alive(&c->req->http));
		return;
	}
	tmr_init(&j->deadline, on_deadline);
	j->loop = l;
	j->conn = c;
	j->ms = ms;
	j->due_ns = now_ns() + ms * MS_NS;
	if (opt.ops->start(&l->tl, &j->deadline, opt.deadline_ms * MS_NS)) {
		/* out of fds (timerfd) or memory: refuse this one, keep serving */
		opt.ops->release(&l->tl, &j->deadline);
		free(j);
		conn_respond(c, 503, "", "", 0, http_req_keep_alive(&c->req->http));
		return;
	}
	l->tl.n.started++;
	c->req->job = j;
	c->state = C_WAIT;
	conn_timer_off(c); /* the deadline covers the wait */
	l->jobs_out++;
	pthread_mutex_lock(&pool.lock);
	j->next = NULL;
	*pool.tail = j;
	pool.tail = &j->next;
	pthread_cond_broadcast(&pool.cond);
	pthread_mutex_unlock(&pool.lock);
}

/* --- requests ---------------------------------------------------------------------- */

static void serve_sleep(struct conn *c, const char *query)
{
	char *end;
	unsigned long ms;

	if (!query || strncmp(query, "ms=", 3)) {
		conn_refuse(c, 400);
		return;
	}
	ms = strtoul(query + 3, &end, 10);
	if (end == query + 3 || *end || ms > MAX_SLEEP_MS) {
		conn_refuse(c, 400);
		return;
	}
	start_sleep(c, (unsigned)ms);
}

/* GET (or HEAD) /, POST /, GET /big, GET /sleep?ms=N; 405 names what is allowed. */
static void serve(struct conn *c)
{
	static const char hello[] = "hello from spoke-httpd\n";
	struct req *q = c->req;
	struct http_req *h = &q->http;
	bool keep = http_req_keep_alive(h);
	bool get = h->parser.method == HTTP_GET || h->parser.method == HTTP_HEAD;
	char *query;

	h->url[h->url_len] = '\0';
	query = strchr(h->url, '?');
	if (query)
		*query++ = '\0';
	if (!strcmp(h->url, "/")) {
		if (get) {
			conn_respond(c, 200, "", hello, sizeof(hello) - 1, keep);
		} else if (h->parser.method == HTTP_POST) {
			int n = snprintf(q->body, sizeof(q->body), "got %" PRIu64 " bytes\n",
					 h->body_bytes);

			conn_respond(c, 200, "", q->body, (size_t)n, keep);
		} else {
			conn_respond(c, 405, "Allow: GET, HEAD, POST\r\n", "", 0, keep);
		}
	} else if (!strcmp(h->url, "/big") || !strcmp(h->url, "/sleep")) {
		if (!get)
			conn_respond(c, 405, "Allow: GET, HEAD\r\n", "", 0, keep);
		else if (h->url[1] == 'b')
			conn_respond(c, 200, "", big_body, BIG_SIZE, keep);
		else
			serve_sleep(c, query);
	} else {
		conn_respond(c, 404, "", "", 0, keep);
	}
}

/* Parse what is buffered and serve the requests it completes, one at a time. */
static void conn_process(struct conn *c)
{
	while (c->fd >= 0 && (c->state == C_IDLE || c->state == C_HEADER) &&
	       c->req->in_start < c->req->in_end) {
		struct req *q = c->req;

		if (c->state == C_IDLE) {
			/* The first bytes of a request: the header timer from now on, which
			 * later bytes (of the header or of the body) do not push back. */
			c->state = C_HEADER;
			http_req_init(&q->http);
			q->continue_sent = false;
			if (!conn_timer(c, opt.header_ms * MS_NS)) {
				conn_close(c, WHY_ERROR);
				return;
			}
		}
		q->in_start +=
			http_req_feed(&q->http, q->in + q->in_start, q->in_end - q->in_start);
		if (q->http.reject) {
			conn_refuse(c, q->http.reject);
			return;
		}
		if (!q->http.done) {
			/* Mid-request: everything was taken, wait for more. */
			q->in_start = q->in_end = 0;
			conn_send_continue(c);
			return;
		}
		serve(c);
	}
}

static void conn_read(struct conn *c)
{
	if (c->state == C_LINGER) {
		conn_drain(c);
		conn_settle(c);
		return;
	}
	if (!c->req && !(c->req = loop_req_get(c->loop))) {
		conn_close(c, WHY_ERROR); /* out of memory */
		return;
	}
	for (;;) {
		struct req *q = c->req;
		ssize_t n;

		if (q->in_end == IN_SIZE) {
			if (q->in_start == 0) {
				/* Full while busy: read again once it is taken. */
				q->rd_blocked = true;
				return;
			}
			memmove(q->in, q->in + q->in_start, q->in_end - q->in_start);
			q->in_end -= q->in_start;
			q->in_start = 0;
		}
		n = read(c->fd, q->in + q->in_end, IN_SIZE - q->in_end);
		if (n == 0) {
			conn_close(c, WHY_PEER);
			return;
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				conn_close(c, errno == ECONNRESET ? WHY_PEER : WHY_ERROR);
			break;
		}
		q->in_end += (size_t)n;
		conn_process(c);
		if (c->fd < 0)
			return;
		if (c->state == C_LINGER) {
			conn_drain(c); /* what follows a refused request is dropped */
			conn_settle(c);
			return;
		}
	}
	conn_settle(c);
}

/* A new connection: its struct and its idle timer; false (fd closed) if either failed. */
static bool conn_open(struct loop *l, int fd)
{
	struct epoll_event ev;
	struct conn *c;
	int one = 1;

	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)))
		die("setsockopt TCP_NODELAY", errno);
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return false;
	}
	c->kind = EP_CONN;
	c->fd = fd;
	c->loop = l;
	tmr_init(&c->timer, on_conn_timer);
	c->state = C_IDLE;
	c->idle_since_ns = now_ns();
	/* The timer may need an fd of its own (timerfd) or memory: if there is
	 * none, this connection is dropped and the server goes on. */
	if (!conn_timer(c, opt.idle_ms * MS_NS)) {
		opt.ops->release(&l->tl, &c->timer);
		free(c);
		close(fd);
		return false;
	}
	ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
	ev.data.ptr = c;
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev)) {
		conn_timer_off(c);
		opt.ops->release(&l->tl, &c->timer);
		free(c);
		close(fd);
		return false;
	}
	c->next = l->conns;
	if (l->conns)
		l->conns->prev = c;
	l->conns = c;
	l->c.connections++;
	return true;
}

/* --- the listener, and what it does when fds run out ------------------------------- */

static void loop_listen_pause(struct loop *l)
{
	if (epoll_ctl(l->epfd, EPOLL_CTL_DEL, l->lfd, NULL))
		die("epoll_ctl del listener", errno);
	l->listen_paused = true;
}

/* A connection closed: an fd is free again, watch the listener. */
static void loop_listen_resume(struct loop *l)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &l->listen_kind};

	if (atomic_load(&stopping))
		return;
	if (l->reserve_fd < 0)
		l->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->lfd, &ev))
		die("epoll_ctl add listener", errno);
	l->listen_paused = false;
}

/*
 * Out of fds with connections queued: take one with the reserve fd and drop
 * it, so that the (level-triggered) listener does not stay readable forever.
 * Without a reserve (another thread took the fd), stop watching the listener
 * until one of our connections closes.
 */
static void loop_shed_one(struct loop *l)
{
	int fd;

	l->c.accept_dropped++;
	if (l->reserve_fd < 0 || close(l->reserve_fd)) {
		l->reserve_fd = -1;
		loop_listen_pause(l);
		return;
	}
	fd = accept4(l->lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd >= 0)
		close(fd);
	l->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (l->reserve_fd < 0 && l->conns)
		loop_listen_pause(l);
}

static void loop_accept(struct loop *l)
{
	for (;;) {
		int fd = accept4(l->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd >= 0) {
			if (!conn_open(l, fd))
				l->c.accept_dropped++;
			continue;
		}
		if (errno == EINTR || errno == ECONNABORTED)
			continue;
		if (errno == EMFILE || errno == ENFILE)
			loop_shed_one(l);
		else if (errno == ENOBUFS || errno == ENOMEM)
			l->c.accept_dropped++;
		else if (errno != EAGAIN)
			die("accept4", errno);
		return;
	}
}

/* --- the event loop: the same code for every timer backend ------------------------- */

static void loop_collect(struct loop *l)
{
	for (size_t i = 0; i < l->n_garbage; i++)
		free(l->garbage[i]);
	l->n_garbage = 0;
}

/* Sleep in epoll until an event or the next timer deadline (spoke_next_deadline). */
static int loop_wait(struct loop *l, struct epoll_event *evs, int max)
{
	int64_t ns = opt.ops->next_ns(&l->tl);
	struct timespec ts, *tsp = NULL;
	int n;

	if (ns < -1)
		die("next deadline", (int)-ns);
	if (ns >= 0) {
		ts.tv_sec = (time_t)(ns / 1000000000);
		ts.tv_nsec = (long)(ns % 1000000000);
		tsp = &ts;
	}
	n = epoll_pwait2(l->epfd, evs, max, tsp, NULL);
	if (n < 0) {
		if (errno != EINTR)
			die("epoll_pwait2", errno);
		n = 0;
	}
	return n;
}

static void conn_on_event(struct conn *c, uint32_t events)
{
	if (c->fd < 0)
		return; /* closed earlier in this turn */
	if ((events & EPOLLOUT) && c->state == C_WRITE) {
		conn_flush(c);
		conn_resume(c);
	}
	if (c->fd >= 0 && (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
		conn_read(c);
}

static void loop_on_event(struct loop *l, const struct epoll_event *ev, bool closing)
{
	uint64_t v;

	switch (*(int *)ev->data.ptr) {
	case EP_CONN:
		conn_on_event(ev->data.ptr, ev->events);
		break;
	case EP_LISTEN:
		if (!closing)
			loop_accept(l);
		break;
	case EP_NOTIFY:
		if (read(l->notify_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			die("read eventfd", errno);
		loop_take_done(l);
		break;
	case EP_TIMERFD:
		opt.ops->on_fd(&l->tl, ev->data.ptr);
		break;
	case EP_TIMER_WAKE: /* the timers' poll below empties it */
		break;
	}
}

/* Stop taking work and close what is open; the loop ends once the workers' jobs are
 * back, since their deadline timers must end before the loop does. */
static void loop_begin_shutdown(struct loop *l)
{
	if (!l->listen_paused && epoll_ctl(l->epfd, EPOLL_CTL_DEL, l->lfd, NULL))
		die("epoll_ctl del", errno);
	l->listen_paused = true;
	while (l->conns)
		conn_close(l->conns, WHY_SHUTDOWN);
}

/* The loop's timers: for spoke, attach this thread to shard l->index and watch
 * the shard's wake fd (httpd_timers.c: sp_loop_init). */
static int loop_attach_timers(struct loop *l)
{
	struct epoll_event ev;
	int err;

	l->tl.ops = opt.ops;
	l->tl.index = l->index;
	l->tl.epfd = l->epfd;
	l->tl.wake_kind = EP_TIMER_WAKE;
	err = opt.ops->loop_init(&l->tl);
	if (err || l->tl.wake_fd < 0)
		return err;
	ev = (struct epoll_event){.events = EPOLLIN, .data.ptr = &l->tl.wake_kind};
	return epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->tl.wake_fd, &ev) ? -errno : 0;
}

/* One loop: wait, handle I/O, run what timed out (spoke_poll), free what closed. */
static void loop_run(struct loop *l)
{
	struct epoll_event evs[256];
	bool closing = false;

	for (;;) {
		int n, err;

		if (atomic_load(&stopping) && !closing) {
			closing = true;
			loop_begin_shutdown(l);
		}
		if (closing && l->jobs_out == 0)
			break;
		n = loop_wait(l, evs, 256);
		for (int i = 0; i < n; i++)
			loop_on_event(l, &evs[i], closing);
		err = opt.ops->poll(&l->tl);
		if (err < 0)
			die("timer poll", -err);
		loop_collect(l);
	}
}

static void *loop_main(void *arg)
{
	struct loop *l = arg;

	l->err = loop_attach_timers(l);
	if (l->err)
		return NULL;
	loop_run(l);
	loop_collect(l);
	opt.ops->loop_fini(&l->tl); /* spoke: spoke_detach */
	return NULL;
}

/* --- setup ------------------------------------------------------------------------ */

/* A listening socket on 127.0.0.1:port; every loop has its own (SO_REUSEPORT). */
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

/*
 * SO_REUSEPORT lets our loops share a port, and would as silently let this
 * server share it with another process already listening there (each then
 * gets a share of the connections). A bind without it fails if anyone holds
 * the port: then refuse to start.
 */
static void check_port_free(int port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0)
		die("socket", errno);
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)))
		die("setsockopt", errno);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		if (errno == EADDRINUSE) {
			fprintf(stderr, "spoke-httpd: --port %d: 127.0.0.1:%d is in use\n", port,
				port);
			exit(2);
		}
		die("bind 127.0.0.1", errno);
	}
	close(fd);
}

/* Loop l's sockets: the listener, epoll, the workers' eventfd, a reserve fd. */
static void loop_open(struct loop *l, unsigned index, int port)
{
	struct epoll_event ev;
	int err;

	l->index = index;
	l->lfd = listen_on(port);
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

/* All loops' sockets; returns the port (the one the kernel picked for --port 0). */
static int loops_open(void)
{
	int port = (int)opt.port;

	if (port)
		check_port_free(port);
	loops = calloc(opt.threads, sizeof(*loops));
	if (!loops)
		die("calloc", ENOMEM);
	for (unsigned i = 0; i < opt.threads; i++) {
		loop_open(&loops[i], i, port);
		if (port == 0) {
			struct sockaddr_in sa;
			socklen_t sl = sizeof(sa);

			if (getsockname(loops[i].lfd, (struct sockaddr *)&sa, &sl))
				die("getsockname", errno);
			port = ntohs(sa.sin_port);
		}
	}
	return port;
}

static void loops_start(void)
{
	for (unsigned i = 0; i < opt.threads; i++) {
		int err = pthread_create(&loops[i].thread, NULL, loop_main, &loops[i]);

		if (err)
			die("pthread_create", err);
	}
}

static void pool_start(void)
{
	pthread_condattr_t ca;
	int err;

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
}

/* Idle floods need an fd per connection: take all the hard limit allows. */
static rlim_t raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		die("getrlimit", errno);
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl))
		die("setrlimit", errno);
	return rl.rlim_cur;
}

/* Every thread inherits the mask: the signals come only through the returned signalfd. */
static int signals_to_fd(void)
{
	sigset_t set;
	int err, sfd;

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
	return sfd;
}

static void wait_for_signal(int sfd)
{
	struct signalfd_siginfo si;

	for (;;) {
		ssize_t n = read(sfd, &si, sizeof(si));

		if (n == sizeof(si))
			return;
		if (n < 0 && errno != EINTR)
			die("read signalfd", errno);
	}
}

/* --- stopping -------------------------------------------------------------------- */

/* Workers cut their sleeps short; their jobs still go back through the cancel,
 * so the loops can wait for them. */
static void stop_all(void)
{
	atomic_store(&stopping, true);
	pthread_mutex_lock(&pool.lock);
	pool.stop = true;
	pthread_cond_broadcast(&pool.cond);
	pthread_mutex_unlock(&pool.lock);
	for (unsigned i = 0; i < opt.threads; i++)
		loop_wake(&loops[i]);
}

/* Join a loop, add its counters, close its fds; -1 if its timers reported errors. */
static uint64_t loop_join(struct loop *l, struct counters *sum, struct tmr_counters *tsum,
			  struct lateness *late)
{
	pthread_join(l->thread, NULL);
	if (l->err)
		die("loop setup (spoke_attach / timer backend)", -l->err);
	sum_counters(sum, &l->c);
	sum_lateness(late, &l->idle_late);
	tsum->started += l->tl.n.started;
	tsum->reset += l->tl.n.reset;
	tsum->cancelled += l->tl.n.cancelled;
	tsum->fired += l->tl.n.fired;
	while (l->free_reqs) {
		struct req *q = l->free_reqs;

		l->free_reqs = q->next_free;
		free(q);
	}
	free(l->garbage);
	if (close(l->lfd) || close(l->epfd) || close(l->notify_fd) ||
	    (l->reserve_fd >= 0 && close(l->reserve_fd)))
		die("close", errno);
	pthread_mutex_destroy(&l->done_lock);
	return l->tl.errors;
}

int main(int argc, char **argv)
{
	static struct lateness late;
	struct counters sum = {0};
	struct tmr_counters tsum = {0};
	struct rusage ru;
	uint64_t errors = 0;
	rlim_t fd_limit;
	int sfd, err, port;

	parse_args(argc, argv);
	fd_limit = raise_fd_limit();
	memset(big_body, 'x', sizeof(big_body));
	sfd = signals_to_fd();
	err = opt.ops->global_init((unsigned)opt.threads, opt.tick_us * 1000);
	if (err)
		die("timer backend setup", -err);
	port = loops_open();
	printf("listening on 127.0.0.1:%d\n", port);
	printf("timers %s, %" PRIu64 " loop threads, %" PRIu64 " workers, tick %" PRIu64
	       " us, header %" PRIu64 " ms, idle %" PRIu64 " ms, write %" PRIu64
	       " ms, deadline %" PRIu64 " ms, fd limit %llu\n",
	       opt.ops->name, opt.threads, opt.workers, opt.tick_us, opt.header_ms, opt.idle_ms,
	       opt.write_ms, opt.deadline_ms, (unsigned long long)fd_limit);
	fflush(stdout);
	pool_start();
	loops_start();

	wait_for_signal(sfd);
	stop_all();
	for (unsigned i = 0; i < opt.threads; i++)
		errors += loop_join(&loops[i], &sum, &tsum, &late);
	for (unsigned i = 0; i < pool.n; i++)
		pthread_join(pool.threads[i], NULL);
	opt.ops->global_fini();
	if (getrusage(RUSAGE_SELF, &ru))
		die("getrusage", errno);
	print_counters(&sum, &tsum, &late, tmr_remote_cancels(), &ru, LINGER_MS);
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
