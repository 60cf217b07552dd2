// SPDX-License-Identifier: MIT
/* Growing arrays by doubling, with the size arithmetic checked. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/grow.h"

#define GROW_MIN_ELEMS	16

int kiln_grow(void *arrp, size_t *cap, size_t need, size_t elem)
{
	size_t ncap = *cap;
	void *arr, *p;

	if (need <= *cap)
		return 0;
	if (!elem || need > SIZE_MAX / elem)
		return -ENOMEM;
	if (ncap < GROW_MIN_ELEMS)
		ncap = GROW_MIN_ELEMS;
	else if (ncap <= SIZE_MAX / 2 / elem)
		ncap *= 2;
	if (ncap < need || ncap > SIZE_MAX / elem)
		ncap = need;
	/* arrp points to a pointer of any object type: copy it as bytes */
	memcpy(&arr, arrp, sizeof(arr));
	p = realloc(arr, ncap * elem);
	if (!p)
		return -ENOMEM;
	memcpy(arrp, &p, sizeof(p));
	*cap = ncap;
	return 0;
}
