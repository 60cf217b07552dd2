// SPDX-License-Identifier: MIT
/*
 * Zstandard through libzstd: one frame per pcluster, window at most 1 MiB
 * (what the kernel accepts), content size recorded, no checksum.
 */
#define ZSTD_STATIC_LINKING_ONLY	/* ZSTD_getFrameHeader, estimates */
#include <errno.h>
#include <string.h>

#include <zstd.h>
#include <zstd_errors.h>

#include "codec/codec.h"
#include "format/erofs_fs.h"
#include "util/checked.h"

/* A workspace starts with the library context made by *_init(). */
struct zstd_cws {
	ZSTD_CCtx *cctx;
};

struct zstd_dws {
	ZSTD_DCtx *dctx;
};

static size_t zstd_compress_wsize(int level, size_t max_in)
{
	ZSTD_compressionParameters cp = ZSTD_getCParams(level, max_in, 0);

	if (cp.windowLog > KILN_ZSTD_WINDOW_LOG)
		cp.windowLog = KILN_ZSTD_WINDOW_LOG;
	return sizeof(struct zstd_cws) +
	       ZSTD_estimateCCtxSize_usingCParams(cp);
}

static size_t zstd_decompress_wsize(size_t max_out)
{
	(void)max_out;
	return sizeof(struct zstd_dws) +
	       ZSTD_estimateDStreamSize((size_t)1 << KILN_ZSTD_WINDOW_LOG);
}

static int zstd_cws_init(void *ws, size_t ws_size,
			 const struct kiln_codec_params *p)
{
	struct zstd_cws *w = ws;

	(void)p;
	if (ws_size < sizeof(*w))
		return -EINVAL;
	w->cctx = ZSTD_createCCtx();
	return w->cctx ? 0 : -ENOMEM;
}

static void zstd_cws_fini(void *ws)
{
	struct zstd_cws *w = ws;

	ZSTD_freeCCtx(w->cctx);
	w->cctx = NULL;
}

static int zstd_dws_init(void *ws, size_t ws_size)
{
	struct zstd_dws *w = ws;

	if (ws_size < sizeof(*w))
		return -EINVAL;
	w->dctx = ZSTD_createDCtx();
	if (!w->dctx)
		return -ENOMEM;
	if (ZSTD_isError(ZSTD_DCtx_setParameter(w->dctx, ZSTD_d_windowLogMax,
						KILN_ZSTD_WINDOW_LOG))) {
		ZSTD_freeDCtx(w->dctx);
		w->dctx = NULL;
		return -EINVAL;
	}
	return 0;
}

static void zstd_dws_fini(void *ws)
{
	struct zstd_dws *w = ws;

	ZSTD_freeDCtx(w->dctx);
	w->dctx = NULL;
}

static ssize_t zstd_compress(void *ws, int level, void *dst, size_t dst_cap,
			     const void *src, size_t src_len)
{
	ZSTD_CCtx *cctx = ((struct zstd_cws *)ws)->cctx;
	size_t r;

	ZSTD_CCtx_reset(cctx, ZSTD_reset_session_and_parameters);
	if (ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel,
						level)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_windowLog,
						KILN_ZSTD_WINDOW_LOG)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag,
						1)))
		return -EINVAL;
	r = ZSTD_compress2(cctx, dst, dst_cap, src, src_len);
	if (ZSTD_isError(r))
		return ZSTD_getErrorCode(r) == ZSTD_error_dstSize_tooSmall ?
		       -ENOSPC : -EIO;
	return (ssize_t)r;
}

/*
 * Fixed output in about one pass. The input goes in in chunks, each
 * flushed, so the stream's length is known after every chunk; each chunk
 * aims at part of the room left, and the frame ends at the last flush
 * that fits. The first chunk aims at a quarter of the room, by the
 * stream's last ratio; the next ones at 3/4 of it by this pcluster's own
 * ratio while the data compress as the last chunk said they would
 * (within a fifth), and at a quarter when they did not: a chunk that
 * runs over is compressed for nothing, and on data whose ratio changes
 * (programs, libraries) big chunks ran over often enough to compress a
 * pcluster's input almost twice. Layout of the result:
 *
 *   magic | FHD | window | content size (4) | blocks ... | last block (3)
 *
 * libzstd writes the header without a content size (it is not known until
 * the end): the stream goes FILL_FCS_LEN bytes into @dst, then its 6-byte
 * header moves to the front and the content size (which one-shot decoders
 * such as ZSTD_decompress() size their output by) goes in the gap, so the
 * frames look like those compress() makes. The last block is an empty raw
 * one, as libzstd itself ends frames.
 */
