// SPDX-License-Identifier: MIT
/*
 * Pcluster dedupe: remembers every pcluster written to the image by a
 * hash of its bytes, so an identical pcluster (same stored bytes, same
 * decoded length and format, hence the same decoded data) is referenced
 * instead of written again. Candidates are confirmed byte for byte against
 * the image before they are shared.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "builder/output.h"
#include "builder/zdedupe.h"

struct zdd_entry {
	struct zdd_entry *next;
	uint64_t hash;
	uint64_t pstart;
	uint32_t plen, llen;
	uint8_t fmt;
};

struct kiln_zdedupe {
	struct zdd_entry **bucket;
	size_t nr_buckets;		/* power of two */
	size_t count;
	uint8_t *scratch;		/* read-back buffer */
	size_t scratch_cap;
};

int kiln_zdedupe_new(struct kiln_zdedupe **out)
{
	struct kiln_zdedupe *dd = calloc(1, sizeof(*dd));

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

void kiln_zdedupe_free(struct kiln_zdedupe *dd)
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
	free(dd->scratch);
	free(dd);
}

static uint64_t zdd_hash(const void *pc, uint32_t plen, uint32_t llen,
			 uint8_t fmt)
{
	return XXH3_64bits_withSeed(pc, plen, (uint64_t)llen << 8 | fmt);
}

static int zdd_grow(struct kiln_zdedupe *dd)
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

int kiln_zdedupe_find(struct kiln_zdedupe *dd, struct kiln_out *out,
		      const void *pc, uint32_t plen, uint32_t llen,
		      uint8_t fmt, uint64_t *pstart)
{
	uint64_t h = zdd_hash(pc, plen, llen, fmt);
	int err;

	for (struct zdd_entry *e = dd->bucket[h & (dd->nr_buckets - 1)]; e;
	     e = e->next) {
		if (e->hash != h || e->plen != plen || e->llen != llen ||
		    e->fmt != fmt)
			continue;
		if (dd->scratch_cap < plen) {
			uint8_t *s = realloc(dd->scratch, plen);

			if (!s)
				return -ENOMEM;
			dd->scratch = s;
			dd->scratch_cap = plen;
		}
		err = kiln_out_pread(out, dd->scratch, plen, e->pstart);
		if (err)
			return err;
		if (!memcmp(dd->scratch, pc, plen)) {
			*pstart = e->pstart;
			return 1;
		}
	}
	return 0;
}

int kiln_zdedupe_add(struct kiln_zdedupe *dd, const void *pc, uint32_t plen,
		     uint32_t llen, uint8_t fmt, uint64_t pstart)
{
	struct zdd_entry *e;
	int err;

	if (dd->count >= dd->nr_buckets) {
		err = zdd_grow(dd);
		if (err)
			return err;
	}
	e = malloc(sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->hash = zdd_hash(pc, plen, llen, fmt);
	e->pstart = pstart;
	e->plen = plen;
	e->llen = llen;
	e->fmt = fmt;
	e->next = dd->bucket[e->hash & (dd->nr_buckets - 1)];
	dd->bucket[e->hash & (dd->nr_buckets - 1)] = e;
	dd->count++;
	return 0;
}
