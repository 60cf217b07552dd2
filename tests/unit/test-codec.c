// SPDX-License-Identifier: MIT
/*
 * Tests for lib/codec: every codec built in, at several levels: round
 * trips, fixed-output fills, exact-length rules, hostile streams, the
 * "ALG[:LEVEL]" parser and config records.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <kiln/codec.h>

#include "codec/codec.h"
#include "format/erofs_fs.h"
#include "util/checked.h"
#include "tap.h"

#define IN_LEN	(96u * 1024)

static uint8_t text[IN_LEN];	/* compressible */
static uint8_t noise[IN_LEN];	/* incompressible */

static uint32_t rng = 12345;

static uint32_t next_rand(void)
{
	rng = rng * 1103515245u + 12345u;
	return rng >> 8;
}

static void make_inputs(void)
{
	static const char *words[] = {
		"extent ", "pcluster ", "the ", "kernel ", "reads ", "block ",
		"0123456789", "\n", "compressed ", "lcluster ", "zstd ", "a",
	};
	size_t n = 0;

	while (n < IN_LEN) {
		const char *w = words[next_rand() % KILN_ARRAY_SIZE(words)];
		size_t l = strlen(w);

		if (l > IN_LEN - n)
			l = IN_LEN - n;
		memcpy(text + n, w, l);
		n += l;
	}
	for (n = 0; n < IN_LEN; n++)
		noise[n] = (uint8_t)next_rand();
}

/* A codec with its compress and decompress workspaces ready. */
struct rig {
	const struct kiln_codec_ops *ops;
	struct kiln_codec_params p;
	void *cws, *dws;
};

static void rig_release(struct rig *r)
{
	if (!r->ops)
		return;
	kiln_codec_cws_fini(r->ops, r->cws);
	kiln_codec_dws_fini(r->ops, r->dws);
	free(r->cws);
	free(r->dws);
}

/*
 * Workspaces for codec @id at @level. A failure counts as a failed check
 * and leaves nothing to release.
 */
static bool rig_init(struct rig *r, enum kiln_codec_id id, int level)
{
	size_t cs, ds;

	memset(r, 0, sizeof(*r));
	r->ops = kiln_codec_get(id);
	CHECK(r->ops);
	if (!r->ops)
		return false;
	r->p.level = level;
	r->p.blksz = 4096;
	r->p.max_pcluster_size = 65536;
	cs = r->ops->compress_wsize(level, IN_LEN);
	ds = r->ops->decompress_wsize(IN_LEN);
	r->cws = aligned_alloc(64, (cs + 64) / 64 * 64);
	r->dws = aligned_alloc(64, (ds + 64) / 64 * 64);
	if (!r->cws || !r->dws ||
	    kiln_codec_cws_init(r->ops, r->cws, cs, &r->p) ||
	    kiln_codec_dws_init(r->ops, r->dws, ds)) {
		printf("#   workspace setup failed for %s:%d\n", r->ops->name,
		       level);
		CHECK(0);
		rig_release(r);
		return false;
	}
	return true;
}


/* Levels worth testing for each codec: the ends, the default, a middle. */
static int levels_of(const struct kiln_codec_ops *ops, int *out)
{
	int n = 0;

	out[n++] = ops->default_level;
	if (ops->min_level != ops->default_level)
		out[n++] = ops->id == KILN_CODEC_ZSTD ? -5 : ops->min_level;
	if (ops->id == KILN_CODEC_LZMA) {
		out[n++] = 0;
		out[n++] = 9;
		out[n++] = KILN_LZMA_EXTREME + 6;
	} else if (ops->max_level != ops->default_level) {
		out[n++] = ops->max_level;
		out[n++] = (ops->default_level + ops->max_level) / 2;
	}
	if (ops->id == KILN_CODEC_ZSTD)
		out[n++] = 1;
	return n;
}

#define FOR_EACH_CODEC(id)						\
	for (int id = KILN_CODEC_LZ4; id < KILN_CODEC_MAX; id++)	\
		if (kiln_codec_get(id))

