// SPDX-License-Identifier: MIT
/*
 * Places every inode (core, inline xattrs, inline tail / chunk table /
 * compressed map) in the inode area after the data, assigns nids, and
 * writes the area, directory blocks and shared xattrs.
 *
 *   [boot + superblock][data blocks ...][inode area][directory blocks]
 *   [shared xattrs]                     ^ meta_blkaddr + 1 (so no nid is 0)
 *
 * Everything a walk of the tree reads is so one run at the end of the
 * image, from meta_blkaddr on, which a remote reader fetches whole. With
 * a metabox, the directory blocks go before it, after the data.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "builder/compress/compress.h"
#include "builder/internal.h"
#include "builder/output.h"
#include "format/erofs_fs.h"
#include "util/checked.h"
#include "util/grow.h"
#include "util/endian.h"

#define KILN_GAPS_MAX 256		/* free holes remembered for reuse */
#define KILN_GAP_WINDOW (1u << 20)	/* only holes this close to the end */

struct gap {
	uint64_t start, end;
};

struct placer {
	struct kiln_build *b;
	uint64_t cursor;		/* end of the area so far */
	struct gap gaps[KILN_GAPS_MAX];
	size_t nr_gaps;
};

/* Bytes per chunk table entry: 8-byte indexes name a device. */
static unsigned int chunk_unit(const struct kiln_node *n)
{
	return (n->chunk_format & EROFS_CHUNK_FORMAT_INDEXES) ?
	       sizeof(struct erofs_inode_chunk_index) : 4u;
}

/* Entry @i of @n's chunk table (EROFS_NULL_ADDR32: a hole). */
static void encode_chunk(const struct kiln_node *n, uint64_t i, uint8_t *dst)
{
	uint32_t blk = n->chunks[i];

	if (!(n->chunk_format & EROFS_CHUNK_FORMAT_INDEXES)) {
		kiln_put_le32(dst, blk);
		return;
	}
	kiln_put_le16(dst, 0);		/* startblk_hi: 32-bit blocks */
	kiln_put_le16(dst + 2, blk == EROFS_NULL_ADDR32 ? 0 : n->chunk_device);
	kiln_put_le32(dst + 4, blk);
}

static unsigned int meta_hdr_size(const struct kiln_node *n)
{
	return kiln_inode_core_size(n) + n->xattr_size;
}

/*
 * Bytes @n needs when its core starts at @pos, or 0 when it cannot start
 * there (an inline tail would cross a block boundary).
 */
static uint64_t footprint_at(const struct placer *p, const struct kiln_node *n,
			     uint64_t pos)
{
	uint32_t blksz = p->b->blksz;
	uint64_t end = pos + meta_hdr_size(n);

	if (n->zf) {
		size_t len;

		if (kiln_zfile_map_size(n->zf, end, &len))
			return 0;
		return end + len - pos;
	}
	switch (n->datalayout) {
	case EROFS_INODE_FLAT_INLINE:
		if ((end & (blksz - 1)) + n->tail_len > blksz)
			return 0;
		return end + n->tail_len - pos;
	case EROFS_INODE_CHUNK_BASED:
		return kiln_round_up(end, chunk_unit(n)) +
		       chunk_unit(n) * n->nr_chunks - pos;
	default:
		return end - pos;
	}
}

static void gap_add(struct placer *p, uint64_t start, uint64_t end)
{
	size_t victim = 0;

	if (end - start < EROFS_ISLOT_SIZE)
		return;
	if (p->nr_gaps < KILN_GAPS_MAX) {
		p->gaps[p->nr_gaps++] = (struct gap){ start, end };
		return;
	}
	for (size_t i = 1; i < p->nr_gaps; i++)
		if (p->gaps[i].end - p->gaps[i].start <
		    p->gaps[victim].end - p->gaps[victim].start)
			victim = i;
	p->gaps[victim] = (struct gap){ start, end };
}

/* Forget holes too far behind the end: the writer streams past them. */
static void gaps_trim(struct placer *p)
{
	size_t kept = 0;

	for (size_t i = 0; i < p->nr_gaps; i++)
		if (p->gaps[i].end + KILN_GAP_WINDOW > p->cursor)
			p->gaps[kept++] = p->gaps[i];
	p->nr_gaps = kept;
}

