/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test_httpd_fds.c - out of file descriptors, every timer backend (argv[2])
 * keeps serving: with RLIMIT_NOFILE at FD_LIMIT, far more connections than
 * that are opened and each sends a request. Each is answered or dropped
 * (closed at once); the server never exits; once the answered ones close, a
 * new connection is served; SIGTERM ends it with status 0. The timerfd
 * backend needs an fd per timer too, so there the timer's own start fails.
 */
#include "httpd_client.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FD_LIMIT 64
#define CONNS	 (3 * FD_LIMIT)

static void out_of_fds(void **state)
{
	static const char *const args[] = {"--threads", "1", "--idle-ms", "600000", NULL};
	static struct client cs[CONNS];
	unsigned served = 0;
	uint64_t t_end;
	struct server srv;
	struct response r;
	struct client c;

	(void)state;
	server_start(&srv, FD_LIMIT, args);
	for (unsigned i = 0; i < CONNS; i++) {
		client_open(&cs[i], srv.port); /* the kernel completes it: the listen backlog */
		/* an error: the server closed it already (its answer is read below) */
		(void)client_send(&cs[i], "GET / HTTP/1.1\r\nHost: t\r\n\r\n", 27);
	}
	for (unsigned i = 0; i < CONNS; i++) {
		int got = client_response(&cs[i], &r, false);

		if (got == 1 && r.status == 200)
			served++;
		else if (got != 0 && got != -ECONNRESET) /* 0, reset: dropped */
			fail_msg("connection %u: %s (status %d)", i,
				 got == 1 ? "not 200" : strerror(-got), got == 1 ? r.status : 0);
	}
	if (kill(srv.pid, 0))
		fail_msg("the server is gone");
	if (served == 0 || served == CONNS)
		fail_msg("%u of %u connections served: the fd limit was not reached", served,
			 CONNS);
	/* The answered ones close: the server has fds again and serves a new connection. */
	for (unsigned i = 0; i < CONNS; i++)
		client_close(&cs[i]);
	t_end = mono_ms() + WAIT_MS;
	for (;;) {
		int got;

		client_open(&c, srv.port);
		client_send(&c, "GET / HTTP/1.1\r\nHost: t\r\n\r\n", 27);
		got = client_response(&c, &r, false);
		client_close(&c);
		if (got == 1 && r.status == 200)
			break;
		if (mono_ms() > t_end)
			fail_msg("no new connection served after the others closed");
		usleep(10000); /* its closes may not have been read yet */
	}
	server_stop_ok(&srv);
	if (server_stat(&srv, "accept_dropped") == 0)
		fail_msg("the server dropped no connection: %s", srv.stats);
	printf("%u of %u served while out of fds; %" PRIu64 " dropped by the server\n", served,
	       CONNS, server_stat(&srv, "accept_dropped"));
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(out_of_fds),
	};
	struct rlimit rl;

	httpd_args(argc, argv);
	/* our side holds CONNS sockets */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 4 * CONNS) {
		rl.rlim_cur = rl.rlim_max < 4 * CONNS ? rl.rlim_max : 4 * CONNS;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
