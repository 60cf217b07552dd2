/* SPDX-License-Identifier: MIT */
/*
 * The image's decompressed-extent cache: a bounded LRU of decoded
 * pclusters keyed by physical address, shared by every reader thread.
 */
#ifndef KILN_READER_ZCACHE_H
#define KILN_READER_ZCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kiln_zcache;
struct kiln_zcache_entry;

/* The identity of a decoded pcluster. */
struct kiln_zcache_key {
	uint64_t pa;		/* pcluster byte address */
	uint32_t plen;
	uint8_t alg;
};

/* A cache holding at most @budget bytes of decoded data. */
int kiln_zcache_new(size_t budget, struct kiln_zcache **out);
void kiln_zcache_free(struct kiln_zcache *c);

/*
 * Copy decoded bytes [@off, @off + @len) of @key into @dst if the cache
 * holds them. Returns true on a hit. Thread-safe.
 */
bool kiln_zcache_read(struct kiln_zcache *c, const struct kiln_zcache_key *key,
		      uint64_t off, void *dst, size_t len);

/*
 * Take a private buffer of at least @len bytes to decode into, evicting
 * least recently used entries (and reusing their buffers) to stay within
 * budget. NULL when @len is too big to be worth caching or memory is
 * short: decode elsewhere. *@data is the buffer.
 */
struct kiln_zcache_entry *kiln_zcache_reserve(struct kiln_zcache *c,
					      size_t len, uint8_t **data);
/* Make a filled reserved buffer visible as @len decoded bytes of @key. */
void kiln_zcache_publish(struct kiln_zcache *c, struct kiln_zcache_entry *e,
			 const struct kiln_zcache_key *key, size_t len);
/* Give back a reserved buffer that could not be filled. */
void kiln_zcache_abort(struct kiln_zcache *c, struct kiln_zcache_entry *e);

struct kiln_zcache_stats {
	uint64_t hits, misses, inserts, evictions;
	size_t used;		/* bytes of buffers, reserved ones included */
};

void kiln_zcache_get_stats(struct kiln_zcache *c, struct kiln_zcache_stats *st);

#endif
