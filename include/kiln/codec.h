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

#ifdef __cplusplus
}
#endif
#endif
