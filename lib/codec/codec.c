// SPDX-License-Identifier: MIT
/*
 * The codec table: ops by kiln codec id and by on-disk algorithm number,
 * plus the helpers every codec shares (hook dispatch, fixed-output search).
 */
#include <errno.h>
#include <stddef.h>

#include "codec/codec.h"
#include "codec/codec-config.h"
#include "format/erofs_fs.h"
#include "util/checked.h"

extern const struct kiln_codec_ops kiln_codec_lz4, kiln_codec_lz4hc;
extern const struct kiln_codec_ops kiln_codec_zstd, kiln_codec_deflate;
extern const struct kiln_codec_ops kiln_codec_lzma;

/* Meson builds a codec's file only when its library exists. */
#if KILN_HAVE_LZ4
#define LZ4_OPS (&kiln_codec_lz4)
#define LZ4HC_OPS (&kiln_codec_lz4hc)
#else
#define LZ4_OPS NULL
#define LZ4HC_OPS NULL
#endif
#if KILN_HAVE_ZSTD
#define ZSTD_OPS (&kiln_codec_zstd)
#else
#define ZSTD_OPS NULL
#endif
#if KILN_HAVE_DEFLATE
#define DEFLATE_OPS (&kiln_codec_deflate)
#else
#define DEFLATE_OPS NULL
#endif
#if KILN_HAVE_LZMA
#define LZMA_OPS (&kiln_codec_lzma)
#else
#define LZMA_OPS NULL
#endif

static const struct kiln_codec_ops *const codecs_by_id[KILN_CODEC_MAX] = {
	[KILN_CODEC_NONE] = NULL,
	[KILN_CODEC_LZ4] = LZ4_OPS,
	[KILN_CODEC_LZ4HC] = LZ4HC_OPS,
	[KILN_CODEC_LZMA] = LZMA_OPS,
	[KILN_CODEC_DEFLATE] = DEFLATE_OPS,
	[KILN_CODEC_ZSTD] = ZSTD_OPS,
};

/* LZ4HC writes plain LZ4 streams: the LZ4 decoder serves both. */
static const struct kiln_codec_ops *const codecs_by_alg[] = {
	[Z_EROFS_COMPRESSION_LZ4] = LZ4_OPS,
	[Z_EROFS_COMPRESSION_LZMA] = LZMA_OPS,
	[Z_EROFS_COMPRESSION_DEFLATE] = DEFLATE_OPS,
	[Z_EROFS_COMPRESSION_ZSTD] = ZSTD_OPS,
};

const struct kiln_codec_ops *kiln_codec_get(enum kiln_codec_id id)
{
	if ((unsigned int)id >= KILN_ARRAY_SIZE(codecs_by_id))
		return NULL;
	return codecs_by_id[id];
}

const struct kiln_codec_ops *kiln_codec_by_erofs_alg(unsigned int alg)
{
	if (alg >= KILN_ARRAY_SIZE(codecs_by_alg))
		return NULL;
	return codecs_by_alg[alg];
}

bool kiln_codec_level_ok(const struct kiln_codec_ops *ops, int level)
{
	if (level < ops->min_level || level > ops->max_level)
		return false;
	return !ops->level_valid || ops->level_valid(level);
}

int kiln_codec_cws_init(const struct kiln_codec_ops *ops, void *ws,
			size_t ws_size, const struct kiln_codec_params *p)
{
	return ops->cws_init ? ops->cws_init(ws, ws_size, p) : 0;
}

void kiln_codec_cws_fini(const struct kiln_codec_ops *ops, void *ws)
{
	if (ops->cws_fini)
		ops->cws_fini(ws);
}

int kiln_codec_dws_init(const struct kiln_codec_ops *ops, void *ws,
			size_t ws_size)
{
	return ops->dws_init ? ops->dws_init(ws, ws_size) : 0;
}

void kiln_codec_dws_fini(const struct kiln_codec_ops *ops, void *ws)
{
	if (ops->dws_fini)
		ops->dws_fini(ws);
}

/*
 * Stop searching once the bracket is this narrow: a few bytes of input
 * are not worth another full compression of the prefix.
 */
#define DESTSIZE_SEARCH_SLACK	16

ssize_t kiln_codec_compress_destsize(const struct kiln_codec_ops *ops,
				     void *ws, int level, void *dst,
				     size_t dst_cap, const void *src,
				     size_t *src_len)
{
	size_t lo = 0, hi, best = 0;
	ssize_t r, best_out = 0;
	bool dst_holds_best;

	if (ops->compress_destsize)
		return ops->compress_destsize(ws, level, dst, dst_cap, src,
					      src_len);
	/* 1. everything may fit */
	r = ops->compress(ws, level, dst, dst_cap, src, *src_len);
	if (r != -ENOSPC)
		return r;
	/*
	 * 2. invariant: a prefix of lo bytes fits (lo = 0 trivially), one of
	 * hi bytes does not. Compressed size grows with the prefix closely
	 * enough for a bisection to find a near-maximal fit.
	 */
	hi = *src_len;
	dst_holds_best = false;
	while (hi - lo > DESTSIZE_SEARCH_SLACK) {
		size_t mid = lo + (hi - lo) / 2;

		r = ops->compress(ws, level, dst, dst_cap, src, mid);
		if (r >= 0) {
			lo = best = mid;
			best_out = r;
			dst_holds_best = true;
		} else if (r == -ENOSPC) {
			hi = mid;
			dst_holds_best = false;
		} else {
			return r;
		}
	}
	if (!best)
		return -ENOSPC;
	/* 3. a failed probe after the best one overwrote dst */
	if (!dst_holds_best) {
		best_out = ops->compress(ws, level, dst, dst_cap, src, best);
		if (best_out < 0)
			return best_out;
	}
	*src_len = best;
	return best_out;
}

uint32_t kiln_lzma_dict_size(uint32_t max_pcluster_size)
{
	uint64_t want = (uint64_t)max_pcluster_size * 4;
	uint32_t dict = 32u * 1024;

	while (dict < want && dict < 8u * 1024 * 1024)
		dict <<= 1;
	return dict;
}
