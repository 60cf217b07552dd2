// SPDX-License-Identifier: MIT
/*
 * Tests for lib/builder/compress/frag.c (the fragment buffer: append, dedupe,
 * spill to a temporary file, release and recover) and for how compressed files hand their
 * tails to it (compress/pcluster.c fragments, kiln_zfile_commit()).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <kiln/builder.h>

#include "builder/compress/frag.h"
#include "builder/compress/internal.h"
#include "builder/output.h"
#include "memsrc.h"
#include "tap.h"

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		p[i] = (uint8_t)(seed >> 16);
	}
}

TEST(fragments_are_appended_in_order)
{
	struct kiln_frag *fr;
	uint8_t a[100], b[300], got[400];
	uint64_t off = 99;

	fill(a, sizeof(a), 1);
	fill(b, sizeof(b), 2);
	CHECK_EQ(kiln_frag_new(0, NULL, &fr), 0);
	CHECK_EQ(kiln_frag_add(fr, a, sizeof(a), &off), 0);
	CHECK_EQ(off, 0);
	CHECK_EQ(kiln_frag_add(fr, b, sizeof(b), &off), 0);
	CHECK_EQ(off, 100);
	CHECK_EQ(kiln_frag_size(fr), 400);
	CHECK_EQ(kiln_frag_read(fr, got, sizeof(got), 0), 0);
	CHECK(!memcmp(got, a, sizeof(a)));
	CHECK(!memcmp(got + 100, b, sizeof(b)));
	CHECK_EQ(kiln_frag_read(fr, got, 2, 399), -EINVAL);
	CHECK_EQ(kiln_frag_add(fr, a, 0, &off), -EINVAL);
	kiln_frag_free(fr);
}

TEST(identical_fragments_are_stored_once)
{
	struct kiln_frag *fr;
	uint8_t a[5000], b[5000];
	uint64_t o1, o2, o3, o4;

	fill(a, sizeof(a), 3);
	memcpy(b, a, sizeof(b));
	CHECK_EQ(kiln_frag_new(0, NULL, &fr), 0);
	CHECK_EQ(kiln_frag_add(fr, a, sizeof(a), &o1), 0);
	CHECK_EQ(kiln_frag_add(fr, b, sizeof(b), &o2), 0);
	CHECK_EQ(o1, o2);
	CHECK_EQ(kiln_frag_size(fr), 5000);
	CHECK_EQ(kiln_frag_saved(fr), 5000);
	/* same length, one byte differs: stored */
	b[4999] ^= 1;
	CHECK_EQ(kiln_frag_add(fr, b, sizeof(b), &o3), 0);
	CHECK_EQ(o3, 5000);
	/* a prefix is a different fragment (its own hash) */
	CHECK_EQ(kiln_frag_add(fr, a, 10, &o4), 0);
	CHECK_EQ(o4, 10000);
	CHECK_EQ(kiln_frag_size(fr), 10010);
	kiln_frag_free(fr);
}

TEST(many_fragments_grow_the_table_and_still_dedupe)
{
	struct kiln_frag *fr;
	uint8_t buf[64];
	uint64_t off, first[2000];

	CHECK_EQ(kiln_frag_new(0, NULL, &fr), 0);
	for (uint32_t i = 0; i < 2000; i++) {
		fill(buf, sizeof(buf), i);
		CHECK_EQ(kiln_frag_add(fr, buf, sizeof(buf), &first[i]), 0);
	}
	for (uint32_t i = 0; i < 2000; i += 7) {
		fill(buf, sizeof(buf), i);
		CHECK_EQ(kiln_frag_add(fr, buf, sizeof(buf), &off), 0);
		CHECK_EQ(off, first[i]);
	}
	CHECK_EQ(kiln_frag_size(fr), 2000 * 64);
	kiln_frag_free(fr);
}

TEST(a_buffer_past_its_memory_limit_spills_and_reads_back)
{
	struct kiln_frag *fr;
	uint8_t *data = malloc(50000), *got = malloc(50000);
	uint64_t off, again;

	CHECK(data && got);
	fill(data, 50000, 9);
	CHECK_EQ(kiln_frag_new(4096, NULL, &fr), 0);
	CHECK_EQ(kiln_frag_add(fr, data, 3000, &off), 0);
	CHECK(!kiln_frag_spilled(fr));
	CHECK_EQ(kiln_frag_add(fr, data + 3000, 47000, &off), 0);
	CHECK_EQ(off, 3000);
	CHECK(kiln_frag_spilled(fr));
	CHECK_EQ(kiln_frag_read(fr, got, 50000, 0), 0);
	CHECK(!memcmp(got, data, 50000));
	/* dedupe compares against the file now */
	CHECK_EQ(kiln_frag_add(fr, data + 3000, 47000, &again), 0);
	CHECK_EQ(again, 3000);
	CHECK_EQ(kiln_frag_add(fr, data, 3000, &again), 0);
	CHECK_EQ(again, 0);
	CHECK_EQ(kiln_frag_size(fr), 50000);
	kiln_frag_free(fr);
	free(data);
	free(got);
}

