// SPDX-License-Identifier: MIT
/* Tests for lib/builder/inode.c: compact or extended, and the encodings. */
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "builder/internal.h"
#include "format/erofs_fs.h"
#include "util/endian.h"
#include "tap.h"

#define EPOCH 1700000000

static struct kiln_node plain_file(void)
{
	struct kiln_node n;

	memset(&n, 0, sizeof(n));
	n.mode = S_IFREG | 0644;
	n.uid = 1000;
	n.gid = 1000;
	n.nlink = 1;
	n.size = 4096;
	n.mtime = EPOCH;
	n.mtime_nsec = 0;
	return n;
}

TEST(compact_when_everything_fits_exactly)
{
	struct kiln_node n = plain_file();

	CHECK(kiln_inode_fits_compact(&n, EPOCH, 0));
	n.size = UINT32_MAX;
	n.uid = n.gid = n.nlink = UINT16_MAX;
	CHECK(kiln_inode_fits_compact(&n, EPOCH, 0));
	n.mtime_nsec = 5;
	CHECK(kiln_inode_fits_compact(&n, EPOCH, 5));
}

TEST(extended_when_a_field_does_not_fit)
{
	struct kiln_node n;

	n = plain_file(); n.size = 1ull << 32;
	CHECK(!kiln_inode_fits_compact(&n, EPOCH, 0));
	n = plain_file(); n.uid = 65536;
	CHECK(!kiln_inode_fits_compact(&n, EPOCH, 0));
	n = plain_file(); n.gid = 65536;
	CHECK(!kiln_inode_fits_compact(&n, EPOCH, 0));
	n = plain_file(); n.nlink = 65536;
	CHECK(!kiln_inode_fits_compact(&n, EPOCH, 0));
	n = plain_file(); n.mtime = EPOCH + 1;
	CHECK(!kiln_inode_fits_compact(&n, EPOCH, 0));
	n = plain_file(); n.mtime = EPOCH - 1;
	CHECK(!kiln_inode_fits_compact(&n, EPOCH, 0));
	n = plain_file(); n.mtime_nsec = 1;
	CHECK(!kiln_inode_fits_compact(&n, EPOCH, 0));
}

TEST(relative_mtime_fits_in_the_2_32_seconds_after_the_epoch)
{
	struct kiln_node n = plain_file();
	uint8_t raw[32];

	n.mtime = EPOCH + 12345;
	CHECK(!kiln_inode_fits_compact(&n, EPOCH, 0));
	CHECK(kiln_inode_fits_compact_rel(&n, EPOCH, 0));
	kiln_inode_encode_core(&n, EPOCH, raw);
	CHECK_EQ(kiln_get_le32(raw + 12), 12345);
	n.mtime = EPOCH + (int64_t)UINT32_MAX;
	CHECK(kiln_inode_fits_compact_rel(&n, EPOCH, 0));
	n.mtime = EPOCH + (int64_t)UINT32_MAX + 1;
	CHECK(!kiln_inode_fits_compact_rel(&n, EPOCH, 0));
	n.mtime = EPOCH - 1;
	CHECK(!kiln_inode_fits_compact_rel(&n, EPOCH, 0));
	n.mtime = EPOCH;
	n.mtime_nsec = 1;
	CHECK(!kiln_inode_fits_compact_rel(&n, EPOCH, 0));
	n.mtime_nsec = 0;
	n.uid = 65536;
	CHECK(!kiln_inode_fits_compact_rel(&n, EPOCH, 0));
}

TEST(compact_core_fields_land_at_their_offsets)
{
	struct kiln_node n = plain_file();
	uint8_t raw[32];

	n.datalayout = EROFS_INODE_FLAT_INLINE;
	n.startblk = 77;
	n.xattr_size = 24;
	n.ino = 9;
	CHECK_EQ(kiln_inode_core_size(&n), 32);
	kiln_inode_encode_core(&n, EPOCH, raw);
	CHECK_EQ(kiln_get_le16(raw), EROFS_INODE_FLAT_INLINE << 1);
	CHECK_EQ(kiln_get_le16(raw + 2), (24 - 12) / 4 + 1);
	CHECK_EQ(kiln_get_le16(raw + 4), S_IFREG | 0644);
	CHECK_EQ(kiln_get_le16(raw + 6), 1);		/* nlink */
	CHECK_EQ(kiln_get_le32(raw + 8), 4096);
	CHECK_EQ(kiln_get_le32(raw + 12), 0);		/* mtime - epoch */
	CHECK_EQ(kiln_get_le32(raw + 16), 77);
	CHECK_EQ(kiln_get_le32(raw + 20), 9);
	CHECK_EQ(kiln_get_le16(raw + 24), 1000);
	CHECK_EQ(kiln_get_le16(raw + 26), 1000);
	CHECK_EQ(kiln_get_le32(raw + 28), 0);
}

