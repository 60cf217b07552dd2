// SPDX-License-Identifier: MIT
/*
 * Tests for lib/builder/compress/index.c: maps are encoded from hand-made
 * extent lists and read back with a small decoder written here from the format
 * notes (7.4-7.11), independent of the encoder.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "builder/compress/internal.h"
#include "format/erofs_fs.h"
#include "util/endian.h"
#include "tap.h"

#define BS_BITS	12u
#define BS	(1u << BS_BITS)

/* ---- the independent reader ---- */

struct rec {
	int type;
	unsigned int clusterofs;
	unsigned int delta0, delta1;
	int cblk;			/* CBLKCNT count, -1 if none */
	uint64_t pblk;
};

struct dec {
	const uint8_t *map;		/* bytes from meta_end on */
	uint64_t meta_end;
	uint64_t size;
	int compact;
	uint16_t advise;
	uint64_t nlc;
};

static void dec_init(struct dec *d, const uint8_t *map, uint64_t meta_end,
		     uint64_t size, int compact)
{
	uint64_t h = (meta_end + 7) / 8 * 8;

	d->map = map;
	d->meta_end = meta_end;
	d->size = size;
	d->compact = compact;
	d->advise = kiln_get_le16(map + (h - meta_end) + 4);
	d->nlc = (size + BS - 1) / BS;
}

static const uint8_t *at(const struct dec *d, uint64_t abs)
{
	return d->map + (abs - d->meta_end);
}

static unsigned int bits_at(const uint8_t *pack, unsigned int bit,
			    unsigned int n)
{
	unsigned int v = 0;

	for (unsigned int b = 0; b < n; b++)
		v |= (unsigned int)((pack[(bit + b) / 8] >> ((bit + b) % 8)) & 1) << b;
	return v;
}

static void pack_rec(const uint8_t *pack, unsigned int vcnt, unsigned int i,
		     int *type, unsigned int *lo)
{
	unsigned int bpr = vcnt == 2 ? 16 : 14;
	unsigned int v = bits_at(pack, i * bpr, 14);

	*lo = v & 0xFFF;
	*type = (int)(v >> 12);
}

/* Index end (where an inline pcluster starts) and where record lcn is. */
static uint64_t compact_pos(const struct dec *d, uint64_t lcn,
			    unsigned int *vcnt, uint64_t *end)
{
	uint64_t ebase = (d->meta_end + 7) / 8 * 8 + 8;
	uint64_t init4 = ((32 - ebase % 32) / 4) % 8, n2 = 0, rest;

	if ((d->advise & 1) && init4 < d->nlc)
		n2 = (d->nlc - init4) / 16 * 16;
	if (d->nlc <= init4) {
		*end = ebase + (d->nlc + 1) / 2 * 8;
	} else {
		rest = d->nlc - init4 - n2;
		*end = ebase + init4 * 4 + n2 * 2 + (rest + 1) / 2 * 8;
	}
	if (lcn < init4) {
		*vcnt = 2;
		return ebase + lcn * 4;
	}
	if (lcn < init4 + n2) {
		*vcnt = 16;
		return ebase + init4 * 4 + (lcn - init4) * 2;
	}
	*vcnt = 2;
	return ebase + init4 * 4 + n2 * 2 + (lcn - init4 - n2) * 4;
}

static struct rec load(const struct dec *d, uint64_t lcn)
{
	struct rec r = { .cblk = -1 };
	int big = (d->advise & Z_EROFS_ADVISE_BIG_PCLUSTER_1) != 0;

	if (!d->compact) {
		const uint8_t *p = at(d, (d->meta_end + 7) / 8 * 8 + 16 + lcn * 8);
		unsigned int d0 = kiln_get_le16(p + 4);

		r.type = kiln_get_le16(p) & 3;
		if (r.type == Z_EROFS_LCLUSTER_TYPE_NONHEAD) {
			if (d0 & 0x800) {
				r.cblk = (int)(d0 & 0x7FF);
				d0 = 1;
			}
			r.delta0 = d0;
			r.delta1 = kiln_get_le16(p + 6);
		} else {
			r.clusterofs = kiln_get_le16(p + 2);
			r.pblk = kiln_get_le32(p + 4);
		}
		return r;
	}

	unsigned int vcnt, lo, packsz;
	uint64_t end, pos = compact_pos(d, lcn, &vcnt, &end);
	const uint8_t *pack;
	int i;

