/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test_httpd_request.c - examples/httpd_request.c on its own: every case of
 * request_cases.h fed to http_req_feed the way spoke-httpd feeds it (what the
 * parser used is dropped, the rest waits for the next read), cut in two at
 * every byte and a byte at a time, so that no check depends on where a read
 * happened to end. A refused case must end refused with its status and never
 * complete; a served case must complete with its body counted.
 */
#include "httpd_request.h"
#include "request_cases.h"

#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* Feed bytes in pieces of the given lengths (summing to len) as the server does. */
static void feed_pieces(struct http_req *r, const char *bytes, const size_t *piece, size_t n)
{
	size_t off = 0;

	http_req_init(r);
	for (size_t i = 0; i < n && !r->reject && !r->done; i++) {
		size_t used = http_req_feed(r, bytes + off, piece[i]);

		if (!r->reject && !r->done && used != piece[i])
			fail_msg("fed %zu bytes, %zu used, neither done nor refused", piece[i],
				 used);
		off += piece[i];
	}
}

/* The feed's verdict: the status it would answer (200 if served), 0 if it waits for more. */
static int verdict(const struct http_req *r)
{
	if (r->reject)
		return r->reject;
	return r->done ? 200 : 0;
}

static void check_case(const struct request_case *rc, const char *how, const struct http_req *r)
{
	int got = verdict(r);

	if (got != rc->status)
		fail_msg("%s (%s): %d, want %d", rc->name, how, got, rc->status);
	if (rc->body && !strncmp(rc->body, "got ", 4) &&
	    r->body_bytes != strtoull(rc->body + 4, NULL, 10))
		fail_msg("%s (%s): %" PRIu64 " body bytes, want %s", rc->name, how, r->body_bytes,
			 rc->body + 4);
}

/* Whole, cut in two at every byte, and a byte at a time. */
static void run_cases(const struct request_case *cases, size_t n)
{
	static size_t ones[4096];
	struct http_req r;

	for (size_t i = 0; i < sizeof(ones) / sizeof(ones[0]); i++)
		ones[i] = 1;
	for (size_t c = 0; c < n; c++) {
		const struct request_case *rc = &cases[c];
		char how[64];

		assert_true(rc->len <= sizeof(ones) / sizeof(ones[0]));
		feed_pieces(&r, rc->bytes, &rc->len, 1);
		check_case(rc, "whole", &r);
		for (size_t cut = 0; cut <= rc->len; cut++) {
			size_t two[2] = {cut, rc->len - cut};

			feed_pieces(&r, rc->bytes, two, 2);
			snprintf(how, sizeof(how), "cut at byte %zu", cut);
			check_case(rc, how, &r);
		}
		feed_pieces(&r, rc->bytes, ones, rc->len);
		check_case(rc, "a byte at a time", &r);
	}
}

static void refused(void **state)
{
	(void)state;
	run_cases(bad_requests, N_CASES(bad_requests));
}

static void served(void **state)
{
	(void)state;
	run_cases(good_requests, N_CASES(good_requests));
}

/* A head over HTTP_REQ_HEAD_MAX is refused with 431 before it ends. */
static void head_too_large(void **state)
{
	static char big[HTTP_REQ_HEAD_MAX + 256];
	struct http_req r;
	size_t len = 0, piece;

	(void)state;
	len += (size_t)sprintf(big, "GET / HTTP/1.1\r\nHost: t\r\nX-Big: ");
	memset(big + len, 'a', sizeof(big) - len);
	piece = sizeof(big);
	feed_pieces(&r, big, &piece, 1);
	assert_int_equal(r.reject, 431);
}

/* A chunk-size line (its extension) that long is refused with 400. */
static void chunk_line_too_large(void **state)
{
	static char big[HTTP_REQ_HEAD_MAX + 256];
	struct http_req r;
	size_t len = 0, piece;

	(void)state;
	len += (size_t)sprintf(big, POST_CHUNKED "5;x=");
	memset(big + len, 'a', sizeof(big) - len);
	piece = sizeof(big);
	feed_pieces(&r, big, &piece, 1);
	assert_int_equal(r.reject, 400);
}

/* What the parser used ends exactly at the request's end: the next one is left. */
static void pipelined(void **state)
{
	static const char two[] =
		"GET /a HTTP/1.1\r\nHost: t\r\n\r\nGET /b HTTP/1.1\r\nHost: t\r\n\r\n";
	struct http_req r;
	size_t used;

	(void)state;
	http_req_init(&r);
	used = http_req_feed(&r, two, sizeof(two) - 1);
	assert_true(r.done);
	assert_int_equal(used, (sizeof(two) - 1) / 2);
	assert_int_equal(r.url_len, 2);
	assert_memory_equal(r.url, "/a", 2);
	http_req_init(&r);
	used = http_req_feed(&r, two + used, sizeof(two) - 1 - used);
	assert_true(r.done);
	assert_memory_equal(r.url, "/b", 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(refused),	  cmocka_unit_test(served),
		cmocka_unit_test(head_too_large), cmocka_unit_test(chunk_line_too_large),
		cmocka_unit_test(pipelined),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
