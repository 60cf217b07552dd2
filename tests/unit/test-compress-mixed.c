// SPDX-License-Identifier: MIT
/*
 * Tests for the raw/compressed choice in lib/builder/compress/pcluster.c and
 * compress/segment.c: files mixing incompressible and compressible runs get raw
 * pclusters for the first and compressed ones for the second, in any order, in
 * both layouts; a file is handed back to be stored uncompressed only when all
 * of it stays raw (and it is one segment).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <kiln/builder.h>

#include "builder/compress/internal.h"
#include "format/erofs_fs.h"
#include "util/checked.h"
#include "memsrc.h"
#include "tap.h"

#define KIB	1024u
#define MIB	(1024u * 1024)

/* A run of the test data: random bytes or text. */
struct run {
	bool random;
	size_t len;
};

static uint8_t *make_runs(const struct run *runs, size_t nr, size_t *len,
			  uint32_t seed)
{
	static const char *words[] = { "erofs ", "kiln ", "pcluster ",
				       "lcluster\n", "extent ", "segment " };
	uint32_t x = seed * 2654435761u + 1;
	size_t total = 0, at = 0;
	uint8_t *p;

	for (size_t i = 0; i < nr; i++)
		total += runs[i].len;
	p = malloc(total);
	for (size_t i = 0; p && i < nr; i++) {
		size_t end = at + runs[i].len;

		while (at < end) {
			x = x * 1103515245u + 12345u;
			if (runs[i].random) {
				p[at++] = (uint8_t)(x >> 16);
				continue;
			}
			for (const char *w = words[(x >> 16) % 6];
			     *w && at < end; w++)
				p[at++] = (uint8_t)*w;
		}
	}
	*len = total;
	return p;
}

static bool in_random(const struct run *runs, size_t nr, uint64_t off)
{
	for (size_t i = 0; i < nr; i++) {
		if (off < runs[i].len)
			return runs[i].random;
		off -= runs[i].len;
	}
	return false;
}

static int zctx_open(enum kiln_codec_id codec, enum kiln_compress_layout lay,
		     uint32_t pcluster, struct kiln_logger *lg,
		     struct kiln_zctx **zc)
{
	struct kiln_build_opts o;

	memset(&o, 0, sizeof(o));
	memset(lg, 0, sizeof(*lg));
	o.struct_size = sizeof(o);
	o.compress.codec = codec;
	o.compress_layout = lay;
	o.pcluster_size = pcluster;
	return kiln_zctx_new(&o, 12, lg, zc);
}

/* Each extent of @zf (held, not committed) reads back as @src. */
static void check_held(const struct kiln_zfile *zf, const uint8_t *src)
{
	uint8_t *out = malloc(Z_EROFS_EXTENT_MAX_LEN);
	uint64_t pos = 0;

	for (size_t i = 0; i < zf->nr_ext; i++) {
		const struct kiln_zext *e = &zf->ext[i];
		const uint8_t *p = zf->held + e->pstart;
		const struct kiln_codec_ops *ops;
		size_t skip = 0, wsz;
		void *ws;
		int err;

		CHECK_EQ(e->lstart, pos);
		pos += e->llen;
		if (e->flags & KILN_ZEXT_HOLE)
			continue;
		CHECK(e->pstart + e->plen <= zf->held_len);
		if (e->pstart + e->plen > zf->held_len)
			break;
		if (!e->fmt) {
			CHECK(!memcmp(p, src + e->lstart, e->llen));
			continue;
		}
		while (skip < e->plen && !p[skip])
			skip++;
		ops = kiln_codec_by_erofs_alg(e->fmt - 1u);
		wsz = ops->decompress_wsize(e->llen);
		ws = malloc(wsz ? wsz : 1);
		CHECK_EQ(kiln_codec_dws_init(ops, ws, wsz), 0);
		err = ops->decompress(ws, out, e->llen, p + skip,
				      e->plen - skip, false);
		CHECK_EQ(err, 0);
		if (!err)
			CHECK(!memcmp(out, src + e->lstart, e->llen));
		kiln_codec_dws_fini(ops, ws);
		free(ws);
	}
	CHECK_EQ(pos, zf->size);
	free(out);
}

/*
 * Pack @runs as one file; every byte must read back, random bytes go raw
 * and text compressed, short of a pcluster at each change of kind.
 */
