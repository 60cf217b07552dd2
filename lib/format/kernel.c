// SPDX-License-Identifier: MIT
/*
 * The table of EROFS features and the first Linux release that mounts
 * each (format notes, "Kernel versions"): what a target kernel allows, and
 * the oldest kernel that mounts a given image.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "format/erofs_fs.h"
#include "format/kernel.h"

#define F(id, nm, mk, ver, rk, fl, exp) \
	[id] = { .name = nm, .marker = mk, .version = ver, .rank = rk, \
		 .flags = fl, .experimental = exp }

/*
 * As of Linux 6.18. The superblock checksum and the xattr filter are
 * compat bits: older kernels never look at compat bits they do not know
 * (5.4 does not verify the checksum; before 6.6 the filter's word in the
 * xattr header is reserved and unread), so images for any target keep
 * them and newer kernels still use them.
 */
static const struct kiln_kernel_feature table[KILN_KF_COUNT] = {
	F(KILN_KF_EROFS, "EROFS", "-", "5.4", 504, 0, NULL),
	F(KILN_KF_SB_CHKSUM, "superblock checksum", "compat 0x1", "5.5", 505,
	  KILN_KF_IGNORED_BEFORE, NULL),
	F(KILN_KF_BIG_PCLUSTER, "big pclusters", "incompat 0x2", "5.13", 513,
	  0, NULL),
	F(KILN_KF_CHUNKED, "chunk-based files", "incompat 0x4", "5.15", 515,
	  0, NULL),
	F(KILN_KF_LZMA, "MicroLZMA", "alg 1", "5.16", 516, 0, NULL),
	F(KILN_KF_HEAD2, "two algorithms per image", "incompat 0x8", "5.16",
	  516, 0, NULL),
	F(KILN_KF_DEVICES, "multiple devices", "incompat 0x8", "5.16", 516,
	  0, NULL),
	F(KILN_KF_ZTAILPACKING, "ztailpacking", "incompat 0x10", "5.17", 517,
	  0, NULL),
	F(KILN_KF_FRAGMENTS, "fragments and dedupe", "incompat 0x20", "6.1",
	  601, 0, NULL),
	/*
	 * Before 6.4 a block was a page; from 6.4 chunk maps and device
	 * addresses count in the image's own blocks, so data on an extra
	 * device can sit on 512-byte tar records.
	 */
	F(KILN_KF_DEVICES_SUBPAGE, "tar index: extra devices, blocks under 4 "
	  "KiB", "incompat 0x8, blkszbits < 12", "6.4", 604, 0, NULL),
	F(KILN_KF_SUBPAGE, "blocks smaller than 4 KiB", "blkszbits < 12",
	  "6.4", 604, 0, NULL),
	F(KILN_KF_XATTR_PREFIXES, "long xattr prefixes", "incompat 0x40",
	  "6.4", 604, 0, NULL),
	F(KILN_KF_XATTR_FILTER, "xattr bloom filter", "compat 0x4", "6.6",
	  606, KILN_KF_IGNORED_BEFORE, NULL),
	F(KILN_KF_DEFLATE, "DEFLATE", "alg 2", "6.6", 606, 0, "up to 6.19"),
	F(KILN_KF_SUBPAGE_COMPRESSED, "compressed files in blocks smaller "
	  "than 4 KiB", "blkszbits < 12, compressed", "6.8", 608, 0,
	  "still in 7.2"),
	F(KILN_KF_ZSTD, "Zstandard", "alg 3", "6.10", 610, 0, NULL),
	F(KILN_KF_48BIT, "the 48-bit layout", "incompat 0x80", "6.15", 615, 0,
	  "still in 7.2"),
	F(KILN_KF_METABOX, "metadata compression", "incompat 0x100", "6.17",
	  617, 0, "still in 7.2"),
};

KILN_API const struct kiln_kernel_feature *
kiln_kernel_feature(enum kiln_kfeature f)
{
	return (unsigned int)f < KILN_KF_COUNT ? &table[f] : NULL;
}

KILN_API unsigned int kiln_kernel_latest(void)
{
	unsigned int rank = 0;

	for (size_t i = 0; i < KILN_KF_COUNT; i++)
		if (table[i].rank > rank)
			rank = table[i].rank;
	return rank;
}

/* A decimal number of one to three digits at *@s; advances *@s. */
static int parse_part(const char **s, unsigned int *v)
{
	const char *p = *s;

	*v = 0;
	while (*p >= '0' && *p <= '9' && p - *s < 3)
		*v = *v * 10 + (unsigned int)(*p++ - '0');
	if (p == *s || (*p >= '0' && *p <= '9'))
		return -EINVAL;
	*s = p;
	return 0;
}

