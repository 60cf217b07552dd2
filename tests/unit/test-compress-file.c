// SPDX-License-Identifier: MIT
/*
 * Tests for lib/builder/compress/file.c, compress/pcluster.c and
 * compress/ctx.c: files are compressed into a real image file through kiln_out,
 * then every extent's pcluster is read back, checked against the rules a kernel
 * enforces (front padding only, stream ends at plen, exact decoded length, raw
 * when not worth it) and decoded with the codec's own decoder.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <kiln/builder.h>

#include "builder/compress/internal.h"
#include "builder/output.h"
#include "format/erofs_fs.h"
#include "util/endian.h"
#include "util/checked.h"
#include "memsrc.h"
#include "tap.h"

/* Deterministic test data: text-like, random and zero runs. */
static uint8_t *make_data(size_t len, unsigned int kind, uint32_t seed)
{
	static const char *words[] = { "erofs ", "kiln ", "pcluster ",
				       "lcluster\n", "extent ", "zero " };
	uint8_t *p = malloc(len ? len : 1);
	uint32_t x = seed * 2654435761u + 1;

	for (size_t i = 0; i < len;) {
		unsigned int k = kind == 3 ? (unsigned int)(i / 50000) % 3 : kind;

		x = x * 1103515245u + 12345u;
		if (k == 0) {
			const char *w = words[(x >> 16) % 6];

			for (; *w && i < len; w++)
				p[i++] = (uint8_t)*w;
		} else if (k == 1) {
			p[i++] = (uint8_t)(x >> 16);
		} else {
			p[i++] = 0;
		}
	}
	return p;
}

struct img {
	char path[64];
	struct kiln_out *out;
	struct kiln_logger lg;
	struct kiln_zctx *zc;
	unsigned int bits;
};

static int img_open(struct img *im, enum kiln_codec_id codec,
		    enum kiln_compress_layout layout, uint32_t pcluster,
		    unsigned int flags, unsigned int bits)
{
	struct kiln_build_opts o;
	int err;

	memset(im, 0, sizeof(*im));
	memset(&o, 0, sizeof(o));
	o.struct_size = sizeof(o);
	o.compress.codec = codec;
	o.compress_layout = layout;
	o.pcluster_size = pcluster;
	o.compress_flags = flags;
	im->bits = bits;
	snprintf(im->path, sizeof(im->path), "/tmp/test-compress-file-%d.img",
		 (int)getpid());
	err = kiln_zctx_new(&o, bits, &im->lg, &im->zc);
	if (err)
		return err;
	/* data from block 1 on: block 0 stays for the superblock */
	return kiln_out_open(&im->out, im->path, bits, 1, &im->lg);
}

/* Commit the image and return its bytes. */
static uint8_t *img_close(struct img *im, size_t *len)
{
	uint64_t size = (uint64_t)kiln_out_next_blk(im->out) << im->bits;
	uint8_t *buf = NULL;
	FILE *f;

	if (kiln_out_commit(im->out, size))
		return NULL;
	f = fopen(im->path, "rb");
	if (f) {
		buf = malloc(size);
		if (buf && fread(buf, 1, size, f) != size) {
			free(buf);
			buf = NULL;
		}
		fclose(f);
	}
	unlink(im->path);
	*len = (size_t)size;
	return buf;
}

/*
 * Check every extent of @zf against the image @img and the source @src:
 * coverage without gaps, pcluster rules, decoded bytes.
 */
