// SPDX-License-Identifier: MIT
/*
 * Tests for lib/reader/zmap.c (and zread.c on crafted maps): full and
 * compact lcluster indexes, big pclusters, encoded extents of every record
 * size, tails and fragments; good maps and hostile ones.
 */
#include <stdlib.h>
#include <string.h>

#include "codec/codec.h"
#include "format/erofs_fs.h"
#include "reader/internal.h"
#include "reader/zmap.h"
#include "util/checked.h"
#include "util/endian.h"
#include "tap.h"

#define BS		4096u
#define INODE_OFF	4096u		/* the inode sits at block 1 */
#define HDR_OFF		(INODE_OFF + 32)	/* compact core, no xattrs */
#define IMG_SIZE	(4u << 20)

/* A fake image around a zeroed buffer: enough for zmap and zread. */
struct fake {
	uint8_t *map;
	struct kiln_image img;
	struct kiln_file file;
};

static void fake_init(struct fake *f, uint8_t datalayout, uint64_t size,
		      uint16_t algs, uint32_t incompat)
{
	memset(f, 0, sizeof(*f));
	f->map = calloc(1, IMG_SIZE);
	f->img.fd = -1;
	f->img.map = f->map;
	f->img.size = IMG_SIZE;
	f->img.sb.blkszbits = 12;
	f->img.sb.blksz = BS;
	f->img.sb.compr_algs = algs;
	f->img.sb.feature_incompat = incompat |
				     EROFS_FEATURE_INCOMPAT_ZERO_PADDING;
	f->file.img = &f->img;
	f->file.inode.nid = 128;
	f->file.inode.inode_off = INODE_OFF;
	f->file.inode.core_size = 32;
	f->file.inode.datalayout = datalayout;
	f->file.inode.size = size;
}

static void fake_release(struct fake *f)
{
	kiln_zread_release(&f->file);
	kiln_zimage_release(&f->img);
	free(f->map);
}

static void put_header(struct fake *f, uint32_t u, uint16_t advise,
		       uint8_t algs, uint8_t clusterbits)
{
	uint8_t *h = f->map + HDR_OFF;

	kiln_put_le32(h, u);
	kiln_put_le16(h + 4, advise);
	h[6] = algs;
	h[7] = clusterbits;
}

/* ---- full indexes ------------------------------------------------------- */

#define FULL_IDX(lcn)	(HDR_OFF + 16 + 8 * (lcn))

static void put_head(struct fake *f, uint64_t lcn, uint16_t type,
		     uint16_t clusterofs, uint32_t blk)
{
	uint8_t *p = f->map + FULL_IDX(lcn);

	kiln_put_le16(p, type);
	kiln_put_le16(p + 2, clusterofs);
	kiln_put_le32(p + 4, blk);
}

static void put_nonhead(struct fake *f, uint64_t lcn, uint16_t d0,
			uint16_t d1)
{
	uint8_t *p = f->map + FULL_IDX(lcn);

	kiln_put_le16(p, Z_EROFS_LCLUSTER_TYPE_NONHEAD);
	kiln_put_le16(p + 4, d0);
	kiln_put_le16(p + 6, d1);
}

static int lookup(struct fake *f, uint64_t off, struct kiln_zext *e)
{
	struct kiln_zmap zm;
	int err = kiln_zmap_init(&zm, &f->img, &f->file.inode);

	return err ? err : kiln_zmap_lookup(&zm, off, e);
}

/* Two compressed extents, the second starting 100 bytes into lcluster 2. */
static void make_full(struct fake *f, uint64_t size)
{
	fake_init(f, EROFS_INODE_COMPRESSED_FULL, size, 1, 0);
	put_header(f, 0, 0, 0, 0);
	put_head(f, 0, Z_EROFS_LCLUSTER_TYPE_HEAD1, 0, 10);
	put_nonhead(f, 1, 1, 1);
	put_head(f, 2, Z_EROFS_LCLUSTER_TYPE_HEAD1, 100, 11);
	put_nonhead(f, 3, 1, 1);
	put_head(f, 4, Z_EROFS_LCLUSTER_TYPE_PLAIN, (uint16_t)(size % BS), 0);
}

