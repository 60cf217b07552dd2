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
	.decompress = zstd_decompress,
	.decompress_segs = zstd_decompress_segs,
	.cws_init = zstd_cws_init,
	.cws_fini = zstd_cws_fini,
	.dws_init = zstd_dws_init,
	.dws_fini = zstd_dws_fini,
	.config_encode = zstd_config_encode,
	.level_valid = zstd_level_valid,
};
