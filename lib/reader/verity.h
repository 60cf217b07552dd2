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

#endif
