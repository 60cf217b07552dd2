// SPDX-License-Identifier: MIT
/*
 * Fuzz target: the replies of an HTTP server to a remote image, as
 * lib/source/http.c sees them, without a network: each header line goes
 * through the header callback in a buffer of its exact length (no NUL
 * after it, as libcurl promises nothing more), the body through the body
 * callback in pieces, then the reply is checked as the first probe of the
 * image (its size and identity kept) or as a range read pinned to them.
 *
 * Input: [0] bits 0-1: bytes the probe asks for (1, 64, 4096, 65536),
 * bits 2-4: body piece size (1 << n), bit 5: a range read may take a 200
 * for the whole object; then replies separated by NUL bytes. A reply is
 * header lines (each ends after its '\n'), an empty line, the body; every
 * reply after the first begins with two bytes choosing the range read
 * (offset and length within the probed size).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "source/http-reply.h"
#include "util/checked.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define BODY_MAX	65536

static const size_t wants[4] = { 1, 64, 4096, 65536 };
static uint8_t body[BODY_MAX];

/* Feed reply @p (@n bytes) to the callbacks as libcurl would. */
static void feed(struct kiln_http_reply *x, const uint8_t *p, size_t n,
		 size_t piece)
{
	size_t k = 0;

	/* header lines up to and including the empty one */
	while (k < n) {
		const uint8_t *nl = memchr(p + k, '\n', n - k);
		size_t len = nl ? (size_t)(nl - (p + k)) + 1 : n - k;
		char *line = malloc(len);
		bool blank = len <= 2 && (p[k] == '\n' || p[k] == '\r');

		if (!line)
			return;
		memcpy(line, p + k, len);
		kiln_http_on_header(line, 1, len, x);
		free(line);
		k += len;
		if (blank)
			break;
	}
	while (k < n) {
		size_t len = n - k < piece ? n - k : piece;
		char *b = malloc(len);
		size_t r;

		if (!b)
			return;
		memcpy(b, p + k, len);
		r = kiln_http_on_body(b, 1, len, x);
		free(b);
		if (r != len)
			return;	/* libcurl ends the transfer */
		k += len;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kiln_http_reply x = { 0 };
	char etag[200] = "", lm[64] = "", why[512];
	uint64_t obj = 0;
	size_t want, piece;
	bool probed = false, whole;
	unsigned int flags;

	if (size < 1)
		return 0;
	flags = data[0];
	want = wants[flags & 3];
	piece = (size_t)1 << ((flags >> 2) & 7);
	whole = flags & 32;
	data++;
	size--;
	while (size) {
		const uint8_t *end = memchr(data, 0, size);
		size_t n = end ? (size_t)(end - data) : size;
		const uint8_t *p = data;
		size_t m = n;
		uint64_t off = 0;
		size_t len = want;
		enum kiln_http_outcome o;

		data += n + (end ? 1 : 0);
		size -= n + (end ? 1 : 0);
		if (probed) {
			if (m < 2)
				break;
			off = (uint64_t)p[0] * 512 % obj;
			len = (size_t)KILN_MIN(obj - off,
						    (uint64_t)p[1] * 97 + 1);
			if (len > BODY_MAX)
				len = BODY_MAX;
			p += 2;
			m -= 2;
		}
		x = (struct kiln_http_reply){
			.dst = body, .cap = len,
			.whole_ok = !probed || (whole && !off && len == obj),
		};
		kiln_http_reply_reset(&x);
		feed(&x, p, m, piece);
		if (x.overflow)
			continue;	/* the transfer failed: a retry */
		o = kiln_http_check_status(&x, why, sizeof(why));
		if (o != KILN_HTTP_DONE)
			continue;
		if (!probed) {
			o = kiln_http_check_probe(&x, want, &obj, why,
						  sizeof(why));
			if (o != KILN_HTTP_DONE)
				continue;
			if (!obj)
				return 0;
			memcpy(etag, kiln_http_etag_strong(x.etag) ? x.etag : "",
			       kiln_http_etag_strong(x.etag) ?
			       strlen(x.etag) + 1 : 1);
			memcpy(lm, x.last_modified, strlen(x.last_modified) + 1);
			probed = true;
			continue;
		}
		o = kiln_http_check_reply(etag, lm, &x, off, len, obj, why,
					  sizeof(why));
		if (o == KILN_HTTP_CHANGED)
			return 0;	/* every later read fails */
	}
	return 0;
}