static void check_file(const struct img *im, const struct kiln_zfile *zf,
		       const uint8_t *img, size_t img_len, const uint8_t *src)
{
	const uint32_t bs = 1u << im->bits;
	uint8_t *out = malloc(Z_EROFS_EXTENT_MAX_LEN);
	uint64_t pos = 0;

	for (size_t i = 0; i < zf->nr_ext; i++) {
		const struct kiln_zext *e = &zf->ext[i];
		const uint8_t *p;
		size_t skip = 0;

		CHECK_EQ(e->lstart, pos);
		pos += e->llen;
		if (e->flags & KILN_ZEXT_HOLE) {
			for (uint32_t k = 0; k < e->llen; k++)
				CHECK(!src[e->lstart + k]);
			continue;
		}
		if (e->flags & KILN_ZEXT_INLINE) {
			p = zf->idata;
			CHECK_EQ(e->plen, zf->idata_size);
		} else {
			CHECK(e->pstart + e->plen <= img_len);
			if (e->pstart + e->plen > img_len)
				break;
			p = img + e->pstart;
			if (zf->kind != KILN_ZMAP_EXTENTS) {
				CHECK_EQ(e->pstart % bs, 0);
				CHECK_EQ(e->plen % bs, 0);
			}
		}
		if (!e->fmt) {
			CHECK(e->llen <= e->plen);
			CHECK(!memcmp(p, src + e->lstart, e->llen));
			continue;
		}
		/* compressed: fewer than one block of zeros in front */
		while (skip < e->plen && !p[skip])
			skip++;
		CHECK(skip < bs);
		CHECK(skip < e->plen);
		/* DEFLATE: never only 1 or 2 stream bytes on the last page */
		if (e->fmt == Z_EROFS_COMPRESSION_DEFLATE + 1) {
			uint64_t tail = (e->pstart + e->plen) % bs;

			CHECK(tail == 0 || tail >= 3);
		}
		/* not the last extent: must be smaller than what it decodes to */
		if (i + 1 < zf->nr_ext)
			CHECK(e->plen < e->llen);
		{
			const struct kiln_codec_ops *ops =
				kiln_codec_by_erofs_alg(e->fmt - 1u);
			size_t wsz = ops->decompress_wsize(e->llen);
			void *ws = malloc(wsz ? wsz : 1);
			int err = kiln_codec_dws_init(ops, ws, wsz);

			CHECK_EQ(err, 0);
			err = ops->decompress(ws, out, e->llen, p + skip,
					      e->plen - skip, false);
			CHECK_EQ(err, 0);
			if (!err)
				CHECK(!memcmp(out, src + e->lstart, e->llen));
			kiln_codec_dws_fini(ops, ws);
			free(ws);
		}
	}
	CHECK_EQ(pos, zf->size);
	free(out);
}

/* Field by field: struct padding is not part of the result. */
static bool same_extents(const struct kiln_zfile *a, const struct kiln_zfile *b)
{
	if (a->nr_ext != b->nr_ext)
		return false;
	for (size_t i = 0; i < a->nr_ext; i++) {
		const struct kiln_zext *x = &a->ext[i], *y = &b->ext[i];

		if (x->lstart != y->lstart || x->pstart != y->pstart ||
		    x->llen != y->llen || x->plen != y->plen ||
		    x->fmt != y->fmt || x->flags != y->flags)
			return false;
	}
	return true;
}

/* Compress @len bytes of @kind with the given settings; check it all. */
static void roundtrip(enum kiln_codec_id codec, enum kiln_compress_layout lay,
		      uint32_t pcluster, unsigned int flags, unsigned int bits,
		      size_t len, unsigned int kind, int want)
{
	struct img im;
	struct kiln_zfile *zf = NULL;
	uint8_t *src = make_data(len, kind, (uint32_t)len);
	struct memsrc ms = { src, len };
	uint8_t *img;
	size_t img_len;
	int err;

	if (!kiln_codec_get(codec)) {
		free(src);
		return;		/* not built in */
	}
	err = img_open(&im, codec, lay, pcluster, flags, bits);
	CHECK_EQ(err, 0);
	if (err) {
		free(src);
		return;
	}
	err = kiln_zfile_write(im.zc, im.out, mem_read, &ms, len, &zf);
	CHECK_EQ(err, want);
	img = img_close(&im, &img_len);
	CHECK(img != NULL);
	if (!err && img) {
		size_t mlen;

		check_file(&im, zf, img, img_len, src);
		/* the map can be encoded at some position */
		CHECK_EQ(kiln_zfile_map_size(zf, 1024 + 128 + 64, &mlen) == 0 ||
			 kiln_zfile_has_inline(zf), 1);
	}
	if (err == 1)	/* handed back: no image space spent */
		CHECK_EQ(img_len, (size_t)1 << bits);
	kiln_zfile_free(zf);
	kiln_zctx_free(im.zc);
	free(img);
	free(src);
}

static const enum kiln_codec_id all_codecs[] = {
	KILN_CODEC_LZ4, KILN_CODEC_LZ4HC, KILN_CODEC_LZMA,
	KILN_CODEC_DEFLATE, KILN_CODEC_ZSTD,
};

