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
	kiln_nid_t metabox_nid;		/* INCOMPAT_METABOX: bit 63 clear */
};

/* Decoded inode core (either version). */
struct kiln_inode {
	kiln_nid_t nid;
	uint64_t inode_off;		/* byte offset of the core in the image */
	unsigned int core_size;		/* 32 or 64 */
	unsigned int xattr_size;	/* inline xattr area bytes: 0 or 12 + 4n */
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

/* Size of the inode core that starts with @raw (>= 2 bytes): 32 or 64. */
unsigned int kiln_decode_core_size(const void *raw);

/* Inline xattr area size for i_xattr_icount @icount (0, or 12 + 4 * (n - 1)). */
static inline unsigned int kiln_xattr_ibody_size(uint16_t icount)
{
	return icount ? 12u + 4u * ((unsigned int)icount - 1u) : 0u;
}

/* One directory entry of a block (no name: names are checked by dir.c). */
struct kiln_dirent_disk {
	kiln_nid_t nid;
	uint16_t nameoff;
	uint8_t file_type;		/* enum erofs_file_type, unchecked */
};

/* Decode the 12-byte dirent at @raw (@len >= 12). */
void kiln_decode_dirent(const void *raw, struct kiln_dirent_disk *de);

/*
 * Number of dirents of the directory block @raw of @blk_len bytes (the block
 * size, or less for the final block): checks dirent 0's nameoff (non-zero,
 * multiple of 12, inside @blk_len). Returns the count or a negative errno.
 */
int kiln_decode_dirent_count(const void *raw, size_t blk_len,
			     const char **why);

/* Inline xattr area header. */
struct kiln_xattr_ibody {
	uint32_t name_filter;
	uint8_t shared_count;
};

/*
 * Decode the header of an inline xattr area of @area_size bytes (@raw has at
 * least 12): -EOPNOTSUPP for a header-only area, corrupt when the shared id
 * list does not fit.
 */
int kiln_decode_xattr_ibody(const void *raw, size_t area_size,
			    struct kiln_xattr_ibody *h, const char **why);

/* Xattr entry header. */
struct kiln_xattr_entry {
	uint8_t name_len;		/* stored suffix length */
	uint8_t name_index;		/* short index, or 0x80 | long prefix */
	uint16_t value_size;
	uint32_t footprint;		/* round_up(4 + name + value, 4) */
};

void kiln_decode_xattr_entry(const void *raw, struct kiln_xattr_entry *e);

/* Chunk map geometry of a CHUNK_BASED inode. */
struct kiln_chunk_geo {
	unsigned int chunkbits;		/* log2 of the chunk size */
	unsigned int unit;		/* 4 or 8 bytes per entry */
	uint64_t count;			/* entries: ceil(size / chunk size) */
	uint64_t table_off;		/* byte offset of entry 0 */
};

void kiln_chunk_geo(const struct kiln_sb *sb, const struct kiln_inode *in,
		    struct kiln_chunk_geo *geo);

/* Decoded chunk entry: a block on @device, or a hole. */
struct kiln_chunk {
	uint64_t blk;
	uint16_t device;		/* 0 = primary (masked like the kernel) */
	bool hole;
};

/* Decode the chunk entry at @raw (geo->unit bytes). */
void kiln_decode_chunk(const struct kiln_sb *sb, const struct kiln_inode *in,
		       const struct kiln_chunk_geo *geo, const void *raw,
		       struct kiln_chunk *c);

/* Decoded device table slot (INCOMPAT_DEVICE_TABLE). */
struct kiln_devslot {
	char tag[EROFS_DEVICE_TAG_LEN + 1];	/* NUL-terminated, may be "" */
	uint64_t blocks;		/* device size in blocks */
	uint64_t uniaddr;		/* first block in the unified space */
};

/* Decode the device slot at @raw (EROFS_DEVT_SLOT_SIZE bytes). */
void kiln_decode_devslot(const struct kiln_sb *sb, const void *raw,
			 struct kiln_devslot *d);

#endif
