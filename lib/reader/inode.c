// SPDX-License-Identifier: MIT
/*
 * Loading an inode by nid: locate it, decode and check the core, its xattr
 * area and its inline tail; and stat built from it.
 */
#include <sys/stat.h>

#include "reader/internal.h"
#include "reader/verity.h"
#include "util/checked.h"

/*
 * Metadata offset of inode @nid, or false when it overflows. A nid with
 * bit 63 set names a slot of the metabox data (no meta_blkaddr there).
 */
static bool nid_to_off(const struct kiln_image *img, kiln_nid_t nid,
		       uint64_t *off)
{
	uint64_t base, slot;

	if (kiln_in_metabox(nid)) {
		slot = nid & EROFS_NID_MASK;
		if (slot > kiln_mbx_size(img) >> EROFS_ISLOT_BITS)
			return false;
		*off = KILN_MBX_BIT | slot << EROFS_ISLOT_BITS;
		return true;
	}
	if (!kiln_blk_off(img, img->sb.meta_blkaddr, &base))
		return false;
	if (kiln_mul_overflow(nid, (uint64_t)EROFS_ISLOT_SIZE, &slot))
		return false;
	return !kiln_add_overflow(base, slot, off);
}

/* Why [@off, @off + @len) could not be had, for messages. */
static const char *why_unreadable(const struct kiln_image *img, uint64_t off,
				  uint64_t len)
{
	if (kiln_verity_failed(img, off, len))
		return "on a block that fails dm-verity";
	if (!kiln_in_metabox(off))
		return "outside the image";
	if (!kiln_metabuf_range_ok(img, off, len))
		return "outside the metabox";
	return "in metabox data that does not decode";
}

/* FLAT_INLINE: the last (partial or full) block lives right after E. */
static int check_inline_tail(struct kiln_image *img,
			     const struct kiln_inode *in)
{
	uint32_t bs = img->sb.blksz;
	uint64_t meta_end = kiln_inode_meta_end(in);
	uint64_t tail;

	if (in->size == 0)
		return 0;
	tail = in->size - (kiln_div_round_up(in->size, bs) - 1) * bs;
	if (meta_end % bs + tail > bs)
		return KILN_CORRUPT(img, "nid %llu: inline data of %llu bytes crosses a block boundary",
				    (unsigned long long)in->nid,
				    (unsigned long long)tail);
	if (!kiln_metabuf_get(img, meta_end, (size_t)tail))
		return KILN_CORRUPT(img, "nid %llu: inline data %s",
				    (unsigned long long)in->nid,
				    why_unreadable(img, meta_end, tail));
	return 0;
}

int kiln_inode_load(struct kiln_image *img, kiln_nid_t nid,
		    struct kiln_inode *in)
{
	const char *why = NULL;
	const void *raw;
	unsigned int core;
	uint64_t off;
	int err;

	if (kiln_in_metabox(nid) && !img->mbx)
		return KILN_CORRUPT(img, "nid %llx refers to a metabox the image lacks",
				    (unsigned long long)nid);
	if (!nid_to_off(img, nid, &off))
		return KILN_CORRUPT(img, "nid %llu: inode outside the %s",
				    (unsigned long long)nid,
				    kiln_in_metabox(nid) ? "metabox" : "image");
	raw = kiln_metabuf_get(img, off, sizeof(struct erofs_inode_compact));
	if (!raw)
		return KILN_CORRUPT(img, "nid %llu: inode %s",
				    (unsigned long long)nid,
				    why_unreadable(img, off,
						   sizeof(struct erofs_inode_compact)));
	core = kiln_decode_core_size(raw);
	if (core > sizeof(struct erofs_inode_compact) &&
	    !(raw = kiln_metabuf_get(img, off, core)))
		return KILN_CORRUPT(img, "nid %llu: extended inode %s",
				    (unsigned long long)nid,
				    why_unreadable(img, off, core));

	in->nid = nid;
	in->inode_off = off;
	err = kiln_decode_inode(&img->sb, raw, core, in, &why);
	if (err == -EOPNOTSUPP) {
		kiln_log(&img->logger, KILN_LOG_ERROR, "nid %llu: %s",
			 (unsigned long long)nid, why);
		return err;
	}
	if (err)
		return KILN_CORRUPT(img, "nid %llu: %s", (unsigned long long)nid,
				    why);

