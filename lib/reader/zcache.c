// SPDX-License-Identifier: MIT
/*
 * Decompressed-extent cache: a hash of entries by pcluster address plus
 * an LRU list, under one mutex. Buffers of evicted entries are reused, so
 * a steady stream of same-sized extents allocates nothing.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "reader/zcache.h"

#define ZC_BUCKETS	1024	/* power of two */

struct kiln_zcache_entry {
	struct kiln_zcache_key key;
	size_t len;		/* decoded bytes held */
	size_t cap;		/* buffer size */
	uint8_t *data;
	struct kiln_zcache_entry *hnext;	/* hash chain */
	struct kiln_zcache_entry *prev, *next;	/* LRU, most recent first */
};

struct kiln_zcache {
	pthread_mutex_t lock;
	size_t budget, used;
	struct kiln_zcache_entry *buckets[ZC_BUCKETS];
	struct kiln_zcache_entry *head, *tail;
	struct kiln_zcache_stats st;
};

static unsigned int zc_hash(uint64_t pa)
{
	return (unsigned int)((pa * 0x9E3779B97F4A7C15ull) >> 54) &
	       (ZC_BUCKETS - 1);
}

static bool zc_key_eq(const struct kiln_zcache_key *a,
		      const struct kiln_zcache_key *b)
{
	return a->pa == b->pa && a->plen == b->plen && a->alg == b->alg;
}

int kiln_zcache_new(size_t budget, struct kiln_zcache **out)
{
	struct kiln_zcache *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->budget = budget;
	pthread_mutex_init(&c->lock, NULL);
	*out = c;
	return 0;
}

void kiln_zcache_free(struct kiln_zcache *c)
{
	struct kiln_zcache_entry *e, *next;

	if (!c)
		return;
	for (e = c->head; e; e = next) {
		next = e->next;
		free(e->data);
		free(e);
	}
	pthread_mutex_destroy(&c->lock);
	free(c);
}

static void lru_unlink(struct kiln_zcache *c, struct kiln_zcache_entry *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		c->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		c->tail = e->prev;
	e->prev = e->next = NULL;
}

static void lru_push(struct kiln_zcache *c, struct kiln_zcache_entry *e)
{
	e->prev = NULL;
	e->next = c->head;
	if (c->head)
		c->head->prev = e;
	c->head = e;
	if (!c->tail)
		c->tail = e;
}

static struct kiln_zcache_entry **zc_slot(struct kiln_zcache *c,
					  const struct kiln_zcache_key *key)
{
	struct kiln_zcache_entry **pp = &c->buckets[zc_hash(key->pa)];

	while (*pp && !zc_key_eq(&(*pp)->key, key))
		pp = &(*pp)->hnext;
	return pp;
}

bool kiln_zcache_read(struct kiln_zcache *c, const struct kiln_zcache_key *key,
		      uint64_t off, void *dst, size_t len)
{
	struct kiln_zcache_entry *e;
	bool hit = false;

	pthread_mutex_lock(&c->lock);
	e = *zc_slot(c, key);
	if (e && off <= e->len && len <= e->len - off) {
		memcpy(dst, e->data + off, len);
		lru_unlink(c, e);
		lru_push(c, e);
		hit = true;
		c->st.hits++;
	} else {
		c->st.misses++;
	}
	pthread_mutex_unlock(&c->lock);
	return hit;
}

/* Drop the least recently used entry; returns it detached (caller owns). */
static struct kiln_zcache_entry *zc_evict(struct kiln_zcache *c)
{
	struct kiln_zcache_entry *e = c->tail;

	lru_unlink(c, e);
	*zc_slot(c, &e->key) = e->hnext;
	e->hnext = NULL;
	c->st.evictions++;
	return e;
}

struct kiln_zcache_entry *kiln_zcache_reserve(struct kiln_zcache *c,
					      size_t len, uint8_t **data)
{
	struct kiln_zcache_entry *e = NULL, *victim;

	/* one entry may take at most half the cache */
	if (!len || len > c->budget / 2)
		return NULL;
	pthread_mutex_lock(&c->lock);
	/* evict until the new bytes fit; a victim of the right size is kept */
	while (c->tail && c->used + (e ? 0 : len) > c->budget) {
		victim = zc_evict(c);
		if (!e && victim->cap >= len && victim->cap <= 2 * len) {
			e = victim;
			continue;
		}
		c->used -= victim->cap;
		free(victim->data);
		free(victim);
	}
	if (!e) {
		if (c->used + len > c->budget) {
			pthread_mutex_unlock(&c->lock);
			return NULL;	/* the rest is reserved by others */
		}
		c->used += len;
		pthread_mutex_unlock(&c->lock);
		e = calloc(1, sizeof(*e));
		if (e)
			e->data = malloc(len);
		if (!e || !e->data) {
			free(e);
			pthread_mutex_lock(&c->lock);
			c->used -= len;
			pthread_mutex_unlock(&c->lock);
			return NULL;
		}
		e->cap = len;
	} else {
		pthread_mutex_unlock(&c->lock);
	}
	e->len = 0;
	*data = e->data;
	return e;
}

void kiln_zcache_publish(struct kiln_zcache *c, struct kiln_zcache_entry *e,
			 const struct kiln_zcache_key *key, size_t len)
{
	struct kiln_zcache_entry **slot;

	pthread_mutex_lock(&c->lock);
	slot = zc_slot(c, key);
	if (*slot) {
		/* another thread decoded the same pcluster meanwhile */
		c->used -= e->cap;
		pthread_mutex_unlock(&c->lock);
		free(e->data);
		free(e);
		return;
	}
	e->key = *key;
	e->len = len;
	*slot = e;
	lru_push(c, e);
	c->st.inserts++;
	pthread_mutex_unlock(&c->lock);
}

void kiln_zcache_abort(struct kiln_zcache *c, struct kiln_zcache_entry *e)
{
	pthread_mutex_lock(&c->lock);
	c->used -= e->cap;
	pthread_mutex_unlock(&c->lock);
	free(e->data);
	free(e);
}

void kiln_zcache_get_stats(struct kiln_zcache *c, struct kiln_zcache_stats *st)
{
	pthread_mutex_lock(&c->lock);
	*st = c->st;
	st->used = c->used;
	pthread_mutex_unlock(&c->lock);
}
