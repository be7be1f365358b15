/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * httpd_client.h - what the tests/server programs share: spoke-httpd started
 * as a child (its stdout on a pipe), raw HTTP over real sockets on 127.0.0.1,
 * its exit and its "stats" line.
 *
 * Every wait is for a condition (a response, a close, a line); WAIT_MS only
 * bounds a server that is broken, so a stalled machine slows a test down but
 * never changes its verdict. Each program takes the server's path as argv[1]
 * and, where it matters, the timer backend as argv[2]. Failures end the
 * running cmocka test (fail_msg).
 */
#ifndef SPOKE_TESTS_HTTPD_CLIENT_H
#define SPOKE_TESTS_HTTPD_CLIENT_H

#define _GNU_SOURCE
#include <setjmp.h> /* setjmp.h, stdarg.h, stddef.h: what cmocka.h needs first */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <cmocka.h>

#define WAIT_MS 30000 /* only a broken server makes a test wait this long */

extern const char *httpd_path;	 /* argv[1] */
extern const char *httpd_timers; /* argv[2], default "spoke" */

/* Reads argv (exits 2 without a path) and ignores SIGPIPE. */
void httpd_args(int argc, char **argv);
uint64_t mono_ms(void);

struct server {
	pid_t pid;
	int out; /* its stdout */
	int port;
	char stats[4096];   /* its "stats" line, after server_stop */
	char pending[4096]; /* what it printed that was not read as a line yet */
	size_t n_pending;
	bool out_eof;
};

/*
 * Start spoke-httpd --port 0 --timers <httpd_timers> plus args (NULL-ended) and
 * wait for its "listening on" line. nofile > 0: its RLIMIT_NOFILE, soft and
 * hard (the server raises the soft limit to the hard one).
 */
void server_start(struct server *s, rlim_t nofile, const char *const *args);
/* SIGTERM, its stats line into s->stats; returns its wait status. */
int server_stop(struct server *s);
/* server_stop, and it must have exited 0 with a stats line. */
void server_stop_ok(struct server *s);
/* cmocka group setup and teardown: one spoke-httpd --threads 1 for the group;
 * group_port() is its port. */
int server_group_setup(void **state);
int server_group_teardown(void **state);
int group_port(void);
/* A value of its stats line; fails the test if the key is missing. */
uint64_t server_stat(const struct server *s, const char *key);

struct client {
	int fd;
	size_t len; /* bytes received and not yet taken */
	char buf[65536];
};

struct response {
	int status;
	size_t body_len;
	char head[2048]; /* status line and fields, NUL-terminated */
	char body[256];	 /* its first bytes, NUL-terminated */
};

/* Connect (blocking); -errno if the connection could not be made. */
int client_try_open(struct client *c, int port);
void client_open(struct client *c, int port); /* must succeed */
void client_close(struct client *c);
/* Send all of data; 0 or -errno (the server may have closed). */
int client_send(struct client *c, const char *data, size_t len);
void client_send_str(struct client *c, const char *s); /* must succeed */
/* Read more: bytes read, 0 at EOF, -errno (-ETIMEDOUT after timeout_ms). */
ssize_t client_fill(struct client *c, int timeout_ms);
/*
 * The next response (a 100 Continue counts as one). no_body: it answers a HEAD
 * request. Returns 1, 0 at an EOF before its first byte, -errno (-ECONNRESET,
 * -ETIMEDOUT after WAIT_MS, -EPROTO at an EOF inside it).
 */
int client_response(struct client *c, struct response *r, bool no_body);
void expect_response(struct client *c, struct response *r, bool no_body); /* must come */
/* What follows: 0 = an orderly close with nothing more, 1 = more bytes came,
 * -ECONNRESET = a reset, -ETIMEDOUT = still open after timeout_ms. */
int client_next(struct client *c, int timeout_ms);
/* The server must close this connection, in order, with nothing more. */
void expect_orderly_close(struct client *c);
/* Does the response carry this field line (case-insensitive, e.g. "connection: close")? */
bool response_has(const struct response *r, const char *line);
/* A new connection, request sent, its response read. */
void exchange(int port, const char *request, struct response *r, struct client *c);

#endif
