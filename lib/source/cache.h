/* SPDX-License-Identifier: MIT */
/* The on-disk chunk cache of remote images (cache.c). */
#ifndef KILN_SOURCE_CACHE_H
#define KILN_SOURCE_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <kiln/remote.h>

#include "util/log.h"

struct kiln_cache;

/* $XDG_CACHE_HOME/kiln, else ~/.cache/kiln, else /var/tmp/kiln (to free). */
char *kiln_cache_default_dir(void);

/*
 * The chunks of the object @url showed as @identity, in units of @unit
 * bytes, under @dir (NULL: the default), at most @cap bytes in all
 * (0: 4 GiB). Fails (logged as a warning) when the directory cannot be
 * used: the image is then read without a cache.
 */
int kiln_cache_open(struct kiln_cache **out, const char *dir,
		    const char *url, const char *identity, uint32_t unit,
		    uint64_t cap, const struct kiln_logger *lg);
/*
 * The identity recorded for @url and @unit under @dir, for an offline
 * open: 0 and *@identity (to free) and *@size (not 0), -ENOENT (nothing
 * owned then) or -ENOMEM.
 */
int kiln_cache_known(const char *dir, const char *url, uint32_t unit,
		     char **identity, uint64_t *size);
/*
 * Copy unit @unit (@len bytes) into @dst when the cache holds it whole
 * and its checksum matches: true. A damaged chunk is dropped (logged).
 */
bool kiln_cache_load(struct kiln_cache *c, uint64_t unit, void *dst,
		     size_t len);
/* Keep @len bytes of unit @unit, evicting by age to stay under the cap. */
void kiln_cache_store(struct kiln_cache *c, uint64_t unit, const void *src,
		      size_t len);
/*
 * Claim units [@first, @last] for fetching them: false while another
 * process holds any of them (it will store them; wait and load them).
 * The threads of one process do not exclude each other here.
 */
bool kiln_cache_claim(struct kiln_cache *c, uint64_t first, uint64_t last);
void kiln_cache_unclaim(struct kiln_cache *c, uint64_t first, uint64_t last);
/* Close, adding @counts (may be NULL) to the directory's totals. */
void kiln_cache_close_with(struct kiln_cache *c,
			   const struct kiln_cache_stats *counts);
void kiln_cache_close(struct kiln_cache *c);

#endif