TEST(full_index_finds_heads_behind_nonheads)
{
	uint64_t size = 5 * BS - 100;
	struct kiln_zext e;
	struct fake f;

	make_full(&f, size);
	CHECK_EQ(lookup(&f, 0, &e), 0);
	CHECK_EQ(e.la, 0);
	CHECK_EQ(e.llen, 2 * BS + 100);
	CHECK_EQ(e.pa, 10 * BS);
	CHECK_EQ(e.plen, BS);
	CHECK_EQ(e.kind, KILN_ZEXT_COMPRESSED);
	CHECK_EQ(lookup(&f, 2 * BS + 99, &e), 0);
	CHECK_EQ(e.la, 0);
	CHECK_EQ(lookup(&f, 2 * BS + 100, &e), 0);
	CHECK_EQ(e.la, 2 * BS + 100);
	CHECK_EQ(e.llen, size - (2 * BS + 100));
	CHECK_EQ(e.pa, 11 * BS);
	CHECK_EQ(lookup(&f, size - 1, &e), 0);
	CHECK_EQ(e.la, 2 * BS + 100);
	CHECK(lookup(&f, size, &e) == -KILN_ECORRUPT);
	fake_release(&f);
}

TEST(lookback_past_first_cluster_is_corrupt)
{
	struct kiln_zext e;
	struct fake f;

	make_full(&f, 5 * BS - 100);
	put_nonhead(&f, 0, 1, 1);
	CHECK_EQ(lookup(&f, 10, &e), -KILN_ECORRUPT);
	fake_release(&f);
	/* a distance that jumps before lcluster 0 */
	make_full(&f, 5 * BS - 100);
	put_nonhead(&f, 1, 2, 1);
	CHECK_EQ(lookup(&f, BS + 5, &e), -KILN_ECORRUPT);
	fake_release(&f);
}

TEST(zero_lookback_distance_is_corrupt)
{
	struct kiln_zext e;
	struct fake f;

	make_full(&f, 5 * BS - 100);
	put_nonhead(&f, 3, 0, 1);
	CHECK_EQ(lookup(&f, 3 * BS, &e), -KILN_ECORRUPT);
	fake_release(&f);
}

TEST(clusterofs_beyond_lcluster_is_corrupt)
{
	struct kiln_zext e;
	struct fake f;

	make_full(&f, 5 * BS - 100);
	put_head(&f, 2, Z_EROFS_LCLUSTER_TYPE_HEAD1, BS, 11);
	CHECK_EQ(lookup(&f, 2 * BS + 10, &e), -KILN_ECORRUPT);
	fake_release(&f);
}

TEST(cblkcnt_misuse_is_corrupt)
{
	struct kiln_zext e;
	struct fake f;

	/* CBLKCNT in a map without big pclusters */
	make_full(&f, 5 * BS - 100);
	put_nonhead(&f, 1, Z_EROFS_LI_D0_CBLKCNT | 2, 1);
	CHECK_EQ(lookup(&f, BS, &e), -KILN_ECORRUPT);
	fake_release(&f);
	/* big pclusters, but the record after a head is a plain NONHEAD */
	make_full(&f, 5 * BS - 100);
	f.img.sb.feature_incompat |= EROFS_FEATURE_INCOMPAT_BIG_PCLUSTER;
	put_header(&f, 0, Z_EROFS_ADVISE_BIG_PCLUSTER_1, 0, 0);
	CHECK_EQ(lookup(&f, 0, &e), -KILN_ECORRUPT);
	/* a zero block count */
	put_nonhead(&f, 1, Z_EROFS_LI_D0_CBLKCNT | 0, 1);
	CHECK_EQ(lookup(&f, 0, &e), -KILN_ECORRUPT);
	/* a proper one */
	put_nonhead(&f, 1, Z_EROFS_LI_D0_CBLKCNT | 2, 1);
	CHECK_EQ(lookup(&f, 0, &e), 0);
	CHECK_EQ(e.plen, 2 * BS);
	/* big pcluster advice without the superblock feature */
	f.img.sb.feature_incompat &= ~EROFS_FEATURE_INCOMPAT_BIG_PCLUSTER;
	CHECK_EQ(lookup(&f, 0, &e), -KILN_ECORRUPT);
	fake_release(&f);
}

TEST(algorithm_outside_the_superblock_set_is_corrupt)
{
	struct kiln_zext e;
	struct fake f;

	make_full(&f, 5 * BS - 100);
	put_header(&f, 0, 0, 3, 0);	/* HEAD1 = zstd, sb says lz4 only */
	CHECK_EQ(lookup(&f, 0, &e), -KILN_ECORRUPT);
	put_header(&f, 0, 0, 7, 0);	/* no such algorithm */
	CHECK_EQ(lookup(&f, 0, &e), -EOPNOTSUPP);
	fake_release(&f);
}

TEST(index_outside_the_image_is_corrupt)
{
	struct kiln_zext e;
	struct fake f;

	make_full(&f, (uint64_t)1 << 40);
	CHECK_EQ(lookup(&f, 0, &e), -KILN_ECORRUPT);
	fake_release(&f);
}

