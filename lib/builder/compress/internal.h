/* SPDX-License-Identifier: MIT */
/*
 * What the files of lib/builder/compress/ share: the in-memory extent list
 * of one file and the per-build compression context. Nothing outside
 * lib/builder/compress/ includes this (its unit tests aside): the rest of
 * the builder sees compress.h.
 */
#ifndef KILN_BUILDER_COMPRESS_INTERNAL_H
#define KILN_BUILDER_COMPRESS_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <kiln/builder.h>

#include "builder/compress/compress.h"
#include "codec/codec.h"
#include "util/log.h"

struct kiln_wspool;
struct kiln_dedupe;

enum kiln_zext_flags {
	KILN_ZEXT_INLINE	= 1u << 0,	/* pcluster inline after the map */
	KILN_ZEXT_FRAGMENT	= 1u << 1,	/* in the packed inode at pstart */
	KILN_ZEXT_PARTIAL	= 1u << 2,	/* pcluster decodes past llen */
	KILN_ZEXT_HOLE		= 1u << 3,	/* reads as zeros, no pcluster */
	KILN_ZEXT_SHARED	= 1u << 4,	/* pcluster of an earlier file */
	KILN_ZEXT_LOCAL		= 1u << 5,	/* shared, but committed along */
};

/*
 * One extent: logical bytes [lstart, lstart + llen) decoded from the
 * pcluster of plen bytes at byte address pstart (block aligned, whole
 * blocks in the classic layout; any byte in the extent layout).
 */
struct kiln_zext {
	uint64_t lstart;
	uint64_t pstart;	/* fragments: offset in the packed inode */
	uint32_t llen;		/* <= Z_EROFS_EXTENT_MAX_LEN */
	uint32_t plen;		/* <= Z_EROFS_PCLUSTER_MAX_SIZE */
	uint8_t fmt;		/* 0: stored raw, else on-disk algorithm + 1 */
	uint8_t flags;		/* enum kiln_zext_flags */
	uint64_t hash;		/* dedupe: kiln_dedupe_hash() of the pcluster */
};

enum kiln_zmap_kind {
	KILN_ZMAP_COMPACT = 0,	/* COMPRESSED_COMPACT, 2B/4B packs */
	KILN_ZMAP_FULL,		/* COMPRESSED_FULL, 8-byte lcluster records */
	KILN_ZMAP_EXTENTS,	/* COMPRESSED_FULL + EXTENTS advise */
	KILN_ZMAP_FRAGMENT,	/* whole file in the packed inode */
};

/*
 * One compressed file. Every file with fragments keeps this until the
 * metadata is written, so it is small: the extent list of a file with a
 * single extent (a small file in the packed inode, a one-pcluster file)
 * lives in ext1 without an allocation of its own and shares its room
 * with the hashes only flat files (no extents) carry; the other fields
 * are packed. Never copy one: ext may point into it.
 */
struct kiln_zfile {
	uint64_t size;			/* i_size */
	uint64_t blocks;		/* i_u: blocks of pclusters */
	uint64_t fragoff;		/* fragment: offset in the packed inode */
	uint64_t seg_off;		/* a part: file offset of its byte 0 */

