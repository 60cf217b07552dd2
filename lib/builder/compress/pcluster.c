// SPDX-License-Identifier: MIT
/*
 * Cuts a file's bytes into extents, compresses each into a pcluster and
 * appends the pclusters to the image: fixed-output pclusters of whole
 * blocks (classic layout) or fixed-input extents packed byte by byte (the
 * 48-bit extent layout). Data that does not compress well enough is
 * stored raw.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "builder/compress/internal.h"
#include "builder/output.h"
#include "format/erofs_fs.h"
#include "util/checked.h"
#include "util/grow.h"

/*
 * Output is held back until a pcluster compresses: a file whose pclusters
 * all come out raw is then given back to the caller (stored uncompressed)
 * without having spent image space. Written straight to the image, a file
 * is given back once this much is held raw (memory stays bounded); held
 * output goes to the image in steps of ZSINK_FLUSH.
 */
#define ZSINK_HOLD_MAX	KILN_ZSEG_SIZE
#define ZSINK_FLUSH	(1024u * 1024)
/*
 * Over a run of raw pclusters, compression is tried at growing distances:
 * after a failed try the next unit (a pcluster, or an extent) goes raw
 * untried, after the next failure two, then four ... up to
 * RAW_SKIP_MAX(unit) bytes. A try that succeeds ends the run: a bisection
 * over the bytes skipped finds the block where the data begins to
 * compress. Incompressible data then costs about one try per
 * RAW_SKIP_MAX bytes, and a compressible region after it loses at most a
 * block. Classic: at most max_in, so skipped bytes and the try fit in the
 * input window.
 */
#define RAW_SKIP_MAX(unit)	KILN_MAX(1024u * 1024, 8 * (unit))
#define RAW_SKIP_MAX_EXT(L)	KILN_MAX(1024u * 1024, 4 * (L))
/*
 * Classic ztailpacking: the remainder is tried inline when it is at most
 * this many blocks; a fixed-output pcluster that takes all the rest is
 * inlined when its stream fits. ZTAIL_ROOM bytes of the block are left for
 * the inode core, xattrs and map next to an inline pcluster.
 */
#define ZTAIL_TRY_BLKS	2u
/*
 * Fragments: a remainder of at most this many bytes goes to the packed
 * inode as it is. It would mostly end there anyway: a remainder that
 * compresses into one pcluster becomes a fragment whole, so compressing
 * it here first is work thrown away (most files of a source tree).
 */
#define FRAG_TAIL_MAX(pcluster)	(4 * (uint64_t)(pcluster))
/* Input first offered to a classic pcluster, at least (classic_want()). */
#define CLASSIC_WANT_MIN	(1024u * 1024)
#define ZTAIL_ROOM	256u
/*
 * DEFLATE streams are fed to the kernel page by page; if the output is
 * complete before the page with the stream's last bits is fed, a full
 * decode fails (format notes 8.3). With at least this many stream bytes on
 * the last page, the last literal or match ends there (end-of-block code
 * and padding take under 3 bytes), so the output cannot fill up early.
 */
#define DEFLATE_LAST_PAGE_MIN	3u

/* ---- input window ---- */

/*
 * The window holds at most @cap bytes (twice the input a pcluster may
 * take), but grows only as far as the requests go: a request is read
 * together with as much again after it, so the bytes kept and moved at
 * each refill are about what was consumed since the last.
 */
struct zin {
	kiln_src_read_fn read;
	void *ctx;
	uint64_t size;
	uint8_t *buf;
	size_t cap;		/* bound on the window */
	size_t alloc;		/* bytes allocated at buf */
	uint64_t start;		/* file offset of buf[0] */
	size_t len;		/* valid bytes in buf */
};

static int zin_init(struct zin *in, kiln_src_read_fn read, void *ctx,
		    uint64_t size, size_t cap)
{
	memset(in, 0, sizeof(*in));
	in->read = read;
	in->ctx = ctx;
	in->size = size;
	in->cap = (size_t)KILN_MIN((uint64_t)cap, size);
	return 0;
}

/* Make bytes [pos, pos + want) (clipped at EOF) available at *@p. */
static int zin_get(struct zin *in, uint64_t pos, size_t want,
		   const uint8_t **p)
{
	uint64_t end = KILN_MIN(in->size, pos + want);
	int err;

	if (end - pos > in->cap || pos < in->start)
		return -EINVAL;
	if (end > in->start + in->len) {
		size_t keep = 0, n, fill;

		fill = (size_t)KILN_MIN(KILN_MIN((uint64_t)in->cap,
						 2 * (end - pos)),
					in->size - pos);
		if (pos < in->start + in->len)
			keep = (size_t)(in->start + in->len - pos);
		if (fill > in->alloc) {
			/* only the bytes kept move: realloc would copy all */
			uint8_t *nb = malloc(fill);

			if (!nb)
				return -ENOMEM;
			if (keep)
				memcpy(nb, in->buf + (pos - in->start), keep);
			free(in->buf);
			in->buf = nb;
			in->alloc = fill;
		} else {
			memmove(in->buf, in->buf + (pos - in->start), keep);
		}
		in->start = pos;
		in->len = keep;
		n = fill - keep;
		err = in->read(in->ctx, in->buf + keep, n, pos + keep);
		if (err)
			return err;
		in->len += n;
	}
	*p = in->buf + (pos - in->start);
	return 0;
}

/* ---- output: pclusters appended in order, held back at first ---- */

