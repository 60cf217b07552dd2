// SPDX-License-Identifier: MIT
/*
 * Extent lookup for compressed inodes: lcluster indexes (full records and
 * compact 4B/2B packs, big pclusters), 48-bit encoded extent tables, inline
 * (ztailpacking) tails and fragments. Every walk is bounded by the index
 * size; lookback loops and impossible lengths are corruption.
 */
#include <string.h>

#include "format/erofs_fs.h"
#include "reader/zmap.h"
#include "util/checked.h"
#include "util/endian.h"

#define ZM_CORRUPT(zm, fmt, ...) \
	KILN_CORRUPT((zm)->img, "nid %llu: " fmt, \
		     (unsigned long long)(zm)->nid, __VA_ARGS__)

/* Largest lcluster we accept: the kernel's compact limit is 14 bits. */
#define ZM_MAX_LCLUSTERBITS	20

/* One lcluster record, decoded from either index format. */
struct zm_rec {
	uint8_t type;		/* enum z_erofs_lcluster_type */
	bool partial;		/* HEAD/PLAIN: PARTIAL_REF */
	bool cblkcnt;		/* NONHEAD carrying a pcluster block count */
	uint16_t clusterofs;	/* HEAD/PLAIN */
	uint16_t delta0, delta1;	/* NONHEAD: back / forward lclusters */
	uint16_t cblks;		/* with cblkcnt */
	uint64_t pblk;		/* HEAD/PLAIN: pcluster block */
	uint64_t next_off;	/* image byte after this record / pack */
};

static bool zm_big(const struct kiln_zmap *zm, uint8_t type)
{
	if (type == Z_EROFS_LCLUSTER_TYPE_HEAD1)
		return zm->advise & Z_EROFS_ADVISE_BIG_PCLUSTER_1;
	return zm->advise & Z_EROFS_ADVISE_BIG_PCLUSTER_2;
}

/* ---- full index records ------------------------------------------------ */

static int zm_load_full(struct kiln_zmap *zm, uint64_t lcn, struct zm_rec *r)
{
	uint64_t off = zm->idx_off + lcn * sizeof(struct z_erofs_lcluster_index);
	const uint8_t *p;
	uint16_t adv;

	if (lcn >= zm->nr_lclusters)
		return ZM_CORRUPT(zm, "lcluster %llu past the index",
				  (unsigned long long)lcn);
	p = kiln_metabuf_get(zm->img, off, 8);
	if (!p)
		return ZM_CORRUPT(zm, "lcluster %llu outside the image",
				  (unsigned long long)lcn);
	memset(r, 0, sizeof(*r));
	adv = kiln_get_le16(p);
	r->type = adv & Z_EROFS_LI_LCLUSTER_TYPE_MASK;
	r->next_off = off + 8;
	if (r->type == Z_EROFS_LCLUSTER_TYPE_NONHEAD) {
		r->delta0 = kiln_get_le16(p + 4);
		r->delta1 = kiln_get_le16(p + 6);
		if (r->delta0 & Z_EROFS_LI_D0_CBLKCNT) {
			if (!(zm->advise & (Z_EROFS_ADVISE_BIG_PCLUSTER_1 |
					    Z_EROFS_ADVISE_BIG_PCLUSTER_2)))
				return ZM_CORRUPT(zm, "lcluster %llu: CBLKCNT without big pclusters",
						  (unsigned long long)lcn);
			r->cblkcnt = true;
			r->cblks = r->delta0 & Z_EROFS_LI_D0_MASK;
			r->delta0 = 1;
		}
		return 0;
	}
	r->partial = adv & Z_EROFS_LI_PARTIAL_REF;
	r->clusterofs = kiln_get_le16(p + 2);
	r->pblk = kiln_get_le32(p + 4);
	if (r->clusterofs >> zm->lclusterbits)
		return ZM_CORRUPT(zm, "lcluster %llu: clusterofs %u too large",
				  (unsigned long long)lcn, r->clusterofs);
	return 0;
}

/* ---- compact packs ------------------------------------------------------ */

struct zm_pack {
	const uint8_t *p;	/* the pack; base address in its last 4 bytes */
	unsigned int vcnt;	/* records per pack: 2 or 16 */
	unsigned int encodebits;	/* bits per record: 16 or 14 */
	unsigned int lobits;
	unsigned int size;	/* bytes: 8 or 32 */
	uint64_t end;		/* image byte after the pack */
};

/* Record @i of @pk: its low bits, type in *@type. */
static unsigned int zm_pack_rec(const struct zm_pack *pk, unsigned int i,
				uint8_t *type)
{
	unsigned int bit = pk->encodebits * i;
	uint32_t v = kiln_get_le32(pk->p + bit / 8) >> (bit % 8);

	*type = (v >> pk->lobits) & Z_EROFS_LI_LCLUSTER_TYPE_MASK;
	return v & ((1u << pk->lobits) - 1);
}

