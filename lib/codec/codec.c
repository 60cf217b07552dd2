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
 * Stop searching once the bracket is this narrow, or the output is this
 * close to full: more probes cost a whole compression each.
 */
#define DESTSIZE_SEARCH_SLACK	16
#define DESTSIZE_FULL_SHIFT	8	/* within 1/256 of the cap */

/* Next prefix to try: scale the last fit towards a 98% full output. */
static size_t destsize_guess(size_t lo, size_t lo_out, size_t hi,
			     size_t dst_cap)
{
	size_t guess;

	if (lo && lo_out) {
		unsigned __int128 g = (unsigned __int128)lo * (dst_cap -
						dst_cap / 50) / lo_out;

		guess = g > hi ? hi : (size_t)g;
	} else {
		guess = lo + (hi - lo) / 2;
	}
	if (guess <= lo || guess >= hi)
		guess = lo + (hi - lo) / 2;
	return guess;
}

ssize_t kiln_codec_compress_destsize(const struct kiln_codec_ops *ops,
				     void *ws, int level, void *dst,
				     size_t dst_cap, const void *src,
				     size_t *src_len)
{
	size_t lo = 0, lo_out = 0, hi, x;
	bool dst_holds_lo = false;
	ssize_t r;

	if (ops->compress_destsize)
		return ops->compress_destsize(ws, level, dst, dst_cap, src,
					      src_len);
	/*
	 * Invariant: a prefix of lo bytes fits (lo = 0 trivially) in lo_out
	 * bytes, one of hi bytes does not (hi = n + 1: unknown). Start with
	 * as much input as output; then follow the compression ratio seen
	 * so far, bisecting once a probe has failed. Deterministic: the
	 * same input gives the same probes.
	 */
	hi = *src_len + 1;
	x = KILN_MIN(*src_len, dst_cap);
	while (x > lo && x < hi) {
		r = ops->compress(ws, level, dst, dst_cap, src, x);
		if (r >= 0) {
			lo = x;
			lo_out = (size_t)r;
			dst_holds_lo = true;
			if (lo == *src_len ||
			    lo_out >= dst_cap - (dst_cap >> DESTSIZE_FULL_SHIFT))
				break;
		} else if (r == -ENOSPC) {
			hi = x;
			dst_holds_lo = false;
		} else {
			return r;
		}
		if (hi - lo <= DESTSIZE_SEARCH_SLACK) {
			/*
			 * Close enough, unless all of the input was never
			 * tried: it may fit too, and then it is the answer
			 * (a file's last pcluster ends at its end).
			 */
			if (hi <= *src_len || lo == *src_len)
				break;
			x = *src_len;
			continue;
		}
		x = hi > *src_len ? destsize_guess(lo, lo_out, *src_len + 1,
						   dst_cap) :
		    lo_out ? KILN_MIN(destsize_guess(lo, lo_out, hi, dst_cap),
				      lo + (hi - lo) / 2 + (hi - lo) / 4) :
			     lo + (hi - lo) / 2;
		if (x > *src_len)
			x = *src_len;
	}
	if (!lo)
		return -ENOSPC;
	/* a failed probe after the best fit overwrote dst */
	if (!dst_holds_lo) {
		r = ops->compress(ws, level, dst, dst_cap, src, lo);
		if (r < 0)
			return r;
		lo_out = (size_t)r;
	}
	*src_len = lo;
	return (ssize_t)lo_out;
}

uint32_t kiln_lzma_dict_size(uint32_t max_pcluster_size)
{
	uint64_t want = (uint64_t)max_pcluster_size * 4;
	uint32_t dict = 32u * 1024;

	while (dict < want && dict < 8u * 1024 * 1024)
		dict <<= 1;
	return dict;
}
