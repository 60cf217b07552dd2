// SPDX-License-Identifier: MIT
/*
 * A compressed regular file as the builder sees it (zfile.h): write its
 * pclusters, then describe it (layout, blocks, map) to the inode writer.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "builder/output.h"
#include "builder/zdedupe.h"
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

int kiln_zfile_compress(struct kiln_zctx *zc, kiln_src_read_fn read,
			void *read_ctx, uint64_t size, struct kiln_zfile **zf)
{
	return kiln_zfile_write(zc, NULL, read, read_ctx, size, zf);
}

size_t kiln_zfile_held_bytes(const struct kiln_zfile *zf)
{
	return zf->held_len + zf->frag_len;
}

static bool has_pcluster(const struct kiln_zext *e)
{
	return !(e->flags & (KILN_ZEXT_INLINE | KILN_ZEXT_FRAGMENT |
			     KILN_ZEXT_HOLE | KILN_ZEXT_SHARED));
}

/*
 * Commit with dedupe: pclusters already in the image are referenced, the
 * others appended (in order) and remembered. Classic layout only, where
 * pclusters are whole blocks and may move freely.
 */
static int commit_dedupe(struct kiln_zfile *zf, struct kiln_out *out)
{
	const uint32_t bs = 1u << zf->blkszbits;
	struct kiln_zdedupe *dd = zf->zc->dd;
	uint8_t *buf = malloc(zf->held_len ? zf->held_len : 1);
	uint64_t len = 0, base = 0, blocks = 0;
	kiln_blk_t blk;
	int err = 0;

	if (!buf)
		return -ENOMEM;
	for (size_t i = 0; i < zf->nr_ext && !err; i++) {
		struct kiln_zext *e = &zf->ext[i];
		const uint8_t *pc = zf->held + e->pstart;
		uint64_t addr;

		if (!has_pcluster(e))
			continue;
		blocks += e->plen / bs;
		err = kiln_zdedupe_find(dd, out, pc, e->plen, e->llen, e->fmt,
					&addr);
		if (err > 0) {
			e->pstart = addr;
			e->flags |= KILN_ZEXT_SHARED;
			err = 0;
			continue;
		}
		memcpy(buf + len, pc, e->plen);
		e->pstart = len;
		len += e->plen;
	}
	if (!err && len) {
		err = kiln_out_append(out, buf, (size_t)len, &blk);
		base = (uint64_t)blk * bs;
	}
	for (size_t i = 0; i < zf->nr_ext && !err; i++) {
		struct kiln_zext *e = &zf->ext[i];

		if (!has_pcluster(e))
			continue;
		err = kiln_zdedupe_add(dd, buf + e->pstart, e->plen, e->llen,
				       e->fmt, e->pstart + base);
		e->pstart += base;
	}
	free(buf);
	if (err)
		return err;
	free(zf->held);
	zf->held = NULL;
	zf->held_len = 0;
	zf->blocks = blocks;
	kiln_zindex_choose(zf);
	return 0;
}

int kiln_zfile_commit(struct kiln_zfile *zf, struct kiln_out *out)
{
	const uint32_t bs = 1u << zf->blkszbits;
	kiln_blk_t blk;
	uint64_t base;
	int err;

	err = kiln_zfile_place_fragment(zf);
	if (err || !zf->held)
		return err;
	if (zf->zc->dd)
		return commit_dedupe(zf, out);
	err = kiln_out_append(out, zf->held, zf->held_len, &blk);
	if (err)
		return err;
	base = (uint64_t)blk * bs;
	for (size_t i = 0; i < zf->nr_ext; i++) {
		struct kiln_zext *e = &zf->ext[i];

		if (!(e->flags & (KILN_ZEXT_INLINE | KILN_ZEXT_FRAGMENT)))
			e->pstart += base;
	}
	free(zf->held);
	zf->held = NULL;
	zf->held_len = 0;
	return 0;
}

int kiln_zfile_write(struct kiln_zctx *zc, struct kiln_out *out,
		     kiln_src_read_fn read, void *read_ctx, uint64_t size,
		     struct kiln_zfile **out_zf)
{
	struct kiln_out *pack_out;
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
	/* dedupe decides where pclusters go at commit time, in commit order */
	pack_out = zc->dd ? NULL : out;
	if (zc->layout == KILN_COMPRESS_LAYOUT_EXTENTS)
		err = kiln_zpack_extents(zc, pack_out, read, read_ctx, zf);
	else
		err = kiln_zpack_classic(zc, pack_out, read, read_ctx, zf);
	kiln_zindex_choose(zf);
	if (!err && out && !pack_out)
		err = kiln_zfile_commit(zf, out);
	else if (!err && out)
		err = kiln_zfile_place_fragment(zf);
	if (err) {
		kiln_zfile_free(zf);
		return err;
	}
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
	free(zf->held);
	free(zf->frag);
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