struct zsink {
	struct kiln_out *out;
	uint32_t bs;
	uint8_t *buf;
	size_t len, cap;
	uint64_t flushed;	/* bytes handed to the image */
	uint64_t base;		/* byte address of relative offset 0 */
	bool started;		/* base is known */
	bool decided;		/* the file stays compressed */
};

static int zsink_reserve(struct zsink *s, size_t n, uint8_t **p, uint64_t *rel)
{
	if (KILN_GROW(s->buf, s->cap, s->len + n))
		return -ENOMEM;
	*p = s->buf + s->len;
	*rel = s->flushed + s->len;
	s->len += n;
	return 0;
}

/* Append the buffered whole blocks (all of it, padded, when @final). */
static int zsink_flush(struct zsink *s, bool final)
{
	size_t n = final ? s->len : s->len / s->bs * s->bs;
	kiln_blk_t blk;
	int err;

	if (!n)
		return 0;
	err = kiln_out_append(s->out, s->buf, n, &blk);
	if (err)
		return err;
	if (!s->started) {
		s->base = (uint64_t)blk * s->bs;
		s->started = true;
	} else if ((uint64_t)blk * s->bs != s->base + s->flushed) {
		/* someone appended in between: our addresses are wrong */
		return -EIO;
	}
	s->flushed += kiln_round_up(n, s->bs);
	memmove(s->buf, s->buf + n, s->len - n);
	s->len -= n;
	return 0;
}

static int zsink_maybe_flush(struct zsink *s)
{
	/* no image yet (kiln_zfile_compress()): keep everything */
	if (!s->out || !s->decided || s->len < ZSINK_FLUSH)
		return 0;
	return zsink_flush(s, false);
}

/* ---- shared helpers ---- */

struct zpack {
	struct kiln_zctx *zc;
	struct kiln_zfile *zf;
	struct zin in;
	struct zsink sink;
	void *ws;		/* compress workspace */
	const struct kiln_zcuts *cuts;	/* extents end there; NULL: none */
	size_t next_cut;	/* cuts->at[] not yet passed */
	uint8_t *tmp;		/* compressor output */
	size_t tmp_cap;
	/* fixed-output search state of this stream (the classic layout) */
	struct kiln_destsize_hint hint;
	uint64_t raw_skip;	/* bytes the next raw run skips; 0: one unit */
	bool any_compressed;
};

static int zpack_init(struct zpack *z, struct kiln_zctx *zc,
		      struct kiln_out *out, kiln_src_read_fn read,
		      void *read_ctx, struct kiln_zfile *zf, size_t win)
{
	int err;

	memset(z, 0, sizeof(*z));
	z->zc = zc;
	z->zf = zf;
	z->sink.out = out;
	z->sink.bs = kiln_zctx_blksz(zc);
	z->tmp_cap = Z_EROFS_PCLUSTER_MAX_SIZE;
	z->tmp = malloc(z->tmp_cap);
	if (!z->tmp)
		return -ENOMEM;
	err = zin_init(&z->in, read, read_ctx, zf->size, win);
	if (err)
		return err;
	z->ws = kiln_zctx_get_ws(zc);
	/*
	 * a later segment of a file that already proved compressible, or a
	 * first one whose file compresses further on
	 */
	z->sink.decided = (zf->seg & (KILN_ZSEG_CONT | KILN_ZSEG_KEEP)) != 0;
	return 0;
}

static void zpack_release(struct zpack *z)
{
	if (z->ws)
		kiln_zctx_put_ws(z->zc, z->ws);
	free(z->in.buf);
	free(z->sink.buf);
	free(z->tmp);
}

/*
 * A raw DEFLATE stream that opens with a non-final stored block starts
 * with a zero byte, which a reader would skip as padding: set one of the
 * bits that pad the block header to a byte boundary (ignored by decoders).
 */
static bool stream_fixup(const struct kiln_zctx *zc, uint8_t *s, size_t len)
{
	if (!len)
		return false;
	if (!s[0] && zc->ops->erofs_alg == Z_EROFS_COMPRESSION_DEFLATE)
		s[0] = 0x08;
	return s[0] != 0;
}

static int add_extent(struct zpack *z, uint64_t lstart, uint32_t llen,
		      uint64_t rel, uint32_t plen, uint8_t fmt, uint8_t flags)
{
	struct kiln_zext e = {
		.lstart = lstart, .llen = llen, .pstart = rel, .plen = plen,
		.fmt = fmt, .flags = flags,
	};

	/*
	 * a fragment after raw pclusters saves the tail's block only, as an
	 * uncompressed file's inline tail would
	 */
	if (fmt && (!(flags & KILN_ZEXT_FRAGMENT) || !lstart))
		z->any_compressed = true;
	return kiln_zfile_add(z->zf, &e);
}

static uint64_t to_next_cut(struct zpack *z, uint64_t pos);
static bool starts_at_cut(const struct zpack *z, uint64_t pos);

/*
 * Whether to keep going compressed: once ZSINK_FLUSH bytes are held and a
 * pcluster has compressed, the file stays compressed (a smaller one is
 * judged whole by zpack_finish()). Written straight to the image, a file
 * whose first ZSINK_HOLD_MAX bytes all stay raw is handed back (returns 1).
 */
static int zpack_check_hold(struct zpack *z)
{
	if (z->sink.decided)
		return 0;
	if (z->any_compressed) {
		z->sink.decided = z->sink.len >= ZSINK_FLUSH;
		return 0;
	}
	return z->sink.out && z->sink.len >= ZSINK_HOLD_MAX;
}