static void mixed(enum kiln_codec_id codec, enum kiln_compress_layout lay,
		  uint32_t pcluster, const struct run *runs, size_t nr)
{
	struct kiln_logger lg;
	struct kiln_zctx *zc = NULL;
	struct kiln_zfile *zf = NULL;
	uint64_t text_raw = 0, random_packed = 0, unit, raw = 0;
	size_t len, changes = 0;
	uint8_t *src;
	struct memsrc ms;

	if (!kiln_codec_get(codec))
		return;		/* not built in */
	src = make_runs(runs, nr, &len, (uint32_t)nr);
	ms.data = src;
	ms.size = len;
	CHECK_EQ(zctx_open(codec, lay, pcluster, &lg, &zc), 0);
	CHECK_EQ(kiln_zfile_compress(zc, mem_read, &ms, len, &zf), 0);
	if (!zf)
		goto out;
	check_held(zf, src);
	for (size_t i = 0; i < zf->nr_ext; i++) {
		const struct kiln_zext *e = &zf->ext[i];

		for (uint64_t b = e->lstart; b < e->lstart + e->llen; b += KIB) {
			uint64_t n = KILN_MIN((uint64_t)KIB,
					      e->lstart + e->llen - b);
			bool r = in_random(runs, nr, b);

			if (!e->fmt && !r)
				text_raw += n;
			if (e->fmt && r)
				random_packed += n;
			if (!e->fmt)
				raw += n;
		}
	}
	for (size_t i = 1; i < nr; i++)
		changes += runs[i].random != runs[i - 1].random;
	unit = lay == KILN_COMPRESS_LAYOUT_EXTENTS ? zc->pcluster_size :
		KILN_MAX(zc->pcluster_size, 4096u);
	/* a pcluster across a change holds some of the other kind */
	CHECK(text_raw <= changes * 2 * 4096u + 4096u);
	CHECK(random_packed <= changes * (unit + 4096u));
	CHECK(raw > 0);
	CHECK_EQ(kiln_zfile_datalayout(zf) == EROFS_INODE_FLAT_PLAIN, 0);
out:
	kiln_zfile_free(zf);
	kiln_zctx_free(zc);
	free(src);
}

static const enum kiln_codec_id codecs[] = {
	KILN_CODEC_LZ4, KILN_CODEC_LZ4HC, KILN_CODEC_ZSTD, KILN_CODEC_DEFLATE,
	KILN_CODEC_LZMA,
};

static const struct {
	enum kiln_compress_layout lay;
	uint32_t pcluster;
} layouts[] = {
	{ KILN_COMPRESS_LAYOUT_CLASSIC, 0 },
	{ KILN_COMPRESS_LAYOUT_CLASSIC, 16384 },
	{ KILN_COMPRESS_LAYOUT_EXTENTS, 65536 },
};

static void every_codec_and_layout(const struct run *runs, size_t nr)
{
	for (size_t c = 0; c < KILN_ARRAY_SIZE(codecs); c++)
		for (size_t l = 0; l < KILN_ARRAY_SIZE(layouts); l++)
			mixed(codecs[c], layouts[l].lay, layouts[l].pcluster,
			      runs, nr);
}

/* longer than a segment: more than the first 8 MiB may stay raw */
TEST(a_long_random_head_stays_raw_and_the_text_after_it_compresses)
{
	const struct run runs[] = { { true, 9 * MIB + 5000 }, { false, 256 * KIB } };

	every_codec_and_layout(runs, KILN_ARRAY_SIZE(runs));
}

TEST(text_then_random_compresses_the_text_and_stores_the_rest_raw)
{
	const struct run runs[] = { { false, 256 * KIB + 777 }, { true, MIB } };

	every_codec_and_layout(runs, KILN_ARRAY_SIZE(runs));
}

TEST(alternating_stripes_each_get_their_own_kind_of_pcluster)
{
	struct run runs[8];

	for (size_t i = 0; i < KILN_ARRAY_SIZE(runs); i++) {
		runs[i].random = !(i % 2);
		runs[i].len = 128 * KIB + (i == 3 ? 123 : 0);
	}
	every_codec_and_layout(runs, KILN_ARRAY_SIZE(runs));
}

TEST(an_all_random_file_is_handed_back)
{
	const struct run runs[] = { { true, 3 * MIB } };
	size_t len;
	uint8_t *src = make_runs(runs, 1, &len, 3);
	struct memsrc ms = { src, len };

	for (size_t l = 0; l < KILN_ARRAY_SIZE(layouts); l++) {
		struct kiln_logger lg;
		struct kiln_zctx *zc = NULL;
		struct kiln_zfile *zf = NULL;

		CHECK_EQ(zctx_open(KILN_CODEC_LZ4HC, layouts[l].lay,
				   layouts[l].pcluster, &lg, &zc), 0);
		CHECK_EQ(kiln_zfile_compress(zc, mem_read, &ms, len, &zf), 1);
		kiln_zfile_free(zf);
		kiln_zctx_free(zc);
	}
	free(src);
}

