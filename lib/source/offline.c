// SPDX-License-Identifier: MIT
/*
 * A remote image with no network (--offline): its size and identity come
 * from the cache, and every byte the cache lacks is an I/O error.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "source/cache.h"
#include "source/source.h"

static int offline_fetch(struct kiln_source *src, void *dst, size_t len,
			 uint64_t off)
{
	(void)dst;
	kiln_log(src->lg, KILN_LOG_ERROR,
		 "offline: bytes %" PRIu64 "-%" PRIu64 " are not in the cache",
		 off, off + len - 1);
	return -EIO;
}

static void offline_close(struct kiln_source *src)
{
	free(src);
}

static const struct kiln_source_ops offline_ops = {
	.fetch = offline_fetch,
	.close = offline_close,
};

int kiln_source_open_offline(struct kiln_source **out, const char *url,
			     const char *cache_dir, uint32_t unit,
			     const struct kiln_logger *lg)
{
	struct kiln_source *src;
	char *identity;
	uint64_t size;

	*out = NULL;
	if (kiln_cache_known(cache_dir, url, unit, &identity, &size)) {
		kiln_log(lg, KILN_LOG_ERROR,
			 "offline: the cache holds nothing of this image");
		return -EIO;
	}
	src = calloc(1, sizeof(*src));
	if (!src) {
		free(identity);
		return -ENOMEM;
	}
	src->ops = &offline_ops;
	src->lg = lg;
	src->size = size;
	snprintf(src->identity, sizeof(src->identity), "%s", identity);
	free(identity);
	*out = src;
	return 0;
}