/* After each pcluster: decide whether to stay compressed, then flush. */
static int zpack_after_put(struct zpack *z)
{
	int err = zpack_check_hold(z);

	return err ? err : zsink_maybe_flush(&z->sink);
}

/*
 * Turn relative pcluster offsets into image addresses, count blocks. The
 * file stays compressed when that saves at least one block.
 */
static int zpack_finish(struct zpack *z)
{
	struct kiln_zfile *zf = z->zf;
	uint64_t raw_blocks = kiln_div_round_up(zf->size, z->sink.bs);
	int err;

	if (!z->sink.decided) {
		uint64_t blocks = kiln_div_round_up(z->sink.flushed + z->sink.len,
						    z->sink.bs);

		if (!z->any_compressed || blocks >= raw_blocks)
			return 1;
	}
	if (!z->sink.out) {
		/* held for kiln_zfile_commit(); addresses stay relative */
		zf->held = z->sink.buf;
		zf->held_len = z->sink.len;
		z->sink.buf = NULL;
		zf->blocks = kiln_div_round_up(zf->held_len, z->sink.bs);
		return 0;
	}
	err = zsink_flush(&z->sink, true);
	if (err)
		return err;
	for (size_t i = 0; i < zf->nr_ext; i++) {
		struct kiln_zext *e = &zf->ext[i];

		if (!(e->flags & (KILN_ZEXT_INLINE | KILN_ZEXT_FRAGMENT)))
			e->pstart += z->sink.base;
	}
	zf->blocks = z->sink.flushed / z->sink.bs;
	return 0;
}

/* ---- classic layout: fixed-output pclusters of whole blocks ---- */

/* Keep a compressed pcluster only if it saves at least the margin. */
static bool classic_worth(const struct kiln_zctx *zc, uint64_t in_len,
			  size_t out_len)
{
	uint32_t bs = kiln_zctx_blksz(zc);
	uint64_t saved_raw = kiln_round_up(in_len, bs);
	uint64_t used = kiln_round_up(out_len, bs);

	return used < saved_raw && saved_raw - used >= zc->raw_margin;
}

/* Largest inline pcluster: room is left for the inode and its map. */
static uint32_t inline_cap(const struct kiln_zctx *zc)
{
	return kiln_zctx_blksz(zc) - ZTAIL_ROOM;
}

/* Make [pos, size) the inline tail extent, its pcluster @data. */
static int set_inline(struct zpack *z, uint64_t pos, uint32_t llen,
		      const uint8_t *data, uint32_t plen, uint8_t fmt)
{
	struct kiln_zfile *zf = z->zf;

	/* inline_cap() keeps it below a block, so below 64 KiB */
	if (plen > UINT16_MAX)
		return -EINVAL;
	zf->idata = malloc(plen);
	if (!zf->idata)
		return -ENOMEM;
	memcpy(zf->idata, data, plen);
	zf->idata_size = (uint16_t)plen;
	return add_extent(z, pos, llen, 0, plen, fmt, KILN_ZEXT_INLINE);
}

/*
 * Make [pos, size) the tail extent kept in the packed inode (fragments):
 * the bytes are held until commit, which gives them their offset. From
 * offset 0 of a whole file, the whole file is a fragment.
 */
static int set_fragment(struct zpack *z, uint64_t pos, const uint8_t *data,
			uint32_t len)
{
	struct kiln_zfile *zf = z->zf;

	zf->frag = malloc(len);
	if (!zf->frag)
		return -ENOMEM;
	memcpy(zf->frag, data, len);
	zf->frag_len = len;
	if (!pos && !(zf->seg & KILN_ZSEG_CONT))
		zf->kind = KILN_ZMAP_FRAGMENT;
	/*
	 * A HEAD1 record: Linux takes a PLAIN head's pcluster length (none
	 * here) for its size and refuses the extent as longer than that.
	 */
	return add_extent(z, pos, len, 0, 0,
			  (uint8_t)(z->zc->ops->erofs_alg + 1),
			  KILN_ZEXT_FRAGMENT);
}

/* Whether @zf's tail may go to the packed inode (never the packed inode's). */
static bool use_fragments(const struct kiln_zctx *zc,
			  const struct kiln_zfile *zf)
{
	return (zc->flags & KILN_COMPRESS_FRAGMENTS) && zc->frag &&
	       !(zf->seg & (KILN_ZSEG_MORE | KILN_ZSEG_PACKED));
}

/*
 * Try to store all of the last @rem bytes inline (ztailpacking), before
 * the fixed-output compressor would give them a block of their own:
 * compressed if that is smaller, else raw if they fit.
 */
static int classic_try_inline(struct zpack *z, uint64_t pos,
			      const uint8_t *src, uint32_t rem, bool *done)
{
	struct kiln_zctx *zc = z->zc;
	uint32_t cap = KILN_MIN(inline_cap(zc), rem - 1);
	ssize_t r = -ENOSPC;

	*done = false;
	if (cap && zc->ops->compress)
		r = zc->ops->compress(z->ws, zc->params.level, z->tmp, cap,
				      src, rem);
	if (r < 0 && r != -ENOSPC)
		return (int)r;
	if (r > 0 && stream_fixup(zc, z->tmp, (size_t)r)) {
		*done = true;
		return set_inline(z, pos, rem, z->tmp, (uint32_t)r,
				  (uint8_t)(zc->ops->erofs_alg + 1));
	}
	if (rem > inline_cap(zc))
		return 0;
	*done = true;
	return set_inline(z, pos, rem, src, rem, 0);
}

