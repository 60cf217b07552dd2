/* SPDX-License-Identifier: MIT */
/*
 * dm-verity hash trees (docs/verity.md): what kiln build appends after an
 * image with KILN_BUILD_VERITY, and what the reader checks every block
 * against when opened with a root hash.
 */
#ifndef KILN_VERITY_H
#define KILN_VERITY_H

#include <sys/types.h>

#include <kiln/kiln.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_VERITY_DIGEST_SIZE	32	/* SHA-256 */
#define KILN_VERITY_SALT_MAX	256	/* bytes, as veritysetup allows */

/* Where a tree lies and what it hashes to. */
struct kiln_verity_info {
	uint8_t root[KILN_VERITY_DIGEST_SIZE];	/* the root hash */
	uint8_t salt[KILN_VERITY_SALT_MAX];
	size_t salt_len;
	uint32_t block_size;		/* data and hash blocks alike */
	uint64_t data_blocks;		/* blocks hashed, from block 0 */
	uint64_t hash_offset;		/* bytes: the verity superblock */
	uint64_t hash_blocks;		/* the superblock's block and the tree */
	unsigned int levels;		/* tree levels (0: one data block) */
};

/*
 * Decode the hex string @hex (upper or lower case, nothing else) into
 * @dst. Returns the number of bytes, -EINVAL for an odd length or a
 * character that is not a hex digit, -ERANGE when more than @cap bytes.
 */
KILN_API ssize_t kiln_hex_decode(const char *hex, uint8_t *dst, size_t cap);

/* @len bytes of @src as lower-case hex into @dst (2 * @len + 1 bytes). */
KILN_API void kiln_hex_encode(const uint8_t *src, size_t len, char *dst);

#ifdef __cplusplus
}
#endif
#endif