/*
 * The first position >= @pos where @n can start, and its footprint
 * (*@len), or false if there is none before @limit. An inline tail that
 * would cross a block boundary moves to the start of the next block.
 */
static bool first_fit_from(const struct placer *p, const struct kiln_node *n,
			   uint64_t pos, uint64_t limit, uint64_t *at,
			   uint64_t *len)
{
	uint32_t blksz = p->b->blksz;

	while (pos < limit) {
		uint64_t fp = footprint_at(p, n, pos), next;

		if (fp) {
			*at = pos;
			*len = fp;
			return true;
		}
		next = pos + EROFS_ISLOT_SIZE;
		/*
		 * A compressed file's inline pcluster follows its index, not
		 * the core: the jump below would keep it where it failed.
		 * Slot by slot, its end passes every 32-byte offset of a
		 * block, so it fits within one block.
		 */
		if (!n->zf && n->datalayout == EROFS_INODE_FLAT_INLINE) {
			/*
			 * Later slots of this block end the metadata later
			 * still: jump to where it ends at a block start.
			 */
			uint64_t hdr = meta_hdr_size(n);
			uint64_t e = kiln_round_up(pos + hdr + 1, blksz);

			next = KILN_MAX(next, kiln_round_up(e - hdr,
							    EROFS_ISLOT_SIZE));
		}
		pos = next;
	}
	return false;
}

/* Best fit among the remembered holes: the one left with the least slack. */
static bool place_in_gap(struct placer *p, struct kiln_node *n)
{
	uint64_t best_slack = UINT64_MAX, best_pos = 0, best_end = 0;
	size_t best = 0;

	for (size_t i = 0; i < p->nr_gaps; i++) {
		struct gap g = p->gaps[i];
		uint64_t pos, len, end;

		if (!first_fit_from(p, n, g.start, g.end, &pos, &len))
			continue;
		end = kiln_round_up(pos + len, EROFS_ISLOT_SIZE);
		if (end > g.end || g.end - g.start - (end - pos) >= best_slack)
			continue;
		best_slack = g.end - g.start - (end - pos);
		best = i;
		best_pos = pos;
		best_end = end;
	}
	if (best_slack == UINT64_MAX)
		return false;
	{
		struct gap g = p->gaps[best];

		p->gaps[best] = p->gaps[--p->nr_gaps];
		gap_add(p, g.start, best_pos);
		gap_add(p, best_end, g.end);
	}
	n->inode_off = best_pos;
	return true;
}

static int place(struct placer *p, struct kiln_node *n)
{
	/* an inline tail fits within one block of skipping; maps within a few */
	uint64_t limit = p->cursor + 4ull * p->b->blksz, pos, len;

	if (place_in_gap(p, n))
		return 0;
	if (!first_fit_from(p, n, p->cursor, limit, &pos, &len))
		return -EFBIG;
	gap_add(p, p->cursor, pos);
	n->inode_off = pos;
	p->cursor = kiln_round_up(pos + len, EROFS_ISLOT_SIZE);
	gaps_trim(p);
	return 0;
}

/*
 * Place nodes @v[0..@nr) (except @skip) from byte @start: image offsets,
 * or content offsets of the metabox. Their nids count 32-byte slots from
 * @nid_base, with @nid_bit ORed in. *@end: the end of the area.
 */
static int place_nodes(struct kiln_build *b, struct kiln_node **v, size_t nr,
		       const struct kiln_node *skip, uint64_t start,
		       uint64_t nid_base, uint64_t nid_bit, uint64_t *end)
{
	struct placer p = { .b = b, .cursor = start };

	for (size_t i = 0; i < nr; i++) {
		struct kiln_node *n = v[i];
		char path[KILN_PATH_BUF];
		int err;

		if (n == skip)
			continue;
		err = place(&p, n);
		if (err) {
			kiln_log(&b->lg, KILN_LOG_ERROR,
				 "%s: cannot place inode metadata",
				 kiln_node_path(b, n, path, sizeof(path)));
			return err;
		}
		n->nid = ((n->inode_off - nid_base) >> EROFS_ISLOT_BITS) | nid_bit;
	}
	*end = p.cursor;
	return 0;
}