/*
 * Bytes to store raw from @pos after compression did not pay off on
 * @consumed bytes: the whole blocks of that input (at least one, at most a
 * pcluster's worth), without compressing them again. They go out as
 * one-block PLAIN pclusters: multi-block PLAIN pclusters are read by Linux
 * 6.x, but not by older kernels nor erofs-utils 1.5.
 */
static uint64_t classic_raw_len(const struct kiln_zctx *zc, uint64_t pos,
				uint64_t size, uint64_t consumed)
{
	const uint32_t bs = kiln_zctx_blksz(zc);
	uint64_t len = consumed / bs * bs;

	len = KILN_MAX(len, (uint64_t)bs);
	len = KILN_MIN(len, (uint64_t)zc->pcluster_size);
	return KILN_MIN(len, size - pos);
}

static int classic_put(struct zpack *z, uint64_t pos, const uint8_t *src,
		       uint64_t in_len, ssize_t out_len)
{
	const uint32_t bs = z->sink.bs;
	struct kiln_zctx *zc = z->zc;
	uint8_t *p;
	uint64_t rel;
	uint32_t plen;
	int err;

	if (out_len > 0) {
		/* stream at the end, zeros in front (LZ4_0PADDING) */
		plen = (uint32_t)kiln_round_up((uint64_t)out_len, bs);
		err = zsink_reserve(&z->sink, plen, &p, &rel);
		if (err)
			return err;
		memset(p, 0, plen - (size_t)out_len);
		memcpy(p + plen - out_len, z->tmp, (size_t)out_len);
		return add_extent(z, pos, (uint32_t)in_len, rel, plen,
				  (uint8_t)(zc->ops->erofs_alg + 1), 0);
	}
	for (uint64_t done = 0; done < in_len; done += bs) {
		uint32_t n = (uint32_t)KILN_MIN((uint64_t)bs, in_len - done);

		err = zsink_reserve(&z->sink, bs, &p, &rel);
		if (err)
			return err;
		memcpy(p, src + done, n);
		memset(p + n, 0, bs - n);
		err = add_extent(z, pos + done, n, rel, bs, 0, 0);
		if (err)
			return err;
	}
	return 0;
}

/*
 * Fill at most @cap bytes of z->tmp from @src (*@in_len: available in,
 * consumed out). Returns the stream length, -ENOSPC when the result is not
 * worth keeping compressed, or another negative errno.
 */
static ssize_t classic_compress(struct zpack *z, const uint8_t *src,
				size_t *in_len, uint32_t cap)
{
	struct kiln_zctx *zc = z->zc;
	ssize_t r;

	/* codecs without a native mode search over prefixes (codec.c) */
	r = kiln_codec_compress_destsize(zc->ops, z->ws, zc->params.level,
					 z->tmp, cap, src, in_len, &z->hint);
	if (r > 0 && (!stream_fixup(zc, z->tmp, (size_t)r) ||
		      !classic_worth(zc, *in_len, (size_t)r)))
		r = -ENOSPC;
	return r;
}

/* Whether a pcluster (or extent) starting @at bytes into @src compresses. */
typedef int (*skip_try_fn)(struct zpack *z, const uint8_t *src, uint64_t at,
			   uint64_t avail);

/*
 * After a raw run whose try at @jump compressed: the first block in
 * [0, @jump) of @src from which @try compresses too, by bisection (the
 * try at @jump stands for "compresses from hi"). Returns that offset or a
 * negative errno.
 */
static int64_t first_compressing(struct zpack *z, const uint8_t *src,
				 uint64_t jump, uint64_t want, skip_try_fn try)
{
	const uint32_t bs = z->sink.bs;
	uint64_t lo = 0, hi = jump;

	while (hi - lo > bs) {
		uint64_t mid = lo + (hi - lo) / bs / 2 * bs;
		int ok = try(z, src, mid, want);

		if (ok < 0)
			return ok;
		if (ok)
			hi = mid;
		else
			lo = mid;
	}
	return (int64_t)hi;
}

/*
 * Whether a pcluster starting @at bytes into @src would compress; @src
 * holds @avail bytes. 1 yes, 0 no, or a negative errno.
 */
static int classic_try(struct zpack *z, const uint8_t *src, uint64_t at,
		       uint64_t avail)
{
	size_t in_len = (size_t)KILN_MIN(avail - at, (uint64_t)z->zc->max_in);
	ssize_t r;

	r = classic_compress(z, src + at, &in_len, z->zc->pcluster_size);
	if (r < 0 && r != -ENOSPC)
		return (int)r;
	return r > 0;
}

/*
 * A raw run from *@pos (the pcluster before it came out raw): store the
 * next z->raw_skip bytes raw untried, then try again, doubling the skip
 * each time (RAW_SKIP_MAX above). When a try compresses, bisect the bytes
 * skipped for the first block that does, store the blocks before it raw
 * and return with *@pos there. Stops short of @lim, where the file's tail
 * takes the usual path. 0, 1 (handed back, zpack_after_put()) or -errno.
 */
