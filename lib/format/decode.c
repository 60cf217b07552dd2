// SPDX-License-Identifier: MIT
/*
 * Raw on-disk bytes -> checked native structs: superblock, inode cores,
 * dirents, xattr headers and chunk entries. No I/O, no allocation.
 */
#include <string.h>
#include <sys/stat.h>

#include "format/decode.h"
#include "util/checked.h"
#include "util/endian.h"

/* The kernel caps the superblock at PAGE_SIZE - 1024 bytes. */
#define SB_MAX_SIZE	(4096u - EROFS_SUPER_OFFSET)
#define NULL_ADDR48	0xFFFFFFFFFFFFull

static int fail(const char **why, const char *reason, int err)
{
	if (why)
		*why = reason;
	return err;
}

#define CORRUPT(why, reason) fail(why, reason, -KILN_ECORRUPT)
#define UNSUPPORTED(why, reason) fail(why, reason, -EOPNOTSUPP)

int kiln_decode_super(const void *raw, size_t len, struct kiln_sb *sb,
		      const char **why)
{
	const uint8_t *p = raw;
	struct erofs_super_block d;
	unsigned int sb_size;

	if (len < sizeof(d))
		return fail(why, "superblock truncated", -KILN_ENOTEROFS);
	memcpy(&d, p, sizeof(d));
	memset(sb, 0, sizeof(*sb));

	if (kiln_le32(d.magic) != EROFS_SUPER_MAGIC)
		return fail(why, "bad magic (not an EROFS image)",
			    -KILN_ENOTEROFS);
	if (d.blkszbits < EROFS_MIN_BLKSZBITS || d.blkszbits > 16)
		return CORRUPT(why, "blkszbits outside 9..16");
	if (d.blkszbits > EROFS_MAX_BLKSZBITS)
		return UNSUPPORTED(why, "block size above 4096");
	if (d.dirblkbits != 0)
		return UNSUPPORTED(why, "dirblkbits is not 0");
	sb_size = EROFS_SB_BASE_SIZE + EROFS_SB_EXTSLOT_SIZE * d.sb_extslots;
	if (sb_size > SB_MAX_SIZE)
		return CORRUPT(why, "sb_extslots too large");
	if (sb_size > len)
		return CORRUPT(why, "superblock extension slots truncated");

	sb->blkszbits = d.blkszbits;
	sb->blksz = 1u << d.blkszbits;
	sb->sb_size = sb_size;
	sb->feature_compat = kiln_le32(d.feature_compat);
	sb->feature_incompat = kiln_le32(d.feature_incompat);
	sb->checksum = kiln_le32(d.checksum);
	if (sb->feature_incompat & ~EROFS_ALL_FEATURE_INCOMPAT)
		return UNSUPPORTED(why, "unknown incompatible feature bits");

	sb->inos = kiln_le64(d.inos);
	sb->epoch = (int64_t)kiln_le64(d.epoch);
	sb->fixed_nsec = kiln_le32(d.fixed_nsec);
	if (sb->fixed_nsec >= 1000000000u)
		return CORRUPT(why, "fixed_nsec is not below one second");
	sb->build_time = kiln_le32(d.build_time);
	sb->meta_blkaddr = kiln_le32(d.meta_blkaddr);
	sb->xattr_blkaddr = kiln_le32(d.xattr_blkaddr);
	memcpy(sb->uuid, d.uuid, sizeof(sb->uuid));
	memcpy(sb->volume_name, d.volume_name, sizeof(d.volume_name));
	sb->volume_name[sizeof(d.volume_name)] = '\0';

	/* root nid, and blocks_hi sharing the 16-bit root field */
	sb->blocks = kiln_le32(d.blocks_lo);
	sb->root_nid = kiln_le16(d.rb.rootnid_2b);
	if ((sb->feature_incompat & EROFS_FEATURE_INCOMPAT_48BIT) &&
	    kiln_le64(d.rootnid_8b) != 0) {
		sb->root_nid = kiln_le64(d.rootnid_8b);
		sb->blocks |= (uint64_t)kiln_le16(d.rb.blocks_hi) << 32;
	}

	if (sb->feature_incompat & EROFS_FEATURE_INCOMPAT_COMPR_CFGS) {
		sb->compr_algs = kiln_le16(d.u1.available_compr_algs);
		if (sb->compr_algs & ~((1u << Z_EROFS_COMPRESSION_MAX) - 1))
			return UNSUPPORTED(why, "unknown compression algorithms");
	} else {
		sb->compr_algs = 1u << Z_EROFS_COMPRESSION_LZ4;
		sb->lz4_max_distance = kiln_le16(d.u1.lz4_max_distance);
	}
	if (sb->feature_incompat & EROFS_FEATURE_INCOMPAT_DEVICE_TABLE) {
		sb->extra_devices = kiln_le16(d.extra_devices);
		sb->devt_slotoff = kiln_le16(d.devt_slotoff);
	}
	if (sb->feature_incompat & EROFS_FEATURE_INCOMPAT_XATTR_PREFIXES) {
		sb->xattr_prefix_count = d.xattr_prefix_count;
		sb->xattr_prefix_start = kiln_le32(d.xattr_prefix_start);
		if (sb->xattr_prefix_count > 128)
			return CORRUPT(why, "xattr_prefix_count above 128");
	}
	if (sb->feature_incompat & EROFS_FEATURE_INCOMPAT_FRAGMENTS)
		sb->packed_nid = kiln_le64(d.packed_nid);
	if (sb->packed_nid >> EROFS_NID_METABOX_BIT)
		return CORRUPT(why, "packed nid inside the metabox");
	if (sb->feature_incompat & EROFS_FEATURE_INCOMPAT_METABOX) {
		/* the nid lives in the first extension slot */
		if (sb_size <= EROFS_SB_METABOX_NID_OFF)
			return CORRUPT(why, "metabox without the superblock slot holding its nid");
		sb->metabox_nid = kiln_get_le64(p + EROFS_SB_METABOX_NID_OFF);
		if (sb->metabox_nid >> EROFS_NID_METABOX_BIT)
			return CORRUPT(why, "metabox nid inside the metabox (self-loop)");
	}
	sb->xattr_filter =
		(sb->feature_compat & EROFS_FEATURE_COMPAT_XATTR_FILTER) &&
		d.xattr_filter_reserved == 0;
	return 0;
}

