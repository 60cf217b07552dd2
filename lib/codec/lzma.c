// SPDX-License-Identifier: MIT
/*
 * MicroLZMA through liblzma (>= 5.4): raw LZMA1 without end marker, whose
 * first byte carries the inverted properties. Fixed-output by nature.
 * Levels: 0..9 = xz presets, KILN_LZMA_EXTREME + n = preset n "extreme".
 */
#include <errno.h>
#include <string.h>

#include <lzma.h>

#include "codec/codec.h"
#include "format/erofs_fs.h"
#include "util/endian.h"

#define LZMA_DICT_MAX	(8u * 1024 * 1024)

/*
 * The stream stays initialised across calls so liblzma reuses its
 * allocations; it is (re)configured only when the options change.
 */
struct lzma_cws {
	lzma_stream strm;
	uint32_t dict_size;
};

struct lzma_dws {
	lzma_stream strm;
	uint32_t dict_size;	/* grows monotonically, at most 8 MiB */
};

static bool lzma_level_valid(int level)
{
	return (level >= 0 && level <= 9) ||
	       (level >= KILN_LZMA_EXTREME && level <= KILN_LZMA_EXTREME + 9);
}

static uint32_t lzma_preset_of(int level)
{
	if (level >= KILN_LZMA_EXTREME)
		return (uint32_t)(level - KILN_LZMA_EXTREME) |
		       LZMA_PRESET_EXTREME;
	return (uint32_t)level;
}

static int lzma_options(int level, uint32_t dict, lzma_options_lzma *opt)
{
	if (!lzma_level_valid(level) || lzma_lzma_preset(opt,
							 lzma_preset_of(level)))
		return -EINVAL;
	opt->dict_size = dict;
	return 0;
}

static size_t lzma_compress_wsize(int level, size_t max_in)
{
	lzma_options_lzma opt;
	lzma_filter f[2];
	uint64_t mem;

	if (max_in > UINT32_MAX)
		max_in = UINT32_MAX;
	if (lzma_options(level, kiln_lzma_dict_size((uint32_t)max_in), &opt))
		return 0;
	f[0].id = LZMA_FILTER_LZMA1;
	f[0].options = &opt;
	f[1].id = LZMA_VLI_UNKNOWN;
	f[1].options = NULL;
	mem = lzma_raw_encoder_memusage(f);
	if (mem == UINT64_MAX)
		return 0;
	return sizeof(struct lzma_cws) + (size_t)mem;
}

static size_t lzma_decompress_wsize(size_t max_out)
{
	size_t dict = max_out < LZMA_DICT_MAX ? max_out : LZMA_DICT_MAX;

	/* dictionary plus the decoder's probability tables (~30 KiB) */
	return sizeof(struct lzma_dws) + dict + (32u << 10);
}

static int lzma_cws_init(void *ws, size_t ws_size,
			 const struct kiln_codec_params *p)
{
	struct lzma_cws *w = ws;
	lzma_stream init = LZMA_STREAM_INIT;

	if (ws_size < sizeof(*w))
		return -EINVAL;
	w->strm = init;
	w->dict_size = kiln_lzma_dict_size(p->max_pcluster_size);
	return 0;
}

static void lzma_cws_fini(void *ws)
{
	lzma_end(&((struct lzma_cws *)ws)->strm);
}

static int lzma_dws_init(void *ws, size_t ws_size)
{
	struct lzma_dws *w = ws;
	lzma_stream init = LZMA_STREAM_INIT;

	if (ws_size < sizeof(*w))
		return -EINVAL;
	w->strm = init;
	w->dict_size = 64u << 10;
	return 0;
}

static void lzma_dws_fini(void *ws)
{
	lzma_end(&((struct lzma_dws *)ws)->strm);
}

static ssize_t lzma_encode(struct lzma_cws *w, int level, void *dst,
			   size_t dst_cap, const void *src, size_t *src_len)
{
	lzma_options_lzma opt;
	lzma_ret r;

	if (dst_cap < 6)	/* MicroLZMA's minimal stream */
		return -ENOSPC;
	if (lzma_options(level, w->dict_size, &opt))
		return -EINVAL;
	r = lzma_microlzma_encoder(&w->strm, &opt);
	if (r != LZMA_OK)
		return r == LZMA_MEM_ERROR ? -ENOMEM : -EINVAL;
	w->strm.next_in = src;
	w->strm.avail_in = *src_len;
	w->strm.next_out = dst;
	w->strm.avail_out = dst_cap;
	r = lzma_code(&w->strm, LZMA_FINISH);
	if (r != LZMA_STREAM_END)
		return r == LZMA_MEM_ERROR ? -ENOMEM : -EIO;
	if (!w->strm.total_in)
		return -ENOSPC;
	*src_len = (size_t)w->strm.total_in;
	return (ssize_t)w->strm.total_out;
}

