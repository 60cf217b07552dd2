// SPDX-License-Identifier: MIT
/*
 * Big compressed files in segments: each part is compressed on its own
 * (any thread), then the parts' extents are joined in file order by the
 * one writer into the file's zfile.
 */
#include <errno.h>
#include <stdlib.h>

#include "builder/compress/internal.h"

/* The part's reads, shifted to its place in the file. */
struct part_src {
	kiln_src_read_fn read;
	void *ctx;
	uint64_t off;
};

static int part_read(void *ctx, void *buf, size_t len, uint64_t off)
{
	const struct part_src *p = ctx;

	return p->read(p->ctx, buf, len, p->off + off);
}

int kiln_zfile_compress_part(struct kiln_zctx *zc, kiln_src_read_fn read,
			     void *read_ctx, uint64_t off, uint64_t len,
			     uint64_t size, const struct kiln_zcuts *cuts,
			     struct kiln_zfile **out)
{
	return kiln_zfile_compress_segment(zc, read, read_ctx, off, len, size,
					   0, cuts, out);
}

int kiln_zfile_compress_segment(struct kiln_zctx *zc, kiln_src_read_fn read,
				void *read_ctx, uint64_t off, uint64_t len,
				uint64_t size, unsigned int seg,
				const struct kiln_zcuts *cuts,
				struct kiln_zfile **out)
{
	struct part_src src = { .read = read, .ctx = read_ctx, .off = off };
	struct kiln_zfile *zf;
	int err;

	*out = NULL;
	if (!len || off > size || len > size - off)
		return -EINVAL;
	zf = calloc(1, sizeof(*zf));
	if (!zf)
		return -ENOMEM;
	zf->size = len;
	zf->blkszbits = zc->blkszbits;
	zf->zc = zc;
	zf->seg_off = off;
	zf->seg = seg;
	if (off)
		zf->seg |= KILN_ZSEG_CONT;
	if (off + len < size)
		zf->seg |= KILN_ZSEG_MORE;
	/*
	 * A first part that is not the last keeps its raw pclusters even
	 * when none of it compresses: the rest of the file may, and a
	 * stream's first part cannot read the rest, so a file is judged the
	 * same from a directory and from a tar stream. Only a file of one
	 * part is handed back to be stored uncompressed.
	 */
	if (!off && (zf->seg & KILN_ZSEG_MORE) && !(seg & KILN_ZSEG_PACKED))
		zf->seg |= KILN_ZSEG_KEEP;
	/* held in memory (no image): the writer places it at commit */
	if (zc->layout == KILN_COMPRESS_LAYOUT_EXTENTS)
		err = kiln_pcluster_extents(zc, NULL, part_read, &src, zf,
					    cuts);
	else
		err = kiln_pcluster_classic(zc, NULL, part_read, &src, zf,
					    cuts);
	if (err) {
		kiln_zfile_free(zf);
		/*
		 * the packed inode is written plain by its own writer; a
		 * stream's first part cannot read the rest of its file
		 */
		if (err == 1 && zc->dd &&
		    !(seg & (KILN_ZSEG_PACKED | KILN_ZSEG_STREAM))) {
			int ferr = kiln_zfile_flat_new(zc, read, read_ctx,
						       size, out);

			if (ferr)
				return ferr;
		}
		return err;
	}
	kiln_zindex_choose(zf);
	if (zc->dd)
		kiln_zfile_hash_held(zf);
	kiln_zctx_note_file(zc, zf);
	*out = zf;
	return 0;
}

int kiln_zfile_join(struct kiln_zfile **whole, struct kiln_zfile *part)
{
	struct kiln_zfile *w = *whole;

	if (!w) {
		if (part->seg_off)
			return -EINVAL;
		*whole = part;
		return 0;
	}
	/* parts arrive committed, in order, each right after the last */
	if (part->held || part->frag || part->seg_off != w->size || w->idata)
		return -EINVAL;
	for (size_t i = 0; i < part->nr_ext; i++) {
		struct kiln_zext e = part->ext[i];
		int err;

		/* the last part's tail, placed in the packed inode at commit */
		if (e.flags & KILN_ZEXT_FRAGMENT)
			w->fragoff = part->fragoff;
		e.lstart += part->seg_off;
		err = kiln_zfile_add(w, &e);
		if (err)
			return err;
	}
	w->size = part->seg_off + part->size;
	w->blocks += part->blocks;
	w->seg = part->seg;
	if (part->nr_ext && part->ext[part->nr_ext - 1].flags & KILN_ZEXT_FRAGMENT)
		w->fragoff = part->fragoff;	/* placed by its commit */
	if (part->idata) {
		w->idata = part->idata;
		w->idata_size = part->idata_size;
		part->idata = NULL;
		part->idata_size = 0;
	}
	kiln_zfile_free(part);
	return 0;
}

void kiln_zfile_seal(struct kiln_zfile *whole)
{
	kiln_zindex_choose(whole);
	kiln_zctx_note_file(whole->zc, whole);
}