/*
 * The first of several parts keeps its raw pclusters even when all of it
 * is random: the rest of the file may compress, and a stream's first
 * part cannot see the rest. The packed inode's first part is still
 * handed back.
 */
static void first_part_raw(enum kiln_compress_layout lay, uint32_t pcluster,
			   bool rest_random, unsigned int seg, int want)
{
	const struct run runs[] = { { true, 2 * MIB },
				    { rest_random, 2 * MIB } };
	size_t len;
	uint8_t *src = make_runs(runs, 2, &len, 5);
	struct memsrc ms = { src, len };
	struct kiln_logger lg;
	struct kiln_zctx *zc = NULL;
	struct kiln_zfile *zf = NULL;

	CHECK_EQ(zctx_open(KILN_CODEC_ZSTD, lay, pcluster, &lg, &zc), 0);
	CHECK_EQ(kiln_zfile_compress_segment(zc, mem_read, &ms, 0, 2 * MIB,
					     len, seg, NULL, &zf), want);
	if (!want && zf) {
		check_held(zf, src);
		CHECK(zf->nr_ext > 0);
		for (size_t i = 0; i < zf->nr_ext; i++)
			CHECK_EQ(zf->ext[i].fmt, 0);
	}
	kiln_zfile_free(zf);
	kiln_zctx_free(zc);
	free(src);
}

TEST(a_raw_first_part_of_several_keeps_its_raw_pclusters)
{
	for (size_t l = 0; l < KILN_ARRAY_SIZE(layouts); l++) {
		first_part_raw(layouts[l].lay, layouts[l].pcluster, true, 0, 0);
		first_part_raw(layouts[l].lay, layouts[l].pcluster, false, 0, 0);
		first_part_raw(layouts[l].lay, layouts[l].pcluster, true,
			       KILN_ZSEG_STREAM, 0);
		first_part_raw(layouts[l].lay, layouts[l].pcluster, true,
			       KILN_ZSEG_PACKED, 1);
	}
}

TEST(mixed_files_pack_alike_every_time)
{
	const struct run runs[] = { { true, 1500 * KIB }, { false, 300 * KIB },
				    { true, 700 * KIB }, { false, 200 * KIB } };
	size_t len;
	uint8_t *src = make_runs(runs, KILN_ARRAY_SIZE(runs), &len, 9);
	struct memsrc ms = { src, len };

	for (size_t l = 0; l < KILN_ARRAY_SIZE(layouts); l++) {
		struct kiln_zfile *zf[2] = { NULL, NULL };
		struct kiln_zctx *zc[2] = { NULL, NULL };
		struct kiln_logger lg[2];

		for (int k = 0; k < 2; k++) {
			CHECK_EQ(zctx_open(KILN_CODEC_LZ4, layouts[l].lay,
					   layouts[l].pcluster, &lg[k], &zc[k]),
				 0);
			CHECK_EQ(kiln_zfile_compress(zc[k], mem_read, &ms, len,
						     &zf[k]), 0);
		}
		if (zf[0] && zf[1]) {
			CHECK_EQ(zf[0]->held_len, zf[1]->held_len);
			CHECK_EQ(zf[0]->nr_ext, zf[1]->nr_ext);
			if (zf[0]->held_len == zf[1]->held_len)
				CHECK(!memcmp(zf[0]->held, zf[1]->held,
					      zf[0]->held_len));
		}
		for (int k = 0; k < 2; k++) {
			kiln_zfile_free(zf[k]);
			kiln_zctx_free(zc[k]);
		}
	}
	free(src);
}

TAP_MAIN(TAP_ENTRY(a_long_random_head_stays_raw_and_the_text_after_it_compresses),
	 TAP_ENTRY(text_then_random_compresses_the_text_and_stores_the_rest_raw),
	 TAP_ENTRY(alternating_stripes_each_get_their_own_kind_of_pcluster),
	 TAP_ENTRY(an_all_random_file_is_handed_back),
	 TAP_ENTRY(a_raw_first_part_of_several_keeps_its_raw_pclusters),
	 TAP_ENTRY(mixed_files_pack_alike_every_time))