static int classic_skip(struct zpack *z, uint64_t *pos, uint64_t lim)
{
	struct kiln_zctx *zc = z->zc;
	const uint32_t bs = z->sink.bs;
	const uint64_t size = z->zf->size;
	const uint64_t max = KILN_MIN((uint64_t)RAW_SKIP_MAX(zc->pcluster_size),
				      (uint64_t)zc->max_in);
	/* a try needs one pcluster's input, not all that would fit */
	const uint64_t try_len = KILN_MIN(KILN_MAX((uint64_t)CLASSIC_WANT_MIN,
						   8 * (uint64_t)zc->pcluster_size),
					  (uint64_t)zc->max_in);

	for (;;) {
		uint64_t p0 = *pos, jump, want, raw;
		int64_t hi;
		const uint8_t *src;
		int ok, err;

		if (!z->raw_skip)
			z->raw_skip = zc->pcluster_size;
		if (p0 >= lim)
			return 0;
		jump = KILN_MIN(z->raw_skip, lim - p0) / bs * bs;
		if (!jump)
			return 0;
		want = KILN_MIN(jump + try_len, size - p0);
		err = zin_get(&z->in, p0, (size_t)want, &src);
		if (err)
			return err;
		z->raw_skip = KILN_MIN(2 * z->raw_skip, max);
		ok = classic_try(z, src, jump, want);
		if (ok < 0)
			return ok;
		if (!ok) {
			/* the try's input goes raw too, as the loop would */
			raw = classic_raw_len(zc, p0 + jump, size, want - jump);
			err = classic_put(z, p0, src, jump + raw, -ENOSPC);
			*pos = p0 + jump + raw;
			if (!err)
				err = zpack_after_put(z);
			if (err)
				return err;
			continue;
		}
		hi = first_compressing(z, src, jump, want, classic_try);
		if (hi < 0)
			return (int)hi;
		z->raw_skip = 0;
		err = classic_put(z, p0, src, hi, -ENOSPC);
		*pos = p0 + hi;
		return err ? err : zpack_after_put(z);
	}
}

/* One classic pass over a file: its pack state and what holds for all of it. */
struct classic {
	struct zpack z;
	bool frags;		/* the tail may go to the packed inode */
	bool tailpack;		/* the tail may go inline (ztailpacking) */
	bool any_cut;		/* extent records: a cut anywhere applies */
	bool shifted;		/* the file has cuts (shifted dedupe) */
	uint64_t skip_lim;	/* raw runs are skipped up to here */
};

/*
 * Input bytes for the pcluster at @pos: at most max_in, up to the next
 * cut when it applies (*@at_cut).
 */
static size_t classic_window(struct classic *c, uint64_t pos, bool *at_cut)
{
	struct zpack *z = &c->z;
	const struct kiln_zfile *zf = z->zf;
	uint64_t rem = zf->size - pos;
	size_t avail = (size_t)KILN_MIN(rem, (uint64_t)z->zc->max_in);
	uint64_t cut = to_next_cut(z, pos);

	/*
	 * Shifted dedupe: the pcluster ends at the next cut, so every copy
	 * of a shared chunk is packed from its first byte alike. Lcluster
	 * indexes hold one extent start an lcluster: unless the image maps
	 * files by extent records (48-bit), a cut in this pcluster's own
	 * lcluster is passed over.
	 */
	*at_cut = cut < avail &&
		  (c->any_cut ||
		   ((zf->seg_off + pos) >> zf->lclusterbits) !=
		   ((zf->seg_off + pos + cut) >> zf->lclusterbits));
	if (*at_cut)
		avail = (size_t)cut;
	/*
	 * A pcluster that starts at a cut is aimed afresh, so every copy of
	 * the chunk fills the same pclusters whatever came before it.
	 */
	if (starts_at_cut(z, pos))
		z->hint.last_in = z->hint.last_out = 0;
	return avail;
}

/*
 * Input offered first to the pcluster of @avail bytes at most: twice what
 * the last one took, and enough for the tail rules (FRAG_TAIL_MAX) and
 * raw pclusters, so a window of max_in is read only for data that
 * compresses that well. A pcluster that takes all it was offered is made
 * again from all of @avail (kiln_pcluster_classic()).
 */
static size_t classic_want(const struct classic *c, size_t avail)
{
	const struct zpack *z = &c->z;
	uint64_t want = KILN_MAX((uint64_t)CLASSIC_WANT_MIN,
				 8 * (uint64_t)z->zc->pcluster_size);

	want = KILN_MAX(want, 2 * (uint64_t)z->hint.last_in);
	return (size_t)KILN_MIN(want, (uint64_t)avail);
}

/*
 * The file's last bytes from *@pos, before they would be compressed into
 * pclusters: stored as a fragment or inline when they qualify. *@stored:
 * *@pos moved past what was stored (to the end for a tail).
 */
static int classic_tail(struct classic *c, uint64_t *pos, const uint8_t *src,
			size_t avail, bool *stored)
{
	struct zpack *z = &c->z;
	struct kiln_zctx *zc = z->zc;
	const uint32_t bs = z->sink.bs;
	const uint64_t size = z->zf->size;
	const uint64_t rem = size - *pos;
	bool done;
	int err;

	*stored = false;
	/*
	 * fragments: a remainder of at most FRAG_TAIL_MAX, raw (a pcluster
	 * in a file cut for shifted dedupe, where one that compresses is
	 * shared with the copies). In a file cut for shifted dedupe, one
	 * that does not compress keeps its whole blocks, which copies share,
	 * and only its last partial block goes to the packed inode.
	 */
	if (c->frags && rem <= zc->pcluster_size && rem >= bs && c->shifted) {
		size_t probe = avail;
		ssize_t r = classic_compress(z, src, &probe, zc->pcluster_size);

		if (r < 0 && r != -ENOSPC)
			return (int)r;
		if (r == -ENOSPC) {
			size_t in_len = rem / bs * bs;

			*stored = true;
			err = classic_put(z, *pos, src, in_len, r);
			*pos += in_len;
			return err ? err : zpack_after_put(z);
		}
	}
	if (c->frags && rem <= avail &&
	    rem <= (c->shifted ? (uint64_t)zc->pcluster_size :
				 FRAG_TAIL_MAX(zc->pcluster_size))) {
		err = set_fragment(z, *pos, src, (uint32_t)rem);
		*stored = true;
		*pos = size;
		return err;
	}
	if (!c->tailpack || rem > ZTAIL_TRY_BLKS * bs)
		return 0;
	err = classic_try_inline(z, *pos, src, (uint32_t)rem, &done);
	if (err || done) {
		*stored = true;
		*pos = size;
	}
	return err;
}