/* Forward distance to the next head from NONHEAD record @i (kernel rule). */
static uint16_t zm_pack_delta1(const struct zm_pack *pk, unsigned int i)
{
	unsigned int lo = 0, d1 = 0;
	uint8_t type;

	do {
		lo = zm_pack_rec(pk, i, &type);
		if (type != Z_EROFS_LCLUSTER_TYPE_NONHEAD)
			return (uint16_t)d1;
		d1++;
	} while (++i < pk->vcnt);
	/* the pack's last NONHEAD stores delta[1] instead of delta[0] */
	if (!(lo & Z_EROFS_LI_D0_CBLKCNT))
		d1 += lo - 1;
	return (uint16_t)d1;
}

static int zm_pack_locate(struct kiln_zmap *zm, uint64_t lcn,
			  struct zm_pack *pk, unsigned int *idx)
{
	unsigned int shift, packsize;
	uint64_t pos, start;

	if (lcn >= zm->nr_lclusters)
		return ZM_CORRUPT(zm, "lcluster %llu past the index",
				  (unsigned long long)lcn);
	if (lcn < zm->init4) {
		shift = 2;
		pos = zm->idx_off + lcn * 4;
	} else if (lcn < zm->init4 + zm->n2) {
		shift = 1;
		pos = zm->idx_off + zm->init4 * 4 + (lcn - zm->init4) * 2;
	} else {
		shift = 2;
		pos = zm->idx_off + zm->init4 * 4 + zm->n2 * 2 +
		      (lcn - zm->init4 - zm->n2) * 4;
	}
	pk->vcnt = shift == 2 ? 2 : 16;
	packsize = pk->vcnt << shift;
	pk->size = packsize;
	pk->encodebits = (packsize - 4) * 8 / pk->vcnt;
	pk->lobits = KILN_MAX(zm->lclusterbits, 12u);
	start = pos - pos % packsize;
	pk->p = kiln_metabuf_get(zm->img, start, packsize);
	if (!pk->p)
		return ZM_CORRUPT(zm, "index pack of lcluster %llu outside the image",
				  (unsigned long long)lcn);
	pk->end = start + packsize;
	*idx = (unsigned int)((pos - start) >> shift);
	return 0;
}

/* Block address of the HEAD/PLAIN record @i of @pk (section 7.8). */
static int zm_pack_pblk(struct kiln_zmap *zm, const struct zm_pack *pk,
			int i, uint64_t lcn, uint64_t *pblk)
{
	bool big = zm->advise & Z_EROFS_ADVISE_BIG_PCLUSTER_1;
	unsigned int lo;
	uint64_t nblk;
	uint8_t type;

	if (!big) {
		/* each earlier head in the pack is one block */
		nblk = 1;
		while (i > 0) {
			--i;
			lo = zm_pack_rec(pk, (unsigned int)i, &type);
			if (type == Z_EROFS_LCLUSTER_TYPE_NONHEAD)
				i -= (int)lo;
			if (i >= 0)
				++nblk;
		}
	} else {
		/* CBLKCNT records carry the size of the pcluster before them */
		nblk = 0;
		while (i > 0) {
			--i;
			lo = zm_pack_rec(pk, (unsigned int)i, &type);
			if (type == Z_EROFS_LCLUSTER_TYPE_NONHEAD) {
				if (lo & Z_EROFS_LI_D0_CBLKCNT) {
					--i;
					nblk += lo & Z_EROFS_LI_D0_MASK;
					continue;
				}
				if (lo <= 1)
					return ZM_CORRUPT(zm, "lcluster %llu: big pcluster NONHEAD with delta %u",
							  (unsigned long long)lcn, lo);
				i -= (int)lo - 2;
				continue;
			}
			++nblk;
		}
	}
	*pblk = (uint64_t)kiln_get_le32(pk->p + pk->size - 4) + nblk;
	return 0;
}

static int zm_load_compact(struct kiln_zmap *zm, uint64_t lcn,
			   struct zm_rec *r)
{
	struct zm_pack pk;
	unsigned int i, lo, prev;
	uint8_t type, ptype;
	int err;

