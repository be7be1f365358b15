/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * httpd_request.h - one HTTP/1.1 request as spoke-httpd reads it: libhttp-parser
 * finds the framing, and the checks it leaves out (it is built lenient) are
 * made here, so that what reaches the handler is a request RFC 9112 allows and
 * a request whose framing an attacker bent is refused before it can be read
 * two ways (request smuggling).
 *
 * Two layers look at every byte the parser consumes:
 *
 *   the parser   request line, fields, Content-Length / chunked framing; it
 *                reports the body's bytes (on_body) and where the message ends;
 *   the scanner  the syntax of every byte that is not body data, one state per
 *                byte: lines end in CRLF (no bare CR or LF), a field name is
 *                token characters followed at once by ':' (no space before the
 *                colon, no obs-fold continuation line), a field value holds no
 *                control character but HTAB, a chunk-size line is hex digits and
 *                an extension, and the two bytes after chunk data are CRLF.
 *
 * The scanner skips exactly the bytes the parser reported as body data, so the
 * two read one framing: if the parser says the message ended where the
 * scanner is not at a message end, the request is refused too. Semantics the
 * parser does not check (RFC 9112 sections 3.2, 6.1, 6.3; RFC 9110 10.1.1)
 * are decided once the head is complete: HTTP/1.1 needs exactly one Host,
 * Transfer-Encoding must end in chunked and not come with Content-Length
 * (400), codings other than chunked are not implemented (501), an Expect
 * other than 100-continue gets 417. A head over HTTP_REQ_HEAD_MAX bytes
 * gets 431, a chunk-size line or a trailer section that long 400.
 *
 * A struct http_req lives only while a request is read (spoke-httpd keeps it
 * in the buffers it frees while a connection waits).
 */
#ifndef SPOKE_HTTPD_REQUEST_H
#define SPOKE_HTTPD_REQUEST_H

#include <http_parser.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HTTP_REQ_URL_MAX  256	/* a longer request-target gets 414 */
#define HTTP_REQ_HEAD_MAX 16384 /* request line and fields; more gets 431 */

struct http_req {
	http_parser parser;
	/* the scanner: its state (enum in httpd_request.c) and the bytes seen
	 * so far of the current head, chunk-size line or trailer section (each
	 * at most HTTP_REQ_HEAD_MAX); scan_pos is the first byte not yet
	 * scanned, valid only inside http_req_feed */
	const char *scan_pos;
	uint32_t head_bytes;
	uint8_t scan;
	bool chunk_nonzero; /* the chunk-size line being scanned is not 0 */
	bool in_trailers;
	bool chunked; /* from the parser, once the head is complete */
	/* the field being read: its name, lower case (a longer one is none of
	 * ours), and for Expect and Transfer-Encoding its value */
	uint8_t name_len, value_len;
	bool in_value;
	char name[20], value[16];
	uint8_t hosts;
	bool expect_continue, expect_other;
	bool te_other; /* a Transfer-Encoding value other than "chunked" */
	/* what the feed found */
	bool head_done; /* the head is complete and passed the checks */
	bool done;	/* the request is complete (the parser stopped at its end) */
	bool url_long;
	uint16_t reject; /* nonzero: the status to answer before closing */
	uint16_t url_len;
	uint64_t body_bytes;
	char url[HTTP_REQ_URL_MAX];
};

/* Ready for the next request on a connection. */
void http_req_init(struct http_req *r);

/*
 * Read up to len bytes of buf; returns how many were used. Afterwards exactly
 * one of: r->reject (refused: answer that status and close), r->done (the
 * request ends at the byte before buf + used), or neither (all used, more
 * needed). r->head_done and r->expect_continue may turn true before done: the
 * caller then sends "100 Continue" once (only for HTTP/1.1, and only while
 * the body has not all arrived).
 */
size_t http_req_feed(struct http_req *r, const char *buf, size_t len);

/* After done: should the connection stay open (HTTP/1.0: only on request)? */
bool http_req_keep_alive(const struct http_req *r);
bool http_req_is_http10(const struct http_req *r);

#endif
