// SPDX-License-Identifier: MIT
/* A hash map from nid to a 64-bit value (open addressing, linear probing). */
#include <errno.h>
#include <stdlib.h>

#include "util/nidmap.h"

void kiln_nidmap_init(struct kiln_nidmap *m)
{
	m->slots = NULL;
	m->cap = 0;
	m->count = 0;
}

void kiln_nidmap_release(struct kiln_nidmap *m)
{
	free(m->slots);
	kiln_nidmap_init(m);
}

static size_t nid_hash(kiln_nid_t nid)
{
	/* nids are 32-byte slot numbers: mix so neighbours spread out */
	uint64_t h = nid * 0x9E3779B97F4A7C15ull;

	return (size_t)(h ^ (h >> 29));
}

static struct kiln_nidmap_slot *find_slot(struct kiln_nidmap_slot *slots,
					  size_t cap, kiln_nid_t nid)
{
	size_t i = nid_hash(nid) & (cap - 1);

	while (slots[i].used && slots[i].nid != nid)
		i = (i + 1) & (cap - 1);
	return &slots[i];
}

uint64_t *kiln_nidmap_get(const struct kiln_nidmap *m, kiln_nid_t nid)
{
	struct kiln_nidmap_slot *s;

	if (!m->cap)
		return NULL;
	s = find_slot(m->slots, m->cap, nid);
	return s->used ? &s->val : NULL;
}

static int grow(struct kiln_nidmap *m)
{
	size_t cap = m->cap ? m->cap * 2 : 256;
	struct kiln_nidmap_slot *slots;

	if (cap < m->cap)
		return -ENOMEM;
	slots = calloc(cap, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	for (size_t i = 0; i < m->cap; i++) {
		if (m->slots[i].used)
			*find_slot(slots, cap, m->slots[i].nid) = m->slots[i];
	}
	free(m->slots);
	m->slots = slots;
	m->cap = cap;
	return 0;
}

int kiln_nidmap_insert(struct kiln_nidmap *m, kiln_nid_t nid, uint64_t **val,
		       bool *existed)
{
	struct kiln_nidmap_slot *s;

	/* keep the load factor at or below 1/2 */
	if ((m->count + 1) * 2 > m->cap) {
		int err = grow(m);

		if (err)
			return err;
	}
	s = find_slot(m->slots, m->cap, nid);
	*existed = s->used;
	if (!s->used) {
		s->used = true;
		s->nid = nid;
		s->val = 0;
		m->count++;
	}
	*val = &s->val;
	return 0;
}

struct kiln_nidmap_slot *kiln_nidmap_next(const struct kiln_nidmap *m,
					  size_t *pos)
{
	while (*pos < m->cap) {
		struct kiln_nidmap_slot *s = &m->slots[(*pos)++];

		if (s->used)
			return s;
	}
	return NULL;
}
