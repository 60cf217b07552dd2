// SPDX-License-Identifier: MIT
/*
 * A compressed regular file as the builder sees it (zfile.h): write its
 * pclusters, then describe it (layout, blocks, map) to the inode writer.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "builder/output.h"
#include "builder/zinternal.h"
#include "format/erofs_fs.h"
#include "util/checked.h"

int kiln_zfile_add(struct kiln_zfile *zf, const struct kiln_zext *e)
{
	if (zf->nr_ext == zf->cap_ext) {
		size_t cap = zf->cap_ext ? zf->cap_ext * 2 : 16;
		struct kiln_zext *n = realloc(zf->ext, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		zf->ext = n;
		zf->cap_ext = cap;
	}
	zf->ext[zf->nr_ext++] = *e;
	return 0;
}

int kiln_zfile_write(struct kiln_zctx *zc, struct kiln_out *out,
		     kiln_src_read_fn read, void *read_ctx, uint64_t size,
		     struct kiln_zfile **out_zf)
{
	struct kiln_zfile *zf;
	int err;

	*out_zf = NULL;
	if (!size)
		return 1;
	zf = calloc(1, sizeof(*zf));
	if (!zf)
		return -ENOMEM;
	zf->size = size;
	zf->blkszbits = zc->blkszbits;
	zf->zc = zc;
	if (zc->layout == KILN_COMPRESS_LAYOUT_EXTENTS)
		err = kiln_zpack_extents(zc, out, read, read_ctx, zf);
	else
		err = kiln_zpack_classic(zc, out, read, read_ctx, zf);
	if (err) {
		kiln_zfile_free(zf);
		return err;
	}
	kiln_zindex_choose(zf);
	kiln_zctx_note_file(zc, zf);
	*out_zf = zf;
	return 0;
}

void kiln_zfile_free(struct kiln_zfile *zf)
{
	if (!zf)
		return;
	free(zf->ext);
	free(zf->idata);
	free(zf);
}

unsigned int kiln_zfile_datalayout(const struct kiln_zfile *zf)
{
	return zf->kind == KILN_ZMAP_COMPACT ? EROFS_INODE_COMPRESSED_COMPACT :
					       EROFS_INODE_COMPRESSED_FULL;
}

uint64_t kiln_zfile_blocks(const struct kiln_zfile *zf)
{
	return zf->blocks;
}

int kiln_zfile_map_size(const struct kiln_zfile *zf, uint64_t meta_end,
			size_t *len)
{
	return kiln_zindex_size(zf, meta_end, len);
}

int kiln_zfile_map_encode(const struct kiln_zfile *zf, uint64_t meta_end,
			  void *dst, size_t len)
{
	return kiln_zindex_encode(zf, meta_end, dst, len);
}

bool kiln_zfile_has_inline(const struct kiln_zfile *zf)
{
	return zf->idata_size != 0;
}

int kiln_zfile_drop_inline(struct kiln_zfile *zf, struct kiln_out *out)
{
	const uint32_t bs = 1u << zf->blkszbits;
	struct kiln_zext *e;
	uint8_t *blk;
	kiln_blk_t addr;
	uint32_t plen;
	int err;

	if (!zf->idata_size)
		return 0;
	e = &zf->ext[zf->nr_ext - 1];
	plen = (uint32_t)kiln_round_up(zf->idata_size, bs);
	blk = calloc(1, plen);
	if (!blk)
		return -ENOMEM;
	/* compressed: stream at the end; raw: data from the start */
	if (e->fmt)
		memcpy(blk + plen - zf->idata_size, zf->idata, zf->idata_size);
	else
		memcpy(blk, zf->idata, zf->idata_size);
	err = kiln_out_append(out, blk, plen, &addr);
	free(blk);
	if (err)
		return err;
	e->pstart = (uint64_t)addr << zf->blkszbits;
	e->plen = plen;
	e->flags &= (uint8_t)~KILN_ZEXT_INLINE;
	free(zf->idata);
	zf->idata = NULL;
	zf->idata_size = 0;
	zf->blocks += plen / bs;
	kiln_zindex_choose(zf);
	return 0;
}
