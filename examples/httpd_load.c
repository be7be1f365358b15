/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * httpd_load.c - spoke-httpd-load: a small bounded HTTP client that checks
 * what spoke-httpd's timeouts promise, over real sockets on 127.0.0.1.
 *
 *   check --server PATH [--timers B] [--conns N] [--idle-ms MS] [--deadline-ms MS]
 *         [--sleeps N] [--threads N]
 *       (the ctest) starts PATH --port 0, opens N connections, half of them
 *       "idle" (one request, then silent) and half "active" (a request
 *       every few ms), plus --sleeps connections sending one GET /sleep each
 *       around the deadline; waits until every idle and sleep connection has
 *       been closed by the server, then stops it with SIGTERM and compares its
 *       "stats" line with what the client saw. Exits 1 with a message on the
 *       first broken promise, 2 on a setup error.
 *   idle --port P --conns N --idle-ms MS [--tick-us U]
 *       the idle flood of scripts/server-load.sh: N connections, one request
 *       each, then silent; prints when the server closed each one (a close
 *       before request sent + idle is counted as early, not failed: this
 *       mode also measures servers that close early).
 *   hold --port P --conns N --pids "PID..."
 *       memory per idle connection: after a warm-up, N connections, one
 *       request each, held open; prints how much the anonymous resident
 *       memory (RssAnon) of the processes PID... grew, per connection.
 *   sleep --port P --deadline-ms MS [--sleeps N]
 *       /sleep requests around the deadline; prints the exactly-one-answer and
 *       never-early checks.
 *
 * Time bounds: a check never asserts on speed. What must never happen early
 * is checked exactly, against a lower bound the server cannot beat: its idle
 * timer starts after it read our request, so a connection closed before
 * (request sent + idle) was closed early. What must happen is waited for,
 * with a bound in tens of seconds that only a bug would reach.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MS UINT64_C(1000000)

enum role { R_IDLE, R_ACTIVE, R_SLEEP };
enum cstate { S_CONNECTING, S_WAITING, S_QUIET, S_DONE };

struct cc {
	int fd;
	enum role role;
	enum cstate state;
	unsigned sleep_ms;
	uint64_t t_send;      /* the request in flight, or the last one */
	uint64_t t_send_prev; /* the last request answered before t_send's */
	uint64_t t_next;      /* active: when to send the next request */
	uint64_t t_eof;
	unsigned sent, responses, status;
	bool closed_after_stall; /* active, closed with a request in flight after we were silent */
	uint64_t elapsed_ns;	 /* sleep: request to answer */
	size_t blen;
	char buf[1024];
};

static struct {
	const char *server, *timers, *pids;
	int port;
	unsigned conns, sleeps, threads;
	uint64_t idle_ms, deadline_ms, tick_us, timeout_s;
} opt = {NULL, "spoke", NULL, 0, 500, 40, 2, 300, 1000, 1000, 120};

