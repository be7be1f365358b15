/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test_httpd_http10.c - HTTP/1.0 keep-alive: a 1.0 client that asks for
 * keep-alive is told "Connection: keep-alive" on every response it may reuse
 * the connection for (without it, `ab -k` waits for a close that never comes),
 * and a 1.0 request without it is answered with "Connection: close" and closed.
 */
#include "httpd_client.h"

#include <stdio.h>

/* What ApacheBench -k sends, a hundred times on one connection, each answered as kept. */
static void ab_keepalive(void **state)
{
	char req[256];
	struct response r;
	struct client c;

	(void)state;
	snprintf(req, sizeof(req),
		 "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\nHost: 127.0.0.1:%d\r\n"
		 "User-Agent: ApacheBench/2.3\r\nAccept: */*\r\n\r\n",
		 group_port());
	client_open(&c, group_port());
	for (int i = 0; i < 100; i++) {
		client_send_str(&c, req);
		expect_response(&c, &r, false);
		assert_int_equal(r.status, 200);
		if (!response_has(&r, "connection: keep-alive"))
			fail_msg("response %d to a 1.0 keep-alive request: %s", i, r.head);
	}
	/* The same connection, a 1.0 request without keep-alive: answered, then closed. */
	client_send_str(&c, "GET / HTTP/1.0\r\n\r\n");
	expect_response(&c, &r, false);
	assert_int_equal(r.status, 200);
	assert_true(response_has(&r, "connection: close"));
	expect_orderly_close(&c);
	client_close(&c);
}

/* HTTP/1.1 keeps the connection without saying so; 1.1 with close is closed. */
static void http11_unchanged(void **state)
{
	struct response r;
	struct client c;

	(void)state;
	exchange(group_port(), "GET / HTTP/1.1\r\nHost: t\r\n\r\n", &r, &c);
	assert_int_equal(r.status, 200);
	assert_false(response_has(&r, "connection: keep-alive"));
	assert_false(response_has(&r, "connection: close"));
	client_send_str(&c, "GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
	expect_response(&c, &r, false);
	assert_true(response_has(&r, "connection: close"));
	expect_orderly_close(&c);
	client_close(&c);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(ab_keepalive),
		cmocka_unit_test(http11_unchanged),
	};

	httpd_args(argc, argv);
	return cmocka_run_group_tests(tests, server_group_setup, server_group_teardown);
}
