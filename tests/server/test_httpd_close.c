/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test_httpd_close.c - when the server ends a connection after a response
 * (a refused request, Connection: close) while the client is still sending,
 * the close is orderly: the response arrives whole, then a FIN, never a reset
 * (RFC 9112 9.6: close the write side, keep reading until the client closes).
 * A reset here makes the client's kernel throw away the response it has not
 * read yet.
 */
#include "httpd_client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HEAD_BYTES (100 * 1024) /* far over the server's limit on a request head */

/*
 * Send all of it (the server keeps reading while it lingers), then the
 * response (status, or any refusal if status is 0) and a FIN.
 */
static void send_all_then_orderly(const char *what, const char *bytes, size_t len, int status)
{
	struct response r;
	struct client c;
	int err;

	client_open(&c, group_port());
	err = client_send(&c, bytes, len);
	if (err)
		fail_msg("%s: send: %s (the server reset the connection)", what, strerror(-err));
	err = client_response(&c, &r, false);
	if (err != 1)
		fail_msg("%s: no response: %s", what, err ? strerror(-err) : "EOF");
	if (status ? r.status != status : r.status < 400)
		fail_msg("%s: answered %d, want %d", what, r.status, status ? status : 400);
	expect_orderly_close(&c);
	client_close(&c);
}

/* head, then unit repeated to fill_bytes, then tail: a request to send (free it), its length. */
static char *build(const char *head, const char *unit, size_t fill_bytes, const char *tail,
		   size_t *len)
{
	size_t nh = strlen(head), nu = strlen(unit), nt = strlen(tail);
	char *req = malloc(nh + fill_bytes + nu + nt);

	assert_non_null(req);
	memcpy(req, head, nh);
	for (*len = nh; *len < nh + fill_bytes; *len += nu)
		memcpy(req + *len, unit, nu);
	memcpy(req + *len, tail, nt);
	*len += nt;
	return req;
}

static void oversized_head(void **state)
{
	size_t len;
	char *req =
		build("GET / HTTP/1.1\r\nHost: t\r\nX-Big: ", "a", HEAD_BYTES, "\r\n\r\n", &len);

	(void)state;
	send_all_then_orderly("a 100 KiB head", req, len, 0); /* 431 here */
	free(req);
}

/* Refused at its head (a malformed Content-Length) while a large body follows. */
static void refused_with_body(void **state)
{
	size_t len;
	char *req = build("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 262144x\r\n\r\n", "b",
			  262144, "", &len);

	(void)state;
	send_all_then_orderly("a refused upload", req, len, 400);
	free(req);
}

/* Connection: close, and the client pipelines 64 KiB more behind it. */
static void close_with_more_input(void **state)
{
	size_t len;
	char *req = build("GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
			  "GET / HTTP/1.1\r\nHost: t\r\n\r\n", 65536, "", &len);

	(void)state;
	send_all_then_orderly("Connection: close with more pipelined", req, len, 200);
	free(req);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(oversized_head),
		cmocka_unit_test(refused_with_body),
		cmocka_unit_test(close_with_more_input),
	};

	httpd_args(argc, argv);
	return cmocka_run_group_tests(tests, server_group_setup, server_group_teardown);
}