TEST(roundtrip_every_codec_and_level)
{
	static uint8_t comp[IN_LEN + 4096], out[IN_LEN];

	FOR_EACH_CODEC(id) {
		int lv[8], n = levels_of(kiln_codec_get(id), lv);

		for (int i = 0; i < n; i++) {
			const uint8_t *inputs[] = { text, noise };
			struct rig r;

			if (!rig_init(&r, id, lv[i]))
				continue;
			for (int k = 0; k < 2; k++) {
				ssize_t c = r.ops->compress(r.cws, lv[i], comp,
							    sizeof(comp),
							    inputs[k], IN_LEN);
				int d;

				CHECK(c > 0);
				if (c <= 0)
					continue;
				CHECK(comp[0] != 0);
				if (k == 0)
					CHECK(c < (ssize_t)IN_LEN / 2);
				memset(out, 0xAA, sizeof(out));
				d = r.ops->decompress(r.dws, out, IN_LEN, comp,
						      (size_t)c, false);
				CHECK_EQ(d, 0);
				if (memcmp(out, inputs[k], IN_LEN)) {
					printf("#   %s:%d input %d differs\n",
					       r.ops->name, lv[i], k);
					CHECK(0);
				}
			}
			rig_release(&r);
		}
	}
}

TEST(destsize_fills_without_exceeding)
{
	static uint8_t comp[8192], out[IN_LEN];
	static const size_t caps[] = { 4096, 8192 };

	FOR_EACH_CODEC(id) {
		struct rig r;
		int level = kiln_codec_get(id)->default_level;

		if (!rig_init(&r, id, level))
			continue;
		for (size_t c = 0; c < KILN_ARRAY_SIZE(caps); c++) {
			size_t in = IN_LEN;
			ssize_t got;

			memset(comp, 0x55, sizeof(comp));
			got = kiln_codec_compress_destsize(r.ops, r.cws, level,
							   comp, caps[c], text,
							   &in, NULL);
			CHECK(got > 0 && (size_t)got <= caps[c]);
			CHECK(in > caps[c] && in <= IN_LEN);
			/* nothing written past the cap */
			if (caps[c] < sizeof(comp))
				CHECK(comp[caps[c]] == 0x55);
			/* "fills": within a few percent of the cap */
			CHECK((size_t)got >= caps[c] * 9 / 10);
			if (got <= 0)
				continue;
			CHECK_EQ(r.ops->decompress(r.dws, out, in, comp,
						   (size_t)got, false), 0);
			CHECK(!memcmp(out, text, in));
		}
		rig_release(&r);
	}
}

/*
 * An input that fits whole is taken whole, whatever the lengths the
 * search probes on the way: the last pcluster of a file must end at its
 * end (a few bytes short leaves them to a pcluster or fragment of their
 * own).
 */
TEST(destsize_takes_all_of_an_input_that_fits)
{
	static uint8_t comp[65536];

	FOR_EACH_CODEC(id) {
		struct rig r;
		int level = kiln_codec_get(id)->default_level;

		if (!rig_init(&r, id, level))
			continue;
		for (size_t n = 20000; n <= IN_LEN; n += 7919) {
			size_t in = n;
			ssize_t got = kiln_codec_compress_destsize(r.ops, r.cws,
								   level, comp,
								   sizeof(comp),
								   text, &in,
								   NULL);

			CHECK(got > 0);
			if (in != n)
				printf("#   %s: %zu of %zu bytes taken\n",
				       r.ops->name, in, n);
			CHECK_EQ(in, n);
		}
		rig_release(&r);
	}
}

/* ---- fixed-output fills for codecs without a native mode ---- */

#define FILL_LEN	(1024u * 1024)
#define FILL_ROOM	(FILL_LEN + FILL_LEN / 8 + 4096)

enum fill_kind { FILL_RANDOM, FILL_RUNS, FILL_TEXT, FILL_KINDS };

static const char *const fill_names[] = { "random", "runs", "text" };