KILN_API int kiln_kernel_parse(const char *s, unsigned int *rank)
{
	unsigned int major, minor, patch;

	if (!s)
		return -EINVAL;
	if (!strcmp(s, "latest")) {
		*rank = kiln_kernel_latest();
		return 0;
	}
	if (parse_part(&s, &major) || *s++ != '.' || parse_part(&s, &minor) ||
	    minor > 99 || major > 99)
		return -EINVAL;
	if (*s == '.' && (s++, parse_part(&s, &patch)))
		return -EINVAL;
	if (*s)
		return -EINVAL;
	if (major * 100 + minor < table[KILN_KF_EROFS].rank)
		return -ERANGE;
	*rank = major * 100 + minor;
	return 0;
}

KILN_API bool kiln_kernel_allows(unsigned int rank, enum kiln_kfeature f)
{
	const struct kiln_kernel_feature *k = kiln_kernel_feature(f);

	return k && (rank >= k->rank || (k->flags & KILN_KF_IGNORED_BEFORE));
}

/* The features an image with these superblock values uses. */
static uint32_t image_features(uint32_t compat, uint32_t incompat,
			       uint16_t algs, unsigned int blkszbits)
{
	bool compressed = incompat & (EROFS_FEATURE_INCOMPAT_ZERO_PADDING |
				      EROFS_FEATURE_INCOMPAT_COMPR_CFGS);
	uint32_t f = 1u << KILN_KF_EROFS;

	if (compat & EROFS_FEATURE_COMPAT_SB_CHKSUM)
		f |= 1u << KILN_KF_SB_CHKSUM;
	if (compat & EROFS_FEATURE_COMPAT_XATTR_FILTER)
		f |= 1u << KILN_KF_XATTR_FILTER;
	if (incompat & EROFS_FEATURE_INCOMPAT_BIG_PCLUSTER)
		f |= 1u << KILN_KF_BIG_PCLUSTER;
	if (incompat & EROFS_FEATURE_INCOMPAT_CHUNKED_FILE)
		f |= 1u << KILN_KF_CHUNKED;
	if (incompat & EROFS_FEATURE_INCOMPAT_COMPR_HEAD2)
		f |= 1u << (compressed ? KILN_KF_HEAD2 : KILN_KF_DEVICES);
	if (incompat & EROFS_FEATURE_INCOMPAT_ZTAILPACKING)
		f |= 1u << KILN_KF_ZTAILPACKING;
	if (incompat & EROFS_FEATURE_INCOMPAT_FRAGMENTS)
		f |= 1u << KILN_KF_FRAGMENTS;
	if (incompat & EROFS_FEATURE_INCOMPAT_XATTR_PREFIXES)
		f |= 1u << KILN_KF_XATTR_PREFIXES;
	if (blkszbits < 12)
		f |= 1u << (compressed ? KILN_KF_SUBPAGE_COMPRESSED
				       : KILN_KF_SUBPAGE);
	if (blkszbits < 12 && !compressed &&
	    (incompat & EROFS_FEATURE_INCOMPAT_DEVICE_TABLE))
		f |= 1u << KILN_KF_DEVICES_SUBPAGE;
	if (incompat & EROFS_FEATURE_INCOMPAT_COMPR_CFGS) {
		if (algs & (1u << Z_EROFS_COMPRESSION_LZMA))
			f |= 1u << KILN_KF_LZMA;
		if (algs & (1u << Z_EROFS_COMPRESSION_DEFLATE))
			f |= 1u << KILN_KF_DEFLATE;
		if (algs & (1u << Z_EROFS_COMPRESSION_ZSTD))
			f |= 1u << KILN_KF_ZSTD;
	}
	if (incompat & EROFS_FEATURE_INCOMPAT_48BIT)
		f |= 1u << KILN_KF_48BIT;
	if (incompat & EROFS_FEATURE_INCOMPAT_METABOX)
		f |= 1u << KILN_KF_METABOX;
	return f;
}

KILN_API void kiln_kernel_need(uint32_t compat, uint32_t incompat,
			       uint16_t algs, unsigned int blkszbits,
			       struct kiln_kernel_need *k)
{
	k->features = image_features(compat, incompat, algs, blkszbits);
	k->rank = 0;
	k->version = NULL;
	k->why = NULL;
	for (unsigned int i = 0; i < KILN_KF_COUNT; i++) {
		const struct kiln_kernel_feature *t = &table[i];

		if (!(k->features & (1u << i)) ||
		    (t->flags & KILN_KF_IGNORED_BEFORE) || t->rank <= k->rank)
			continue;
		k->rank = t->rank;
		k->version = t->version;
		k->why = t->name;
	}
}