TEST(classic_one_block_pclusters_roundtrip_every_codec)
{
	for (size_t c = 0; c < 5; c++) {
		roundtrip(all_codecs[c], KILN_COMPRESS_LAYOUT_CLASSIC, 0, 0,
			  12, 300000, 0, 0);
		roundtrip(all_codecs[c], KILN_COMPRESS_LAYOUT_CLASSIC, 0, 0,
			  12, 400001, 3, 0);
	}
}

TEST(classic_big_pclusters_roundtrip_every_codec)
{
	for (size_t c = 0; c < 5; c++) {
		roundtrip(all_codecs[c], KILN_COMPRESS_LAYOUT_CLASSIC, 65536,
			  0, 12, 1000003, 3, 0);
		roundtrip(all_codecs[c], KILN_COMPRESS_LAYOUT_CLASSIC, 16384,
			  0, 9, 200000, 0, 0);
	}
}

TEST(ztailpacking_inlines_a_small_last_pcluster)
{
	for (size_t c = 0; c < 5; c++) {
		roundtrip(all_codecs[c], KILN_COMPRESS_LAYOUT_CLASSIC, 0,
			  KILN_COMPRESS_ZTAILPACKING, 12, 100000 + 777, 0, 0);
		roundtrip(all_codecs[c], KILN_COMPRESS_LAYOUT_CLASSIC, 16384,
			  KILN_COMPRESS_ZTAILPACKING, 12, 150000 + 1, 3, 0);
	}
}

TEST(extents_roundtrip_every_codec_and_size)
{
	const uint32_t sizes[] = { 4096, 65536, 131072 };

	for (size_t c = 0; c < 5; c++)
		for (size_t s = 0; s < 3; s++)
			roundtrip(all_codecs[c], KILN_COMPRESS_LAYOUT_EXTENTS,
				  sizes[s], 0, 12, 700001, 3, 0);
}

TEST(incompressible_file_is_handed_back_without_writing)
{
	roundtrip(KILN_CODEC_LZ4HC, KILN_COMPRESS_LAYOUT_CLASSIC, 0, 0, 12,
		  500000, 1, 1);
	roundtrip(KILN_CODEC_ZSTD, KILN_COMPRESS_LAYOUT_EXTENTS, 65536, 0, 12,
		  500000, 1, 1);
}

TEST(small_incompressible_file_is_handed_back)
{
	roundtrip(KILN_CODEC_LZ4, KILN_COMPRESS_LAYOUT_CLASSIC, 0, 0, 12,
		  3000, 1, 1);
	roundtrip(KILN_CODEC_LZ4, KILN_COMPRESS_LAYOUT_CLASSIC, 0, 0, 12,
		  1, 0, 1);
}

TEST(same_input_gives_same_extents)
{
	struct kiln_zfile *zf[2] = { NULL, NULL };
	uint8_t *src = make_data(300000, 3, 7);
	struct memsrc ms = { src, 300000 };

	for (int k = 0; k < 2; k++) {
		struct img im;
		size_t len;

		CHECK_EQ(img_open(&im, KILN_CODEC_ZSTD,
				  KILN_COMPRESS_LAYOUT_CLASSIC, 16384, 0, 12), 0);
		CHECK_EQ(kiln_zfile_write(im.zc, im.out, mem_read, &ms,
					  ms.size, &zf[k]), 0);
		free(img_close(&im, &len));
		kiln_zctx_free(im.zc);
	}
	if (zf[0] && zf[1]) {
		CHECK(same_extents(zf[0], zf[1]));
	}
	kiln_zfile_free(zf[0]);
	kiln_zfile_free(zf[1]);
	free(src);
}