/* Random bytes, long runs of a few values, and word salad. */
static const uint8_t *fill_input(enum fill_kind k)
{
	static uint8_t in[FILL_KINDS][FILL_LEN];
	static bool made;

	if (!made) {
		size_t n = 0;

		for (size_t i = 0; i < FILL_LEN; i++)
			in[FILL_RANDOM][i] = (uint8_t)next_rand();
		/* runs of 1..24 bytes of one value: about 3x smaller */
		while (n < FILL_LEN) {
			size_t run = 1 + next_rand() % 24;

			run = KILN_MIN(run, FILL_LEN - n);
			memset(in[FILL_RUNS] + n, (int)(next_rand() & 0xff), run);
			n += run;
		}
		/* words of a made-up 4096-word vocabulary, some far more
		 * common than others, and numbers: about 2-3x smaller */
		for (n = 0; n < FILL_LEN;) {
			uint32_t v = next_rand();
			uint32_t w = (v & 1) ? v % 64 : v % 4096;
			uint32_t len = 2 + w % 9;
			uint32_t seed = w * 2654435761u;

			for (uint32_t j = 0; j < len && n < FILL_LEN; j++) {
				seed = seed * 1103515245u + 12345u;
				in[FILL_TEXT][n++] = (uint8_t)('a' +
							(seed >> 16) % 26);
			}
			if (n < FILL_LEN)
				in[FILL_TEXT][n++] = v % 7 ? ' ' :
						     (uint8_t)('0' + v % 10);
		}
		made = true;
	}
	return in[k];
}

/*
 * The content size a zstd frame header records, or -1: one-shot decoders
 * (ZSTD_decompress()) size their output by it.
 */
static long long zstd_frame_content_size(const uint8_t *f, size_t len)
{
	static const unsigned int fcs_len[] = { 0, 2, 4, 8 };
	unsigned int fhd, code, single, did, at, fl;
	unsigned long long v = 0;

	if (len < 6 || f[0] != 0x28 || f[1] != 0xb5 || f[2] != 0x2f ||
	    f[3] != 0xfd)
		return -1;
	fhd = f[4];
	code = fhd >> 6;
	single = (fhd >> 5) & 1;
	did = fhd & 3;
	at = 5 + !single + (did == 3 ? 4 : did);
	fl = code ? fcs_len[code] : single;
	if (!fl || at + fl > len)
		return -1;
	for (unsigned int i = 0; i < fl; i++)
		v |= (unsigned long long)f[at + i] << (8 * i);
	return (long long)(code == 1 ? v + 256 : v);
}

