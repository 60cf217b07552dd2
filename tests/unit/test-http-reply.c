// SPDX-License-Identifier: MIT
/*
 * lib/source/http-reply.c: header lines read within their length,
 * Content-Range taken only when plain, replies checked against the range
 * asked for and the object probed.
 */
#include <stdlib.h>
#include <string.h>

#include "source/http-reply.h"
#include "tap.h"

/* Feed @line (its first @len bytes only) to the header callback. */
static void header(struct kiln_http_reply *x, const char *line, size_t len)
{
	char *b = malloc(len + 8);

	if (!b)
		return;
	/* what follows the line in memory must never be read */
	memset(b, '9', len + 8);
	memcpy(b, line, len);
	CHECK_EQ(kiln_http_on_header(b, 1, len, x), len);
	free(b);
}

/* a line given as a string literal, without its NUL */
#define HEADER(x, lit) header(x, lit, sizeof(lit) - 1)

TEST(a_status_line_is_read_within_its_length)
{
	struct kiln_http_reply x = { 0 };

	kiln_http_reply_reset(&x);
	HEADER(&x, "HTTP/1.1 206");
	CHECK_EQ(x.status, 206);
	HEADER(&x, "HTTP/2 200\r\n");
	CHECK_EQ(x.status, 200);
	HEADER(&x, "HTTP/1.1");
	CHECK_EQ(x.status, 0);
}

TEST(headers_are_kept_trimmed_and_bounded)
{
	struct kiln_http_reply x = { 0 };
	char big[400];

	kiln_http_reply_reset(&x);
	HEADER(&x, "HTTP/1.1 206 Partial Content\r\n");
	HEADER(&x, "ETag:  \"abc\" \r\n");
	CHECK(!strcmp(x.etag, "\"abc\""));
	HEADER(&x, "content-range: bytes 0-9/100\r\n");
	CHECK(!strcmp(x.content_range, "bytes 0-9/100"));
	HEADER(&x, "Retry-After: 3\r\n");
	CHECK_EQ(x.retry_after_ms, 3000);
	HEADER(&x, "Retry-After: 99999\r\n");
	CHECK_EQ(x.retry_after_ms, KILN_HTTP_RETRY_AFTER_MAX_MS);
	memset(big, 'e', sizeof(big));
	memcpy(big, "ETag: ", 6);
	header(&x, big, sizeof(big));
	CHECK_EQ(strlen(x.etag), sizeof(x.etag) - 1);
	/* a new status line (a redirect's target) forgets the last reply */
	HEADER(&x, "HTTP/1.1 206 Partial Content\r\n");
	CHECK(!x.etag[0] && !x.content_range[0]);
	CHECK_EQ(x.retry_after_ms, -1);
}

TEST(content_range_is_plain_digits)
{
	static const char *const bad[] = {
		"bytes 0-9/-1", "bytes -0-9/100", "bytes +0-9/100",
		"bytes  0-9/100", "bytes 0- 9/100", "bytes 0-9/100 ",
		"bytes 0-9/18446744073709551616", "bytes 0-9/*",
		"bytes */100", "bytes=0-9/100", "bytes 9-0/100",
		"bytes 0-100/100", "bytes 0-9/100x", "",
	};
	uint64_t a, b, t;

	CHECK(kiln_http_parse_content_range("bytes 0-9/100", &a, &b, &t));
	CHECK(a == 0 && b == 9 && t == 100);
	CHECK(kiln_http_parse_content_range(
		"bytes 18446744073709551613-18446744073709551614/"
		"18446744073709551615", &a, &b, &t));
	CHECK(t == UINT64_MAX);
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		bool ok = kiln_http_parse_content_range(bad[k], &a, &b, &t);

		if (ok)
			printf("# accepted \"%s\"\n", bad[k]);
		CHECK(!ok);
	}
}

static struct kiln_http_reply reply(long status, const char *cr, size_t got)
{
	struct kiln_http_reply x = { 0 };

	kiln_http_reply_reset(&x);
	x.status = status;
	x.got = got;
	snprintf(x.content_range, sizeof(x.content_range), "%s", cr);
	return x;
}

