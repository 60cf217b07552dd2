// SPDX-License-Identifier: MIT
/*
 * Tests for lib/format/decode.c: superblocks, inode cores, dirents, xattr
 * headers and chunk entries built byte by byte, each field at and past its
 * limit.
 */
#include <string.h>
#include <sys/stat.h>

#include "format/decode.h"
#include "tap.h"
#include "util/endian.h"

static uint8_t sbuf[4096 - 1024];

/* A valid 4 KiB-block superblock (bytes from offset 1024). */
static uint8_t *good_sb(void)
{
	memset(sbuf, 0, sizeof(sbuf));
	kiln_put_le32(sbuf + 0x00, EROFS_SUPER_MAGIC);
	kiln_put_le32(sbuf + 0x08, EROFS_FEATURE_COMPAT_SB_CHKSUM |
		      EROFS_FEATURE_COMPAT_MTIME);
	sbuf[0x0C] = 12;
	kiln_put_le16(sbuf + 0x0E, 36);
	kiln_put_le64(sbuf + 0x10, 7);
	kiln_put_le64(sbuf + 0x18, 1000);
	kiln_put_le32(sbuf + 0x20, 123456789);
	kiln_put_le32(sbuf + 0x24, 5);
	memcpy(sbuf + 0x40, "volume", 6);
	return sbuf;
}

static int dsb(size_t len, struct kiln_sb *sb)
{
	const char *why = NULL;
	int err = kiln_decode_super(sbuf, len, sb, &why);

	if (err && !why)
		printf("#   error without a reason\n");
	return err;
}

TEST(good_superblock_decodes)
{
	struct kiln_sb sb;

	good_sb();
	CHECK_EQ(dsb(128, &sb), 0);
	CHECK_EQ(sb.blksz, 4096);
	CHECK_EQ(sb.sb_size, 128);
	CHECK_EQ(sb.root_nid, 36);
	CHECK_EQ(sb.inos, 7);
	CHECK_EQ(sb.epoch, 1000);
	CHECK_EQ(sb.fixed_nsec, 123456789);
	CHECK_EQ(sb.blocks, 5);
	CHECK(strcmp(sb.volume_name, "volume") == 0);
	CHECK_EQ(sb.compr_algs, 1);
	CHECK(!sb.xattr_filter);
}

TEST(superblock_magic_and_size_are_checked)
{
	struct kiln_sb sb;

	good_sb()[0] ^= 1;
	CHECK_EQ(dsb(128, &sb), -KILN_ENOTEROFS);
	good_sb();
	CHECK_EQ(dsb(127, &sb), -KILN_ENOTEROFS);
}

TEST(blkszbits_limits)
{
	struct kiln_sb sb;

	good_sb()[0x0C] = 8;
	CHECK_EQ(dsb(128, &sb), -KILN_ECORRUPT);
	good_sb()[0x0C] = 9;
	CHECK_EQ(dsb(128, &sb), 0);
	CHECK_EQ(sb.blksz, 512);
	good_sb()[0x0C] = 13;
	CHECK_EQ(dsb(128, &sb), -EOPNOTSUPP);
	good_sb()[0x0C] = 17;
	CHECK_EQ(dsb(128, &sb), -KILN_ECORRUPT);
}

TEST(dirblkbits_must_be_zero)
{
	struct kiln_sb sb;

	good_sb()[0x5A] = 1;
	CHECK_EQ(dsb(128, &sb), -EOPNOTSUPP);
}

TEST(sb_extslots_limit_is_184)
{
	struct kiln_sb sb;

	good_sb()[0x0D] = 184;
	CHECK_EQ(dsb(sizeof(sbuf), &sb), 0);
	CHECK_EQ(sb.sb_size, 128 + 16 * 184);
	good_sb()[0x0D] = 185;
	CHECK_EQ(dsb(sizeof(sbuf), &sb), -KILN_ECORRUPT);
	good_sb()[0x0D] = 2;
	CHECK_EQ(dsb(128 + 31, &sb), -KILN_ECORRUPT);
	CHECK_EQ(dsb(128 + 32, &sb), 0);
}

