/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test_httpd_protocol.c - what an HTTP/1.1 client expects of the server
 * (RFC 9112 3.2, RFC 9110 9.3.2, 10.1.1, 15.5.6): Host exactly once in 1.1,
 * HEAD served as GET without the body, 405 naming the allowed methods,
 * "100 Continue" before the client sends the body it holds back, 417 for any
 * other expectation.
 */
#include "httpd_client.h"

#include <errno.h>
#include <string.h>

static void expect_refused(const char *request, int status)
{
	struct response r;
	struct client c;

	exchange(group_port(), request, &r, &c);
	if (r.status != status)
		fail_msg("answered %d, want %d: %s", r.status, status, request);
	expect_orderly_close(&c);
	client_close(&c);
}

static void host_required(void **state)
{
	struct response r;
	struct client c;

	(void)state;
	expect_refused("GET / HTTP/1.1\r\n\r\n", 400);
	expect_refused("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400);
	expect_refused("GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\nhost: a\r\n\r\n", 400);
	exchange(group_port(), "GET / HTTP/1.0\r\n\r\n", &r, &c); /* 1.0 needs none */
	assert_int_equal(r.status, 200);
	client_close(&c);
}

/* HEAD: the GET's status and Content-Length, no body (the next response follows at once). */
static void head(void **state)
{
	struct response r;
	struct client c;

	(void)state;
	client_open(&c, group_port());
	client_send_str(&c, "HEAD / HTTP/1.1\r\nHost: t\r\n\r\nHEAD /big HTTP/1.1\r\nHost: "
			    "t\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n");
	expect_response(&c, &r, true);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.body_len, strlen("hello from spoke-httpd\n"));
	expect_response(&c, &r, true);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.body_len, 1u << 20);
	expect_response(&c, &r, false);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "hello from spoke-httpd\n");
	client_close(&c);
}

static void method_not_allowed(void **state)
{
	struct response r;
	struct client c;

	(void)state;
	exchange(group_port(), "PUT / HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n", &r, &c);
	assert_int_equal(r.status, 405);
	assert_true(response_has(&r, "allow: GET, HEAD, POST"));
	client_send_str(&c, "DELETE /big HTTP/1.1\r\nHost: t\r\n\r\n");
	expect_response(&c, &r, false);
	assert_int_equal(r.status, 405);
	assert_true(response_has(&r, "allow: GET, HEAD"));
	client_close(&c);
}

/* The body is sent only after "100 Continue" (curl waits a second for it otherwise). */
static void expect_continue(void **state)
{
	struct response r;
	struct client c;

	(void)state;
	exchange(group_port(),
		 "POST / HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n",
		 &r, &c);
	assert_int_equal(r.status, 100);
	client_send_str(&c, "hello");
	expect_response(&c, &r, false);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "got 5 bytes\n");
	/* the same on a chunked upload, on the same connection */
	client_send_str(&c, "POST / HTTP/1.1\r\nHost: t\r\nExpect: 100-Continue\r\n"
			    "Transfer-Encoding: chunked\r\n\r\n");
	expect_response(&c, &r, false);
	assert_int_equal(r.status, 100);
	client_send_str(&c, "3\r\nabc\r\n0\r\n\r\n");
	expect_response(&c, &r, false);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "got 3 bytes\n");
	client_close(&c);
}

static void expect_other(void **state)
{
	(void)state;
	expect_refused("POST / HTTP/1.1\r\nHost: t\r\nExpect: 200-ok\r\nContent-Length: 5\r\n\r\n",
		       417);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(host_required),      cmocka_unit_test(head),
		cmocka_unit_test(method_not_allowed), cmocka_unit_test(expect_continue),
		cmocka_unit_test(expect_other),
	};

	httpd_args(argc, argv);
	return cmocka_run_group_tests(tests, server_group_setup, server_group_teardown);
}