static unsigned failures;
static bool early_counted; /* idle: an early close is counted in result.early, not failed */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void setup_fail(const char *what)
{
	fprintf(stderr, "spoke-httpd-load: %s: %s\n", what, strerror(errno));
	exit(2);
}

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
	va_list ap;

	if (failures++ >= 20)
		return;
	fprintf(stderr, "FAIL: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void cc_send(struct cc *c, const char *req)
{
	size_t len = strlen(req);

	/* Read before the send: the server may answer, and start its idle timer,
	 * before we run again after send() returns. */
	c->t_send = now_ns();
	/* A request is far below the socket buffer: it goes out whole or the
	 * connection is broken. */
	if (send(c->fd, req, len, MSG_NOSIGNAL) != (ssize_t)len)
		fail("send on a connection (role %d): %s", c->role, strerror(errno));
	c->state = S_WAITING;
	c->sent++;
}

static void cc_send_role(struct cc *c)
{
	char req[128];

	if (c->role == R_SLEEP)
		snprintf(req, sizeof(req), "GET /sleep?ms=%u HTTP/1.1\r\nHost: t\r\n\r\n",
			 c->sleep_ms);
	else
		snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nHost: t\r\n\r\n");
	cc_send(c, req);
}

/* Take complete responses out of c->buf; returns how many. */
static unsigned cc_parse(struct cc *c)
{
	unsigned got = 0;

	for (;;) {
		char *end, *cl;
		size_t hlen, blen = 0;

		c->buf[c->blen] = '\0';
		end = strstr(c->buf, "\r\n\r\n");
		if (!end)
			return got;
		hlen = (size_t)(end - c->buf) + 4;
		cl = strcasestr(c->buf, "Content-Length:");
		if (cl && cl < end)
			blen = strtoul(cl + 15, NULL, 10);
		if (c->blen < hlen + blen)
			return got;
		if (strncmp(c->buf, "HTTP/1.1 ", 9)) {
			fail("not an HTTP/1.1 response: %.40s", c->buf);
			c->status = 0;
		} else {
			c->status = (unsigned)atoi(c->buf + 9);
		}
		memmove(c->buf, c->buf + hlen + blen, c->blen - hlen - blen);
		c->blen -= hlen + blen;
		got++;
	}
}

struct result {
	unsigned opened, cap, early;
	unsigned idle_closed, active_closed_after_stall, sleep_closed;
	uint64_t responses, sleep_200, sleep_504;
	uint64_t *late_ns; /* idle: close - (send + idle), per idle connection */
	unsigned n_late;
	int64_t earliest_ns; /* most negative lateness seen (early closes) */
};

static void on_response(struct cc *c, struct result *r, uint64_t now)
{
	r->responses++;
	c->responses++;
	if (c->role == R_SLEEP) {
		c->elapsed_ns = now - c->t_send;
		if (c->responses > 1)
			fail("/sleep?ms=%u answered twice (statuses ..., %u)", c->sleep_ms,
			     c->status);
		else if (c->status == 200) {
			r->sleep_200++;
			if (c->elapsed_ns < c->sleep_ms * MS)
				fail("/sleep?ms=%u answered 200 after %.3f ms, before the work "
				     "ended",
				     c->sleep_ms, (double)c->elapsed_ns / 1e6);
		} else if (c->status == 504) {
			r->sleep_504++;
			if (c->elapsed_ns < opt.deadline_ms * MS)
				fail("/sleep?ms=%u answered 504 after %.3f ms, before the %" PRIu64
				     " ms deadline",
				     c->sleep_ms, (double)c->elapsed_ns / 1e6, opt.deadline_ms);
		} else {
			fail("/sleep?ms=%u answered %u", c->sleep_ms, c->status);
		}
	} else if (c->status != 200) {
		fail("GET / answered %u", c->status);
	}
	c->t_send_prev = c->t_send;
	c->state = S_QUIET;
	if (c->role == R_ACTIVE)
		c->t_next = now + 5 * MS; /* paced: 250 of them must not eat the CPUs */
}

static void on_eof(struct cc *c, struct result *r, uint64_t now)
{
	uint64_t idle = opt.idle_ms * MS;

	bool in_flight = c->state == S_WAITING;

	c->t_eof = now;
	c->state = S_DONE;
	if (c->role == R_ACTIVE) {
		/* Closed legitimately only if we were silent for idle: answered, and
		 * the next request (if sent) left idle after the previous one. */
		uint64_t silent = in_flight ? c->t_send - c->t_send_prev : now - c->t_send_prev;

		if (silent < idle)
			fail("an active connection was closed after %.3f ms without a request "
			     "(idle timeout %" PRIu64 " ms)",
			     (double)silent / 1e6, opt.idle_ms);
		else
			r->active_closed_after_stall++;
		c->closed_after_stall = in_flight;
		return;
	}
	if (c->responses == 0)
		fail("a connection (role %d) was closed before its answer", c->role);
	if (now - c->t_send < idle && early_counted)
		r->early++;
	else if (now - c->t_send < idle)
		fail("a connection was closed %.3f ms after its request, before the idle "
		     "timeout of %" PRIu64 " ms",
		     (double)(now - c->t_send) / 1e6, opt.idle_ms);
	if ((int64_t)(now - c->t_send - idle) < r->earliest_ns)
		r->earliest_ns = (int64_t)(now - c->t_send - idle);
	if (c->role == R_IDLE) {
		r->idle_closed++;
		/* an early one counts as 0 late here; it failed above */
		r->late_ns[r->n_late++] = now - c->t_send < idle ? 0 : now - c->t_send - idle;
	} else {
		r->sleep_closed++;
	}
}

static void cc_readable(struct cc *c, struct result *r)
{
	for (;;) {
		ssize_t n = read(c->fd, c->buf + c->blen, sizeof(c->buf) - 1 - c->blen);
		uint64_t now = now_ns();

		if (n > 0) {
			unsigned got;

			c->blen += (size_t)n;
			got = cc_parse(c);
			for (unsigned i = 0; i < got; i++)
				on_response(c, r, now);
			if (c->blen == sizeof(c->buf) - 1) {
				fail("a response too large");
				c->blen = 0;
			}
			continue;
		}
		if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
			if (n < 0 && errno != ECONNRESET)
				fail("read: %s", strerror(errno));
			on_eof(c, r, now);
			return;
		}
		if (errno == EAGAIN)
			return;
	}
}