TEST(compress_then_commit_matches_direct_write)
{
	uint8_t *src = make_data(900000, 3, 11);
	struct memsrc ms = { src, 900000 };
	struct kiln_zfile *zf[2] = { NULL, NULL };
	uint8_t *img[2] = { NULL, NULL };
	size_t len[2] = { 0, 0 };

	for (int k = 0; k < 2; k++) {
		struct img im;

		CHECK_EQ(img_open(&im, KILN_CODEC_LZ4HC,
				  KILN_COMPRESS_LAYOUT_CLASSIC, 16384, 0, 12), 0);
		if (k == 0) {
			CHECK_EQ(kiln_zfile_write(im.zc, im.out, mem_read, &ms,
						  ms.size, &zf[k]), 0);
		} else {
			CHECK_EQ(kiln_zfile_compress(im.zc, mem_read, &ms,
						     ms.size, &zf[k]), 0);
			CHECK(kiln_zfile_held_bytes(zf[k]) > 0);
			CHECK_EQ(kiln_out_next_blk(im.out), 1);
			CHECK_EQ(kiln_zfile_commit(zf[k], im.out), 0);
			CHECK_EQ(kiln_zfile_held_bytes(zf[k]), 0);
		}
		img[k] = img_close(&im, &len[k]);
		kiln_zctx_free(im.zc);
	}
	CHECK_EQ(len[0], len[1]);
	if (img[0] && img[1] && len[0] == len[1])
		CHECK(!memcmp(img[0], img[1], len[0]));
	if (zf[0] && zf[1]) {
		CHECK(same_extents(zf[0], zf[1]));
		CHECK_EQ(kiln_zfile_blocks(zf[0]), kiln_zfile_blocks(zf[1]));
	}
	for (int k = 0; k < 2; k++) {
		kiln_zfile_free(zf[k]);
		free(img[k]);
	}
	free(src);
}

TEST(dedupe_shares_identical_pclusters_across_files)
{
	uint8_t *src = make_data(400000, 0, 5);
	struct memsrc ms = { src, 400000 }, half = { src, 250000 };
	struct kiln_zfile *zf[3] = { NULL, NULL, NULL };
	struct img im;
	uint8_t *img;
	size_t len;
	kiln_blk_t before;

	CHECK_EQ(img_open(&im, KILN_CODEC_LZ4HC, KILN_COMPRESS_LAYOUT_CLASSIC,
			  0, KILN_COMPRESS_DEDUPE, 12), 0);
	CHECK_EQ(kiln_zfile_write(im.zc, im.out, mem_read, &ms, ms.size,
				  &zf[0]), 0);
	before = kiln_out_next_blk(im.out);
	/* the same bytes again: nothing new in the image, same addresses */
	CHECK_EQ(kiln_zfile_write(im.zc, im.out, mem_read, &ms, ms.size,
				  &zf[1]), 0);
	CHECK_EQ(kiln_out_next_blk(im.out), before);
	/* a prefix: shares all but its last pcluster */
	CHECK_EQ(kiln_zfile_write(im.zc, im.out, mem_read, &half, half.size,
				  &zf[2]), 0);
	CHECK(kiln_out_next_blk(im.out) > before);
	img = img_close(&im, &len);
	if (zf[0] && zf[1] && zf[2] && img) {
		CHECK_EQ(zf[0]->nr_ext, zf[1]->nr_ext);
		for (size_t i = 0; i < zf[1]->nr_ext; i++) {
			CHECK_EQ(zf[1]->ext[i].pstart, zf[0]->ext[i].pstart);
			CHECK(zf[1]->ext[i].flags & KILN_ZEXT_SHARED);
		}
		/* a run of an earlier file's pclusters still packs compactly */
		CHECK_EQ(kiln_zfile_datalayout(zf[1]),
			 EROFS_INODE_COMPRESSED_COMPACT);
		CHECK_EQ(kiln_zfile_datalayout(zf[2]),
			 EROFS_INODE_COMPRESSED_FULL);
		CHECK(zf[2]->ext[0].flags & KILN_ZEXT_SHARED);
		CHECK(!(zf[2]->ext[zf[2]->nr_ext - 1].flags & KILN_ZEXT_SHARED));
		for (int k = 0; k < 3; k++) {
			im.bits = 12;
			check_file(&im, zf[k], img, len, src);
		}
	}
	for (int k = 0; k < 3; k++)
		kiln_zfile_free(zf[k]);
	kiln_zctx_free(im.zc);
	free(img);
	free(src);
}

/*
 * Extents layout: a file made of an earlier file's extents and new ones
 * points at the earlier pclusters (at any byte) and repacks the new ones
 * back to back; equal extents inside one file share too. Every pcluster
 * still follows the kernel's rules (check_file) and DEFLATE's first
 * stream byte stays in the pcluster's first block.
 */
