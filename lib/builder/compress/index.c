// SPDX-License-Identifier: MIT
/*
 * Encodes a compressed file's map: the 8-byte map header followed by
 * compact (2B/4B packs) or full lcluster indexes, or an encoded-extent
 * table, and the inline tail pcluster. Format notes, sections 7.2-7.12.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "builder/compress/internal.h"
#include "format/erofs_fs.h"
#include "util/checked.h"
#include "util/endian.h"

#define LCL_D0_MAX	Z_EROFS_LI_D0_MASK	/* delta[0] cap: bit 11 = CBLKCNT */
#define FULL_D1_MAX	0xFFFFu
#define MAP_HEADER_SIZE	sizeof(struct z_erofs_map_header)
#define FULL_INDEX_SKIP	8u			/* reserved bytes after header */

/* One lcluster's record before it is packed. */
struct lcl {
	uint8_t type;		/* enum z_erofs_lcluster_type */
	bool cblkcnt;		/* NONHEAD right after a multi-lcluster head */
	bool real;		/* HEAD of a pcluster that has blocks */
	bool partial;
	uint16_t clusterofs;	/* HEAD/PLAIN */
	uint32_t nblks;		/* CBLKCNT */
	uint64_t delta0, delta1;	/* NONHEAD, uncapped */
	uint64_t blkaddr;	/* HEAD/PLAIN (full: fragment offset high) */
};

static uint64_t nr_lclusters(const struct kiln_zfile *zf)
{
	return kiln_div_round_up(zf->size, (uint64_t)1 << zf->lclusterbits);
}

static uint8_t head_type(const struct kiln_zfile *zf, const struct kiln_zext *e)
{
	if (!e->fmt)
		return Z_EROFS_LCLUSTER_TYPE_PLAIN;
	return e->fmt - 1 == zf->alg ? Z_EROFS_LCLUSTER_TYPE_HEAD1 :
				       Z_EROFS_LCLUSTER_TYPE_HEAD2;
}

/*
 * Turn the extent list into one record per lcluster (7.4): a head where
 * each extent starts, NONHEADs with their distances elsewhere, CBLKCNT
 * right after multi-lcluster heads of big-pcluster files, and a PLAIN
 * sentinel in the last lcluster when nothing starts there and the file
 * does not end on an lcluster boundary.
 */