static int connect_one(int port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0)
		return -1;
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) ||
	    (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) && errno != EINPROGRESS)) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/*
 * Drive n_idle + n_active + n_sleep connections until every idle and sleep
 * connection has been closed by the server (or the time bound passes).
 * sleep_ms[i] is the work of sleep connection i.
 */
static void drive(unsigned n_idle, unsigned n_active, unsigned n_sleep, const unsigned *sleep_ms,
		  struct result *r, struct cc **out)
{
	unsigned n = n_idle + n_active + n_sleep, pending, in_flight = 0;
	bool draining = false;
	struct cc *cs = calloc(n, sizeof(*cs));
	int ep = epoll_create1(EPOLL_CLOEXEC);
	uint64_t t_end = now_ns() + opt.timeout_s * 1000000000u;

	if (!cs || ep < 0)
		setup_fail("calloc/epoll_create1");
	r->late_ns = calloc(n_idle ? n_idle : 1, sizeof(*r->late_ns));
	if (!r->late_ns)
		setup_fail("calloc");
	r->earliest_ns = INT64_MAX;
	for (unsigned i = 0; i < n; i++) {
		struct cc *c = &cs[i];
		struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
					 .data.ptr = c};

		c->role = i < n_idle ? R_IDLE : i < n_idle + n_active ? R_ACTIVE : R_SLEEP;
		if (c->role == R_SLEEP)
			c->sleep_ms = sleep_ms[i - n_idle - n_active];
		c->fd = connect_one(opt.port);
		if (c->fd < 0) {
			if (errno == EMFILE || errno == ENFILE) {
				fprintf(stderr, "spoke-httpd-load: fd limit after %u connections\n",
					i);
				n = i;
				break;
			}
			setup_fail("connect");
		}
		/* One handshake at a time: a burst of thousands overflows the listen
		 * queue, and the SYNs the kernel then drops come back seconds later,
		 * which would blur every timing the flood measures. */
		{
			struct pollfd p = {c->fd, POLLOUT, 0};
			int err = 0;
			socklen_t len = sizeof(err);

			if (poll(&p, 1, 30000) != 1 ||
			    getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) || err) {
				errno = err ? err : ETIMEDOUT;
				setup_fail("connect");
			}
		}
		if (epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev))
			setup_fail("epoll_ctl");
		cc_send_role(c);
		r->opened++;
	}
	r->cap = n;
	for (;;) {
		struct epoll_event evs[512];
		uint64_t now = now_ns();
		int k;

		pending = 0;
		for (unsigned i = 0; i < n; i++) {
			struct cc *c = &cs[i];

			if (c->role != R_ACTIVE && c->state != S_DONE)
				pending++;
			if (c->role == R_ACTIVE && c->state == S_QUIET && now >= c->t_next &&
			    !draining)
				cc_send_role(c);
			if (c->role == R_ACTIVE && c->state == S_WAITING)
				in_flight++;
		}
		/* Done when every idle and sleep connection is closed; then the active
		 * ones stop and their last answers are waited for, so that the server's
		 * request count can be compared exactly. */
		if (!pending)
			draining = true;
		if (draining && !in_flight)
			break;
		in_flight = 0;
		if (now > t_end) {
			fail("%u connections still open after %" PRIu64
			     " s: the server never closed them (or never answered)",
			     pending, opt.timeout_s);
			break;
		}
		k = epoll_wait(ep, evs, 512, 5);
		if (k < 0 && errno != EINTR)
			setup_fail("epoll_wait");
		for (int i = 0; i < k; i++) {
			struct cc *c = evs[i].data.ptr;

			if (c->state == S_DONE)
				continue;
			if (c->state == S_CONNECTING && (evs[i].events & EPOLLOUT)) {
				int err = 0;
				socklen_t len = sizeof(err);

				if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) || err) {
					errno = err;
					setup_fail("connect (async)");
				}
				cc_send_role(c);
			}
			if (evs[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
				cc_readable(c, r);
		}
	}
	close(ep);
	*out = cs;
	r->cap = n;
}

