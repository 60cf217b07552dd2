/* SPDX-License-Identifier: MIT */
/*
 * Compression, as the rest of the builder sees it: the per-build context,
 * compressed regular files, the packed inode, compress hints and the plan
 * of shifted dedupe. A file's data is compressed and its pclusters written
 * by kiln_zfile_write(); the map (header + lcluster index or extent table +
 * inline tail) is laid out later, once the inode's position is known, by
 * kiln_zfile_map_size() and kiln_zfile_map_encode(). Nothing outside
 * lib/builder/compress/ includes another of its headers (internal.h,
 * dedupe.h, frag.h), unit tests aside.
 */
#ifndef KILN_BUILDER_COMPRESS_H
#define KILN_BUILDER_COMPRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <kiln/codec.h>

struct kiln_build;		/* lib/builder/internal.h */
struct kiln_node;
struct kiln_out;		/* lib/builder/output.h */
struct kiln_zctx;		/* per-build compression state (ctx.c) */
struct kiln_zfile;		/* one file's extents and map settings */
struct kiln_zshift;		/* the plan of shifted dedupe (shifted.c) */
struct kiln_build_opts;
struct kiln_logger;

/*
 * Per-build compression state from the compression fields of @opts
 * (codec, level, pcluster size, layout, flags, raw margin) for an image of
 * 1 << @blkszbits byte blocks. *@zc is NULL (not an error) when @opts asks
 * for no compression. Returns 0, -EINVAL for inconsistent options (logged
 * to @lg, which must outlive the context) or -EOPNOTSUPP for a codec this
 * build lacks. One context serves every thread of the build.
 */
int kiln_zctx_new(const struct kiln_build_opts *opts, unsigned int blkszbits,
		  const struct kiln_logger *lg, struct kiln_zctx **zc);
void kiln_zctx_free(struct kiln_zctx *zc);

/*
 * What the superblock needs once every file is written: bits to OR into
 * feature_incompat, and the value of the u1 field (algorithm bitmap with
 * COMPR_CFGS, else 0 = default LZ4 window). Both 0 when nothing ended up
 * compressed. @zc may be NULL.
 */
void kiln_zctx_features(const struct kiln_zctx *zc, uint32_t *incompat,
			uint16_t *u1);
/*
 * True when images made with @zc are for Linux 6.15+ anyway (the 48-bit
 * layout: extents, or the metabox): classic files may then be mapped by
 * extent records where those are smaller than lcluster indexes.
 */
bool kiln_zctx_48bit(const struct kiln_zctx *zc);
/* True when @zc shares identical pclusters (dedupe). */
bool kiln_zctx_dedupe(const struct kiln_zctx *zc);
/*
 * True when a regular file of @size bytes compressed with @zc goes whole
 * into the packed inode (fragments on, @size at most a pcluster).
 */
bool kiln_zctx_fragment_whole(const struct kiln_zctx *zc, uint64_t size);
/*
 * Encode the compression config records that follow the superblock,
 * starting at image byte @pos (1024 + superblock size), into @dst. Returns
 * the bytes written from @pos (alignment included; 0 when COMPR_CFGS is
 * not needed) or -ENOSPC when @cap is too small. Call with @dst NULL to
 * learn the size.
 */
ssize_t kiln_zctx_cfgs_encode(const struct kiln_zctx *zc, uint64_t pos,
			      void *dst, size_t cap);

/* Reads @len bytes of the source file at @off into @buf; 0 or -errno. */
typedef int (*kiln_src_read_fn)(void *ctx, void *buf, size_t len,
				uint64_t off);

/*
 * The body of a kiln_src_read_fn whose bytes [@start, @start + @n) of the
 * file are in memory at @data: -EIO for a read outside them.
 */
int kiln_src_read_mem(const uint8_t *data, uint64_t start, size_t n,
		      void *buf, size_t len, uint64_t off);

/*
 * Compress @size bytes read through @read and append the pclusters to
 * @out (nothing else may append to @out meanwhile: pclusters of one file
 * are consecutive). Returns 0 and *@zf (owned by the caller,
 * kiln_zfile_free()), 1 when compression does not save a block (nothing
 * was appended: store the file uncompressed instead), or a negative errno.
 * Output is held in memory until a pcluster compresses (a file whose
 * first 8 MiB stay raw is handed back); with dedupe the whole compressed
 * file is held, to be placed at commit. Incompressible runs inside a file
 * become raw pclusters.
 *
 * Per-file settings (compress hints: a path pattern giving codec, level
 * and pcluster size) are meant to enter here as an optional spec chosen
 * by the caller; today every file uses the context's settings.
 */
int kiln_zfile_write(struct kiln_zctx *zc, struct kiln_out *out,
		     kiln_src_read_fn read, void *read_ctx, uint64_t size,
		     struct kiln_zfile **zf);
void kiln_zfile_free(struct kiln_zfile *zf);

/*
 * The same in two steps, for compressing files in parallel: _compress()
 * (any thread; different files at the same time) keeps the pclusters in
 * memory, kiln_zfile_held_bytes() of them, and _commit() (the one writer,
 * files in a fixed order) appends them to @out. Same bytes as
 * kiln_zfile_write(), whatever the thread count. The map and the other
 * accessors are valid only after the commit.
 */