	err = zm_pack_locate(zm, lcn, &pk, &i);
	if (err)
		return err;
	memset(r, 0, sizeof(*r));
	r->next_off = pk.end;
	lo = zm_pack_rec(&pk, i, &type);
	r->type = type;
	if (type == Z_EROFS_LCLUSTER_TYPE_NONHEAD) {
		r->delta1 = zm_pack_delta1(&pk, i);
		if (lo & Z_EROFS_LI_D0_CBLKCNT) {
			if (!(zm->advise & Z_EROFS_ADVISE_BIG_PCLUSTER_1))
				return ZM_CORRUPT(zm, "lcluster %llu: CBLKCNT without big pclusters",
						  (unsigned long long)lcn);
			r->cblkcnt = true;
			r->cblks = lo & Z_EROFS_LI_D0_MASK;
			r->delta0 = 1;
		} else if (i + 1 != pk.vcnt) {
			r->delta0 = (uint16_t)lo;
		} else {
			/* last of the pack: delta[0] comes from its neighbour */
			prev = zm_pack_rec(&pk, i - 1, &ptype);
			if (ptype != Z_EROFS_LCLUSTER_TYPE_NONHEAD)
				prev = 0;
			else if (prev & Z_EROFS_LI_D0_CBLKCNT)
				prev = 1;
			r->delta0 = (uint16_t)(prev + 1);
		}
		return 0;
	}
	r->clusterofs = (uint16_t)lo;
	if (lo >> zm->lclusterbits)
		return ZM_CORRUPT(zm, "lcluster %llu: clusterofs %u too large",
				  (unsigned long long)lcn, lo);
	return zm_pack_pblk(zm, &pk, (int)i, lcn, &r->pblk);
}

static int zm_load(struct kiln_zmap *zm, uint64_t lcn, struct zm_rec *r)
{
	zm->probes++;
	if (zm->layout == KILN_ZMAP_FULL)
		return zm_load_full(zm, lcn, r);
	return zm_load_compact(zm, lcn, r);
}

/* ---- lcluster formats: lookup ------------------------------------------- */

/*
 * Walk back from the lcluster holding @off to its extent's HEAD. Every
 * step moves back at least one lcluster, so the walk ends.
 */
static int zm_find_head(struct kiln_zmap *zm, uint64_t off, uint64_t *headlcn,
			struct zm_rec *r)
{
	uint64_t lcn = off >> zm->lclusterbits;
	uint64_t ofs = off & (((uint64_t)1 << zm->lclusterbits) - 1);
	unsigned int dist;
	int err;

	err = zm_load(zm, lcn, r);
	if (err)
		return err;
	if (r->type != Z_EROFS_LCLUSTER_TYPE_NONHEAD && ofs >= r->clusterofs) {
		*headlcn = lcn;
		return 0;
	}
	dist = r->type == Z_EROFS_LCLUSTER_TYPE_NONHEAD ? r->delta0 : 1;
	for (;;) {
		if (!dist || dist > lcn)
			return ZM_CORRUPT(zm, "lookback distance %u at lcluster %llu",
					  dist, (unsigned long long)lcn);
		lcn -= dist;
		err = zm_load(zm, lcn, r);
		if (err)
			return err;
		if (r->type != Z_EROFS_LCLUSTER_TYPE_NONHEAD)
			break;
		dist = r->delta0;
	}
	*headlcn = lcn;
	return 0;
}

/* Pcluster size in blocks of the head at @headlcn (kernel rule, 7.7). */
static int zm_pcluster_blks(struct kiln_zmap *zm, uint64_t headlcn,
			    uint8_t headtype, uint64_t *blks)
{
	unsigned int lshift = zm->lclusterbits - zm->img->sb.blkszbits;
	struct zm_rec r;
	uint64_t next = headlcn + 1;
	int err;

	if (!zm_big(zm, headtype) || next >= zm->nr_lclusters ||
	    (next << zm->lclusterbits) >= zm->size) {
		*blks = (uint64_t)1 << lshift;
		return 0;
	}
	err = zm_load(zm, next, &r);
	if (err)
		return err;
	if (r.type != Z_EROFS_LCLUSTER_TYPE_NONHEAD) {
		*blks = 1;
		return 0;
	}
	if (!r.cblkcnt || !r.cblks)
		return ZM_CORRUPT(zm, "no CBLKCNT after the head at lcluster %llu",
				  (unsigned long long)headlcn);
	*blks = r.cblks;
	return 0;
}

/* End of the extent starting at lcluster @headlcn: the next head or EOF. */
static int zm_extent_end(struct kiln_zmap *zm, uint64_t headlcn,
			 uint64_t *end)
{
	uint64_t lcn = headlcn + 1;
	struct zm_rec r;
	int err;

	while (lcn < zm->nr_lclusters && (lcn << zm->lclusterbits) < zm->size) {
		err = zm_load(zm, lcn, &r);
		if (err)
			return err;
		if (r.type != Z_EROFS_LCLUSTER_TYPE_NONHEAD) {
			*end = KILN_MIN((lcn << zm->lclusterbits) + r.clusterofs,
					zm->size);
			return 0;
		}
		lcn += r.delta1 ? r.delta1 : 1;
	}
	*end = zm->size;
	return 0;
}

static int zm_check_alg(struct kiln_zmap *zm, unsigned int alg)
{
	if (alg >= Z_EROFS_COMPRESSION_MAX ||
	    !(zm->img->sb.compr_algs & (1u << alg)))
		return ZM_CORRUPT(zm, "algorithm %u not in the superblock's set",
				  alg);
	return 0;
}

