// SPDX-License-Identifier: MIT
/*
 * The codec table: ops by kiln codec id and by on-disk algorithm number,
 * plus the helpers every codec shares (hook dispatch, fixed-output search).
 */
#include <errno.h>
#include <stddef.h>

#include "codec/codec.h"
#include "codec/codec-config.h"
#include "format/erofs_fs.h"
#include "util/checked.h"

extern const struct kiln_codec_ops kiln_codec_lz4, kiln_codec_lz4hc;
extern const struct kiln_codec_ops kiln_codec_zstd, kiln_codec_deflate;
extern const struct kiln_codec_ops kiln_codec_lzma;

/* Meson builds a codec's file only when its library exists. */
#if KILN_HAVE_LZ4
#define LZ4_OPS (&kiln_codec_lz4)
#define LZ4HC_OPS (&kiln_codec_lz4hc)
#else
#define LZ4_OPS NULL
#define LZ4HC_OPS NULL
#endif
#if KILN_HAVE_ZSTD
#define ZSTD_OPS (&kiln_codec_zstd)
#else
#define ZSTD_OPS NULL
#endif
#if KILN_HAVE_DEFLATE
#define DEFLATE_OPS (&kiln_codec_deflate)
#else
#define DEFLATE_OPS NULL
#endif
#if KILN_HAVE_LZMA
#define LZMA_OPS (&kiln_codec_lzma)
#else
#define LZMA_OPS NULL
#endif

static const struct kiln_codec_ops *const codecs_by_id[KILN_CODEC_MAX] = {
	[KILN_CODEC_NONE] = NULL,
	[KILN_CODEC_LZ4] = LZ4_OPS,
	[KILN_CODEC_LZ4HC] = LZ4HC_OPS,
	[KILN_CODEC_LZMA] = LZMA_OPS,
	[KILN_CODEC_DEFLATE] = DEFLATE_OPS,
	[KILN_CODEC_ZSTD] = ZSTD_OPS,
};

/* LZ4HC writes plain LZ4 streams: the LZ4 decoder serves both. */
static const struct kiln_codec_ops *const codecs_by_alg[] = {
	[Z_EROFS_COMPRESSION_LZ4] = LZ4_OPS,
	[Z_EROFS_COMPRESSION_LZMA] = LZMA_OPS,
	[Z_EROFS_COMPRESSION_DEFLATE] = DEFLATE_OPS,
	[Z_EROFS_COMPRESSION_ZSTD] = ZSTD_OPS,
};

const struct kiln_codec_ops *kiln_codec_get(enum kiln_codec_id id)
{
	if ((unsigned int)id >= KILN_ARRAY_SIZE(codecs_by_id))
		return NULL;
	return codecs_by_id[id];
}

const struct kiln_codec_ops *kiln_codec_by_erofs_alg(unsigned int alg)
{
	if (alg >= KILN_ARRAY_SIZE(codecs_by_alg))
		return NULL;
	return codecs_by_alg[alg];
}

bool kiln_codec_level_ok(const struct kiln_codec_ops *ops, int level)
{
	if (level < ops->min_level || level > ops->max_level)
		return false;
	return !ops->level_valid || ops->level_valid(level);
}

int kiln_codec_cws_init(const struct kiln_codec_ops *ops, void *ws,
			size_t ws_size, const struct kiln_codec_params *p)
{
	return ops->cws_init ? ops->cws_init(ws, ws_size, p) : 0;
}

void kiln_codec_cws_fini(const struct kiln_codec_ops *ops, void *ws)
{
	if (ops->cws_fini)
		ops->cws_fini(ws);
}

int kiln_codec_dws_init(const struct kiln_codec_ops *ops, void *ws,
			size_t ws_size)
{
	return ops->dws_init ? ops->dws_init(ws, ws_size) : 0;
}

void kiln_codec_dws_fini(const struct kiln_codec_ops *ops, void *ws)
{
	if (ops->dws_fini)
		ops->dws_fini(ws);
}