TEST(unknown_incompat_bits_are_unsupported)
{
	struct kiln_sb sb;

	kiln_put_le32(good_sb() + 0x50, EROFS_ALL_FEATURE_INCOMPAT);
	sbuf[0x0D] = 1;		/* METABOX keeps its nid in slot 1 */
	CHECK_EQ(dsb(144, &sb), 0);
	kiln_put_le32(good_sb() + 0x50, 0x200);
	CHECK_EQ(dsb(128, &sb), -EOPNOTSUPP);
	kiln_put_le32(good_sb() + 0x50, 0x80000000u);
	CHECK_EQ(dsb(128, &sb), -EOPNOTSUPP);
	/* unknown compat bits are ignored */
	kiln_put_le32(good_sb() + 0x08, 0xFFFFFF00u);
	CHECK_EQ(dsb(128, &sb), 0);
}

TEST(metabox_nid_needs_its_slot_and_bit_63_clear)
{
	struct kiln_sb sb;

	kiln_put_le32(good_sb() + 0x50, EROFS_FEATURE_INCOMPAT_METABOX);
	CHECK_EQ(dsb(128, &sb), -KILN_ECORRUPT);
	sbuf[0x0D] = 1;
	kiln_put_le64(sbuf + 0x80, 77);
	CHECK_EQ(dsb(144, &sb), 0);
	CHECK_EQ(sb.metabox_nid, 77);
	kiln_put_le64(sbuf + 0x80, 77 | 1ull << 63);
	CHECK_EQ(dsb(144, &sb), -KILN_ECORRUPT);
	/* the packed inode is never inside the metabox */
	kiln_put_le64(sbuf + 0x80, 77);
	kiln_put_le32(sbuf + 0x50, EROFS_FEATURE_INCOMPAT_METABOX |
				   EROFS_FEATURE_INCOMPAT_FRAGMENTS);
	kiln_put_le64(sbuf + 0x60, 1ull << 63);
	CHECK_EQ(dsb(144, &sb), -KILN_ECORRUPT);
}

TEST(compression_algorithm_bitmap_limits)
{
	struct kiln_sb sb;

	kiln_put_le32(good_sb() + 0x50, EROFS_FEATURE_INCOMPAT_COMPR_CFGS);
	kiln_put_le16(sbuf + 0x54, 0x000F);
	CHECK_EQ(dsb(128, &sb), 0);
	CHECK_EQ(sb.compr_algs, 0x0F);
	kiln_put_le16(sbuf + 0x54, 0x0010);
	CHECK_EQ(dsb(128, &sb), -EOPNOTSUPP);
	/* without COMPR_CFGS the field is the LZ4 distance */
	kiln_put_le32(good_sb() + 0x50, 0);
	kiln_put_le16(sbuf + 0x54, 0xFFFF);
	CHECK_EQ(dsb(128, &sb), 0);
	CHECK_EQ(sb.compr_algs, 1);
	CHECK_EQ(sb.lz4_max_distance, 0xFFFF);
}

TEST(rootnid_8b_only_with_48bit)
{
	struct kiln_sb sb;

	kiln_put_le64(good_sb() + 0x70, 0x123456789ull);
	kiln_put_le16(sbuf + 0x0E, 3);
	CHECK_EQ(dsb(128, &sb), 0);
	CHECK_EQ(sb.root_nid, 3);
	CHECK_EQ(sb.blocks, 5);
	kiln_put_le32(sbuf + 0x50, EROFS_FEATURE_INCOMPAT_48BIT);
	CHECK_EQ(dsb(128, &sb), 0);
	CHECK_EQ(sb.root_nid, 0x123456789ull);
	CHECK_EQ(sb.blocks, (3ull << 32) | 5);
}

TEST(xattr_prefix_count_limit_is_128)
{
	struct kiln_sb sb;

	kiln_put_le32(good_sb() + 0x50, EROFS_FEATURE_INCOMPAT_XATTR_PREFIXES);
	sbuf[0x5B] = 128;
	CHECK_EQ(dsb(128, &sb), 0);
	CHECK_EQ(sb.xattr_prefix_count, 128);
	sbuf[0x5B] = 129;
	CHECK_EQ(dsb(128, &sb), -KILN_ECORRUPT);
	/* without the feature the count is ignored */
	kiln_put_le32(sbuf + 0x50, 0);
	CHECK_EQ(dsb(128, &sb), 0);
	CHECK_EQ(sb.xattr_prefix_count, 0);
}

TEST(xattr_filter_needs_reserved_zero)
{
	struct kiln_sb sb;

	kiln_put_le32(good_sb() + 0x08, EROFS_FEATURE_COMPAT_XATTR_FILTER);
	CHECK_EQ(dsb(128, &sb), 0);
	CHECK(sb.xattr_filter);
	sbuf[0x68] = 1;
	CHECK_EQ(dsb(128, &sb), 0);
	CHECK(!sb.xattr_filter);
}