	packsz = vcnt == 2 ? 8 : 32;
	pack = at(d, pos / packsz * packsz);
	i = (int)((pos % packsz) / (packsz / vcnt));
	pack_rec(pack, vcnt, (unsigned int)i, &r.type, &lo);
	if (r.type == Z_EROFS_LCLUSTER_TYPE_NONHEAD) {
		int t;
		unsigned int plo;

		if (lo & 0x800) {
			r.cblk = (int)(lo & 0x7FF);
			r.delta0 = 1;
		} else if (i + 1 < (int)vcnt) {
			r.delta0 = lo;
		} else {
			r.delta1 = lo;
			pack_rec(pack, vcnt, (unsigned int)i - 1, &t, &plo);
			if (t != Z_EROFS_LCLUSTER_TYPE_NONHEAD)
				r.delta0 = 1;
			else if (plo & 0x800)
				r.delta0 = 2;
			else
				r.delta0 = plo + 1;
		}
		/* delta1: count NONHEADs forward within the pack */
		if (!(i + 1 == (int)vcnt && !(lo & 0x800))) {
			unsigned int n = 0;
			int j;

			for (j = i; j < (int)vcnt; j++) {
				int t2;
				unsigned int l2;

				pack_rec(pack, vcnt, (unsigned int)j, &t2, &l2);
				if (t2 != Z_EROFS_LCLUSTER_TYPE_NONHEAD)
					break;
				n++;
				if (j + 1 == (int)vcnt && !(l2 & 0x800))
					n += l2 - 1;
			}
			r.delta1 = n;
		}
		return r;
	}
	r.clusterofs = lo;
	/* block address: the pack's base plus what the records before add */
	uint64_t nblk = big ? 0 : 1;
	for (int j = i - 1; j >= 0; j--) {
		int t;
		unsigned int l;

		pack_rec(pack, vcnt, (unsigned int)j, &t, &l);
		if (!big) {
			if (t == Z_EROFS_LCLUSTER_TYPE_NONHEAD) {
				j -= (int)l;
				if (j < 0)
					break;
			}
			nblk++;
			continue;
		}
		if (t != Z_EROFS_LCLUSTER_TYPE_NONHEAD) {
			nblk++;
		} else if (l & 0x800) {
			nblk += l & 0x7FF;
			j--;		/* its head is accounted for */
		} else {
			CHECK(l >= 2);
			j -= (int)l - 2;	/* next: its CBLKCNT */
		}
	}
	r.pblk = kiln_get_le32(pack + packsz - 4) + nblk;
	return r;
}

struct mapped {
	uint64_t la, llen;
	uint64_t pblk;
	unsigned int nblks;
	int type;
};

static int map_offset(const struct dec *d, uint64_t x, struct mapped *m)
{
	uint64_t lcn = x / BS, head;
	struct rec r = load(d, lcn);
	int big1 = (d->advise & Z_EROFS_ADVISE_BIG_PCLUSTER_1) != 0;
	int steps = 0;

	if (r.type != Z_EROFS_LCLUSTER_TYPE_NONHEAD && x % BS >= r.clusterofs) {
		head = lcn;
	} else {
		uint64_t dist = r.type == Z_EROFS_LCLUSTER_TYPE_NONHEAD ? r.delta0 : 1;

		head = lcn;
		do {
			if (!dist || dist > head || ++steps > 100000)
				return -1;
			head -= dist;
			r = load(d, head);
			dist = r.delta0;
		} while (r.type == Z_EROFS_LCLUSTER_TYPE_NONHEAD);
	}
	m->la = head * BS + r.clusterofs;
	m->type = r.type;
	m->pblk = r.pblk;
	m->nblks = 1;
	if (big1 && head + 1 < d->nlc) {
		struct rec n = load(d, head + 1);

		if (n.type == Z_EROFS_LCLUSTER_TYPE_NONHEAD) {
			if (n.cblk < 0)
				return -2;
			m->nblks = (unsigned int)n.cblk;
		}
	}
	/* decoded length through delta1, as FIEMAP would */
	uint64_t l = head + 1;
	for (;;) {
		struct rec n;

		if (l >= d->nlc) {
			m->llen = d->size - m->la;
			return 0;
		}
		n = load(d, l);
		if (n.type != Z_EROFS_LCLUSTER_TYPE_NONHEAD) {
			m->llen = l * BS + n.clusterofs - m->la;
			return 0;
		}
		l += n.delta1 ? n.delta1 : 1;
	}
}

/* ---- helpers ---- */

static void zf_init(struct kiln_zfile *zf, uint64_t size, int big)
{
	memset(zf, 0, sizeof(*zf));
	zf->size = size;
	zf->blkszbits = BS_BITS;
	zf->lclusterbits = BS_BITS;
	zf->big = big;
	zf->alg = Z_EROFS_COMPRESSION_LZ4;
}

