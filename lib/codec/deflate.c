// SPDX-License-Identifier: MIT
/*
 * Raw DEFLATE (RFC 1951) through libdeflate, 32 KiB window. libdeflate
 * works on whole buffers, so fixed-output compression goes through the
 * generic prefix search and partial decoding through a scratch buffer.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <libdeflate.h>

#include "codec/codec.h"
#include "format/erofs_fs.h"

struct deflate_cws {
	struct libdeflate_compressor *c;
	int level;
};

/*
 * Partial references decode a stream to more than the extent needs;
 * libdeflate can't stop early, so that output lands in @scratch, grown on
 * demand up to SCRATCH_MAX and kept for the workspace's lifetime.
 */
#define SCRATCH_MAX	(2 * (size_t)KILN_CODEC_MAX_OUT)

struct deflate_dws {
	struct libdeflate_decompressor *d;
	void *scratch;
	size_t scratch_size;
};

/* libdeflate doesn't export its context sizes; these bound 1.14's. */
static size_t deflate_compress_wsize(int level, size_t max_in)
{
	(void)max_in;
	return sizeof(struct deflate_cws) +
	       (level >= 10 ? 2u << 20 : level >= 2 ? 1u << 20 : 64u << 10);
}

static size_t deflate_decompress_wsize(size_t max_out)
{
	(void)max_out;
	return sizeof(struct deflate_dws) + (16u << 10);
}

static int deflate_cws_init(void *ws, size_t ws_size,
			    const struct kiln_codec_params *p)
{
	struct deflate_cws *w = ws;

	if (ws_size < sizeof(*w))
		return -EINVAL;
	w->level = p->level;
	w->c = libdeflate_alloc_compressor(p->level);
	return w->c ? 0 : -ENOMEM;
}

static void deflate_cws_fini(void *ws)
{
	struct deflate_cws *w = ws;

	libdeflate_free_compressor(w->c);
	w->c = NULL;
}

static int deflate_dws_init(void *ws, size_t ws_size)
{
	struct deflate_dws *w = ws;

	if (ws_size < sizeof(*w))
		return -EINVAL;
	w->scratch = NULL;
	w->scratch_size = 0;
	w->d = libdeflate_alloc_decompressor();
	return w->d ? 0 : -ENOMEM;
}

static void deflate_dws_fini(void *ws)
{
	struct deflate_dws *w = ws;

	libdeflate_free_decompressor(w->d);
	free(w->scratch);
	w->d = NULL;
	w->scratch = NULL;
}

static ssize_t deflate_compress(void *ws, int level, void *dst,
				size_t dst_cap, const void *src,
				size_t src_len)
{
	struct deflate_cws *w = ws;
	size_t r;

	/* a workspace serves one level; another one costs a reallocation */
	if (level != w->level) {
		struct libdeflate_compressor *c =
			libdeflate_alloc_compressor(level);

		if (!c)
			return -ENOMEM;
		libdeflate_free_compressor(w->c);
		w->c = c;
		w->level = level;
	}
	r = libdeflate_deflate_compress(w->c, src, src_len, dst, dst_cap);
	if (!r)
		return -ENOSPC;
	/*
	 * The reader finds a stream by its first non-zero byte. A stream
	 * opening with a non-final stored block starts with 0x00; bits 3..7
	 * of that byte are padding, so set one (as mkfs.erofs does).
	 */
	if (((unsigned char *)dst)[0] == 0)
		((unsigned char *)dst)[0] = 0x08;
	return (ssize_t)r;
}

static int deflate_decompress_partial(struct deflate_dws *w, void *dst,
				      size_t dst_len, const void *src,
				      size_t src_len)
{
	size_t want = dst_len * 2 < 65536 ? 65536 : dst_len * 2;

	for (;;) {
		enum libdeflate_result r;
		size_t in_used, out_got;

		if (want > SCRATCH_MAX)
			want = SCRATCH_MAX;
		if (w->scratch_size < want) {
			void *p = realloc(w->scratch, want);

			if (!p)
				return -ENOMEM;
			w->scratch = p;
			w->scratch_size = want;
		}
		r = libdeflate_deflate_decompress_ex(w->d, src, src_len,
						     w->scratch,
						     w->scratch_size,
						     &in_used, &out_got);
		if (r == LIBDEFLATE_SUCCESS) {
			if (out_got < dst_len)
				return -KILN_ECORRUPT;
			memcpy(dst, w->scratch, dst_len);
			return 0;
		}
		if (r != LIBDEFLATE_INSUFFICIENT_SPACE ||
		    w->scratch_size >= SCRATCH_MAX)
			return -KILN_ECORRUPT;
		want = w->scratch_size * 2;
	}
}

/*
 * Exact: the stream must end exactly when @dst_len bytes are out. Bytes
 * after the end of the stream are ignored, as the kernel does.
 */
static int deflate_decompress(void *ws, void *dst, size_t dst_len,
			      const void *src, size_t src_len, bool partial)
{
	struct deflate_dws *w = ws;
	enum libdeflate_result r;
	size_t in_used, out_got;

	r = libdeflate_deflate_decompress_ex(w->d, src, src_len, dst, dst_len,
					     &in_used, &out_got);
	if (r == LIBDEFLATE_SUCCESS)
		return out_got == dst_len ? 0 : -KILN_ECORRUPT;
	if (r == LIBDEFLATE_INSUFFICIENT_SPACE && partial)
		return deflate_decompress_partial(w, dst, dst_len, src,
						  src_len);
	return -KILN_ECORRUPT;
}

static ssize_t deflate_config_encode(const struct kiln_codec_params *p,
				     void *dst, size_t cap)
{
	struct z_erofs_deflate_cfgs c;

	(void)p;
	if (cap < sizeof(c))
		return -ENOSPC;
	memset(&c, 0, sizeof(c));
	c.windowbits = 15;
	memcpy(dst, &c, sizeof(c));
	return sizeof(c);
}

const struct kiln_codec_ops kiln_codec_deflate = {
	.name = "deflate",
	.id = KILN_CODEC_DEFLATE,
	.erofs_alg = Z_EROFS_COMPRESSION_DEFLATE,
	.min_level = 1,
	.max_level = 12,
	.default_level = 6,
	.compress_wsize = deflate_compress_wsize,
	.stops_early = false,
	.decompress_wsize = deflate_decompress_wsize,
	.compress = deflate_compress,
	.compress_destsize = NULL,
	.decompress = deflate_decompress,
	.cws_init = deflate_cws_init,
	.cws_fini = deflate_cws_fini,
	.dws_init = deflate_dws_init,
	.dws_fini = deflate_dws_fini,
	.config_encode = deflate_config_encode,
};
