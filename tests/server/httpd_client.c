/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * httpd_client.c - the helpers of httpd_client.h.
 */
#include "httpd_client.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

const char *httpd_path;
const char *httpd_timers = "spoke";

void httpd_args(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s PATH-TO-spoke-httpd [TIMERS]\n", argv[0]);
		exit(2);
	}
	httpd_path = argv[1];
	if (argc > 2)
		httpd_timers = argv[2];
	signal(SIGPIPE, SIG_IGN);
}

uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* --- the server ---------------------------------------------------------------------- */

/*
 * The server's next line, up to cap - 1 bytes, from what it printed (kept in
 * s->pending between calls); its length, 0 at EOF; fails the test after WAIT_MS
 * of silence.
 */
static size_t server_line(struct server *s, char *line, size_t cap)
{
	for (;;) {
		char *nl = memchr(s->pending, '\n', s->n_pending);
		size_t take = nl ? (size_t)(nl - s->pending) + 1 : s->n_pending;
		struct pollfd p = {s->out, POLLIN, 0};
		ssize_t n;

		if (nl || s->n_pending == sizeof(s->pending) || s->out_eof) {
			take = take < cap - 1 ? take : cap - 1;
			memcpy(line, s->pending, take);
			line[take] = '\0';
			memmove(s->pending, s->pending + take, s->n_pending - take);
			s->n_pending -= take;
			return take;
		}
		if (poll(&p, 1, WAIT_MS) != 1)
			fail_msg("the server printed nothing for %d ms", WAIT_MS);
		n = read(s->out, s->pending + s->n_pending, sizeof(s->pending) - s->n_pending);
		if (n <= 0)
			s->out_eof = true;
		else
			s->n_pending += (size_t)n;
	}
}

/*
 * Start spoke-httpd --port 0 --timers <httpd_timers> plus args (NULL-ended) and
 * wait for its "listening on" line. nofile > 0: its RLIMIT_NOFILE, soft and
 * hard (the server raises the soft limit to the hard one).
 */
void server_start(struct server *s, rlim_t nofile, const char *const *args)
{
	const char *argv[32] = {httpd_path, "--port", "0", "--timers", httpd_timers};
	size_t n = 5;
	char line[256];
	int pfd[2];

	for (; *args && n + 1 < 32; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	assert_int_equal(pipe2(pfd, O_CLOEXEC), 0);
	s->pid = fork();
	assert_true(s->pid >= 0);
	if (s->pid == 0) {
		struct rlimit rl = {nofile, nofile};

		if (prctl(PR_SET_PDEATHSIG, SIGKILL) || dup2(pfd[1], 1) < 0 ||
		    (nofile && setrlimit(RLIMIT_NOFILE, &rl)))
			_exit(127);
		execv(httpd_path, (char *const *)argv);
		_exit(127);
	}
	close(pfd[1]);
	s->out = pfd[0];
	s->stats[0] = '\0';
	s->n_pending = 0;
	s->out_eof = false;
	server_line(s, line, sizeof(line));
	if (sscanf(line, "listening on 127.0.0.1:%d", &s->port) != 1)
		fail_msg("the server's first line was '%s'", line);
}

/* SIGTERM, its last line into s->stats; returns its wait status. */
int server_stop(struct server *s)
{
	char line[4096];
	int status;

	assert_int_equal(kill(s->pid, SIGTERM), 0);
	while (server_line(s, line, sizeof(line)))
		if (!strncmp(line, "stats ", 6))
			snprintf(s->stats, sizeof(s->stats), "%s", line);
	assert_int_equal(waitpid(s->pid, &status, 0), s->pid);
	close(s->out);
	return status;
}

/* server_stop, and it must have exited 0 with a stats line. */
void server_stop_ok(struct server *s)
{
	int status = server_stop(s);

	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail_msg("the server ended with wait status %#x", status);
	if (!s->stats[0])
		fail_msg("the server printed no stats line");
}

static struct server group_srv;

int server_group_setup(void **state)
{
	static const char *const args[] = {"--threads", "1", NULL};

	(void)state;
	server_start(&group_srv, 0, args);
	return 0;
}

int server_group_teardown(void **state)
{
	(void)state;
	server_stop_ok(&group_srv);
	return 0;
}

int group_port(void)
{
	return group_srv.port;
}

/* A value of its stats line; fails the test if the key is missing. */
uint64_t server_stat(const struct server *s, const char *key)
{
	char pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), " %s=", key);
	p = strstr(s->stats, pat);
	if (!p)
		fail_msg("no %s in the stats line: %s", key, s->stats);
	return strtoull(p + strlen(pat), NULL, 10);
}

/* --- a client connection ------------------------------------------------------------ */