TEST(inline_tail_crossing_a_block_is_corrupt)
{
	uint64_t size = 5 * BS - 100;
	struct kiln_zext e;
	struct fake f;

	make_full(&f, size);
	f.img.sb.feature_incompat |= EROFS_FEATURE_INCOMPAT_ZTAILPACKING;
	/* the tail pcluster follows record 4, at FULL_IDX(5) */
	put_header(&f, 60u << 16, Z_EROFS_ADVISE_INLINE_PCLUSTER, 0, 0);
	CHECK_EQ(lookup(&f, size - 1, &e), 0);
	CHECK(e.is_inline);
	CHECK_EQ(e.pa, FULL_IDX(5));
	CHECK_EQ(e.plen, 60);
	CHECK_EQ(lookup(&f, 0, &e), 0);
	CHECK(!e.is_inline);
	put_header(&f, (uint32_t)BS << 16, Z_EROFS_ADVISE_INLINE_PCLUSTER, 0, 0);
	CHECK_EQ(lookup(&f, 0, &e), -KILN_ECORRUPT);
	put_header(&f, 0, Z_EROFS_ADVISE_INLINE_PCLUSTER, 0, 0);
	CHECK_EQ(lookup(&f, 0, &e), -KILN_ECORRUPT);
	fake_release(&f);
}

TEST(fragment_tail_and_whole_file_fragments)
{
	uint64_t size = 5 * BS - 100;
	struct kiln_zext e;
	struct fake f;

	make_full(&f, size);
	f.img.sb.feature_incompat |= EROFS_FEATURE_INCOMPAT_FRAGMENTS;
	put_header(&f, 0x1234, Z_EROFS_ADVISE_FRAGMENT_PCLUSTER, 0, 0);
	CHECK_EQ(lookup(&f, 0, &e), -KILN_ECORRUPT);	/* no packed inode */
	f.img.sb.packed_nid = 99;
	/* full indexes: the high half of fragoff is the tail head's block */
	CHECK_EQ(lookup(&f, size - 1, &e), 0);
	CHECK_EQ(e.kind, KILN_ZEXT_FRAGMENT);
	CHECK(e.pa == (0x1234 | (11ull << 32)));
	CHECK_EQ(e.la, 2 * BS + 100);
	CHECK_EQ(e.llen, size - e.la);
	CHECK_EQ(lookup(&f, 0, &e), 0);
	CHECK_EQ(e.kind, KILN_ZEXT_COMPRESSED);
	/* whole-file fragment: only the header counts */
	kiln_put_le64(f.map + HDR_OFF, (1ull << 63) | 777);
	CHECK_EQ(lookup(&f, 5, &e), 0);
	CHECK_EQ(e.kind, KILN_ZEXT_FRAGMENT);
	CHECK_EQ(e.pa, 777);
	CHECK_EQ(e.la, 0);
	CHECK_EQ(e.llen, size);
	fake_release(&f);
}

/* ---- compact indexes ---------------------------------------------------- */

/*
 * A model file of @n lclusters with an extent starting every @every
 * lclusters (at offset 0), pclusters of @blks blocks from block 100 on,
 * encoded as a compact index with 2B packs when @two_b.
 */
struct cmodel {
	unsigned int n, every, blks;
	bool two_b;
};

static bool is_head(const struct cmodel *m, unsigned int lcn)
{
	return lcn % m->every == 0;
}

static uint32_t model_blk(const struct cmodel *m, unsigned int lcn)
{
	return 100 + (lcn / m->every) * m->blks;
}

/* The encoded low bits of record @lcn (type in *@type). */
static unsigned int model_rec(const struct cmodel *m, unsigned int lcn,
			      bool last_in_pack, unsigned int *type)
{
	unsigned int d0 = lcn % m->every;

	if (is_head(m, lcn)) {
		*type = Z_EROFS_LCLUSTER_TYPE_HEAD1;
		return 0;
	}
	*type = Z_EROFS_LCLUSTER_TYPE_NONHEAD;
	if (m->blks > 1 && d0 == 1)
		return Z_EROFS_LI_D0_CBLKCNT | m->blks;
	if (last_in_pack)
		return m->every - d0;	/* delta[1]: to the next head */
	return d0;
}

/* Base block of a pack starting at @first with @vcnt records. */
static uint32_t model_base(const struct cmodel *m, unsigned int first,
			   unsigned int vcnt)
{
	if (m->blks == 1) {
		/* one block per head: base + 1 = the first head's block */
		for (unsigned int l = first; l < first + vcnt && l < m->n; l++)
			if (is_head(m, l))
				return model_blk(m, l) - 1;
		return 0;
	}
	/* the first pcluster counted here: a head or a CBLKCNT in the pack */
	for (unsigned int l = first; l < first + vcnt && l < m->n; l++) {
		if (is_head(m, l))
			return model_blk(m, l);
		if (l % m->every == 1)
			return model_blk(m, l - 1);
	}
	return 0;
}