static void zf_add(struct kiln_zfile *zf, uint64_t lstart, uint32_t llen,
		   uint64_t pblk, uint32_t nblks, int raw)
{
	struct kiln_zext e = {
		.lstart = lstart, .llen = llen, .pstart = pblk * BS,
		.plen = nblks * BS, .fmt = raw ? 0 : 1,
	};

	CHECK_EQ(kiln_zfile_add(zf, &e), 0);
}

/* Every extent maps back from its first and last byte and its middle. */
static void check_roundtrip(struct kiln_zfile *zf, uint64_t meta_end,
			    int want_compact)
{
	size_t len;
	uint8_t *buf;
	struct dec d;

	kiln_zindex_choose(zf);
	CHECK_EQ(zf->kind == KILN_ZMAP_COMPACT, want_compact);
	CHECK_EQ(kiln_zindex_size(zf, meta_end, &len), 0);
	buf = calloc(1, len + 64);
	memset(buf + len, 0xA5, 64);
	if (kiln_zindex_encode(zf, meta_end, buf, len)) {
		CHECK(!"encode failed");
		goto out;
	}
	CHECK_EQ(buf[len], 0xA5);
	dec_init(&d, buf, meta_end, zf->size, zf->kind == KILN_ZMAP_COMPACT);
	for (size_t i = 0; i < zf->nr_ext; i++) {
		const struct kiln_zext *e = &zf->ext[i];
		uint64_t probe[3] = { e->lstart, e->lstart + e->llen / 2,
				      e->lstart + e->llen - 1 };

		for (int k = 0; k < 3; k++) {
			struct mapped m;

			CHECK_EQ(map_offset(&d, probe[k], &m), 0);
			CHECK_EQ(m.la, e->lstart);
			CHECK_EQ(m.llen, e->llen);
			CHECK_EQ(m.type, e->fmt ? Z_EROFS_LCLUSTER_TYPE_HEAD1 :
						  Z_EROFS_LCLUSTER_TYPE_PLAIN);
			if (e->flags & (KILN_ZEXT_INLINE | KILN_ZEXT_FRAGMENT))
				continue;
			CHECK_EQ(m.pblk, e->pstart / BS);
			CHECK_EQ(m.nblks, e->plen / BS);
		}
	}
out:
	free(buf);
	kiln_zfile_release_ext(zf);
}

/* A file of n extents, each of @llen bytes, 1-block pclusters from blk. */
static void make_chain(struct kiln_zfile *zf, unsigned int n, uint32_t llen,
		       uint64_t blk, uint32_t nblks)
{
	uint64_t pos = 0;

	for (unsigned int i = 0; i < n; i++) {
		uint32_t l = (uint32_t)(i + 1 == n ? zf->size - pos : llen);

		zf_add(zf, pos, l, blk, nblks, i % 5 == 3);
		pos += l;
		blk += nblks;
	}
}

/* ---- tests ---- */

TEST(compact_single_block_pclusters_map_back_at_every_alignment)
{
	/* 3 regions: leading 4B packs, 2B packs, trailing 4B packs */
	for (uint64_t me = 1000; me < 1000 + 64; me += 4) {
		struct kiln_zfile zf;
		const unsigned int n = 40;

		zf_init(&zf, (uint64_t)n * 7000 - 123, 0);
		make_chain(&zf, n, 7000, 500, 1);
		check_roundtrip(&zf, me, 1);
	}
}

TEST(compact_big_pclusters_carry_cblkcnt)
{
	for (uint64_t me = 2048; me < 2048 + 32; me += 8) {
		struct kiln_zfile zf;
		uint64_t pos = 0, blk = 900;
		/* mixed: 16-block, 1-block (two lclusters), 3-block, raw */
		const uint32_t llen[] = { 90000, 5000, 20000, 8192, 70000,
					  4096 * 3, 30000, 6000 };
		const uint32_t nb[] = { 16, 1, 3, 2, 14, 3, 4, 1 };
		uint64_t size = 0;

		for (size_t i = 0; i < 8; i++)
			size += llen[i];
		zf_init(&zf, size, 1);
		for (size_t i = 0; i < 8; i++) {
			zf_add(&zf, pos, llen[i], blk, nb[i], i == 3 || i == 5);
			pos += llen[i];
			blk += nb[i];
		}
		check_roundtrip(&zf, me, 1);
	}
}

