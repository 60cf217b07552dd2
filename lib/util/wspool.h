/* SPDX-License-Identifier: MIT */
/*
 * A memory-bounded pool of equal-sized workspaces (codec state, scratch).
 * One workspace is made at creation so progress is always possible; more
 * are made on demand within a count and byte limit; beyond that callers
 * wait for one to come back. kiln_wspool_get() never fails.
 */
#ifndef KILN_UTIL_WSPOOL_H
#define KILN_UTIL_WSPOOL_H

#include <stddef.h>
#include <stdint.h>

struct kiln_wspool;

struct kiln_wspool_opts {
	size_t ws_size;		/* bytes of each workspace: the largest need */
	size_t mem_limit;	/* bytes for all; one workspace is always made */
	unsigned int max_count;	/* 0 = as many as mem_limit allows */
	/*
	 * Optional: prepare a fresh workspace (e.g. create a codec context
	 * in it) / tear it down before it is freed. @init failing at creation
	 * fails kiln_wspool_new(); later it just means waiting instead.
	 */
	int (*init)(void *ctx, void *ws, size_t ws_size);
	void (*fini)(void *ctx, void *ws);
	void *ctx;
};

struct kiln_wspool_stats {
	size_t ws_size;
	unsigned int count;		/* workspaces that exist now */
	unsigned int peak_count;
	size_t peak_bytes;		/* peak_count * ws_size */
	unsigned int in_use;
	uint64_t waits;			/* gets that had to wait */
};

/* Create a pool; 0 and *@out, or -EINVAL / -ENOMEM (also when init fails). */
int kiln_wspool_new(const struct kiln_wspool_opts *opts,
		    struct kiln_wspool **out);
/* Free the pool and its workspaces; none may be out. NULL is a no-op. */
void kiln_wspool_free(struct kiln_wspool *pool);

/*
 * Borrow a workspace (64-byte aligned, ws_size bytes, contents as the last
 * user left them). Waits while all allowed workspaces are in use. Never
 * returns NULL. Thread-safe.
 */
void *kiln_wspool_get(struct kiln_wspool *pool);
/* Give @ws back and wake one waiter. Thread-safe. */
void kiln_wspool_put(struct kiln_wspool *pool, void *ws);

void kiln_wspool_get_stats(struct kiln_wspool *pool,
			   struct kiln_wspool_stats *st);

#endif
