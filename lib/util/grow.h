/* SPDX-License-Identifier: MIT */
/*
 * Growing arrays: the one place an array's capacity is doubled, with the
 * size arithmetic checked.
 */
#ifndef KILN_UTIL_GROW_H
#define KILN_UTIL_GROW_H

#include <stddef.h>

/*
 * Make room for @need elements of @elem bytes in the array at *@arrp
 * (a pointer to the array pointer, which may be NULL), whose capacity is
 * *@cap elements. When @need > *@cap the array is reallocated to the
 * larger of @need and twice *@cap (at least 16 elements) and *@cap is
 * updated; the contents up to the old capacity are kept. Returns 0, or
 * -ENOMEM (out of memory, or the size in bytes would not fit a size_t:
 * the array and *@cap are then untouched).
 */
int kiln_grow(void *arrp, size_t *cap, size_t need, size_t elem);

/* kiln_grow() for an array pointer @arr and its capacity @cap (lvalues). */
#define KILN_GROW(arr, cap, need) \
	kiln_grow(&(arr), &(cap), (need), sizeof(*(arr)))

#endif
