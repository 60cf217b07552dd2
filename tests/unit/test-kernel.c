// SPDX-License-Identifier: MIT
/* Tests for lib/format/kernel.c: the feature table, targets, image needs. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <kiln/kernel.h>

#include "format/erofs_fs.h"
#include "tap.h"

TEST(versions_parse_to_ranks)
{
	unsigned int r = 0;

	CHECK(kiln_kernel_parse("5.4", &r) == 0 && r == 504);
	CHECK(kiln_kernel_parse("5.15", &r) == 0 && r == 515);
	CHECK(kiln_kernel_parse("6.1", &r) == 0 && r == 601);
	CHECK(kiln_kernel_parse("6.12", &r) == 0 && r == 612);
	CHECK(kiln_kernel_parse("6.1.55", &r) == 0 && r == 601);
	CHECK(kiln_kernel_parse("latest", &r) == 0 && r == kiln_kernel_latest());
	CHECK_EQ(kiln_kernel_latest(), 617u);
}

TEST(bad_versions_are_refused)
{
	static const char *const bad[] = { "abc", "", "6", "6.", ".1", "6.x",
					   "6.1.", "6.1x", "6.100", "1234.1",
					   "-6.1", "6.1.2.3", "latest1" };
	unsigned int r = 77;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK_EQ(kiln_kernel_parse(bad[i], &r), -EINVAL);
	CHECK_EQ(kiln_kernel_parse("4.9", &r), -ERANGE);
	CHECK_EQ(kiln_kernel_parse("5.3", &r), -ERANGE);
	CHECK_EQ(r, 77u);
}

TEST(table_is_ordered_and_complete)
{
	unsigned int last = 0;

	for (unsigned int f = 0; f < KILN_KF_COUNT; f++) {
		const struct kiln_kernel_feature *k = kiln_kernel_feature(f);
		unsigned int r;

		CHECK(k && k->name && k->marker && k->version);
		CHECK(k->rank >= last);
		last = k->rank;
		CHECK(kiln_kernel_parse(k->version, &r) == 0 && r == k->rank);
	}
	CHECK(kiln_kernel_feature(KILN_KF_COUNT) == NULL);
}

TEST(targets_allow_what_they_mount)
{
	CHECK(kiln_kernel_allows(504, KILN_KF_EROFS));
	CHECK(!kiln_kernel_allows(512, KILN_KF_BIG_PCLUSTER));
	CHECK(kiln_kernel_allows(513, KILN_KF_BIG_PCLUSTER));
	CHECK(!kiln_kernel_allows(515, KILN_KF_LZMA));
	CHECK(kiln_kernel_allows(516, KILN_KF_LZMA));
	CHECK(!kiln_kernel_allows(600, KILN_KF_FRAGMENTS));
	CHECK(kiln_kernel_allows(601, KILN_KF_FRAGMENTS));
	CHECK(!kiln_kernel_allows(609, KILN_KF_ZSTD));
	CHECK(kiln_kernel_allows(610, KILN_KF_ZSTD));
	CHECK(!kiln_kernel_allows(614, KILN_KF_48BIT));
	CHECK(!kiln_kernel_allows(616, KILN_KF_METABOX));
	/* compat bits older kernels skip: allowed everywhere */
	CHECK(kiln_kernel_allows(504, KILN_KF_SB_CHKSUM));
	CHECK(kiln_kernel_allows(504, KILN_KF_XATTR_FILTER));
	CHECK(!kiln_kernel_allows(700, KILN_KF_COUNT));
}

TEST(only_the_kernels_experimental_features_are_marked)
{
	for (unsigned int f = 0; f < KILN_KF_COUNT; f++) {
		bool exp = f == KILN_KF_48BIT || f == KILN_KF_METABOX ||
			   f == KILN_KF_DEFLATE ||
			   f == KILN_KF_SUBPAGE_COMPRESSED;

		CHECK_EQ(kiln_kernel_feature(f)->experimental != NULL, exp);
	}
}

