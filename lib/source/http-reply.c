// SPDX-License-Identifier: MIT
/*
 * One HTTP reply as libcurl hands it over (header lines without a NUL,
 * body pieces) and the checks that decide whether its bytes are the ones
 * asked for: status, identity, Content-Range, length. All of it hostile.
 */
#include <curl/curl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "source/http-reply.h"
#include "util/checked.h"

void kiln_http_reply_reset(struct kiln_http_reply *x)
{
	x->got = 0;
	x->overflow = false;
	x->status = 0;
	x->retry_after_ms = -1;
	x->etag[0] = x->last_modified[0] = x->content_range[0] = '\0';
	x->err_len = 0;
	x->err_body[0] = '\0';
}

/* Copy header value @v (@n bytes) into @dst without surrounding blanks. */
static void header_value(char *dst, size_t cap, const char *v, size_t n)
{
	while (n && (*v == ' ' || *v == '\t')) {
		v++;
		n--;
	}
	while (n && (v[n - 1] == '\r' || v[n - 1] == '\n' ||
		     v[n - 1] == ' ' || v[n - 1] == '\t'))
		n--;
	if (n >= cap)
		n = cap - 1;
	memcpy(dst, v, n);
	dst[n] = '\0';
}

static bool header_is(const char *line, size_t n, const char *name,
		      const char **val, size_t *vlen)
{
	size_t k = strlen(name);

	if (n <= k || strncasecmp(line, name, k) || line[k] != ':')
		return false;
	*val = line + k + 1;
	*vlen = n - k - 1;
	return true;
}

long kiln_http_parse_retry_after(const char *v)
{
	char *end;
	long s = strtol(v, &end, 10);
	time_t t;

	if (end != v && !*end)
		return s < 0 ? 0 : (s > KILN_HTTP_RETRY_AFTER_MAX_MS / 1000 ?
				    (long)KILN_HTTP_RETRY_AFTER_MAX_MS :
				    s * 1000);
	t = curl_getdate(v, NULL);
	if (t < 0)
		return -1;
	t -= time(NULL);
	if (t < 0)
		return 0;
	return t > KILN_HTTP_RETRY_AFTER_MAX_MS / 1000 ?
	       (long)KILN_HTTP_RETRY_AFTER_MAX_MS : (long)t * 1000;
}

/* The code of status line @b (@len bytes, "HTTP/x NNN ..."); 0: none. */
static long status_code(const char *b, size_t len)
{
	const char *sp = memchr(b, ' ', len);
	char tmp[16];

	if (!sp)
		return 0;
	/* the line ends without a NUL: parse a bounded copy */
	header_value(tmp, sizeof(tmp), sp + 1, len - (size_t)(sp + 1 - b));
	return strtol(tmp, NULL, 10);
}

size_t kiln_http_on_header(char *b, size_t size, size_t n, void *ctx)
{
	struct kiln_http_reply *x = ctx;
	size_t len = size * n, vlen;
	const char *v;
	char tmp[64];

	if (len > 5 && !strncmp(b, "HTTP/", 5)) {
		/* a new reply (after a redirect or a 100): forget the last */
		x->status = status_code(b, len);
		x->etag[0] = x->last_modified[0] = x->content_range[0] = '\0';
		x->retry_after_ms = -1;
	} else if (header_is(b, len, "etag", &v, &vlen)) {
		header_value(x->etag, sizeof(x->etag), v, vlen);
	} else if (header_is(b, len, "last-modified", &v, &vlen)) {
		header_value(x->last_modified, sizeof(x->last_modified), v,
			     vlen);
	} else if (header_is(b, len, "content-range", &v, &vlen)) {
		header_value(x->content_range, sizeof(x->content_range), v,
			     vlen);
	} else if (header_is(b, len, "retry-after", &v, &vlen)) {
		header_value(tmp, sizeof(tmp), v, vlen);
		x->retry_after_ms = kiln_http_parse_retry_after(tmp);
	}
	return len;
}

size_t kiln_http_on_body(char *b, size_t size, size_t n, void *ctx)
{
	struct kiln_http_reply *x = ctx;
	size_t len = size * n;

	/* only the body of the reply we act on is kept; an error's start */
	if (x->status != 206 && x->status != 200) {
		size_t room = sizeof(x->err_body) - 1 - x->err_len;

		memcpy(x->err_body + x->err_len, b, KILN_MIN(room, len));
		x->err_len += KILN_MIN(room, len);
		x->err_body[x->err_len] = '\0';
		return len;
	}
	if (x->status == 200 && !x->whole_ok) {
		x->overflow = true;
		return CURL_WRITEFUNC_ERROR;
	}
	if (len > x->cap - x->got) {
		x->overflow = true;
		return CURL_WRITEFUNC_ERROR;
	}
	memcpy(x->dst + x->got, b, len);
	x->got += len;
	return len;
}

/*
 * A decimal number at *@p ending at @stop ('\0': the string's end): digits
 * only (no sign, no blanks), no overflow. Moves *@p past @stop.
 */
