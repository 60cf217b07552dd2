// SPDX-License-Identifier: MIT
/*
 * The superblock: written last, with a content-derived UUID and the
 * CRC32C over the rest of its block.
 */
#include <errno.h>
#include <isa-l/crc.h>
#include <string.h>
#include <sys/random.h>
#include <xxhash.h>

#include "builder/internal.h"
#include "builder/output.h"
#include "format/erofs_fs.h"
#include "format/kernel.h"
#include "util/checked.h"
#include "util/endian.h"

kiln_blk_t kiln_super_first_data_blk(unsigned int blkszbits)
{
	/*
	 * Room for the compression config records after the superblock and
	 * its extension slot (metabox_nid).
	 */
	uint64_t sb_end = EROFS_SUPER_OFFSET + EROFS_SB_BASE_SIZE + 16 + 128;

	return kiln_div_round_up(sb_end, 1ull << blkszbits);
}

/* Bytes from 1024 to the end of the superblock's block (what the CRC covers). */
static size_t sb_block_len(uint32_t blksz)
{
	return blksz > EROFS_SUPER_OFFSET ? blksz - EROFS_SUPER_OFFSET : blksz;
}

static void fill_super(const struct kiln_build *b, struct erofs_super_block *sb)
{
	int64_t since = b->build_time - b->epoch;
	const char *label = b->opts.volume_label;

	memset(sb, 0, sizeof(*sb));
	sb->magic = kiln_cpu_to_le32(EROFS_SUPER_MAGIC);
	sb->feature_compat = kiln_cpu_to_le32(b->feature_compat);
	sb->blkszbits = (uint8_t)b->blkszbits;
	sb->rb.rootnid_2b = kiln_cpu_to_le16((uint16_t)b->root->nid);
	sb->inos = kiln_cpu_to_le64(b->nr_nodes);
	sb->epoch = kiln_cpu_to_le64((uint64_t)b->epoch);
	sb->fixed_nsec = kiln_cpu_to_le32(b->fixed_nsec);
	sb->blocks_lo = kiln_cpu_to_le32((uint32_t)b->image_blocks);
	sb->meta_blkaddr = kiln_cpu_to_le32((uint32_t)b->meta_blkaddr);
	sb->xattr_blkaddr = kiln_cpu_to_le32((uint32_t)b->xattr_blkaddr);
	if (label)
		memcpy(sb->volume_name, label, strnlen(label, 15));
	sb->feature_incompat = kiln_cpu_to_le32(b->feature_incompat);
	sb->build_time = kiln_cpu_to_le32(since >= 0 && since <= UINT32_MAX ?
					  (uint32_t)since : 0);
}

/* UUID from everything written plus the superblock (uuid still zero). */
static void content_uuid(const struct kiln_build *b,
			 const struct erofs_super_block *sb, uint8_t uuid[16])
{
	uint8_t seed[16 + sizeof(*sb)];
	XXH128_canonical_t c;

	kiln_out_digest(b->out, seed);
	memcpy(seed + 16, sb, sizeof(*sb));
	XXH128_canonicalFromHash(&c, XXH3_128bits(seed, sizeof(seed)));
	memcpy(uuid, c.digest, 16);
	uuid[6] = (uint8_t)((uuid[6] & 0x0F) | 0x80);	/* RFC 9562 version 8 */
	uuid[8] = (uint8_t)((uuid[8] & 0x3F) | 0x80);	/* variant 10 */
}

/* Record the oldest kernel that mounts what the superblock announces. */
static void note_kernel(struct kiln_build *b, const struct erofs_super_block *sb)
{
	uint32_t incompat = kiln_le32(sb->feature_incompat);
	struct kiln_kernel_need k;

	kiln_kernel_need(kiln_le32(sb->feature_compat), incompat,
			 (incompat & EROFS_FEATURE_INCOMPAT_COMPR_CFGS) ?
				 kiln_le16(sb->u1.available_compr_algs) : 0,
			 b->blkszbits, &k);
	b->stats.min_kernel = k.version;
	b->stats.min_kernel_why = k.why;
	b->stats.experimental = 0;
	for (unsigned int f = 0; f < KILN_KF_COUNT; f++)
		if ((k.features & (1u << f)) &&
		    kiln_kernel_feature(f)->experimental)
			b->stats.experimental |= 1u << f;
}