unsigned int kiln_decode_core_size(const void *raw)
{
	uint16_t ifmt = kiln_get_le16(raw);

	return (ifmt & EROFS_I_VERSION_MASK) == EROFS_INODE_LAYOUT_EXTENDED ?
		sizeof(struct erofs_inode_extended) :
		sizeof(struct erofs_inode_compact);
}

static bool mode_type_ok(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG:
	case S_IFDIR:
	case S_IFLNK:
	case S_IFCHR:
	case S_IFBLK:
	case S_IFIFO:
	case S_IFSOCK:
		return true;
	default:
		return false;
	}
}

/*
 * i_u and the high address bits in i_nb, per type and layout (format
 * notes 2.3). @has_hi: i_nb carries bits 32..47 (extended, or NLINK_1).
 */
static int decode_i_u(struct kiln_inode *in, uint32_t i_u, uint16_t i_nb,
		      bool has_hi, const char **why)
{
	uint64_t hi = has_hi ? (uint64_t)i_nb << 32 : 0;

	if (S_ISCHR(in->mode) || S_ISBLK(in->mode)) {
		in->rdev = i_u;
		return 0;
	}
	if (S_ISFIFO(in->mode) || S_ISSOCK(in->mode))
		return 0;

	switch (in->datalayout) {
	case EROFS_INODE_FLAT_PLAIN:
	case EROFS_INODE_FLAT_INLINE:
		in->startblk = hi | i_u;
		/* null start block: all ones within the address width */
		if (in->datalayout == EROFS_INODE_FLAT_PLAIN)
			in->null_startblk = has_hi ?
				in->startblk == NULL_ADDR48 :
				i_u == EROFS_NULL_ADDR32;
		return 0;
	case EROFS_INODE_COMPRESSED_FULL:
	case EROFS_INODE_COMPRESSED_COMPACT:
		in->blocks = hi | i_u;
		return 0;
	case EROFS_INODE_CHUNK_BASED:
		in->chunk_format = (uint16_t)(i_u & 0xFFFF);
		if (in->chunk_format & ~EROFS_CHUNK_FORMAT_ALL)
			return UNSUPPORTED(why, "unknown chunk format bits");
		return 0;
	default:
		return UNSUPPORTED(why, "unknown data layout");
	}
}

