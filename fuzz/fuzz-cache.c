// SPDX-License-Identifier: MIT
/*
 * Fuzz target: the on-disk chunk cache of remote images (lib/source/
 * cache.c) reading files another process, a torn write or an attacker
 * with access to the directory left: a chunk file (its 64-byte header,
 * checksum, identity hash and bytes), the identity file (URL, identity,
 * unit) and the stats file. Each input opens the cache as a remote mount
 * would, writes the fuzzed files where it looks, then loads the chunk,
 * asks for the identity an offline open would use, stores a chunk (an
 * eviction scan over the fuzzed files), verifies, counts and clears.
 *
 * Input: [0] bits 0-3: make the header's magic and unit, length, identity
 * hash, checksum right (so the mutations reach what lies past each
 * check), bit 4: a length to load one more than the chunk holds, bit 5:
 * replace the identity file, bit 6: replace the stats file with the first
 * bytes of the chunk, bit 7: store a chunk; [1] the chunk's unit; [2..3]
 * little-endian length of the identity file's text, that text, then the
 * chunk file.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "source/cache.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define URL		"http://fuzz.invalid/image.erofs"
#define IDENTITY	"1048576 \"5f3e-1a\""
#define UNIT		4096u
#define HEADER		64

static char top[64], key_dir[128];
static uint8_t load_buf[1u << 20];

static void setup(void)
{
	const char *tmp = getenv("TMPDIR");
	char text[128];

	if (top[0])
		return;
	snprintf(top, sizeof(top), "%s/kiln-fuzz-cache-%d",
		 tmp && *tmp && strlen(tmp) < 32 ? tmp : "/tmp", (int)getpid());
	snprintf(text, sizeof(text), "%s\n%u\n", URL, UNIT);
	snprintf(key_dir, sizeof(key_dir), "%s/v1/%016" PRIx64, top,
		 (uint64_t)XXH3_64bits(text, strlen(text)));
}

static void put(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");

	if (!f)
		return;
	if (n)
		fwrite(p, 1, n, f);
	fclose(f);
}

static void put_le64(uint8_t *p, uint64_t v)
{
	for (int k = 0; k < 8; k++)
		p[k] = (uint8_t)(v >> (8 * k));
}

static void bad(void *ctx, const char *path, const char *why)
{
	(void)ctx;
	(void)path;
	(void)why;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kiln_cache_stats counts = { .requests = 1 };
	struct kiln_cache_info info;
	struct kiln_cache *c;
	char path[192], *ident = NULL;
	unsigned int flags, unit;
	size_t id_len, len;
	uint8_t *chunk;
	uint64_t osize;

	setup();
	if (size < 4)
		return 0;
	flags = data[0];
	unit = data[1];
	id_len = (size_t)(data[2] | data[3] << 8);
	data += 4;
	size -= 4;
	if (id_len > size)
		id_len = size;
	if (kiln_cache_open(&c, top, URL, IDENTITY, UNIT, 1u << 20, NULL))
		return 0;
	if (flags & 32) {
		snprintf(path, sizeof(path), "%s/identity", key_dir);
		put(path, data, id_len);
	}
	data += id_len;
	size -= id_len;
	/* the chunk, with the fields the flags ask for made right */
	chunk = malloc(size > HEADER ? size : HEADER);
	if (!chunk) {
		kiln_cache_close(c);
		return 0;
	}
	memset(chunk, 0, HEADER);
	memcpy(chunk, data, size);
	len = size > HEADER ? size - HEADER : 0;
	if (flags & 1) {
		memcpy(chunk, "KILNCHK1", 8);
		put_le64(chunk + 8, unit);
	}
	if (flags & 2)
		put_le64(chunk + 16, len);
	if (flags & 4)
		put_le64(chunk + 24, XXH3_64bits(IDENTITY, strlen(IDENTITY)));
	if (flags & 8)
		put_le64(chunk + 32, XXH3_64bits(chunk + HEADER, len));
	if (flags & 64) {
		snprintf(path, sizeof(path), "%s/v1/stats", top);
		put(path, chunk, size < HEADER ? size : HEADER);
	}
	snprintf(path, sizeof(path), "%s/%016x", key_dir, unit);
	put(path, chunk, size > HEADER ? size : HEADER);

	if (!kiln_cache_known(top, URL, UNIT, &ident, &osize))
		free(ident);
	if (len + 1 <= sizeof(load_buf))
		kiln_cache_load(c, unit, load_buf, len + !!(flags & 16));
	if (flags & 128)
		kiln_cache_store(c, unit + 1, chunk, len < 4096 ? len : 4096);
	put(path, chunk, size > HEADER ? size : HEADER);
	kiln_cache_verify(top, &info, bad, NULL);
	kiln_cache_stat(top, &info);
	kiln_cache_close_with(c, &counts);
	kiln_cache_clear(top, &info);
	free(chunk);
	return 0;
}