/* The writer appends past the memory limit while a reader re-reads. */
struct reader_arg {
	struct kiln_frag *fr;
	const uint8_t *data;
	_Atomic uint64_t published;	/* bytes the writer has added */
	atomic_bool done;
	atomic_ulong reads;
	unsigned long bad;
};

static void *reader_main(void *p)
{
	struct reader_arg *r = p;
	uint8_t got[3000];
	uint32_t seed = 77;

	while (!atomic_load(&r->done)) {
		uint64_t have = atomic_load(&r->published), off;
		size_t len;

		if (have < sizeof(got))
			continue;
		seed = seed * 1103515245u + 12345u;
		off = (seed >> 8) % (have - sizeof(got) + 1);
		len = 1 + (seed >> 4) % sizeof(got);
		if (kiln_frag_read(r->fr, got, len, off) ||
		    memcmp(got, r->data + off, len))
			r->bad++;
		atomic_fetch_add(&r->reads, 1);
	}
	return NULL;
}

TEST(stored_bytes_read_back_while_the_writer_appends_and_spills)
{
	const size_t total = 400000, piece = 1000;
	struct reader_arg r = { 0 };
	uint8_t *data = malloc(total);
	pthread_t th;
	uint64_t off;

	CHECK(data != NULL);
	if (!data)
		return;
	fill(data, total, 21);
	CHECK_EQ(kiln_frag_new(100000, NULL, &r.fr), 0);
	r.data = data;
	CHECK_EQ(pthread_create(&th, NULL, reader_main, &r), 0);
	for (size_t at = 0; at < total; at += piece) {
		CHECK_EQ(kiln_frag_add(r.fr, data + at, piece, &off), 0);
		CHECK_EQ(off, at);
		atomic_store(&r.published, at + piece);
		/* let the reader keep up: reads interleave with appends */
		while (at + piece >= 3000 &&
		       atomic_load(&r.reads) < (at + piece) / piece / 2 - 1)
			sched_yield();
	}
	atomic_store(&r.done, true);
	pthread_join(th, NULL);
	CHECK(kiln_frag_spilled(r.fr));
	CHECK_EQ(r.bad, 0);
	CHECK(atomic_load(&r.reads) > 0);
	kiln_frag_free(r.fr);
	free(data);
}

/* A recover callback that serves released bytes from the caller's copy. */
struct recover_src {
	const uint8_t *data;	/* what was stored, from offset 0 */
	unsigned long calls;
	int fail;		/* returned instead, when not 0 */
};

static int recover_copy(void *ctx, void *buf, size_t len, uint64_t off)
{
	struct recover_src *r = ctx;

	r->calls++;
	if (r->fail)
		return r->fail;
	memcpy(buf, r->data + off, len);
	return 0;
}