static void put_pack(struct fake *f, const struct cmodel *m, uint64_t pos,
		     unsigned int first, unsigned int vcnt)
{
	unsigned int bits = vcnt == 2 ? 16 : 14, size = vcnt == 2 ? 8 : 32;
	uint8_t *p = f->map + pos;

	for (unsigned int i = 0; i < vcnt; i++) {
		unsigned int type, lo = 0, bit = bits * i;
		uint32_t v;

		if (first + i < m->n)
			lo = model_rec(m, first + i, i + 1 == vcnt, &type);
		else
			type = Z_EROFS_LCLUSTER_TYPE_PLAIN;
		v = kiln_get_le32(p + bit / 8);
		v |= (uint32_t)(lo | type << 12) << (bit % 8);
		kiln_put_le32(p + bit / 8, v);
	}
	kiln_put_le32(p + size - 4, model_base(m, first, vcnt));
}

static void make_compact(struct fake *f, const struct cmodel *m)
{
	uint64_t ebase = HDR_OFF + 8, pos;
	unsigned int init4 = ((32 - ebase % 32) / 4) % 8, n2 = 0, l;
	uint16_t advise = 0;

	fake_init(f, EROFS_INODE_COMPRESSED_COMPACT, (uint64_t)m->n * BS, 1,
		  m->blks > 1 ? EROFS_FEATURE_INCOMPAT_BIG_PCLUSTER : 0);
	if (m->two_b) {
		advise |= Z_EROFS_ADVISE_COMPACTED_2B;
		if (init4 < m->n)
			n2 = (m->n - init4) / 16 * 16;
	}
	if (m->blks > 1)
		advise |= Z_EROFS_ADVISE_BIG_PCLUSTER_1 |
			  Z_EROFS_ADVISE_BIG_PCLUSTER_2;
	put_header(f, 0, advise, 0, 0);
	pos = ebase;
	for (l = 0; l < init4 && l < m->n; l += 2, pos += 8)
		put_pack(f, m, pos, l, 2);
	for (; l < init4 + n2; l += 16, pos += 32)
		put_pack(f, m, pos, l, 16);
	for (; l < m->n; l += 2, pos += 8)
		put_pack(f, m, pos, l, 2);
}

static void check_model(const struct cmodel *m)
{
	struct kiln_zmap zm;
	struct kiln_zext e;
	struct fake f;
	bool ok = true;

	make_compact(&f, m);
	CHECK_EQ(kiln_zmap_init(&zm, &f.img, &f.file.inode), 0);
	for (unsigned int l = 0; l < m->n; l++) {
		unsigned int head = l - l % m->every;
		uint64_t end = KILN_MIN((uint64_t)(head + m->every) * BS,
					(uint64_t)m->n * BS);

		if (kiln_zmap_lookup(&zm, (uint64_t)l * BS + 7, &e)) {
			ok = false;
			continue;
		}
		if (e.la != (uint64_t)head * BS || e.la + e.llen != end ||
		    e.pa != (uint64_t)model_blk(m, head) * BS ||
		    e.plen != (head + 1 < m->n ? m->blks : 1) * BS) {
			printf("#   lcn %u: la %llu llen %llu pa %llu plen %u\n",
			       l, (unsigned long long)e.la,
			       (unsigned long long)e.llen,
			       (unsigned long long)e.pa, e.plen);
			ok = false;
		}
	}
	CHECK(ok);
	fake_release(&f);
}

TEST(compact_4b_packs_give_block_addresses)
{
	struct cmodel m = { 41, 3, 1, false };

	check_model(&m);
}

TEST(compact_2b_packs_give_block_addresses)
{
	struct cmodel m = { 70, 4, 1, true };

	check_model(&m);
	m.every = 5;
	check_model(&m);
}

TEST(compact_big_pclusters_use_cblkcnt)
{
	struct cmodel m = { 70, 4, 3, true };

	check_model(&m);
	m.two_b = false;
	m.every = 5;
	m.blks = 2;
	check_model(&m);
}

TEST(compact_big_pcluster_nonhead_delta_one_is_corrupt)
{
	struct cmodel m = { 10, 4, 2, false };
	struct kiln_zext e;
	struct fake f;
	uint8_t *p;

	make_compact(&f, &m);
	/*
	 * The pack of lclusters 2 and 3: a plain NONHEAD with delta 1, then
	 * a head. Finding the head's block walks back through a NONHEAD
	 * that can't be one in a big-pcluster map.
	 */
	p = f.map + HDR_OFF + 8 + 8 * 1;
	kiln_put_le32(p, (uint32_t)(1 | Z_EROFS_LCLUSTER_TYPE_NONHEAD << 12) |
			 (uint32_t)(0 | Z_EROFS_LCLUSTER_TYPE_HEAD1 << 12) << 16);
	CHECK_EQ(lookup(&f, 3 * BS, &e), -KILN_ECORRUPT);
	fake_release(&f);
}