static bool zm_zero_padded(const struct kiln_zmap *zm, unsigned int alg)
{
	return alg != Z_EROFS_COMPRESSION_LZ4 ||
	       (zm->img->sb.feature_incompat &
		EROFS_FEATURE_INCOMPAT_ZERO_PADDING);
}

static int zm_lookup_lcluster(struct kiln_zmap *zm, uint64_t off,
			      struct kiln_zext *ext)
{
	uint64_t headlcn = 0, end = 0, blks = 0;
	struct zm_rec h;
	int err;

	/* 1. find the head and where the extent starts */
	err = zm_find_head(zm, off, &headlcn, &h);
	if (err)
		return err;
	memset(ext, 0, sizeof(*ext));
	ext->la = (headlcn << zm->lclusterbits) + h.clusterofs;
	ext->partial = h.partial;
	/* 2. tail extents live inline or in the packed inode */
	if (zm->have_tail && headlcn == zm->tail_headlcn &&
	    (zm->advise & Z_EROFS_ADVISE_FRAGMENT_PCLUSTER)) {
		if (!headlcn)
			ext->la = 0;
		ext->kind = KILN_ZEXT_FRAGMENT;
		ext->pa = zm->fragoff;
		ext->llen = zm->size - ext->la;
		return 0;
	}
	/* 3. where it ends */
	err = zm_extent_end(zm, headlcn, &end);
	if (err)
		return err;
	if (end <= off || ext->la > off)
		return ZM_CORRUPT(zm, "extent at lcluster %llu does not cover %llu",
				  (unsigned long long)headlcn,
				  (unsigned long long)off);
	ext->llen = end - ext->la;
	/* 4. the pcluster */
	if (zm->have_tail && headlcn == zm->tail_headlcn &&
	    (zm->advise & Z_EROFS_ADVISE_INLINE_PCLUSTER)) {
		ext->is_inline = true;
		ext->pa = zm->idata_off;
		ext->plen = zm->idata_size;
	} else {
		err = zm_pcluster_blks(zm, headlcn, h.type, &blks);
		if (err)
			return err;
		if (!kiln_blk_off(zm->img, h.pblk, &ext->pa) ||
		    (blks << zm->img->sb.blkszbits) > Z_EROFS_PCLUSTER_MAX_SIZE)
			return ZM_CORRUPT(zm, "pcluster at block %llu (%llu blocks) out of range",
					  (unsigned long long)h.pblk,
					  (unsigned long long)blks);
		ext->plen = (uint32_t)(blks << zm->img->sb.blkszbits);
	}
	/* 5. how to decode it */
	if (h.type == Z_EROFS_LCLUSTER_TYPE_PLAIN) {
		ext->kind = (zm->advise & Z_EROFS_ADVISE_INTERLACED_PCLUSTER) &&
			    !ext->is_inline ? KILN_ZEXT_INTERLACED :
					      KILN_ZEXT_PLAIN;
		return 0;
	}
	ext->kind = KILN_ZEXT_COMPRESSED;
	ext->alg = zm->algs[h.type == Z_EROFS_LCLUSTER_TYPE_HEAD2];
	ext->zero_padded = zm_zero_padded(zm, ext->alg);
	return zm_check_alg(zm, ext->alg);
}

/* ---- encoded extents ---------------------------------------------------- */

struct zm_erec {
	uint32_t plen;		/* raw field: length, partial bit, format */
	uint64_t pstart;
	uint64_t lstart;
};

static int zm_erec(struct kiln_zmap *zm, uint64_t idx, struct zm_erec *e)
{
	const uint8_t *p;

	uint64_t pos = zm->idx_off + idx * zm->recsz;

	zm->probes++;
	if (pos >> zm->img->sb.blkszbits != zm->last_blk) {
		zm->last_blk = pos >> zm->img->sb.blkszbits;
		zm->blocks++;
	}
	p = kiln_metabuf_get(zm->img, pos, zm->recsz);
	if (!p || idx >= zm->nr_extents)
		return ZM_CORRUPT(zm, "extent record %llu outside the table",
				  (unsigned long long)idx);
	e->plen = kiln_get_le32(p);
	e->pstart = zm->recsz >= 8 ? kiln_get_le32(p + 4) : 0;
	e->lstart = 0;
	if (zm->recsz >= 16) {
		e->pstart |= (uint64_t)kiln_get_le32(p + 8) << 32;
		e->lstart = kiln_get_le32(p + 12);
	}
	if (zm->recsz >= 32)
		e->lstart |= (uint64_t)kiln_get_le32(p + 16) << 32;
	if (e->lstart > zm->size)
		return ZM_CORRUPT(zm, "extent %llu starts at %llu past EOF",
				  (unsigned long long)idx,
				  (unsigned long long)e->lstart);
	return 0;
}

