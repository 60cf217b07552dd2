/* SPDX-License-Identifier: MIT */
/*
 * A hash map from a 64-bit key to a 64-bit value (open addressing, linear
 * probing, load factor at most 1/2), for walks that must remember what
 * they met: nids, inode numbers, devices. Not thread-safe.
 */
#ifndef KILN_UTIL_U64MAP_H
#define KILN_UTIL_U64MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kiln_u64map_ent {
	uint64_t key;
	uint64_t val;
	bool used;
};

struct kiln_u64map {
	struct kiln_u64map_ent *ents;
	size_t cap;			/* power of two, or 0 */
	size_t count;
};

void kiln_u64map_init(struct kiln_u64map *m);
void kiln_u64map_release(struct kiln_u64map *m);

/* The value stored for @key, or NULL. Valid until the next insert or remove. */
uint64_t *kiln_u64map_get(const struct kiln_u64map *m, uint64_t key);

/*
 * Find or add @key; a new entry's value is 0. Sets *@val (when @val is not
 * NULL) to the entry's value, valid until the next insert or remove.
 * Returns 1 when @key was added, 0 when it was present, -ENOMEM when it
 * was absent and could not be added (the map is then unchanged).
 */
int kiln_u64map_insert(struct kiln_u64map *m, uint64_t key, uint64_t **val);

/* Remove @key: 1 when it was present, 0 when not. Never allocates. */
int kiln_u64map_remove(struct kiln_u64map *m, uint64_t key);

/* Room for @n entries without allocating again: 0 or -ENOMEM. */
int kiln_u64map_reserve(struct kiln_u64map *m, size_t n);

/*
 * Iterate in slot order (not insertion order): start with *@pos = 0;
 * NULL at the end. No insert or remove while iterating.
 */
struct kiln_u64map_ent *kiln_u64map_next(const struct kiln_u64map *m,
					 size_t *pos);

#endif
