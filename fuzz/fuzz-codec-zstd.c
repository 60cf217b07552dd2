// SPDX-License-Identifier: MIT
/* Fuzz target: the zstd decoder on arbitrary streams and output lengths. */
#include "fuzz-codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return fuzz_codec_decode(Z_EROFS_COMPRESSION_ZSTD, data, size);
}