/* Connect; -errno if the connection could not be made. */
int client_try_open(struct client *c, int port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int one = 1;

	c->len = 0;
	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		return -errno;
	if (setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) ||
	    connect(c->fd, (struct sockaddr *)&sa, sizeof(sa))) {
		int err = -errno;

		close(c->fd);
		c->fd = -1;
		return err;
	}
	return 0;
}

void client_open(struct client *c, int port)
{
	int err = client_try_open(c, port);

	if (err)
		fail_msg("connect to 127.0.0.1:%d: %s", port, strerror(-err));
}

void client_close(struct client *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

/* Send all of data; 0 or -errno (the server may have closed). */
int client_send(struct client *c, const char *data, size_t len)
{
	while (len) {
		ssize_t n = send(c->fd, data, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		data += n;
		len -= (size_t)n;
	}
	return 0;
}

void client_send_str(struct client *c, const char *s)
{
	int err = client_send(c, s, strlen(s));

	if (err)
		fail_msg("send: %s", strerror(-err));
}

/* Read more into c->buf: bytes read, 0 at EOF, -errno (-ETIMEDOUT after timeout_ms). */
ssize_t client_fill(struct client *c, int timeout_ms)
{
	struct pollfd p = {c->fd, POLLIN, 0};
	ssize_t n;

	if (c->len == sizeof(c->buf))
		return -ENOBUFS;
	if (poll(&p, 1, timeout_ms) != 1)
		return -ETIMEDOUT;
	n = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, 0);
	if (n < 0)
		return -errno;
	c->len += (size_t)n;
	return n;
}

static void client_take(struct client *c, size_t n)
{
	memmove(c->buf, c->buf + n, c->len - n);
	c->len -= n;
}

/* The head is complete in c->buf: parse it into r; its length, 0 if incomplete. */
static size_t parse_head(struct client *c, struct response *r)
{
	char *end = memmem(c->buf, c->len, "\r\n\r\n", 4), *cl;
	size_t hlen;

	if (!end)
		return 0;
	hlen = (size_t)(end - c->buf) + 4;
	snprintf(r->head, sizeof(r->head), "%.*s", (int)hlen, c->buf);
	if (sscanf(r->head, "HTTP/1.1 %d ", &r->status) != 1)
		fail_msg("not an HTTP/1.1 response: %.60s", r->head);
	cl = strcasestr(r->head, "\r\nContent-Length:");
	r->body_len = cl ? strtoul(cl + 17, NULL, 10) : 0;
	return hlen;
}

/*
 * The next response (a 100 Continue counts as one). no_body: it answers a HEAD
 * request. Returns 1, 0 at an EOF before its first byte, -errno (-ECONNRESET,
 * -ETIMEDOUT after WAIT_MS, -EPROTO at an EOF inside it).
 */
int client_response(struct client *c, struct response *r, bool no_body)
{
	for (;;) {
		size_t hlen = parse_head(c, r), body;
		ssize_t n;

		if (hlen) {
			body = no_body || r->status / 100 == 1 ? 0 : r->body_len;
			if (c->len >= hlen + body) {
				snprintf(r->body, sizeof(r->body), "%.*s", (int)body,
					 c->buf + hlen);
				client_take(c, hlen + body);
				return 1;
			}
		}
		n = client_fill(c, WAIT_MS);
		if (n == 0)
			return c->len ? -EPROTO : 0;
		if (n < 0)
			return (int)n;
	}
}

/* Like client_response, and it must have come. */
void expect_response(struct client *c, struct response *r, bool no_body)
{
	int got = client_response(c, r, no_body);

	if (got != 1)
		fail_msg("no response: %s", got == 0 ? "EOF" : strerror(-got));
}

/* What follows: 0 = an orderly close with nothing more, 1 = more bytes came,
 * -ECONNRESET = a reset, -ETIMEDOUT = still open after timeout_ms. */
int client_next(struct client *c, int timeout_ms)
{
	ssize_t n;

	if (c->len)
		return 1;
	n = client_fill(c, timeout_ms);
	return n > 0 ? 1 : (int)n;
}

/* The server must close this connection, in order, with nothing more. */
void expect_orderly_close(struct client *c)
{
	int next = client_next(c, WAIT_MS);

	if (next == 1)
		fail_msg("more after the last response: %.80s", c->buf);
	if (next < 0)
		fail_msg("the close was not orderly: %s", strerror(-next));
}

/* Does the response carry this field line (case-insensitive, e.g. "connection: close")? */
bool response_has(const struct response *r, const char *line)
{
	char pat[128];

	snprintf(pat, sizeof(pat), "\r\n%s\r\n", line);
	return strcasestr(r->head, pat) != NULL;
}

/* One request on a new connection, one response. */
void exchange(int port, const char *request, struct response *r, struct client *c)
{
	client_open(c, port);
	client_send_str(c, request);
	expect_response(c, r, false);
}
