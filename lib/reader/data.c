// SPDX-License-Identifier: MIT
/*
 * File data of the uncompressed layouts (flat, inline tail, chunk-based):
 * maps a file offset to the longest contiguous run in the image and copies
 * it with one memcpy. Compressed layouts go to kiln_zread().
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "reader/internal.h"
#include "reader/verity.h"
#include "util/checked.h"

static bool is_compressed(const struct kiln_inode *in)
{
	return in->datalayout == EROFS_INODE_COMPRESSED_FULL ||
	       in->datalayout == EROFS_INODE_COMPRESSED_COMPACT;
}

static int block_phys(struct kiln_file *file, uint64_t blk, uint64_t delta,
		      uint64_t *phys);

/*
 * A flat file's @len bytes of blocks lie inside the image. Checked once,
 * at open: a size that runs past the image end (a damaged inode) would
 * otherwise let reads of the first pages succeed and a read across the
 * image end come back short, through the page cache of a mount, with no
 * error at all.
 */
static int blocks_in_image(struct kiln_file *file, uint64_t len)
{
	uint64_t phys = 0;
	int err = block_phys(file, file->inode.startblk, 0, &phys);

	if (err)
		return err;
	if (!kiln_metabuf_range_ok(file->img, phys, len))
		return KILN_CORRUPT(file->img, "nid %llu: %llu bytes of data at byte %llu run past the image end",
				    (unsigned long long)file->inode.nid,
				    (unsigned long long)len,
				    (unsigned long long)phys);
	return 0;
}

int kiln_file_init(struct kiln_file *file, struct kiln_image *img,
		   const struct kiln_inode *in)
{
	uint32_t bs = img->sb.blksz;

	memset(file, 0, sizeof(*file));
	file->img = img;
	file->inode = *in;
	switch (in->datalayout) {
	case EROFS_INODE_FLAT_PLAIN:
		/* with extra devices, blocks may lie on one: checked per read */
		if (!in->null_startblk && !img->sb.extra_devices)
			return blocks_in_image(file, kiln_round_up(in->size, bs));
		break;
	case EROFS_INODE_FLAT_INLINE:
		/* kiln_inode_load() checked the tail against the block */
		file->inline_start = in->size ?
			(kiln_div_round_up(in->size, bs) - 1) * bs : 0;
		file->inline_off = kiln_inode_meta_end(in);
		if (file->inline_start && !img->sb.extra_devices)
			return blocks_in_image(file, file->inline_start);
		break;
	case EROFS_INODE_CHUNK_BASED:
		kiln_chunk_geo(&img->sb, in, &file->chunk);
		if (file->chunk.count > SIZE_MAX / file->chunk.unit ||
		    !(file->chunk_table = kiln_metabuf_get(img,
				file->chunk.table_off,
				(size_t)(file->chunk.count * file->chunk.unit))))
			return KILN_CORRUPT(img, "nid %llu: chunk table of %llu entries outside the image",
					    (unsigned long long)in->nid,
					    (unsigned long long)file->chunk.count);
		break;
	default:
		break;
	}
	return 0;
}

void kiln_file_release(struct kiln_file *file)
{
	if (is_compressed(&file->inode))
		kiln_zread_release(file);
	file->zstate = NULL;
}

KILN_API int kiln_file_open(struct kiln_image *img, kiln_nid_t nid,
			    struct kiln_file **out)
{
	struct kiln_inode in;
	struct kiln_file *file;
	int err;

	*out = NULL;
	err = kiln_inode_load(img, nid, &in);
	if (err)
		return err;
	file = malloc(sizeof(*file));
	if (!file)
		return -ENOMEM;
	err = kiln_file_init(file, img, &in);
	if (err) {
		free(file);
		return err;
	}
	*out = file;
	return 0;
}

KILN_API void kiln_file_close(struct kiln_file *file)
{
	if (!file)
		return;
	kiln_file_release(file);
	free(file);
}

KILN_API uint64_t kiln_file_size(const struct kiln_file *file)
{
	return file->inode.size;
}

/*
 * A contiguous stretch of file data: bytes at metadata offset @phys (image
 * bytes, or metabox bytes for the inline tail of a metabox inode) or, when
 * @dev is not 0, at byte @phys of extra device @dev; or zeros.
 */
struct run {
	uint64_t len;
	uint64_t phys;
	uint16_t dev;
	bool hole;
};

static int block_phys(struct kiln_file *file, uint64_t blk, uint64_t delta,
		      uint64_t *phys)
{
	uint64_t base;

	if (!kiln_blk_off(file->img, blk, &base) ||
	    kiln_add_overflow(base, delta, phys))
		return KILN_CORRUPT(file->img, "nid %llu: block %llu overflows",
				    (unsigned long long)file->inode.nid,
				    (unsigned long long)blk);
	return 0;
}

static int chunk_at(struct kiln_file *file, uint64_t idx,
		    struct kiln_chunk *c)
{
	const struct kiln_chunk_geo *geo = &file->chunk;

