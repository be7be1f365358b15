/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test_httpd_sleep.c - a /sleep request whose answer nobody waits for any
 * more frees its worker, on every timer backend (argv[2]): with two workers,
 * three requests for 600 s of work get their 504 at the deadline, and then a
 * request for no work at all gets its 200 (a worker still sleeping would
 * leave it to its own deadline, 504). The same when the clients close their
 * connections instead, before any deadline.
 */
#include "httpd_client.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#define WORKERS "2"
#define LONG	3 /* requests for 600 s of work: one more than the workers */

/* LONG connections, each asking for 600 s of work. */
static void send_long_sleeps(struct client *cs, int port)
{
	for (int i = 0; i < LONG; i++) {
		client_open(&cs[i], port);
		client_send_str(&cs[i], "GET /sleep?ms=600000 HTTP/1.1\r\nHost: t\r\n\r\n");
	}
}

/*
 * /sleep?ms=0 until one gets 200. One may still get 504 if the machine
 * stalls the freed worker past the deadline: the next try sees it free.
 * A worker that stays busy makes every try a 504 until WAIT_MS.
 */
static void expect_free_worker(const struct server *srv)
{
	uint64_t t_end = mono_ms() + WAIT_MS;
	struct response r;
	struct client c;

	for (;;) {
		exchange(srv->port, "GET /sleep?ms=0 HTTP/1.1\r\nHost: t\r\n\r\n", &r, &c);
		client_close(&c);
		if (r.status == 200)
			return;
		if (r.status != 504)
			fail_msg("/sleep?ms=0 answered %d", r.status);
		if (mono_ms() > t_end)
			fail_msg("/sleep?ms=0 still 504 after %d ms: the workers are still busy",
				 WAIT_MS);
	}
}

/* The deadline fires: 504, and the work is dropped. */
static void deadline_frees_worker(void **state)
{
	static const char *const args[] = {"--threads",	    "1",   "--workers", WORKERS,
					   "--deadline-ms", "300", NULL};
	struct client cs[LONG];
	struct response r;
	struct server srv;

	(void)state;
	server_start(&srv, 0, args);
	send_long_sleeps(cs, srv.port);
	for (int i = 0; i < LONG; i++) {
		expect_response(&cs[i], &r, false);
		assert_int_equal(r.status, 504);
	}
	expect_free_worker(&srv);
	for (int i = 0; i < LONG; i++)
		client_close(&cs[i]);
	server_stop_ok(&srv);
	assert_int_equal(server_stat(&srv, "resp_504") >= LONG, 1);
}

/* The client goes away: nobody is left to answer, the work is dropped. */
static void close_frees_worker(void **state)
{
	static const char *const args[] = {"--threads",	    "1",       "--workers", WORKERS,
					   "--deadline-ms", "3600000", NULL};
	struct client cs[LONG];
	struct server srv;

	(void)state;
	server_start(&srv, 0, args);
	send_long_sleeps(cs, srv.port);
	/* The server reads each request before the close that follows it. */
	for (int i = 0; i < LONG; i++)
		client_close(&cs[i]);
	expect_free_worker(&srv);
	server_stop_ok(&srv);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(deadline_frees_worker),
		cmocka_unit_test(close_frees_worker),
	};

	httpd_args(argc, argv);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
