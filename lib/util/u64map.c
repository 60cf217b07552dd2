// SPDX-License-Identifier: MIT
/* A hash map from a 64-bit key to a 64-bit value (open addressing). */
#include <errno.h>
#include <stdlib.h>

#include "util/u64map.h"

#define U64MAP_MIN_CAP	256

void kiln_u64map_init(struct kiln_u64map *m)
{
	m->ents = NULL;
	m->cap = 0;
	m->count = 0;
}

void kiln_u64map_release(struct kiln_u64map *m)
{
	free(m->ents);
	kiln_u64map_init(m);
}

static size_t key_hash(uint64_t key)
{
	/* keys are often small and dense (nids, inode numbers): spread them */
	uint64_t h = key * 0x9E3779B97F4A7C15ull;

	return (size_t)(h ^ (h >> 29));
}

static size_t find_slot(const struct kiln_u64map_ent *ents, size_t cap,
			uint64_t key)
{
	size_t i = key_hash(key) & (cap - 1);

	while (ents[i].used && ents[i].key != key)
		i = (i + 1) & (cap - 1);
	return i;
}

uint64_t *kiln_u64map_get(const struct kiln_u64map *m, uint64_t key)
{
	struct kiln_u64map_ent *e;

	if (!m->cap)
		return NULL;
	e = &m->ents[find_slot(m->ents, m->cap, key)];
	return e->used ? &e->val : NULL;
}

static int rehash(struct kiln_u64map *m, size_t cap)
{
	struct kiln_u64map_ent *ents = calloc(cap, sizeof(*ents));

	if (!ents)
		return -ENOMEM;
	for (size_t i = 0; i < m->cap; i++) {
		if (m->ents[i].used)
			ents[find_slot(ents, cap, m->ents[i].key)] = m->ents[i];
	}
	free(m->ents);
	m->ents = ents;
	m->cap = cap;
	return 0;
}

int kiln_u64map_reserve(struct kiln_u64map *m, size_t n)
{
	size_t cap = m->cap ? m->cap : U64MAP_MIN_CAP;

	/* keep the load factor at or below 1/2 */
	if (n > SIZE_MAX / 2 / sizeof(struct kiln_u64map_ent))
		return -ENOMEM;
	while (cap < n * 2)
		cap *= 2;
	return cap == m->cap ? 0 : rehash(m, cap);
}

int kiln_u64map_insert(struct kiln_u64map *m, uint64_t key, uint64_t **val)
{
	struct kiln_u64map_ent *e;

	if (m->cap) {
		e = &m->ents[find_slot(m->ents, m->cap, key)];
		if (e->used) {
			if (val)
				*val = &e->val;
			return 0;
		}
	}
	if ((m->count + 1) * 2 > m->cap) {
		int err = kiln_u64map_reserve(m, m->count + 1);

		if (err)
			return err;
	}
	e = &m->ents[find_slot(m->ents, m->cap, key)];
	e->used = true;
	e->key = key;
	e->val = 0;
	m->count++;
	if (val)
		*val = &e->val;
	return 1;
}

int kiln_u64map_remove(struct kiln_u64map *m, uint64_t key)
{
	size_t mask = m->cap - 1, hole, i;

	if (!m->cap)
		return 0;
	hole = find_slot(m->ents, m->cap, key);
	if (!m->ents[hole].used)
		return 0;
	/*
	 * Close the hole: move back each later entry of the run whose home
	 * slot is not between the hole and its own slot (cyclically), so no
	 * probe sequence crosses an empty slot before its key.
	 */
	for (i = (hole + 1) & mask; m->ents[i].used; i = (i + 1) & mask) {
		size_t home = key_hash(m->ents[i].key) & mask;

		if (((i - home) & mask) >= ((i - hole) & mask)) {
			m->ents[hole] = m->ents[i];
			hole = i;
		}
	}
	m->ents[hole].used = false;
	m->count--;
	return 1;
}

struct kiln_u64map_ent *kiln_u64map_next(const struct kiln_u64map *m,
					 size_t *pos)
{
	while (*pos < m->cap) {
		struct kiln_u64map_ent *e = &m->ents[(*pos)++];

		if (e->used)
			return e;
	}
	return NULL;
}
