/* SPDX-License-Identifier: MIT */
/*
 * Raw on-disk bytes -> checked native structs. No I/O, no allocation:
 * each decoder takes (raw, len), checks every field and fills a native
 * struct, or returns a negative errno with a reason in *@why.
 */
#ifndef KILN_FORMAT_DECODE_H
#define KILN_FORMAT_DECODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <kiln/kiln.h>

#include "format/erofs_fs.h"

/* Decoded superblock. */
struct kiln_sb {
	unsigned int blkszbits;
	uint32_t blksz;
	unsigned int sb_size;		/* 128 + 16 * extslots */
	uint32_t feature_compat;
	uint32_t feature_incompat;
	uint32_t checksum;
	kiln_nid_t root_nid;
	uint64_t inos;
	uint64_t blocks;
	int64_t epoch;
	uint32_t fixed_nsec;
	uint32_t build_time;		/* seconds after epoch */
	uint32_t meta_blkaddr;
	uint32_t xattr_blkaddr;
	uint8_t uuid[16];
	char volume_name[17];
	uint16_t compr_algs;		/* COMPR_CFGS bitmap, else 1 (LZ4) */
	uint16_t lz4_max_distance;
	uint16_t extra_devices;
	uint16_t devt_slotoff;
	uint8_t xattr_prefix_count;
	uint32_t xattr_prefix_start;
	kiln_nid_t packed_nid;
	bool xattr_filter;		/* COMPAT_XATTR_FILTER && reserved == 0 */
};

/* Decoded inode core (either version). */
struct kiln_inode {
	kiln_nid_t nid;
	uint64_t inode_off;		/* byte offset of the core in the image */
	unsigned int core_size;		/* 32 or 64 */
	unsigned int xattr_size;	/* inline xattr area bytes, 0 or >= 16 */
	uint8_t datalayout;		/* enum erofs_datalayout */
	bool extended;
	bool dot_omitted;		/* directory without "." on disk */
	uint32_t mode;
	uint32_t uid, gid;
	uint32_t nlink;
	uint64_t size;
	int64_t mtime;
	uint32_t mtime_nsec;
	uint32_t rdev;			/* raw new-style encoding (chr/blk) */
	uint64_t startblk;		/* FLAT_*: first block (48-bit capable) */
	bool null_startblk;		/* FLAT_PLAIN: whole file is a hole */
	uint64_t blocks;		/* COMPRESSED_*: physical blocks */
	uint16_t chunk_format;		/* CHUNK_BASED */
	uint32_t ino;			/* on-disk serial */
};

/* Byte just past the inline xattr area (where tails/indexes begin). */
static inline uint64_t kiln_inode_meta_end(const struct kiln_inode *in)
{
	return in->inode_off + in->core_size + in->xattr_size;
}

/*
 * Check and decode the superblock; @raw holds the bytes from offset 1024
 * to the end of the superblock's block (@len of them, at least 128).
 * Returns 0, -KILN_ECORRUPT or -EOPNOTSUPP; *@why names the bad field.
 */
int kiln_decode_super(const void *raw, size_t len, struct kiln_sb *sb,
		      const char **why);

/*
 * Decode the inode core at @raw (@len bytes available, >= 32; an extended
 * inode needs 64). Fills everything but nid/inode_off.
 */
int kiln_decode_inode(const struct kiln_sb *sb, const void *raw, size_t len,
		      struct kiln_inode *inode, const char **why);

#endif
