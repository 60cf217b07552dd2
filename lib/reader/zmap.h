/* SPDX-License-Identifier: MIT */
/*
 * Extent lookup for compressed inodes: which pcluster holds a logical
 * offset, for every on-disk map (lcluster indexes full/compact, encoded
 * extents, inline tails, fragments).
 */
#ifndef KILN_READER_ZMAP_H
#define KILN_READER_ZMAP_H

#include <stdbool.h>
#include <stdint.h>

#include "reader/internal.h"

enum kiln_zext_kind {
	KILN_ZEXT_HOLE = 0,		/* reads as zeros */
	KILN_ZEXT_PLAIN,		/* raw bytes, shifted (byte k at pa + k) */
	KILN_ZEXT_INTERLACED,		/* raw bytes rotated to in-block offsets */
	KILN_ZEXT_COMPRESSED,		/* one stream of algorithm @alg */
	KILN_ZEXT_FRAGMENT,		/* packed inode bytes [pa, pa + llen) */
};

/* One extent: logical [la, la + llen) decoded from the pcluster at pa. */
struct kiln_zext {
	uint64_t la;
	uint64_t llen;
	uint64_t pa;		/* image byte address; packed offset (fragment) */
	uint32_t plen;		/* pcluster bytes (0 for holes/fragments) */
	uint8_t kind;		/* enum kiln_zext_kind */
	uint8_t alg;		/* enum erofs_compr_alg, COMPRESSED only */
	bool partial;		/* the stream decodes to more than llen */
	bool is_inline;		/* ztailpacking pcluster inside the metadata */
	bool zero_padded;	/* the stream starts at the first non-zero byte */
};

enum kiln_zmap_layout {
	KILN_ZMAP_FULL,			/* 8-byte lcluster records */
	KILN_ZMAP_COMPACT,		/* 4B/2B packs */
	KILN_ZMAP_EXTENTS,		/* 48-bit encoded extents */
	KILN_ZMAP_WHOLE_FRAGMENT,	/* the file lives in the packed inode */
};

/* The parsed map header of one inode plus the lookup hint. */
struct kiln_zmap {
	struct kiln_image *img;
	kiln_nid_t nid;
	uint64_t size;			/* i_size */
	enum kiln_zmap_layout layout;
	uint16_t advise;
	uint8_t algs[2];		/* HEAD1, HEAD2 algorithm */
	unsigned int lclusterbits;
	uint64_t idx_off;		/* first record (compact: ebase) */
	uint64_t nr_lclusters;		/* records in the lcluster formats */
	/* compact packs */
	uint64_t init4, n2;
	/* encoded extents */
	unsigned int recsz;
	uint64_t nr_extents;		/* records in the table */
	uint64_t ext_base;		/* recsz 4: pstart of record 0 */
	/* tail extent (ztailpacking, fragments) */
	bool have_tail;
	uint64_t tail_headlcn;
	uint64_t idata_off;		/* inline pcluster byte address */
	uint32_t idata_size;
	uint64_t fragoff;
	/* hint: the last extent found and, for tables, its record */
	bool hint_valid;
	struct kiln_zext hint;
	uint64_t hint_rec;		/* EXTENTS: record index of the hint */
	uint64_t hint_rec_pa;		/* recsz 4: pstart of record hint_rec */
	/* counters for tests and benchmarks */
	uint64_t lookups, hint_hits, probes;
	uint64_t blocks;		/* probes that changed metadata block */
	uint64_t last_blk;
};

/*
 * Parse the map header of compressed inode @in. Returns 0,
 * -KILN_ECORRUPT or -EOPNOTSUPP (unknown algorithm / layout).
 */
int kiln_zmap_init(struct kiln_zmap *zm, struct kiln_image *img,
		   const struct kiln_inode *in);

/*
 * Find the extent holding byte @off (< i_size). Fills @ext with its full
 * logical range (clamped to i_size). O(1) for the extent after the last
 * one found. 0, -KILN_ECORRUPT or -EOPNOTSUPP.
 */
int kiln_zmap_lookup(struct kiln_zmap *zm, uint64_t off,
		     struct kiln_zext *ext);

#endif
