// SPDX-License-Identifier: MIT
/*
 * Tests for lib/util/u64map.c: lookups through collisions, growth, removal
 * that keeps every probe chain intact, and out of memory reported apart
 * from "present".
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "util/u64map.h"
#include "failalloc.h"
#include "tap.h"

/* The slot @key lands in when it is alone in a map of 256 slots. */
static size_t home_slot(uint64_t key)
{
	struct kiln_u64map m;
	size_t slot = SIZE_MAX;

	kiln_u64map_init(&m);
	if (kiln_u64map_insert(&m, key, NULL) == 1)
		slot = (size_t)(kiln_u64map_get(&m, key) - &m.ents[0].val) /
		       (sizeof(m.ents[0]) / sizeof(uint64_t));
	kiln_u64map_release(&m);
	return slot;
}

/* @n keys sharing one home slot, found by trying 0, 1, 2... */
static size_t colliding_keys(uint64_t *keys, size_t n)
{
	size_t home = home_slot(0), got = 1;

	keys[0] = 0;
	for (uint64_t k = 1; got < n && k < 1000000; k++)
		if (home_slot(k) == home)
			keys[got++] = k;
	return got;
}

TEST(insert_get_and_present)
{
	struct kiln_u64map m;
	uint64_t *v, *w;

	kiln_u64map_init(&m);
	CHECK(kiln_u64map_get(&m, 5) == NULL);
	CHECK_EQ(kiln_u64map_insert(&m, 5, &v), 1);
	CHECK_EQ(*v, 0);
	*v = 42;
	CHECK_EQ(kiln_u64map_insert(&m, 5, &w), 0);
	CHECK(w == v);
	CHECK_EQ(*w, 42);
	CHECK_EQ(kiln_u64map_insert(&m, 0, NULL), 1);
	CHECK_EQ(kiln_u64map_insert(&m, UINT64_MAX, NULL), 1);
	CHECK(kiln_u64map_get(&m, 0) != NULL);
	CHECK(kiln_u64map_get(&m, UINT64_MAX) != NULL);
	CHECK(kiln_u64map_get(&m, 6) == NULL);
	CHECK_EQ(m.count, 3);
	kiln_u64map_release(&m);
	CHECK(m.ents == NULL && m.count == 0);
}

TEST(collisions_are_all_found)
{
	uint64_t keys[8];
	struct kiln_u64map m;
	size_t n = colliding_keys(keys, 8);

	CHECK_EQ(n, 8);
	kiln_u64map_init(&m);
	for (size_t i = 0; i < n; i++) {
		uint64_t *v;

		CHECK_EQ(kiln_u64map_insert(&m, keys[i], &v), 1);
		*v = i + 100;
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t *v = kiln_u64map_get(&m, keys[i]);

		CHECK(v && *v == i + 100);
	}
	kiln_u64map_release(&m);
}

TEST(growth_keeps_entries_and_load)
{
	struct kiln_u64map m;
	size_t seen = 0, pos = 0;
	struct kiln_u64map_ent *e;

	kiln_u64map_init(&m);
	for (uint64_t k = 0; k < 100000; k++) {
		uint64_t *v;

		/* dense and strided keys alike */
		if (kiln_u64map_insert(&m, k * 4096, &v) != 1)
			break;
		*v = k;
	}
	CHECK_EQ(m.count, 100000);
	CHECK((m.cap & (m.cap - 1)) == 0);
	CHECK(m.count * 2 <= m.cap);
	for (uint64_t k = 0; k < 100000; k++) {
		uint64_t *v = kiln_u64map_get(&m, k * 4096);

		if (!v || *v != k) {
			CHECK(v && *v == k);
			break;
		}
	}
	while ((e = kiln_u64map_next(&m, &pos)))
		seen += e->key == e->val * 4096;
	CHECK_EQ(seen, 100000);
	kiln_u64map_release(&m);
}