/* --- inodes --------------------------------------------------------- */

static struct kiln_sb isb;
static uint8_t ibuf[64];

static uint8_t *compact(uint16_t fmt, uint16_t mode)
{
	memset(ibuf, 0, sizeof(ibuf));
	memset(&isb, 0, sizeof(isb));
	isb.blkszbits = 12;
	isb.blksz = 4096;
	isb.epoch = 1000;
	isb.fixed_nsec = 42;
	kiln_put_le16(ibuf + 0, fmt);
	kiln_put_le16(ibuf + 4, mode);
	kiln_put_le16(ibuf + 6, 3);		/* nlink */
	kiln_put_le32(ibuf + 8, 5000);		/* size */
	kiln_put_le32(ibuf + 12, 77);		/* mtime offset */
	kiln_put_le32(ibuf + 16, 9);		/* startblk */
	kiln_put_le16(ibuf + 24, 11);
	kiln_put_le16(ibuf + 26, 12);
	return ibuf;
}

static uint8_t *extended(uint16_t fmt, uint16_t mode)
{
	compact(fmt | 1, mode);
	memset(ibuf + 6, 0, sizeof(ibuf) - 6);
	kiln_put_le64(ibuf + 8, 5000);
	kiln_put_le32(ibuf + 16, 9);
	kiln_put_le32(ibuf + 24, 100000);
	kiln_put_le32(ibuf + 28, 200000);
	kiln_put_le64(ibuf + 32, (uint64_t)-5);
	kiln_put_le32(ibuf + 40, 999);
	kiln_put_le32(ibuf + 44, 70000);
	return ibuf;
}

static int din(size_t len, struct kiln_inode *in)
{
	const char *why = NULL;
	int err;

	in->nid = 77;
	in->inode_off = 4096;
	err = kiln_decode_inode(&isb, ibuf, len, in, &why);
	if (err && !why)
		printf("#   error without a reason\n");
	return err;
}

#define FMT(layout) ((uint16_t)((layout) << EROFS_I_DATALAYOUT_SHIFT))

TEST(compact_inode_decodes)
{
	struct kiln_inode in;

	compact(FMT(EROFS_INODE_FLAT_PLAIN), S_IFREG | 0644);
	kiln_put_le16(ibuf + 2, 3);		/* xattr icount */
	CHECK_EQ(din(32, &in), 0);
	CHECK_EQ(in.nid, 77);
	CHECK_EQ(in.inode_off, 4096);
	CHECK_EQ(in.core_size, 32);
	CHECK_EQ(in.xattr_size, 12 + 4 * 2);
	CHECK_EQ(in.mode, S_IFREG | 0644);
	CHECK_EQ(in.nlink, 3);
	CHECK_EQ(in.size, 5000);
	CHECK_EQ(in.mtime, 1077);
	CHECK_EQ(in.mtime_nsec, 42);
	CHECK_EQ(in.startblk, 9);
	CHECK_EQ(in.uid, 11);
	CHECK_EQ(in.gid, 12);
	CHECK(!in.extended && !in.null_startblk);
	CHECK_EQ(kiln_inode_meta_end(&in), 4096 + 32 + 20);
}

TEST(extended_inode_decodes)
{
	struct kiln_inode in;

	extended(FMT(EROFS_INODE_FLAT_INLINE), S_IFREG | 0600);
	kiln_put_le16(ibuf + 6, 0x1234);	/* startblk_hi */
	CHECK_EQ(din(64, &in), 0);
	CHECK_EQ(in.core_size, 64);
	CHECK(in.extended);
	CHECK_EQ(in.size, 5000);
	CHECK_EQ(in.uid, 100000);
	CHECK_EQ(in.gid, 200000);
	CHECK_EQ(in.mtime, -5);
	CHECK_EQ(in.mtime_nsec, 999);
	CHECK_EQ(in.nlink, 70000);
	CHECK_EQ(in.startblk, (0x1234ull << 32) | 9);
	CHECK_EQ(din(63, &in), -KILN_ECORRUPT);
	CHECK_EQ(din(31, &in), -KILN_ECORRUPT);
}