	/* core + inline xattr area must be inside the image */
	if (!kiln_metabuf_get(img, off, (size_t)core + in->xattr_size))
		return KILN_CORRUPT(img, "nid %llu: xattr area of %u bytes %s",
				    (unsigned long long)nid, in->xattr_size,
				    why_unreadable(img, off,
						   (uint64_t)core + in->xattr_size));
	if (in->datalayout == EROFS_INODE_FLAT_INLINE)
		return check_inline_tail(img, in);
	return 0;
}

/* Chunk-based: count the blocks of the chunks that are not holes. */
static int chunk_blocks(struct kiln_image *img, const struct kiln_inode *in,
			uint64_t *bytes)
{
	struct kiln_chunk_geo geo;
	const uint8_t *table;
	uint64_t used = 0, chunk_size;

	kiln_chunk_geo(&img->sb, in, &geo);
	chunk_size = 1ull << geo.chunkbits;
	if (geo.count > SIZE_MAX / geo.unit ||
	    !(table = kiln_metabuf_get(img, geo.table_off,
				       (size_t)(geo.count * geo.unit))))
		return KILN_CORRUPT(img, "nid %llu: chunk table outside the image",
				    (unsigned long long)in->nid);
	for (uint64_t i = 0; i < geo.count; i++) {
		struct kiln_chunk c;
		uint64_t start = i << geo.chunkbits;

		kiln_decode_chunk(&img->sb, in, &geo, table + i * geo.unit, &c);
		if (!c.hole)
			used += kiln_round_up(KILN_MIN(chunk_size,
						       in->size - start),
					      img->sb.blksz);
	}
	*bytes = used;
	return 0;
}

int kiln_inode_blocks(struct kiln_image *img, const struct kiln_inode *in,
		      uint64_t *blocks)
{
	uint32_t bs = img->sb.blksz;
	uint64_t bytes = 0;
	int err;

	if (!S_ISREG(in->mode) && !S_ISDIR(in->mode) && !S_ISLNK(in->mode)) {
		*blocks = 0;
		return 0;
	}
	switch (in->datalayout) {
	case EROFS_INODE_FLAT_PLAIN:
		bytes = in->null_startblk ? 0 : kiln_round_up(in->size, bs);
		break;
	case EROFS_INODE_FLAT_INLINE:
		/*
		 * full blocks, plus the inline tail's own bytes unless it
		 * sits in the metabox, outside the image's blocks
		 */
		bytes = in->size == 0 ? 0 :
			(kiln_div_round_up(in->size, bs) - 1) * bs;
		if (!kiln_in_metabox(in->inode_off))
			bytes = in->size;
		break;
	case EROFS_INODE_CHUNK_BASED:
		err = chunk_blocks(img, in, &bytes);
		if (err)
			return err;
		break;
	default:
		/* compressed: i_u counts physical blocks; clamp the shift */
		if (in->blocks >> (64 - img->sb.blkszbits))
			return KILN_CORRUPT(img, "nid %llu: block count %llu overflows",
					    (unsigned long long)in->nid,
					    (unsigned long long)in->blocks);
		bytes = in->blocks << img->sb.blkszbits;
		break;
	}
	*blocks = kiln_div_round_up(bytes, 512);
	return 0;
}

KILN_API int kiln_stat_nid(struct kiln_image *img, kiln_nid_t nid,
			   struct kiln_stat *st)
{
	struct kiln_inode in;
	int err;

	err = kiln_inode_load(img, nid, &in);
	if (err)
		return err;
	st->nid = nid;
	st->mode = in.mode;
	st->uid = in.uid;
	st->gid = in.gid;
	st->nlink = in.nlink;
	st->size = in.size;
	st->mtime = in.mtime;
	st->mtime_nsec = in.mtime_nsec;
	st->rdev_major = 0;
	st->rdev_minor = 0;
	if (S_ISCHR(in.mode) || S_ISBLK(in.mode)) {
		/* new-style encoding: minor low 8 bits, major, minor high bits */
		st->rdev_major = (in.rdev & 0xFFF00u) >> 8;
		st->rdev_minor = (in.rdev & 0xFFu) | ((in.rdev >> 12) & 0xFFF00u);
	}
	st->datalayout = in.datalayout;
	st->extended = in.extended;
	return kiln_inode_blocks(img, &in, &st->blocks);
}