static void cc_close_all(struct cc *cs, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (cs[i].fd >= 0 && close(cs[i].fd))
			setup_fail("close");
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The sleeps around the deadline: every 5th is far below it (the worker must
 * win), every 5th far beyond (the deadline must win), the rest within a few ms. */
static unsigned *sleep_plan(unsigned n)
{
	unsigned *ms = calloc(n ? n : 1, sizeof(*ms)), d = (unsigned)opt.deadline_ms;

	if (!ms)
		setup_fail("calloc");
	for (unsigned i = 0; i < n; i++) {
		switch (i % 5) {
		case 0:
			ms[i] = 0;
			break;
		case 1:
			ms[i] = 60000; /* a 200 here would mean the deadline never fired */
			break;
		default:
			ms[i] = d - 10 + (i * 7) % 21; /* d-10 .. d+10 */
		}
	}
	return ms;
}

/* --- check: the ctest ------------------------------------------------------------- */

static uint64_t stat_of(const char *line, const char *key)
{
	char pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), " %s=", key);
	p = strstr(line, pat);
	if (!p) {
		fail("the server's stats line has no %s", key);
		return UINT64_MAX;
	}
	return strtoull(p + strlen(pat), NULL, 10);
}

static void expect(const char *line, const char *key, uint64_t want, const char *why)
{
	uint64_t got = stat_of(line, key);

	if (got != want)
		fail("server %s=%" PRIu64 ", client saw %" PRIu64 " (%s)", key, got, want, why);
}

/* Read a line from fd with a bound; returns its length (0 at EOF). */
static size_t read_line(int fd, char *buf, size_t cap, int timeout_ms)
{
	size_t len = 0;

	while (len + 1 < cap) {
		struct pollfd p = {fd, POLLIN, 0};
		int k = poll(&p, 1, timeout_ms);
		ssize_t n;

		if (k == 0) {
			fprintf(stderr, "spoke-httpd-load: the server said nothing for %d s\n",
				timeout_ms / 1000);
			exit(2);
		}
		n = read(fd, buf + len, 1);
		if (n <= 0)
			break;
		if (buf[len++] == '\n')
			break;
	}
	buf[len] = '\0';
	return len;
}