bool kiln_place_in_metabox(const struct kiln_build *b)
{
	return b->zctx && (b->opts.compress_flags & KILN_COMPRESS_METABOX);
}

int kiln_place_assign_nids(struct kiln_build *b)
{
	kiln_blk_t data_end = kiln_out_next_blk(b->out), area;
	uint64_t base;
	int err;

	for (size_t i = 0; i < b->nr_nodes; i++)
		b->nodes[i]->ino = (uint32_t)(i + 1);
	if (kiln_place_in_metabox(b)) {
		err = kiln_data_place_dirs(b);
		if (err)
			return err;
		/*
		 * Everything but the packed inode goes into the metabox; the
		 * packed inode and the metabox inode itself are placed after
		 * the metabox's data, by kiln_place_write_meta().
		 */
		b->meta_start = 0;
		err = place_nodes(b, b->nodes, b->nr_nodes, b->packed, 0, 0,
				  1ull << EROFS_NID_METABOX_BIT, &b->meta_end);
		if (err)
			return err;
		b->feature_incompat |= EROFS_FEATURE_INCOMPAT_METABOX |
				       EROFS_FEATURE_INCOMPAT_48BIT;
		kiln_log(&b->lg, KILN_LOG_INFO,
			 "%zu inodes: %llu data blocks, %llu bytes of metabox",
			 b->nr_nodes, (unsigned long long)data_end,
			 (unsigned long long)b->meta_end);
		return 0;
	}
	/* nid 0 would be st_ino 0, which tools take for a deleted entry */
	b->meta_blkaddr = data_end - 1;
	base = (uint64_t)b->meta_blkaddr << b->blkszbits;
	b->meta_start = (uint64_t)data_end << b->blkszbits;
	err = place_nodes(b, b->nodes, b->nr_nodes, NULL, b->meta_start, base,
			  0, &b->meta_end);
	/* the area's blocks, then the directories' right after them */
	if (!err)
		err = kiln_out_reserve(b->out, kiln_div_round_up(b->meta_end -
					b->meta_start, b->blksz), &area);
	if (!err)
		err = kiln_data_place_dirs(b);
	if (err)
		return err;
	kiln_log(&b->lg, KILN_LOG_INFO,
		 "%zu inodes: %llu data blocks, %llu bytes of inode area",
		 b->nr_nodes, (unsigned long long)data_end,
		 (unsigned long long)(b->meta_end - b->meta_start));
	if (b->root->nid > UINT16_MAX) {
		kiln_log(&b->lg, KILN_LOG_ERROR, "root nid %llu too large",
			 (unsigned long long)b->root->nid);
		return -EFBIG;
	}
	return 0;
}

/*
 * Streaming writer for the inode area. Inodes are written in node order;
 * positions are nearly increasing (holes get reused), so everything below
 * the lowest position still to come is flushed.
 */
struct metawin {
	struct kiln_build *b;
	struct kiln_metabox *mbx;	/* the sink, or NULL: the image */
	uint64_t base;			/* image offset of buf[0] */
	uint64_t hi;			/* end of written bytes */
	uint8_t *buf;
	size_t cap;
};

static int win_flush(struct metawin *w, uint64_t upto)
{
	uint64_t len;
	int err;

	upto = KILN_MIN(upto, w->hi);
	if (upto <= w->base)
		return 0;
	len = upto - w->base;
	if (w->mbx)
		err = kiln_metabox_write(w->mbx, w->buf, (size_t)len, w->base);
	else
		err = kiln_out_pwrite(w->b->out, w->buf, (size_t)len, w->base);
	if (err)
		return err;
	memmove(w->buf, w->buf + len, (size_t)(w->hi - upto));
	memset(w->buf + (w->hi - upto), 0, (size_t)len);
	w->base = upto;
	return 0;
}