TEST(image_needs_follow_the_table)
{
	struct kiln_kernel_need k;

	/* checksum and filter alone: 5.4 mounts it */
	kiln_kernel_need(EROFS_FEATURE_COMPAT_SB_CHKSUM |
			 EROFS_FEATURE_COMPAT_XATTR_FILTER, 0, 0, 12, &k);
	CHECK_EQ(k.rank, 504u);
	CHECK(!strcmp(k.version, "5.4"));
	CHECK(k.features & (1u << KILN_KF_XATTR_FILTER));
	kiln_kernel_need(0, EROFS_FEATURE_INCOMPAT_ZERO_PADDING |
			 EROFS_FEATURE_INCOMPAT_ZTAILPACKING, 0, 12, &k);
	CHECK_EQ(k.rank, 517u);
	kiln_kernel_need(0, EROFS_FEATURE_INCOMPAT_COMPR_CFGS,
			 1u << Z_EROFS_COMPRESSION_ZSTD, 12, &k);
	CHECK_EQ(k.rank, 610u);
	CHECK(!strcmp(k.why, "Zstandard"));
	/* algorithms count only with config records */
	kiln_kernel_need(0, 0, 1u << Z_EROFS_COMPRESSION_ZSTD, 12, &k);
	CHECK_EQ(k.rank, 504u);
	kiln_kernel_need(0, 0, 0, 10, &k);
	CHECK_EQ(k.rank, 604u);
	kiln_kernel_need(0, EROFS_FEATURE_INCOMPAT_ZERO_PADDING, 0, 10, &k);
	CHECK_EQ(k.rank, 608u);
	CHECK(k.features & (1u << KILN_KF_SUBPAGE_COMPRESSED));
	kiln_kernel_need(0, EROFS_FEATURE_INCOMPAT_48BIT |
			 EROFS_FEATURE_INCOMPAT_METABOX, 0, 12, &k);
	CHECK_EQ(k.rank, 617u);
	CHECK(k.features & (1u << KILN_KF_48BIT));
}

TEST(tar_index_images_need_6_4)
{
	struct kiln_kernel_need k;

	/* uncompressed, device table, 512-byte blocks: a tar index */
	kiln_kernel_need(0, EROFS_FEATURE_INCOMPAT_CHUNKED_FILE |
			 EROFS_FEATURE_INCOMPAT_DEVICE_TABLE, 0, 9, &k);
	CHECK_EQ(k.rank, 604u);
	CHECK(k.features & (1u << KILN_KF_DEVICES_SUBPAGE));
	CHECK(k.features & (1u << KILN_KF_DEVICES));
	CHECK(!strcmp(k.why, kiln_kernel_feature(KILN_KF_DEVICES_SUBPAGE)->name));
	/* the same table with 4 KiB blocks: 5.16 */
	kiln_kernel_need(0, EROFS_FEATURE_INCOMPAT_CHUNKED_FILE |
			 EROFS_FEATURE_INCOMPAT_DEVICE_TABLE, 0, 12, &k);
	CHECK_EQ(k.rank, 516u);
	CHECK(!(k.features & (1u << KILN_KF_DEVICES_SUBPAGE)));
	/* compressed (0x8 is HEAD2 then): not a device table */
	kiln_kernel_need(0, EROFS_FEATURE_INCOMPAT_ZERO_PADDING |
			 EROFS_FEATURE_INCOMPAT_COMPR_HEAD2, 0, 9, &k);
	CHECK(!(k.features & (1u << KILN_KF_DEVICES_SUBPAGE)));
	CHECK(!kiln_kernel_allows(603, KILN_KF_DEVICES_SUBPAGE));
	CHECK(kiln_kernel_allows(604, KILN_KF_DEVICES_SUBPAGE));
}

TAP_MAIN(TAP_ENTRY(versions_parse_to_ranks),
	 TAP_ENTRY(bad_versions_are_refused),
	 TAP_ENTRY(table_is_ordered_and_complete),
	 TAP_ENTRY(targets_allow_what_they_mount),
	 TAP_ENTRY(only_the_kernels_experimental_features_are_marked),
	 TAP_ENTRY(image_needs_follow_the_table),
	 TAP_ENTRY(tar_index_images_need_6_4))