static int run_check(void)
{
	char idle_s[32], dl_s[32], th_s[32], line[4096], stats[4096] = "";
	int pfd[2], status;
	unsigned n_idle = opt.conns / 2, n_active = opt.conns - n_idle;
	unsigned *ms = sleep_plan(opt.sleeps);
	uint64_t short_200 = 0;
	struct result r = {0};
	struct cc *cs;
	pid_t pid;

	snprintf(idle_s, sizeof(idle_s), "%" PRIu64, opt.idle_ms);
	snprintf(dl_s, sizeof(dl_s), "%" PRIu64, opt.deadline_ms);
	snprintf(th_s, sizeof(th_s), "%u", opt.threads);
	if (pipe2(pfd, O_CLOEXEC))
		setup_fail("pipe2");
	pid = fork();
	if (pid < 0)
		setup_fail("fork");
	if (pid == 0) {
		char *args[] = {
			(char *)opt.server, "--port",	 "0",	 "--threads",	  th_s, "--timers",
			(char *)opt.timers, "--idle-ms", idle_s, "--deadline-ms", dl_s, NULL};

		if (dup2(pfd[1], 1) < 0)
			_exit(127);
		execv(opt.server, args);
		_exit(127);
	}
	close(pfd[1]);
	if (!read_line(pfd[0], line, sizeof(line), 60000) ||
	    sscanf(line, "listening on 127.0.0.1:%d", &opt.port) != 1) {
		fprintf(stderr, "spoke-httpd-load: the server's first line was '%s'\n", line);
		kill(pid, SIGKILL);
		return 2;
	}
	printf("server %s (timers %s) on port %d: %u idle, %u active, %u /sleep connections, "
	       "idle %" PRIu64 " ms, deadline %" PRIu64 " ms\n",
	       opt.server, opt.timers, opt.port, n_idle, n_active, opt.sleeps, opt.idle_ms,
	       opt.deadline_ms);
	fflush(stdout);

	drive(n_idle, n_active, opt.sleeps, ms, &r, &cs);
	if (r.cap < opt.conns + opt.sleeps)
		fail("only %u of %u connections could be opened", r.cap, opt.conns + opt.sleeps);
	for (unsigned i = 0; i < r.cap; i++) {
		struct cc *c = &cs[i];

		/* A request sent as the idle timeout ran out may go unanswered (on_eof). */
		if (c->sent != c->responses + (c->closed_after_stall ? 1u : 0u))
			fail("a connection (role %d, state %d) sent %u requests and got %u answers",
			     c->role, c->state, c->sent, c->responses);
		if (c->role == R_ACTIVE && c->state != S_DONE && c->responses == 0)
			fail("an active connection never got an answer");
		if (c->role == R_SLEEP && c->sleep_ms == 0 && c->status == 200)
			short_200++;
		if (c->role == R_SLEEP && c->sleep_ms == 60000 && c->status != 504)
			fail("/sleep?ms=60000 answered %u, not 504: the deadline never fired",
			     c->status);
	}
	if (opt.sleeps >= 5 && short_200 == 0)
		fail("no /sleep?ms=0 got its 200: the worker's cancel never won");
	/* Our active connections end now: the server sees them close (or shuts
	 * down first and counts them there). */
	cc_close_all(cs, r.cap);
	if (kill(pid, SIGTERM))
		setup_fail("kill");
	while (read_line(pfd[0], line, sizeof(line), 60000))
		if (!strncmp(line, "stats ", 6))
			snprintf(stats, sizeof(stats), "%s", line);
	if (waitpid(pid, &status, 0) != pid)
		setup_fail("waitpid");
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail("the server exited with status %#x", status);
	if (!stats[0]) {
		fail("the server printed no stats line");
	} else {
		unsigned active = n_active;
		uint64_t peer = stat_of(stats, "close_peer"),
			 shut = stat_of(stats, "close_shutdown");

		expect(stats, "connections", r.cap, "connections opened");
		expect(stats, "requests", r.responses, "responses received");
		expect(stats, "close_idle",
		       r.idle_closed + r.sleep_closed + r.active_closed_after_stall,
		       "closes by the idle timer");
		expect(stats, "close_header", 0, "no slow header");
		expect(stats, "close_write", 0, "no slow reader");
		expect(stats, "close_error", 0, "no socket error");
		expect(stats, "resp_504", r.sleep_504, "504 answers");
		expect(stats, "sleep_200", r.sleep_200, "/sleep 200 answers");
		if (peer + shut != active - r.active_closed_after_stall)
			fail("server closed %" PRIu64 " by peer + %" PRIu64
			     " at shutdown, client closed %u active connections",
			     peer, shut, active - r.active_closed_after_stall);
		/* Every timer ended once: none is left pending at exit. */
		if (stat_of(stats, "timers_started") !=
		    stat_of(stats, "timers_cancelled") + stat_of(stats, "timers_fired"))
			fail("timers started != cancelled + fired at exit: %s", stats);
		expect(stats, "timers_fired",
		       stat_of(stats, "close_idle") + r.sleep_504 +
			       stat_of(stats, "idle_late_served") + stat_of(stats, "close_linger"),
		       "every fired timer closed a connection, answered 504, ended a linger, or "
		       "served a request its late loop had not read yet");
	}
	if (r.n_late) {
		qsort(r.late_ns, r.n_late, sizeof(*r.late_ns), cmp_u64);
		printf("idle closes after request + idle: +%.3f ms median, +%.3f ms max (%u "
		       "connections); /sleep: %" PRIu64 " x 200, %" PRIu64 " x 504\n",
		       (double)r.late_ns[r.n_late / 2] / 1e6, (double)r.late_ns[r.n_late - 1] / 1e6,
		       r.n_late, r.sleep_200, r.sleep_504);
	}
	printf("server: %s", stats);
	free(cs);
	free(r.late_ns);
	free(ms);
	close(pfd[0]);
	if (failures) {
		printf("spoke-httpd-load check: FAIL (%u failed checks)\n", failures);
		return 1;
	}
	printf("spoke-httpd-load check: PASS\n");
	return 0;
}

