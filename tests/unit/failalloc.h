/* SPDX-License-Identifier: MIT */
/*
 * A failing allocator for the tests of ENOMEM paths: link the test with
 * -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc and set failalloc_after
 * to the number of allocations that still succeed (-1: all do).
 */
#ifndef KILN_TESTS_FAILALLOC_H
#define KILN_TESTS_FAILALLOC_H

#include <stddef.h>

static long failalloc_after = -1;
static long failalloc_failed;

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t size);

static int failalloc_now(void)
{
	if (failalloc_after < 0)
		return 0;
	if (failalloc_after == 0) {
		failalloc_failed++;
		return 1;
	}
	failalloc_after--;
	return 0;
}

void *__wrap_malloc(size_t size)
{
	return failalloc_now() ? NULL : __real_malloc(size);
}

void *__wrap_calloc(size_t n, size_t size)
{
	return failalloc_now() ? NULL : __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t size)
{
	return failalloc_now() ? NULL : __real_realloc(p, size);
}

#endif