TEST(compact_lookup_past_the_index_is_corrupt)
{
	struct cmodel m = { 12, 4, 1, false };
	struct kiln_zmap zm;
	struct kiln_zext e;
	struct fake f;

	make_compact(&f, &m);
	CHECK_EQ(kiln_zmap_init(&zm, &f.img, &f.file.inode), 0);
	/* lcluster 0 made a NONHEAD: the walk would leave the file */
	kiln_put_le32(f.map + HDR_OFF + 8,
		      (uint32_t)(1 | Z_EROFS_LCLUSTER_TYPE_NONHEAD << 12));
	CHECK_EQ(kiln_zmap_lookup(&zm, 10, &e), -KILN_ECORRUPT);
	fake_release(&f);
	/* 2B packs with lclusters above 4 KiB are refused */
	make_compact(&f, &m);
	put_header(&f, 0, Z_EROFS_ADVISE_COMPACTED_2B, 0, 1);
	CHECK_EQ(kiln_zmap_init(&zm, &f.img, &f.file.inode), -EOPNOTSUPP);
	fake_release(&f);
}

/* ---- encoded extents ---------------------------------------------------- */

#define EXT_TABLE	(HDR_OFF + 8)	/* 8-aligned; recsz 16 aligns to 16 */

static uint64_t ext_table(unsigned int recsz)
{
	return kiln_round_up(EXT_TABLE, recsz);
}

static void put_ext(struct fake *f, unsigned int recsz, uint64_t idx,
		    uint32_t plen, uint64_t pstart, uint64_t lstart)
{
	uint8_t *p = f->map + ext_table(recsz) + (recsz == 4 ? 8 : 0) +
		     idx * recsz;

	kiln_put_le32(p, plen);
	if (recsz >= 8)
		kiln_put_le32(p + 4, (uint32_t)pstart);
	if (recsz >= 16) {
		kiln_put_le32(p + 8, (uint32_t)(pstart >> 32));
		kiln_put_le32(p + 12, (uint32_t)lstart);
	}
	if (recsz >= 32)
		kiln_put_le32(p + 16, (uint32_t)(lstart >> 32));
}

static void make_extents(struct fake *f, unsigned int recsz, uint64_t size,
			 uint64_t count, uint16_t algs)
{
	uint16_t advise = Z_EROFS_ADVISE_EXTENTS |
			  (uint16_t)((recsz == 4 ? 0 : recsz == 8 ? 1 :
				      recsz == 16 ? 2 : 3) << 1);

	fake_init(f, EROFS_INODE_COMPRESSED_FULL, size, algs,
		  EROFS_FEATURE_INCOMPAT_48BIT);
	put_header(f, (uint32_t)count, advise, (uint8_t)(count >> 32), 0);
	if (recsz < 16)
		f->map[HDR_OFF + 7] = 2;	/* 16 KiB extents */
}

TEST(extents_16_byte_records_with_hint_and_search)
{
	enum { N = 2000 };
	uint64_t size = (uint64_t)N * 3000 + 5;
	struct kiln_zmap zm;
	struct kiln_zext e;
	struct fake f;
	bool ok = true;
	uint64_t probes;

	make_extents(&f, 16, size, N, 1);
	for (uint64_t i = 0; i < N; i++)
		put_ext(&f, 16, i, 1u << 28 | 700, 1000000 + i * 700,
			i * 3000 + (i ? 5 : 0));
	CHECK_EQ(kiln_zmap_init(&zm, &f.img, &f.file.inode), 0);
	/* sequential: one or two record reads per new extent */
	for (uint64_t off = 0; off < size; off += 1000) {
		if (kiln_zmap_lookup(&zm, off, &e) ||
		    e.la > off || off - e.la >= e.llen || e.plen != 700)
			ok = false;
	}
	CHECK(ok);
	if (zm.probes > 2 * N + 32)
		printf("#   %llu probes\n", (unsigned long long)zm.probes);
	CHECK(zm.probes <= 2 * N + 32);
	CHECK(zm.blocks <= 2 * (N * 16 / BS + 2));
	CHECK(zm.hint_hits > N);
	/* random: interpolation lands in the right block */
	probes = zm.blocks;
	for (int i = 0; i < 500; i++) {
		uint64_t off = ((uint64_t)i * 7919 * 3001) % size;
		uint64_t idx;

		zm.hint_valid = false;
		if (kiln_zmap_lookup(&zm, off, &e)) {
			ok = false;
			continue;
		}
		idx = off < 3005 ? 0 : (off - 5) / 3000;
		if (e.pa != 1000000 + idx * 700)
			ok = false;
	}
	CHECK(ok);
	/* interpolation: the first block probed holds the answer */
	CHECK((zm.blocks - probes) <= 500 * 2);
	fake_release(&f);
}