TEST(released_bytes_leave_memory_and_compares_recover_them)
{
	struct recover_src r = { 0 };
	struct kiln_frag *fr;
	uint8_t *data = malloc(80000), *b = malloc(60000), got[16];
	uint64_t off, end = 0;
	size_t same = 0;

	CHECK(data && b);
	fill(data, 80000, 31);
	r.data = data;
	/* pieces of 32 KiB, all in memory: releases free them */
	CHECK_EQ(kiln_frag_new(128 << 10, NULL, &fr), 0);
	CHECK_EQ(kiln_frag_add(fr, data, 60000, &off), 0);
	CHECK_EQ(kiln_frag_add(fr, data + 60000, 20000, &off), 0);
	/* no callback: nothing is released */
	kiln_frag_release(fr, 80000);
	CHECK_EQ(kiln_frag_read(fr, got, sizeof(got), 100), 0);
	CHECK(!memcmp(got, data + 100, sizeof(got)));
	kiln_frag_set_recover(fr, recover_copy, &r);
	kiln_frag_release(fr, 70000);	/* the two pieces below 65536 */
	/* released bytes are not for workers any more; the rest still is */
	CHECK_EQ(kiln_frag_read(fr, got, sizeof(got), 100), -EIO);
	CHECK_EQ(kiln_frag_read(fr, got, sizeof(got), 79000), 0);
	CHECK(!memcmp(got, data + 79000, sizeof(got)));
	CHECK_EQ(r.calls, 0);
	/* a whole-fragment match compares against released bytes */
	CHECK_EQ(kiln_frag_add(fr, data, 60000, &off), 0);
	CHECK_EQ(off, 0);
	CHECK(r.calls > 0);
	CHECK_EQ(kiln_frag_saved(fr), 60000);
	/* a suffix match, compared backwards over released pieces */
	fill(b, 60000, 32);
	memcpy(b + 5000, data + 5000, 55000);
	r.calls = 0;
	CHECK_EQ(kiln_frag_find_tail(fr, b, 60000, &end, &same), 0);
	CHECK_EQ(same, 55000);
	CHECK_EQ(end, 60000);
	CHECK(r.calls > 0);
	/* the same bytes, changed: no match (the recovered bytes decide) */
	b[5000] ^= 1;
	CHECK_EQ(kiln_frag_find_tail(fr, b, 60000, &end, &same), 0);
	CHECK_EQ(same, 54999);
	/* nothing went to a file */
	CHECK(!kiln_frag_spilled(fr));
	CHECK_EQ(kiln_frag_spill_bytes(fr), 0);
	/* a failing recovery fails the add, and every add after it */
	r.fail = -EIO;
	CHECK_EQ(kiln_frag_add(fr, data, 60000, &off), -EIO);
	CHECK_EQ(kiln_frag_size(fr), 80000);
	kiln_frag_free(fr);
	free(data);
	free(b);
}

TEST(only_pieces_past_the_limit_go_to_the_file)
{
	struct kiln_frag *fr;
	uint8_t *data = malloc(40000), *got = malloc(40000);
	uint64_t off;

	CHECK(data && got);
	fill(data, 40000, 41);
	/* 16 KiB in memory, pieces of 4 KiB */
	CHECK_EQ(kiln_frag_new(16 << 10, NULL, &fr), 0);
	for (size_t at = 0; at < 40000; at += 1000)
		CHECK_EQ(kiln_frag_add(fr, data + at, 1000, &off), 0);
	CHECK(kiln_frag_spilled(fr));
	/* the oldest whole pieces: 40000 bytes need 10 pieces, 4 stay */
	CHECK_EQ(kiln_frag_spill_bytes(fr), 6 * 4096);
	CHECK_EQ(kiln_frag_read(fr, got, 40000, 0), 0);
	CHECK(!memcmp(got, data, 40000));
	kiln_frag_free(fr);
	free(data);
	free(got);
}

/* ---- compressed files hand their tails over ---- */

static uint8_t *text(size_t n, uint32_t seed)
{
	static const char *const words[] = { "kiln ", "erofs ", "tail ",
					     "fragment\n", "packed " };
	uint8_t *p = malloc(n ? n : 1);

	for (size_t i = 0; p && i < n;) {
		const char *w;

		seed = seed * 1103515245u + 12345u;
		w = words[(seed >> 16) % 5];
		for (; *w && i < n; w++)
			p[i++] = (uint8_t)*w;
	}
	return p;
}

static struct kiln_zctx *frag_ctx_c(enum kiln_compress_layout layout,
				    unsigned int flags, uint32_t pcluster)
{
	struct kiln_build_opts o;
	struct kiln_logger lg = { 0 };
	struct kiln_zctx *zc = NULL;

	memset(&o, 0, sizeof(o));
	o.struct_size = sizeof(o);
	o.compress.codec = KILN_CODEC_LZ4HC;
	o.compress_layout = layout;
	o.compress_flags = KILN_COMPRESS_FRAGMENTS | flags;
	o.pcluster_size = pcluster;
	if (kiln_zctx_new(&o, 12, &lg, &zc))
		return NULL;
	return zc;
}

static struct kiln_zctx *frag_ctx(enum kiln_compress_layout layout,
				  unsigned int flags)
{
	return frag_ctx_c(layout, flags, 0);
}

static bool last_is_fragment(const struct kiln_zfile *zf)
{
	return zf->nr_ext && zf->ext[zf->nr_ext - 1].flags & KILN_ZEXT_FRAGMENT;
}