	/* kiln_file_init() checked the table; idx < count by construction */
	kiln_decode_chunk(&file->img->sb, &file->inode, geo,
			  file->chunk_table + idx * geo->unit, c);
	return 0;
}

/*
 * Chunk-based: the run starting at @off, extended over following chunks
 * while they continue it (both holes, or physically adjacent).
 */
static int chunk_run(struct kiln_file *file, uint64_t off, uint64_t max,
		     struct run *r)
{
	unsigned int bits = file->chunk.chunkbits;
	uint64_t idx = off >> bits;
	uint64_t in_chunk = off - (idx << bits);
	struct kiln_chunk c;
	int err;

	err = chunk_at(file, idx, &c);
	if (err)
		return err;
	r->hole = c.hole;
	r->dev = c.device;
	r->len = KILN_MIN(max, (1ull << bits) - in_chunk);
	if (!c.hole) {
		err = block_phys(file, c.blk, in_chunk, &r->phys);
		if (err)
			return err;
	}
	while (r->len < max) {
		uint64_t next_phys = 0;

		err = chunk_at(file, ++idx, &c);
		if (err)
			return err;
		if (c.hole != r->hole || (!c.hole && c.device != r->dev))
			break;
		if (!c.hole) {
			err = block_phys(file, c.blk, 0, &next_phys);
			if (err)
				return err;
			if (next_phys != r->phys + r->len)
				break;
		}
		r->len = KILN_MIN(max, r->len + (1ull << bits));
	}
	return 0;
}

/* The longest run at @off, at most @max bytes (off + max <= i_size). */
static int map_run(struct kiln_file *file, uint64_t off, uint64_t max,
		   struct run *r)
{
	const struct kiln_inode *in = &file->inode;
	int err;

	r->hole = false;
	r->dev = 0;
	r->len = max;
	switch (in->datalayout) {
	case EROFS_INODE_FLAT_PLAIN:
		if (in->null_startblk) {
			r->hole = true;
			return 0;
		}
		err = block_phys(file, in->startblk, off, &r->phys);
		break;
	case EROFS_INODE_FLAT_INLINE:
		if (off >= file->inline_start) {
			r->phys = file->inline_off + (off - file->inline_start);
			return 0;	/* checked at inode load */
		}
		r->len = KILN_MIN(max, file->inline_start - off);
		err = block_phys(file, in->startblk, off, &r->phys);
		break;
	case EROFS_INODE_CHUNK_BASED:
		err = chunk_run(file, off, max, r);
		break;
	default:
		return -EOPNOTSUPP;
	}
	if (err)
		return err;
	if (r->hole)
		return 0;
	if (file->img->sb.extra_devices && !kiln_in_metabox(r->phys)) {
		err = kiln_dev_resolve(file->img, in->nid, &r->dev, &r->phys,
				       r->len);
		if (err)
			return err;
	}
	if (!r->dev && !kiln_metabuf_range_ok(file->img, r->phys, r->len))
		return KILN_CORRUPT(file->img, "nid %llu: data at byte %llu (+%llu) beyond the image end",
				    (unsigned long long)in->nid,
				    (unsigned long long)r->phys,
				    (unsigned long long)r->len);
	return 0;
}

KILN_API ssize_t kiln_file_pread(struct kiln_file *file, void *buf,
				 size_t len, uint64_t off)
{
	uint64_t size = file->inode.size;
	uint8_t *dst = buf;
	size_t done = 0;

	if (off >= size)
		return 0;
	len = (size_t)KILN_MIN((uint64_t)len, size - off);
	len = KILN_MIN(len, (size_t)SSIZE_MAX);
	if (is_compressed(&file->inode))
		return len ? kiln_zread(file, buf, len, off) : 0;

	while (done < len) {
		const void *src;
		struct run r;
		int err = map_run(file, off + done, len - done, &r);

		if (err)
			return err;
		if (r.hole) {
			memset(dst + done, 0, (size_t)r.len);
		} else {
			src = kiln_dev_get(file->img, r.dev, r.phys,
					   (size_t)r.len);
			/* a verity failure (or refusal) was logged already */
			if (!src && (r.dev ? file->img->verity != NULL :
				     kiln_verity_failed(file->img, r.phys, r.len)))
				return -KILN_ECORRUPT;
			if (!src)
				return KILN_CORRUPT(file->img, "nid %llu: data at %llu (+%llu) unreadable",
						    (unsigned long long)file->inode.nid,
						    (unsigned long long)r.phys,
						    (unsigned long long)r.len);
			memcpy(dst + done, src, (size_t)r.len);
		}
		done += (size_t)r.len;
	}
	return (ssize_t)done;
}

KILN_API int kiln_file_read_extent(struct kiln_file *file, void *buf,
				   size_t cap, uint64_t off, uint64_t *ext_off,
				   size_t *ext_len)
{
	if (off >= file->inode.size || !is_compressed(&file->inode))
		return 0;
	return kiln_zread_extent(file, buf, cap, off, ext_off, ext_len);
}