TEST(remove_keeps_probe_chains)
{
	uint64_t keys[8];
	struct kiln_u64map m;
	size_t n = colliding_keys(keys, 8);

	kiln_u64map_init(&m);
	for (size_t i = 0; i < n; i++)
		kiln_u64map_insert(&m, keys[i], NULL);
	CHECK_EQ(kiln_u64map_remove(&m, keys[2]), 1);
	CHECK_EQ(kiln_u64map_remove(&m, keys[2]), 0);
	CHECK_EQ(kiln_u64map_remove(&m, 123456789), 0);
	CHECK(kiln_u64map_get(&m, keys[2]) == NULL);
	for (size_t i = 0; i < n; i++)
		if (i != 2)
			CHECK(kiln_u64map_get(&m, keys[i]) != NULL);
	CHECK_EQ(kiln_u64map_remove(&m, keys[0]), 1);
	for (size_t i = 1; i < n; i++)
		if (i != 2)
			CHECK(kiln_u64map_get(&m, keys[i]) != NULL);
	CHECK_EQ(m.count, n - 2);
	CHECK_EQ(kiln_u64map_insert(&m, keys[2], NULL), 1);
	CHECK_EQ(m.count, n - 1);
	kiln_u64map_release(&m);
}

TEST(random_operations_match_a_reference)
{
	enum { RANGE = 2048 };
	static bool ref[RANGE];
	struct kiln_u64map m;
	uint64_t x = 88172645463325252ull;
	size_t count = 0, wrong = 0;

	kiln_u64map_init(&m);
	for (int i = 0; i < 200000; i++) {
		uint64_t k;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		k = x % RANGE;
		if (x & (1ull << 40)) {
			wrong += kiln_u64map_insert(&m, k * 31, NULL) != !ref[k];
			count += !ref[k];
			ref[k] = true;
		} else {
			wrong += kiln_u64map_remove(&m, k * 31) != ref[k];
			count -= ref[k];
			ref[k] = false;
		}
	}
	for (uint64_t k = 0; k < RANGE; k++)
		wrong += (kiln_u64map_get(&m, k * 31) != NULL) != ref[k];
	CHECK_EQ(wrong, 0);
	CHECK_EQ(m.count, count);
	kiln_u64map_release(&m);
}

TEST(out_of_memory_is_not_present)
{
	struct kiln_u64map m;
	uint64_t *v;
	size_t cap;
	int err;

	kiln_u64map_init(&m);
	/* the first insert allocates: failing, the map stays empty */
	failalloc_after = 0;
	err = kiln_u64map_insert(&m, 1, &v);
	failalloc_after = -1;
	CHECK_EQ(err, -ENOMEM);
	CHECK_EQ(m.count, 0);
	CHECK(kiln_u64map_get(&m, 1) == NULL);
	/* fill up to the point where the next new key must grow the table */
	for (uint64_t k = 0; (m.count + 1) * 2 <= m.cap || !m.cap; k++)
		kiln_u64map_insert(&m, k, NULL);
	cap = m.cap;
	failalloc_after = 0;
	err = kiln_u64map_insert(&m, 1u << 30, NULL);
	CHECK_EQ(err, -ENOMEM);
	CHECK_EQ(kiln_u64map_insert(&m, 3, &v), 0);	/* present: no alloc */
	failalloc_after = -1;
	CHECK_EQ(m.cap, cap);
	CHECK(kiln_u64map_get(&m, 1u << 30) == NULL);
	CHECK_EQ(kiln_u64map_insert(&m, 1u << 30, NULL), 1);
	/* a size that cannot be allocated is ENOMEM without allocating */
	CHECK_EQ(kiln_u64map_reserve(&m, SIZE_MAX / 2), -ENOMEM);
	CHECK(kiln_u64map_get(&m, 3) != NULL);
	kiln_u64map_release(&m);
}

TAP_MAIN(TAP_ENTRY(insert_get_and_present),
	 TAP_ENTRY(collisions_are_all_found),
	 TAP_ENTRY(growth_keeps_entries_and_load),
	 TAP_ENTRY(remove_keeps_probe_chains),
	 TAP_ENTRY(random_operations_match_a_reference),
	 TAP_ENTRY(out_of_memory_is_not_present))