TEST(the_probe_learns_the_size_and_refuses_the_empty)
{
	struct kiln_http_reply x = reply(206, "bytes 0-4095/1048576", 4096);
	uint64_t size = 0;
	char why[256];

	CHECK_EQ(kiln_http_check_probe(&x, 4096, &size, why, sizeof(why)),
		 KILN_HTTP_DONE);
	CHECK_EQ(size, 1048576);
	/* another mirror of another size */
	x = reply(206, "bytes 0-4095/2048", 2048);
	CHECK_EQ(kiln_http_check_probe(&x, 4096, &size, why, sizeof(why)),
		 KILN_HTTP_URL_FAILED);
	/* a small object whole */
	size = 0;
	x = reply(200, "", 100);
	CHECK_EQ(kiln_http_check_probe(&x, 4096, &size, why, sizeof(why)),
		 KILN_HTTP_DONE);
	CHECK_EQ(size, 100);
	/* an empty one is no image, whichever way it is sent */
	size = 0;
	x = reply(200, "", 0);
	CHECK_EQ(kiln_http_check_probe(&x, 4096, &size, why, sizeof(why)),
		 KILN_HTTP_URL_FAILED);
	CHECK(strstr(why, "empty") != NULL);
	CHECK_EQ(size, 0);
	/* a total of -1 is not 2^64 - 1 bytes */
	x = reply(206, "bytes 0-4095/-1", 4096);
	CHECK_EQ(kiln_http_check_probe(&x, 4096, &size, why, sizeof(why)),
		 KILN_HTTP_URL_FAILED);
}

TEST(a_read_must_be_the_range_of_the_object_probed)
{
	struct kiln_http_reply x = reply(206, "bytes 512-1023/8192", 512);
	char why[256];

	CHECK_EQ(kiln_http_check_reply("\"e\"", "", &x, 512, 512, 8192, why,
				       sizeof(why)), KILN_HTTP_DONE);
	CHECK_EQ(kiln_http_check_reply("\"e\"", "", &x, 0, 512, 8192, why,
				       sizeof(why)), KILN_HTTP_URL_FAILED);
	CHECK_EQ(kiln_http_check_reply("\"e\"", "", &x, 512, 512, 4096, why,
				       sizeof(why)), KILN_HTTP_CHANGED);
	x.got = 100;
	CHECK_EQ(kiln_http_check_reply("\"e\"", "", &x, 512, 512, 8192, why,
				       sizeof(why)), KILN_HTTP_RETRY);
	x.got = 512;
	snprintf(x.etag, sizeof(x.etag), "\"f\"");
	CHECK_EQ(kiln_http_check_reply("\"e\"", "", &x, 512, 512, 8192, why,
				       sizeof(why)), KILN_HTTP_CHANGED);
	/* a weak ETag pins nothing; Last-Modified still does */
	CHECK_EQ(kiln_http_check_reply("W/\"e\"", "", &x, 512, 512, 8192, why,
				       sizeof(why)), KILN_HTTP_DONE);
	snprintf(x.last_modified, sizeof(x.last_modified), "B");
	CHECK_EQ(kiln_http_check_reply("", "A", &x, 512, 512, 8192, why,
				       sizeof(why)), KILN_HTTP_CHANGED);
	/* a 200 for a range */
	x = reply(200, "", 512);
	CHECK_EQ(kiln_http_check_reply("", "", &x, 512, 512, 8192, why,
				       sizeof(why)), KILN_HTTP_URL_FAILED);
}

TEST(statuses_map_to_outcomes)
{
	static const struct {
		long status;
		enum kiln_http_outcome o;
	} cases[] = {
		{ 206, KILN_HTTP_DONE }, { 200, KILN_HTTP_DONE },
		{ 412, KILN_HTTP_CHANGED }, { 416, KILN_HTTP_CHANGED },
		{ 503, KILN_HTTP_RETRY }, { 429, KILN_HTTP_RETRY },
		{ 404, KILN_HTTP_URL_FAILED }, { 0, KILN_HTTP_URL_FAILED },
		{ -206, KILN_HTTP_URL_FAILED },
	};
	char why[64];

	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		struct kiln_http_reply x = reply(cases[k].status, "", 0);

		CHECK_EQ(kiln_http_check_status(&x, why, sizeof(why)),
			 cases[k].o);
	}
}

TAP_MAIN(TAP_ENTRY(a_status_line_is_read_within_its_length),
	 TAP_ENTRY(headers_are_kept_trimmed_and_bounded),
	 TAP_ENTRY(content_range_is_plain_digits),
	 TAP_ENTRY(the_probe_learns_the_size_and_refuses_the_empty),
	 TAP_ENTRY(a_read_must_be_the_range_of_the_object_probed),
	 TAP_ENTRY(statuses_map_to_outcomes))