int kiln_decode_inode(const struct kiln_sb *sb, const void *raw, size_t len,
		      struct kiln_inode *in, const char **why)
{
	struct erofs_inode_compact c;
	struct erofs_inode_extended e;
	kiln_nid_t nid = in->nid;
	uint64_t inode_off = in->inode_off;
	uint16_t ifmt, i_nb;
	uint32_t i_u;
	bool has_hi;

	if (len < sizeof(c))
		return CORRUPT(why, "inode truncated");
	memset(in, 0, sizeof(*in));
	in->nid = nid;
	in->inode_off = inode_off;

	ifmt = kiln_get_le16(raw);
	if (ifmt & ~EROFS_I_ALL_BITS)
		return UNSUPPORTED(why, "unsupported i_format bits");
	in->datalayout = (ifmt >> EROFS_I_DATALAYOUT_SHIFT) &
			 EROFS_I_DATALAYOUT_MASK;
	if (in->datalayout >= EROFS_INODE_DATALAYOUT_MAX)
		return UNSUPPORTED(why, "unknown data layout");
	in->extended = (ifmt & EROFS_I_VERSION_MASK) ==
		       EROFS_INODE_LAYOUT_EXTENDED;

	if (in->extended) {
		if (len < sizeof(e))
			return CORRUPT(why, "extended inode truncated");
		memcpy(&e, raw, sizeof(e));
		in->core_size = sizeof(e);
		in->xattr_size = kiln_xattr_ibody_size(kiln_le16(e.i_xattr_icount));
		in->mode = kiln_le16(e.i_mode);
		in->size = kiln_le64(e.i_size);
		if (in->size >> 63)
			return CORRUPT(why, "i_size at or above 2^63");
		in->uid = kiln_le32(e.i_uid);
		in->gid = kiln_le32(e.i_gid);
		in->nlink = kiln_le32(e.i_nlink);
		in->mtime = (int64_t)kiln_le64(e.i_mtime);
		in->mtime_nsec = kiln_le32(e.i_mtime_nsec);
		if (in->mtime_nsec >= 1000000000u)
			return CORRUPT(why, "i_mtime_nsec is not below one second");
		in->ino = kiln_le32(e.i_ino);
		i_nb = kiln_le16(e.i_nb);
		i_u = kiln_le32(e.i_u.startblk_lo);
		has_hi = true;
	} else {
		memcpy(&c, raw, sizeof(c));
		in->core_size = sizeof(c);
		in->xattr_size = kiln_xattr_ibody_size(kiln_le16(c.i_xattr_icount));
		in->mode = kiln_le16(c.i_mode);
		in->size = kiln_le32(c.i_size);
		in->uid = kiln_le16(c.i_uid);
		in->gid = kiln_le16(c.i_gid);
		/* unsigned offset from the epoch; wraps like the kernel's u64 add */
		in->mtime = (int64_t)((uint64_t)sb->epoch + kiln_le32(c.i_mtime));
		in->mtime_nsec = sb->fixed_nsec;
		in->ino = kiln_le32(c.i_ino);
		i_nb = kiln_le16(c.i_nb);
		i_u = kiln_le32(c.i_u.startblk_lo);
		has_hi = false;
	}

	if (!mode_type_ok(in->mode))
		return CORRUPT(why, "bogus file type in i_mode");

	if (S_ISDIR(in->mode)) {
		in->dot_omitted = (ifmt & EROFS_I_DOT_OMITTED_BIT) != 0;
		if (!in->extended)
			in->nlink = i_nb;
	} else if (!in->extended) {
		if (ifmt & EROFS_I_NLINK_1_BIT) {
			in->nlink = 1;
			has_hi = true;
		} else {
			in->nlink = i_nb;
		}
	}
	return decode_i_u(in, i_u, i_nb, has_hi, why);
}

void kiln_decode_dirent(const void *raw, struct kiln_dirent_disk *de)
{
	struct erofs_dirent d;

	memcpy(&d, raw, sizeof(d));
	de->nid = kiln_le64(d.nid);
	de->nameoff = kiln_le16(d.nameoff);
	de->file_type = d.file_type;
}

