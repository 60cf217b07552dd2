/* SPDX-License-Identifier: MIT */
/* The dm-verity hash tree kiln build appends after a finished image. */
#ifndef KILN_BUILDER_VERITY_H
#define KILN_BUILDER_VERITY_H

#include <stdint.h>

struct kiln_build;

/*
 * Hash the finished image (its @image_blocks blocks, read back on the
 * build's workers), then write veritysetup's superblock and the tree
 * right after it; fills b->stats.verity. 0 or a negative errno (logged).
 */
int kiln_verity_write(struct kiln_build *b, uint64_t image_blocks);

#endif