TEST(extents_dedupe_shares_at_any_byte_and_repacks_the_rest)
{
	static const enum kiln_codec_id codecs[] = {
		KILN_CODEC_DEFLATE, KILN_CODEC_ZSTD, KILN_CODEC_LZ4,
		KILN_CODEC_LZMA,
	};
	const size_t L = 16384;

	for (size_t c = 0; c < sizeof(codecs) / sizeof(codecs[0]); c++) {
		uint8_t *a = make_data(20 * L + 123, 0, 21);
		uint8_t *fresh = make_data(20 * L, 0, 22);
		uint8_t *b = malloc(20 * L);
		uint8_t *rep = malloc(6 * L);
		struct memsrc ma = { a, 20 * L + 123 }, mb = { b, 20 * L },
			      mr = { rep, 6 * L };
		struct kiln_zfile *zf[3] = { NULL, NULL, NULL };
		struct img im;
		uint8_t *img;
		size_t len;

		/* b: a's odd extents, fresh even ones */
		for (size_t k = 0; k < 20; k++)
			memcpy(b + k * L, (k & 1 ? a : fresh) + k * L, L);
		for (size_t k = 0; k < 6; k++)
			memcpy(rep + k * L, fresh + 3 * L, L);
		if (kiln_codec_get(codecs[c]) == NULL)
			goto next;
		CHECK_EQ(img_open(&im, codecs[c], KILN_COMPRESS_LAYOUT_EXTENTS,
				  (uint32_t)L, KILN_COMPRESS_DEDUPE, 12), 0);
		CHECK_EQ(kiln_zfile_write(im.zc, im.out, mem_read, &ma, ma.size,
					  &zf[0]), 0);
		CHECK_EQ(kiln_zfile_write(im.zc, im.out, mem_read, &mb, mb.size,
					  &zf[1]), 0);
		CHECK_EQ(kiln_zfile_write(im.zc, im.out, mem_read, &mr, mr.size,
					  &zf[2]), 0);
		img = img_close(&im, &len);
		if (zf[0] && zf[1] && zf[2] && img) {
			const uint8_t *src[3] = { a, b, rep };

			for (size_t k = 0; k < 20; k++) {
				const struct kiln_zext *e = &zf[1]->ext[k];

				CHECK_EQ(!!(e->flags & KILN_ZEXT_SHARED), k & 1);
				if (k & 1)
					CHECK_EQ(e->pstart, zf[0]->ext[k].pstart);
			}
			/* equal extents of one file: one pcluster */
			for (size_t k = 1; k < 6; k++)
				CHECK_EQ(zf[2]->ext[k].pstart,
					 zf[2]->ext[0].pstart);
			CHECK(zf[1]->recsz >= 8);
			for (int f = 0; f < 3; f++) {
				for (size_t k = 0; k < zf[f]->nr_ext; k++) {
					const struct kiln_zext *e = &zf[f]->ext[k];
					size_t skip = 0;

					if (!e->fmt || e->flags & KILN_ZEXT_HOLE)
						continue;
					while (skip < e->plen && !img[e->pstart + skip])
						skip++;
					CHECK(e->pstart % 4096 + skip < 4096);
				}
				im.bits = 12;
				check_file(&im, zf[f], img, len, src[f]);
			}
		}
		free(img);
		for (int k = 0; k < 3; k++)
			kiln_zfile_free(zf[k]);
		kiln_zctx_free(im.zc);
next:
		free(a);
		free(fresh);
		free(b);
		free(rep);
	}
}

TEST(features_and_config_records_follow_what_was_written)
{
	struct img im;
	struct kiln_zfile *zf = NULL;
	uint8_t *src = make_data(200000, 0, 3);
	struct memsrc ms = { src, 200000 };
	uint8_t cfg[64];
	uint32_t incompat;
	uint16_t u1;
	ssize_t n;
	size_t len;

	if (!kiln_codec_get(KILN_CODEC_ZSTD)) {
		free(src);
		return;
	}
	CHECK_EQ(img_open(&im, KILN_CODEC_ZSTD, KILN_COMPRESS_LAYOUT_CLASSIC,
			  65536, 0, 12), 0);
	kiln_zctx_features(im.zc, &incompat, &u1);
	CHECK_EQ(incompat, 0);		/* nothing written yet */
	CHECK_EQ(kiln_zctx_cfgs_encode(im.zc, 1152, NULL, 0), 0);
	CHECK_EQ(kiln_zfile_write(im.zc, im.out, mem_read, &ms, ms.size, &zf), 0);
	kiln_zctx_features(im.zc, &incompat, &u1);
	CHECK(incompat & EROFS_FEATURE_INCOMPAT_ZERO_PADDING);
	CHECK(incompat & EROFS_FEATURE_INCOMPAT_COMPR_CFGS);
	CHECK(!(incompat & EROFS_FEATURE_INCOMPAT_48BIT));
	CHECK_EQ(u1, 1u << Z_EROFS_COMPRESSION_ZSTD);
	n = kiln_zctx_cfgs_encode(im.zc, 1154, cfg, sizeof(cfg));
	/* 2 bytes to reach a multiple of 4, le16 length 6, 6 payload bytes */
	CHECK_EQ(n, 2 + 2 + 6);
	CHECK_EQ(kiln_get_le16(cfg + 2), 6);
	CHECK_EQ(cfg[4], 0);		/* zstd format 0 */
	CHECK(cfg[5] <= 10);		/* windowlog */
	CHECK_EQ(kiln_zctx_cfgs_encode(im.zc, 1154, cfg, 5), -ENOSPC);
	free(img_close(&im, &len));
	kiln_zfile_free(zf);
	kiln_zctx_free(im.zc);
	free(src);
}