	/*
	 * Sorted by lstart: &ext1 while there is at most one extent, then
	 * an array of 4, 8, 16 ... records (kiln_zfile_add()).
	 */
	struct kiln_zext *ext;
	struct kiln_zctx *zc;		/* for kiln_zfile_drop_inline() */
	uint8_t *idata;			/* inline pcluster (ztailpacking) */
	uint8_t *held;			/* pclusters not yet in the image */
	uint8_t *frag;			/* tail for the packed inode, until */
	size_t held_len;		/* (pstart relative to held[0]) */
	uint32_t nr_ext;
	uint32_t frag_len;		/* commit gives it fragoff */
	uint16_t idata_size;		/* less than a block */
	uint8_t blkszbits;
	uint8_t lclusterbits;		/* lcluster or fixed extent length */
	uint8_t alg;			/* on-disk algorithm of HEAD1 */
	uint8_t recsz;			/* extent records: 4, 8, 16 or 32 */
	uint8_t seg;			/* enum kiln_zseg_flags (segment.c) */
	unsigned int kind : 2;		/* enum kiln_zmap_kind */
	bool big : 1;			/* BIG_PCLUSTER_1 and _2 */
	/*
	 * A file handed back to be stored uncompressed, with dedupe on: the
	 * hashes of its whole blocks and of all of it (no extents, no map).
	 */
	bool flat : 1;
	union {
		struct kiln_zext ext1;	/* the only extent */
		struct {		/* flat */
			uint64_t flat_hash_blocks, flat_hash_all;
		};
	};
};
/* Header and one extent in one 144-byte malloc chunk (glibc, 64-bit). */
_Static_assert(sizeof(void *) != 8 || sizeof(struct kiln_zfile) <= 136,
	       "struct kiln_zfile grew past its per-file budget");

/* One line of a compress hints file (hints.c). */
struct kiln_zhint {
	char *pattern;
	struct kiln_zctx *zc;		/* NULL: store matching files raw */
	bool owner;			/* else an earlier line's zc, shared */
};

struct kiln_zctx {
	struct kiln_logger lg;
	unsigned int blkszbits;
	const struct kiln_codec_ops *ops;
	struct kiln_codec_params params;
	enum kiln_compress_layout layout;	/* resolved: never AUTO */
	unsigned int flags;			/* enum kiln_compress_flags */
	uint32_t pcluster_size;		/* classic: pcluster cap; extents: llen */
	uint32_t raw_margin;		/* bytes; never 0 after setup */
	uint32_t max_in;		/* input bytes per classic pcluster */
	unsigned int target;		/* Linux rank to mount on; 0: any */

	struct kiln_dedupe *dd;	/* NULL: no dedupe; committer only */
	struct kiln_frag *frag;	/* NULL: no fragments; committer only */
	struct kiln_wspool *pool;	/* compress workspaces */
	/*
	 * Compress hints: each line's own context (its codec, level and
	 * pcluster size, this one's flags) shares dd and frag with this
	 * root and records what it uses here.
	 */
	struct kiln_zctx *root;		/* self, or the context with the hints */
	/*
	 * The packed inode's own context (the root's codec and level, its
	 * bigger pclusters: packed_pcluster_size), or NULL: the root's.
	 */
	struct kiln_zctx *packed;
	struct kiln_zhint *hints;
	size_t nr_hints;

	pthread_mutex_t lock;		/* guards what follows */
	/* what the image uses, for the superblock */
	uint32_t used_incompat;
	uint16_t used_algs;		/* bit n: on-disk algorithm n */
	uint32_t max_plen;		/* largest pcluster written, bytes */
	bool used_lz4_big;		/* an LZ4 pcluster spans blocks */
};

static inline uint32_t kiln_zctx_blksz(const struct kiln_zctx *zc)
{
	return 1u << zc->blkszbits;
}

/* ctx.c: workspaces and feature accounting */
/* True when @zc maps files as 48-bit extents (images for Linux 6.15+). */
bool kiln_zctx_extents(const struct kiln_zctx *zc);
void *kiln_zctx_get_ws(struct kiln_zctx *zc);
void kiln_zctx_put_ws(struct kiln_zctx *zc, void *ws);
void kiln_zctx_note_file(struct kiln_zctx *zc, const struct kiln_zfile *zf);

/* hints.c: compress hints (zctx->hints) */
int kiln_zctx_load_hints(struct kiln_zctx *zc, const char *path,
			 const struct kiln_build_opts *opts);
void kiln_zctx_free_hints(struct kiln_zctx *zc);
/*
 * A context with @root's options but codec @spec and pcluster size
 * @pcluster, sharing @root's dedupe table, fragments and feature record.
 */