static ssize_t lzma_compress_destsize(void *ws, int level, void *dst,
				      size_t dst_cap, const void *src,
				      size_t *src_len)
{
	return lzma_encode(ws, level, dst, dst_cap, src, src_len);
}

static ssize_t lzma_compress(void *ws, int level, void *dst, size_t dst_cap,
			     const void *src, size_t src_len)
{
	size_t in = src_len;
	ssize_t r = lzma_encode(ws, level, dst, dst_cap, src, &in);

	if (r >= 0 && in != src_len)
		return -ENOSPC;
	return r;
}

/*
 * Exact: both sizes must match and the range coder must end cleanly.
 * Partial: liblzma stops after the output (an upper bound of the size).
 * liblzma decodes through its own dictionary, so the output may come in
 * segments.
 */
static int lzma_decompress_segs(void *ws, const struct kiln_codec_seg *seg,
				unsigned int nr, const void *src,
				size_t src_len, bool partial)
{
	struct lzma_dws *w = ws;
	size_t total = 0;
	lzma_ret r = LZMA_OK;

	for (unsigned int i = 0; i < nr; i++)
		total += seg[i].len;
	/* distances never exceed the output so far: a dict of total works */
	while (w->dict_size < total && w->dict_size < LZMA_DICT_MAX)
		w->dict_size <<= 1;
	if (!src_len || !total)
		return -KILN_ECORRUPT;
	r = lzma_microlzma_decoder(&w->strm, src_len, total, !partial,
				   w->dict_size);
	if (r != LZMA_OK)
		return r == LZMA_MEM_ERROR ? -ENOMEM : -KILN_ECORRUPT;
	w->strm.next_in = src;
	w->strm.avail_in = src_len;
	for (unsigned int i = 0; i < nr && r == LZMA_OK; i++) {
		if (!seg[i].len)
			continue;
		w->strm.next_out = seg[i].dst;
		w->strm.avail_out = seg[i].len;
		do {
			r = lzma_code(&w->strm, LZMA_FINISH);
		} while (r == LZMA_OK && w->strm.avail_out);
	}
	if (r == LZMA_MEM_ERROR)
		return -ENOMEM;
	if (r != LZMA_STREAM_END || w->strm.total_out != total)
		return -KILN_ECORRUPT;
	if (!partial && w->strm.total_in != src_len)
		return -KILN_ECORRUPT;
	return 0;
}

static int lzma_decompress(void *ws, void *dst, size_t dst_len,
			   const void *src, size_t src_len, bool partial)
{
	struct kiln_codec_seg seg = { dst, dst_len };

	return lzma_decompress_segs(ws, &seg, 1, src, src_len, partial);
}

static ssize_t lzma_config_encode(const struct kiln_codec_params *p,
				  void *dst, size_t cap)
{
	struct z_erofs_lzma_cfgs c;

	if (cap < sizeof(c))
		return -ENOSPC;
	memset(&c, 0, sizeof(c));
	c.dict_size = kiln_cpu_to_le32(kiln_lzma_dict_size(p->max_pcluster_size));
	c.format = 0;
	memcpy(dst, &c, sizeof(c));
	return sizeof(c);
}

const struct kiln_codec_ops kiln_codec_lzma = {
	.name = "lzma",
	.id = KILN_CODEC_LZMA,
	.erofs_alg = Z_EROFS_COMPRESSION_LZMA,
	.min_level = 0,
	.max_level = KILN_LZMA_EXTREME + 9,
	.default_level = 6,
	.compress_wsize = lzma_compress_wsize,
	.stops_early = true,
	.decompress_wsize = lzma_decompress_wsize,
	.compress = lzma_compress,
	.compress_destsize = lzma_compress_destsize,
	.decompress = lzma_decompress,
	.decompress_segs = lzma_decompress_segs,
	.cws_init = lzma_cws_init,
	.cws_fini = lzma_cws_fini,
	.dws_init = lzma_dws_init,
	.dws_fini = lzma_dws_fini,
	.config_encode = lzma_config_encode,
	.level_valid = lzma_level_valid,
};