TEST(bad_sizes_are_refused)
{
	struct kiln_build_opts o;
	struct kiln_logger lg = { 0 };
	struct kiln_zctx *zc = NULL;

	memset(&o, 0, sizeof(o));
	o.struct_size = sizeof(o);
	o.compress.codec = KILN_CODEC_LZ4;
	o.pcluster_size = 5000;
	CHECK_EQ(kiln_zctx_new(&o, 12, &lg, &zc), -EINVAL);
	o.pcluster_size = 2 * 1024 * 1024;
	CHECK_EQ(kiln_zctx_new(&o, 12, &lg, &zc), -EINVAL);
	o.compress_layout = KILN_COMPRESS_LAYOUT_EXTENTS;
	o.pcluster_size = 3 * 4096;
	CHECK_EQ(kiln_zctx_new(&o, 12, &lg, &zc), -EINVAL);
	o.compress.codec = KILN_CODEC_NONE;
	CHECK_EQ(kiln_zctx_new(&o, 12, &lg, &zc), 0);
	CHECK(zc == NULL);
}

/*
 * The extent list starts inside the zfile and moves to arrays of 4, 8,
 * 16 ... records as it grows; every record survives each move.
 */
TEST(extent_list_grows_from_its_inline_record)
{
	struct kiln_zfile *zf = calloc(1, sizeof(*zf));

	CHECK(zf != NULL);
	for (uint32_t n = 0; n < 300; n++) {
		struct kiln_zext e = { .lstart = (uint64_t)n * 4096,
				       .pstart = 1000000 + n, .llen = 4096,
				       .plen = n, .fmt = (uint8_t)(n & 3),
				       .flags = (uint8_t)(n & 1) };

		CHECK_EQ(kiln_zfile_add(zf, &e), 0);
		CHECK_EQ(zf->nr_ext, n + 1);
		/* one extent: no allocation of its own */
		if (!n)
			CHECK(zf->ext == &zf->ext1);
	}
	CHECK(zf->ext != &zf->ext1);
	for (uint32_t n = 0; n < 300; n++) {
		CHECK_EQ(zf->ext[n].lstart, (uint64_t)n * 4096);
		CHECK_EQ(zf->ext[n].pstart, 1000000 + n);
		CHECK_EQ(zf->ext[n].plen, n);
		CHECK_EQ(zf->ext[n].fmt, n & 3);
		CHECK_EQ(zf->ext[n].flags, n & 1);
	}
	kiln_zfile_release_ext(zf);
	CHECK_EQ(zf->nr_ext, 0);
	CHECK(zf->ext == NULL);
	kiln_zfile_free(zf);
}

/* Map bytes of @zf as kind @kind (extents: with the record size it gets). */
static size_t map_bytes_as(struct kiln_zfile *zf, unsigned int kind)
{
	unsigned int was = zf->kind, recsz = zf->recsz;
	size_t len = 0;

	zf->kind = kind;
	if (kind == KILN_ZMAP_EXTENTS && !zf->recsz)
		zf->recsz = 16;
	CHECK_EQ(kiln_zindex_size(zf, 4096 + 64, &len), 0);
	zf->kind = was;
	zf->recsz = (uint8_t)recsz;
	return len;
}

/*
 * In an image for 6.15+ (--metabox), a classic file is mapped by extent
 * records where they are smaller than its lcluster index, never where
 * they are not; older images keep lcluster indexes.
 */