/*
 * The fixed-output search for codecs without a native mode: each probe is
 * a whole compression, so it aims every probe at a full output from what
 * the last probes (or the stream's last pcluster) showed, and stops at the
 * first output that is full enough.
 */

/* Stop once the bracket is this narrow: more probes gain < 16 bytes. */
#define DESTSIZE_SEARCH_SLACK	16
/* Probes after which any fitting output is taken. */
#define DESTSIZE_PROBES		3
/*
 * "Full enough": the unused bytes of the last unit are at most 1/2^SHIFT
 * of the units the output takes, and at least MIN_WASTE bytes are allowed.
 */
#define DESTSIZE_WASTE_SHIFT	7
#define DESTSIZE_MIN_WASTE	16

static size_t destsize_waste_ok(size_t used)
{
	return KILN_MAX((size_t)DESTSIZE_MIN_WASTE,
			used >> DESTSIZE_WASTE_SHIFT);
}

/*
 * True when an output of @out bytes (<= @cap) is as good as the best: it
 * takes at least 3/4 of the units of @cap and fills its last unit but for
 * the allowed waste.
 */
static bool destsize_full(size_t out, size_t cap, size_t unit)
{
	size_t used = (out + unit - 1) / unit * unit;

	return used >= cap - cap / 4 && used - out <= destsize_waste_ok(used);
}

bool kiln_destsize_full(size_t out, size_t cap,
			const struct kiln_destsize_hint *hint)
{
	size_t unit = hint && hint->unit && hint->unit < cap ? hint->unit :
							      cap;

	return out <= cap && destsize_full(out, cap, unit);
}

/* @x scaled by @num / @den, saturating at SIZE_MAX. */
static size_t destsize_scale(size_t x, size_t num, size_t den)
{
	unsigned __int128 g = (unsigned __int128)x * num / den;

	return g > SIZE_MAX ? SIZE_MAX : (size_t)g;
}

/*
 * The search's state: prefixes of lo bytes fit in lo_out bytes, of hi
 * bytes do not (hi_out bytes when the probe could tell, else 0; hi = n + 1
 * before any probe failed).
 */
struct destsize_state {
	size_t n, lo, lo_out, hi, hi_out;
};

/*
 * Next prefix to probe for an output of @target bytes: between the two
 * nearest probes when both sizes are known, else by the ratio of the one
 * known; strictly inside (lo, hi).
 */
static size_t destsize_aim(const struct destsize_state *s, size_t target)
{
	size_t x;

	if (s->lo && s->hi_out > s->lo_out && target > s->lo_out)
		x = s->lo + destsize_scale(s->hi - s->lo, target - s->lo_out,
					   s->hi_out - s->lo_out);
	else if (s->hi_out)
		x = destsize_scale(s->hi, target, s->hi_out);
	else if (s->lo && s->lo_out)
		x = destsize_scale(s->lo, target, s->lo_out);
	else
		x = s->lo + (s->hi - s->lo) / 2;
	/* all of the input, when it is not known to be too much */
	if (x >= s->n && s->hi > s->n)
		return s->n;
	if (x <= s->lo || x >= s->hi)
		x = s->lo + (s->hi - s->lo) / 2;
	return KILN_MIN(x, s->n);
}

/* The first probe: by the stream's last ratio, else by a default guess. */
static size_t destsize_first(const struct kiln_destsize_hint *h, size_t n,
			     size_t cap, size_t room, size_t target)
{
	size_t x;

	if (h->last_in && h->last_out) {
		x = destsize_scale(h->last_in, target, h->last_out);
		/* near the whole input: try it, a fit ends the stream */
		if (x >= n - n / 8)
			x = n;
	} else if (room / 3 >= cap + cap / 64 + 512) {
		/* room to learn the size even of an incompressible probe */
		x = n <= 3 * (size_t)cap ? n : 2 * cap;
	} else {
		x = cap;
	}
	return KILN_MAX(KILN_MIN(x, n), (size_t)1);
}