/* recsz 4: pcluster start of record @idx, summing lengths from the hint. */
static int zm_ext_packed_pa(struct kiln_zmap *zm, uint64_t idx, uint64_t *pa)
{
	uint64_t k = 0, at = zm->ext_base;
	struct zm_erec e;
	int err;

	if (zm->hint_valid && zm->hint_rec <= idx) {
		k = zm->hint_rec;
		at = zm->hint_rec_pa;
	}
	for (; k < idx; k++) {
		err = zm_erec(zm, k, &e);
		if (err)
			return err;
		if (kiln_add_overflow(at, (uint64_t)(e.plen & Z_EROFS_EXTENT_PLEN_MASK),
				      &at))
			return ZM_CORRUPT(zm, "extent %llu: address overflow",
					  (unsigned long long)k);
	}
	*pa = at;
	return 0;
}

/*
 * Index of the last record with lstart <= @off, or nr_extents when none
 * (bytes before the first record are a hole). The first probe of a random
 * lookup interpolates; each probe then resolves as much as it can inside
 * the metadata block it landed in before moving on.
 */
static int zm_ext_search(struct kiln_zmap *zm, uint64_t off, uint64_t *found)
{
	uint64_t l = 0, r = zm->nr_extents, cand = zm->nr_extents;
	unsigned int bits = zm->img->sb.blkszbits;
	uint64_t per_blk = ((uint64_t)1 << bits) / zm->recsz;
	struct zm_erec e;
	bool first = true;
	int err;

	while (l < r) {
		uint64_t m, b0, b1, blk;

		if (first && zm->size)
			m = l + (uint64_t)(((unsigned __int128)off * (r - l)) /
					   zm->size);
		else
			m = l + (r - l) / 2;
		first = false;
		if (m >= r)
			m = r - 1;
		/* records sharing m's metadata block, within [l, r) */
		blk = (zm->idx_off + m * zm->recsz) >> bits;
		b0 = ((blk << bits) > zm->idx_off) ?
		     ((blk << bits) - zm->idx_off) / zm->recsz : 0;
		b1 = b0 + per_blk;
		b0 = KILN_MAX(b0, l);
		b1 = KILN_MIN(b1, r);
		err = zm_erec(zm, b0, &e);
		if (err)
			return err;
		if (e.lstart > off) {
			r = b0;
			continue;
		}
		cand = b0;
		l = b0 + 1;
		if (l >= b1)
			continue;
		err = zm_erec(zm, b1 - 1, &e);
		if (err)
			return err;
		if (e.lstart <= off) {
			cand = b1 - 1;
			l = b1;
			continue;
		}
		/* the answer is in (b0, b1 - 1): finish inside this block */
		r = b1 - 1;
		while (l < r) {
			m = l + (r - l) / 2;
			err = zm_erec(zm, m, &e);
			if (err)
				return err;
			if (e.lstart <= off) {
				cand = m;
				l = m + 1;
			} else {
				r = m;
			}
		}
		break;
	}
	*found = cand;
	return 0;
}

static int zm_ext_fill(struct kiln_zmap *zm, const struct zm_erec *e,
		       bool last, struct kiln_zext *ext)
{
	uint32_t len = e->plen & Z_EROFS_EXTENT_PLEN_MASK;
	unsigned int fmt = e->plen >> Z_EROFS_EXTENT_PLEN_FMT_BIT;
	uint32_t bmask = zm->img->sb.blksz - 1;
	uint64_t pend;

	if (last && (zm->advise & Z_EROFS_ADVISE_FRAGMENT_PCLUSTER)) {
		ext->kind = KILN_ZEXT_FRAGMENT;
		ext->pa = e->plen | (zm->recsz >= 8 ? e->pstart << 32 : 0);
		return 0;
	}
	if (!len) {
		ext->kind = KILN_ZEXT_HOLE;
		return 0;
	}
	if (fmt > Z_EROFS_COMPRESSION_MAX || len > Z_EROFS_PCLUSTER_MAX_SIZE) {
		kiln_log(&zm->img->logger, KILN_LOG_ERROR,
			 "nid %llu: extent format %u / length %u not supported",
			 (unsigned long long)zm->nid, fmt, len);
		return -EOPNOTSUPP;
	}
	if (kiln_add_overflow(e->pstart, (uint64_t)len, &pend) ||
	    (pend >> zm->img->sb.blkszbits) >> 48)
		return ZM_CORRUPT(zm, "pcluster at byte %llu beyond 48 bits",
				  (unsigned long long)e->pstart);
	ext->pa = e->pstart;
	ext->plen = len;
	ext->partial = e->plen & Z_EROFS_EXTENT_PLEN_PARTIAL;
	if (!fmt) {
		ext->kind = (zm->advise & Z_EROFS_ADVISE_INTERLACED_PCLUSTER) &&
			    !((e->pstart | len) & bmask) ?
			    KILN_ZEXT_INTERLACED : KILN_ZEXT_PLAIN;
		return 0;
	}
	ext->kind = KILN_ZEXT_COMPRESSED;
	ext->alg = (uint8_t)(fmt - 1);
	ext->zero_padded = zm_zero_padded(zm, ext->alg);
	return zm_check_alg(zm, ext->alg);
}