TEST(extended_core_keeps_64bit_size_and_nanoseconds)
{
	struct kiln_node n = plain_file();
	uint8_t raw[64];

	n.extended = true;
	n.size = 5ull << 30;
	n.uid = 70000;
	n.gid = 80000;
	n.nlink = 3;
	n.mtime = -86400;
	n.mtime_nsec = 123456789;
	n.datalayout = EROFS_INODE_CHUNK_BASED;
	n.chunk_format = 8;
	CHECK_EQ(kiln_inode_core_size(&n), 64);
	kiln_inode_encode_core(&n, EPOCH, raw);
	CHECK_EQ(kiln_get_le16(raw), (EROFS_INODE_CHUNK_BASED << 1) | 1);
	CHECK_EQ(kiln_get_le16(raw + 2), 0);
	CHECK_EQ(kiln_get_le16(raw + 6), 0);		/* i_nb: no high bits */
	CHECK(kiln_get_le64(raw + 8) == 5ull << 30);
	CHECK_EQ(kiln_get_le32(raw + 16), 8);		/* chunk format */
	CHECK_EQ(kiln_get_le32(raw + 24), 70000);
	CHECK_EQ(kiln_get_le32(raw + 28), 80000);
	CHECK_EQ((int64_t)kiln_get_le64(raw + 32), -86400);
	CHECK_EQ(kiln_get_le32(raw + 40), 123456789);
	CHECK_EQ(kiln_get_le32(raw + 44), 3);
	for (int i = 48; i < 64; i++)
		CHECK_EQ(raw[i], 0);
}

TEST(device_numbers_use_the_new_encoding)
{
	struct kiln_node n = plain_file();
	uint8_t raw[32];

	uint32_t rdev = 7;

	CHECK(kiln_inode_encode_rdev(1, 3, &rdev));
	CHECK_EQ(rdev, 0x103);
	CHECK(kiln_inode_encode_rdev(300, 70000, &rdev));
	CHECK_EQ(rdev, (70000 & 0xFF) | (300 << 8) | ((70000 & ~0xFF) << 12));
	CHECK(kiln_inode_encode_rdev(4095, 1048575, &rdev));
	CHECK_EQ(rdev, 0xFFFFFFFFu);
	n.mode = S_IFCHR | 0600;
	n.size = 0;
	CHECK(kiln_inode_encode_rdev(1, 3, &n.rdev));
	n.startblk = 55;	/* ignored for devices */
	kiln_inode_encode_core(&n, EPOCH, raw);
	CHECK_EQ(kiln_get_le32(raw + 16), 0x103);
}

TEST(device_numbers_the_image_cannot_hold_are_refused)
{
	uint32_t rdev = 7;

	CHECK(!kiln_inode_encode_rdev(4096, 0, &rdev));
	CHECK(!kiln_inode_encode_rdev(0, 1048576, &rdev));
	/* what a 32-bit truncation would have turned into 1:3 */
	CHECK(!kiln_inode_encode_rdev((1ull << 32) + 1, 3, &rdev));
	CHECK(!kiln_inode_encode_rdev(1, (1ull << 32) + 3, &rdev));
	CHECK(!kiln_inode_encode_rdev(UINT64_MAX, UINT64_MAX, &rdev));
	CHECK_EQ(rdev, 7);
}

TEST(file_types_map_to_dirent_types)
{
	CHECK_EQ(kiln_inode_ftype(S_IFREG), EROFS_FT_REG_FILE);
	CHECK_EQ(kiln_inode_ftype(S_IFDIR), EROFS_FT_DIR);
	CHECK_EQ(kiln_inode_ftype(S_IFLNK), EROFS_FT_SYMLINK);
	CHECK_EQ(kiln_inode_ftype(S_IFCHR), EROFS_FT_CHRDEV);
	CHECK_EQ(kiln_inode_ftype(S_IFBLK), EROFS_FT_BLKDEV);
	CHECK_EQ(kiln_inode_ftype(S_IFIFO), EROFS_FT_FIFO);
	CHECK_EQ(kiln_inode_ftype(S_IFSOCK), EROFS_FT_SOCK);
}

TAP_MAIN(TAP_ENTRY(compact_when_everything_fits_exactly),
	 TAP_ENTRY(extended_when_a_field_does_not_fit),
	 TAP_ENTRY(relative_mtime_fits_in_the_2_32_seconds_after_the_epoch),
	 TAP_ENTRY(compact_core_fields_land_at_their_offsets),
	 TAP_ENTRY(extended_core_keeps_64bit_size_and_nanoseconds),
	 TAP_ENTRY(device_numbers_use_the_new_encoding),
	 TAP_ENTRY(device_numbers_the_image_cannot_hold_are_refused),
	 TAP_ENTRY(file_types_map_to_dirent_types))