/* --- idle and sleep: for scripts/server-load.sh ------------------------------------ */

static int run_idle(void)
{
	struct result r = {0};
	struct cc *cs;
	uint64_t t0 = now_ns(), t1, tick = opt.tick_us * 1000, over = 0;

	early_counted = true;
	drive(opt.conns, 0, 0, NULL, &r, &cs);
	t1 = now_ns();
	for (unsigned i = 0; i < r.n_late; i++)
		if (r.late_ns[i] > 2 * tick + 50 * MS)
			over++;
	qsort(r.late_ns, r.n_late, sizeof(*r.late_ns), cmp_u64);
	printf("idle conns=%u closed=%u early=%u late_p50_ms=%.3f late_p99_ms=%.3f "
	       "late_max_ms=%.3f over_2ticks_50ms=%" PRIu64 " seconds=%.3f failures=%u\n",
	       r.cap, r.idle_closed, r.early, r.n_late ? (double)r.late_ns[r.n_late / 2] / 1e6 : 0,
	       r.n_late ? (double)r.late_ns[r.n_late * 99 / 100] / 1e6 : 0,
	       r.n_late ? (double)r.late_ns[r.n_late - 1] / 1e6 : 0, over, (double)(t1 - t0) / 1e9,
	       failures);
	cc_close_all(cs, r.cap);
	free(cs);
	free(r.late_ns);
	return failures ? 1 : 0;
}

static int run_sleep(void)
{
	unsigned *ms = sleep_plan(opt.sleeps);
	struct result r = {0};
	unsigned answered_once = 0;
	struct cc *cs;

	drive(0, 0, opt.sleeps, ms, &r, &cs);
	for (unsigned i = 0; i < r.cap; i++)
		answered_once += cs[i].responses == 1;
	printf("sleep requests=%u answered_once=%u ok200=%" PRIu64 " ok504=%" PRIu64
	       " failures=%u\n",
	       r.cap, answered_once, r.sleep_200, r.sleep_504, failures);
	cc_close_all(cs, r.cap);
	free(cs);
	free(r.late_ns);
	free(ms);
	return failures ? 1 : 0;
}

/* --- hold: memory per idle connection, for scripts/server-load.sh ------------------- */

/* The sum of RssAnon, in bytes, of the processes in pids ("PID PID ..."). */
static uint64_t rss_anon_bytes(const char *pids)
{
	char *list = strdup(pids), *save = NULL;
	uint64_t sum = 0;

	if (!list)
		setup_fail("strdup");
	for (char *p = strtok_r(list, " ", &save); p; p = strtok_r(NULL, " ", &save)) {
		char path[64], line[256];
		uint64_t kib = 0;
		FILE *f;

		snprintf(path, sizeof(path), "/proc/%s/status", p);
		f = fopen(path, "r");
		if (!f)
			setup_fail(path);
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "RssAnon: %" SCNu64, &kib) == 1)
				break;
		fclose(f);
		sum += kib * 1024;
	}
	free(list);
	return sum;
}

