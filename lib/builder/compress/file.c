// SPDX-License-Identifier: MIT
/*
 * A compressed regular file as the builder sees it (compress.h): write its
 * pclusters, then describe it (layout, blocks, map) to the inode writer.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "builder/compress/dedupe.h"
#include "builder/compress/internal.h"
#include "builder/output.h"
#include "format/erofs_fs.h"
#include "util/checked.h"
#include "util/grow.h"

/* Largest file the writer holds in memory to dedupe its pclusters. */
#define STREAM_DEDUPE_MAX	(64ull << 20)
/* Read size of the second pass over a file stored uncompressed. */
#define FLAT_READ_SIZE	(1u << 20)

/*
 * Room in the extent list: the one record inside the zfile, then arrays of
 * 4, 8, 16 ... records, so the capacity follows from the count alone.
 */
static bool ext_full(const struct kiln_zfile *zf)
{
	if (zf->ext == &zf->ext1 || !zf->ext)
		return zf->nr_ext >= 1;
	return zf->nr_ext >= 4 && !(zf->nr_ext & (zf->nr_ext - 1));
}

int kiln_src_read_mem(const uint8_t *data, uint64_t start, size_t n,
		      void *buf, size_t len, uint64_t off)
{
	if (off < start || off - start > n || len > n - (off - start))
		return -EIO;
	memcpy(buf, data + (off - start), len);
	return 0;
}

