// SPDX-License-Identifier: MIT
/*
 * Workspace pool: a stack of idle workspaces under one mutex, grown on
 * demand within the limits, with a condition variable for waiters.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "util/checked.h"
#include "util/wspool.h"

#define WS_ALIGN	64

struct kiln_wspool {
	pthread_mutex_t lock;
	pthread_cond_t freed;
	size_t ws_size, alloc_size;
	unsigned int max_count;
	unsigned int count, peak_count, nr_idle;
	uint64_t waits;
	int (*init)(void *ctx, void *ws, size_t ws_size);
	void (*fini)(void *ctx, void *ws);
	void *ctx;
	void **idle;		/* max_count slots; [0, nr_idle) are idle */
};

static void *ws_alloc(struct kiln_wspool *pool)
{
	void *ws = aligned_alloc(WS_ALIGN, pool->alloc_size);

	if (!ws)
		return NULL;
	if (pool->init && pool->init(pool->ctx, ws, pool->ws_size)) {
		free(ws);
		return NULL;
	}
	return ws;
}

static void ws_release(struct kiln_wspool *pool, void *ws)
{
	if (pool->fini)
		pool->fini(pool->ctx, ws);
	free(ws);
}

int kiln_wspool_new(const struct kiln_wspool_opts *opts,
		    struct kiln_wspool **out)
{
	struct kiln_wspool *pool;
	size_t by_mem;
	void *first;

	if (!opts->ws_size || opts->ws_size > SIZE_MAX - WS_ALIGN)
		return -EINVAL;
	pool = calloc(1, sizeof(*pool));
	if (!pool)
		return -ENOMEM;
	pool->ws_size = opts->ws_size;
	pool->alloc_size = kiln_round_up(opts->ws_size, WS_ALIGN);
	by_mem = opts->mem_limit / pool->alloc_size;
	if (by_mem < 1)
		by_mem = 1;	/* the reserved one, whatever the limit */
	if (by_mem > 4096)
		by_mem = 4096;
	pool->max_count = (unsigned int)by_mem;
	if (opts->max_count && opts->max_count < pool->max_count)
		pool->max_count = opts->max_count;
	pool->init = opts->init;
	pool->fini = opts->fini;
	pool->ctx = opts->ctx;
	pool->idle = calloc(pool->max_count, sizeof(*pool->idle));
	if (!pool->idle) {
		free(pool);
		return -ENOMEM;
	}
	first = ws_alloc(pool);
	if (!first) {
		free(pool->idle);
		free(pool);
		return -ENOMEM;
	}
	pool->idle[pool->nr_idle++] = first;
	pool->count = pool->peak_count = 1;
	pthread_mutex_init(&pool->lock, NULL);
	pthread_cond_init(&pool->freed, NULL);
	*out = pool;
	return 0;
}

void kiln_wspool_free(struct kiln_wspool *pool)
{
	if (!pool)
		return;
	for (unsigned int i = 0; i < pool->nr_idle; i++)
		ws_release(pool, pool->idle[i]);
	pthread_cond_destroy(&pool->freed);
	pthread_mutex_destroy(&pool->lock);
	free(pool->idle);
	free(pool);
}

void *kiln_wspool_get(struct kiln_wspool *pool)
{
	bool waited = false;
	void *ws;

	pthread_mutex_lock(&pool->lock);
	for (;;) {
		if (pool->nr_idle) {
			ws = pool->idle[--pool->nr_idle];
			break;
		}
		if (pool->count < pool->max_count) {
			/* 1. claim the slot, 2. allocate unlocked */
			pool->count++;
			pthread_mutex_unlock(&pool->lock);
			ws = ws_alloc(pool);
			pthread_mutex_lock(&pool->lock);
			if (ws) {
				if (pool->count > pool->peak_count)
					pool->peak_count = pool->count;
				break;
			}
			/* out of memory: live with the ones that exist */
			pool->count--;
			pool->max_count = pool->count;
			continue;
		}
		if (!waited)
			pool->waits++;
		waited = true;
		pthread_cond_wait(&pool->freed, &pool->lock);
	}
	pthread_mutex_unlock(&pool->lock);
	return ws;
}

void kiln_wspool_put(struct kiln_wspool *pool, void *ws)
{
	pthread_mutex_lock(&pool->lock);
	pool->idle[pool->nr_idle++] = ws;
	pthread_cond_signal(&pool->freed);
	pthread_mutex_unlock(&pool->lock);
}

void kiln_wspool_get_stats(struct kiln_wspool *pool,
			   struct kiln_wspool_stats *st)
{
	pthread_mutex_lock(&pool->lock);
	st->ws_size = pool->ws_size;
	st->count = pool->count;
	st->peak_count = pool->peak_count;
	st->peak_bytes = (size_t)pool->peak_count * pool->alloc_size;
	st->in_use = pool->count - pool->nr_idle;
	st->waits = pool->waits;
	pthread_mutex_unlock(&pool->lock);
}
