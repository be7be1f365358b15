/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * httpd_request.c - the checks spoke-httpd adds to libhttp-parser (see
 * httpd_request.h for what is checked and why).
 *
 * The scanner is one state per byte. Body data never reaches it: on_body
 * scans up to the data's first byte and moves scan_pos past its last, and
 * http_req_feed scans what is left once the parser returns. Its states, in
 * the order a request passes them:
 *
 *   RL_START --CR--> RL_LEAD_CR --LF--> RL_START      empty lines before a request
 *   RL_START --other--> RL --CR--> RL_CR --LF--> FIELD_START
 *   FIELD_START --tchar--> NAME --':'--> VALUE --CR--> VALUE_CR --LF--> FIELD_START
 *   FIELD_START --CR--> END_CR --LF--> BODY (Content-Length or none: data only)
 *                                 or CHUNK_START (chunked), DONE (after trailers)
 *   CHUNK_START --hex--> CHUNK_SIZE [--';' or WS--> CHUNK_EXT] --CR--> CHUNK_CR
 *   CHUNK_CR --LF--> DATA (size > 0: the data, then) --CR--> DATA_CR --LF--> CHUNK_START
 *   CHUNK_CR --LF--> FIELD_START (size 0: the trailer section)
 *
 * Any other byte is BAD. A message is complete for the scanner in BODY or DONE.
 */
#include "httpd_request.h"

#include <string.h>

enum scan_state {
	RL_START,
	RL_LEAD_CR,
	RL,
	RL_CR,
	FIELD_START,
	NAME,
	VALUE,
	VALUE_CR,
	END_CR,
	BODY,
	CHUNK_START,
	CHUNK_SIZE,
	CHUNK_EXT,
	CHUNK_CR,
	DATA,
	DATA_CR,
	DONE,
	BAD,
};

#define CR '\r'
#define LF '\n'

/* RFC 9110 5.6.2: token characters, the only ones a field name may hold. */
static bool is_tchar(unsigned char ch)
{
	return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	       (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

/* Field values and chunk extensions: HTAB, SP, visible ASCII, obs-text. */
static bool is_field_char(unsigned char ch)
{
	return ch == '\t' || (ch >= 0x20 && ch != 0x7f);
}

static bool is_hex(unsigned char ch)
{
	return (ch >= '0' && ch <= '9') || ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'f');
}

/* The state after the empty line that ends the head or the trailers. */
static enum scan_state after_section(const struct http_req *r)
{
	if (r->in_trailers)
		return DONE;
	return r->chunked ? CHUNK_START : BODY;
}

static enum scan_state after_chunk_line(struct http_req *r)
{
	if (r->chunk_nonzero)
		return DATA;
	r->in_trailers = true;
	r->head_bytes = 0;
	return FIELD_START;
}

/* One byte that is not body data: the next state. */
static enum scan_state scan_byte(struct http_req *r, enum scan_state s, unsigned char ch)
{
	switch (s) {
	case RL_START:
		return ch == CR ? RL_LEAD_CR : ch >= 0x21 && ch <= 0x7e ? RL : BAD;
	case RL_LEAD_CR:
		return ch == LF ? RL_START : BAD;
	case RL: /* method SP request-target SP version: visible ASCII and SP only */
		return ch == CR ? RL_CR : ch >= 0x20 && ch <= 0x7e ? RL : BAD;
	case RL_CR:
	case VALUE_CR:
		return ch == LF ? FIELD_START : BAD;
	case FIELD_START: /* SP or HTAB here would be obs-fold */
		return ch == CR ? END_CR : is_tchar(ch) ? NAME : BAD;
	case NAME: /* no whitespace between the name and its colon */
		return ch == ':' ? VALUE : is_tchar(ch) ? NAME : BAD;
	case VALUE:
		return ch == CR ? VALUE_CR : is_field_char(ch) ? VALUE : BAD;
	case END_CR:
		return ch == LF ? after_section(r) : BAD;
	case CHUNK_START:
		r->head_bytes = 0;
		r->chunk_nonzero = ch != '0';
		return is_hex(ch) ? CHUNK_SIZE : BAD;
	case CHUNK_SIZE:
		if (is_hex(ch)) {
			r->chunk_nonzero |= ch != '0';
			return CHUNK_SIZE;
		}
		return ch == CR ? CHUNK_CR : ch == ';' || ch == ' ' || ch == '\t' ? CHUNK_EXT : BAD;
	case CHUNK_EXT:
		return ch == CR ? CHUNK_CR : is_field_char(ch) ? CHUNK_EXT : BAD;
	case CHUNK_CR:
		return ch == LF ? after_chunk_line(r) : BAD;
	case DATA: /* the data ended: exactly CRLF follows */
		return ch == CR ? DATA_CR : BAD;
	case DATA_CR:
		return ch == LF ? CHUNK_START : BAD;
	case BODY:
	case DONE:
	case BAD:
		break;
	}
	return BAD;
}

static bool in_head(const struct http_req *r)
{
	return !r->head_done;
}

/* Scan [r->scan_pos, end); false (and r->reject set) at the first bad byte. */
static bool scan_upto(struct http_req *r, const char *end)
{
	enum scan_state s = (enum scan_state)r->scan;

	for (const char *p = r->scan_pos; p < end; p++) {
		s = scan_byte(r, s, (unsigned char)*p);
		if (s == BAD) {
			r->reject = 400;
			break;
		}
		if (s != BODY && s != DATA && s != DONE && ++r->head_bytes > HTTP_REQ_HEAD_MAX) {
			r->reject = in_head(r) ? 431 : 400;
			s = BAD;
			break;
		}
	}
	r->scan = (uint8_t)s;
	r->scan_pos = end;
	return s != BAD;
}

/* --- fields the checks need: Host (counted), Expect (its value) --------------------- */

static bool name_is(const struct http_req *r, const char *lower)
{
	size_t n = strlen(lower);

	return r->name_len == n && !memcmp(r->name, lower, n);
}

static void append_lower(char *dst, uint8_t *len, size_t cap, const char *src, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (*len >= cap) {
			*len = UINT8_MAX; /* too long to be one of ours */
			return;
		}
		dst[(*len)++] = (char)(src[i] >= 'A' && src[i] <= 'Z' ? src[i] | 0x20 : src[i]);
	}
}

