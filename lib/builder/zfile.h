/* SPDX-License-Identifier: MIT */
/*
 * Compressed regular files, as the rest of the builder sees them: the data
 * is compressed and its pclusters written by kiln_zfile_write(); the map
 * (header + lcluster index or extent table + inline tail) is laid out later,
 * once the inode's position is known, by kiln_zfile_map_size() and
 * kiln_zfile_map_encode().
 */
#ifndef KILN_BUILDER_ZFILE_H
#define KILN_BUILDER_ZFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <kiln/codec.h>

struct kiln_out;		/* lib/builder/output.h */
struct kiln_zctx;		/* per-build compression state (zfile.c) */
struct kiln_zfile;		/* one file's extents and map settings */

/* Reads @len bytes of the source file at @off into @buf; 0 or -errno. */
typedef int (*kiln_src_read_fn)(void *ctx, void *buf, size_t len,
				uint64_t off);

/*
 * Compress @size bytes read through @read and append the pclusters to
 * @out. Returns 0 and *@zf (owned by the caller, kiln_zfile_free()),
 * -ENOSPC-like "not worth it" as 1 (store the file uncompressed instead),
 * or a negative errno.
 */
int kiln_zfile_write(struct kiln_zctx *zc, struct kiln_out *out,
		     kiln_src_read_fn read, void *read_ctx, uint64_t size,
		     struct kiln_zfile **zf);
void kiln_zfile_free(struct kiln_zfile *zf);

/* enum erofs_datalayout to put in i_format (COMPRESSED_FULL/_COMPACT). */
unsigned int kiln_zfile_datalayout(const struct kiln_zfile *zf);
/* Physical blocks used (i_u of the inode). */
uint64_t kiln_zfile_blocks(const struct kiln_zfile *zf);
/*
 * Bytes the map occupies after @meta_end (the byte just past the inode's
 * inline xattrs), alignment padding included. Depends on @meta_end
 * (compact indexes are aligned to 32 bytes), so call it per candidate
 * position. Returns 0 with *@len, or -E2BIG when an inline tail would cross
 * a block boundary at that position (the caller then tries another position
 * or calls kiln_zfile_drop_inline()).
 */
int kiln_zfile_map_size(const struct kiln_zfile *zf, uint64_t meta_end,
			size_t *len);
/* Write the map for an inode whose xattrs end at @meta_end into @dst. */
int kiln_zfile_map_encode(const struct kiln_zfile *zf, uint64_t meta_end,
			  void *dst, size_t len);

#endif
