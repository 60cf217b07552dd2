/* SPDX-License-Identifier: MIT */
/*
 * Linux releases and the EROFS features each one mounts: one table, read
 * by the builder (what a target kernel allows) and the reader (the oldest
 * kernel that mounts an image). Kernels are named by rank, major * 100 +
 * minor: 601 is Linux 6.1.
 */
#ifndef KILN_KERNEL_H
#define KILN_KERNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <kiln/kiln.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One row of the table each; the order is the table's, oldest first. */
enum kiln_kfeature {
	KILN_KF_EROFS = 0,	/* the base format, LZ4, compact indexes */
	KILN_KF_SB_CHKSUM,	/* superblock CRC32C (compat 0x1) */
	KILN_KF_BIG_PCLUSTER,	/* pclusters of more than one block, config records */
	KILN_KF_CHUNKED,	/* chunk-based files (sparse files) */
	KILN_KF_LZMA,		/* MicroLZMA */
	KILN_KF_HEAD2,		/* two algorithms in one image */
	KILN_KF_DEVICES,	/* extra devices */
	KILN_KF_ZTAILPACKING,	/* the last pcluster inline */
	KILN_KF_FRAGMENTS,	/* the packed inode; partial dedupe references */
	KILN_KF_DEVICES_SUBPAGE, /* extra devices, blocks below 4 KiB (tar index) */
	KILN_KF_SUBPAGE,	/* blocks smaller than 4 KiB, uncompressed files */
	KILN_KF_XATTR_PREFIXES,	/* long xattr name prefixes */
	KILN_KF_XATTR_FILTER,	/* xattr name bloom filter (compat 0x4) */
	KILN_KF_DEFLATE,
	KILN_KF_SUBPAGE_COMPRESSED, /* compressed files, blocks below 4 KiB */
	KILN_KF_ZSTD,
	KILN_KF_48BIT,		/* the 48-bit layout, encoded extents */
	KILN_KF_METABOX,	/* compressed metadata */
	KILN_KF_COUNT
};

enum kiln_kfeature_flags {
	/*
	 * Kernels older than the feature mount images that carry it and
	 * read them right, ignoring the feature (an unknown compat bit, a
	 * field they treat as reserved): any target may keep it, and it
	 * does not raise the oldest kernel that mounts an image.
	 */
	KILN_KF_IGNORED_BEFORE = 1u << 0,
};

struct kiln_kernel_feature {
	const char *name;	/* "Zstandard" */
	const char *marker;	/* on-disk sign: "incompat 0x20", "alg 3" */
	const char *version;	/* first release: "6.10" */
	unsigned int rank;	/* the same as a rank: 610 */
	unsigned int flags;	/* enum kiln_kfeature_flags */
	/*
	 * NULL, or when the kernel logs "EXPERIMENTAL" on mounting an image
	 * that uses it: "up to 6.19", "still in 7.2".
	 */
	const char *experimental;
};

/* Row @f of the table, or NULL when @f >= KILN_KF_COUNT. Constant data. */
KILN_API const struct kiln_kernel_feature *
kiln_kernel_feature(enum kiln_kfeature f);

/* The newest first release in the table (what "latest" stands for). */
KILN_API unsigned int kiln_kernel_latest(void);

/*
 * Parse a release, "5.15", "6.1" (a third number, "6.1.55", is accepted
 * and ignored) or "latest", into *@rank. Returns 0, -EINVAL when @s is no
 * version, -ERANGE for releases older than 5.4 (EROFS left staging there).
 */
KILN_API int kiln_kernel_parse(const char *s, unsigned int *rank);

/* Whether Linux @rank mounts images that use feature @f. */
KILN_API bool kiln_kernel_allows(unsigned int rank, enum kiln_kfeature f);

struct kiln_kernel_need {
	const char *version;	/* "6.15": constant string */
	const char *why;	/* the feature that needs it */
	unsigned int rank;	/* major * 100 + minor */
	uint32_t features;	/* 1u << enum kiln_kfeature, each one used */
};

/*
 * The oldest Linux that mounts an image with these superblock values:
 * feature bits, the algorithm bitmap (meaningful with COMPR_CFGS, else 0)
 * and the block size. Fills @k; its strings are constant.
 */
KILN_API void kiln_kernel_need(uint32_t compat, uint32_t incompat,
			       uint16_t algs, unsigned int blkszbits,
			       struct kiln_kernel_need *k);

#ifdef __cplusplus
}
#endif
#endif