#define FILL_HDR_LEN		6	/* magic, descriptor, window byte */
#define FILL_FCS_LEN		4
#define FILL_END_LEN		3
#define FILL_MIN_CHUNK		64
/* A chunk's output within 1/FILL_STABLE of its estimate: the ratio holds. */
#define FILL_STABLE		5
#define FILL_FHD_FCS4		0x80	/* content size field of 4 bytes */

/* One pass: as above, from a cleared context. */
struct fill_pass {
	size_t taken, fit;	/* input taken, stream bytes it made */
	bool over;		/* a chunk ran past the budget */
};

static int zstd_fill_pass(ZSTD_CCtx *cctx, int level, ZSTD_outBuffer out,
			  const uint8_t *src, size_t n, size_t budget,
			  size_t slack, size_t known, uint64_t rin,
			  uint64_t rout, struct fill_pass *p)
{
	bool steady = true;	/* the last chunk came out as estimated */

	p->taken = p->fit = 0;
	p->over = false;
	ZSTD_CCtx_reset(cctx, ZSTD_reset_session_and_parameters);
	if (ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel,
						level)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_windowLog,
						KILN_ZSTD_WINDOW_LOG)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 0)) ||
	    /* the input stays put: matched where it is, never copied */
	    ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_stableInBuffer,
						1)))
		return -EINVAL;
	while (p->taken < n) {
		size_t left = budget - p->fit, chunk, r;
		uint64_t est, got, want;
		ZSTD_inBuffer in;

		if (p->taken && left <= slack)
			break;
		est = (uint64_t)left * rin / rout;
		/* a retry goes at once to the prefix known to fit, then slower */
		if (known)
			chunk = p->taken ? (size_t)(est / 2) : known;
		else if (p->taken && steady)
			chunk = (size_t)(est - est / 4);
		else
			chunk = (size_t)(est / 4);
		chunk = chunk < FILL_MIN_CHUNK ? FILL_MIN_CHUNK : chunk;
		chunk = chunk > n - p->taken ? n - p->taken : chunk;
		/* one buffer for the whole frame, growing chunk by chunk */
		in.src = src;
		in.size = p->taken + chunk;
		in.pos = p->taken;
		do {
			r = ZSTD_compressStream2(cctx, &out, &in,
						 ZSTD_e_flush);
		} while (!ZSTD_isError(r) && r && out.pos < out.size);
		if (ZSTD_isError(r) &&
		    ZSTD_getErrorCode(r) != ZSTD_error_dstSize_tooSmall)
			return -EIO;
		/* past the budget: the frame ends at the last flush */
		if (ZSTD_isError(r) || r || in.pos < in.size ||
		    out.pos > budget) {
			p->over = true;
			break;
		}
		got = out.pos - p->fit;
		want = (uint64_t)chunk * rout / (rin ? rin : 1);
		steady = got <= want + want / FILL_STABLE &&
			 want <= got + got / FILL_STABLE;
		p->taken += chunk;
		p->fit = out.pos;
		rin = p->taken;
		rout = p->fit;
	}
	return 0;
}

/*
 * Whether a stream of @fit bytes (after the gap for the content size)
 * ends close enough to the end of a unit (a block of the image) that
 * filling on would save little: in the last eighth of the cap's units,
 * with at most a quarter of its last unit empty, and at most 1/128 of
 * what it uses (a small pcluster gains more from a second pass: its
 * prefix then goes in as one block).
 */
