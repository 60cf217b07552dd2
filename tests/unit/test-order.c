// SPDX-License-Identifier: MIT
/*
 * Tests for lib/builder/order.c: the similarity order of the files that
 * go whole into the packed inode (suffix, content fingerprint, path).
 */
#include <stdlib.h>
#include <string.h>

#include "builder/internal.h"
#include "tap.h"

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		p[i] = (uint8_t)(seed >> 16);
	}
}

static void suffix_of(const char *name, const char *want)
{
	const char *s;
	size_t len;

	kiln_order_suffix(name, strlen(name), &s, &len);
	CHECK_EQ(len, strlen(want));
	CHECK(!memcmp(s, want, len));
}

TEST(the_suffix_is_what_follows_the_last_dot)
{
	suffix_of("main.c", "c");
	suffix_of("archive.tar.gz", "gz");
	suffix_of("Makefile", "Makefile");
	suffix_of(".gitignore", ".gitignore");
	suffix_of("trailing.", "");
}

TEST(the_fingerprint_is_a_function_of_the_bytes)
{
	uint8_t a[4096], b[4096];

	fill(a, sizeof(a), 7);
	memcpy(b, a, sizeof(b));
	CHECK_EQ(kiln_order_fingerprint(a, sizeof(a)),
		 kiln_order_fingerprint(b, sizeof(b)));
	CHECK_EQ(kiln_order_fingerprint(a, 3), kiln_order_fingerprint(b, 3));
	CHECK_EQ(kiln_order_fingerprint(a, 0), 0);
}

TEST(files_that_share_most_bytes_share_a_fingerprint)
{
	uint8_t a[4096], b[4096], c[4096];
	unsigned int same = 0, other = 0;

	for (uint32_t seed = 1; seed <= 64; seed++) {
		fill(a, sizeof(a), seed);
		memcpy(b, a, sizeof(b));
		/* a few edits in the middle: most 8-grams are untouched */
		b[1000] ^= 0x55;
		b[2000] ^= 0x55;
		b[3000] ^= 0x55;
		fill(c, sizeof(c), seed + 1000);
		same += kiln_order_fingerprint(a, sizeof(a)) ==
			kiln_order_fingerprint(b, sizeof(b));
		other += kiln_order_fingerprint(a, sizeof(a)) ==
			 kiln_order_fingerprint(c, sizeof(c));
	}
	CHECK(same >= 56);
	CHECK_EQ(other, 0);
}

/* Keys in @k named by suffix and fingerprint, pos = index. */
static void key(struct kiln_order_key *k, size_t pos, const char *suffix,
		uint64_t fp)
{
	k->suffix = suffix;
	k->suffix_len = strlen(suffix);
	k->fp = fp;
	k->pos = pos;
	k->node = NULL;
}

TEST(suffixes_group_first_and_ties_keep_path_order)
{
	struct kiln_order_key k[6];
	static const size_t want[6] = { 1, 4, 0, 2, 5, 3 };

	/* one fingerprint for all: only the suffix and the path decide */
	key(&k[0], 0, "h", 9);
	key(&k[1], 1, "c", 9);
	key(&k[2], 2, "h", 9);
	key(&k[3], 3, "txt", 9);
	key(&k[4], 4, "c", 9);
	key(&k[5], 5, "h", 9);
	kiln_order_sort(k, 6);
	for (size_t i = 0; i < 6; i++)
		CHECK_EQ(k[i].pos, want[i]);
}

TEST(a_shared_fingerprint_groups_files_of_a_suffix)
{
	enum { N = 64 };
	struct kiln_order_key k[N];
	size_t first = N, last = 0, prev = 0;

	/* every other file is alike: they come out as one run */
	for (size_t i = 0; i < N; i++)
		key(&k[i], i, "c", i % 2 ? 42 : 1000 + i);
	kiln_order_sort(k, N);
	for (size_t i = 0; i < N; i++) {
		if (k[i].pos % 2) {
			first = i < first ? i : first;
			last = i;
		}
	}
	CHECK_EQ(last - first + 1, N / 2);
	/* inside the run, and among the files alike to none: path order */
	for (size_t i = first + 1; i <= last; i++)
		CHECK(k[i].pos > k[i - 1].pos);
	for (size_t i = 0; i < N; i++) {
		if (k[i].pos % 2)
			continue;
		CHECK(!prev || k[i].pos > prev);
		prev = k[i].pos;
	}
}

TEST(the_order_does_not_depend_on_the_input_order)
{
	enum { N = 200 };
	struct kiln_order_key a[N], b[N];
	static const char *const sfx[] = { "c", "h", "rst", "Makefile" };

	for (size_t i = 0; i < N; i++)
		key(&a[i], i, sfx[(i * 7) % 4], (i * 2654435761u) % 5);
	/* the same keys, reversed */
	for (size_t i = 0; i < N; i++)
		b[i] = a[N - 1 - i];
	kiln_order_sort(a, N);
	kiln_order_sort(b, N);
	for (size_t i = 0; i < N; i++)
		CHECK_EQ(a[i].pos, b[i].pos);
}

TAP_MAIN(TAP_ENTRY(the_suffix_is_what_follows_the_last_dot),
	 TAP_ENTRY(the_fingerprint_is_a_function_of_the_bytes),
	 TAP_ENTRY(files_that_share_most_bytes_share_a_fingerprint),
	 TAP_ENTRY(suffixes_group_first_and_ties_keep_path_order),
	 TAP_ENTRY(a_shared_fingerprint_groups_files_of_a_suffix),
	 TAP_ENTRY(the_order_does_not_depend_on_the_input_order))