/*
 * Compress the pcluster at @pos from @avail bytes of @src: the stream
 * length with *@in_len bytes consumed, -ENOSPC to store raw, or another
 * negative errno. ztailpacking: a last pcluster of k blocks whose stream
 * is too big to inline becomes k-1 full blocks and a remainder small
 * enough to inline, when that works out.
 */
static ssize_t classic_pcluster(struct classic *c, uint64_t pos,
				const uint8_t *src, size_t avail,
				size_t *in_len)
{
	struct zpack *z = &c->z;
	struct kiln_zctx *zc = z->zc;
	const uint32_t bs = z->sink.bs;
	const uint64_t rem = z->zf->size - pos;
	size_t part = avail;
	ssize_t r, r2;

	*in_len = avail;
	r = classic_compress(z, src, in_len, zc->pcluster_size);
	if (r <= 0 || !c->tailpack || *in_len != rem ||
	    (size_t)r <= inline_cap(zc) || (size_t)r <= bs)
		return r;
	r2 = classic_compress(z, src, &part,
			      (uint32_t)kiln_round_up((uint64_t)r, bs) - bs);
	if (r2 > 0 && part < rem) {
		*in_len = part;
		return r2;
	}
	*in_len = avail;
	return classic_compress(z, src, in_len, zc->pcluster_size);
}

/*
 * Store the pcluster at *@pos that classic_pcluster() made (@r, @in_len),
 * or its input raw, and move *@pos past it: the last extent of a file
 * with fragments goes whole to the packed inode, one that fits inline
 * (ztailpacking) goes there; after a raw one, a raw run is skipped.
 */
static int classic_store(struct classic *c, uint64_t *pos, const uint8_t *src,
			 size_t avail, bool at_cut, size_t in_len, ssize_t r)
{
	struct zpack *z = &c->z;
	struct kiln_zctx *zc = z->zc;
	const uint64_t size = z->zf->size;
	const uint64_t rem = size - *pos;
	uint64_t at = *pos;
	int err;

	if (r > 0 && c->frags && in_len == rem) {
		*pos = size;
		return set_fragment(z, at, src, (uint32_t)rem);
	}
	if (r > 0 && c->tailpack && in_len == rem &&
	    (size_t)r <= inline_cap(zc)) {
		*pos = size;
		return set_inline(z, at, (uint32_t)rem, z->tmp, (uint32_t)r,
				  (uint8_t)(zc->ops->erofs_alg + 1));
	}
	if (r <= 0) {
		in_len = classic_raw_len(zc, at, size,
					 r == -ENOSPC ? avail : in_len);
		if (at_cut)
			in_len = KILN_MIN(in_len, avail);
	} else {
		z->raw_skip = 0;
	}
	err = classic_put(z, at, src, in_len, r);
	*pos = at + in_len;
	if (!err)
		err = zpack_after_put(z);
	/* shared chunks are packed alike from every cut: no skipping */
	if (!err && r <= 0 && !c->shifted)
		err = classic_skip(z, pos, c->skip_lim);
	return err;
}

int kiln_pcluster_classic(struct kiln_zctx *zc, struct kiln_out *out,
			  kiln_src_read_fn read, void *read_ctx,
			  struct kiln_zfile *zf, const struct kiln_zcuts *cuts)
{
	const uint32_t bs = kiln_zctx_blksz(zc);
	/* the tail (inline, fragment, last pclusters) is never skipped */
	const uint64_t tail_len = 2 * (uint64_t)zc->pcluster_size +
				  ZTAIL_TRY_BLKS * bs;
	struct classic c;
	uint64_t pos = 0;
	int err;

