/* SPDX-License-Identifier: MIT */
/*
 * A hand-made image around fuzzed metadata, for the targets that aim at one
 * reader decoder: the superblock is decoded already (img->sb is filled in
 * directly), the inode at nid 0 is written by the target, and the fuzzed
 * bytes sit where that inode points. No superblock, no checksum, nothing
 * the decoder under test does not read.
 */
#ifndef KILN_FUZZ_META_H
#define KILN_FUZZ_META_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "reader/internal.h"
#include "util/checked.h"
#include "util/endian.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Largest image a target makes: a few blocks of the biggest size. */
#define FUZZ_META_MAX	(64u << 10)

struct fuzz_meta {
	struct kiln_image img;
	uint8_t *map;		/* FUZZ_META_MAX bytes, owned */
};

/* What the reader set up while the input ran (kiln_image_close's part). */
static void fuzz_meta_release(struct fuzz_meta *m)
{
	kiln_zimage_release(&m->img);
}

/* Reset @m to an empty image of 2^@blkszbits-byte blocks and @size bytes. */
static void fuzz_meta_reset(struct fuzz_meta *m, unsigned int blkszbits,
			    size_t size)
{
	if (!m->map && !(m->map = malloc(FUZZ_META_MAX)))
		abort();
	if (size > FUZZ_META_MAX)
		abort();
	memset(&m->img, 0, sizeof(m->img));
	memset(m->map, 0, size);
	m->img.fd = -1;
	m->img.map = m->map;
	m->img.size = size;
	m->img.sb.blkszbits = blkszbits;
	m->img.sb.blksz = 1u << blkszbits;
	m->img.sb.sb_size = 128;
	m->img.sb.compr_algs = 1;
}

/*
 * Write a compact inode at nid 0 (meta_blkaddr 0): @format is i_format,
 * @xattr_icount its inline xattr count, @raw_blkaddr its data block.
 */
static void fuzz_meta_inode(struct fuzz_meta *m, uint16_t format,
			    uint16_t xattr_icount, uint16_t mode,
			    uint32_t size, uint32_t raw_blkaddr)
{
	uint8_t *p = m->map;

	kiln_put_le16(p + 0, format);
	kiln_put_le16(p + 2, xattr_icount);
	kiln_put_le16(p + 4, mode);
	kiln_put_le16(p + 6, 1);	/* nlink */
	kiln_put_le32(p + 8, size);
	kiln_put_le32(p + 16, raw_blkaddr);
}

#endif
