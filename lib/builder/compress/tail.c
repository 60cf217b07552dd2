// SPDX-License-Identifier: MIT
/*
 * Shared fragment tails. Files often end alike (copies of a header that
 * differ near the top, generated register tables of one family), and a
 * fragment, the last part of a file kept in the packed inode, need not be
 * stored again when the packed inode already holds bytes that end like it:
 * its extent can point at them. When only the last bytes of a fragment are
 * found there (at least SPLIT_MIN), the fragment is split at commit: the
 * bytes before that run are compressed into pclusters of the file's own
 * and the run is shared. The committer does this in commit order, so the
 * image does not depend on the thread count.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "builder/compress/frag.h"
#include "builder/compress/internal.h"
#include "util/checked.h"

/*
 * A shorter shared run does not pay for the split: the new pclusters end
 * in a partly used block and start without the history before them.
 */
#define SPLIT_MIN	(32u * 1024u)

struct head_src {
	const uint8_t *data;
	size_t len;
};

static int head_read(void *ctx, void *buf, size_t len, uint64_t off)
{
	const struct head_src *h = ctx;

	return kiln_src_read_mem(h->data, 0, h->len, buf, len, off);
}

/*
 * Whether @zt's extents, placed at file offset @pos, and the shared run
 * after them each start in an lcluster (of 1 << @bits bytes) of their own,
 * as the classic layout's one head per lcluster wants. The first starts
 * where the fragment did, so after the file's earlier extents.
 */
static bool heads_fit(const struct kiln_zfile *zt, uint64_t pos,
		      unsigned int bits)
{
	uint64_t prev;

	if (!zt->nr_ext)
		return false;
	prev = (pos + zt->ext[0].lstart) >> bits;
	for (size_t i = 1; i < zt->nr_ext; i++) {
		uint64_t lcn = (pos + zt->ext[i].lstart) >> bits;

		if (lcn <= prev)
			return false;
		prev = lcn;
	}
	return (pos + zt->size) >> bits > prev;
}

/*
 * Split @zf's fragment (held, the file's last extent): its first bytes
 * into pclusters appended to the held ones, its last @same bytes the
 * stored ones ending at @end. 0 when split, 1 when it cannot be (nothing
 * changed), or -errno.
 */
static int split(struct kiln_zfile *zf, uint64_t end, size_t same)
{
	struct kiln_zctx *zc = zf->zc;
	const uint32_t bs = 1u << zf->blkszbits;
	struct kiln_zext frag = zf->ext[zf->nr_ext - 1];
	struct head_src src = { zf->frag, zf->frag_len - same };
	struct kiln_zfile *zt;
	uint8_t *held;
	int err;

	/* the classic layout's held pclusters are whole blocks */
	if (!(frag.flags & KILN_ZEXT_FRAGMENT) || src.len < bs ||
	    zc->layout == KILN_COMPRESS_LAYOUT_EXTENTS ||
	    (zf->kind != KILN_ZMAP_FRAGMENT &&
	     (!zf->held || zf->held_len % bs)))
		return 1;
	zt = calloc(1, sizeof(*zt));
	if (!zt)
		return -ENOMEM;
	zt->size = src.len;
	zt->blkszbits = zf->blkszbits;
	zt->zc = zc;
	/* never handed back raw, no tail of its own */
	zt->seg = KILN_ZSEG_CONT | KILN_ZSEG_MORE;
	err = kiln_pcluster_classic(zc, NULL, head_read, &src, zt, NULL);
	if (!err && (!zt->held ||
		     !heads_fit(zt, frag.lstart, zf->lclusterbits)))
		err = 1;
	if (err) {
		kiln_zfile_free(zt);
		return err;
	}
	if (zc->dd)
		kiln_zfile_hash_held(zt);
	held = realloc(zf->held, zf->held_len + zt->held_len);
	if (!held) {
		kiln_zfile_free(zt);
		return -ENOMEM;
	}
	memcpy(held + zf->held_len, zt->held, zt->held_len);
	zf->held = held;
	/* the fragment's extent makes room for the new ones, then follows */
	zf->nr_ext--;
	for (size_t i = 0; i < zt->nr_ext && !err; i++) {
		struct kiln_zext e = zt->ext[i];

		e.lstart += frag.lstart;
		e.pstart += zf->held_len;
		err = kiln_zfile_add(zf, &e);
	}
	frag.lstart += src.len;
	frag.llen = (uint32_t)same;
	frag.pstart = 0;
	if (!err)
		err = kiln_zfile_add(zf, &frag);
	/* compact or full: kiln_zindex_choose() decides again */
	if (zf->kind == KILN_ZMAP_FRAGMENT)
		zf->kind = KILN_ZMAP_COMPACT;
	zf->held_len += zt->held_len;
	zf->blocks = kiln_div_round_up(zf->held_len, bs);
	zf->fragoff = end - same;
	kiln_zfile_free(zt);
	return err;
}

int kiln_ztail_place(struct kiln_zfile *zf, bool may_split, bool *placed)
{
	struct kiln_frag *fr = zf->zc->frag;
	uint64_t end = 0;
	size_t same;
	int err;

	*placed = false;
	err = kiln_frag_find_tail(fr, zf->frag, zf->frag_len, &end, &same);
	if (err || !same)
		return err;
	if (same == zf->frag_len) {
		zf->fragoff = end - same;
	} else {
		if (!may_split || same < SPLIT_MIN)
			return 0;
		err = split(zf, end, same);
		if (err)
			return err < 0 ? err : 0;
	}
	kiln_frag_share(fr, same);
	*placed = true;
	return 0;
}