int kiln_zfile_compress(struct kiln_zctx *zc, kiln_src_read_fn read,
			void *read_ctx, uint64_t size, struct kiln_zfile **zf);

/*
 * Where extents must end (shifted dedupe, kiln_zshift_cuts()): file offsets,
 * sorted, strictly inside the file. The extents layout starts an extent at each
 * (its fixed-size extents then continue from there); the classic layout ends
 * the pcluster before each and fills the next ones from there, except at a cut
 * in the lcluster where that pcluster starts (an lcluster holds one extent
 * start).
 */
struct kiln_zcuts {
	const uint64_t *at;
	size_t nr;
};

/* kiln_zfile_compress() with extents ending at @cuts (NULL: none). */
int kiln_zfile_compress_cut(struct kiln_zctx *zc, kiln_src_read_fn read,
			    void *read_ctx, uint64_t size,
			    const struct kiln_zcuts *cuts,
			    struct kiln_zfile **zf);
/*
 * With dedupe, kiln_zfile_compress() (and kiln_zfile_compress_part() for
 * the part at offset 0) returning 1 still gives *@zf: no data, only the
 * hashes of the file, taken by the worker, with which the writer stores
 * the file uncompressed and shares its blocks with an identical earlier
 * file. kiln_zfile_flat_find() looks for an earlier copy of the file's
 * first @len bytes (its whole blocks, or all of it) written from a block
 * boundary, zero padded; @same(@ctx, pstart) must confirm a candidate
 * byte for byte (1 equal, 0 not, negative errno). Returns 1 with its byte
 * address, 0 when there is none (or @zf carries no hash for @len), or a
 * negative errno. kiln_zfile_flat_add() records the file's own copy.
 * The writer only; kiln_zfile_free() as usual.
 */
int kiln_zfile_flat_find(struct kiln_zfile *zf, uint64_t len,
			 int (*same)(void *ctx, uint64_t pstart), void *ctx,
			 uint64_t *pstart);
int kiln_zfile_flat_add(struct kiln_zfile *zf, uint64_t len, uint64_t pstart);
size_t kiln_zfile_held_bytes(const struct kiln_zfile *zf);
int kiln_zfile_commit(struct kiln_zfile *zf, struct kiln_out *out);

/*
 * A big file in segments, so one file also uses every worker and memory
 * stays bounded: _compress_part() compresses bytes [@off, @off + @len) of
 * a @size-byte file (any thread, like kiln_zfile_compress(); @read still
 * gets file offsets). Each part packs on its own, so the bytes depend on
 * the segment boundaries, which must come from the input alone. Raw runs
 * become raw pclusters: a part never returns 1 unless it is the whole
 * file (and of the packed inode, the part at offset 0). The
 * one writer commits the parts in file order, each with
 * kiln_zfile_commit() followed by kiln_zfile_join(): the first part
 * becomes *@whole, later ones are moved into it and freed. After the last
 * one, kiln_zfile_seal() chooses the map; then *@whole is like any zfile.
 * @cuts: the whole file's (those inside the part apply), or NULL.
 */
int kiln_zfile_compress_part(struct kiln_zctx *zc, kiln_src_read_fn read,
			     void *read_ctx, uint64_t off, uint64_t len,
			     uint64_t size, const struct kiln_zcuts *cuts,
			     struct kiln_zfile **part);
int kiln_zfile_join(struct kiln_zfile **whole, struct kiln_zfile *part);
void kiln_zfile_seal(struct kiln_zfile *whole);

/* enum erofs_datalayout to put in i_format (COMPRESSED_FULL/_COMPACT). */
unsigned int kiln_zfile_datalayout(const struct kiln_zfile *zf);
/* Physical blocks used (i_u of the inode). */
uint64_t kiln_zfile_blocks(const struct kiln_zfile *zf);
/*
 * Bytes the map occupies after @meta_end (the byte just past the inode's
 * inline xattrs), alignment padding included. Depends on @meta_end
 * (compact indexes are aligned to 32 bytes), so call it per candidate
 * position. Returns 0 with *@len, or -E2BIG when an inline pcluster would
 * cross a block boundary or start exactly at one at that position (the
 * caller then tries the next 32-byte slot: one of every block's slots
 * fits, as inline pclusters leave 256 bytes of their block free; or it
 * calls kiln_zfile_drop_inline() before any metadata is written).
 */
int kiln_zfile_map_size(const struct kiln_zfile *zf, uint64_t meta_end,
			size_t *len);
/* Write the map for an inode whose xattrs end at @meta_end into @dst. */
int kiln_zfile_map_encode(const struct kiln_zfile *zf, uint64_t meta_end,
			  void *dst, size_t len);
/*
 * Give up the inline tail pcluster: append it to @out as a regular
 * pcluster. The map then needs no particular position; its size and
 * kiln_zfile_datalayout() may change. No-op without an inline tail.
 */
int kiln_zfile_drop_inline(struct kiln_zfile *zf, struct kiln_out *out);
/* True when the map has an inline tail (size depends on position). */
bool kiln_zfile_has_inline(const struct kiln_zfile *zf);

