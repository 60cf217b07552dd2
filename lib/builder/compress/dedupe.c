// SPDX-License-Identifier: MIT
/*
 * Dedupe table: every pcluster and every run of uncompressed file data
 * written to the image, by a hash of its bytes, so identical data (same
 * stored bytes, same decoded length and format, hence the same decoded
 * data) is referenced instead of written again. Hashes come from the
 * workers; candidates are confirmed byte for byte before they are shared.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "builder/compress/dedupe.h"
#include "builder/output.h"
#include "util/grow.h"

/* fmt of an entry that is uncompressed file data, not a pcluster */
#define ZDD_FLAT	0xFFu

struct zdd_entry {
	struct zdd_entry *next;
	uint64_t hash;
	uint64_t pstart;	/* pending: relative to the commit buffer */
	uint64_t len;		/* stored bytes */
	uint32_t llen;
	uint8_t fmt;
	bool pending;
};

struct kiln_dedupe {
	struct zdd_entry **bucket;
	size_t nr_buckets;		/* power of two */
	size_t count;
	struct zdd_entry **pending;	/* added since the last settle */
	size_t nr_pending, cap_pending;
	uint8_t *scratch;		/* read-back buffer */
	size_t scratch_cap;
	uint64_t saved;
};

int kiln_dedupe_new(struct kiln_dedupe **out)
{
	struct kiln_dedupe *dd = calloc(1, sizeof(*dd));

	*out = NULL;
	if (!dd)
		return -ENOMEM;
	dd->nr_buckets = 1024;
	dd->bucket = calloc(dd->nr_buckets, sizeof(*dd->bucket));
	if (!dd->bucket) {
		free(dd);
		return -ENOMEM;
	}
	*out = dd;
	return 0;
}

void kiln_dedupe_free(struct kiln_dedupe *dd)
{
	if (!dd)
		return;
	for (size_t i = 0; i < dd->nr_buckets; i++) {
		struct zdd_entry *e = dd->bucket[i], *n;

		for (; e; e = n) {
			n = e->next;
			free(e);
		}
	}
	free(dd->bucket);
	free(dd->pending);
	free(dd->scratch);
	free(dd);
}

uint64_t kiln_dedupe_saved(const struct kiln_dedupe *dd)
{
	return dd ? dd->saved : 0;
}

uint64_t kiln_dedupe_hash(const void *pc, uint32_t plen, uint32_t llen,
			   uint8_t fmt)
{
	return XXH3_64bits_withSeed(pc, plen, (uint64_t)llen << 8 | fmt);
}

static int zdd_grow(struct kiln_dedupe *dd)
{
	size_t n = dd->nr_buckets * 2;
	struct zdd_entry **b = calloc(n, sizeof(*b));

	if (!b)
		return -ENOMEM;
	for (size_t i = 0; i < dd->nr_buckets; i++) {
		struct zdd_entry *e = dd->bucket[i], *next;

		for (; e; e = next) {
			next = e->next;
			e->next = b[e->hash & (n - 1)];
			b[e->hash & (n - 1)] = e;
		}
	}
	free(dd->bucket);
	dd->bucket = b;
	dd->nr_buckets = n;
	return 0;
}

static struct zdd_entry *zdd_insert(struct kiln_dedupe *dd, uint64_t hash,
				    uint64_t len, uint32_t llen, uint8_t fmt,
				    uint64_t pstart)
{
	struct zdd_entry *e;

	if (dd->count >= dd->nr_buckets && zdd_grow(dd))
		return NULL;
	e = malloc(sizeof(*e));
	if (!e)
		return NULL;
	e->hash = hash;
	e->pstart = pstart;
	e->len = len;
	e->llen = llen;
	e->fmt = fmt;
	e->pending = false;
	e->next = dd->bucket[hash & (dd->nr_buckets - 1)];
	dd->bucket[hash & (dd->nr_buckets - 1)] = e;
	dd->count++;
	return e;
}

/* 1 when the @len bytes at image byte @pstart equal @pc, 0 if not. */
static int zdd_same_in_image(struct kiln_dedupe *dd, struct kiln_out *out,
			     uint64_t pstart, const void *pc, uint32_t len)
{
	int err;

	if (dd->scratch_cap < len) {
		uint8_t *s = realloc(dd->scratch, len);

		if (!s)
			return -ENOMEM;
		dd->scratch = s;
		dd->scratch_cap = len;
	}
	err = kiln_out_pread(out, dd->scratch, len, pstart);
	if (err)
		return err;
	return !memcmp(dd->scratch, pc, len);
}

int kiln_dedupe_find(struct kiln_dedupe *dd, struct kiln_out *out,
		      const uint8_t *local, const void *pc, uint32_t plen,
		      uint32_t llen, uint8_t fmt, uint64_t hash,
		      uint64_t *pstart, bool *pending)
{
	for (struct zdd_entry *e = dd->bucket[hash & (dd->nr_buckets - 1)]; e;
	     e = e->next) {
		int same;

		if (e->hash != hash || e->len != plen || e->llen != llen ||
		    e->fmt != fmt)
			continue;
		if (e->pending)
			same = local && !memcmp(local + e->pstart, pc, plen);
		else
			same = zdd_same_in_image(dd, out, e->pstart, pc, plen);
		if (same < 0)
			return same;
		if (same) {
			*pstart = e->pstart;
			*pending = e->pending;
			dd->saved += plen;
			return 1;
		}
	}
	return 0;
}

int kiln_dedupe_add_pending(struct kiln_dedupe *dd, uint32_t plen,
			     uint32_t llen, uint8_t fmt, uint64_t hash,
			     uint64_t rel)
{
	struct zdd_entry *e;

	if (KILN_GROW(dd->pending, dd->cap_pending, dd->nr_pending + 1))
		return -ENOMEM;
	e = zdd_insert(dd, hash, plen, llen, fmt, rel);
	if (!e)
		return -ENOMEM;
	e->pending = true;
	dd->pending[dd->nr_pending++] = e;
	return 0;
}

void kiln_dedupe_settle(struct kiln_dedupe *dd, uint64_t base)
{
	for (size_t i = 0; i < dd->nr_pending; i++) {
		dd->pending[i]->pstart += base;
		dd->pending[i]->pending = false;
	}
	dd->nr_pending = 0;
}

int kiln_dedupe_find_flat(struct kiln_dedupe *dd, uint64_t len,
			   uint64_t hash,
			   int (*same)(void *ctx, uint64_t pstart), void *ctx,
			   uint64_t *pstart)
{
	for (struct zdd_entry *e = dd->bucket[hash & (dd->nr_buckets - 1)]; e;
	     e = e->next) {
		int r;

		if (e->hash != hash || e->len != len || e->fmt != ZDD_FLAT ||
		    e->pending)
			continue;
		r = same(ctx, e->pstart);
		if (r < 0)
			return r;
		if (r) {
			*pstart = e->pstart;
			dd->saved += len;
			return 1;
		}
	}
	return 0;
}

int kiln_dedupe_add_flat(struct kiln_dedupe *dd, uint64_t len,
			  uint64_t hash, uint64_t pstart)
{
	return zdd_insert(dd, hash, len, 0, ZDD_FLAT, pstart) ? 0 : -ENOMEM;
}
