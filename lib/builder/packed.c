// SPDX-License-Identifier: MIT
/*
 * The packed inode: once every file is committed, the fragment buffer
 * (file tails and small files, zfrag.c) is written as one more regular
 * file, compressed like any other but never fragmented itself, linked
 * from no directory and named by the superblock's packed_nid.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "builder/internal.h"
#include "builder/output.h"
#include "builder/zfrag.h"
#include "builder/zinternal.h"
#include "format/erofs_fs.h"
#include "util/checked.h"

#define PACKED_COPY_SIZE	(1u << 20)

int kiln_zfile_place_fragment(struct kiln_zfile *zf)
{
	struct kiln_zfrag *fr = zf->zc->frag;
	int err;

	if (!zf->frag)
		return 0;
	if (!fr)
		return -EINVAL;
	err = kiln_zfrag_add(fr, zf->frag, zf->frag_len, &zf->fragoff);
	if (err)
		return err;
	free(zf->frag);
	zf->frag = NULL;
	zf->frag_len = 0;
	/* offsets of 4 GiB and more need full indexes */
	if (zf->kind != KILN_ZMAP_FRAGMENT)
		kiln_zindex_choose(zf);
	return 0;
}

static int packed_read(void *ctx, void *buf, size_t len, uint64_t off)
{
	return kiln_zfrag_read(ctx, buf, len, off);
}

/* Whether the map with its inline tail fits after the core at some slot. */
static bool packed_map_placeable(const struct kiln_build *b,
				 const struct kiln_node *n)
{
	uint64_t base = 256ull << b->blkszbits;
	uint32_t hdr = kiln_inode_core_size(n);
	size_t len;

	for (uint32_t pos = 0; pos < b->blksz; pos += EROFS_ISLOT_SIZE)
		if (!kiln_zfile_map_size(n->zf, base + pos + hdr, &len))
			return true;
	return false;
}

/* Incompressible fragments: the packed inode is stored as plain blocks. */
static int packed_write_plain(struct kiln_build *b, struct kiln_node *n,
			      struct kiln_zfrag *fr)
{
	uint64_t nblks = kiln_div_round_up(n->size, b->blksz);
	uint8_t *buf;
	int err;

	n->datalayout = EROFS_INODE_FLAT_PLAIN;
	err = kiln_out_reserve(b->out, nblks, &n->startblk);
	if (err)
		return err;
	buf = calloc(1, PACKED_COPY_SIZE);
	if (!buf)
		return -ENOMEM;
	for (uint64_t off = 0; !err && off < n->size; off += PACKED_COPY_SIZE) {
		size_t len = (size_t)KILN_MIN((uint64_t)PACKED_COPY_SIZE,
					      n->size - off);
		size_t padded = (size_t)kiln_round_up(len, b->blksz);

		err = kiln_zfrag_read(fr, buf, len, off);
		if (!err) {
			memset(buf + len, 0, padded - len);
			err = kiln_out_pwrite(b->out, buf, padded,
					      ((uint64_t)n->startblk << b->blkszbits) + off);
		}
	}
	free(buf);
	return err;
}

int kiln_packed_write(struct kiln_build *b)
{
	struct kiln_zctx *zc = b->zctx;
	struct kiln_node *n;
	unsigned int flags;
	int err;

	if (!zc || !zc->frag || !kiln_zfrag_size(zc->frag))
		return 0;
	n = calloc(1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	err = kiln_nodes_push(b, n);
	if (err) {
		free(n);
		return err;
	}
	n->mode = S_IFREG | 0600;
	n->nlink = 1;
	n->mtime = b->epoch;
	n->size = kiln_zfrag_size(zc->frag);
	n->extended = !kiln_inode_fits_compact(n, b->epoch, b->fixed_nsec);
	b->packed = n;
	/* every file is committed: nothing else reads the flags meanwhile */
	flags = zc->flags;
	zc->flags &= ~(unsigned int)KILN_COMPRESS_FRAGMENTS;
	err = kiln_zfile_write(zc, b->out, packed_read, zc->frag, n->size,
			       &n->zf);
	zc->flags = flags;
	if (err < 0)
		return err;
	if (err > 0)
		return packed_write_plain(b, n, zc->frag);
	if (kiln_zfile_has_inline(n->zf) && !packed_map_placeable(b, n)) {
		err = kiln_zfile_drop_inline(n->zf, b->out);
		if (err)
			return err;
	}
	n->datalayout = (uint8_t)kiln_zfile_datalayout(n->zf);
	kiln_log(&b->lg, KILN_LOG_INFO,
		 "packed inode: %llu bytes of fragments (%llu more shared)",
		 (unsigned long long)n->size,
		 (unsigned long long)kiln_zfrag_saved(zc->frag));
	return 0;
}
