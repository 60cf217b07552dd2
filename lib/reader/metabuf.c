// SPDX-License-Identifier: MIT
/*
 * The bounded metadata cursor: every byte the reader takes from the image
 * (or from the metabox's decoded data) comes through a range check here.
 */
#include "reader/internal.h"
#include "reader/verity.h"
#include "util/checked.h"

static const void *get(const struct kiln_image *img, uint64_t off,
		       size_t len, bool data)
{
	if (kiln_in_metabox(off))
		return kiln_mbx_get(img, off & ~KILN_MBX_BIT, len);
	if (!kiln_range_ok(off, len, img->size))
		return NULL;
	/* a remote image: fetch what is missing (NULL and -EIO on failure) */
	if (img->lazy) {
		int err = kiln_lazy_ensure(img->lazy, off, len);

		kiln_io_error_set(err);
		if (err)
			return NULL;
	}
	/* with dm-verity, every block is checked before its first use */
	if (img->verity && kiln_verity_check(img, off, len, data))
		return NULL;
	return img->map + off;
}

const void *kiln_metabuf_get(const struct kiln_image *img, uint64_t off,
			     size_t len)
{
	return get(img, off, len, false);
}

const void *kiln_databuf_get(const struct kiln_image *img, uint64_t off,
			     size_t len)
{
	return get(img, off, len, true);
}

bool kiln_metabuf_range_ok(const struct kiln_image *img, uint64_t off,
			   uint64_t len)
{
	if (kiln_in_metabox(off))
		return kiln_range_ok(off & ~KILN_MBX_BIT, len,
				     kiln_mbx_size(img));
	return kiln_range_ok(off, len, img->size);
}

bool kiln_blk_off(const struct kiln_image *img, uint64_t blk, uint64_t *off)
{
	if (blk >> (64 - img->sb.blkszbits))
		return false;
	*off = blk << img->sb.blkszbits;
	return true;
}