TEST(extents_holes_plain_and_bytes_before_the_first_record)
{
	struct kiln_zext e;
	struct fake f;

	make_extents(&f, 32, 50000, 4, 1);
	put_ext(&f, 32, 0, 1u << 28 | 500, 70000, 1000);	/* lz4 */
	put_ext(&f, 32, 1, 0, 0, 5000);				/* hole */
	put_ext(&f, 32, 2, 8192, 2 * BS, 9000);			/* plain */
	put_ext(&f, 32, 3, 1u << 28 | Z_EROFS_EXTENT_PLEN_PARTIAL | 300,
		80001, 17000);
	CHECK_EQ(lookup(&f, 10, &e), 0);
	CHECK_EQ(e.kind, KILN_ZEXT_HOLE);
	CHECK_EQ(e.llen, 1000);
	CHECK_EQ(lookup(&f, 1000, &e), 0);
	CHECK_EQ(e.kind, KILN_ZEXT_COMPRESSED);
	CHECK_EQ(e.llen, 4000);
	CHECK_EQ(lookup(&f, 6000, &e), 0);
	CHECK_EQ(e.kind, KILN_ZEXT_HOLE);
	CHECK_EQ(lookup(&f, 9000, &e), 0);
	CHECK_EQ(e.kind, KILN_ZEXT_PLAIN);
	CHECK_EQ(lookup(&f, 49999, &e), 0);
	CHECK(e.partial);
	CHECK_EQ(e.pa, 80001);
	CHECK_EQ(e.llen, 33000);
	/* SEEK_DATA/SEEK_HOLE view of the same table */
	{
		uint64_t d0, d1;

		CHECK_EQ(kiln_zread_next_data(&f.file, 0, &d0, &d1), 0);
		CHECK_EQ(d0, 1000);
		CHECK_EQ(d1, 5000);
		CHECK_EQ(kiln_zread_next_data(&f.file, 5000, &d0, &d1), 0);
		CHECK_EQ(d0, 9000);
		CHECK_EQ(d1, 50000);
		CHECK_EQ(kiln_zread_next_data(&f.file, 50000, &d0, &d1), -ENXIO);
		kiln_zread_release(&f.file);
	}
	/* interlaced when the inode says so and the pcluster is aligned */
	f.map[HDR_OFF + 4] |= Z_EROFS_ADVISE_INTERLACED_PCLUSTER;
	CHECK_EQ(lookup(&f, 9000, &e), 0);
	CHECK_EQ(e.kind, KILN_ZEXT_INTERLACED);
	fake_release(&f);
}

TEST(extents_out_of_range_are_corrupt)
{
	struct kiln_zext e;
	struct fake f;

	/* a record starting past EOF */
	make_extents(&f, 16, 50000, 2, 1);
	put_ext(&f, 16, 0, 1u << 28 | 500, 70000, 0);
	put_ext(&f, 16, 1, 1u << 28 | 500, 71000, 60000);
	CHECK_EQ(lookup(&f, 100, &e), -KILN_ECORRUPT);
	/* a plain pcluster shorter than its extent */
	put_ext(&f, 16, 0, 0u << 28 | 500, 70000, 0);
	put_ext(&f, 16, 1, 1u << 28 | 500, 71000, 1000);
	CHECK_EQ(lookup(&f, 100, &e), -KILN_ECORRUPT);
	/* an unknown format, a pcluster over 1 MiB */
	put_ext(&f, 16, 0, 6u << 28 | 500, 70000, 0);
	CHECK_EQ(lookup(&f, 100, &e), -EOPNOTSUPP);
	put_ext(&f, 16, 0, 1u << 28 | Z_EROFS_EXTENT_PLEN_MASK, 70000, 0);
	CHECK_EQ(lookup(&f, 100, &e), -EOPNOTSUPP);
	/* a table that does not fit the image */
	put_header(&f, 0xFFFFFFFF, Z_EROFS_ADVISE_EXTENTS | 2 << 1, 0xFF, 0);
	CHECK_EQ(lookup(&f, 100, &e), -KILN_ECORRUPT);
	fake_release(&f);
	/* an address beyond 48 bits of blocks */
	make_extents(&f, 16, 50000, 1, 1);
	put_ext(&f, 16, 0, 1u << 28 | 500, UINT64_MAX - 100, 0);
	CHECK_EQ(lookup(&f, 100, &e), -KILN_ECORRUPT);
	fake_release(&f);
}