TEST(full_index_when_pclusters_are_out_of_order)
{
	struct kiln_zfile zf;

	zf_init(&zf, 30000, 1);
	zf_add(&zf, 0, 9000, 100, 2, 0);
	zf_add(&zf, 9000, 9000, 50, 1, 0);	/* earlier on disk: dedupe-like */
	zf_add(&zf, 18000, 12000, 102, 3, 1);
	check_roundtrip(&zf, 4000, 0);
}

TEST(eof_sentinel_ends_last_extent_inside_last_lcluster)
{
	struct kiln_zfile zf;
	size_t len;
	uint8_t buf[256];
	struct dec d;
	struct rec r;

	/* one extent covering 10000 bytes: lclusters 0, 1, 2; ends mid-2 */
	zf_init(&zf, 10000, 0);
	zf_add(&zf, 0, 10000, 7, 1, 0);
	kiln_zindex_choose(&zf);
	CHECK_EQ(kiln_zindex_size(&zf, 1056, &len), 0);
	CHECK(len <= sizeof(buf));
	CHECK_EQ(kiln_zindex_encode(&zf, 1056, buf, len), 0);
	dec_init(&d, buf, 1056, zf.size, 1);
	r = load(&d, 2);
	CHECK_EQ(r.type, Z_EROFS_LCLUSTER_TYPE_PLAIN);
	CHECK_EQ(r.clusterofs, 10000 - 2 * BS);
	r = load(&d, 1);
	CHECK_EQ(r.type, Z_EROFS_LCLUSTER_TYPE_NONHEAD);
	CHECK_EQ(r.delta0, 1);
	kiln_zfile_release_ext(&zf);
}

TEST(inline_tail_follows_index_and_never_crosses_a_block)
{
	struct kiln_zfile zf;
	uint8_t tail[300], buf[2048];
	size_t len;
	int crossed = 0, fitted = 0;

	memset(tail, 0x5A, sizeof(tail));
	zf_init(&zf, 3 * 5000 + 700, 0);
	zf_add(&zf, 0, 5000, 10, 1, 0);
	zf_add(&zf, 5000, 5000, 11, 1, 0);
	zf_add(&zf, 10000, 5000, 12, 1, 0);
	{
		struct kiln_zext e = { .lstart = 15000, .llen = 700,
				       .plen = sizeof(tail), .fmt = 1,
				       .flags = KILN_ZEXT_INLINE };
		CHECK_EQ(kiln_zfile_add(&zf, &e), 0);
	}
	zf.idata = tail;
	zf.idata_size = sizeof(tail);
	kiln_zindex_choose(&zf);
	CHECK_EQ(zf.kind, KILN_ZMAP_COMPACT);
	for (uint64_t me = 3 * BS - 600; me < 3 * BS; me += 4) {
		int err = kiln_zindex_size(&zf, me, &len);
		uint64_t hdr = (me + 7) / 8 * 8;

		if (err) {
			CHECK_EQ(err, -E2BIG);
			crossed++;
			continue;
		}
		fitted++;
		CHECK((me + len - 1) / BS == (me + len - sizeof(tail)) / BS);
		CHECK_EQ(kiln_zindex_encode(&zf, me, buf, len), 0);
		CHECK(!memcmp(buf + len - sizeof(tail), tail, sizeof(tail)));
		/* header: INLINE_PCLUSTER advise and h_idata_size */
		CHECK(kiln_get_le16(buf + (hdr - me) + 4) &
		      Z_EROFS_ADVISE_INLINE_PCLUSTER);
		CHECK_EQ(kiln_get_le16(buf + (hdr - me) + 2), sizeof(tail));
		{
			struct dec d;
			struct mapped m;
			unsigned int vcnt;
			uint64_t end;

			dec_init(&d, buf, me, zf.size, 1);
			compact_pos(&d, d.nlc - 1, &vcnt, &end);
			CHECK_EQ(end + sizeof(tail), me + len);
			CHECK_EQ(map_offset(&d, zf.size - 1, &m), 0);
			CHECK_EQ(m.la, 15000);
		}
	}
	CHECK(crossed > 0);
	CHECK(fitted > 0);
	kiln_zfile_release_ext(&zf);
}