int kiln_file_direct(struct kiln_file *file, uint64_t off, size_t len,
		     const void **ptr)
{
	struct run r;
	int err;

	*ptr = NULL;
	if (!kiln_range_ok(off, len, file->inode.size))
		return -EINVAL;
	if (is_compressed(&file->inode) || len == 0)
		return 0;
	err = map_run(file, off, len, &r);
	if (err)
		return err;
	if (!r.hole && r.len >= len) {
		*ptr = kiln_dev_get(file->img, r.dev, r.phys, len);
		if (!*ptr && (r.dev ? file->img->verity != NULL :
			      kiln_verity_failed(file->img, r.phys, len)))
			return -KILN_ECORRUPT;
		if (!*ptr)
			return KILN_CORRUPT(file->img, "nid %llu: data at %llu (+%zu) unreadable",
					    (unsigned long long)file->inode.nid,
					    (unsigned long long)r.phys, len);
	}
	return 0;
}

KILN_API int kiln_file_locate(struct kiln_file *file, uint64_t off,
			      uint64_t max, uint64_t *img_off, uint64_t *len)
{
	struct run r;
	int err;

	if (!max || !kiln_range_ok(off, max, file->inode.size))
		return -EINVAL;
	if (is_compressed(&file->inode))
		return kiln_zread_locate(file, off, max, img_off, len);
	err = map_run(file, off, max, &r);
	if (err)
		return err;
	*len = r.len;
	/* metabox bytes are decoded data, not bytes of the image */
	if (r.hole || r.dev || kiln_in_metabox(r.phys))
		return 0;
	/* the caller copies these bytes itself: verify them first */
	if (!kiln_databuf_get(file->img, r.phys, (size_t)r.len))
		return kiln_verity_failed(file->img, r.phys, r.len) ?
		       -KILN_ECORRUPT : KILN_CORRUPT(file->img, "nid %llu: data at %llu (+%llu) unreadable",
				    (unsigned long long)file->inode.nid,
				    (unsigned long long)r.phys,
				    (unsigned long long)r.len);
	*img_off = r.phys;
	return 1;
}

KILN_API int kiln_file_next_data(struct kiln_file *file, uint64_t off,
				 uint64_t *data_off, uint64_t *data_end)
{
	const struct kiln_inode *in = &file->inode;
	unsigned int bits = file->chunk.chunkbits;
	struct kiln_chunk c;
	uint64_t idx;
	int err;

	if (off >= in->size)
		return -ENXIO;
	if (in->datalayout == EROFS_INODE_FLAT_PLAIN && in->null_startblk)
		return -ENXIO;
	if (in->datalayout == EROFS_INODE_COMPRESSED_FULL ||
	    in->datalayout == EROFS_INODE_COMPRESSED_COMPACT)
		return kiln_zread_next_data(file, off, data_off, data_end);
	if (in->datalayout != EROFS_INODE_CHUNK_BASED) {
		*data_off = off;
		*data_end = in->size;
		return 0;
	}

	/* 1. skip hole chunks; 2. extend over data chunks */
	for (idx = off >> bits; idx < file->chunk.count; idx++) {
		err = chunk_at(file, idx, &c);
		if (err)
			return err;
		if (!c.hole)
			break;
	}
	if (idx == file->chunk.count)
		return -ENXIO;
	*data_off = KILN_MAX(off, idx << bits);
	for (idx++; idx < file->chunk.count; idx++) {
		err = chunk_at(file, idx, &c);
		if (err)
			return err;
		if (c.hole)
			break;
	}
	*data_end = KILN_MIN(in->size, idx << bits);
	return 0;
}

KILN_API ssize_t kiln_readlink(struct kiln_image *img, kiln_nid_t nid,
			       char *buf, size_t cap)
{
	struct kiln_inode in;
	struct kiln_file file;
	ssize_t n;
	int err;

	err = kiln_inode_load(img, nid, &in);
	if (err)
		return err;
	if (!S_ISLNK(in.mode))
		return -EINVAL;
	if (in.size < 1 || in.size > EROFS_SYMLINK_MAX)
		return KILN_CORRUPT(img, "nid %llu: symlink length %llu outside 1..%u",
				    (unsigned long long)nid,
				    (unsigned long long)in.size,
				    EROFS_SYMLINK_MAX);
	if (cap < in.size + 1)
		return -ERANGE;
	err = kiln_file_init(&file, img, &in);
	if (err)
		return err;
	n = kiln_file_pread(&file, buf, (size_t)in.size, 0);
	kiln_file_release(&file);
	if (n < 0)
		return n;
	if ((uint64_t)n != in.size)
		return KILN_CORRUPT(img, "nid %llu: symlink target short read",
				    (unsigned long long)nid);
	if (memchr(buf, '\0', (size_t)n))
		return KILN_CORRUPT(img, "nid %llu: symlink target contains a NUL byte",
				    (unsigned long long)nid);
	buf[n] = '\0';
	return n;
}
