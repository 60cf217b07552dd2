/* SPDX-License-Identifier: MIT */
/*
 * The body shared by the fuzz-codec-<alg> targets: one decoder on arbitrary
 * streams and output lengths.
 * Input: [0..2] output length (le24), [3] bit 0 = partial, [4..] stream.
 */
#ifndef KILN_FUZZ_CODEC_H
#define KILN_FUZZ_CODEC_H

#include <stdint.h>
#include <stdlib.h>

#include "codec/codec.h"
#include "format/erofs_fs.h"
#include "util/endian.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Decode @data with the decoder of on-disk algorithm @alg; abort on misuse. */
static int fuzz_codec_decode(unsigned int alg, const uint8_t *data,
			     size_t size)
{
	const struct kiln_codec_ops *ops = kiln_codec_by_erofs_alg(alg);
	static void *ws;
	static size_t ws_size;
	size_t out_len;
	uint8_t *out;
	int r;

	if (!ops || size < 4)
		return 0;
	if (!ws) {
		ws_size = ops->decompress_wsize(KILN_CODEC_MAX_OUT);
		ws = aligned_alloc(64, (ws_size + 64) / 64 * 64);
		if (!ws || kiln_codec_dws_init(ops, ws, ws_size))
			abort();
	}
	out_len = (kiln_get_le32(data) & 0xFFFFFF) % (4u << 20) + 1;
	out = malloc(out_len);
	if (!out)
		return 0;
	r = ops->decompress(ws, out, out_len, data + 4, size - 4, data[3] & 1);
	if (r != 0 && r != -KILN_ECORRUPT && r != -ENOMEM)
		abort();
	free(out);
	return 0;
}

#endif