static bool parse_u64(const char **p, char stop, uint64_t *v)
{
	const char *s = *p;
	uint64_t x = 0;

	if (*s < '0' || *s > '9')
		return false;
	for (; *s >= '0' && *s <= '9'; s++)
		if (kiln_mul_overflow(x, 10, &x) ||
		    kiln_add_overflow(x, (uint64_t)(*s - '0'), &x))
			return false;
	if (*s != stop)
		return false;
	*p = stop ? s + 1 : s;
	*v = x;
	return true;
}

bool kiln_http_parse_content_range(const char *s, uint64_t *a, uint64_t *b,
				   uint64_t *t)
{
	uint64_t x, y, z;

	if (strncmp(s, "bytes ", 6))
		return false;
	s += 6;
	if (!parse_u64(&s, '-', &x) || !parse_u64(&s, '/', &y) ||
	    !parse_u64(&s, '\0', &z) || y < x || y >= z)
		return false;
	*a = x;
	*b = y;
	*t = z;
	return true;
}

bool kiln_http_etag_strong(const char *etag)
{
	return etag[0] == '"';
}

enum kiln_http_outcome kiln_http_check_status(const struct kiln_http_reply *x,
					      char *why, size_t why_cap)
{
	switch (x->status) {
	case 200:
	case 206:
		return KILN_HTTP_DONE;
	case 412:
		snprintf(why, why_cap, "HTTP 412: precondition failed");
		return KILN_HTTP_CHANGED;
	case 416:
		snprintf(why, why_cap, "HTTP 416: range not satisfiable");
		return KILN_HTTP_CHANGED;
	case 408:
	case 425:
	case 429:
	case 500:
	case 502:
	case 503:
	case 504:
		snprintf(why, why_cap, "HTTP %ld", x->status);
		return KILN_HTTP_RETRY;
	default:
		snprintf(why, why_cap, "HTTP %ld", x->status);
		return KILN_HTTP_URL_FAILED;
	}
}

/* Whether reply @x still shows the object first seen as @etag, @lm. */
static bool same_object(const char *etag, const char *lm,
			const struct kiln_http_reply *x)
{
	if (kiln_http_etag_strong(etag) && x->etag[0] && strcmp(etag, x->etag))
		return false;
	if (lm[0] && x->last_modified[0] && strcmp(lm, x->last_modified))
		return false;
	return true;
}

enum kiln_http_outcome kiln_http_check_reply(const char *etag,
					     const char *last_modified,
					     const struct kiln_http_reply *x,
					     uint64_t off, size_t len,
					     uint64_t size, char *why,
					     size_t why_cap)
{
	uint64_t a, b, t;

	if (!same_object(etag, last_modified, x)) {
		snprintf(why, why_cap, "ETag or Last-Modified changed");
		return KILN_HTTP_CHANGED;
	}
	if (x->status == 200) {
		if (off || len != size || x->got != len) {
			snprintf(why, why_cap, "HTTP 200 with %zu bytes for a range",
				 x->got);
			return KILN_HTTP_URL_FAILED;
		}
		return KILN_HTTP_DONE;
	}
	if (!kiln_http_parse_content_range(x->content_range, &a, &b, &t)) {
		snprintf(why, why_cap, "bad Content-Range \"%s\"",
			 x->content_range);
		return KILN_HTTP_URL_FAILED;
	}
	if (t != size) {
		snprintf(why, why_cap, "object is now %" PRIu64 " bytes, was %"
			 PRIu64, t, size);
		return KILN_HTTP_CHANGED;
	}
	if (a != off || b != off + len - 1) {
		snprintf(why, why_cap, "asked for bytes %" PRIu64 "-%" PRIu64
			 ", got %" PRIu64 "-%" PRIu64, off, off + len - 1, a, b);
		return KILN_HTTP_URL_FAILED;
	}
	if (x->got != len) {
		snprintf(why, why_cap, "body of %zu bytes, %zu expected",
			 x->got, len);
		return KILN_HTTP_RETRY;
	}
	return KILN_HTTP_DONE;
}

enum kiln_http_outcome kiln_http_check_probe(const struct kiln_http_reply *x,
					     size_t want, uint64_t *size,
					     char *why, size_t why_cap)
{
	uint64_t a, b, t;

	if (x->status == 200) {
		t = x->got;	/* the whole object fit in @want */
	} else if (!kiln_http_parse_content_range(x->content_range, &a, &b,
						  &t) ||
		   a != 0 || b + 1 != KILN_MIN(want, t) ||
		   x->got != b + 1) {
		snprintf(why, why_cap, "bad reply to the first range: \"%s\", %zu bytes",
			 x->content_range, x->got);
		return KILN_HTTP_URL_FAILED;
	}
	if (!t) {
		snprintf(why, why_cap, "the object is empty (not an EROFS image)");
		return KILN_HTTP_URL_FAILED;
	}
	if (*size && t != *size) {
		snprintf(why, why_cap, "%" PRIu64 " bytes, the image is %" PRIu64,
			 t, *size);
		return KILN_HTTP_URL_FAILED;
	}
	*size = t;
	return KILN_HTTP_DONE;
}
