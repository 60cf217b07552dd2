// SPDX-License-Identifier: MIT
/*
 * The bounded metadata cursor: every byte the reader takes from the image
 * comes through a range check here.
 */
#include "reader/internal.h"
#include "util/checked.h"

const void *kiln_metabuf_get(const struct kiln_image *img, uint64_t off,
			     size_t len)
{
	if (!kiln_range_ok(off, len, img->size))
		return NULL;
	return img->map + off;
}

bool kiln_blk_off(const struct kiln_image *img, uint64_t blk, uint64_t *off)
{
	if (blk >> (64 - img->sb.blkszbits))
		return false;
	*off = blk << img->sb.blkszbits;
	return true;
}