/* Make [@off, @off + @len) addressable; everything below @low is final. */
static uint8_t *win_get(struct metawin *w, uint64_t off, size_t len,
			uint64_t low)
{
	uint64_t need;

	assert(off >= w->base);
	need = off + len - w->base;
	if (need > w->cap) {
		if (win_flush(w, low))
			return NULL;
		need = off + len - w->base;
	}
	if (need > w->cap) {
		size_t old = w->cap;

		if (KILN_GROW(w->buf, w->cap, (size_t)need))
			return NULL;
		memset(w->buf + old, 0, w->cap - old);
	}
	w->hi = KILN_MAX(w->hi, off + len);
	return w->buf + (off - w->base);
}

struct dir_emit {
	struct kiln_build *b;
	struct kiln_node *n;
	uint8_t *tail;			/* where the inline tail goes */
};

static int dir_emit(void *ctx, uint64_t blk, const void *data, size_t len)
{
	struct dir_emit *de = ctx;
	struct kiln_build *b = de->b;
	uint64_t full = de->n->size >> b->blkszbits;

	/* @data is a zero-filled block even when @len is shorter */
	if (blk < full || de->n->datalayout == EROFS_INODE_FLAT_PLAIN)
		return kiln_out_pwrite(b->out, data, b->blksz,
				       (de->n->startblk + blk) << b->blkszbits);
	memcpy(de->tail, data, len);
	return 0;
}

static int write_dir(struct kiln_build *b, struct kiln_node *n, uint8_t *tail,
		     void *block)
{
	struct dir_emit de = { b, n, tail };
	struct kiln_dirent_src *ents;
	size_t nr;
	int err = kiln_dir_entries(n, &ents, &nr);

	if (err)
		return err;
	err = kiln_dir_encode(ents, nr, b->blksz, block, dir_emit, &de);
	free(ents);
	return err;
}

static int write_inode(struct kiln_build *b, struct kiln_node *n,
		       struct metawin *w, uint64_t low, void *block)
{
	unsigned int core = kiln_inode_core_size(n);
	uint64_t meta_end = n->inode_off + core + n->xattr_size;
	uint64_t len = 0;
	uint8_t *p;
	size_t zlen = 0;
	int err;

	if (n->zf) {
		err = kiln_zfile_map_size(n->zf, meta_end, &zlen);
		if (err)
			return err;
		len = core + n->xattr_size + zlen;
	} else if (n->datalayout == EROFS_INODE_FLAT_INLINE) {
		len = core + n->xattr_size + n->tail_len;
	} else if (n->datalayout == EROFS_INODE_CHUNK_BASED) {
		len = kiln_round_up(meta_end, chunk_unit(n)) - n->inode_off +
		      chunk_unit(n) * n->nr_chunks;
	} else {
		len = core + n->xattr_size;
	}
	p = win_get(w, n->inode_off, (size_t)len, low);
	if (!p)
		return -ENOMEM;
	kiln_inode_encode_core(n, b->epoch, p);
	if (n->xattr_size)
		kiln_xattr_encode_ibody(n->xattrs, n->nr_xattrs,
					!(b->opts.flags & KILN_BUILD_NO_XATTR_FILTER),
					p + core, n->xattr_size);
	p += core + n->xattr_size;
	if (n->zf)
		return kiln_zfile_map_encode(n->zf, meta_end, p, zlen);
	if (S_ISDIR(n->mode))
		return write_dir(b, n, p, block);
	if (n->datalayout == EROFS_INODE_FLAT_INLINE) {
		memcpy(p, kiln_data_tail(b, n), n->tail_len);
	} else if (n->datalayout == EROFS_INODE_CHUNK_BASED) {
		uint8_t *t = p + (kiln_round_up(meta_end, chunk_unit(n)) -
				  meta_end);

		for (uint64_t i = 0; i < n->nr_chunks; i++)
			encode_chunk(n, i, t + chunk_unit(n) * i);
	}
	return 0;
}

/*
 * Write nodes @v[0..@nr) (except @skip), placed in [@start, @end), through
 * a window onto the image or into the metabox @mbx.
 */
