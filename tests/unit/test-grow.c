// SPDX-License-Identifier: MIT
/* Tests for lib/util/grow.c: doubling, contents kept, overflow, ENOMEM. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "util/grow.h"
#include "failalloc.h"
#include "tap.h"

struct rec {
	uint32_t a, b, c;
};

TEST(grows_from_empty_and_doubles)
{
	struct rec *v = NULL;
	size_t cap = 0;

	CHECK_EQ(KILN_GROW(v, cap, 0), 0);
	CHECK(v == NULL && cap == 0);
	CHECK_EQ(KILN_GROW(v, cap, 1), 0);
	CHECK(v != NULL);
	CHECK_EQ(cap, 16);
	CHECK_EQ(KILN_GROW(v, cap, 16), 0);	/* fits: unchanged */
	CHECK_EQ(cap, 16);
	CHECK_EQ(KILN_GROW(v, cap, 17), 0);
	CHECK_EQ(cap, 32);
	CHECK_EQ(KILN_GROW(v, cap, 1000), 0);	/* more than double */
	CHECK_EQ(cap, 1000);
	free(v);
}

TEST(contents_survive_growth)
{
	struct rec *v = NULL;
	size_t cap = 0, nr = 0, bad = 0;

	for (uint32_t i = 0; i < 100000; i++) {
		if (KILN_GROW(v, cap, nr + 1))
			break;
		v[nr++] = (struct rec){ i, i * 3, ~i };
	}
	CHECK_EQ(nr, 100000);
	CHECK(cap >= nr);
	for (uint32_t i = 0; i < nr; i++)
		bad += v[i].a != i || v[i].b != i * 3 || v[i].c != ~i;
	CHECK_EQ(bad, 0);
	free(v);
}

TEST(overflow_is_enomem_and_untouched)
{
	struct rec *v = NULL;
	size_t cap = 0;

	CHECK_EQ(KILN_GROW(v, cap, 4), 0);
	void *before = v;

	CHECK_EQ(KILN_GROW(v, cap, SIZE_MAX / sizeof(*v) + 1), -ENOMEM);
	CHECK_EQ(KILN_GROW(v, cap, SIZE_MAX), -ENOMEM);
	CHECK(v == before);
	CHECK_EQ(cap, 16);
	CHECK_EQ(kiln_grow(&v, &cap, 32, 0), -ENOMEM);
	free(v);
}

TEST(allocation_failure_is_enomem_and_untouched)
{
	uint64_t *v = NULL;
	size_t cap = 0;
	int err;

	CHECK_EQ(KILN_GROW(v, cap, 3), 0);
	v[0] = 7;
	v[2] = 9;
	void *before = v;

	failalloc_after = 0;
	err = KILN_GROW(v, cap, 17);
	failalloc_after = -1;
	CHECK_EQ(err, -ENOMEM);
	CHECK(v == before);
	CHECK_EQ(cap, 16);
	CHECK(v[0] == 7 && v[2] == 9);
	CHECK_EQ(KILN_GROW(v, cap, 17), 0);
	CHECK(v[0] == 7 && v[2] == 9);
	free(v);
}

TAP_MAIN(TAP_ENTRY(grows_from_empty_and_doubles),
	 TAP_ENTRY(contents_survive_growth),
	 TAP_ENTRY(overflow_is_enomem_and_untouched),
	 TAP_ENTRY(allocation_failure_is_enomem_and_untouched))
