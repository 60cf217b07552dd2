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

/* One piece of a split output: @len bytes at @dst. */
struct kiln_codec_seg {
	void *dst;
	size_t len;
};

/*
 * What a build's compressor is set up for; also what its on-disk config
 * record says. Workspaces made for one set of params serve only it.
 */
struct kiln_codec_params {
	int level;
	uint32_t blksz;			/* filesystem block size */
	uint32_t max_pcluster_size;	/* largest pcluster, bytes */
};

/*
 * What fixed-output compression carries along one stream (a file's data,
 * a packed-inode segment) from one pcluster to the next, and how it may
 * probe. Zero it before the stream's first call, set the caller's fields,
 * and pass it to each call of that stream in order. Results depend only on
 * the stream's bytes and these fields, never on other streams, so any
 * number of threads gives the same output. Belongs to one thread.
 */
struct kiln_destsize_hint {
	/* set by the caller */
	size_t dst_room;	/* dst bytes a probe may write, >= dst_cap (0:
				 * dst_cap); an over-full probe then tells its
				 * size, and the next one aims better */
	uint32_t unit;		/* the output is stored in whole units of this
				 * many bytes (the block size); 0: one unit
				 * of dst_cap */
	/* carried from call to call: the last result, 0 before the first */
	size_t last_in, last_out;
	/* counters the caller may read: calls, passes over the input (a
	 * whole compression, or a streamed fill) */
	uint64_t calls, compressions;
};

struct kiln_codec_ops {
	const char *name;		/* "lz4", "lz4hc", "zstd", ... */
	enum kiln_codec_id id;
	uint8_t erofs_alg;		/* enum erofs_compr_alg */
	int min_level, max_level, default_level;
	/*
	 * Partial decoding costs only the bytes produced (lz4, zstd, lzma).
	 * False when decompress(partial) decodes everything anyway.
	 */
	bool stops_early;
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
	 * Optional, for codecs without compress_destsize() that can stream
	 * (zstd): the same fill in about one pass, the input fed in chunks
	 * and the output flushed after each, so its length is known as it
	 * grows. May write up to @hint's dst_room bytes of @dst; @hint may
	 * be NULL, else it counts passes past the first. -EAGAIN when it
	 * could not make a good fill (the caller then searches with
	 * compress()).
	 */
	ssize_t (*compress_fill)(void *ws, int level, void *dst,
				 size_t dst_cap, const void *src,
				 size_t *src_len,
				 struct kiln_destsize_hint *hint);
	/*
	 * Decode @src (exactly the stream bytes, zero padding skipped) into
	 * exactly @dst_len bytes at @dst. With @partial, stop after @dst_len
	 * bytes and do not require the stream to end there. Returns 0,
	 * -KILN_ECORRUPT on a bad stream or wrong length.
	 */
	int (*decompress)(void *ws, void *dst, size_t dst_len,
			  const void *src, size_t src_len, bool partial);
	/*
	 * Optional, for streaming decoders (zstd, lzma): as decompress() with
	 * dst_len = the sum of the segment lengths, the output delivered
	 * piecewise to @nr segments in order. Lets the reader send the part
	 * a caller asked for straight to its buffer and only the rest to
	 * scratch. NULL: the decoder needs one contiguous output.
	 */
	int (*decompress_segs)(void *ws, const struct kiln_codec_seg *seg,
			       unsigned int nr, const void *src,
			       size_t src_len, bool partial);