TEST(tails_and_small_files_become_fragments_at_commit)
{
	const enum kiln_compress_layout layouts[] = {
		KILN_COMPRESS_LAYOUT_CLASSIC, KILN_COMPRESS_LAYOUT_EXTENTS,
	};

	for (size_t l = 0; l < 2; l++) {
		struct kiln_zctx *zc = frag_ctx(layouts[l], 0);
		uint8_t *big = text(200000, 5), *small = text(1000, 6);
		struct memsrc sb = { big, 200000 }, ss = { small, 1000 };
		struct kiln_zfile *a = NULL, *b = NULL, *c = NULL;
		uint8_t got[70000];
		uint64_t tail;

		CHECK(zc && big && small);
		if (!zc || !big || !small)
			return;
		/* compressed in memory: nothing is in the buffer before commit */
		CHECK_EQ(kiln_zfile_compress(zc, mem_read, &ss, 1000, &a), 0);
		CHECK_EQ(kiln_zfile_compress(zc, mem_read, &sb, 200000, &b), 0);
		CHECK_EQ(kiln_zfile_compress(zc, mem_read, &ss, 1000, &c), 0);
		CHECK_EQ(kiln_frag_size(zc->frag), 0);
		CHECK(a && a->kind == KILN_ZMAP_FRAGMENT);
		CHECK(b && b->kind != KILN_ZMAP_FRAGMENT && last_is_fragment(b));
		/* commit order decides the offsets; the duplicate is shared */
		CHECK_EQ(kiln_zfile_place_fragment(a, false), 0);
		CHECK_EQ(kiln_zfile_place_fragment(b, false), 0);
		CHECK_EQ(kiln_zfile_place_fragment(c, false), 0);
		CHECK_EQ(a->fragoff, 0);
		CHECK_EQ(b->fragoff, 1000);
		CHECK_EQ(c->fragoff, 0);
		tail = b->ext[b->nr_ext - 1].lstart;
		CHECK(tail > 0 && tail < 200000);
		CHECK_EQ(kiln_frag_size(zc->frag), 1000 + (200000 - tail));
		CHECK_EQ(kiln_frag_read(zc->frag, got, 200000 - tail, 1000), 0);
		CHECK(!memcmp(got, big + tail, 200000 - tail));
		kiln_zfile_free(a);
		kiln_zfile_free(b);
		kiln_zfile_free(c);
		kiln_zctx_free(zc);
		free(big);
		free(small);
	}
}

TEST(fragments_win_over_ztailpacking)
{
	struct kiln_zctx *zc = frag_ctx(KILN_COMPRESS_LAYOUT_CLASSIC,
					KILN_COMPRESS_ZTAILPACKING);
	uint8_t *data = text(9000, 8);
	struct memsrc s = { data, 9000 };
	struct kiln_zfile *zf = NULL;

	CHECK(zc && data);
	if (!zc || !data)
		return;
	CHECK_EQ(kiln_zfile_compress(zc, mem_read, &s, 9000, &zf), 0);
	CHECK(zf && !kiln_zfile_has_inline(zf) && last_is_fragment(zf));
	kiln_zfile_free(zf);
	kiln_zctx_free(zc);
	free(data);
}

/* The packed inode's own segments never hand a tail to the buffer. */
TEST(packed_segments_keep_their_tails)
{
	const enum kiln_compress_layout layouts[] = {
		KILN_COMPRESS_LAYOUT_CLASSIC, KILN_COMPRESS_LAYOUT_EXTENTS,
	};

	for (size_t l = 0; l < 2; l++) {
		struct kiln_zctx *zc = frag_ctx(layouts[l], 0);
		uint8_t *data = text(150000, 12);
		struct memsrc s = { data, 150000 };
		struct kiln_zfile *part = NULL, *last = NULL, *whole = NULL;

		CHECK(zc && data);
		if (!zc || !data)
			return;
		CHECK_EQ(kiln_zfile_compress_segment(zc, mem_read, &s, 0, 65536,
						     150000, KILN_ZSEG_PACKED,
						     NULL, &part), 0);
		CHECK_EQ(kiln_zfile_compress_segment(zc, mem_read, &s, 65536,
						     150000 - 65536, 150000,
						     KILN_ZSEG_PACKED, NULL,
						     &last), 0);
		CHECK(part && !part->frag && !last_is_fragment(part));
		CHECK(last && !last->frag && !last_is_fragment(last));
		CHECK(last && last->kind != KILN_ZMAP_FRAGMENT);
		/* a file's last segment does go to the buffer */
		kiln_zfile_free(last);
		last = NULL;
		CHECK_EQ(kiln_zfile_compress_segment(zc, mem_read, &s, 65536,
						     150000 - 65536, 150000, 0,
						     NULL, &last), 0);
		CHECK(last && last_is_fragment(last));
		kiln_zfile_free(last);
		CHECK_EQ(kiln_zfile_join(&whole, part), 0);
		CHECK(whole == part);
		kiln_zfile_free(whole);
		kiln_zctx_free(zc);
		free(data);
	}
}