	zf->kind = KILN_ZMAP_COMPACT;
	zf->lclusterbits = zc->blkszbits;
	zf->big = zc->pcluster_size > bs;
	zf->alg = zc->ops->erofs_alg;
	err = zpack_init(&c.z, zc, out, read, read_ctx, zf,
			 2 * (size_t)zc->max_in);
	c.frags = use_fragments(zc, zf);
	/*
	 * Only a file's last segment may end in an inline tail, and a tail
	 * goes inline or to the packed inode, not both.
	 */
	c.tailpack = (zc->flags & KILN_COMPRESS_ZTAILPACKING) &&
		     !(zf->seg & KILN_ZSEG_MORE) && !c.frags;
	c.any_cut = kiln_zctx_48bit(zc);
	c.shifted = cuts && cuts->nr;
	c.skip_lim = zf->size > tail_len ? zf->size - tail_len : 0;
	/* probes may fill z.tmp, and the pclusters are stored by blocks */
	c.z.hint.dst_room = c.z.tmp_cap;
	c.z.hint.unit = bs;
	c.z.cuts = cuts;
	if (c.shifted)
		c.z.sink.decided = true;
	while (!err && pos < zf->size) {
		bool at_cut, stored;
		size_t avail = classic_window(&c, pos, &at_cut), in_len;
		size_t want = classic_want(&c, avail);
		const uint8_t *src;
		ssize_t r;

		/* a remainder stored raw may run past a cut (classic_tail()) */
		err = zin_get(&c.z.in, pos,
			      KILN_MAX(want, (size_t)KILN_MIN(zf->size - pos,
							      (uint64_t)zc->pcluster_size)),
			      &src);
		if (!err)
			err = classic_tail(&c, &pos, src, want, &stored);
		if (err || stored)
			continue;
		r = classic_pcluster(&c, pos, src, want, &in_len);
		/* it took all it was offered: offer it all */
		if (r > 0 && in_len == want && want < avail) {
			want = avail;
			err = zin_get(&c.z.in, pos, want, &src);
			if (err)
				continue;
			r = classic_pcluster(&c, pos, src, want, &in_len);
		}
		if (r < 0 && r != -ENOSPC)
			err = (int)r;
		else
			err = classic_store(&c, &pos, src, want, at_cut,
					    in_len, r);
	}
	if (!err)
		err = zpack_finish(&c.z);
	zpack_release(&c.z);
	return err;
}

/* ---- extent layout: fixed-input extents, byte-packed pclusters ---- */

static bool all_zero(const uint8_t *p, size_t n)
{
	return n && !p[0] && !memcmp(p, p + 1, n - 1);
}

/*
 * Compress one extent of @llen bytes into z->tmp. Returns the stream
 * length, or -ENOSPC when it does not save the margin.
 */
static ssize_t extent_compress(struct zpack *z, const uint8_t *src,
			       uint32_t llen)
{
	struct kiln_zctx *zc = z->zc;
	size_t cap, in = llen;
	ssize_t r;

	if (llen <= zc->raw_margin)
		return -ENOSPC;
	/* leave room for the DEFLATE page shift and unaligned spans */
	cap = KILN_MIN((size_t)(llen - zc->raw_margin),
		       (size_t)Z_EROFS_PCLUSTER_MAX_SIZE - kiln_zctx_blksz(zc));
	if (zc->ops->compress) {
		r = zc->ops->compress(z->ws, zc->params.level, z->tmp,
				      cap, src, llen);
	} else {
		r = zc->ops->compress_destsize(z->ws, zc->params.level,
					       z->tmp, cap, src, &in);
		if (r >= 0 && in != llen)
			r = -ENOSPC;
	}
	if (r > 0 && !stream_fixup(zc, z->tmp, (size_t)r))
		r = -ENOSPC;
	return r;
}

/* Zero bytes to put before a stream starting at relative offset @rel. */
static int deflate_shift(const struct zpack *z, uint64_t rel, size_t len)
{
	const uint32_t bs = z->sink.bs;
	uint64_t tail = (rel + len) % bs;
	uint32_t shift;

	if (z->zc->ops->erofs_alg != Z_EROFS_COMPRESSION_DEFLATE ||
	    !tail || tail >= DEFLATE_LAST_PAGE_MIN)
		return 0;
	shift = DEFLATE_LAST_PAGE_MIN - (uint32_t)tail;
	/* the first non-zero byte must stay in the pcluster's first block */
	if (rel % bs + shift >= bs)
		return -1;
	return (int)shift;
}

static int extent_put(struct zpack *z, uint64_t lstart, const uint8_t *src,
		      uint32_t llen, ssize_t r)
{
	uint64_t rel = z->sink.flushed + z->sink.len;
	uint8_t *p;
	int shift = 0, err;

	if (r > 0) {
		shift = deflate_shift(z, rel, (size_t)r);
		if (shift < 0)
			r = -ENOSPC;
	}
	if (r > 0) {
		uint32_t plen = (uint32_t)r + (uint32_t)shift;

		err = zsink_reserve(&z->sink, plen, &p, &rel);
		if (err)
			return err;
		memset(p, 0, (size_t)shift);
		memcpy(p + shift, z->tmp, (size_t)r);
		return add_extent(z, lstart, llen, rel, plen,
				  (uint8_t)(z->zc->ops->erofs_alg + 1), 0);
	}
	err = zsink_reserve(&z->sink, llen, &p, &rel);
	if (err)
		return err;
	memcpy(p, src, llen);
	return add_extent(z, lstart, llen, rel, llen, 0, 0);
}

/*
 * Bytes from @pos (in the part) to the next cut after it, or UINT64_MAX.
 * Positions only grow, so the cuts are walked once.
 */
static uint64_t to_next_cut(struct zpack *z, uint64_t pos)
{
	const struct kiln_zcuts *c = z->cuts;
	uint64_t at = z->zf->seg_off + pos;

	if (!c)
		return UINT64_MAX;
	while (z->next_cut < c->nr && c->at[z->next_cut] <= at)
		z->next_cut++;
	return z->next_cut < c->nr ? c->at[z->next_cut] - at : UINT64_MAX;
}

/* Whether a cut lies exactly at @pos (the cut last passed by to_next_cut). */
static bool starts_at_cut(const struct zpack *z, uint64_t pos)
{
	const struct kiln_zcuts *c = z->cuts;

	return c && z->next_cut &&
	       c->at[z->next_cut - 1] == z->zf->seg_off + pos;
}