int kiln_decode_dirent_count(const void *raw, size_t blk_len,
			     const char **why)
{
	uint16_t nameoff0;

	if (blk_len < sizeof(struct erofs_dirent))
		return CORRUPT(why, "directory block shorter than one dirent");
	nameoff0 = kiln_get_le16((const uint8_t *)raw +
				 offsetof(struct erofs_dirent, nameoff));
	if (nameoff0 == 0 || nameoff0 % sizeof(struct erofs_dirent))
		return CORRUPT(why, "first nameoff not a positive multiple of 12");
	if (nameoff0 >= blk_len)
		return CORRUPT(why, "first nameoff outside the block");
	return nameoff0 / (int)sizeof(struct erofs_dirent);
}

int kiln_decode_xattr_ibody(const void *raw, size_t area_size,
			    struct kiln_xattr_ibody *h, const char **why)
{
	struct erofs_xattr_ibody_header d;

	if (area_size < sizeof(d))
		return CORRUPT(why, "xattr area smaller than its header");
	if (area_size == sizeof(d))
		return UNSUPPORTED(why, "header-only xattr area");
	memcpy(&d, raw, sizeof(d));
	h->name_filter = kiln_le32(d.h_name_filter);
	h->shared_count = d.h_shared_count;
	if ((size_t)h->shared_count * 4 > area_size - sizeof(d))
		return CORRUPT(why, "h_shared_count exceeds the xattr area");
	return 0;
}

void kiln_decode_xattr_entry(const void *raw, struct kiln_xattr_entry *e)
{
	struct erofs_xattr_entry d;

	memcpy(&d, raw, sizeof(d));
	e->name_len = d.e_name_len;
	e->name_index = d.e_name_index;
	e->value_size = kiln_le16(d.e_value_size);
	e->footprint = (uint32_t)kiln_round_up(sizeof(d) + e->name_len +
					       (uint32_t)e->value_size, 4);
}

void kiln_chunk_geo(const struct kiln_sb *sb, const struct kiln_inode *in,
		    struct kiln_chunk_geo *geo)
{
	geo->chunkbits = sb->blkszbits +
			 (in->chunk_format & EROFS_CHUNK_FORMAT_BLKBITS_MASK);
	geo->unit = (in->chunk_format & EROFS_CHUNK_FORMAT_INDEXES) ?
		    sizeof(struct erofs_inode_chunk_index) : 4u;
	/* chunkbits <= 12 + 31, size < 2^63: no overflow */
	geo->count = (in->size + (1ull << geo->chunkbits) - 1) >> geo->chunkbits;
	geo->table_off = kiln_round_up(kiln_inode_meta_end(in), geo->unit);
}

static uint16_t device_mask(uint16_t extra_devices)
{
	uint32_t n = (uint32_t)extra_devices + 1, p = 1;

	while (p < n)
		p <<= 1;
	return (uint16_t)(p - 1);
}

void kiln_decode_chunk(const struct kiln_sb *sb, const struct kiln_inode *in,
		       const struct kiln_chunk_geo *geo, const void *raw,
		       struct kiln_chunk *c)
{
	struct erofs_inode_chunk_index d;
	uint64_t blk;

	c->device = 0;
	if (geo->unit == 4) {
		blk = kiln_get_le32(raw);
		c->hole = blk == EROFS_NULL_ADDR32;
		c->blk = blk;
		return;
	}
	memcpy(&d, raw, sizeof(d));
	blk = kiln_le32(d.startblk_lo);
	if (in->chunk_format & EROFS_CHUNK_FORMAT_48BIT) {
		blk |= (uint64_t)kiln_le16(d.startblk_hi) << 32;
		c->hole = blk == NULL_ADDR48;
	} else {
		c->hole = blk == EROFS_NULL_ADDR32;
	}
	c->blk = blk;
	c->device = kiln_le16(d.device_id) & device_mask(sb->extra_devices);
}

void kiln_decode_devslot(const struct kiln_sb *sb, const void *raw,
			 struct kiln_devslot *d)
{
	struct erofs_deviceslot s;

	memcpy(&s, raw, sizeof(s));
	memcpy(d->tag, s.tag, sizeof(s.tag));
	d->tag[sizeof(s.tag)] = '\0';
	d->blocks = kiln_le32(s.blocks_lo);
	d->uniaddr = kiln_le32(s.uniaddr_lo);
	if (sb->feature_incompat & EROFS_FEATURE_INCOMPAT_48BIT) {
		d->blocks |= (uint64_t)kiln_le16(s.blocks_hi) << 32;
		d->uniaddr |= (uint64_t)kiln_le16(s.uniaddr_hi) << 32;
	}
}
