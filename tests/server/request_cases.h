/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * request_cases.h - requests spoke-httpd must refuse, and near misses it must
 * serve, shared by test_httpd_request.c (http_req_feed, split at every byte)
 * and test_httpd_smuggling.c (the server, over a socket).
 *
 * The refused ones are what RFC 9112 says a server must reject (sections 2.2,
 * 3, 5.1, 5.2, 6.1, 6.3, 7.1), each a way two readers of the same bytes can
 * disagree on where a request ends. Several carry a second request in what a
 * lenient reader takes for the first one's body or trailer: it must never be
 * answered.
 */
#ifndef SPOKE_TESTS_REQUEST_CASES_H
#define SPOKE_TESTS_REQUEST_CASES_H

#include <stddef.h>

struct request_case {
	const char *name;
	const char *bytes;
	size_t len;
	int status;	  /* what the (first) request gets */
	const char *body; /* good cases: the body of the first response */
};

#define REQ(s)	     s, sizeof(s) - 1
#define SMUGGLED     "GET /smuggled HTTP/1.1\r\nHost: t\r\n\r\n"
#define POST_CHUNKED "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"

static const struct request_case bad_requests[] = {
	{"space before the colon (Content-Length)",
	 REQ("POST / HTTP/1.1\r\nHost: t\r\nContent-Length : 5\r\n\r\nhello"), 400, NULL},
	{"space before the colon (Transfer-Encoding), smuggled request",
	 REQ("POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n" SMUGGLED),
	 400, NULL},
	{"tab before the colon", REQ("GET / HTTP/1.1\r\nHost\t: t\r\n\r\n"), 400, NULL},
	{"two bytes not CRLF after chunk data", REQ(POST_CHUNKED "5\r\nhelloXX0\r\n\r\n" SMUGGLED),
	 400, NULL},
	{"bare LF after chunk data", REQ(POST_CHUNKED "5\r\nhello\n0\r\n\r\n"), 400, NULL},
	{"bare LF after chunk size", REQ(POST_CHUNKED "5\nhello\r\n0\r\n\r\n"), 400, NULL},
	{"CR then not LF after chunk size", REQ(POST_CHUNKED "5\rXhello\r\n0\r\n\r\n"), 400, NULL},
	{"control character in a chunk extension",
	 REQ(POST_CHUNKED "5;a=\x01\r\nhello\r\n0\r\n\r\n"), 400, NULL},
	{"obs-fold continuation line",
	 REQ("GET / HTTP/1.1\r\nHost: t\r\nX-A: 1\r\n  folded\r\n\r\n"), 400, NULL},
	{"whitespace before the first field", REQ("GET / HTTP/1.1\r\n Host: t\r\n\r\n"), 400, NULL},
	{"bare LF line ends", REQ("GET / HTTP/1.1\nHost: t\n\n"), 400, NULL},
	{"bare LF ending one field", REQ("GET / HTTP/1.1\r\nHost: t\nX-A: 1\r\n\r\n"), 400, NULL},
	{"bare CR in a field value", REQ("GET / HTTP/1.1\r\nHost: t\r\nX-A: a\rb\r\n\r\n"), 400,
	 NULL},
	{"CR then not LF ending the head", REQ("GET / HTTP/1.1\r\nHost: t\r\n\rX" SMUGGLED), 400,
	 NULL},
	{"NUL in a field value", REQ("GET / HTTP/1.1\r\nHost: t\r\nX-A: a\0b\r\n\r\n"), 400, NULL},
	{"'@' in a field name", REQ("GET / HTTP/1.1\r\nHost: t\r\nX@A: 1\r\n\r\n"), 400, NULL},
	{"control character in a field name", REQ("GET / HTTP/1.1\r\nHost: t\r\nX\x01: 1\r\n\r\n"),
	 400, NULL},
	{"empty field name", REQ("GET / HTTP/1.1\r\nHost: t\r\n: 1\r\n\r\n"), 400, NULL},
	{"control character in the request line", REQ("GET /\x01 HTTP/1.1\r\nHost: t\r\n\r\n"), 400,
	 NULL},
	{"Content-Length and Transfer-Encoding",
	 REQ("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nTransfer-Encoding: "
	     "chunked\r\n\r\n0\r\n\r\n" SMUGGLED),
	 400, NULL},
	{"two Content-Lengths that differ",
	 REQ("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nContent-Length: "
	     "40\r\n\r\nhello" SMUGGLED),
	 400, NULL},
	{"Content-Length with a sign",
	 REQ("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: +5\r\n\r\nhello"), 400, NULL},
	{"Transfer-Encoding without chunked last",
	 REQ("POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n"),
	 400, NULL},
	{"a transfer coding the server does not implement",
	 REQ("POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip, "
	     "chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n"),
	 501, NULL},
	{"Transfer-Encoding in HTTP/1.0",
	 REQ("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"), 400, NULL},
	{"bad chunk size", REQ(POST_CHUNKED "z\r\nhello\r\n0\r\n\r\n"), 400, NULL},
	{"space before the colon in a trailer field",
	 REQ(POST_CHUNKED "5\r\nhello\r\n0\r\nX-T : 1\r\n\r\n"), 400, NULL},
	{"obs-fold in the trailer section",
	 REQ(POST_CHUNKED "5\r\nhello\r\n0\r\nX-T: 1\r\n 2\r\n\r\n"), 400, NULL},
	{"no Host in HTTP/1.1", REQ("GET / HTTP/1.1\r\n\r\n"), 400, NULL},
	{"two Hosts", REQ("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), 400, NULL},
	{"HTTP/2.0 request line", REQ("GET / HTTP/2.0\r\nHost: t\r\n\r\n"), 505, NULL},
	{"an expectation other than 100-continue",
	 REQ("POST / HTTP/1.1\r\nHost: t\r\nExpect: 200-ok\r\nContent-Length: 5\r\n\r\nhello"), 417,
	 NULL},
};

static const struct request_case good_requests[] = {
	{"chunked with an extension and a trailer",
	 REQ(POST_CHUNKED "5;ext=\"a b\"\r\nhello\r\n6\r\n world\r\n0\r\nX-T: 1\r\n\r\n"), 200,
	 "got 11 bytes\n"},
	{"Content-Length body", REQ("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello"),
	 200, "got 5 bytes\n"},
	{"empty line before the request", REQ("\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n"), 200,
	 "hello from spoke-httpd\n"},
	{"HTAB, obs-text and an empty value",
	 REQ("GET / HTTP/1.1\r\nHost: t\r\nX-A: a\tb\xe9\r\nX-B:\r\nX-C: \t\r\n\r\n"), 200,
	 "hello from spoke-httpd\n"},
	{"HTTP/1.0 without Host", REQ("GET / HTTP/1.0\r\n\r\n"), 200, "hello from spoke-httpd\n"},
	{"Host in other case", REQ("GET / HTTP/1.1\r\nhOST: t\r\n\r\n"), 200,
	 "hello from spoke-httpd\n"},
	{"Transfer-Encoding in other case, with spaces",
	 REQ("POST / HTTP/1.1\r\nHost: t\r\ntransfer-encoding:  Chunked "
	     "\r\n\r\n2\r\nhi\r\n0\r\n\r\n"),
	 200, "got 2 bytes\n"},
};

#define N_CASES(a) (sizeof(a) / sizeof((a)[0]))

#endif
