/* SPDX-License-Identifier: MIT */
/*
 * A hash map from nid to a 64-bit value, for walks that must remember the
 * inodes they met (fsck's link counts, extract's hardlink sources).
 */
#ifndef KILN_UTIL_NIDMAP_H
#define KILN_UTIL_NIDMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <kiln/kiln.h>

struct kiln_nidmap_slot {
	kiln_nid_t nid;
	uint64_t val;
	bool used;
};

struct kiln_nidmap {
	struct kiln_nidmap_slot *slots;
	size_t cap;			/* power of two, or 0 */
	size_t count;
};

void kiln_nidmap_init(struct kiln_nidmap *m);
void kiln_nidmap_release(struct kiln_nidmap *m);

/* The value stored for @nid, or NULL. Valid until the next insert. */
uint64_t *kiln_nidmap_get(const struct kiln_nidmap *m, kiln_nid_t nid);

/*
 * Find or add @nid (a new entry's value is 0); sets *@val to its value and
 * *@existed. Returns 0 or -ENOMEM. The pointer is valid until the next
 * insert.
 */
int kiln_nidmap_insert(struct kiln_nidmap *m, kiln_nid_t nid, uint64_t **val,
		       bool *existed);

/* Iterate: start with *@pos = 0; NULL at the end. */
struct kiln_nidmap_slot *kiln_nidmap_next(const struct kiln_nidmap *m,
					  size_t *pos);

#endif