	/*
	 * Optional (NULL = nothing to do): set up a workspace region of
	 * compress_wsize() (cws_) or decompress_wsize() (dws_) bytes before
	 * its first use, and tear it down before it is freed. Codecs whose
	 * library keeps its own context (zstd, libdeflate, liblzma) create it
	 * here once, so compress()/decompress() never allocate in steady
	 * state. Call them through kiln_codec_cws_init() and friends.
	 */
	int (*cws_init)(void *ws, size_t ws_size,
			const struct kiln_codec_params *p);
	void (*cws_fini)(void *ws);
	int (*dws_init)(void *ws, size_t ws_size);
	void (*dws_fini)(void *ws);
	/*
	 * Optional: write the payload of this codec's compression config
	 * record (the bytes after the le16 length, section 1.5 of the format
	 * notes) for images built with @p. Returns the payload length or
	 * -ENOSPC. NULL: the codec has no record (never for on-disk codecs).
	 */
	ssize_t (*config_encode)(const struct kiln_codec_params *p, void *dst,
				 size_t cap);
	/* Optional: NULL means every level in [min_level, max_level]. */
	bool (*level_valid)(int level);
	/* Level 0 stands for @default_level, as the codec's library has it. */
	bool zero_is_default;
};

/* The ops of codec @id, or NULL if not built in. */
const struct kiln_codec_ops *kiln_codec_get(enum kiln_codec_id id);
/* The decoder for on-disk algorithm @alg (any level), or NULL. */
const struct kiln_codec_ops *kiln_codec_by_erofs_alg(unsigned int alg);

/* True when @level is accepted by @ops. */
bool kiln_codec_level_ok(const struct kiln_codec_ops *ops, int level);

/* Hook dispatchers: a NULL hook is a no-op that returns 0. */
int kiln_codec_cws_init(const struct kiln_codec_ops *ops, void *ws,
			size_t ws_size, const struct kiln_codec_params *p);
void kiln_codec_cws_fini(const struct kiln_codec_ops *ops, void *ws);
int kiln_codec_dws_init(const struct kiln_codec_ops *ops, void *ws,
			size_t ws_size);
void kiln_codec_dws_fini(const struct kiln_codec_ops *ops, void *ws);

/*
 * Fixed-output compression for every codec: ops->compress_destsize() when
 * the codec has it, else ops->compress_fill() (one streamed pass), else
 * (or when that gives up) a deterministic search over the input length
 * with ops->compress(), each probe aimed by the sizes seen so far and the
 * ratio of @hint's last result. The search takes the first output that is
 * full enough rather than the longest prefix that fits: one that leaves at
 * most 1/128 of its units unused in its last unit, and takes at least 3/4
 * of the units of @dst_cap (the caller stores the units used, so a
 * pcluster a unit short of the maximum costs nothing), or, after three
 * probes, any that fits. Same contract as compress_destsize(): *@src_len
 * in = input available, out = input consumed (> 0 on success); the search
 * takes an input that fits whole whole (a streamed fill may stop within
 * 1/128 of @dst_cap of its end). -ENOSPC when not even a minimal prefix
 * fits. @hint may be NULL: no ratio to start from, probes only write
 * @dst_cap bytes, the output is one unit.
 */
ssize_t kiln_codec_compress_destsize(const struct kiln_codec_ops *ops,
				     void *ws, int level, void *dst,
				     size_t dst_cap, const void *src,
				     size_t *src_len,
				     struct kiln_destsize_hint *hint);

/*
 * True when an output of @out bytes is full enough for a cap of @cap, as
 * kiln_codec_compress_destsize() takes it (units from @hint, may be NULL).
 */
bool kiln_destsize_full(size_t out, size_t cap,
			const struct kiln_destsize_hint *hint);

/*
 * MicroLZMA dictionary for images whose largest pcluster is
 * @max_pcluster_size bytes: 4 x that, as a power of two, within
 * [32 KiB, 8 MiB]. The compressor and the config record both use it.
 */
uint32_t kiln_lzma_dict_size(uint32_t max_pcluster_size);

/* Largest decoded size a decompress workspace must serve (12 MiB). */
#define KILN_CODEC_MAX_OUT	(12u * 1024u * 1024u)
/* zstd window limit of everything we write and accept: 1 MiB. */
#define KILN_ZSTD_WINDOW_LOG	20

#endif
