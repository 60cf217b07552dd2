// SPDX-License-Identifier: MIT
/* Tests for lib/util: checked arithmetic, endian helpers, error strings. */
#include <string.h>

#include <kiln/kiln.h>

#include "util/checked.h"
#include "util/endian.h"
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
	CHECK(kiln_strerror(-12345) != NULL);
}

TAP_MAIN(TAP_ENTRY(range_ok_rejects_overflowing_ranges),
	 TAP_ENTRY(add_overflow_detects_wrap),
	 TAP_ENTRY(le_helpers_roundtrip_unaligned),
	 TAP_ENTRY(strerror_names_corruption))