TEST(i_format_bits_and_layouts)
{
	struct kiln_inode in;

	compact(FMT(EROFS_INODE_CHUNK_BASED), S_IFREG | 0644);
	CHECK_EQ(din(32, &in), 0);
	compact(FMT(5), S_IFREG | 0644);
	CHECK_EQ(din(32, &in), -EOPNOTSUPP);
	compact(FMT(7), S_IFREG | 0644);
	CHECK_EQ(din(32, &in), -EOPNOTSUPP);
	compact(0x20, S_IFREG | 0644);
	CHECK_EQ(din(32, &in), -EOPNOTSUPP);
	compact(0x8000, S_IFREG | 0644);
	CHECK_EQ(din(32, &in), -EOPNOTSUPP);
}

TEST(bogus_file_types_are_corrupt)
{
	static const uint16_t good[] = { S_IFREG, S_IFDIR, S_IFLNK, S_IFCHR,
					 S_IFBLK, S_IFIFO, S_IFSOCK };
	struct kiln_inode in;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		compact(0, good[i] | 0644);
		CHECK_EQ(din(32, &in), 0);
	}
	compact(0, 0644);
	CHECK_EQ(din(32, &in), -KILN_ECORRUPT);
	compact(0, 0170644);
	CHECK_EQ(din(32, &in), -KILN_ECORRUPT);
	compact(0, 0030644);
	CHECK_EQ(din(32, &in), -KILN_ECORRUPT);
}

TEST(extended_size_limit_is_2_63)
{
	struct kiln_inode in;

	extended(0, S_IFREG | 0644);
	kiln_put_le64(ibuf + 8, (1ull << 63) - 1);
	CHECK_EQ(din(64, &in), 0);
	kiln_put_le64(ibuf + 8, 1ull << 63);
	CHECK_EQ(din(64, &in), -KILN_ECORRUPT);
	kiln_put_le64(ibuf + 8, ~0ull);
	CHECK_EQ(din(64, &in), -KILN_ECORRUPT);
}

TEST(nlink_1_compact_carries_high_address_bits)
{
	struct kiln_inode in;

	compact(EROFS_I_NLINK_1_BIT, S_IFREG | 0644);
	kiln_put_le16(ibuf + 6, 2);
	CHECK_EQ(din(32, &in), 0);
	CHECK_EQ(in.nlink, 1);
	CHECK_EQ(in.startblk, (2ull << 32) | 9);
	/* bit 4 on a directory means dot-omitted, nlink stays in i_nb */
	compact(EROFS_I_DOT_OMITTED_BIT, S_IFDIR | 0755);
	CHECK_EQ(din(32, &in), 0);
	CHECK(in.dot_omitted);
	CHECK_EQ(in.nlink, 3);
	CHECK_EQ(in.startblk, 9);
	/* ignored on non-directory extended inodes */
	extended(EROFS_I_NLINK_1_BIT, S_IFREG | 0644);
	CHECK_EQ(din(64, &in), 0);
	CHECK_EQ(in.nlink, 70000);
	CHECK(!in.dot_omitted);
}

TEST(null_startblk_width_follows_the_inode_form)
{
	struct kiln_inode in;

	/* compact, nlink form: 32-bit all ones */
	compact(0, S_IFREG | 0644);
	kiln_put_le32(ibuf + 16, 0xFFFFFFFF);
	CHECK_EQ(din(32, &in), 0);
	CHECK(in.null_startblk);
	/* NLINK_1: 48 bits */
	compact(EROFS_I_NLINK_1_BIT, S_IFREG | 0644);
	kiln_put_le32(ibuf + 16, 0xFFFFFFFF);
	kiln_put_le16(ibuf + 6, 0);
	CHECK_EQ(din(32, &in), 0);
	CHECK(!in.null_startblk);
	kiln_put_le16(ibuf + 6, 0xFFFF);
	CHECK_EQ(din(32, &in), 0);
	CHECK(in.null_startblk);
	/* extended: 48 bits */
	extended(0, S_IFREG | 0644);
	kiln_put_le32(ibuf + 16, 0xFFFFFFFF);
	CHECK_EQ(din(64, &in), 0);
	CHECK(!in.null_startblk);
	kiln_put_le16(ibuf + 6, 0xFFFF);
	CHECK_EQ(din(64, &in), 0);
	CHECK(in.null_startblk);
	/* only FLAT_PLAIN has null start blocks */
	compact(FMT(EROFS_INODE_FLAT_INLINE), S_IFREG | 0644);
	kiln_put_le32(ibuf + 16, 0xFFFFFFFF);
	CHECK_EQ(din(32, &in), 0);
	CHECK(!in.null_startblk);
}