TEST(extents_4_and_8_byte_records_are_uniform)
{
	uint64_t size = 5 * 16384 + 100;
	struct kiln_zmap zm;
	struct kiln_zext e;
	struct fake f;

	make_extents(&f, 4, size, 0, 1);
	kiln_put_le64(f.map + ext_table(4), 500000);
	for (int i = 0; i < 6; i++)
		put_ext(&f, 4, (uint64_t)i, 1u << 28 | (100u + (uint32_t)i), 0, 0);
	put_ext(&f, 4, 2, 0, 0, 0);	/* a hole */
	CHECK_EQ(kiln_zmap_init(&zm, &f.img, &f.file.inode), 0);
	CHECK_EQ(kiln_zmap_lookup(&zm, 4 * 16384 + 1, &e), 0);
	CHECK_EQ(e.pa, 500000 + 100 + 101 + 0 + 103);
	CHECK_EQ(e.la, 4 * 16384);
	CHECK_EQ(e.llen, 16384);
	CHECK_EQ(kiln_zmap_lookup(&zm, size - 1, &e), 0);
	CHECK_EQ(e.llen, 100);
	CHECK_EQ(e.pa, 500000 + 100 + 101 + 0 + 103 + 104);
	CHECK_EQ(kiln_zmap_lookup(&zm, 2 * 16384, &e), 0);
	CHECK_EQ(e.kind, KILN_ZEXT_HOLE);
	CHECK_EQ(kiln_zmap_lookup(&zm, 100, &e), 0);
	CHECK_EQ(e.pa, 500000);
	fake_release(&f);

	make_extents(&f, 8, size, 0, 1);
	for (int i = 0; i < 6; i++)
		put_ext(&f, 8, (uint64_t)i, 1u << 28 | 100, 90000u - 1000u * (uint32_t)i,
			0);
	f.img.sb.feature_incompat |= EROFS_FEATURE_INCOMPAT_FRAGMENTS;
	f.img.sb.packed_nid = 42;
	f.map[HDR_OFF + 4] |= Z_EROFS_ADVISE_FRAGMENT_PCLUSTER;
	CHECK_EQ(lookup(&f, 3 * 16384, &e), 0);
	CHECK_EQ(e.pa, 87000);
	/* the last record is the fragment: offset from plen | pstart << 32 */
	CHECK_EQ(lookup(&f, size - 1, &e), 0);
	CHECK_EQ(e.kind, KILN_ZEXT_FRAGMENT);
	CHECK(e.pa == ((1ull << 28 | 100) | (uint64_t)85000 << 32));
	fake_release(&f);
}

/* ---- zread on crafted extents: every codec, holes, plain data ---------- */

struct piece {
	enum kiln_codec_id codec;	/* NONE: plain; MAX: hole */
	uint32_t len;
};

static uint8_t content[200000];

TEST(zread_decodes_every_codec_from_byte_addressed_extents)
{
	static const struct piece pieces[] = {
		{ KILN_CODEC_LZ4, 20000 }, { KILN_CODEC_ZSTD, 33000 },
		{ KILN_CODEC_MAX, 7000 }, { KILN_CODEC_LZMA, 25000 },
		{ KILN_CODEC_DEFLATE, 40000 }, { KILN_CODEC_NONE, 3000 },
		{ KILN_CODEC_LZ4HC, 12000 }, { KILN_CODEC_ZSTD, 100 },
	};
	static const enum kiln_cache_mode modes[] = {
		KILN_CACHE_DEFAULT, KILN_CACHE_NONE, KILN_CACHE_NONE };
	uint64_t pa = 1000001, la = 0;
	struct fake f;
	uint8_t *got;
	bool ok = true;
	size_t n = KILN_ARRAY_SIZE(pieces);

	for (size_t i = 0; i < sizeof(content); i++)
		content[i] = (uint8_t)("kiln reads extents "[i % 19] + (i / 5000));
	make_extents(&f, 16, 0, n, 0xF);
	for (size_t i = 0; i < n; i++) {
		const struct kiln_codec_ops *ops = kiln_codec_get(pieces[i].codec);
		uint32_t len = pieces[i].len;
		struct kiln_codec_params p = { 0, BS, 65536 };
		size_t wsz;
		void *ws;
		ssize_t c;

		if (pieces[i].codec == KILN_CODEC_MAX) {
			memset(content + la, 0, len);
			put_ext(&f, 16, i, 0, 0, la);
		} else if (!ops) {
			memcpy(f.map + pa, content + la, len);
			put_ext(&f, 16, i, len, pa, la);
			pa += len + 3;
		} else {
			p.level = ops->default_level;
			wsz = ops->compress_wsize(p.level, len);
			ws = aligned_alloc(64, (wsz + 64) / 64 * 64);
			CHECK_EQ(kiln_codec_cws_init(ops, ws, wsz, &p), 0);
			c = ops->compress(ws, p.level, f.map + pa, 60000,
					  content + la, len);
			kiln_codec_cws_fini(ops, ws);
			free(ws);
			CHECK(c > 0);
			put_ext(&f, 16, i, (uint32_t)(ops->erofs_alg + 1) << 28 |
				(uint32_t)c, pa, la);
			pa += (uint64_t)c + 1;	/* unaligned on purpose */
		}
		la += len;
	}
	f.file.inode.size = la;
	got = malloc(la);
	for (size_t m = 0; m < KILN_ARRAY_SIZE(modes); m++) {
		struct kiln_file *file = &f.file;

		f.img.cache = modes[m];
		f.img.flags = m == 2 ? KILN_IMAGE_FORCE_COPY : 0;
		kiln_zread_release(file);
		kiln_zimage_release(&f.img);
		memset(got, 0xCC, la);
		ok &= kiln_zread(file, got, la, 0) == (ssize_t)la &&
		      !memcmp(got, content, la);
		for (uint64_t off = 0; off < la; off += 4096) {
			size_t k = (size_t)KILN_MIN((uint64_t)4096, la - off);

			ok &= kiln_zread(file, got, k, off) == (ssize_t)k &&
			      !memcmp(got, content + off, k);
		}
		for (int r = 0; r < 200; r++) {
			uint64_t off = ((uint64_t)r * 104729) % la;
			size_t k = (size_t)KILN_MIN((uint64_t)(r * 331 % 9000 + 1),
						    la - off);

			ok &= kiln_zread(file, got, k, off) == (ssize_t)k &&
			      !memcmp(got, content + off, k);
		}
	}
	CHECK(ok);
	/* a truncated stream is reported, not decoded */
	kiln_zread_release(&f.file);
	kiln_put_le32(f.map + ext_table(16), 1u << 28 | 100);
	CHECK(kiln_zread(&f.file, got, 20000, 0) < 0);
	free(got);
	fake_release(&f);
}

