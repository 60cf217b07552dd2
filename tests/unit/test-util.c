// SPDX-License-Identifier: MIT
/*
 * Tests for lib/util: checked arithmetic, endian helpers, error strings,
 * log lines.
 */
#include <stdlib.h>
#include <string.h>

#include <kiln/kiln.h>

#include "util/checked.h"
#include "util/endian.h"
#include "util/log.h"
#include "tap.h"

TEST(range_ok_rejects_overflowing_ranges)
{
	CHECK(kiln_range_ok(0, 10, 10));
	CHECK(!kiln_range_ok(1, 10, 10));
	CHECK(!kiln_range_ok(UINT64_MAX, 2, UINT64_MAX));
	CHECK(!kiln_range_ok(11, 0, 10));
	CHECK(kiln_range_ok(10, 0, 10));
}

TEST(add_overflow_detects_wrap)
{
	uint64_t r;

	CHECK(kiln_add_overflow(UINT64_MAX, (uint64_t)1, &r));
	CHECK(!kiln_add_overflow((uint64_t)1, (uint64_t)2, &r));
	CHECK_EQ(r, 3);
}

TEST(le_helpers_roundtrip_unaligned)
{
	unsigned char buf[16] = { 0 };

	kiln_put_le32(buf + 1, 0x11223344u);
	CHECK_EQ(buf[1], 0x44);
	CHECK_EQ(kiln_get_le32(buf + 1), 0x11223344u);
	kiln_put_le64(buf + 3, 0x0102030405060708ull);
	CHECK(kiln_get_le64(buf + 3) == 0x0102030405060708ull);
	kiln_put_le16(buf + 13, 0xBEEF);
	CHECK_EQ(kiln_get_le16(buf + 13), 0xBEEF);
}

TEST(strerror_names_corruption)
{
	CHECK(!strcmp(kiln_strerror(-KILN_ECORRUPT), "corrupt image"));
	CHECK(!strcmp(kiln_strerror(-KILN_ENOTEROFS), "not an EROFS image"));
	CHECK(kiln_strerror(-12345) != NULL);
}

struct last_line {
	char *text;		/* the last message */
	char *error;		/* the last error-level one */
	int calls;
};

static void keep_line(void *ctx, enum kiln_log_level level, const char *msg)
{
	struct last_line *l = ctx;

	free(l->text);
	l->text = strdup(msg);
	if (level == KILN_LOG_ERROR) {
		free(l->error);
		l->error = strdup(msg);
	}
	l->calls++;
}

/* A long path must not push the reason after it out of the message. */
TEST(long_log_lines_arrive_whole)
{
	struct last_line l = { 0 };
	struct kiln_logger lg = { keep_line, &l };
	size_t len = 5000;
	char *name = malloc(len + 1);

	CHECK(name != NULL);
	if (!name)
		return;
	memset(name, 'n', len);
	name[len] = '\0';
	kiln_log(&lg, KILN_LOG_ERROR, "%s: name component longer than 255 "
		 "bytes", name);
	CHECK_EQ(l.calls, 1);
	CHECK(l.text && strlen(l.text) ==
	      len + strlen(": name component longer than 255 bytes"));
	CHECK(l.text && strstr(l.text, ": name component longer than 255 "
			       "bytes"));
	CHECK_EQ(KILN_CORRUPT_LG(&lg, "nid 7: %s: bad", name), -KILN_ECORRUPT);
	/* the error says what is wrong; where it was found is a debug line */
	CHECK(l.error && strlen(l.error) > len &&
	      !strcmp(l.error + strlen(l.error) - 7, "nn: bad"));
	CHECK(l.text && strstr(l.text, "found by long_log_lines_arrive_whole:"));
	CHECK_EQ(l.calls, 3);
	free(l.text);
	free(l.error);
	free(name);
}

TAP_MAIN(TAP_ENTRY(range_ok_rejects_overflowing_ranges),
	 TAP_ENTRY(long_log_lines_arrive_whole),
	 TAP_ENTRY(add_overflow_detects_wrap),
	 TAP_ENTRY(le_helpers_roundtrip_unaligned),
	 TAP_ENTRY(strerror_names_corruption))