TEST(chunk_format_bits)
{
	struct kiln_inode in;

	compact(FMT(EROFS_INODE_CHUNK_BASED), S_IFREG | 0644);
	kiln_put_le32(ibuf + 16, EROFS_CHUNK_FORMAT_ALL);
	CHECK_EQ(din(32, &in), 0);
	CHECK_EQ(in.chunk_format, EROFS_CHUNK_FORMAT_ALL);
	kiln_put_le32(ibuf + 16, 0x80);
	CHECK_EQ(din(32, &in), -EOPNOTSUPP);
	/* the reserved half of i_u is not checked */
	kiln_put_le32(ibuf + 16, 0xFFFF0000u | EROFS_CHUNK_FORMAT_INDEXES);
	CHECK_EQ(din(32, &in), 0);
}

TEST(device_inode_keeps_raw_rdev)
{
	struct kiln_inode in;

	compact(0, S_IFCHR | 0600);
	kiln_put_le32(ibuf + 16, 0x12345);
	CHECK_EQ(din(32, &in), 0);
	CHECK_EQ(in.rdev, 0x12345);
	CHECK_EQ(in.startblk, 0);
}

TEST(compressed_inode_block_count)
{
	struct kiln_inode in;

	extended(FMT(EROFS_INODE_COMPRESSED_COMPACT), S_IFREG | 0644);
	kiln_put_le16(ibuf + 6, 1);
	CHECK_EQ(din(64, &in), 0);
	CHECK_EQ(in.blocks, (1ull << 32) | 9);
}

/* --- dirents, xattrs, chunks ------------------------------------------ */

TEST(dirent_count_rules)
{
	uint8_t blk[64] = { 0 };
	struct kiln_dirent_disk de;
	const char *why;

	kiln_put_le64(blk, 0x1122334455ull);
	kiln_put_le16(blk + 8, 24);
	blk[10] = EROFS_FT_DIR;
	CHECK_EQ(kiln_decode_dirent_count(blk, 64, &why), 2);
	kiln_decode_dirent(blk, &de);
	CHECK_EQ(de.nid, 0x1122334455ull);
	CHECK_EQ(de.nameoff, 24);
	CHECK_EQ(de.file_type, EROFS_FT_DIR);
	CHECK_EQ(kiln_decode_dirent_count(blk, 24, &why), -KILN_ECORRUPT);
	CHECK_EQ(kiln_decode_dirent_count(blk, 25, &why), 2);
	CHECK_EQ(kiln_decode_dirent_count(blk, 11, &why), -KILN_ECORRUPT);
	kiln_put_le16(blk + 8, 0);
	CHECK_EQ(kiln_decode_dirent_count(blk, 64, &why), -KILN_ECORRUPT);
	kiln_put_le16(blk + 8, 13);
	CHECK_EQ(kiln_decode_dirent_count(blk, 64, &why), -KILN_ECORRUPT);
}

TEST(xattr_header_rules)
{
	uint8_t area[32] = { 0 };
	struct kiln_xattr_ibody h;
	struct kiln_xattr_entry e;
	const char *why;

	CHECK_EQ(kiln_xattr_ibody_size(0), 0);
	CHECK_EQ(kiln_xattr_ibody_size(1), 12);
	CHECK_EQ(kiln_xattr_ibody_size(2), 16);
	CHECK_EQ(kiln_xattr_ibody_size(65535), 12 + 4 * 65534);
	kiln_put_le32(area, 0xB7FBDFFF);
	area[4] = 2;
	CHECK_EQ(kiln_decode_xattr_ibody(area, 12, &h, &why), -EOPNOTSUPP);
	CHECK_EQ(kiln_decode_xattr_ibody(area, 16, &h, &why), -KILN_ECORRUPT);
	CHECK_EQ(kiln_decode_xattr_ibody(area, 20, &h, &why), 0);
	CHECK_EQ(h.shared_count, 2);
	CHECK_EQ(h.name_filter, 0xB7FBDFFF);
	area[0] = 5;
	area[1] = EROFS_XATTR_INDEX_USER;
	kiln_put_le16(area + 2, 65535);
	kiln_decode_xattr_entry(area, &e);
	CHECK_EQ(e.name_len, 5);
	CHECK_EQ(e.name_index, EROFS_XATTR_INDEX_USER);
	CHECK_EQ(e.value_size, 65535);
	CHECK_EQ(e.footprint, 65544);
}