/* A fragment offset past 4 GiB: full indexes, high half in the tail head. */
TEST(fragment_offsets_past_4gib_use_full_indexes)
{
	struct kiln_zext c = { .lstart = 0, .llen = 8192, .pstart = 4096,
			       .plen = 4096, .fmt = 1 };
	struct kiln_zext f = { .lstart = 8192, .llen = 10000, .fmt = 1,
			       .flags = KILN_ZEXT_FRAGMENT };
	struct kiln_zfile zf;
	uint8_t map[256];
	size_t len = 0;

	memset(&zf, 0, sizeof(zf));
	zf.size = 18192;
	zf.blkszbits = 12;
	zf.lclusterbits = 12;
	zf.kind = KILN_ZMAP_COMPACT;
	zf.alg = 0;
	CHECK_EQ(kiln_zfile_add(&zf, &c), 0);
	CHECK_EQ(kiln_zfile_add(&zf, &f), 0);
	zf.fragoff = 123;
	kiln_zindex_choose(&zf);
	CHECK_EQ(zf.kind, KILN_ZMAP_COMPACT);
	zf.fragoff = (5ull << 32) | 123;
	kiln_zindex_choose(&zf);
	CHECK_EQ(zf.kind, KILN_ZMAP_FULL);
	CHECK_EQ(kiln_zindex_size(&zf, 64, &len), 0);
	CHECK(len <= sizeof(map));
	CHECK_EQ(kiln_zindex_encode(&zf, 64, map, len), 0);
	/* header: h_fragmentoff low half, FRAGMENT_PCLUSTER advise */
	CHECK_EQ(map[0] | map[1] << 8, 123);
	CHECK(map[4] & 0x20);
	/* record 2 (the tail's head, from byte 80 + 16): HEAD1, block 5 */
	CHECK_EQ(map[32] & 3, 1);
	CHECK_EQ(map[36], 5);
	kiln_zfile_release_ext(&zf);
}

/* Stored bytes that end like a new fragment, in memory and spilled. */
TEST(the_stored_end_of_a_fragment_is_found_backwards)
{
	for (int spill = 0; spill < 2; spill++) {
		struct kiln_frag *fr;
		uint8_t *a = malloc(60000), *b = malloc(60000);
		uint64_t off, end = 0;
		size_t same = 1;

		CHECK(a && b);
		fill(a, 60000, 21);
		fill(b, 60000, 22);
		/* b: its own 10000 bytes, then the last 50000 of a */
		memcpy(b + 10000, a + 10000, 50000);
		CHECK_EQ(kiln_frag_new(spill ? 4096 : 0, NULL, &fr), 0);
		CHECK_EQ(kiln_frag_add(fr, b, 7, &off), 0);
		CHECK_EQ(kiln_frag_add(fr, a, 60000, &off), 0);
		CHECK_EQ(off, 7);
		CHECK_EQ((int)kiln_frag_spilled(fr), spill);
		CHECK_EQ(kiln_frag_find_tail(fr, b, 60000, &end, &same), 0);
		CHECK_EQ(same, 50000);
		CHECK_EQ(end, 60007);
		/* all of a short end of it: found whole */
		CHECK_EQ(kiln_frag_find_tail(fr, a + 55000, 5000, &end, &same), 0);
		CHECK_EQ(same, 5000);
		CHECK_EQ(end, 60007);
		/* a run that goes back past the fragment into the one before */
		memcpy(b, a, 60000);
		CHECK_EQ(kiln_frag_find_tail(fr, b, 60000, &end, &same), 0);
		CHECK_EQ(same, 60000);
		/* shorter than the key, or another last byte: nothing */
		CHECK_EQ(kiln_frag_find_tail(fr, a + 60000 - 4095, 4095, &end,
					      &same), 0);
		CHECK_EQ(same, 0);
		b[59999] ^= 1;
		CHECK_EQ(kiln_frag_find_tail(fr, b, 60000, &end, &same), 0);
		CHECK_EQ(same, 0);
		/* a fragment that is not stored is not found (only stored ones) */
		CHECK_EQ(kiln_frag_size(fr), 60007);
		kiln_frag_free(fr);
		free(a);
		free(b);
	}
}

