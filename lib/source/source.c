// SPDX-License-Identifier: MIT
/* What every source shares: batches of ranges, and closing. */
#include "source/source.h"

int kiln_source_fetch_many(struct kiln_source *src, struct kiln_fetch *f,
			   unsigned int n)
{
	int first = 0;

	if (n > 1 && src->ops->fetch_many)
		return src->ops->fetch_many(src, f, n);
	for (unsigned int i = 0; i < n; i++) {
		f[i].err = src->ops->fetch(src, f[i].dst, f[i].len, f[i].off);
		if (f[i].err && !first)
			first = f[i].err;
	}
	return first;
}

void kiln_source_close(struct kiln_source *src)
{
	if (src)
		src->ops->close(src);
}
