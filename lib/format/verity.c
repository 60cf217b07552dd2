// SPDX-License-Identifier: MIT
/*
 * dm-verity's superblock and tree geometry: block numbers only, no I/O
 * and no hashing (the builder writes the tree, the reader checks it).
 */
#include <errno.h>
#include <string.h>

#include "format/verity_fs.h"
#include "util/endian.h"

static const uint8_t verity_signature[8] = "verity";

int kiln_verity_geometry(struct kiln_verity_geo *g, unsigned int blkszbits,
			 uint64_t data_blocks, uint64_t tree_blk)
{
	uint64_t pos = tree_blk;

	memset(g, 0, sizeof(*g));
	if (blkszbits < 9 || blkszbits > 12 || !data_blocks)
		return -EINVAL;
	g->blkszbits = blkszbits;
	g->hpb_bits = blkszbits - 5;	/* 32-byte digests */
	g->data_blocks = data_blocks;
	/* the fewest levels whose top one is a single block */
	while (g->hpb_bits * g->levels < 64 &&
	       (data_blocks - 1) >> (g->hpb_bits * g->levels))
		g->levels++;
	if (g->levels > KILN_VERITY_MAX_LEVELS)
		return -EINVAL;
	for (unsigned int i = g->levels; i-- > 0;) {
		unsigned int shift = (i + 1) * g->hpb_bits;
		uint64_t n = shift >= 64 ? 1 :
			     (data_blocks >> shift) +
			     !!(data_blocks & ((1ull << shift) - 1));

		g->level_blk[i] = pos;
		g->level_blks[i] = n;
		if (pos + n < pos)
			return -EINVAL;
		pos += n;
	}
	g->tree_blks = pos - tree_blk;
	if (pos > (UINT64_MAX >> blkszbits))
		return -EINVAL;
	return 0;
}

void kiln_verity_sb_encode(const struct kiln_verity_sb *sb, void *raw)
{
	struct kiln_verity_sb_disk *d = raw;

	memset(d, 0, sizeof(*d));
	memcpy(d->signature, verity_signature, sizeof(d->signature));
	d->version = kiln_cpu_to_le32(1);
	d->hash_type = kiln_cpu_to_le32(1);
	memcpy(d->uuid, sb->uuid, sizeof(d->uuid));
	memcpy(d->algorithm, "sha256", 6);
	d->data_block_size = kiln_cpu_to_le32(1u << sb->blkszbits);
	d->hash_block_size = d->data_block_size;
	d->data_blocks = kiln_cpu_to_le64(sb->data_blocks);
	d->salt_size = kiln_cpu_to_le16((uint16_t)sb->salt_len);
	memcpy(d->salt, sb->salt, sb->salt_len);
}

int kiln_verity_sb_decode(const void *raw, size_t len,
			  struct kiln_verity_sb *sb, const char **why)
{
	const struct kiln_verity_sb_disk *d = raw;
	uint32_t bsz, hbsz;
	char alg[sizeof(d->algorithm) + 1];

	memset(sb, 0, sizeof(*sb));
	if (len < sizeof(*d) ||
	    memcmp(d->signature, verity_signature, sizeof(d->signature))) {
		*why = "no verity superblock";
		return -ENOENT;
	}
	if (kiln_get_le32(&d->version) != 1 ||
	    kiln_get_le32(&d->hash_type) != 1) {
		*why = "verity superblock of another version or hash type";
		return -EOPNOTSUPP;
	}
	memcpy(alg, d->algorithm, sizeof(d->algorithm));
	alg[sizeof(d->algorithm)] = '\0';
	if (strcmp(alg, "sha256")) {
		*why = "verity hash algorithm is not sha256";
		return -EOPNOTSUPP;
	}
	bsz = kiln_get_le32(&d->data_block_size);
	hbsz = kiln_get_le32(&d->hash_block_size);
	if (bsz != hbsz || bsz < 512 || bsz > 4096 || (bsz & (bsz - 1))) {
		*why = "verity block sizes are not one size of 512 to 4096";
		return -EOPNOTSUPP;
	}
	sb->blkszbits = (unsigned int)__builtin_ctz(bsz);
	sb->data_blocks = kiln_get_le64(&d->data_blocks);
	sb->salt_len = kiln_get_le16(&d->salt_size);
	if (sb->salt_len > sizeof(d->salt)) {
		*why = "verity salt longer than 256 bytes";
		return -EUCLEAN;
	}
	if (!sb->data_blocks) {
		*why = "verity superblock hashes no data blocks";
		return -EUCLEAN;
	}
	memcpy(sb->salt, d->salt, sb->salt_len);
	memcpy(sb->uuid, d->uuid, sizeof(sb->uuid));
	return 0;
}