static int zm_lookup_extents(struct kiln_zmap *zm, uint64_t off,
			     struct kiln_zext *ext)
{
	struct zm_erec e, next;
	uint64_t idx, lend;
	int err;

	memset(ext, 0, sizeof(*ext));
	if (zm->recsz <= 8) {
		/* 1. uniform extents: the index is arithmetic */
		idx = off >> zm->lclusterbits;
		err = zm_erec(zm, idx, &e);
		if (err)
			return err;
		if (zm->recsz == 4) {
			err = zm_ext_packed_pa(zm, idx, &e.pstart);
			if (err)
				return err;
		}
		ext->la = idx << zm->lclusterbits;
		lend = KILN_MIN(ext->la + ((uint64_t)1 << zm->lclusterbits),
				zm->size);
	} else {
		/* 2. variable extents: the next record first, then search */
		bool have_e = false, have_next = false;

		if (zm->hint_valid && off >= zm->hint.la + zm->hint.llen &&
		    zm->hint_rec + 1 < zm->nr_extents) {
			/* sequential: most likely the record after the hint */
			idx = zm->hint_rec + 1;
			err = zm_erec(zm, idx, &e);
			if (err)
				return err;
			have_e = e.lstart <= off;
			if (have_e && idx + 1 < zm->nr_extents) {
				err = zm_erec(zm, idx + 1, &next);
				if (err)
					return err;
				have_e = have_next = next.lstart > off;
			}
			if (!have_e)
				err = zm_ext_search(zm, off, &idx);
		} else {
			err = zm_ext_search(zm, off, &idx);
		}
		if (err)
			return err;
		if (idx == zm->nr_extents) {
			/* before the first record: a hole */
			lend = zm->size;
			if (zm->nr_extents) {
				err = zm_erec(zm, 0, &next);
				if (err)
					return err;
				lend = next.lstart;
			}
			ext->kind = KILN_ZEXT_HOLE;
			ext->la = 0;
			ext->llen = lend;
			if (lend <= off)
				return ZM_CORRUPT(zm, "extent table misses offset %llu",
						  (unsigned long long)off);
			return 0;
		}
		err = have_e ? 0 : zm_erec(zm, idx, &e);
		if (err)
			return err;
		lend = zm->size;
		if (idx + 1 < zm->nr_extents) {
			err = have_next ? 0 : zm_erec(zm, idx + 1, &next);
			if (err)
				return err;
			lend = next.lstart;
		}
		ext->la = e.lstart;
	}
	if (lend <= off || ext->la > off)
		return ZM_CORRUPT(zm, "extent %llu [%llu, %llu) does not cover %llu",
				  (unsigned long long)idx,
				  (unsigned long long)ext->la,
				  (unsigned long long)lend,
				  (unsigned long long)off);
	ext->llen = lend - ext->la;
	err = zm_ext_fill(zm, &e, idx + 1 == zm->nr_extents, ext);
	if (err)
		return err;
	zm->hint_rec = idx;
	zm->hint_rec_pa = e.pstart;
	return 0;
}

/* ---- setup -------------------------------------------------------------- */

static int zm_init_extents(struct kiln_zmap *zm, const uint8_t *h,
			   uint64_t hdr_off)
{
	unsigned int bits = zm->img->sb.blkszbits;
	uint64_t table, bytes;
	const uint8_t *p;

	zm->layout = KILN_ZMAP_EXTENTS;
	zm->recsz = 4u << ((zm->advise >> Z_EROFS_ADVISE_EXTRECSZ_BIT) &
			   Z_EROFS_ADVISE_EXTRECSZ_MASK);
	table = kiln_round_up(hdr_off + 8, zm->recsz);
	zm->idx_off = table;
	if (zm->recsz >= 16) {
		zm->nr_extents = kiln_get_le32(h) |
				 (uint64_t)kiln_get_le16(h + 6) << 32;
	} else {
		zm->lclusterbits = bits + (h[7] & 15);
		if (zm->lclusterbits > 40)
			return ZM_CORRUPT(zm, "extent size 2^%u", zm->lclusterbits);
		zm->nr_extents = kiln_div_round_up(zm->size,
						   (uint64_t)1 << zm->lclusterbits);
	}
	if (zm->recsz == 4) {
		p = kiln_metabuf_get(zm->img, table, 8);
		if (!p)
			return ZM_CORRUPT(zm, "extent base at %llu outside the image",
					  (unsigned long long)table);
		zm->ext_base = kiln_get_le64(p);
		zm->idx_off = table + 8;
	}
	if (kiln_mul_overflow(zm->nr_extents, (uint64_t)zm->recsz, &bytes) ||
	    !kiln_metabuf_range_ok(zm->img, zm->idx_off, bytes))
		return ZM_CORRUPT(zm, "%llu extent records outside the image",
				  (unsigned long long)zm->nr_extents);
	if (!zm->nr_extents && zm->size &&
	    (zm->advise & Z_EROFS_ADVISE_FRAGMENT_PCLUSTER))
		return ZM_CORRUPT(zm, "%s", "fragment without extent records");
	if ((zm->advise & Z_EROFS_ADVISE_FRAGMENT_PCLUSTER) &&
	    !zm->img->sb.packed_nid)
		return ZM_CORRUPT(zm, "%s", "fragment without a packed inode");
	return 0;
}