/* The longest prefix that fits in @cap, by bisection (monotone enough). */
static size_t fill_best(const struct rig *r, uint8_t *comp, size_t cap,
			const uint8_t *src, size_t n)
{
	size_t lo = 0, hi = n + 1;

	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		ssize_t got = r->ops->compress(r->cws, r->p.level, comp, cap,
					       src, mid);

		if (got > 0)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* What one run of a stream through the fill showed. */
struct fill_stats {
	unsigned int calls, bad, max_passes;
	uint64_t passes, in_sum, used_sum;
	size_t first_in, first_used;	/* the first pcluster's */
};

/*
 * Fill pclusters of @blks units of @unit bytes from @src until it ends,
 * one hint for the stream (or none), checking each: within the budget,
 * a decoded copy of exactly the prefix taken, a zstd frame that records
 * its length. Passes are counted through the hint, so only with one.
 */
static void fill_stream(struct rig *r, const uint8_t *src, size_t n,
			uint32_t unit, uint32_t blks, bool with_hint,
			struct fill_stats *st)
{
	static uint8_t comp[FILL_ROOM], out[FILL_LEN];
	const size_t cap = (size_t)unit * blks;
	struct kiln_destsize_hint h = { .dst_room = sizeof(comp),
					.unit = unit };
	size_t pos = 0;

	memset(st, 0, sizeof(*st));
	while (pos < n) {
		size_t in = n - pos;
		uint64_t before = h.compressions;
		ssize_t got;

		got = kiln_codec_compress_destsize(r->ops, r->cws, r->p.level,
						   comp, cap, src + pos, &in,
						   with_hint ? &h : NULL);
		/* the cap, not the room, bounds the output */
		if (got > 0 && (size_t)got > cap)
			got = -E2BIG;
		st->calls++;
		if (got <= 0 || in == 0 || in > n - pos ||
		    r->ops->decompress(r->dws, out, in, comp, (size_t)got,
				       false) ||
		    memcmp(out, src + pos, in) ||
		    (r->ops->id == KILN_CODEC_ZSTD &&
		     zstd_frame_content_size(comp, (size_t)got) !=
		     (long long)in)) {
			if (!st->bad++)
				printf("#   %s unit %u x %u at %zu: got %zd for %zu\n",
				       r->ops->name, unit, blks, pos, got, in);
			break;
		}
		st->passes += h.compressions - before;
		st->max_passes = KILN_MAX(st->max_passes,
					  (unsigned int)(h.compressions - before));
		st->in_sum += in;
		st->used_sum += kiln_round_up((uint64_t)got, unit);
		if (!pos) {
			st->first_in = in;
			st->first_used = kiln_round_up((size_t)got, unit);
		}
		pos += in;
	}
}

static void fill_rig(struct rig *r, enum kiln_codec_id id, int level,
		     bool *ok)
{
	*ok = kiln_codec_get(id) && rig_init(r, id, level);
	if (*ok) {
		r->p.blksz = 512;
		r->p.max_pcluster_size = 32 * 4096;
	}
}

/*
 * Every pcluster of a stream respects its budget and decodes to its
 * input, for units of 512..4096 bytes, 1..32 of them, any data, with
 * and without a hint.
 */
TEST(fill_respects_the_budget_and_decodes_exactly)
{
	static const enum kiln_codec_id ids[] = { KILN_CODEC_ZSTD,
						  KILN_CODEC_DEFLATE };
	static const uint32_t units[] = { 512, 1024, 4096 };
	static const uint32_t blks[] = { 1, 3, 32 };

	for (size_t c = 0; c < KILN_ARRAY_SIZE(ids); c++) {
		struct rig r;
		bool ok;

		fill_rig(&r, ids[c], kiln_codec_get(ids[c]) ?
			 kiln_codec_get(ids[c])->default_level : 0, &ok);
		if (!ok)
			continue;
		for (int k = 0; k < FILL_KINDS; k++)
			for (size_t u = 0; u < KILN_ARRAY_SIZE(units); u++)
				for (size_t b = 0; b < KILN_ARRAY_SIZE(blks); b++)
					for (int hint = 0; hint < 2; hint++) {
						struct fill_stats st;
						/* keep the hintless runs short */
						size_t n = hint ? FILL_LEN :
							   FILL_LEN / 8;

						fill_stream(&r, fill_input(k), n,
							    units[u], blks[b],
							    hint, &st);
						if (st.bad)
							printf("#   %s data\n",
							       fill_names[k]);
						CHECK_EQ(st.bad, 0u);
					}
		rig_release(&r);
	}
}

/*
 * With a hint, a fill costs few passes over its input: on average at most
 * 1.5 for zstd (one streamed pass, sometimes a retry; 2 in any one case),
 * 2.5 for deflate (whole compressions aimed by the last ratio; 3 in any
 * one case), never more than 8 in one call. And the first
 * pcluster stores at least 97% of the input per stored byte that the
 * longest prefix that fits would (up to 1/128 unused in the last unit,
 * and a pcluster a unit short of the cap may be taken).
 */
TEST(fill_with_a_hint_is_cheap_and_nearly_as_full_as_the_best)
{
	static const enum kiln_codec_id ids[] = { KILN_CODEC_ZSTD,
						  KILN_CODEC_DEFLATE };
	static const uint32_t caps[][2] = { { 4096, 4 }, { 4096, 16 },
					    { 4096, 32 }, { 1024, 16 },
					    { 512, 8 } };

	for (size_t c = 0; c < KILN_ARRAY_SIZE(ids); c++) {
		const bool zstd = ids[c] == KILN_CODEC_ZSTD;
		uint64_t calls = 0, passes = 0;
		struct rig r;
		bool ok;

		fill_rig(&r, ids[c], kiln_codec_get(ids[c]) ?
			 kiln_codec_get(ids[c])->default_level : 0, &ok);
		if (!ok)
			continue;
		for (int k = FILL_RUNS; k < FILL_KINDS; k++)
			for (size_t i = 0; i < KILN_ARRAY_SIZE(caps); i++) {
				static uint8_t comp[FILL_ROOM];
				const uint32_t unit = caps[i][0];
				const size_t cap = (size_t)unit * caps[i][1];
				const uint8_t *src = fill_input(k);
				struct fill_stats st;
				double avg, best_rate, rate;
				size_t best;

				fill_stream(&r, src, FILL_LEN, unit, caps[i][1],
					    true, &st);
				CHECK_EQ(st.bad, 0u);
				if (st.bad || !st.calls)
					continue;
				avg = (double)st.passes / st.calls;
				best = fill_best(&r, comp, cap, src,
						 KILN_MIN((size_t)FILL_LEN, 64 * cap));
				best_rate = (double)best / cap;
				rate = (double)st.first_in / st.first_used;
				printf("#   %s %s %u x %u: %u calls, %.2f passes "
				       "(max %u), first %.3f of the best\n",
				       r.ops->name, fill_names[k], unit,
				       caps[i][1], st.calls, avg,
				       st.max_passes, rate / best_rate);
				calls += st.calls;
				passes += st.passes;
				CHECK(st.calls >= 2);
				CHECK(avg <= (zstd ? 2.0 : 3.0));
				CHECK(st.max_passes <= 8);
				CHECK(rate >= best_rate * 0.97);
			}
		printf("#   %s: %.2f passes a call\n", r.ops->name,
		       calls ? (double)passes / calls : 0.0);
		CHECK(calls && passes <= calls * (zstd ? 1.5 : 2.5));
		rig_release(&r);
	}
}

TEST(compress_reports_enospc_when_output_cannot_fit)
{
	static uint8_t comp[1024];

	FOR_EACH_CODEC(id) {
		struct rig r;
		int level = kiln_codec_get(id)->default_level;
		ssize_t got;

		if (!rig_init(&r, id, level))
			continue;
		got = r.ops->compress(r.cws, level, comp, sizeof(comp), noise,
				      IN_LEN);
		CHECK_EQ(got, -ENOSPC);
		rig_release(&r);
	}
}

TEST(decompress_enforces_exact_length)
{
	static uint8_t comp[IN_LEN + 4096], out[IN_LEN + 16];

	FOR_EACH_CODEC(id) {
		struct rig r;
		int level = kiln_codec_get(id)->default_level;
		ssize_t c;

		if (!rig_init(&r, id, level))
			continue;
		c = r.ops->compress(r.cws, level, comp, sizeof(comp), text,
				    IN_LEN);
		CHECK(c > 0);
		if (c > 0) {
			/*
			 * Longer than the stream: an error. Shorter: an error
			 * too, except for zstd, whose extra output the kernel
			 * ignores (format notes 8.4).
			 */
			CHECK_EQ(r.ops->decompress(r.dws, out, IN_LEN - 1, comp,
						   (size_t)c, false),
				 id == KILN_CODEC_ZSTD ? 0 : -KILN_ECORRUPT);
			CHECK_EQ(r.ops->decompress(r.dws, out, IN_LEN + 1, comp,
						   (size_t)c, false),
				 -KILN_ECORRUPT);
			/* a prefix, asked for as one, decodes */
			memset(out, 0, sizeof(out));
			CHECK_EQ(r.ops->decompress(r.dws, out, IN_LEN / 3, comp,
						   (size_t)c, true), 0);
			CHECK(!memcmp(out, text, IN_LEN / 3));
			/* and the workspace is still good afterwards */
			CHECK_EQ(r.ops->decompress(r.dws, out, IN_LEN, comp,
						   (size_t)c, false), 0);
			CHECK(!memcmp(out, text, IN_LEN));
		}
		rig_release(&r);
	}
}

TEST(decompress_rejects_truncated_and_corrupt_streams)
{
	static uint8_t comp[IN_LEN + 4096], bad[IN_LEN + 4096], out[IN_LEN];

	FOR_EACH_CODEC(id) {
		struct rig r;
		int level = kiln_codec_get(id)->default_level;
		ssize_t c;

		if (!rig_init(&r, id, level))
			continue;
		c = r.ops->compress(r.cws, level, comp, sizeof(comp), text,
				    IN_LEN);
		CHECK(c > 16);
		if (c <= 16) {
			rig_release(&r);
			continue;
		}
		/* truncated: never success, never a crash */
		for (ssize_t cut = 1; cut < c; cut += c / 7 + 1)
			CHECK_EQ(r.ops->decompress(r.dws, out, IN_LEN, comp,
						   (size_t)(c - cut), false),
				 -KILN_ECORRUPT);
		CHECK_EQ(r.ops->decompress(r.dws, out, IN_LEN, comp, 0, false),
			 -KILN_ECORRUPT);
		/* flipped bytes: an error or (rarely) other data, no crash */
		for (int t = 0; t < 64; t++) {
			int d;

			memcpy(bad, comp, (size_t)c);
			for (int f = 0; f < 4; f++)
				bad[next_rand() % (uint32_t)c] ^=
					(uint8_t)(1u << (next_rand() % 8));
			d = r.ops->decompress(r.dws, out, IN_LEN, bad,
					      (size_t)c, t & 1);
			CHECK(d == 0 || d == -KILN_ECORRUPT);
		}
		/* garbage */
		CHECK(r.ops->decompress(r.dws, out, IN_LEN, noise, 4096,
					false) == -KILN_ECORRUPT);
		rig_release(&r);
	}
}

TEST(split_output_matches_contiguous_output)
{
	static uint8_t comp[IN_LEN + 4096], a[IN_LEN], b[IN_LEN], c[IN_LEN];

	FOR_EACH_CODEC(id) {
		struct rig r;
		int level = kiln_codec_get(id)->default_level;
		ssize_t n;

		if (!kiln_codec_get(id)->decompress_segs)
			continue;
		if (!rig_init(&r, id, level))
			continue;
		n = r.ops->compress(r.cws, level, comp, sizeof(comp), text,
				    IN_LEN);
		CHECK(n > 0);
		for (size_t cut = 0; n > 0 && cut < IN_LEN; cut += 17011) {
			struct kiln_codec_seg seg[3] = {
				{ a, cut }, { b, 5000 }, { c, IN_LEN - cut - 5000 },
			};

			if (cut + 5000 > IN_LEN)
				break;
			CHECK_EQ(r.ops->decompress_segs(r.dws, seg, 3, comp,
							(size_t)n, false), 0);
			CHECK(!memcmp(a, text, cut));
			CHECK(!memcmp(b, text + cut, 5000));
			CHECK(!memcmp(c, text + cut + 5000,
				      IN_LEN - cut - 5000));
			/* one byte short of the stream: exactness still holds */
			seg[2].len++;
			CHECK_EQ(r.ops->decompress_segs(r.dws, seg, 3, comp,
							(size_t)n, false),
				 -KILN_ECORRUPT);
		}
		rig_release(&r);
	}
}

TEST(zstd_rejects_windows_over_one_mib)
{
	/* frame header: magic, descriptor 0 (window byte follows), window 2^21 */
	static const uint8_t frame[] = { 0x28, 0xB5, 0x2F, 0xFD, 0x00, 0x58,
					 0x01, 0x00, 0x00, 0x00 };
	static uint8_t out[4096];
	struct rig r;

	if (!kiln_codec_get(KILN_CODEC_ZSTD))
		return;
	if (!rig_init(&r, KILN_CODEC_ZSTD, 3))
		return;
	CHECK_EQ(r.ops->decompress(r.dws, out, sizeof(out), frame,
				   sizeof(frame), false), -KILN_ECORRUPT);
	rig_release(&r);
}

TEST(erofs_algorithms_map_to_decoders)
{
	static const struct { unsigned int alg; enum kiln_codec_id id; } m[] = {
		{ Z_EROFS_COMPRESSION_LZ4, KILN_CODEC_LZ4 },
		{ Z_EROFS_COMPRESSION_LZMA, KILN_CODEC_LZMA },
		{ Z_EROFS_COMPRESSION_DEFLATE, KILN_CODEC_DEFLATE },
		{ Z_EROFS_COMPRESSION_ZSTD, KILN_CODEC_ZSTD },
	};

	for (size_t i = 0; i < KILN_ARRAY_SIZE(m); i++)
		CHECK(kiln_codec_by_erofs_alg(m[i].alg) == kiln_codec_get(m[i].id));
	CHECK(kiln_codec_by_erofs_alg(4) == NULL);
	CHECK(kiln_codec_by_erofs_alg(255) == NULL);
	CHECK(kiln_codec_get(KILN_CODEC_NONE) == NULL);
	CHECK(kiln_codec_get(KILN_CODEC_MAX) == NULL);
	if (kiln_codec_get(KILN_CODEC_LZ4HC))
		CHECK_EQ(kiln_codec_get(KILN_CODEC_LZ4HC)->erofs_alg,
			 Z_EROFS_COMPRESSION_LZ4);
}

TEST(config_records_have_the_kernel_sizes)
{
	struct kiln_codec_params p = { 0, 4096, 65536 };
	uint8_t buf[32];

	FOR_EACH_CODEC(id) {
		const struct kiln_codec_ops *ops = kiln_codec_get(id);
		ssize_t n;

		p.level = ops->default_level;
		n = ops->config_encode(&p, buf, sizeof(buf));
		CHECK_EQ(n, ops->erofs_alg <= Z_EROFS_COMPRESSION_LZMA ? 14 : 6);
		if (ops->erofs_alg == Z_EROFS_COMPRESSION_LZ4)
			CHECK_EQ(buf[2], 16);	/* max_pclusterblks */
		if (ops->erofs_alg == Z_EROFS_COMPRESSION_LZMA)
			CHECK_EQ(buf[0] | buf[1] << 8 | buf[2] << 16,
				 256 * 1024);
		if (ops->erofs_alg == Z_EROFS_COMPRESSION_ZSTD)
			CHECK_EQ(buf[1], 10);
		CHECK_EQ(ops->config_encode(&p, buf, 4), -ENOSPC);
	}
	CHECK_EQ(kiln_lzma_dict_size(4096), 32 * 1024);
	CHECK_EQ(kiln_lzma_dict_size(1u << 20), 4u << 20);
	CHECK_EQ(kiln_lzma_dict_size(16u << 20), 8u << 20);
}

TEST(parse_accepts_names_and_levels)
{
	struct kiln_compress_spec s;
	char err[512];

	CHECK_EQ(kiln_compress_parse("none", &s, err, sizeof(err)), 0);
	CHECK_EQ(s.codec, KILN_CODEC_NONE);
	if (kiln_codec_get(KILN_CODEC_LZ4)) {
		CHECK_EQ(kiln_compress_parse("lz4", &s, err, sizeof(err)), 0);
		CHECK_EQ(s.codec, KILN_CODEC_LZ4);
		CHECK_EQ(s.level, 1);
		CHECK_EQ(kiln_compress_parse("lz4hc:12", &s, err, sizeof(err)), 0);
		CHECK_EQ(s.codec, KILN_CODEC_LZ4HC);
		CHECK_EQ(s.level, 12);
		CHECK_EQ(kiln_compress_parse("lz4hc,3", &s, NULL, 0), 0);
		CHECK_EQ(s.level, 3);
		CHECK_EQ(kiln_compress_parse("lz4hc:13", &s, err, sizeof(err)),
			 -ERANGE);
		CHECK(strstr(err, "lz4hc (1..12") != NULL);
	}
	if (kiln_codec_get(KILN_CODEC_ZSTD)) {
		CHECK_EQ(kiln_compress_parse("zstd:-5", &s, err, sizeof(err)), 0);
		CHECK_EQ(s.level, -5);
		CHECK_EQ(kiln_compress_parse("zstd:0", &s, err, sizeof(err)), 0);
		CHECK_EQ(s.level, 3);	/* zstd's own default, as zstd has it */
		CHECK_EQ(kiln_compress_parse("zstd:-100", &s, err, sizeof(err)),
			 0);
		CHECK_EQ(kiln_compress_parse("zstd:-101", &s, err, sizeof(err)),
			 -ERANGE);
		CHECK_EQ(kiln_compress_parse("zstd:23", &s, err, sizeof(err)),
			 -ERANGE);
		CHECK_EQ(kiln_compress_parse("zstd:22", &s, err, sizeof(err)), 0);
	}
	if (kiln_codec_get(KILN_CODEC_LZMA)) {
		CHECK_EQ(kiln_compress_parse("lzma:9e", &s, err, sizeof(err)), 0);
		CHECK_EQ(s.level, KILN_LZMA_EXTREME + 9);
		CHECK_EQ(kiln_compress_parse("lzma", &s, err, sizeof(err)), 0);
		CHECK_EQ(s.level, 6);
		CHECK_EQ(kiln_compress_parse("lzma:10", &s, err, sizeof(err)),
			 -ERANGE);
		CHECK_EQ(kiln_compress_parse("lzma:10e", &s, err, sizeof(err)),
			 -EINVAL);
	}
}

TEST(parse_errors_list_the_valid_choices)
{
	struct kiln_compress_spec s;
	char err[512], small[8];

	CHECK_EQ(kiln_compress_parse("brotli", &s, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "brotli") != NULL);
	CHECK(strstr(err, "valid:") != NULL);
	if (kiln_codec_get(KILN_CODEC_LZ4))
		CHECK(strstr(err, "lz4 (1)") != NULL);
	CHECK_EQ(kiln_compress_parse("lz4hc:x", &s, err, sizeof(err)),
		 kiln_codec_get(KILN_CODEC_LZ4HC) ? -EINVAL : -EOPNOTSUPP);
	CHECK_EQ(kiln_compress_parse("lz4hc:", &s, err, sizeof(err)),
		 kiln_codec_get(KILN_CODEC_LZ4HC) ? -EINVAL : -EOPNOTSUPP);
	CHECK_EQ(kiln_compress_parse("none:3", &s, err, sizeof(err)), -EINVAL);
	CHECK_EQ(kiln_compress_parse("lz", &s, small, sizeof(small)), -EINVAL);
	CHECK_EQ(strlen(small), sizeof(small) - 1);
	CHECK(kiln_codec_describe(NULL, 0) > 10);
	CHECK(!strcmp(kiln_codec_name(KILN_CODEC_ZSTD), "zstd"));
	CHECK(!strcmp(kiln_codec_name(KILN_CODEC_MAX), "unknown"));
}

int main(void)
{
	static const struct tap_test tests[] = {
		TAP_ENTRY(roundtrip_every_codec_and_level),
		TAP_ENTRY(destsize_fills_without_exceeding),
		TAP_ENTRY(destsize_takes_all_of_an_input_that_fits),
		TAP_ENTRY(fill_respects_the_budget_and_decodes_exactly),
		TAP_ENTRY(fill_with_a_hint_is_cheap_and_nearly_as_full_as_the_best),
		TAP_ENTRY(compress_reports_enospc_when_output_cannot_fit),
		TAP_ENTRY(decompress_enforces_exact_length),
		TAP_ENTRY(decompress_rejects_truncated_and_corrupt_streams),
		TAP_ENTRY(split_output_matches_contiguous_output),
		TAP_ENTRY(zstd_rejects_windows_over_one_mib),
		TAP_ENTRY(erofs_algorithms_map_to_decoders),
		TAP_ENTRY(config_records_have_the_kernel_sizes),
		TAP_ENTRY(parse_accepts_names_and_levels),
		TAP_ENTRY(parse_errors_list_the_valid_choices),
	};

	make_inputs();
	return tap_run(tests, KILN_ARRAY_SIZE(tests));
}