/* The value of the field just read is complete. */
static void end_field(struct http_req *r)
{
	size_t len = r->value_len == UINT8_MAX ? 0 : r->value_len; /* too long: none of ours */
	const char *v = r->value;

	r->in_value = false;
	while (len && (v[len - 1] == ' ' || v[len - 1] == '\t'))
		len--;
	if (name_is(r, "expect")) {
		if (len == 12 && !memcmp(v, "100-continue", 12))
			r->expect_continue = true;
		else
			r->expect_other = true;
	} else if (name_is(r, "transfer-encoding")) {
		r->te_other |= len != 7 || memcmp(v, "chunked", 7);
	}
}

static int on_url(http_parser *p, const char *at, size_t len)
{
	struct http_req *r = p->data;

	if (r->url_len + len >= HTTP_REQ_URL_MAX) {
		r->url_long = true;
		return 0;
	}
	memcpy(r->url + r->url_len, at, len);
	r->url_len += (uint16_t)len;
	return 0;
}

static int on_header_field(http_parser *p, const char *at, size_t len)
{
	struct http_req *r = p->data;

	if (r->in_value) {
		end_field(r);
		r->name_len = 0;
	}
	if (!r->head_done) /* trailer fields are only scanned */
		append_lower(r->name, &r->name_len, sizeof(r->name), at, len);
	return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t len)
{
	struct http_req *r = p->data;

	if (r->head_done)
		return 0;
	if (!r->in_value) {
		r->in_value = true;
		r->value_len = 0;
		if (name_is(r, "host") && r->hosts < UINT8_MAX)
			r->hosts++;
	}
	if (name_is(r, "expect") || name_is(r, "transfer-encoding"))
		append_lower(r->value, &r->value_len, sizeof(r->value), at, len);
	return 0;
}

/* The checks on the head as a whole; 0 if it may be served. */
static uint16_t head_verdict(const struct http_req *r)
{
	const http_parser *p = &r->parser;
	bool http11 = p->http_minor >= 1;

	if (p->http_major != 1)
		return 505;
	if (r->url_long)
		return 414;
	if (r->hosts > 1 || (http11 && r->hosts == 0))
		return 400;
	/* Transfer-Encoding: only with HTTP/1.1, chunked last, no Content-Length;
	 * and chunked is the only coding this server decodes. */
	if (p->uses_transfer_encoding &&
	    (!http11 || !(p->flags & F_CHUNKED) || (p->flags & F_CONTENTLENGTH)))
		return 400;
	if (r->te_other)
		return 501;
	if (r->expect_other)
		return 417;
	return 0;
}

static int on_headers_complete(http_parser *p)
{
	struct http_req *r = p->data;

	if (r->in_value)
		end_field(r);
	r->chunked = (p->flags & F_CHUNKED) != 0;
	r->reject = head_verdict(r);
	if (r->reject)
		return -1;
	r->head_done = true;
	return 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
	struct http_req *r = p->data;

	if (!scan_upto(r, at))
		return -1;
	r->scan_pos = at + len;
	r->body_bytes += len;
	return 0;
}

static int on_message_complete(http_parser *p)
{
	struct http_req *r = p->data;

	r->done = true;
	/* One request at a time: the rest of the buffer waits for the answer. */
	http_parser_pause(p, 1);
	return 0;
}

static const http_parser_settings settings = {
	.on_url = on_url,
	.on_header_field = on_header_field,
	.on_header_value = on_header_value,
	.on_headers_complete = on_headers_complete,
	.on_body = on_body,
	.on_message_complete = on_message_complete,
};

void http_req_init(struct http_req *r)
{
	memset(r, 0, offsetof(struct http_req, url));
	http_parser_init(&r->parser, HTTP_REQUEST);
	r->parser.data = r;
	r->scan = RL_START;
}

size_t http_req_feed(struct http_req *r, const char *buf, size_t len)
{
	size_t used;
	enum http_errno e;

	r->scan_pos = buf;
	used = http_parser_execute(&r->parser, &settings, buf, len);
	if (!r->reject)
		(void)scan_upto(r, buf + used);
	r->scan_pos = NULL;
	e = HTTP_PARSER_ERRNO(&r->parser);
	if (!r->reject && e != HPE_OK && e != HPE_PAUSED)
		r->reject = e == HPE_HEADER_OVERFLOW ? 431 : 400;
	/* The parser and the scanner must agree on where the request ends. */
	if (!r->reject && r->done && r->scan != BODY && r->scan != DONE)
		r->reject = 400;
	if (r->reject)
		r->done = false;
	return used;
}

bool http_req_keep_alive(const struct http_req *r)
{
	return http_should_keep_alive(&r->parser) && !r->parser.upgrade;
}

bool http_req_is_http10(const struct http_req *r)
{
	return r->parser.http_major == 1 && r->parser.http_minor == 0;
}