TEST(hostile_index_bytes_never_crash)
{
	uint32_t rng = 4242;
	struct fake f;
	bool ok = true;

	for (int t = 0; t < 300; t++) {
		struct kiln_zmap zm;
		struct kiln_zext e;
		uint8_t layout = t % 2 ? EROFS_INODE_COMPRESSED_FULL :
					 EROFS_INODE_COMPRESSED_COMPACT;

		fake_init(&f, layout, 1 + (uint64_t)(t * 7919) % 400000, 0xF,
			  0x3F);
		f.img.sb.packed_nid = 5;
		for (int i = 0; i < 600; i++) {
			rng = rng * 1103515245u + 12345u;
			f.map[HDR_OFF + i] = (uint8_t)(rng >> 16);
		}
		if (!kiln_zmap_init(&zm, &f.img, &f.file.inode)) {
			for (int i = 0; i < 50; i++) {
				int err = kiln_zmap_lookup(&zm,
					(uint64_t)i * 8111 % f.file.inode.size, &e);

				ok &= err == 0 || err == -KILN_ECORRUPT ||
				      err == -EOPNOTSUPP;
				if (!err)
					ok &= e.la + e.llen > 0;
			}
		}
		fake_release(&f);
	}
	CHECK(ok);
}

TAP_MAIN(TAP_ENTRY(full_index_finds_heads_behind_nonheads),
	 TAP_ENTRY(lookback_past_first_cluster_is_corrupt),
	 TAP_ENTRY(zero_lookback_distance_is_corrupt),
	 TAP_ENTRY(clusterofs_beyond_lcluster_is_corrupt),
	 TAP_ENTRY(cblkcnt_misuse_is_corrupt),
	 TAP_ENTRY(algorithm_outside_the_superblock_set_is_corrupt),
	 TAP_ENTRY(index_outside_the_image_is_corrupt),
	 TAP_ENTRY(inline_tail_crossing_a_block_is_corrupt),
	 TAP_ENTRY(fragment_tail_and_whole_file_fragments),
	 TAP_ENTRY(compact_4b_packs_give_block_addresses),
	 TAP_ENTRY(compact_2b_packs_give_block_addresses),
	 TAP_ENTRY(compact_big_pclusters_use_cblkcnt),
	 TAP_ENTRY(compact_big_pcluster_nonhead_delta_one_is_corrupt),
	 TAP_ENTRY(compact_lookup_past_the_index_is_corrupt),
	 TAP_ENTRY(extents_16_byte_records_with_hint_and_search),
	 TAP_ENTRY(extents_holes_plain_and_bytes_before_the_first_record),
	 TAP_ENTRY(extents_out_of_range_are_corrupt),
	 TAP_ENTRY(extents_4_and_8_byte_records_are_uniform),
	 TAP_ENTRY(zread_decodes_every_codec_from_byte_addressed_extents),
	 TAP_ENTRY(hostile_index_bytes_never_crash))