/* Find the tail extent's head: where ztailpacking / fragment data hangs. */
static int zm_init_tail(struct kiln_zmap *zm, const uint8_t *h)
{
	uint32_t bs = zm->img->sb.blksz;
	struct zm_rec r, last;
	uint64_t headlcn;
	int err;

	if (!zm->size)
		return 0;
	err = zm_find_head(zm, zm->size - 1, &headlcn, &r);
	if (err)
		return err;
	zm->tail_headlcn = headlcn;
	zm->have_tail = true;
	if (zm->advise & Z_EROFS_ADVISE_INLINE_PCLUSTER) {
		err = zm_load(zm, (zm->size - 1) >> zm->lclusterbits, &last);
		if (err)
			return err;
		zm->idata_size = kiln_get_le16(h + 2);
		zm->idata_off = last.next_off;
		if (!zm->idata_size ||
		    zm->idata_off % bs + zm->idata_size > bs ||
		    !kiln_metabuf_get(zm->img, zm->idata_off, zm->idata_size))
			return ZM_CORRUPT(zm, "inline pcluster of %u bytes at %llu crosses a block",
					  zm->idata_size,
					  (unsigned long long)zm->idata_off);
	} else {
		if (!zm->img->sb.packed_nid)
			return ZM_CORRUPT(zm, "%s", "fragment without a packed inode");
		zm->fragoff = kiln_get_le32(h);
		if (zm->layout == KILN_ZMAP_FULL)
			zm->fragoff |= r.pblk << 32;
	}
	return 0;
}

static int zm_init_lclusters(struct kiln_zmap *zm, const uint8_t *h,
			     uint64_t hdr_off, uint8_t datalayout)
{
	const struct kiln_sb *sb = &zm->img->sb;
	uint64_t bytes;
	struct zm_pack pk;
	unsigned int i;
	int err;

	zm->algs[0] = h[6] & 15;
	zm->algs[1] = h[6] >> 4;
	if (zm->algs[0] >= Z_EROFS_COMPRESSION_MAX ||
	    zm->algs[1] >= Z_EROFS_COMPRESSION_MAX) {
		kiln_log(&zm->img->logger, KILN_LOG_ERROR,
			 "nid %llu: unknown compression algorithm %#x",
			 (unsigned long long)zm->nid, h[6]);
		return -EOPNOTSUPP;
	}
	zm->lclusterbits = sb->blkszbits + (h[7] & 15);
	if ((zm->advise & (Z_EROFS_ADVISE_BIG_PCLUSTER_1 |
			   Z_EROFS_ADVISE_BIG_PCLUSTER_2)) &&
	    !(sb->feature_incompat & EROFS_FEATURE_INCOMPAT_BIG_PCLUSTER))
		return ZM_CORRUPT(zm, "%s", "big pclusters without the feature");
	if ((zm->advise & Z_EROFS_ADVISE_INLINE_PCLUSTER) &&
	    (zm->advise & Z_EROFS_ADVISE_FRAGMENT_PCLUSTER))
		return ZM_CORRUPT(zm, "%s", "both an inline and a fragment tail");
	if (datalayout == EROFS_INODE_COMPRESSED_FULL) {
		if (zm->lclusterbits > ZM_MAX_LCLUSTERBITS)
			goto unsupported;
		zm->layout = KILN_ZMAP_FULL;
		zm->idx_off = hdr_off + 16;
		zm->nr_lclusters = kiln_div_round_up(zm->size,
					(uint64_t)1 << zm->lclusterbits);
		if (kiln_mul_overflow(zm->nr_lclusters, (uint64_t)8, &bytes) ||
		    !kiln_metabuf_range_ok(zm->img, zm->idx_off, bytes))
			return ZM_CORRUPT(zm, "%llu index records outside the image",
					  (unsigned long long)zm->nr_lclusters);
	} else {
		bool b1 = zm->advise & Z_EROFS_ADVISE_BIG_PCLUSTER_1;
		bool b2 = zm->advise & Z_EROFS_ADVISE_BIG_PCLUSTER_2;

		if (b1 != b2)
			return ZM_CORRUPT(zm, "%s", "compact index with BIG_1 != BIG_2");
		if (zm->lclusterbits > 14 ||
		    ((zm->advise & Z_EROFS_ADVISE_COMPACTED_2B) &&
		     zm->lclusterbits > 12))
			goto unsupported;
		zm->layout = KILN_ZMAP_COMPACT;
		zm->idx_off = hdr_off + 8;
		zm->nr_lclusters = kiln_div_round_up(zm->size, sb->blksz);
		zm->init4 = ((32 - zm->idx_off % 32) / 4) % 8;
		if ((zm->advise & Z_EROFS_ADVISE_COMPACTED_2B) &&
		    zm->init4 < zm->nr_lclusters)
			zm->n2 = (zm->nr_lclusters - zm->init4) / 16 * 16;
		/* the last pack must be inside the image */
		if (zm->nr_lclusters) {
			err = zm_pack_locate(zm, zm->nr_lclusters - 1, &pk, &i);
			if (err)
				return err;
		}
	}
	if (zm->advise & (Z_EROFS_ADVISE_INLINE_PCLUSTER |
			  Z_EROFS_ADVISE_FRAGMENT_PCLUSTER))
		return zm_init_tail(zm, h);
	return 0;

unsupported:
	kiln_log(&zm->img->logger, KILN_LOG_ERROR,
		 "nid %llu: lcluster size 2^%u not supported",
		 (unsigned long long)zm->nid, zm->lclusterbits);
	return -EOPNOTSUPP;
}

