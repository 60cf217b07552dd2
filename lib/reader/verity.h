/* SPDX-License-Identifier: MIT */
/*
 * Reading through a dm-verity tree: every image block the reader uses is
 * hashed and checked up to the trusted root hash first (verity.c).
 */
#ifndef KILN_READER_VERITY_H
#define KILN_READER_VERITY_H

#include <stdbool.h>
#include <stdint.h>

#include <kiln/image.h>

#include "reader/internal.h"
#include "util/checked.h"

struct kiln_verity;

/*
 * With @opts asking for verity: find the tree of the mapped image (the
 * verity superblock at the hash offset), set img->verity, and bound
 * img->size to the blocks it covers. 0 (also without verity), or a
 * negative errno, logged.
 */
int kiln_verity_open(struct kiln_image *img,
		     const struct kiln_image_opts *opts);
void kiln_verity_close(struct kiln_image *img);

/*
 * Check image bytes [@off, @off + @len) against the tree (a no-op
 * without verity): 0, or -KILN_ECORRUPT with a log line naming the first
 * bad block. @data: the bytes are file data (fsck tells those apart from
 * metadata). Thread-safe; verified blocks are remembered.
 */
int kiln_verity_check(const struct kiln_image *img, uint64_t off,
		      uint64_t len, bool data);

/*
 * After kiln_metabuf_get() or kiln_databuf_get() gave NULL for image
 * bytes [@off, @off + @len): whether that was a dm-verity failure, which
 * kiln_verity_check() has logged (the caller then returns -KILN_ECORRUPT
 * without a second, misleading message).
 */
static inline bool kiln_verity_failed(const struct kiln_image *img,
				      uint64_t off, uint64_t len)
{
	return img->verity && !kiln_in_metabox(off) &&
	       kiln_range_ok(off, len, img->size);
}

#endif
