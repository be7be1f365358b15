/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test_httpd_smuggling.c - spoke-httpd over a socket refuses every request of
 * request_cases.h that RFC 9112 says to reject, with its status and an
 * orderly close, and never answers the request some of them smuggle in their
 * body or trailer; the near misses are served, on a connection that stays
 * usable. (test_httpd_request.c feeds the same cases to the checks directly,
 * cut at every byte.)
 */
#include "httpd_client.h"
#include "request_cases.h"

#include <errno.h>
#include <string.h>

/* Each refused: its status, Connection: close, then the close and nothing more. */
static void refused(void **state)
{
	(void)state;
	for (size_t i = 0; i < N_CASES(bad_requests); i++) {
		const struct request_case *rc = &bad_requests[i];
		struct response r;
		struct client c;
		int err;

		client_open(&c, group_port());
		err = client_send(&c, rc->bytes, rc->len);
		if (err && err != -ECONNRESET && err != -EPIPE)
			fail_msg("%s: send: %s", rc->name, strerror(-err));
		expect_response(&c, &r, false);
		if (r.status != rc->status)
			fail_msg("%s: answered %d, want %d", rc->name, r.status, rc->status);
		if (!response_has(&r, "connection: close"))
			fail_msg("%s: no Connection: close in %s", rc->name, r.head);
		if (client_next(&c, WAIT_MS) != 0)
			fail_msg("%s: something after the refusal, or no orderly close: %.60s",
				 rc->name, c.buf);
		client_close(&c);
	}
}

/* Each served with its body, and the connection still serves the next request. */
static void served(void **state)
{
	(void)state;
	for (size_t i = 0; i < N_CASES(good_requests); i++) {
		const struct request_case *rc = &good_requests[i];
		struct response r;
		struct client c;

		client_open(&c, group_port());
		assert_int_equal(client_send(&c, rc->bytes, rc->len), 0);
		expect_response(&c, &r, false);
		if (r.status != rc->status || strcmp(r.body, rc->body))
			fail_msg("%s: answered %d '%s', want %d '%s'", rc->name, r.status, r.body,
				 rc->status, rc->body);
		if (response_has(&r, "connection: close")) {
			expect_orderly_close(&c);
		} else {
			client_send_str(&c, "GET / HTTP/1.1\r\nHost: t\r\n\r\n");
			expect_response(&c, &r, false);
			assert_int_equal(r.status, 200);
		}
		client_close(&c);
	}
}

/* A chunked body ends where its framing says: the request after it is the next one. */
static void pipelined_after_chunked(void **state)
{
	struct response r;
	struct client c;

	(void)state;
	client_open(&c, group_port());
	client_send_str(&c, POST_CHUNKED "5\r\nhello\r\n0\r\n\r\nGET /nothing HTTP/1.1\r\nHost: "
					 "t\r\n\r\n");
	expect_response(&c, &r, false);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "got 5 bytes\n");
	expect_response(&c, &r, false);
	assert_int_equal(r.status, 404);
	client_close(&c);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(refused),
		cmocka_unit_test(served),
		cmocka_unit_test(pipelined_after_chunked),
	};

	httpd_args(argc, argv);
	return cmocka_run_group_tests(tests, server_group_setup, server_group_teardown);
}