int kiln_zfile_add(struct kiln_zfile *zf, const struct kiln_zext *e)
{
	if (!zf->ext)
		zf->ext = &zf->ext1;
	if (ext_full(zf)) {
		const bool inner = zf->ext == &zf->ext1;
		size_t cap = inner ? 4 : (size_t)zf->nr_ext * 2;
		struct kiln_zext *n;

		if (zf->nr_ext >= UINT32_MAX / 2)
			return -EFBIG;
		n = realloc(inner ? NULL : zf->ext, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		if (inner)
			n[0] = zf->ext1;
		zf->ext = n;
	}
	zf->ext[zf->nr_ext++] = *e;
	return 0;
}

void kiln_zfile_release_ext(struct kiln_zfile *zf)
{
	if (zf->ext != &zf->ext1)
		free(zf->ext);
	zf->ext = NULL;
	zf->nr_ext = 0;
}

static int zfile_write(struct kiln_zctx *zc, struct kiln_out *out,
		       kiln_src_read_fn read, void *read_ctx, uint64_t size,
		       const struct kiln_zcuts *cuts,
		       struct kiln_zfile **out_zf);

int kiln_zfile_compress(struct kiln_zctx *zc, kiln_src_read_fn read,
			void *read_ctx, uint64_t size, struct kiln_zfile **zf)
{
	return kiln_zfile_compress_cut(zc, read, read_ctx, size, NULL, zf);
}

int kiln_zfile_compress_cut(struct kiln_zctx *zc, kiln_src_read_fn read,
			    void *read_ctx, uint64_t size,
			    const struct kiln_zcuts *cuts,
			    struct kiln_zfile **zf)
{
	int err = zfile_write(zc, NULL, read, read_ctx, size, cuts, zf);

	if (err == 1 && zc->dd) {
		int ferr = kiln_zfile_flat_new(zc, read, read_ctx, size, zf);

		if (ferr)
			return ferr;
	}
	return err;
}

int kiln_zfile_flat_new(struct kiln_zctx *zc, kiln_src_read_fn read,
			void *read_ctx, uint64_t size, struct kiln_zfile **out)
{
	const uint64_t blocks_len = size & ~(uint64_t)(kiln_zctx_blksz(zc) - 1);
	struct kiln_zfile *zf = calloc(1, sizeof(*zf));
	XXH3_state_t *st = XXH3_createState();
	uint8_t *buf = malloc(FLAT_READ_SIZE);
	uint64_t off = 0;
	int err = 0;

	*out = NULL;
	if (!zf || !st || !buf) {
		err = -ENOMEM;
		goto out;
	}
	XXH3_64bits_reset(st);
	while (off < size) {
		/* stop at the end of the whole blocks to take their hash */
		uint64_t stop = off < blocks_len ? blocks_len : size;
		size_t n = (size_t)KILN_MIN((uint64_t)FLAT_READ_SIZE, stop - off);

		err = read(read_ctx, buf, n, off);
		if (err)
			goto out;
		XXH3_64bits_update(st, buf, n);
		off += n;
		if (off == blocks_len)
			zf->flat_hash_blocks = XXH3_64bits_digest(st);
	}
	zf->flat_hash_all = XXH3_64bits_digest(st);
	zf->flat = true;
	zf->size = size;
	zf->blkszbits = zc->blkszbits;
	zf->zc = zc;
	*out = zf;
	zf = NULL;
out:
	free(buf);
	XXH3_freeState(st);
	free(zf);
	return err;
}

/* The hash of the first @len bytes, if the worker took it. */
static bool flat_hash(const struct kiln_zfile *zf, uint64_t len, uint64_t *h)
{
	if (!zf || !zf->flat || !zf->zc->dd || !len)
		return false;
	if (len == zf->size)
		*h = zf->flat_hash_all;
	else if (len == (zf->size & ~(((uint64_t)1 << zf->blkszbits) - 1)))
		*h = zf->flat_hash_blocks;
	else
		return false;
	return true;
}

int kiln_zfile_flat_find(struct kiln_zfile *zf, uint64_t len,
			 int (*same)(void *ctx, uint64_t pstart), void *ctx,
			 uint64_t *pstart)
{
	uint64_t h;

	if (!flat_hash(zf, len, &h))
		return 0;
	return kiln_dedupe_find_flat(zf->zc->dd, len, h, same, ctx, pstart);
}

int kiln_zfile_flat_add(struct kiln_zfile *zf, uint64_t len, uint64_t pstart)
{
	uint64_t h;

	if (!flat_hash(zf, len, &h))
		return 0;
	return kiln_dedupe_add_flat(zf->zc->dd, len, h, pstart);
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
 * Dedupe keys of the held pclusters, computed where they were compressed
 * (a worker) so the writer only looks them up and confirms them.
 */
void kiln_zfile_hash_held(struct kiln_zfile *zf)
{
	for (size_t i = 0; i < zf->nr_ext; i++) {
		struct kiln_zext *e = &zf->ext[i];

		if (has_pcluster(e))
			e->hash = kiln_dedupe_hash(zf->held + e->pstart,
						    e->plen, e->llen, e->fmt);
	}
}

/*
 * Zero bytes to leave before a pcluster placed at relative byte @pos (its
 * block offset is the image's: the commit buffer starts on a block). Only
 * DEFLATE cares: its first non-zero byte must stay in the pcluster's
 * first block, and at least DEFLATE_LAST_PAGE_MIN stream bytes must land
 * on its last one (pcluster.c).
 */
static uint32_t place_gap(const struct kiln_zfile *zf,
			  const struct kiln_zext *e, const uint8_t *pc,
			  uint64_t pos)
{
	const uint32_t bs = 1u << zf->blkszbits;
	uint32_t lead = 0;

	if (e->fmt != Z_EROFS_COMPRESSION_DEFLATE + 1)
		return 0;
	while (lead < e->plen && !pc[lead])
		lead++;
	/*
	 * lead is at most 2 (the shift pcluster.c put there): at most 2 bytes
	 * reach the next block, 2 more fix the end.
	 */
	for (uint32_t g = 0; g <= 4; g++) {
		uint64_t s = pos + g, end = (s + e->plen) % bs;

		if (s % bs + lead < bs && (!end || end >= 3))
			return g;
	}
	return 0;	/* not reached */
}

/*
 * Commit with dedupe: a pcluster equal to one already in the image, or
 * to an earlier one of this commit, is referenced; the others are
 * appended in order, packed as they were (whole blocks in the classic
 * layout, bytes in the extent layout) and remembered.
 */
/*
 * Whether the pclusters kept can move down inside the held buffer itself:
 * no DEFLATE gap is added (place_gap()) and they come in buffer order, so
 * each lands at or below where it is read.
 */
static bool commit_in_place(const struct kiln_zfile *zf)
{
	uint64_t next = 0;

	for (size_t i = 0; i < zf->nr_ext; i++) {
		const struct kiln_zext *e = &zf->ext[i];

		if (!has_pcluster(e))
			continue;
		if (e->fmt == Z_EROFS_COMPRESSION_DEFLATE + 1 ||
		    e->pstart < next)
			return false;
		next = e->pstart + e->plen;
	}
	return true;
}

static int commit_dedupe(struct kiln_zfile *zf, struct kiln_out *out)
{
	const uint32_t bs = 1u << zf->blkszbits;
	struct kiln_dedupe *dd = zf->zc->dd;
	uint64_t total = 0;	/* bytes of pclusters, shared ones too */
	/* DEFLATE gaps are at most 4 bytes (place_gap()) */
	const size_t cap = zf->held_len + 4 * zf->nr_ext;
	/* a second buffer as big as the held one only when it must be */
	const bool in_place = commit_in_place(zf);
	uint8_t *buf = in_place ? zf->held : malloc(cap ? cap : 1);
	uint64_t len = 0, base = 0;
	kiln_blk_t blk;
	int err = 0;

	if (!buf)
		return -ENOMEM;
	for (size_t i = 0; i < zf->nr_ext && !err; i++) {
		struct kiln_zext *e = &zf->ext[i];
		const uint8_t *pc = zf->held + e->pstart;
		uint64_t addr;
		uint32_t gap;
		bool pending;

		if (e->flags & KILN_ZEXT_HOLE)
			e->pstart = len;
		if (!has_pcluster(e))
			continue;
		total += e->plen;
		err = kiln_dedupe_find(dd, out, buf, pc, e->plen, e->llen,
					e->fmt, e->hash, &addr, &pending);
		if (err > 0) {
			e->pstart = addr;
			e->flags |= KILN_ZEXT_SHARED;
			if (pending)
				e->flags |= KILN_ZEXT_LOCAL;
			err = 0;
			continue;
		}
		if (err)
			break;
		gap = place_gap(zf, e, pc, len);
		if (len + gap + e->plen > cap) {
			err = -EINVAL;
			break;
		}
		memset(buf + len, 0, gap);
		len += gap;
		memmove(buf + len, pc, e->plen);
		e->pstart = len;
		len += e->plen;
		err = kiln_dedupe_add_pending(dd, e->plen, e->llen, e->fmt,
					       e->hash, e->pstart);
	}
	if (!err && len) {
		err = kiln_out_append(out, buf, (size_t)len, &blk);
		base = (uint64_t)blk * bs;
	}
	if (!in_place)
		free(buf);
	/*
	 * Even after a failure no entry may stay relative to a buffer that
	 * is gone; a wrong address costs a comparison, never wrong data.
	 */
	kiln_dedupe_settle(dd, base);
	if (err)
		return err;
	for (size_t i = 0; i < zf->nr_ext; i++) {
		struct kiln_zext *e = &zf->ext[i];

		if (e->flags & (KILN_ZEXT_INLINE | KILN_ZEXT_FRAGMENT) ||
		    (e->flags & (KILN_ZEXT_SHARED | KILN_ZEXT_LOCAL)) ==
		    KILN_ZEXT_SHARED)
			continue;
		e->pstart += base;
		e->flags &= (uint8_t)~KILN_ZEXT_LOCAL;
	}
	free(zf->held);
	zf->held = NULL;
	zf->held_len = 0;
	/* i_u: the blocks the file's pclusters take, wherever they are */
	zf->blocks = kiln_div_round_up(total, bs);
	kiln_zindex_choose(zf);
	return 0;
}

/*
 * The first part of a file of several that stayed all raw: its pclusters
 * are the file's first bytes in order, from relative offset 0.
 */
static bool raw_first_part(const struct kiln_zfile *zf)
{
	const uint32_t bs = 1u << zf->blkszbits;

	if (zf->seg_off || !(zf->seg & KILN_ZSEG_KEEP) || !zf->nr_ext ||
	    zf->size % bs || zf->held_len < zf->size)
		return false;
	for (size_t i = 0; i < zf->nr_ext; i++) {
		const struct kiln_zext *e = &zf->ext[i];

		if (e->fmt || e->flags || e->pstart != e->lstart)
			return false;
	}
	return true;
}

/*
 * Such a part once placed, when its blocks are its own and in order: a
 * copy of them for files stored uncompressed to share (dedupe), as if
 * the part had been written uncompressed.
 */
static int add_raw_first_part(struct kiln_zfile *zf, uint64_t hash)
{
	const uint64_t at = zf->ext[0].pstart;

	if (at % (1u << zf->blkszbits))
		return 0;
	for (size_t i = 0; i < zf->nr_ext; i++) {
		const struct kiln_zext *e = &zf->ext[i];

		if ((e->flags & KILN_ZEXT_SHARED) || e->pstart != at + e->lstart)
			return 0;
	}
	return kiln_dedupe_add_flat(zf->zc->dd, zf->size, hash, at);
}

int kiln_zfile_commit(struct kiln_zfile *zf, struct kiln_out *out)
{
	const uint32_t bs = 1u << zf->blkszbits;
	kiln_blk_t blk;
	uint64_t base;
	int err;

	err = kiln_zfile_place_fragment(zf, true);
	if (err || !zf->held)
		return err;
	if (zf->zc->dd) {
		bool raw = raw_first_part(zf);
		uint64_t h = raw ? XXH3_64bits(zf->held, (size_t)zf->size) : 0;

		err = commit_dedupe(zf, out);
		if (!err && raw)
			err = add_raw_first_part(zf, h);
		return err;
	}
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

/* Write the whole blocks @bp holds; keep the partial last one. */
static int bytepack_flush(struct kiln_bytepack *bp, struct kiln_out *out,
			  bool all)
{
	const unsigned int bits = kiln_out_blkszbits(out);
	size_t whole = all ? bp->len : bp->len >> bits << bits;
	kiln_blk_t blk;
	int err;

	if (!whole)
		return 0;
	err = kiln_out_append(out, bp->buf, whole, &blk);
	if (err)
		return err;
	if ((uint64_t)blk << bits != bp->addr)
		return -EIO;	/* something else appended in between */
	whole = (size_t)kiln_round_up(whole, 1u << bits);
	if (whole >= bp->len) {
		bp->len = 0;
	} else {
		memmove(bp->buf, bp->buf + whole, bp->len - whole);
		bp->len -= whole;
	}
	bp->addr += whole;
	return 0;
}

int kiln_zfile_commit_bytes(struct kiln_zfile *zf, struct kiln_out *out,
			    struct kiln_bytepack *bp)
{
	/* DEFLATE gaps are at most 4 bytes (place_gap()) */
	const size_t need = bp->len + zf->held_len + 4 * (size_t)zf->nr_ext;

	if (zf->frag || zf->idata)
		return -EINVAL;
	if (!bp->started) {
		bp->addr = (uint64_t)kiln_out_next_blk(out) << zf->blkszbits;
		bp->started = true;
	}
	if (KILN_GROW(bp->buf, bp->cap, need))
		return -ENOMEM;
	for (size_t i = 0; i < zf->nr_ext; i++) {
		struct kiln_zext *e = &zf->ext[i];
		struct kiln_zext at = *e;
		const uint8_t *pc = zf->held + e->pstart;
		uint32_t gap;

		if (!has_pcluster(e))
			continue;
		if (e->pstart + e->plen > zf->held_len)
			return -EINVAL;
		if (!e->fmt) {
			if (e->llen > e->plen)
				return -EINVAL;
			at.plen = e->llen;	/* raw: the bytes themselves */
		}
		while (e->fmt && at.plen && !*pc) {
			pc++;
			at.plen--;
		}
		gap = place_gap(zf, &at, pc, bp->len);
		memset(bp->buf + bp->len, 0, gap);
		bp->len += gap;
		memcpy(bp->buf + bp->len, pc, at.plen);
		e->pstart = bp->addr + bp->len;
		e->plen = at.plen;
		bp->len += at.plen;
		bp->total += gap + at.plen;
	}
	free(zf->held);
	zf->held = NULL;
	zf->held_len = 0;
	zf->blocks = 0;		/* the whole file's: kiln_bytepack_finish() */
	return bytepack_flush(bp, out, false);
}

int kiln_bytepack_finish(struct kiln_bytepack *bp, struct kiln_out *out)
{
	int err = bytepack_flush(bp, out, true);

	free(bp->buf);
	bp->buf = NULL;
	bp->cap = 0;
	return err;
}

int kiln_zfile_write(struct kiln_zctx *zc, struct kiln_out *out,
		     kiln_src_read_fn read, void *read_ctx, uint64_t size,
		     struct kiln_zfile **out_zf)
{
	return zfile_write(zc, out, read, read_ctx, size, NULL, out_zf);
}

static int zfile_write(struct kiln_zctx *zc, struct kiln_out *out,
		       kiln_src_read_fn read, void *read_ctx, uint64_t size,
		       const struct kiln_zcuts *cuts,
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
	/*
	 * Dedupe decides where pclusters go at commit time, in commit order.
	 * A file the writer streams to the image itself (tar input, the
	 * packed inode) is held whole for that only up to a bound, so memory
	 * stays flat; a bigger one is written as it compresses.
	 */
	pack_out = zc->dd && (!out || size <= STREAM_DEDUPE_MAX) ? NULL : out;
	if (zc->layout == KILN_COMPRESS_LAYOUT_EXTENTS)
		err = kiln_pcluster_extents(zc, pack_out, read, read_ctx, zf,
					    cuts);
	else
		err = kiln_pcluster_classic(zc, pack_out, read, read_ctx, zf,
					    cuts);
	kiln_zindex_choose(zf);
	if (!err && !pack_out && zc->dd)
		kiln_zfile_hash_held(zf);
	if (!err && out && !pack_out)
		err = kiln_zfile_commit(zf, out);
	else if (!err && out)
		err = kiln_zfile_place_fragment(zf, false);
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
	kiln_zfile_release_ext(zf);
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
