/* SPDX-License-Identifier: MIT */
/*
 * Overflow-checked arithmetic and range checks: the one place the reader's
 * bounds checks are spelled.
 */
#ifndef KILN_UTIL_CHECKED_H
#define KILN_UTIL_CHECKED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* *@res = @a + @b; true on overflow. */
#define kiln_add_overflow(a, b, res) __builtin_add_overflow(a, b, res)
#define kiln_mul_overflow(a, b, res) __builtin_mul_overflow(a, b, res)

/* True when [@off, @off + @len) lies inside [0, @size). */
static inline bool kiln_range_ok(uint64_t off, uint64_t len, uint64_t size)
{
	return off <= size && len <= size - off;
}

static inline uint64_t kiln_round_up(uint64_t x, uint64_t a)
{
	return (x + a - 1) / a * a;
}

static inline uint64_t kiln_div_round_up(uint64_t x, uint64_t d)
{
	return x / d + (x % d != 0);
}

#define KILN_MIN(a, b) ((a) < (b) ? (a) : (b))
#define KILN_MAX(a, b) ((a) > (b) ? (a) : (b))
#define KILN_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif
