/* SPDX-License-Identifier: MIT */
/*
 * One HTTP reply as kiln sees it (http-reply.c): the header and body
 * callbacks libcurl calls, and the checks a reply must pass before a byte
 * of it is kept. No I/O: the fuzz targets drive these with arbitrary bytes.
 */
#ifndef KILN_SOURCE_HTTP_REPLY_H
#define KILN_SOURCE_HTTP_REPLY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KILN_HTTP_RETRY_AFTER_MAX_MS 30000u

/* One request's reply, as the callbacks see it. */
struct kiln_http_reply {
	uint8_t *dst;
	size_t cap;		/* bytes wanted */
	size_t got;
	bool overflow;		/* more body than asked for */
	bool whole_ok;		/* a 200 with the whole object is fine */
	long status;		/* of the latest status line */
	char etag[200];
	char last_modified[64];
	char content_range[128];
	long retry_after_ms;	/* -1: none */
	char err_body[1024];	/* start of an error reply's body */
	size_t err_len;
};

enum kiln_http_outcome {
	KILN_HTTP_DONE,
	KILN_HTTP_RETRY,	/* may work on a later try */
	KILN_HTTP_URL_FAILED,	/* this URL will not serve it */
	KILN_HTTP_CHANGED,	/* not the object opened */
};

/* Forget everything but @dst, @cap and @whole_ok, before a request. */
void kiln_http_reply_reset(struct kiln_http_reply *x);

/*
 * libcurl's CURLOPT_HEADERFUNCTION and CURLOPT_WRITEFUNCTION with @ctx a
 * struct kiln_http_reply: one header line of @size * @n bytes (not
 * NUL-terminated), one piece of the body.
 */
size_t kiln_http_on_header(char *b, size_t size, size_t n, void *ctx);
size_t kiln_http_on_body(char *b, size_t size, size_t n, void *ctx);

/* Retry-After (seconds or an HTTP date) in ms, capped; -1: unreadable. */
long kiln_http_parse_retry_after(const char *v);

/*
 * "bytes A-B/T" into its three numbers: false unless each is plain digits
 * that fit 64 bits and A <= B < T.
 */
bool kiln_http_parse_content_range(const char *s, uint64_t *a, uint64_t *b,
				   uint64_t *t);

/* A strong ETag (not W/"..."). */
bool kiln_http_etag_strong(const char *etag);

/*
 * The outcome of the status of reply @x to a request that itself went
 * through (CURLE_OK); sets *@why unless KILN_HTTP_DONE.
 */
enum kiln_http_outcome kiln_http_check_status(const struct kiln_http_reply *x,
					      char *why, size_t why_cap);

/*
 * Check reply @x to a GET of [@off, @off + @len) of an object of @size
 * bytes first seen with @etag and @last_modified ("" when none): the
 * identity, the status, the Content-Range and the body length.
 */
enum kiln_http_outcome kiln_http_check_reply(const char *etag,
					     const char *last_modified,
					     const struct kiln_http_reply *x,
					     uint64_t off, size_t len,
					     uint64_t size, char *why,
					     size_t why_cap);

/*
 * Check reply @x to the first GET of an object, of bytes 0..@want-1:
 * *@size gets the object's size (a 200 with the whole object, or the
 * total of the Content-Range). *@size on entry is the size to match, or 0.
 * An empty object fails ("the object is empty").
 */
enum kiln_http_outcome kiln_http_check_probe(const struct kiln_http_reply *x,
					     size_t want, uint64_t *size,
					     char *why, size_t why_cap);

#endif