int kiln_zmap_init(struct kiln_zmap *zm, struct kiln_image *img,
		   const struct kiln_inode *in)
{
	uint64_t hdr_off = kiln_round_up(kiln_inode_meta_end(in), 8);
	const uint8_t *h;

	memset(zm, 0, sizeof(*zm));
	zm->img = img;
	zm->nid = in->nid;
	zm->size = in->size;
	h = kiln_metabuf_get(img, hdr_off, 8);
	if (!h)
		return ZM_CORRUPT(zm, "map header at %llu outside the image",
				  (unsigned long long)hdr_off);
	/* the whole file is a fragment: nothing else of the map is read */
	if (h[7] >> Z_EROFS_FRAGMENT_INODE_BIT) {
		if (!img->sb.packed_nid)
			return ZM_CORRUPT(zm, "%s", "fragment without a packed inode");
		zm->layout = KILN_ZMAP_WHOLE_FRAGMENT;
		zm->fragoff = kiln_get_le64(h) & ~(1ull << 63);
		return 0;
	}
	zm->advise = kiln_get_le16(h + 4);
	if (in->datalayout == EROFS_INODE_COMPRESSED_FULL &&
	    (zm->advise & Z_EROFS_ADVISE_EXTENTS))
		return zm_init_extents(zm, h, hdr_off);
	return zm_init_lclusters(zm, h, hdr_off, in->datalayout);
}

int kiln_zmap_lookup(struct kiln_zmap *zm, uint64_t off,
		     struct kiln_zext *ext)
{
	int err;

	zm->lookups++;
	if (off >= zm->size)
		return ZM_CORRUPT(zm, "lookup at %llu past EOF",
				  (unsigned long long)off);
	if (zm->hint_valid && off >= zm->hint.la &&
	    off - zm->hint.la < zm->hint.llen) {
		zm->hint_hits++;
		*ext = zm->hint;
		return 0;
	}
	switch (zm->layout) {
	case KILN_ZMAP_WHOLE_FRAGMENT:
		memset(ext, 0, sizeof(*ext));
		ext->kind = KILN_ZEXT_FRAGMENT;
		ext->pa = zm->fragoff;
		ext->llen = zm->size;
		err = 0;
		break;
	case KILN_ZMAP_EXTENTS:
		err = zm_lookup_extents(zm, off, ext);
		break;
	default:
		err = zm_lookup_lcluster(zm, off, ext);
		break;
	}
	if (err)
		return err;
	if (ext->kind == KILN_ZEXT_COMPRESSED &&
	    ext->llen > Z_EROFS_EXTENT_MAX_LEN) {
		kiln_log(&zm->img->logger, KILN_LOG_ERROR,
			 "nid %llu: extent of %llu bytes at %llu too large",
			 (unsigned long long)zm->nid,
			 (unsigned long long)ext->llen,
			 (unsigned long long)ext->la);
		return -EOPNOTSUPP;
	}
	if ((ext->kind == KILN_ZEXT_PLAIN ||
	     ext->kind == KILN_ZEXT_INTERLACED) && ext->llen > ext->plen)
		return ZM_CORRUPT(zm, "plain extent at %llu: %llu bytes from a %u-byte pcluster",
				  (unsigned long long)ext->la,
				  (unsigned long long)ext->llen, ext->plen);
	zm->hint = *ext;
	zm->hint_valid = true;
	return 0;
}
