/* SPDX-License-Identifier: MIT */
/*
 * The reader's private view of an image: the mapped image, the decoded
 * superblock and decoded inodes. Shared by every lib/reader/ file.
 */
#ifndef KILN_READER_INTERNAL_H
#define KILN_READER_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <kiln/image.h>

#include "format/decode.h"
#include "util/log.h"

struct kiln_image {
	struct kiln_logger logger;
	int fd;			/* owned when opened by path, else -1 */
	const uint8_t *map;	/* whole image, read-only mapping */
	uint64_t size;		/* bytes mapped */
	struct kiln_sb sb;	/* decoded, checked superblock */
	unsigned int flags;	/* enum kiln_image_flags */
	enum kiln_cache_mode cache;
	size_t cache_size;
	void *zctx;		/* compressed-read state (zread.c), may be NULL */
};

/* Corruption exits: logs function, line and message; yields -KILN_ECORRUPT. */
#define KILN_CORRUPT(img, ...) \
	kiln_corrupt(&(img)->logger, __func__, __LINE__, __VA_ARGS__)

/*
 * The one metadata cursor: a pointer to @len bytes at byte @off of the
 * image, or NULL when [@off, @off + @len) is not inside the image (the
 * caller turns that into KILN_CORRUPT naming its object). The pointer is
 * valid until kiln_image_close().
 */
const void *kiln_metabuf_get(const struct kiln_image *img, uint64_t off,
			     size_t len);

/* Byte offset of block @blk, with overflow checked: false when it overflows. */
bool kiln_blk_off(const struct kiln_image *img, uint64_t blk, uint64_t *off);

/* Load and check inode @nid (see struct kiln_inode in format/decode.h). */
int kiln_inode_load(struct kiln_image *img, kiln_nid_t nid,
		    struct kiln_inode *inode);

struct kiln_file {
	struct kiln_image *img;
	struct kiln_inode inode;
	void *zstate;		/* per-file compressed-read state, may be NULL */
};

/*
 * Compressed data (zread.c): read @len bytes at @off of a compressed inode
 * into @buf. Called by kiln_file_pread() for COMPRESSED_FULL/COMPACT inodes
 * after it has clamped the range to the file size.
 */
ssize_t kiln_zread(struct kiln_file *file, void *buf, size_t len,
		   uint64_t off);
void kiln_zread_release(struct kiln_file *file);

#endif