static bool fill_tight(size_t fit, size_t cap,
		       const struct kiln_destsize_hint *h)
{
	size_t len = FILL_FCS_LEN + fit + FILL_END_LEN;
	size_t unit = h && h->unit && h->unit < cap ? h->unit : cap;
	size_t used = (len + unit - 1) / unit * unit;

	return used >= cap - cap / 8 &&
	       used - len <= KILN_MIN(unit / 4, KILN_MAX((size_t)16, used >> 7));
}

static ssize_t zstd_compress_fill(void *ws, int level, void *dst,
				  size_t dst_cap, const void *src,
				  size_t *src_len,
				  struct kiln_destsize_hint *h)
{
	ZSTD_CCtx *cctx = ((struct zstd_cws *)ws)->cctx;
	const size_t n = *src_len;
	size_t room = h && h->dst_room > dst_cap ? h->dst_room : dst_cap;
	uint64_t rin = h && h->last_out ? h->last_in : 1;
	uint64_t rout = h && h->last_out ? h->last_out : 1;
	size_t budget, slack, len;
	struct fill_pass p;
	uint8_t *d = dst;
	ZSTD_outBuffer out;
	int err;

	if (dst_cap < 64 || n > UINT32_MAX)
		return -EAGAIN;
	budget = dst_cap - FILL_FCS_LEN - FILL_END_LEN;
	/* stop once the room left is within 1/128 of the cap */
	slack = dst_cap / 128 > 16 ? dst_cap / 128 : 16;
	out.dst = d + FILL_FCS_LEN;
	out.size = room - FILL_FCS_LEN;
	out.pos = 0;
	err = zstd_fill_pass(cctx, level, out, src, n, budget, slack, 0, rin,
			     rout, &p);
	/*
	 * A chunk ran over with the stream's end far from a block's: once
	 * more, at once to the prefix known to fit and slower past it; when
	 * even the first chunk ran over (the data compresses worse than the
	 * stream's last pcluster did), from half the budget, which any data
	 * fits. Then the best fit is kept, whatever its length: a pcluster
	 * of fewer blocks costs only its last block's slack, which a search
	 * by whole compressions would cost many times over to save.
	 */
	if (!err && p.over && !fill_tight(p.fit, dst_cap, h)) {
		size_t known = p.taken ? p.taken : KILN_MIN(n, budget / 2);

		if (h)
			h->compressions++;
		err = zstd_fill_pass(cctx, level, out, src, n, budget, slack,
				     known, p.taken ? p.taken : 1,
				     p.taken ? p.fit : 1, &p);
	}
	if (err)
		return err;
	len = FILL_FCS_LEN + p.fit + FILL_END_LEN;
	if (!p.taken)
		return -EAGAIN;
	/* 6-byte header without a content size, as asked for */
	if (d[FILL_FCS_LEN + 4] & 0xe3)
		return -EAGAIN;
	memmove(d, d + FILL_FCS_LEN, FILL_HDR_LEN);
	d[4] |= FILL_FHD_FCS4;
	d[6] = (uint8_t)p.taken;
	d[7] = (uint8_t)(p.taken >> 8);
	d[8] = (uint8_t)(p.taken >> 16);
	d[9] = (uint8_t)(p.taken >> 24);
	/* last block: raw, empty */
	d[len - 3] = 1;
	d[len - 2] = 0;
	d[len - 1] = 0;
	*src_len = p.taken;
	return (ssize_t)len;
}

/*
 * Stream into the segments until they are full. Used for partial
 * decoding, split output, and frames holding more than asked for
 * (allowed: the kernel ignores extra output).
 */
static int zstd_stream_segs(ZSTD_DCtx *dctx, const struct kiln_codec_seg *seg,
			    unsigned int nr, const void *src, size_t src_len)
{
	ZSTD_inBuffer in = { src, src_len, 0 };

	ZSTD_DCtx_reset(dctx, ZSTD_reset_session_only);
	for (unsigned int i = 0; i < nr; i++) {
		ZSTD_outBuffer out = { seg[i].dst, seg[i].len, 0 };

		while (out.pos < out.size) {
			size_t in_before = in.pos, out_before = out.pos;
			size_t r = ZSTD_decompressStream(dctx, &out, &in);

			if (ZSTD_isError(r))
				return -KILN_ECORRUPT;
			if (r == 0 && out.pos < out.size)
				return -KILN_ECORRUPT;	/* frame ended early */
			if (in.pos == in_before && out.pos == out_before)
				return -KILN_ECORRUPT;	/* truncated input */
		}
	}
	return 0;
}