static int write_nodes(struct kiln_build *b, struct kiln_node **v, size_t nr,
		       const struct kiln_node *skip, uint64_t start,
		       uint64_t end, struct kiln_metabox *mbx)
{
	struct metawin w = { .b = b, .mbx = mbx, .base = start, .hi = start };
	uint64_t *low = malloc((nr + 1) * sizeof(*low));
	void *block = malloc(b->blksz);
	int err = -ENOMEM;

	w.cap = 4u << 20;
	w.buf = calloc(1, w.cap);
	if (!low || !block || !w.buf)
		goto out;
	/* low[i]: lowest inode position among nodes i.. (all later writes) */
	low[nr] = end;
	for (size_t i = nr; i--;)
		low[i] = v[i] == skip ? low[i + 1]
				      : KILN_MIN(low[i + 1], v[i]->inode_off);
	err = 0;
	for (size_t i = 0; !err && i < nr; i++)
		if (v[i] != skip)
			err = write_inode(b, v[i], &w, low[i], block);
	if (err)
		goto out;
	w.hi = KILN_MAX(w.hi, end);
	err = win_flush(&w, end);
out:
	free(w.buf);
	free(block);
	free(low);
	return err;
}

/*
 * The metabox: its content (every inode but the packed one) compressed
 * into the image, then the packed and metabox inodes in a small inode
 * area of their own after it. Returns that area's end in *@end.
 */
static int write_metabox(struct kiln_build *b, uint64_t *end)
{
	struct kiln_metabox *mbx = NULL;
	struct kiln_node *outer[2];
	size_t nr = 0;
	kiln_blk_t first = kiln_out_next_blk(b->out), data_end;
	uint64_t start;
	int err;

	err = kiln_metabox_open(b, b->meta_end, &mbx);
	if (!err)
		err = write_nodes(b, b->nodes, b->nr_nodes, b->packed, 0,
				  b->meta_end, mbx);
	if (!err)
		err = kiln_metabox_finish(mbx, &b->metabox);
	kiln_metabox_free(mbx);
	if (err)
		return err;
	b->metabox->ino = (uint32_t)b->nr_nodes;
	outer[nr++] = b->metabox;
	if (b->packed)
		outer[nr++] = b->packed;
	data_end = kiln_out_next_blk(b->out);
	b->meta_blkaddr = data_end - 1;		/* no nid 0 here either */
	start = (uint64_t)data_end << b->blkszbits;
	err = place_nodes(b, outer, nr, NULL, start,
			  (uint64_t)b->meta_blkaddr << b->blkszbits, 0, end);
	if (!err)
		err = write_nodes(b, outer, nr, NULL, start, *end, NULL);
	if (!err)
		kiln_log(&b->lg, KILN_LOG_INFO,
			 "metabox: %llu bytes of inodes in %llu blocks",
			 (unsigned long long)b->meta_end,
			 (unsigned long long)(data_end - first));
	return err;
}

int kiln_place_write_meta(struct kiln_build *b)
{
	uint64_t end;
	int err;

	if (kiln_place_in_metabox(b))
		err = write_metabox(b, &end);
	else
		err = write_nodes(b, b->nodes, b->nr_nodes, NULL,
				  b->meta_start, b->meta_end, NULL);
	if (err)
		return err;
	/* the shared xattr area starts at the next block */
	if (kiln_place_in_metabox(b))
		end = kiln_round_up(end, b->blksz);
	else		/* after the directory blocks */
		end = (uint64_t)kiln_out_next_blk(b->out) << b->blkszbits;
	b->xattr_blkaddr = 0;
	if (b->xt.shared_size) {
		uint8_t *shared = calloc(1, b->xt.shared_size);

		if (!shared)
			return -ENOMEM;
		b->xattr_blkaddr = end >> b->blkszbits;
		kiln_xattr_encode_shared(&b->xt, shared);
		err = kiln_out_pwrite(b->out, shared, b->xt.shared_size, end);
		free(shared);
		if (err)
			return err;
		end = kiln_round_up(end + b->xt.shared_size, b->blksz);
	}
	b->image_blocks = end >> b->blkszbits;
	if (b->image_blocks > UINT32_MAX) {
		kiln_log(&b->lg, KILN_LOG_ERROR, "%s: image would exceed 2^32 blocks",
			 b->image);
		return -EFBIG;
	}
	return 0;
}