/*
 * Output to aim the next probe at: a full @cap, or, when the last fit
 * already took the units of a nearly full output, those units filled
 * (a short step, so a close aim); past the probe budget, low enough to
 * fit at once.
 */
static size_t destsize_target(const struct destsize_state *s, size_t cap,
			      size_t unit, unsigned int probes, size_t target)
{
	size_t used = (s->lo_out + unit - 1) / unit * unit;

	if (probes >= DESTSIZE_PROBES)
		return cap - cap / 16;
	if (s->lo && used < cap && used >= cap - cap / 4 &&
	    s->hi > s->n)
		return used - destsize_waste_ok(used) / 2;
	return target;
}

ssize_t kiln_codec_compress_destsize(const struct kiln_codec_ops *ops,
				     void *ws, int level, void *dst,
				     size_t dst_cap, const void *src,
				     size_t *src_len,
				     struct kiln_destsize_hint *hint)
{
	struct kiln_destsize_hint none = { 0 };
	struct kiln_destsize_hint *h = hint ? hint : &none;
	struct destsize_state s = { .n = *src_len, .hi = *src_len + 1 };
	size_t room, unit, target, x;
	unsigned int probes = 0;
	bool dst_holds_lo = false;
	ssize_t r;

	h->calls++;
	if (ops->compress_destsize) {
		h->compressions++;
		r = ops->compress_destsize(ws, level, dst, dst_cap, src,
					   src_len);
		if (r > 0) {
			h->last_in = *src_len;
			h->last_out = (size_t)r;
		}
		return r;
	}
	if (!s.n || !dst_cap)
		return -ENOSPC;
	if (ops->compress_fill) {
		h->compressions++;
		r = ops->compress_fill(ws, level, dst, dst_cap, src, src_len,
				       h);
		if (r > 0) {
			h->last_in = *src_len;
			h->last_out = (size_t)r;
		}
		if (r != -EAGAIN)
			return r;
	}
	room = KILN_MAX(dst_cap, h->dst_room);
	unit = h->unit && h->unit < dst_cap ? h->unit : dst_cap;
	target = dst_cap - destsize_waste_ok(dst_cap) / 2;
	x = destsize_first(h, s.n, dst_cap, room, target);
	for (;;) {
		probes++;
		h->compressions++;
		r = ops->compress(ws, level, dst, room, src, x);
		if (r < 0 && r != -ENOSPC)
			return r;
		if (r >= 0 && (size_t)r <= dst_cap) {
			s.lo = x;
			s.lo_out = (size_t)r;
			dst_holds_lo = true;
			if (x == s.n || probes >= DESTSIZE_PROBES ||
			    destsize_full(s.lo_out, dst_cap, unit))
				break;
		} else {
			s.hi = x;
			s.hi_out = r > 0 ? (size_t)r : 0;
			dst_holds_lo = false;
		}
		if (s.hi - s.lo <= DESTSIZE_SEARCH_SLACK) {
			/*
			 * Close enough, unless all of the input was never
			 * tried: it may fit too, and then it is the answer
			 * (a file's last pcluster ends at its end).
			 */
			if (s.hi <= s.n || s.lo == s.n)
				break;
			x = s.n;
			continue;
		}
		x = destsize_aim(&s, destsize_target(&s, dst_cap, unit, probes,
						     target));
	}
	if (!s.lo)
		return -ENOSPC;
	/* a failed probe after the best fit overwrote dst */
	if (!dst_holds_lo) {
		h->compressions++;
		r = ops->compress(ws, level, dst, dst_cap, src, s.lo);
		if (r < 0)
			return r;
		s.lo_out = (size_t)r;
	}
	h->last_in = s.lo;
	h->last_out = s.lo_out;
	*src_len = s.lo;
	return (ssize_t)s.lo_out;
}

uint32_t kiln_lzma_dict_size(uint32_t max_pcluster_size)
{
	uint64_t want = (uint64_t)max_pcluster_size * 4;
	uint32_t dict = 32u * 1024;

	while (dict < want && dict < 8u * 1024 * 1024)
		dict <<= 1;
	return dict;
}