/* segment.c: compressing in segments */
/*
 * Input bytes per segment of a big compressed file (pipeline.c): a multiple
 * of every extent size (at most 1 MiB) and a constant, so any -j cuts files
 * at the same places. Only a file of one segment that stays all raw is
 * stored uncompressed (segment.c).
 */
#define KILN_ZSEG_SIZE	(8ull << 20)

enum kiln_zseg_flags {
	KILN_ZSEG_CONT	= 1u << 0,	/* not the first: never handed back raw */
	KILN_ZSEG_MORE	= 1u << 1,	/* not the last: no inline tail */
	KILN_ZSEG_PACKED = 1u << 2,	/* the packed inode: no fragment */
	/*
	 * A part read from a stream (tar): when the first part is handed back
	 * raw, the rest of the file is not readable yet, so no hashes are
	 * taken (the writer stores the file from the stream).
	 */
	KILN_ZSEG_STREAM = 1u << 3,
	/*
	 * The first part of a file of several: never handed back raw, its
	 * raw pclusters stay in the compressed layout (segment.c).
	 */
	KILN_ZSEG_KEEP = 1u << 4,
};

/*
 * kiln_zfile_compress_part() with @seg flags added to the part's
 * own (KILN_ZSEG_PACKED for the packed inode's segments).
 */
int kiln_zfile_compress_segment(struct kiln_zctx *zc, kiln_src_read_fn read,
				void *read_ctx, uint64_t off, uint64_t len,
				uint64_t size, unsigned int seg,
				const struct kiln_zcuts *cuts,
				struct kiln_zfile **part);

/*
 * A zfile that only carries the dedupe hashes of a @size-byte file to be
 * stored uncompressed (zf->flat), read again through @read.
 */
int kiln_zfile_flat_new(struct kiln_zctx *zc, kiln_src_read_fn read,
			void *read_ctx, uint64_t size, struct kiln_zfile **zf);

/*
 * shifted.c: dedupe of data that recurs at other offsets (--dedupe-shifted).
 * Before the data pass, every big compressed file is cut into content-defined
 * chunks and each chunk is hashed; a chunk found in two different files (or
 * twice in one) is "shared". The data pass then ends extents at both ends of
 * every shared chunk, so each copy of it is compressed from the same first byte
 * into the same pclusters, whatever its offset in its file, and pcluster dedupe
 * stores them once. Files with nothing shared are cut nowhere: they compress
 * exactly as without the option.
 *
 * Everything here depends on the file contents only (chunk boundaries
 * come from a rolling hash of the last 64 bytes; counts are merged in tree
 * order), so the image does not depend on the thread count.
 *
 * Read and chunk every regular file of b->order that is compressed (with
 * dedupe) and long enough to hold two chunks; sets b->zshift
 * (NULL when no file has a shared chunk). Returns 0 or a negative errno;
 * a file that cannot be read now only gets no cuts (the data pass reports
 * it).
 */
int kiln_zshift_plan(struct kiln_build *b);

/*
 * The cuts of node b->order[@idx] in *@cuts: false (and @cuts untouched)
 * when it has none. Safe from any thread once the plan is made.
 */
bool kiln_zshift_cuts(const struct kiln_zshift *zs, size_t idx,
		      struct kiln_zcuts *cuts);

void kiln_zshift_free(struct kiln_zshift *zs);

/* hints.c: compress hints */
/*
 * What the compress hints file @path asks of the kernel, read ahead of
 * its parsing: the codecs its lines name (1u << enum kiln_codec_id) and
 * the largest pcluster size a line gives. Lines it cannot read are left
 * to kiln_zctx_load_hints(), which reports them; so is an unreadable file
 * (then both stay 0).
 */
void kiln_hints_needs(const char *path, uint32_t *codecs,
		      uint32_t *max_pcluster);
/*
 * The compression context for regular file @n: b->zctx, the one its
 * compress hint names, or NULL when it is to be stored uncompressed.
 */
struct kiln_zctx *kiln_node_zctx(const struct kiln_build *b,
				 const struct kiln_node *n);
/*
 * Choose @n's context now from @rel, its path relative to the root (for
 * a node not yet linked into the tree, as a tar entry while it streams).
 */
void kiln_node_pick_zctx(const struct kiln_build *b, struct kiln_node *n,
			 const char *rel);

/* packed.c: the packed inode */
/*
 * After the data pass: store the fragment buffer as the packed inode (an
 * unlinked regular file appended to b->nodes, b->packed). No-op without
 * fragments.
 */
int kiln_packed_write(struct kiln_build *b);
/*
 * During the data pass, after the committer has placed files: hand the
 * segments of the fragment buffer it has grown past to the workers
 * (b->packer, made on first use). 0 or the first error of a segment.
 */
int kiln_packed_poll(struct kiln_build *b);
/* Drop b->packer and what it holds (after a failure). */
void kiln_packed_free(struct kiln_build *b);
/* Whether the build collects fragments (and so has a packed inode). */
bool kiln_packed_wanted(const struct kiln_build *b);

#endif