static int build_lcls(const struct kiln_zfile *zf, struct lcl **out)
{
	const unsigned int bits = zf->lclusterbits;
	const uint64_t nlc = nr_lclusters(zf);
	uint64_t sentinel = UINT64_MAX;
	struct lcl *r;

	if (!zf->nr_ext || zf->ext[0].lstart)
		return -EINVAL;
	if (nlc > SIZE_MAX / sizeof(*r))
		return -E2BIG;
	r = calloc(nlc ? nlc : 1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	if ((zf->size & (((uint64_t)1 << bits) - 1)) &&
	    zf->ext[zf->nr_ext - 1].lstart >> bits != nlc - 1)
		sentinel = nlc - 1;

	for (size_t i = 0; i < zf->nr_ext; i++) {
		const struct kiln_zext *e = &zf->ext[i];
		uint64_t h = e->lstart >> bits, next;
		struct lcl *hd = &r[h];

		if (i + 1 < zf->nr_ext)
			next = zf->ext[i + 1].lstart >> bits;
		else
			next = sentinel != UINT64_MAX ? sentinel : nlc;
		/* at most one extent starts in an lcluster */
		if (next <= h && i + 1 < zf->nr_ext) {
			free(r);
			return -EINVAL;
		}
		hd->type = head_type(zf, e);
		hd->clusterofs = (uint16_t)(e->lstart & (((uint64_t)1 << bits) - 1));
		hd->partial = e->flags & KILN_ZEXT_PARTIAL;
		hd->real = !(e->flags & (KILN_ZEXT_INLINE | KILN_ZEXT_FRAGMENT));
		if (e->flags & KILN_ZEXT_FRAGMENT)
			hd->blkaddr = zf->fragoff >> 32;
		else if (hd->real)
			hd->blkaddr = e->pstart >> zf->blkszbits;
		for (uint64_t l = h + 1; l < next && l < nlc; l++) {
			r[l].type = Z_EROFS_LCLUSTER_TYPE_NONHEAD;
			r[l].delta0 = l - h;
			r[l].delta1 = next - l;
		}
		if (zf->big && h + 1 < next && h + 1 < nlc) {
			r[h + 1].cblkcnt = true;
			r[h + 1].nblks = hd->real ? e->plen >> zf->blkszbits : 1;
		} else if (hd->real && e->plen >> zf->blkszbits > 1) {
			/* a reader would take this pcluster for one block */
			free(r);
			return -EINVAL;
		}
	}
	if (sentinel != UINT64_MAX) {
		r[sentinel].type = Z_EROFS_LCLUSTER_TYPE_PLAIN;
		r[sentinel].clusterofs = (uint16_t)(zf->size &
					(((uint64_t)1 << bits) - 1));
	}
	*out = r;
	return 0;
}

/* ---- compact indexes (7.8) ---- */

struct compact_geo {
	uint64_t ebase;		/* first pack */
	uint64_t total;		/* records */
	uint64_t init4, n2;	/* records in the leading 4B and in 2B packs */
	uint64_t bytes;		/* index bytes from ebase */
};

static void compact_geometry(const struct kiln_zfile *zf, uint64_t meta_end,
			     struct compact_geo *g)
{
	uint64_t rest, tail4;

	g->ebase = kiln_round_up(meta_end, 8) + MAP_HEADER_SIZE;
	g->total = nr_lclusters(zf);
	g->init4 = ((32 - g->ebase % 32) / 4) & 7;
	g->n2 = 0;
	if (zf->lclusterbits <= 12 && g->init4 < g->total)
		g->n2 = (g->total - g->init4) / 16 * 16;
	if (g->total <= g->init4) {
		g->bytes = kiln_round_up(g->total, 2) * 4;
		return;
	}
	rest = g->total - g->init4 - g->n2;
	tail4 = kiln_round_up(rest, 2);
	g->bytes = g->init4 * 4 + g->n2 * 2 + tail4 * 4;
}

/* The 'lo' bits a record is packed with; @last: last record of its pack. */
static uint32_t compact_lo(const struct lcl *r, bool last)
{
	if (r->type != Z_EROFS_LCLUSTER_TYPE_NONHEAD)
		return r->clusterofs;
	if (r->cblkcnt)
		return Z_EROFS_LI_D0_CBLKCNT | r->nblks;
	return (uint32_t)KILN_MIN(last ? r->delta1 : r->delta0, LCL_D0_MAX);
}

/*
 * Blocks between the pack's base address and the pcluster of the head
 * at @i, walking back over the pack's records as a reader does.
 */
static int64_t compact_head_offset(const uint8_t *type, const uint32_t *lo,
				   int i, bool big)
{
	int64_t nblk = big ? 0 : 1;

	while (i > 0) {
		--i;
		if (!big) {
			if (type[i] == Z_EROFS_LCLUSTER_TYPE_NONHEAD)
				i -= (int)lo[i];
			if (i >= 0)
				nblk++;
			continue;
		}
		if (type[i] != Z_EROFS_LCLUSTER_TYPE_NONHEAD) {
			nblk++;
		} else if (lo[i] & Z_EROFS_LI_D0_CBLKCNT) {
			--i;
			nblk += lo[i + 1] & Z_EROFS_LI_D0_MASK;
		} else {
			if (lo[i] <= 1)
				return -1;
			i -= (int)lo[i] - 2;
		}
	}
	return nblk;
}

/*
 * Write one pack of @vcnt records starting at record @first (records past
 * the end are zero) into @dst. Returns -ERANGE when the heads' pclusters
 * cannot be expressed from one base address (not consecutive on disk).
 */
static int compact_pack(const struct kiln_zfile *zf, const struct lcl *r,
			uint64_t total, uint64_t first, unsigned int vcnt,
			uint8_t *dst)
{
	const unsigned int lobits = KILN_MAX(zf->lclusterbits, 12u);
	const unsigned int packsz = vcnt == 2 ? 8 : 32;
	const unsigned int bpr = (packsz - 4) * 8 / vcnt;
	uint8_t type[16];
	uint32_t lo[16];
	bool have_base = false;
	uint64_t base = 0;

	memset(dst, 0, packsz);
	for (unsigned int i = 0; i < vcnt; i++) {
		uint64_t idx = first + i;
		uint32_t v;
		unsigned int bit = i * bpr;

		if (idx >= total) {
			type[i] = Z_EROFS_LCLUSTER_TYPE_PLAIN;
			lo[i] = 0;
			continue;
		}
		type[i] = r[idx].type;
		lo[i] = compact_lo(&r[idx], i + 1 == vcnt);
		v = ((uint32_t)type[i] << lobits) | lo[i];
		/* bits LSB-first across the little-endian pack */
		for (unsigned int b = 0; b < lobits + 2; b++, bit++)
			if (v >> b & 1)
				dst[bit / 8] |= (uint8_t)(1u << (bit % 8));
	}
	for (unsigned int i = 0; i < vcnt && first + i < total; i++) {
		const struct lcl *h = &r[first + i];
		int64_t off;

		if (h->type == Z_EROFS_LCLUSTER_TYPE_NONHEAD || !h->real)
			continue;
		off = compact_head_offset(type, lo, (int)i, zf->big);
		if (off < 0)
			return -EINVAL;
		if (!have_base) {
			if ((uint64_t)off > h->blkaddr)
				return -ERANGE;
			base = h->blkaddr - (uint64_t)off;
			have_base = true;
		} else if (base + (uint64_t)off != h->blkaddr) {
			return -ERANGE;
		}
	}
	if (base > UINT32_MAX)
		return -ERANGE;
	kiln_put_le32(dst + packsz - 4, (uint32_t)base);
	return 0;
}

static int compact_encode(const struct kiln_zfile *zf, const struct lcl *r,
			  const struct compact_geo *g, uint8_t *dst)
{
	uint64_t idx = 0, end4 = KILN_MIN(g->init4, g->total);
	int err;

	for (; idx < end4; idx += 2, dst += 8) {
		err = compact_pack(zf, r, g->total, idx, 2, dst);
		if (err)
			return err;
	}
	for (uint64_t n = 0; n < g->n2; n += 16, idx += 16, dst += 32) {
		err = compact_pack(zf, r, g->total, idx, 16, dst);
		if (err)
			return err;
	}
	for (; idx < g->total; idx += 2, dst += 8) {
		err = compact_pack(zf, r, g->total, idx, 2, dst);
		if (err)
			return err;
	}
	return 0;
}

/* ---- full indexes (7.5) ---- */

static int full_encode(const struct kiln_zfile *zf, const struct lcl *r,
		       uint64_t total, uint8_t *dst)
{
	(void)zf;
	for (uint64_t i = 0; i < total; i++, dst += 8) {
		const struct lcl *x = &r[i];
		uint16_t advise = x->type;

		if (x->type != Z_EROFS_LCLUSTER_TYPE_NONHEAD) {
			if (x->partial)
				advise |= Z_EROFS_LI_PARTIAL_REF;
			if (x->blkaddr > UINT32_MAX)
				return -ERANGE;
			kiln_put_le16(dst, advise);
			kiln_put_le16(dst + 2, x->clusterofs);
			kiln_put_le32(dst + 4, (uint32_t)x->blkaddr);
			continue;
		}
		kiln_put_le16(dst, advise);
		kiln_put_le16(dst + 2, 0);
		kiln_put_le16(dst + 4, x->cblkcnt ?
			      (uint16_t)(Z_EROFS_LI_D0_CBLKCNT | x->nblks) :
			      (uint16_t)KILN_MIN(x->delta0, LCL_D0_MAX));
		kiln_put_le16(dst + 6, (uint16_t)KILN_MIN(x->delta1, FULL_D1_MAX));
	}
	return 0;
}

/* ---- encoded extents (7.10) ---- */

static unsigned int ilog2_u32(uint32_t v)
{
	unsigned int b = 0;

	while (v >>= 1)
		b++;
	return b;
}

static bool extents_uniform(const struct kiln_zfile *zf)
{
	const uint64_t L = (uint64_t)1 << zf->lclusterbits;

	for (size_t i = 0; i < zf->nr_ext; i++) {
		const struct kiln_zext *e = &zf->ext[i];

		if (e->lstart != i * L)
			return false;
		if (i + 1 < zf->nr_ext ? e->llen != L : e->llen > L)
			return false;
	}
	return zf->size <= zf->nr_ext * L && zf->size > (zf->nr_ext - 1) * L;
}

static bool extents_contiguous(const struct kiln_zfile *zf)
{
	for (size_t i = 1; i < zf->nr_ext; i++) {
		const struct kiln_zext *p = &zf->ext[i - 1], *e = &zf->ext[i];

		if (e->flags & KILN_ZEXT_FRAGMENT)
			continue;
		if (e->pstart != p->pstart + p->plen)
			return false;
	}
	return true;
}

static unsigned int extents_recsz(const struct kiln_zfile *zf)
{
	uint64_t maxaddr = 0;

	if (extents_uniform(zf) && zf->lclusterbits - zf->blkszbits <= 15) {
		const struct kiln_zext *last = &zf->ext[zf->nr_ext - 1];

		if (extents_contiguous(zf) &&
		    (!(last->flags & KILN_ZEXT_FRAGMENT) ||
		     zf->fragoff <= UINT32_MAX))
			return 4;
		for (size_t i = 0; i < zf->nr_ext; i++) {
			const struct kiln_zext *e = &zf->ext[i];

			if (!(e->flags & KILN_ZEXT_FRAGMENT))
				maxaddr = KILN_MAX(maxaddr, e->pstart);
		}
		if (maxaddr <= UINT32_MAX)
			return 8;
	}
	return zf->size > UINT32_MAX ? 32 : 16;
}

static uint64_t extents_table_start(const struct kiln_zfile *zf,
				    uint64_t meta_end)
{
	return kiln_round_up(kiln_round_up(meta_end, 8) + MAP_HEADER_SIZE,
			     zf->recsz);
}

static void extents_encode(const struct kiln_zfile *zf, uint8_t *dst)
{
	for (size_t i = 0; i < zf->nr_ext; i++, dst += zf->recsz) {
		const struct kiln_zext *e = &zf->ext[i];
		uint32_t plen = e->plen | (uint32_t)e->fmt << Z_EROFS_EXTENT_PLEN_FMT_BIT;
		uint64_t pstart = e->pstart;

		if (e->flags & KILN_ZEXT_PARTIAL)
			plen |= Z_EROFS_EXTENT_PLEN_PARTIAL;
		if (e->flags & KILN_ZEXT_HOLE)
			plen = 0;
		if (e->flags & KILN_ZEXT_FRAGMENT) {
			plen = (uint32_t)zf->fragoff;
			pstart = zf->fragoff >> 32;
		}
		memset(dst, 0, zf->recsz);
		kiln_put_le32(dst, plen);
		if (zf->recsz >= 8)
			kiln_put_le32(dst + 4, (uint32_t)pstart);
		if (zf->recsz >= 16) {
			kiln_put_le32(dst + 8, (uint32_t)(pstart >> 32));
			kiln_put_le32(dst + 12, (uint32_t)e->lstart);
		}
		if (zf->recsz >= 32)
			kiln_put_le32(dst + 16, (uint32_t)(e->lstart >> 32));
	}
}

/* ---- the map as a whole ---- */

/* Bytes of @zf's lcluster index of kind @kind (compact: at an aligned start). */
static uint64_t lcluster_index_bytes(const struct kiln_zfile *zf, int kind)
{
	struct compact_geo g;

	if (kind == KILN_ZMAP_FULL)
		return FULL_INDEX_SKIP + nr_lclusters(zf) * 8;
	compact_geometry(zf, 0, &g);
	return g.bytes;
}

/*
 * Whether every pcluster starts and ends on a block, as lcluster indexes
 * (block addresses) need; byte-packed ones (kiln_zfile_commit_bytes())
 * need extent records.
 */
static bool blocks_aligned(const struct kiln_zfile *zf)
{
	const uint64_t mask = ((uint64_t)1 << zf->blkszbits) - 1;

	for (size_t i = 0; i < zf->nr_ext; i++) {
		const struct kiln_zext *e = &zf->ext[i];

		if (e->flags & (KILN_ZEXT_INLINE | KILN_ZEXT_FRAGMENT |
				KILN_ZEXT_HOLE))
			continue;
		if ((e->pstart | e->plen) & mask)
			return false;
	}
	return true;
}

/* Whether no two extents start in one lcluster, as lcluster indexes need. */
static bool heads_apart(const struct kiln_zfile *zf)
{
	for (size_t i = 1; i < zf->nr_ext; i++)
		if (zf->ext[i].lstart >> zf->lclusterbits ==
		    zf->ext[i - 1].lstart >> zf->lclusterbits)
			return false;
	return true;
}

/*
 * Where the image is for Linux 6.15+ anyway, extent records map a classic
 * file too when they take fewer bytes than its lcluster index: one 16-byte
 * record per pcluster against 2-8 bytes per lcluster, so a file whose
 * pclusters each hold more than 8 lclusters (32 KiB with 4 KiB blocks, 2B
 * packs) gets the smaller map, and byte-packed pclusters or extents
 * that start in one lcluster (shifted dedupe's cuts) the only one that
 * maps them. Extent records carry no inline pcluster.
 */
static void maybe_extents(struct kiln_zfile *zf)
{
	unsigned int recsz;

	if (zf->idata_size || !zf->nr_ext || !kiln_zctx_48bit(zf->zc))
		return;
	recsz = extents_recsz(zf);
	if (blocks_aligned(zf) && heads_apart(zf) &&
	    (recsz == 4 ? 8 : 0) + (uint64_t)zf->nr_ext * recsz >=
	    lcluster_index_bytes(zf, zf->kind))
		return;
	zf->kind = KILN_ZMAP_EXTENTS;
	zf->recsz = (uint8_t)recsz;
}

void kiln_zindex_choose(struct kiln_zfile *zf)
{
	uint64_t next = 0;
	bool first = true;

	if (zf->kind == KILN_ZMAP_FRAGMENT)
		return;
	/* the extents layout's maps are extent records; classic ones choose */
	if (zf->kind == KILN_ZMAP_EXTENTS &&
	    (!zf->zc || kiln_zctx_extents(zf->zc))) {
		zf->recsz = extents_recsz(zf);
		return;
	}
	/* compact needs each real pcluster right after the previous one */
	zf->kind = KILN_ZMAP_COMPACT;
	for (size_t i = 0; i < zf->nr_ext; i++) {
		const struct kiln_zext *e = &zf->ext[i];

		if (e->flags & (KILN_ZEXT_INLINE | KILN_ZEXT_FRAGMENT))
			continue;
		if (e->flags & KILN_ZEXT_PARTIAL ||
		    (!first && e->pstart != next)) {
			zf->kind = KILN_ZMAP_FULL;
			break;
		}
		first = false;
		next = e->pstart + e->plen;
	}
	if ((zf->fragoff >> 32) && zf->kind == KILN_ZMAP_COMPACT)
		zf->kind = KILN_ZMAP_FULL;
	maybe_extents(zf);
}

/* Byte offset (from meta_end) of the map's index area and its size. */
static void index_span(const struct kiln_zfile *zf, uint64_t meta_end,
		       uint64_t *start, uint64_t *bytes)
{
	struct compact_geo g;

	switch (zf->kind) {
	case KILN_ZMAP_COMPACT:
		compact_geometry(zf, meta_end, &g);
		*start = g.ebase;
		*bytes = g.bytes;
		break;
	case KILN_ZMAP_FULL:
		*start = kiln_round_up(meta_end, 8) + MAP_HEADER_SIZE +
			 FULL_INDEX_SKIP;
		*bytes = nr_lclusters(zf) * 8;
		break;
	case KILN_ZMAP_EXTENTS:
		*start = extents_table_start(zf, meta_end);
		*bytes = (zf->recsz == 4 ? 8 : 0) + zf->nr_ext * zf->recsz;
		break;
	default:
		*start = kiln_round_up(meta_end, 8) + MAP_HEADER_SIZE;
		*bytes = 0;
		break;
	}
}

int kiln_zindex_size(const struct kiln_zfile *zf, uint64_t meta_end,
		     size_t *len)
{
	const uint64_t bs = (uint64_t)1 << zf->blkszbits;
	uint64_t start, bytes, end;

	index_span(zf, meta_end, &start, &bytes);
	end = start + bytes;
	if (zf->idata_size) {
		/*
		 * 7.11: the inline pcluster must stay inside one block. Nor
		 * may it start one: Linux 6.18 fails to read an inline pcluster
		 * that starts exactly at a block boundary other than a page
		 * boundary (seen with 1 KiB blocks; on 16/64 KiB page kernels
		 * that includes 4 KiB blocks), so no block start is used.
		 */
		if (end % bs == 0 || end % bs + zf->idata_size > bs)
			return -E2BIG;
		end += zf->idata_size;
	}
	if (end - meta_end > SIZE_MAX)
		return -E2BIG;
	*len = (size_t)(end - meta_end);
	return 0;
}

static void encode_header(const struct kiln_zfile *zf, uint8_t *h)
{
	uint16_t advise = 0;

	memset(h, 0, MAP_HEADER_SIZE);
	if (zf->kind == KILN_ZMAP_FRAGMENT) {
		kiln_put_le64(h, zf->fragoff);
		h[7] |= 1u << Z_EROFS_FRAGMENT_INODE_BIT;
		return;
	}
	if (zf->kind == KILN_ZMAP_EXTENTS) {
		advise = Z_EROFS_ADVISE_EXTENTS |
			 (uint16_t)(ilog2_u32(zf->recsz / 4) <<
				    Z_EROFS_ADVISE_EXTRECSZ_BIT);
		if (zf->nr_ext && zf->ext[zf->nr_ext - 1].flags & KILN_ZEXT_FRAGMENT)
			advise |= Z_EROFS_ADVISE_FRAGMENT_PCLUSTER;
		kiln_put_le16(h + 4, advise);
		if (zf->recsz >= 16) {
			kiln_put_le32(h, (uint32_t)zf->nr_ext);
			kiln_put_le16(h + 6, (uint16_t)((uint64_t)zf->nr_ext >> 32));
		} else {
			h[7] = (uint8_t)(zf->lclusterbits - zf->blkszbits);
		}
		return;
	}
	if (zf->kind == KILN_ZMAP_COMPACT && zf->lclusterbits <= 12)
		advise |= Z_EROFS_ADVISE_COMPACTED_2B;
	if (zf->big)
		advise |= Z_EROFS_ADVISE_BIG_PCLUSTER_1 |
			  Z_EROFS_ADVISE_BIG_PCLUSTER_2;
	if (zf->idata_size) {
		advise |= Z_EROFS_ADVISE_INLINE_PCLUSTER;
		kiln_put_le16(h + 2, (uint16_t)zf->idata_size);
	} else if (zf->nr_ext &&
		   zf->ext[zf->nr_ext - 1].flags & KILN_ZEXT_FRAGMENT) {
		advise |= Z_EROFS_ADVISE_FRAGMENT_PCLUSTER;
		kiln_put_le32(h, (uint32_t)zf->fragoff);
	}
	kiln_put_le16(h + 4, advise);
	h[6] = zf->alg & 0xF;
	h[7] = (uint8_t)(zf->lclusterbits - zf->blkszbits);
}

int kiln_zindex_encode(const struct kiln_zfile *zf, uint64_t meta_end,
		       void *dst, size_t len)
{
	uint8_t *out = dst;
	uint64_t hdr = kiln_round_up(meta_end, 8), start, bytes;
	struct compact_geo g;
	struct lcl *r = NULL;
	size_t need;
	int err;

	err = kiln_zindex_size(zf, meta_end, &need);
	if (err)
		return err;
	if (len < need)
		return -ENOSPC;
	memset(out, 0, len);
	encode_header(zf, out + (hdr - meta_end));
	if (zf->kind == KILN_ZMAP_FRAGMENT)
		return 0;
	index_span(zf, meta_end, &start, &bytes);
	switch (zf->kind) {
	case KILN_ZMAP_EXTENTS:
		if (zf->recsz == 4) {
			kiln_put_le64(out + (start - meta_end), zf->ext[0].pstart);
			extents_encode(zf, out + (start - meta_end) + 8);
		} else {
			extents_encode(zf, out + (start - meta_end));
		}
		break;
	case KILN_ZMAP_COMPACT:
	case KILN_ZMAP_FULL:
		err = build_lcls(zf, &r);
		if (err)
			return err;
		if (zf->kind == KILN_ZMAP_COMPACT) {
			compact_geometry(zf, meta_end, &g);
			err = compact_encode(zf, r, &g, out + (start - meta_end));
		} else {
			err = full_encode(zf, r, nr_lclusters(zf),
					  out + (start - meta_end));
		}
		free(r);
		if (err)
			return err;
		break;
	default:
		return -EINVAL;
	}
	if (zf->idata_size)
		memcpy(out + (start + bytes - meta_end), zf->idata,
		       zf->idata_size);
	return 0;
}
