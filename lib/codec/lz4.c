// SPDX-License-Identifier: MIT
/*
 * LZ4 and LZ4HC through liblz4: raw LZ4 block streams (no frame), one per
 * pcluster. Both write the same stream format, decoded by one decoder.
 */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include <lz4.h>
#include <lz4hc.h>

#include "codec/codec.h"
#include "format/erofs_fs.h"
#include "util/endian.h"

static size_t lz4_compress_wsize(int level, size_t max_in)
{
	(void)level;
	(void)max_in;
	return (size_t)LZ4_sizeofState();
}

static size_t lz4hc_compress_wsize(int level, size_t max_in)
{
	(void)level;
	(void)max_in;
	return (size_t)LZ4_sizeofStateHC();
}

static size_t lz4_decompress_wsize(size_t max_out)
{
	(void)max_out;
	return 0;
}

static bool lz4_sizes_ok(size_t dst_cap, size_t src_len)
{
	return dst_cap <= INT_MAX && src_len <= LZ4_MAX_INPUT_SIZE;
}

static ssize_t lz4_compress(void *ws, int level, void *dst, size_t dst_cap,
			    const void *src, size_t src_len)
{
	int r;

	(void)level;
	if (!lz4_sizes_ok(dst_cap, src_len))
		return -EINVAL;
	r = LZ4_compress_fast_extState(ws, src, dst, (int)src_len,
				       (int)dst_cap, 1);
	return r > 0 ? r : -ENOSPC;
}

/*
 * liblz4 1.9 has no destSize entry point taking caller state; this one
 * keeps its state on the stack (no allocation with the default build).
 */
static ssize_t lz4_compress_destsize(void *ws, int level, void *dst,
				     size_t dst_cap, const void *src,
				     size_t *src_len)
{
	int in, r;

	(void)ws;
	(void)level;
	if (!lz4_sizes_ok(dst_cap, *src_len))
		return -EINVAL;
	in = (int)*src_len;
	r = LZ4_compress_destSize(src, dst, &in, (int)dst_cap);
	if (r <= 0 || in <= 0)
		return -ENOSPC;
	*src_len = (size_t)in;
	return r;
}

static ssize_t lz4hc_compress(void *ws, int level, void *dst, size_t dst_cap,
			      const void *src, size_t src_len)
{
	int r;

	if (!lz4_sizes_ok(dst_cap, src_len))
		return -EINVAL;
	r = LZ4_compress_HC_extStateHC(ws, src, dst, (int)src_len,
				       (int)dst_cap, level);
	return r > 0 ? r : -ENOSPC;
}

static ssize_t lz4hc_compress_destsize(void *ws, int level, void *dst,
				       size_t dst_cap, const void *src,
				       size_t *src_len)
{
	int in, r;

	if (!lz4_sizes_ok(dst_cap, *src_len))
		return -EINVAL;
	in = (int)*src_len;
	r = LZ4_compress_HC_destSize(ws, src, dst, &in, (int)dst_cap, level);
	if (r <= 0 || in <= 0)
		return -ENOSPC;
	*src_len = (size_t)in;
	return r;
}

/*
 * Exact: the stream must decode to exactly @dst_len bytes using exactly
 * @src_len input bytes (LZ4_decompress_safe() consumes its whole input).
 * Partial: stop after @dst_len bytes wherever the stream is.
 */
static int lz4_decompress(void *ws, void *dst, size_t dst_len,
			  const void *src, size_t src_len, bool partial)
{
	int r;

	(void)ws;
	if (dst_len > INT_MAX || src_len > INT_MAX)
		return -KILN_ECORRUPT;
	if (partial)
		r = LZ4_decompress_safe_partial(src, dst, (int)src_len,
						(int)dst_len, (int)dst_len);
	else
		r = LZ4_decompress_safe(src, dst, (int)src_len, (int)dst_len);
	return r >= 0 && (size_t)r == dst_len ? 0 : -KILN_ECORRUPT;
}

/*
 * max_distance 0 (the 64 KiB LZ4 window: liblz4 never emits farther
 * matches) and max_pclusterblks sized for the largest pcluster.
 */
static ssize_t lz4_config_encode(const struct kiln_codec_params *p,
				 void *dst, size_t cap)
{
	struct z_erofs_lz4_cfgs c;
	uint32_t blks;

	if (cap < sizeof(c))
		return -ENOSPC;
	if (!p->blksz)
		return -EINVAL;
	blks = (p->max_pcluster_size + p->blksz - 1) / p->blksz;
	if (!blks)
		blks = 1;
	if (blks > Z_EROFS_PCLUSTER_MAX_SIZE / p->blksz)
		return -EINVAL;
	memset(&c, 0, sizeof(c));
	c.max_distance = kiln_cpu_to_le16(0);
	c.max_pclusterblks = kiln_cpu_to_le16((uint16_t)blks);
	memcpy(dst, &c, sizeof(c));
	return sizeof(c);
}

const struct kiln_codec_ops kiln_codec_lz4 = {
	.name = "lz4",
	.id = KILN_CODEC_LZ4,
	.erofs_alg = Z_EROFS_COMPRESSION_LZ4,
	.min_level = 1,
	.max_level = 1,
	.default_level = 1,
	.compress_wsize = lz4_compress_wsize,
	.stops_early = true,
	.decompress_wsize = lz4_decompress_wsize,
	.compress = lz4_compress,
	.compress_destsize = lz4_compress_destsize,
	.decompress = lz4_decompress,
	.config_encode = lz4_config_encode,
};

const struct kiln_codec_ops kiln_codec_lz4hc = {
	.name = "lz4hc",
	.id = KILN_CODEC_LZ4HC,
	.erofs_alg = Z_EROFS_COMPRESSION_LZ4,
	.min_level = 1,
	.max_level = LZ4HC_CLEVEL_MAX,
	.default_level = LZ4HC_CLEVEL_DEFAULT,
	.compress_wsize = lz4hc_compress_wsize,
	.stops_early = true,
	.decompress_wsize = lz4_decompress_wsize,
	.compress = lz4hc_compress,
	.compress_destsize = lz4hc_compress_destsize,
	.decompress = lz4_decompress,
	.config_encode = lz4_config_encode,
};