static void extents_case(unsigned int recsz_want, int gap)
{
	struct kiln_zfile zf;
	const uint32_t L = 65536;
	uint64_t pa = 123457, me = 5000;
	uint8_t buf[4096];
	size_t len;

	memset(&zf, 0, sizeof(zf));
	zf.size = 5 * (uint64_t)L - 999;
	zf.blkszbits = BS_BITS;
	zf.lclusterbits = 16;
	zf.kind = KILN_ZMAP_EXTENTS;
	for (int i = 0; i < 5; i++) {
		struct kiln_zext e = {
			.lstart = (uint64_t)i * L,
			.llen = i == 4 ? L - 999 : L,
			.pstart = pa, .plen = 1000u + (uint32_t)i * 77,
			.fmt = i == 2 ? 0 : 4,
		};

		if (i == 3 && gap)
			e.pstart += 10;
		if (i == 2)
			e.plen = L;
		CHECK_EQ(kiln_zfile_add(&zf, &e), 0);
		pa = e.pstart + e.plen;
	}
	kiln_zindex_choose(&zf);
	CHECK_EQ(zf.recsz, recsz_want);
	CHECK_EQ(kiln_zindex_size(&zf, me, &len), 0);
	CHECK(len <= sizeof(buf));
	CHECK_EQ(kiln_zindex_encode(&zf, me, buf, len), 0);
	{
		uint64_t hdr = (me + 7) / 8 * 8;
		uint64_t tab = (hdr + 8 + recsz_want - 1) / recsz_want * recsz_want;
		uint16_t advise = kiln_get_le16(buf + (hdr - me) + 4);
		const uint8_t *t = buf + (tab - me);
		uint64_t base = 0;

		CHECK(advise & Z_EROFS_ADVISE_EXTENTS);
		CHECK_EQ(4u << ((advise >> 1) & 3), recsz_want);
		if (recsz_want == 4) {
			base = kiln_get_le64(t);
			t += 8;
			CHECK_EQ(buf[hdr - me + 7], 16 - BS_BITS);
		}
		for (size_t i = 0; i < zf.nr_ext; i++, t += recsz_want) {
			const struct kiln_zext *e = &zf.ext[i];
			uint32_t plen = kiln_get_le32(t);

			CHECK_EQ(plen & Z_EROFS_EXTENT_PLEN_MASK, e->plen);
			CHECK_EQ(plen >> 28, e->fmt);
			if (recsz_want == 4) {
				CHECK_EQ(base, e->pstart);
				base += plen & Z_EROFS_EXTENT_PLEN_MASK;
			} else {
				CHECK_EQ(kiln_get_le32(t + 4), (uint32_t)e->pstart);
			}
			if (recsz_want >= 16)
				CHECK_EQ(kiln_get_le32(t + 12), e->lstart);
		}
		CHECK_EQ((uint64_t)(t - buf), len);
	}
	kiln_zfile_release_ext(&zf);
}

TEST(uniform_contiguous_extents_use_4_byte_records)
{
	extents_case(4, 0);
}

TEST(uniform_extents_with_gaps_use_8_byte_records)
{
	extents_case(8, 1);
}

TEST(lcluster_zero_must_hold_the_first_extent)
{
	struct kiln_zfile zf;
	uint8_t buf[512];

	zf_init(&zf, 9000, 0);
	zf_add(&zf, 100, 8900, 3, 1, 0);
	zf.kind = KILN_ZMAP_FULL;
	CHECK_EQ(kiln_zindex_encode(&zf, 1024, buf, sizeof(buf)), -EINVAL);
	kiln_zfile_release_ext(&zf);
}

TEST(two_extents_starting_in_one_lcluster_are_refused)
{
	struct kiln_zfile zf;
	uint8_t buf[512];

	zf_init(&zf, 9000, 0);
	zf_add(&zf, 0, 100, 3, 1, 1);
	zf_add(&zf, 100, 8900, 4, 1, 0);
	kiln_zindex_choose(&zf);
	CHECK_EQ(kiln_zindex_encode(&zf, 1024, buf, sizeof(buf)), -EINVAL);
	kiln_zfile_release_ext(&zf);
}

TAP_MAIN(TAP_ENTRY(compact_single_block_pclusters_map_back_at_every_alignment),
	 TAP_ENTRY(compact_big_pclusters_carry_cblkcnt),
	 TAP_ENTRY(full_index_when_pclusters_are_out_of_order),
	 TAP_ENTRY(eof_sentinel_ends_last_extent_inside_last_lcluster),
	 TAP_ENTRY(inline_tail_follows_index_and_never_crosses_a_block),
	 TAP_ENTRY(uniform_contiguous_extents_use_4_byte_records),
	 TAP_ENTRY(uniform_extents_with_gaps_use_8_byte_records),
	 TAP_ENTRY(lcluster_zero_must_hold_the_first_extent),
	 TAP_ENTRY(two_extents_starting_in_one_lcluster_are_refused))
