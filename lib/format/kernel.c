// SPDX-License-Identifier: MIT
/*
 * The oldest Linux release that mounts an image with a given set of
 * on-disk features (format notes, "Kernel versions").
 */
#include <stddef.h>

#include "format/erofs_fs.h"
#include "format/kernel.h"

struct need {
	const char *version;
	unsigned int rank;	/* orders the versions */
	const char *why;
};

static void raise_to(struct kiln_kernel_need *k, const struct need *n)
{
	if (n->rank > k->rank) {
		k->rank = n->rank;
		k->version = n->version;
		k->why = n->why;
	}
}

void kiln_kernel_need(uint32_t compat, uint32_t incompat, uint16_t algs,
		      unsigned int blkszbits, struct kiln_kernel_need *k)
{
	static const struct need base = { "5.4", 504, "EROFS" };
	static const struct need csum = { "5.5", 505, "superblock checksum" };
	static const struct need big = { "5.13", 513, "big pclusters" };
	static const struct need chunk = { "5.15", 515, "chunk-based files" };
	static const struct need lzma = { "5.16", 516, "MicroLZMA" };
	static const struct need head2 = { "5.16", 516, "two algorithms per image" };
	static const struct need ztail = { "5.17", 517, "ztailpacking" };
	static const struct need frag = { "6.1", 601, "fragments and dedupe" };
	static const struct need prefix = { "6.4", 604, "long xattr prefixes" };
	static const struct need subpage = { "6.4", 604, "blocks smaller than 4 KiB" };
	static const struct need deflate = { "6.6", 606, "DEFLATE" };
	static const struct need zstd = { "6.10", 610, "Zstandard" };
	static const struct need bit48 = { "6.15", 615, "the 48-bit layout" };
	static const struct need metabox = { "6.17", 617, "metadata compression" };

	k->rank = 0;
	k->version = NULL;
	k->why = NULL;
	raise_to(k, &base);
	if (compat & EROFS_FEATURE_COMPAT_SB_CHKSUM)
		raise_to(k, &csum);
	if (incompat & EROFS_FEATURE_INCOMPAT_BIG_PCLUSTER)
		raise_to(k, &big);
	if (incompat & EROFS_FEATURE_INCOMPAT_CHUNKED_FILE)
		raise_to(k, &chunk);
	if (incompat & EROFS_FEATURE_INCOMPAT_COMPR_HEAD2)
		raise_to(k, &head2);
	if (incompat & EROFS_FEATURE_INCOMPAT_ZTAILPACKING)
		raise_to(k, &ztail);
	if (incompat & EROFS_FEATURE_INCOMPAT_FRAGMENTS)
		raise_to(k, &frag);
	if (incompat & EROFS_FEATURE_INCOMPAT_XATTR_PREFIXES)
		raise_to(k, &prefix);
	if (blkszbits < 12)
		raise_to(k, &subpage);
	if (incompat & EROFS_FEATURE_INCOMPAT_COMPR_CFGS) {
		if (algs & (1u << Z_EROFS_COMPRESSION_LZMA))
			raise_to(k, &lzma);
		if (algs & (1u << Z_EROFS_COMPRESSION_DEFLATE))
			raise_to(k, &deflate);
		if (algs & (1u << Z_EROFS_COMPRESSION_ZSTD))
			raise_to(k, &zstd);
	}
	if (incompat & EROFS_FEATURE_INCOMPAT_48BIT)
		raise_to(k, &bit48);
	if (incompat & EROFS_FEATURE_INCOMPAT_METABOX)
		raise_to(k, &metabox);
}