TEST(chunk_entries_and_holes)
{
	struct kiln_inode in;
	struct kiln_chunk_geo geo;
	struct kiln_chunk c;
	uint8_t e[8];

	compact(FMT(EROFS_INODE_CHUNK_BASED), S_IFREG | 0644);
	kiln_put_le32(ibuf + 16, 2);		/* 16 KiB chunks, 4-byte */
	kiln_put_le32(ibuf + 8, 16385);
	CHECK_EQ(din(32, &in), 0);
	kiln_chunk_geo(&isb, &in, &geo);
	CHECK_EQ(geo.chunkbits, 14);
	CHECK_EQ(geo.unit, 4);
	CHECK_EQ(geo.count, 2);
	CHECK_EQ(geo.table_off, 4096 + 32);
	kiln_put_le32(e, EROFS_NULL_ADDR32);
	kiln_decode_chunk(&isb, &in, &geo, e, &c);
	CHECK(c.hole);
	kiln_put_le32(e, 77);
	kiln_decode_chunk(&isb, &in, &geo, e, &c);
	CHECK(!c.hole);
	CHECK_EQ(c.blk, 77);

	/* 8-byte entries: hi bits only with the 48-bit format bit */
	compact(FMT(EROFS_INODE_CHUNK_BASED), S_IFREG | 0644);
	kiln_put_le16(ibuf + 2, 2);		/* 16-byte xattr area */
	kiln_put_le32(ibuf + 16, EROFS_CHUNK_FORMAT_INDEXES);
	CHECK_EQ(din(32, &in), 0);
	kiln_chunk_geo(&isb, &in, &geo);
	CHECK_EQ(geo.unit, 8);
	CHECK_EQ(geo.table_off, 4096 + 48);
	kiln_put_le16(e, 0x55);
	kiln_put_le16(e + 2, 3);
	kiln_put_le32(e + 4, EROFS_NULL_ADDR32);
	kiln_decode_chunk(&isb, &in, &geo, e, &c);
	CHECK(c.hole);
	CHECK_EQ(c.device, 0);			/* no extra devices: masked */
	isb.extra_devices = 2;
	kiln_put_le32(e + 4, 10);
	kiln_decode_chunk(&isb, &in, &geo, e, &c);
	CHECK(!c.hole);
	CHECK_EQ(c.blk, 10);
	CHECK_EQ(c.device, 3);
	kiln_put_le32(ibuf + 16, EROFS_CHUNK_FORMAT_INDEXES |
		      EROFS_CHUNK_FORMAT_48BIT);
	CHECK_EQ(din(32, &in), 0);
	kiln_decode_chunk(&isb, &in, &geo, e, &c);
	CHECK_EQ(c.blk, (0x55ull << 32) | 10);
	kiln_put_le16(e, 0xFFFF);
	kiln_put_le32(e + 4, EROFS_NULL_ADDR32);
	kiln_decode_chunk(&isb, &in, &geo, e, &c);
	CHECK(c.hole);
}

TAP_MAIN(
	TAP_ENTRY(good_superblock_decodes),
	TAP_ENTRY(superblock_magic_and_size_are_checked),
	TAP_ENTRY(blkszbits_limits),
	TAP_ENTRY(dirblkbits_must_be_zero),
	TAP_ENTRY(sb_extslots_limit_is_184),
	TAP_ENTRY(unknown_incompat_bits_are_unsupported),
	TAP_ENTRY(metabox_nid_needs_its_slot_and_bit_63_clear),
	TAP_ENTRY(compression_algorithm_bitmap_limits),
	TAP_ENTRY(rootnid_8b_only_with_48bit),
	TAP_ENTRY(xattr_prefix_count_limit_is_128),
	TAP_ENTRY(xattr_filter_needs_reserved_zero),
	TAP_ENTRY(compact_inode_decodes),
	TAP_ENTRY(extended_inode_decodes),
	TAP_ENTRY(i_format_bits_and_layouts),
	TAP_ENTRY(bogus_file_types_are_corrupt),
	TAP_ENTRY(extended_size_limit_is_2_63),
	TAP_ENTRY(nlink_1_compact_carries_high_address_bits),
	TAP_ENTRY(null_startblk_width_follows_the_inode_form),
	TAP_ENTRY(chunk_format_bits),
	TAP_ENTRY(device_inode_keeps_raw_rdev),
	TAP_ENTRY(compressed_inode_block_count),
	TAP_ENTRY(dirent_count_rules),
	TAP_ENTRY(xattr_header_rules),
	TAP_ENTRY(chunk_entries_and_holes),
)