/* Extents cover [0, size) in order, with no gap. */
static bool covers(const struct kiln_zfile *zf)
{
	uint64_t pos = 0;

	for (size_t i = 0; i < zf->nr_ext; i++) {
		if (zf->ext[i].lstart != pos)
			return false;
		pos += zf->ext[i].llen;
	}
	return pos == zf->size;
}

TEST(a_fragment_that_ends_like_a_stored_one_shares_that_end)
{
	struct kiln_zctx *zc = frag_ctx_c(KILN_COMPRESS_LAYOUT_CLASSIC, 0,
					  65536);
	const size_t n = 300000, tail = 40000;
	uint8_t *a = text(n, 31), *b = text(n, 32);
	struct memsrc sa = { a, n }, sb = { b, n }, se = { a + n - 6000, 6000 };
	struct kiln_zfile *fa = NULL, *fb = NULL, *fe = NULL;
	uint8_t *got = malloc(tail);

	CHECK(zc && a && b && got);
	if (!zc || !a || !b || !got)
		return;
	memcpy(b + n - tail, a + n - tail, tail);
	CHECK_EQ(kiln_zfile_compress(zc, mem_read, &sa, n, &fa), 0);
	CHECK_EQ(kiln_zfile_compress(zc, mem_read, &sb, n, &fb), 0);
	CHECK_EQ(kiln_zfile_compress(zc, mem_read, &se, 6000, &fe), 0);
	CHECK(fa && fb && fe);
	CHECK(last_is_fragment(fb) && last_is_fragment(fe));
	CHECK_EQ(kiln_zfile_place_fragment(fa, true), 0);
	/* the last 6000 bytes of a, a file of their own: all shared */
	CHECK_EQ(kiln_zfile_place_fragment(fe, true), 0);
	CHECK_EQ(fe->fragoff, kiln_frag_size(zc->frag) - 6000);
	/* b ends in a's last 40000 bytes: they are shared, the rest held */
	{
		uint64_t before = kiln_frag_size(zc->frag);
		uint64_t flen = fb->ext[fb->nr_ext - 1].llen;

		CHECK_EQ(kiln_zfile_place_fragment(fb, true), 0);
		if (flen > tail + 32768) {
			const struct kiln_zext *f = &fb->ext[fb->nr_ext - 1];

			CHECK_EQ(kiln_frag_size(zc->frag), before);
			CHECK_EQ(f->llen, tail);
			CHECK(f->flags & KILN_ZEXT_FRAGMENT);
			CHECK_EQ(fb->fragoff, before - tail);
			CHECK(fb->kind != KILN_ZMAP_FRAGMENT);
			CHECK(fb->held && fb->held_len % 4096 == 0);
			CHECK(covers(fb));
			CHECK_EQ(kiln_frag_read(zc->frag, got, tail,
						 fb->fragoff), 0);
			CHECK(!memcmp(got, b + n - tail, tail));
		} else {
			CHECK(!"b's fragment is too short to test a split");
		}
	}
	kiln_zfile_free(fa);
	kiln_zfile_free(fb);
	kiln_zfile_free(fe);
	kiln_zctx_free(zc);
	free(a);
	free(b);
	free(got);
}

TAP_MAIN(TAP_ENTRY(fragment_offsets_past_4gib_use_full_indexes),
	 TAP_ENTRY(the_stored_end_of_a_fragment_is_found_backwards),
	 TAP_ENTRY(a_fragment_that_ends_like_a_stored_one_shares_that_end),
	 TAP_ENTRY(fragments_are_appended_in_order),
	 TAP_ENTRY(identical_fragments_are_stored_once),
	 TAP_ENTRY(many_fragments_grow_the_table_and_still_dedupe),
	 TAP_ENTRY(a_buffer_past_its_memory_limit_spills_and_reads_back),
	 TAP_ENTRY(released_bytes_leave_memory_and_compares_recover_them),
	 TAP_ENTRY(only_pieces_past_the_limit_go_to_the_file),
	 TAP_ENTRY(tails_and_small_files_become_fragments_at_commit),
	 TAP_ENTRY(fragments_win_over_ztailpacking),
	 TAP_ENTRY(stored_bytes_read_back_while_the_writer_appends_and_spills),
	 TAP_ENTRY(packed_segments_keep_their_tails))