/* Frame checks shared by both entry points: window, content size. */
static int zstd_check_frame(const void *src, size_t src_len, size_t dst_len,
			    ZSTD_frameHeader *fh)
{
	size_t r = ZSTD_getFrameHeader(fh, src, src_len);

	if (r != 0 || fh->frameType != ZSTD_frame ||
	    fh->windowSize > ((uint64_t)1 << KILN_ZSTD_WINDOW_LOG))
		return -KILN_ECORRUPT;
	if (fh->frameContentSize != ZSTD_CONTENTSIZE_UNKNOWN &&
	    fh->frameContentSize < dst_len)
		return -KILN_ECORRUPT;
	return 0;
}

static int zstd_decompress(void *ws, void *dst, size_t dst_len,
			   const void *src, size_t src_len, bool partial)
{
	ZSTD_DCtx *dctx = ((struct zstd_dws *)ws)->dctx;
	struct kiln_codec_seg seg = { dst, dst_len };
	ZSTD_frameHeader fh;
	size_t r;

	if (zstd_check_frame(src, src_len, dst_len, &fh))
		return -KILN_ECORRUPT;
	/* the common case: one call straight into @dst */
	if (!partial && fh.frameContentSize == dst_len) {
		r = ZSTD_decompressDCtx(dctx, dst, dst_len, src, src_len);
		if (ZSTD_isError(r) || r != dst_len)
			return -KILN_ECORRUPT;
		return 0;
	}
	return zstd_stream_segs(dctx, &seg, 1, src, src_len);
}

static int zstd_decompress_segs(void *ws, const struct kiln_codec_seg *seg,
				unsigned int nr, const void *src,
				size_t src_len, bool partial)
{
	ZSTD_DCtx *dctx = ((struct zstd_dws *)ws)->dctx;
	ZSTD_frameHeader fh;
	size_t total = 0;

	(void)partial;
	for (unsigned int i = 0; i < nr; i++)
		total += seg[i].len;
	if (zstd_check_frame(src, src_len, total, &fh))
		return -KILN_ECORRUPT;
	return zstd_stream_segs(dctx, seg, nr, src, src_len);
}

static ssize_t zstd_config_encode(const struct kiln_codec_params *p,
				  void *dst, size_t cap)
{
	struct z_erofs_zstd_cfgs c;

	(void)p;
	if (cap < sizeof(c))
		return -ENOSPC;
	memset(&c, 0, sizeof(c));
	c.format = 0;
	c.windowlog = KILN_ZSTD_WINDOW_LOG - 10;
	memcpy(dst, &c, sizeof(c));
	return sizeof(c);
}

/* 0 never reaches a compressor: the parser turns it into level 3. */
static bool zstd_level_valid(int level)
{
	return level != 0;
}

const struct kiln_codec_ops kiln_codec_zstd = {
	.name = "zstd",
	.id = KILN_CODEC_ZSTD,
	.erofs_alg = Z_EROFS_COMPRESSION_ZSTD,
	.min_level = -100,
	.max_level = 22,
	.default_level = 3,
	.compress_wsize = zstd_compress_wsize,
	.stops_early = true,
	.decompress_wsize = zstd_decompress_wsize,
	.compress = zstd_compress,
	.compress_destsize = NULL,
	.compress_fill = zstd_compress_fill,
	.decompress = zstd_decompress,
	.decompress_segs = zstd_decompress_segs,
	.cws_init = zstd_cws_init,
	.cws_fini = zstd_cws_fini,
	.dws_init = zstd_dws_init,
	.dws_fini = zstd_dws_fini,
	.config_encode = zstd_config_encode,
	.level_valid = zstd_level_valid,
	.zero_is_default = true,
};
