/* SPDX-License-Identifier: MIT */
/*
 * Compression codecs: identifiers, levels and the "-z ALG[:LEVEL]" syntax.
 */
#ifndef KILN_CODEC_H
#define KILN_CODEC_H

#include <kiln/kiln.h>

#ifdef __cplusplus
extern "C" {
#endif

/* kiln's codec identifiers (not the on-disk algorithm numbers). */
enum kiln_codec_id {
	KILN_CODEC_NONE = 0,
	KILN_CODEC_LZ4,
	KILN_CODEC_LZ4HC,
	KILN_CODEC_LZMA,
	KILN_CODEC_DEFLATE,
	KILN_CODEC_ZSTD,
	KILN_CODEC_MAX
};

struct kiln_compress_spec {
	enum kiln_codec_id codec;
	int level;			/* within the codec's range */
};

/*
 * LZMA levels: 0..9 are xz's presets, KILN_LZMA_EXTREME + n (written
 * "lzma:ne", e.g. "lzma:9e") is preset n with LZMA_PRESET_EXTREME.
 * zstd accepts 1..22 and the fast levels -1..-100; "zstd:0" is zstd's
 * default level (3), as in zstd itself. Elsewhere 0 is no default: lzma:0
 * is xz's preset 0, and lz4hc and deflate start at 1 (libdeflate's 0 would
 * store uncompressed: that is "none").
 */
#define KILN_LZMA_EXTREME	100

/*
 * Parse "ALG[:LEVEL]" ("lz4", "lz4hc:12", "zstd:-5", "lzma:9e"; ',' is
 * accepted in place of ':'; "none" gives KILN_CODEC_NONE) into @spec, the
 * level defaulting to the codec's. Returns 0; -EINVAL for an unknown
 * algorithm or malformed level, -ERANGE for a level outside the codec's
 * range, -EOPNOTSUPP for a codec this build lacks. On error a message
 * naming the valid algorithms and levels is written to @err (@err_cap
 * bytes, NUL-terminated, caller-owned; may be NULL). Thread-safe.
 */
KILN_API int kiln_compress_parse(const char *text,
				 struct kiln_compress_spec *spec,
				 char *err, size_t err_cap);

/*
 * Write "lz4 (1), lz4hc (1..12, default 9), ..." for the codecs built in
 * to @buf (@cap bytes, NUL-terminated, truncated if short). Returns the
 * length the full text needs, like snprintf(). Thread-safe.
 */
KILN_API size_t kiln_codec_describe(char *buf, size_t cap);

/* "lz4", "lzma", ... for @id; "none" or "unknown". Constant string. */
KILN_API const char *kiln_codec_name(enum kiln_codec_id id);

#ifdef __cplusplus
}
#endif
#endif