static void map_choice(unsigned int flags, uint32_t pcluster, size_t len,
		       unsigned int kind, unsigned int want)
{
	uint8_t *src = make_data(len, kind, 7);
	struct memsrc ms = { src, len };
	struct kiln_zfile *zf = NULL;
	struct img im;
	uint8_t *img;
	size_t img_len;

	CHECK_EQ(img_open(&im, KILN_CODEC_LZ4HC, KILN_COMPRESS_LAYOUT_CLASSIC,
			  pcluster, flags, 12), 0);
	CHECK_EQ(kiln_zfile_write(im.zc, im.out, mem_read, &ms, len, &zf), 0);
	img = img_close(&im, &img_len);
	CHECK(img != NULL);
	if (zf && img) {
		CHECK_EQ(zf->kind, want);
		check_file(&im, zf, img, img_len, src);
		if (flags & KILN_COMPRESS_METABOX)
			CHECK(map_bytes_as(zf, zf->kind) <=
			      map_bytes_as(zf, want == KILN_ZMAP_EXTENTS ?
					   KILN_ZMAP_COMPACT :
					   KILN_ZMAP_EXTENTS));
	}
	kiln_zfile_free(zf);
	kiln_zctx_free(im.zc);
	free(img);
	free(src);
}

TEST(classic_maps_take_extent_records_where_smaller_in_48bit_images)
{
	/* 128 KiB pclusters of text: hundreds of lclusters each */
	map_choice(KILN_COMPRESS_METABOX, 131072, 3u << 20, 0,
		   KILN_ZMAP_EXTENTS);
	map_choice(0, 131072, 3u << 20, 0, KILN_ZMAP_COMPACT);
	/* one-block pclusters, raw ones among them: 2 bytes an lcluster win */
	map_choice(KILN_COMPRESS_METABOX, 4096, 600000, 3, KILN_ZMAP_COMPACT);
}

/*
 * Parts committed byte-packed (the packed inode of a 48-bit image) follow
 * each other at any byte, stripped of their blocks' zero padding, across
 * parts; the joined file is mapped by extent records and decodes back.
 */
static void byte_packed_parts(enum kiln_codec_id codec)
{
	const size_t len = 700000, part = 250000;
	uint8_t *src = make_data(len, 3, 23);
	struct memsrc ms = { src, len };
	struct kiln_bytepack bp = { 0 };
	struct kiln_zfile *whole = NULL;
	uint64_t end = 0, stored = 0;
	bool unaligned = false;
	struct img im;
	uint8_t *img;
	size_t img_len;

	if (!kiln_codec_get(codec)) {
		free(src);
		return;
	}
	CHECK_EQ(img_open(&im, codec, KILN_COMPRESS_LAYOUT_CLASSIC, 16384,
			  KILN_COMPRESS_METABOX, 12), 0);
	for (size_t off = 0; off < len; off += part) {
		struct kiln_zfile *zf = NULL;
		size_t n = off + part < len ? part : len - off;

		CHECK_EQ(kiln_zfile_compress_part(im.zc, mem_read, &ms, off, n,
						  len, NULL, &zf), 0);
		if (!zf)
			break;
		CHECK_EQ(kiln_zfile_commit_bytes(zf, im.out, &bp), 0);
		CHECK_EQ(kiln_zfile_held_bytes(zf), 0);
		for (size_t i = 0; i < zf->nr_ext; i++) {
			const struct kiln_zext *e = &zf->ext[i];

			if (e->flags & KILN_ZEXT_HOLE)
				continue;
			/* back to back, DEFLATE's few bytes of shift apart */
			if (end)
				CHECK(e->pstart >= end && e->pstart <= end + 4);
			if (e->pstart % 4096 || e->plen % 4096)
				unaligned = true;
			end = e->pstart + e->plen;
			stored += e->plen;
		}
		CHECK_EQ(kiln_zfile_join(&whole, zf), 0);
	}
	CHECK_EQ(kiln_bytepack_finish(&bp, im.out), 0);
	CHECK(unaligned);
	CHECK(bp.total >= stored && bp.total <= stored + 4 * 64);
	img = img_close(&im, &img_len);
	CHECK(img != NULL);
	if (whole && img) {
		kiln_zfile_seal(whole);
		CHECK_EQ(whole->kind, KILN_ZMAP_EXTENTS);
		CHECK_EQ(whole->size, len);
		/* one partly filled block at the end, not one a part */
		CHECK_EQ(img_len, 4096 + (end - 4096 + 4095) / 4096 * 4096);
		check_file(&im, whole, img, img_len, src);
	}
	kiln_zfile_free(whole);
	kiln_zctx_free(im.zc);
	free(img);
	free(src);
}

