/* SPDX-License-Identifier: MIT */
/*
 * dm-verity's on-disk layout (hash format version 1, as the kernel's
 * dm-verity target and veritysetup read it): the optional superblock at
 * the hash offset, and the geometry of the tree that follows it.
 */
#ifndef KILN_FORMAT_VERITY_FS_H
#define KILN_FORMAT_VERITY_FS_H

#include <stdint.h>

#include <kiln/verity.h>

#define KILN_VERITY_SB_SIZE	512
#define KILN_VERITY_MAX_LEVELS	63

/* veritysetup's superblock, little endian, at the hash offset. */
struct kiln_verity_sb_disk {
	uint8_t signature[8];		/* "verity\0\0" */
	uint32_t version;		/* superblock version: 1 */
	uint32_t hash_type;		/* 0: Chrome OS, 1: normal (ours) */
	uint8_t uuid[16];
	uint8_t algorithm[32];		/* "sha256", NUL padded */
	uint32_t data_block_size;	/* bytes */
	uint32_t hash_block_size;	/* bytes */
	uint64_t data_blocks;		/* data blocks hashed */
	uint16_t salt_size;		/* bytes of @salt used */
	uint8_t pad1[6];
	uint8_t salt[256];
	uint8_t pad2[168];
} __attribute__((packed));
_Static_assert(sizeof(struct kiln_verity_sb_disk) == KILN_VERITY_SB_SIZE,
	       "verity superblock is 512 bytes");

/* A decoded superblock. */
struct kiln_verity_sb {
	uint8_t uuid[16];
	unsigned int blkszbits;		/* data = hash block size */
	uint64_t data_blocks;
	uint8_t salt[KILN_VERITY_SALT_MAX];
	size_t salt_len;
};

/*
 * The tree of @data_blocks blocks of 1 << @blkszbits bytes whose top
 * level starts at block @tree_blk: level i (0: the hashes of the data
 * blocks) holds @level_blks[i] blocks from @level_blk[i] on, the top
 * level first on disk.
 */
struct kiln_verity_geo {
	unsigned int blkszbits;
	unsigned int hpb_bits;		/* log2 of digests per hash block */
	uint64_t data_blocks;
	unsigned int levels;
	uint64_t level_blk[KILN_VERITY_MAX_LEVELS];
	uint64_t level_blks[KILN_VERITY_MAX_LEVELS];
	uint64_t tree_blks;		/* every level together */
};

/*
 * Fill @g for a tree as dm-verity lays it out. Returns 0, or -EINVAL when
 * the block size is outside 512..4096, there are no data blocks, or the
 * tree's block numbers overflow.
 */
int kiln_verity_geometry(struct kiln_verity_geo *g, unsigned int blkszbits,
			 uint64_t data_blocks, uint64_t tree_blk);

/* Encode @sb into @raw (KILN_VERITY_SB_SIZE bytes). */
void kiln_verity_sb_encode(const struct kiln_verity_sb *sb, void *raw);

/*
 * Decode and check the superblock in @raw (@len bytes): -ENOENT when the
 * signature is not there, -EOPNOTSUPP for another version, hash type or
 * algorithm, or block sizes other than one size of 512..4096 for both,
 * -EUCLEAN for a salt size past 256 or no data blocks; *@why says which.
 */
int kiln_verity_sb_decode(const void *raw, size_t len,
			  struct kiln_verity_sb *sb, const char **why);

#endif