/* Whether the extent starting @at bytes into @src (@avail bytes) would compress. */
static int extent_try(struct zpack *z, const uint8_t *src, uint64_t at,
		      uint64_t avail)
{
	uint32_t llen = (uint32_t)KILN_MIN(avail - at,
					   (uint64_t)z->zc->pcluster_size);
	ssize_t r = extent_compress(z, src + at, llen);

	if (r < 0 && r != -ENOSPC)
		return (int)r;
	return r > 0;
}

/* Bytes [@lstart, @lstart + @len) of @src raw, in extents of at most L. */
static int extent_put_raw(struct zpack *z, uint64_t lstart,
			  const uint8_t *src, uint64_t len)
{
	const uint32_t L = z->zc->pcluster_size;
	int err = 0;

	for (uint64_t done = 0; !err && done < len; done += L) {
		uint32_t n = (uint32_t)KILN_MIN((uint64_t)L, len - done);

		err = extent_put(z, lstart + done, src + done, n, -ENOSPC);
	}
	return err ? err : zpack_after_put(z);
}

/*
 * classic_skip() for the extents layout: a raw run from *@pos skips
 * z->raw_skip bytes (whole extents) untried, doubling up to
 * RAW_SKIP_MAX_EXT(L); a try that compresses is bisected back to the
 * first block that does. Stops short of @lim.
 */
static int extent_skip(struct zpack *z, uint64_t *pos, uint64_t lim)
{
	const uint32_t L = z->zc->pcluster_size;
	const uint64_t size = z->zf->size;

	for (;;) {
		uint64_t p0 = *pos, jump, want;
		int64_t hi;
		const uint8_t *src;
		int ok, err;

		if (!z->raw_skip)
			z->raw_skip = L;
		if (p0 >= lim)
			return 0;
		jump = KILN_MIN(z->raw_skip, lim - p0) / L * L;
		if (!jump)
			return 0;
		want = KILN_MIN(jump + L, size - p0);
		err = zin_get(&z->in, p0, (size_t)want, &src);
		if (err)
			return err;
		z->raw_skip = KILN_MIN(2 * z->raw_skip,
				       (uint64_t)RAW_SKIP_MAX_EXT(L));
		ok = extent_try(z, src, jump, want);
		if (ok < 0)
			return ok;
		if (!ok) {
			err = extent_put_raw(z, p0, src, want);
			*pos = p0 + want;
			if (err)
				return err;
			continue;
		}
		hi = first_compressing(z, src, jump, want, extent_try);
		if (hi < 0)
			return (int)hi;
		z->raw_skip = 0;
		*pos = p0 + hi;
		return extent_put_raw(z, p0, src, hi);
	}
}

int kiln_pcluster_extents(struct kiln_zctx *zc, struct kiln_out *out,
			  kiln_src_read_fn read, void *read_ctx,
			  struct kiln_zfile *zf, const struct kiln_zcuts *cuts)
{
	const uint32_t L = zc->pcluster_size;
	/* the last extents (a fragment, a short one) are never skipped */
	const uint64_t skip_lim = zf->size > 2 * (uint64_t)L ?
				  zf->size - 2 * (uint64_t)L : 0;
	struct zpack z;
	uint64_t pos = 0;
	int err;

	zf->kind = KILN_ZMAP_EXTENTS;
	zf->lclusterbits = 0;
	while ((1u << zf->lclusterbits) < L)
		zf->lclusterbits++;
	zf->alg = zc->ops->erofs_alg;
	/* room for a raw run's skipped bytes and the try after them */
	err = zpack_init(&z, zc, out, read, read_ctx, zf,
			 L + RAW_SKIP_MAX_EXT(L));
	z.cuts = cuts;
	/*
	 * A file that shares chunks stays in extents even when none of it
	 * compresses: its raw extents are what other files share.
	 */
	if (cuts && cuts->nr)
		z.sink.decided = true;
	while (!err && pos < zf->size) {
		uint32_t llen = (uint32_t)KILN_MIN(KILN_MIN((uint64_t)L,
							    zf->size - pos),
						   to_next_cut(&z, pos));
		const uint8_t *src;
		ssize_t r;

		err = zin_get(&z.in, pos, llen, &src);
		if (err)
			break;
		if (all_zero(src, llen)) {
			uint64_t rel = z.sink.flushed + z.sink.len;

			/* a hole: no pcluster, reads as zeros */
			err = add_extent(&z, pos, llen, rel, 0, 0, KILN_ZEXT_HOLE);
			z.any_compressed = true;
			z.raw_skip = 0;
			pos += llen;
			continue;
		}
		/* fragments: a short last extent goes to the packed inode */
		if (use_fragments(zc, zf) && pos + llen == zf->size && llen < L) {
			err = set_fragment(&z, pos, src, llen);
			break;
		}
		r = extent_compress(&z, src, llen);
		if (r < 0 && r != -ENOSPC) {
			err = (int)r;
			break;
		}
		err = extent_put(&z, pos, src, llen, r);
		pos += llen;
		if (!err)
			err = zpack_after_put(&z);
		if (r > 0)
			z.raw_skip = 0;
		/* shared chunks are packed alike from every cut: no skipping */
		else if (!err && !(z.cuts && z.cuts->nr))
			err = extent_skip(&z, &pos, skip_lim);
	}
	if (!err)
		err = zpack_finish(&z);
	zpack_release(&z);
	return err;
}