/* A new connection whose one request was answered 200; its fd, left open. */
static int hold_one(void)
{
	struct cc c = {.role = R_IDLE};
	struct pollfd p;

	c.fd = connect_one(opt.port);
	p = (struct pollfd){c.fd, POLLOUT, 0};
	if (c.fd < 0 || poll(&p, 1, 30000) != 1)
		setup_fail("connect");
	cc_send_role(&c);
	while (!cc_parse(&c)) {
		ssize_t n;

		p = (struct pollfd){c.fd, POLLIN, 0};
		if (poll(&p, 1, 30000) != 1)
			setup_fail("no answer in 30 s");
		n = read(c.fd, c.buf + c.blen, sizeof(c.buf) - 1 - c.blen);
		if (n <= 0 && errno != EAGAIN)
			setup_fail("the server closed a connection before its answer");
		c.blen += n > 0 ? (size_t)n : 0;
	}
	if (c.status != 200)
		fail("GET / answered %u", c.status);
	return c.fd;
}

static int run_hold(void)
{
	int *fds = calloc(opt.conns ? opt.conns : 1, sizeof(*fds));
	uint64_t before, after;

	if (!fds)
		setup_fail("calloc");
	/* Warm-up: the servers' allocators and caches settle first. */
	for (unsigned i = 0; i < 100; i++)
		close(hold_one());
	before = rss_anon_bytes(opt.pids);
	for (unsigned i = 0; i < opt.conns; i++)
		fds[i] = hold_one();
	after = rss_anon_bytes(opt.pids);
	printf("hold conns=%u rss_before=%" PRIu64 " rss_after=%" PRIu64
	       " bytes_per_conn=%.1f failures=%u\n",
	       opt.conns, before, after,
	       after > before ? (double)(after - before) / opt.conns : 0.0, failures);
	for (unsigned i = 0; i < opt.conns; i++)
		close(fds[i]);
	free(fds);
	return failures ? 1 : 0;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: spoke-httpd-load check --server PATH [--timers B] [--conns N]\n"
		"           [--sleeps N] [--idle-ms MS] [--deadline-ms MS] [--threads N]\n"
		"       spoke-httpd-load idle --port P --conns N --idle-ms MS [--tick-us U]\n"
		"       spoke-httpd-load sleep --port P --deadline-ms MS [--sleeps N]\n"
		"       spoke-httpd-load hold --port P --conns N --pids \"PID...\"\n"
		"       (any: [--timeout-s S], default 120)\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct rlimit rl;

	if (argc < 2)
		usage();
	for (int i = 2; i + 1 < argc; i += 2) {
		const char *a = argv[i], *v = argv[i + 1];

		if (!strcmp(a, "--server"))
			opt.server = v;
		else if (!strcmp(a, "--timers"))
			opt.timers = v;
		else if (!strcmp(a, "--pids"))
			opt.pids = v;
		else if (!strcmp(a, "--port"))
			opt.port = atoi(v);
		else if (!strcmp(a, "--conns"))
			opt.conns = (unsigned)atoi(v);
		else if (!strcmp(a, "--sleeps"))
			opt.sleeps = (unsigned)atoi(v);
		else if (!strcmp(a, "--threads"))
			opt.threads = (unsigned)atoi(v);
		else if (!strcmp(a, "--idle-ms"))
			opt.idle_ms = strtoull(v, NULL, 10);
		else if (!strcmp(a, "--deadline-ms"))
			opt.deadline_ms = strtoull(v, NULL, 10);
		else if (!strcmp(a, "--tick-us"))
			opt.tick_us = strtoull(v, NULL, 10);
		else if (!strcmp(a, "--timeout-s"))
			opt.timeout_s = strtoull(v, NULL, 10);
		else
			usage();
	}
	if (argc % 2)
		usage();
	if (getrlimit(RLIMIT_NOFILE, &rl))
		setup_fail("getrlimit");
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl))
		setup_fail("setrlimit");
	signal(SIGPIPE, SIG_IGN);
	if (opt.deadline_ms < 20 || opt.idle_ms == 0)
		usage();
	if (!strcmp(argv[1], "check") && opt.server)
		return run_check();
	if (!strcmp(argv[1], "idle") && opt.port)
		return run_idle();
	if (!strcmp(argv[1], "sleep") && opt.port)
		return run_sleep();
	if (!strcmp(argv[1], "hold") && opt.port && opt.pids)
		return run_hold();
	usage();
	return 2;
}