/*
 * --tar-index: the device table, one slot for the tar, in the superblock's
 * block right after the superblock (no config records: nothing is
 * compressed). Its unified address is the image's end, so the image and
 * the tar concatenated are the flattened form a kernel mounts without
 * device=.
 */
static int write_devices(struct kiln_build *b, uint8_t *block, size_t sb_size,
			 size_t len)
{
	struct erofs_super_block *sb = (void *)block;
	size_t at = kiln_round_up(sb_size, EROFS_DEVT_SLOT_SIZE);
	struct erofs_deviceslot *d = (void *)(block + at);

	if (b->zctx || at + sizeof(*d) > len ||
	    (EROFS_SUPER_OFFSET + at) % EROFS_DEVT_SLOT_SIZE)
		return -EINVAL;
	sb->extra_devices = kiln_cpu_to_le16(1);
	sb->devt_slotoff = kiln_cpu_to_le16((uint16_t)((EROFS_SUPER_OFFSET + at) /
						      EROFS_DEVT_SLOT_SIZE));
	sb->feature_incompat |=
		kiln_cpu_to_le32(EROFS_FEATURE_INCOMPAT_DEVICE_TABLE);
	memcpy(d->tag, b->device_tag, sizeof(d->tag));
	d->blocks_lo = kiln_cpu_to_le32((uint32_t)
		kiln_div_round_up(b->device_bytes, b->blksz));
	d->uniaddr_lo = kiln_cpu_to_le32((uint32_t)b->image_blocks);
	return 0;
}

int kiln_super_write(struct kiln_build *b)
{
	size_t len = sb_block_len(b->blksz);
	uint8_t block[4096];
	struct erofs_super_block *sb = (void *)block;

	size_t sb_size = sizeof(*sb);

	memset(block, 0, sizeof(block));
	fill_super(b, sb);
	if (b->metabox) {
		/* one 16-byte extension slot, which starts with metabox_nid */
		sb->sb_extslots = 1;
		sb_size += 16;
		kiln_put_le64(block + EROFS_SB_METABOX_NID_OFF, b->metabox->nid);
		/* the root lives in the metabox: its nid needs 64 bits */
		sb->rootnid_8b = kiln_cpu_to_le64(b->root->nid);
		sb->rb.blocks_hi = kiln_cpu_to_le16((uint16_t)(b->image_blocks >> 32));
	}
	if (b->zctx) {
		uint32_t incompat;
		uint16_t u1;
		long cfgs;

		kiln_zctx_features(b->zctx, &incompat, &u1);
		sb->feature_incompat |= kiln_cpu_to_le32(incompat);
		sb->u1.available_compr_algs = kiln_cpu_to_le16(u1);
		cfgs = kiln_zctx_cfgs_encode(b->zctx,
					     EROFS_SUPER_OFFSET + sb_size,
					     block + sb_size, len - sb_size);
		if (cfgs < 0)
			return (int)cfgs;
	}
	if (b->packed)
		sb->packed_nid = kiln_cpu_to_le64(b->packed->nid);
	if (b->opts.source_kind == KILN_SOURCE_TAR_INDEX) {
		int err = write_devices(b, block, sb_size, len);

		if (err)
			return err;
	}
	if (b->opts.flags & KILN_BUILD_UUID) {
		memcpy(sb->uuid, b->opts.uuid, 16);
	} else if (b->opts.flags & KILN_BUILD_RANDOM_UUID) {
		if (getrandom(sb->uuid, 16, 0) != 16)
			return -errno;
		sb->uuid[6] = (uint8_t)((sb->uuid[6] & 0x0F) | 0x40);
		sb->uuid[8] = (uint8_t)((sb->uuid[8] & 0x3F) | 0x80);
	} else {
		content_uuid(b, sb, sb->uuid);
	}
	note_kernel(b, sb);
	/* CRC32C, initial ~0, no final xor, checksum field zero while hashed */
	sb->checksum = 0;
	sb->checksum = kiln_cpu_to_le32(crc32_iscsi(block, (int)len,
						    EROFS_SB_CRC_SEED));
	return kiln_out_pwrite(b->out, block, len, EROFS_SUPER_OFFSET);
}
