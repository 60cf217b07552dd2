/* SPDX-License-Identifier: MIT */
/*
 * The codec table: one ops table per codec, indexed by kiln codec id and
 * reachable from the on-disk algorithm number. Buffers go dst, dst_cap,
 * src, src_len everywhere.
 */
#ifndef KILN_CODEC_CODEC_H
#define KILN_CODEC_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <kiln/codec.h>

struct kiln_codec_ops {
	const char *name;		/* "lz4", "lz4hc", "zstd", ... */
	enum kiln_codec_id id;
	uint8_t erofs_alg;		/* enum erofs_compr_alg */
	int min_level, max_level, default_level;
	/*
	 * Bytes of workspace compress()/compress_destsize() need at @level
	 * with inputs up to @max_in bytes, and decompress() needs for
	 * outputs up to @max_out (@level ignored).
	 */
	size_t (*compress_wsize)(int level, size_t max_in);
	size_t (*decompress_wsize)(size_t max_out);
	/*
	 * Compress all of @src into @dst (a whole extent in, variable-length
	 * output: the 48-bit extent layout). Returns the compressed length,
	 * -ENOSPC when it does not fit in @dst_cap, or another negative
	 * errno. @ws is a workspace of compress_wsize() bytes.
	 */
	ssize_t (*compress)(void *ws, int level, void *dst, size_t dst_cap,
			    const void *src, size_t src_len);
	/*
	 * Fill at most @dst_cap bytes of @dst with the compressed form of as
	 * much of @src as fits (the classic fixed-output layout). On entry
	 * *@src_len is the input available, on return the input consumed.
	 * Returns the compressed length or a negative errno; NULL for codecs
	 * that cannot (the caller binary-searches with compress()).
	 */
	ssize_t (*compress_destsize)(void *ws, int level, void *dst,
				     size_t dst_cap, const void *src,
				     size_t *src_len);
	/*
	 * Decode @src (exactly the stream bytes, zero padding skipped) into
	 * exactly @dst_len bytes at @dst. With @partial, stop after @dst_len
	 * bytes and do not require the stream to end there. Returns 0,
	 * -KILN_ECORRUPT on a bad stream or wrong length.
	 */
	int (*decompress)(void *ws, void *dst, size_t dst_len,
			  const void *src, size_t src_len, bool partial);
};

/* The ops of codec @id, or NULL if not built in. */
const struct kiln_codec_ops *kiln_codec_get(enum kiln_codec_id id);
/* The decoder for on-disk algorithm @alg (any level), or NULL. */
const struct kiln_codec_ops *kiln_codec_by_erofs_alg(unsigned int alg);

#endif