int kiln_zctx_new_child(struct kiln_zctx *root,
			const struct kiln_build_opts *opts,
			const struct kiln_compress_spec *spec, uint32_t pcluster,
			struct kiln_zctx **out);
/* The context for the file at @rel (relative path), NULL: store raw. */
struct kiln_zctx *kiln_zctx_for_path(struct kiln_zctx *zc, const char *rel);

/* file.c: extent list */
int kiln_zfile_add(struct kiln_zfile *zf, const struct kiln_zext *e);
/* Free the extent list and empty it (zf itself stays). */
void kiln_zfile_release_ext(struct kiln_zfile *zf);
/* Dedupe keys of the held pclusters (the compressing thread). */
void kiln_zfile_hash_held(struct kiln_zfile *zf);
/*
 * Byte-packed commits, for maps of extent records (48-bit images): each
 * pcluster goes right after the previous one, at any byte, stripped of
 * the zero padding that filled its blocks (raw ones keep their bytes),
 * and each commit continues where the last one ended instead of from a
 * new block. The bytes of the last, partly filled block wait in @bp for
 * the next commit or kiln_bytepack_finish(). No dedupe, no fragment: for
 * parts of a file that commits whole this way (the packed inode); its map
 * is then extent records (kiln_zindex_choose()). Nothing else may append
 * to @out in between.
 */
struct kiln_bytepack {
	uint8_t *buf;
	size_t len, cap;
	uint64_t addr;		/* image byte address of buf[0], on a block */
	uint64_t total;		/* pcluster bytes committed */
	bool started;
};
int kiln_zfile_commit_bytes(struct kiln_zfile *zf, struct kiln_out *out,
			    struct kiln_bytepack *bp);
int kiln_bytepack_finish(struct kiln_bytepack *bp, struct kiln_out *out);

/*
 * packed.c: store @zf's held tail in the fragment buffer (committer).
 * @may_split: the file's pclusters are still held (kiln_zfile_commit()),
 * so tail.c may turn the first part of the tail into more of them.
 */
int kiln_zfile_place_fragment(struct kiln_zfile *zf, bool may_split);
/* packed.c: input bytes per packed inode segment (packed_segment_size). */
uint64_t kiln_packed_segment_size(const struct kiln_build *b);

/*
 * tail.c: point @zf's fragment at stored bytes that end like it, or at
 * the last of them when @may_split allows (then its first bytes become
 * held pclusters). *@placed: zf->fragoff is set. 0 or -errno.
 */
int kiln_ztail_place(struct kiln_zfile *zf, bool may_split, bool *placed);

/*
 * pcluster.c: compress a file's data into pclusters appended to @out, ending
 * extents (pclusters) at @cuts (file offsets; NULL: none, compress.h).
 */
int kiln_pcluster_classic(struct kiln_zctx *zc, struct kiln_out *out,
			  kiln_src_read_fn read, void *read_ctx,
			  struct kiln_zfile *zf, const struct kiln_zcuts *cuts);
int kiln_pcluster_extents(struct kiln_zctx *zc, struct kiln_out *out,
			  kiln_src_read_fn read, void *read_ctx,
			  struct kiln_zfile *zf, const struct kiln_zcuts *cuts);

/* index.c: the on-disk map */
/*
 * Pick the index kind and extent record size for @zf's extents (compact
 * when pclusters are consecutive, else full; extents: the smallest record
 * that holds them). Call after the extent list is complete.
 */
void kiln_zindex_choose(struct kiln_zfile *zf);
/* Bytes from @meta_end to the end of the map; -E2BIG: inline crosses. */
int kiln_zindex_size(const struct kiln_zfile *zf, uint64_t meta_end,
		     size_t *len);
/* Encode the map into @dst (@len bytes from kiln_zindex_size()). */
int kiln_zindex_encode(const struct kiln_zfile *zf, uint64_t meta_end,
		       void *dst, size_t len);

#endif