TEST(byte_packed_parts_follow_each_other_at_any_byte)
{
	byte_packed_parts(KILN_CODEC_LZ4HC);
	byte_packed_parts(KILN_CODEC_DEFLATE);
	byte_packed_parts(KILN_CODEC_ZSTD);
	byte_packed_parts(KILN_CODEC_LZMA);
}

/*
 * Shifted dedupe's cuts in the classic layout: a pcluster ends at each
 * cut; with lcluster indexes only where the next extent starts in an
 * lcluster of its own, in a 48-bit image (extent records) everywhere.
 */
static void classic_cuts(unsigned int flags, unsigned int kind)
{
	static const uint64_t at[] = { 70001, 70001 + 65536 + 77, 250003,
				       250003 + 100, 400000 };
	const struct kiln_zcuts cuts = { at, KILN_ARRAY_SIZE(at) };
	const size_t len = 500000;
	uint8_t *src = make_data(len, kind, 31);
	struct memsrc ms = { src, len };
	struct kiln_zfile *zf = NULL;
	struct img im;
	uint8_t *img;
	size_t img_len, honored = 0;

	CHECK_EQ(img_open(&im, KILN_CODEC_LZ4HC, KILN_COMPRESS_LAYOUT_CLASSIC,
			  16384, flags | KILN_COMPRESS_DEDUPE, 12), 0);
	CHECK_EQ(kiln_zfile_compress_cut(im.zc, mem_read, &ms, len, &cuts,
					 &zf), 0);
	if (zf)
		CHECK_EQ(kiln_zfile_commit(zf, im.out), 0);
	img = img_close(&im, &img_len);
	CHECK(img != NULL);
	for (size_t c = 0; zf && c < cuts.nr; c++) {
		bool start = false, near = false;

		for (size_t i = 0; i < zf->nr_ext; i++) {
			start |= zf->ext[i].lstart == at[c];
			near |= zf->ext[i].lstart < at[c] &&
				zf->ext[i].lstart >> 12 == at[c] >> 12;
		}
		honored += start;
		/* passed over only for a head in the cut's own lcluster */
		CHECK(start || (!(flags & KILN_COMPRESS_METABOX) && near));
	}
	CHECK(honored >= 3);
	if (zf && img) {
		check_file(&im, zf, img, img_len, src);
		if (!(flags & KILN_COMPRESS_METABOX))
			CHECK(zf->kind != KILN_ZMAP_EXTENTS);
	}
	kiln_zfile_free(zf);
	kiln_zctx_free(im.zc);
	free(img);
	free(src);
}

TEST(classic_pclusters_end_at_shifted_dedupe_cuts)
{
	classic_cuts(0, 0);
	classic_cuts(0, 3);
	classic_cuts(KILN_COMPRESS_METABOX, 0);
	classic_cuts(KILN_COMPRESS_METABOX, 3);
}

TAP_MAIN(TAP_ENTRY(classic_one_block_pclusters_roundtrip_every_codec),
	 TAP_ENTRY(classic_big_pclusters_roundtrip_every_codec),
	 TAP_ENTRY(ztailpacking_inlines_a_small_last_pcluster),
	 TAP_ENTRY(extents_roundtrip_every_codec_and_size),
	 TAP_ENTRY(incompressible_file_is_handed_back_without_writing),
	 TAP_ENTRY(small_incompressible_file_is_handed_back),
	 TAP_ENTRY(same_input_gives_same_extents),
	 TAP_ENTRY(compress_then_commit_matches_direct_write),
	 TAP_ENTRY(dedupe_shares_identical_pclusters_across_files),
	 TAP_ENTRY(extents_dedupe_shares_at_any_byte_and_repacks_the_rest),
	 TAP_ENTRY(features_and_config_records_follow_what_was_written),
	 TAP_ENTRY(bad_sizes_are_refused),
	 TAP_ENTRY(extent_list_grows_from_its_inline_record),
	 TAP_ENTRY(classic_maps_take_extent_records_where_smaller_in_48bit_images),
	 TAP_ENTRY(byte_packed_parts_follow_each_other_at_any_byte),
	 TAP_ENTRY(classic_pclusters_end_at_shifted_dedupe_cuts))
