// SPDX-License-Identifier: MIT
/*
 * The lazy view of a source without a mapping: fetch units on demand (or
 * load them from the chunk cache) into a memfd of the image's size,
 * mapped read-only. Only the units read take memory.
 *
 * Each unit is ABSENT, FETCHING (one thread claimed it and is fetching it)
 * or PRESENT. A unit becomes PRESENT only after every byte of it was
 * received whole, checked by the source (length, range, identity) and
 * written to the file; a PRESENT unit is never rewritten or dropped until
 * the view is closed. So a pointer into the map over PRESENT units stays
 * valid and unchanged for as long as the image is open, whatever other
 * threads fetch meanwhile, and bytes of a failed or partial fetch are
 * never read: their units go back to ABSENT.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "source/cache.h"
#include "source/source.h"
#include "util/checked.h"

enum { ABSENT = 0, FETCHING = 1, PRESENT = 2 };

#define RA_STREAMS	4	/* sequential readers followed at once */

struct kiln_lazy {
	struct kiln_source *src;
	struct kiln_cache *cache;	/* may be NULL */
	int fd;			/* the memfd */
	const uint8_t *map;	/* src->size bytes of it */
	unsigned int unit_bits;
	uint64_t units;
	_Atomic uint8_t *state;	/* per unit */
	pthread_mutex_t lock;
	pthread_cond_t cond;	/* a FETCHING unit changed state */
	uint64_t fail_gen;	/* fetches that failed so far */
	int last_err;		/* of the latest one */
	atomic_uint demand;	/* reads waiting for units now */
	uint64_t hot_lo, hot_hi;	/* kiln_lazy_set_hot(), unit-aligned */
	/*
	 * Readahead in the background: a read in order queues the next
	 * window for one thread of the view's own, so the network works
	 * while the reader decodes. A few streams are followed at once (a
	 * file's extents and the packed inode's, read in turns). Under
	 * @lock but the marks: a read that reaches a stream's mark (its
	 * window in flight) queues the window after it.
	 */
	pthread_t ra_tid;
	bool ra_started, ra_stop;
	pthread_cond_t ra_cond;
	struct { uint64_t first, last; } ra_q[RA_STREAMS];	/* queued */
	unsigned int ra_nq;
	struct {
		_Atomic uint64_t mark;
		uint64_t next;		/* the first unit of its next window */
	} ra[RA_STREAMS];
	unsigned int ra_victim;		/* the stream a new one replaces */
};

static int backing_file(struct kiln_lazy *lz)
{
	int fd = memfd_create("kiln-image", MFD_CLOEXEC), err;

	if (fd < 0)
		return -errno;
	lz->fd = fd;
	if (ftruncate(fd, (off_t)lz->src->size) < 0) {
		err = -errno;
		kiln_log(lz->src->lg, KILN_LOG_ERROR,
			 "memory for the image's bytes: %s", strerror(-err));
		return err;
	}
	lz->map = mmap(NULL, (size_t)lz->src->size, PROT_READ, MAP_SHARED, fd,
		       0);
	if (lz->map == MAP_FAILED) {
		lz->map = NULL;
		return -errno;
	}
	return 0;
}

static int store(struct kiln_lazy *lz, const uint8_t *buf, size_t len,
		 uint64_t off)
{
	while (len) {
		ssize_t n = pwrite(lz->fd, buf, len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int err = n < 0 ? errno : ENOSPC;

			kiln_log(lz->src->lg, KILN_LOG_ERROR,
				 "memory for the image's bytes: %s",
				 strerror(err));
			return -EIO;
		}
		buf += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

static uint64_t unit_end(const struct kiln_lazy *lz, uint64_t u)
{
	uint64_t end = (u + 1) << lz->unit_bits;

	return end < lz->src->size ? end : lz->src->size;
}

int kiln_lazy_open(struct kiln_lazy **out, struct kiln_source *src,
		   struct kiln_cache *cache, uint32_t unit)
{
	struct kiln_lazy *lz;
	int err;

	*out = NULL;
	if (src->size > KILN_LAZY_MAX_SIZE || src->size > SIZE_MAX) {
		/* a server's claim: bound what its state may cost us */
		kiln_log(src->lg, KILN_LOG_ERROR,
			 "a remote image of %llu bytes: more than 16 TiB",
			 (unsigned long long)src->size);
		kiln_cache_close(cache);
		return -EFBIG;
	}
	lz = calloc(1, sizeof(*lz));
	if (!lz) {
		kiln_cache_close(cache);
		return -ENOMEM;
	}
	lz->src = src;
	lz->cache = cache;
	lz->fd = -1;
	pthread_mutex_init(&lz->lock, NULL);
	pthread_cond_init(&lz->cond, NULL);
	pthread_cond_init(&lz->ra_cond, NULL);
	for (unsigned int i = 0; i < RA_STREAMS; i++)
		atomic_init(&lz->ra[i].mark, UINT64_MAX);
	while ((1u << lz->unit_bits) < unit)
		lz->unit_bits++;
	lz->units = ((src->size - 1) >> lz->unit_bits) + 1;
	lz->state = calloc((size_t)lz->units, sizeof(*lz->state));
	if (!lz->state) {
		kiln_lazy_close(lz);
		return -ENOMEM;
	}
	err = backing_file(lz);
	if (!err && src->head_len)
		err = store(lz, src->head, src->head_len, 0);
	if (err) {
		kiln_lazy_close(lz);
		return err;
	}
	/* the units the probe at open brought whole */
	for (uint64_t u = 0; u < lz->units; u++) {
		if (unit_end(lz, u) > src->head_len)
			break;
		atomic_store(&lz->state[u], PRESENT);
		if (lz->cache)
			kiln_cache_store(lz->cache, u, src->head +
					 (u << lz->unit_bits),
					 (size_t)(unit_end(lz, u) -
						  (u << lz->unit_bits)));
	}
	*out = lz;
	return 0;
}

void kiln_lazy_close(struct kiln_lazy *lz)
{
	if (!lz)
		return;
	if (lz->ra_started) {
		/* a window in flight is not waited for: nobody reads it */
		atomic_store(&lz->src->cancelled, true);
		pthread_mutex_lock(&lz->lock);
		lz->ra_stop = true;
		pthread_cond_signal(&lz->ra_cond);
		pthread_mutex_unlock(&lz->lock);
		pthread_join(lz->ra_tid, NULL);
	}
	if (lz->map)
		munmap((void *)(uintptr_t)lz->map, (size_t)lz->src->size);
	if (lz->fd >= 0)
		close(lz->fd);
	if (lz->cache) {
		const struct kiln_source_counters *c = &lz->src->count;
		struct kiln_cache_stats st = {
			.bytes_fetched = atomic_load(&c->bytes_fetched),
			.requests = atomic_load(&c->requests),
			.retries = atomic_load(&c->retries),
			.hits = atomic_load(&c->hits),
			.misses = atomic_load(&c->misses),
		};

		kiln_cache_close_with(lz->cache, &st);
	}
	pthread_mutex_destroy(&lz->lock);
	pthread_cond_destroy(&lz->cond);
	pthread_cond_destroy(&lz->ra_cond);
	free((void *)lz->state);
	free(lz);
}

const uint8_t *kiln_lazy_map(const struct kiln_lazy *lz)
{
	return lz->map;
}

/*
 * Units [@u, @v] (claimed by this thread) into the view: those the cache
 * holds from it, the rest fetched in runs and kept in the cache.
 */
static int fetch_run(struct kiln_lazy *lz, uint64_t u, uint64_t v)
{
	uint64_t off = u << lz->unit_bits, end = unit_end(lz, v);
	size_t len = (size_t)(end - off);
	uint8_t *buf = malloc(len);
	bool *have = calloc((size_t)(v - u + 1), sizeof(*have));
	int err = 0;

	if (!buf || !have) {
		free(buf);
		free(have);
		return -ENOMEM;
	}
	for (uint64_t k = u; lz->cache && k <= v; k++)
		have[k - u] = kiln_cache_load(lz->cache, k, buf +
					      ((k - u) << lz->unit_bits),
					      (size_t)(unit_end(lz, k) -
						       (k << lz->unit_bits)));
	for (uint64_t a = u; !err && a <= v; ) {
		uint64_t b = a, s, e;

		if (have[a - u]) {
			a++;
			continue;
		}
		while (b < v && !have[b + 1 - u])
			b++;
		s = a << lz->unit_bits;
		e = unit_end(lz, b);
		err = lz->src->ops->fetch(lz->src, buf + (s - off),
					  (size_t)(e - s), s);
		for (uint64_t k = a; !err && lz->cache && k <= b; k++)
			kiln_cache_store(lz->cache, k, buf +
					 ((k - u) << lz->unit_bits),
					 (size_t)(unit_end(lz, k) -
						  (k << lz->unit_bits)));
		a = b + 1;
	}
	if (!err)
		err = store(lz, buf, len, off);
	free(have);
	free(buf);
	return err;
}

static bool all_present(struct kiln_lazy *lz, uint64_t first, uint64_t last)
{
	for (uint64_t u = first; u <= last; u++)
		if (atomic_load_explicit(&lz->state[u],
					 memory_order_acquire) != PRESENT)
			return false;
	return true;
}

/*
 * Units [@u, @v], claimed (FETCHING) under @lz->lock: fetch them with the
 * lock released, then make them PRESENT, or ABSENT again with the failure
 * recorded for the threads that wait on them, and wake those threads.
 */
static int fetch_claimed(struct kiln_lazy *lz, uint64_t u, uint64_t v)
{
	int err;

	for (uint64_t k = u; k <= v; k++)
		atomic_store(&lz->state[k], FETCHING);
	pthread_mutex_unlock(&lz->lock);
	err = fetch_run(lz, u, v);
	pthread_mutex_lock(&lz->lock);
	for (uint64_t k = u; k <= v; k++)
		atomic_store_explicit(&lz->state[k], err ? ABSENT : PRESENT,
				      memory_order_release);
	if (err) {
		lz->fail_gen++;
		lz->last_err = err;
	}
	pthread_cond_broadcast(&lz->cond);
	return err;
}

/*
 * Fetch the absent units of [@first, @last], in runs, claimed one run at
 * a time (under @lz->lock, released while fetching); units another
 * thread fetches are left to it. Stops at the first failure.
 */
static int fetch_absent(struct kiln_lazy *lz, uint64_t first, uint64_t last,
			const bool *stop)
{
	uint64_t max_units = KILN_LAZY_MAX_RUN >> lz->unit_bits;
	int err = 0;

	if (!max_units)
		max_units = 1;
	for (uint64_t u = first; u <= last && !err && !*stop; ) {
		uint64_t v = u;

		if (atomic_load(&lz->state[u]) != ABSENT) {
			u++;
			continue;
		}
		while (v < last && v - u + 1 < max_units &&
		       atomic_load(&lz->state[v + 1]) == ABSENT)
			v++;
		err = fetch_claimed(lz, u, v);
		u = v + 1;
	}
	return err;
}

static void *ra_thread(void *arg)
{
	struct kiln_lazy *lz = arg;

	pthread_mutex_lock(&lz->lock);
	for (;;) {
		uint64_t first, last;

		while (!lz->ra_stop && !lz->ra_nq)
			pthread_cond_wait(&lz->ra_cond, &lz->lock);
		if (lz->ra_stop)
			break;
		first = lz->ra_q[0].first;
		last = lz->ra_q[0].last;
		memmove(lz->ra_q, lz->ra_q + 1, --lz->ra_nq * sizeof(lz->ra_q[0]));
		/* a failure is the waiting readers' to report */
		fetch_absent(lz, first, last, &lz->ra_stop);
	}
	pthread_mutex_unlock(&lz->lock);
	return NULL;
}

static uint64_t ra_units(const struct kiln_lazy *lz)
{
	uint64_t n = KILN_LAZY_READAHEAD >> lz->unit_bits;

	return n ? n : 1;
}

/* Queue stream @s's window from unit @first (under @lz->lock). */
static void ra_queue(struct kiln_lazy *lz, unsigned int s, uint64_t first)
{
	uint64_t last = first + ra_units(lz) - 1;

	if (first >= lz->units || lz->ra_stop)
		return;
	if (!lz->ra_started) {
		if (pthread_create(&lz->ra_tid, NULL, ra_thread, lz))
			return;		/* no readahead, reads still work */
		lz->ra_started = true;
	}
	if (last >= lz->units)
		last = lz->units - 1;
	if (lz->ra_nq == RA_STREAMS)	/* the oldest is the least useful */
		memmove(lz->ra_q, lz->ra_q + 1, --lz->ra_nq *
			sizeof(lz->ra_q[0]));
	lz->ra_q[lz->ra_nq].first = first;
	lz->ra_q[lz->ra_nq++].last = last;
	lz->ra[s].next = last + 1;
	atomic_store(&lz->ra[s].mark, first);
	pthread_cond_signal(&lz->ra_cond);
}

/* A read of units [@first, @last]: in a stream's window, queue its next. */
static void ra_follow(struct kiln_lazy *lz, uint64_t first, uint64_t last)
{
	for (unsigned int s = 0; s < RA_STREAMS; s++) {
		uint64_t mark = atomic_load(&lz->ra[s].mark);

		if (last < mark || (first > mark &&
				    first - mark >= ra_units(lz)))
			continue;
		pthread_mutex_lock(&lz->lock);
		if (atomic_load(&lz->ra[s].mark) == mark) {
			atomic_store(&lz->ra[s].mark, UINT64_MAX);
			ra_queue(lz, s, lz->ra[s].next);
		}
		pthread_mutex_unlock(&lz->lock);
		return;
	}
}

/* A new stream reading in order from unit @first (under @lz->lock). */
static void ra_start(struct kiln_lazy *lz, uint64_t first)
{
	for (unsigned int i = 0; i < lz->ra_nq; i++)
		if (lz->ra_q[i].first <= first && first <= lz->ra_q[i].last)
			return;		/* queued already */
	ra_queue(lz, lz->ra_victim++ % RA_STREAMS, first);
}

void kiln_lazy_set_hot(struct kiln_lazy *lz, uint64_t lo, uint64_t hi)
{
	hi = hi < lz->src->size ? hi : lz->src->size;
	lz->hot_lo = lo >> lz->unit_bits << lz->unit_bits;
	lz->hot_hi = hi > lz->hot_lo ? hi : lz->hot_lo;
}

/*
 * A miss at @off in the hot range takes the KILN_LAZY_MAX_RUN window of
 * it that holds @off, so walking metadata spread over the whole range
 * costs one request per window, whatever the order of the reads.
 */
static void widen_hot(const struct kiln_lazy *lz, uint64_t off,
		      uint64_t *first, uint64_t *last)
{
	uint64_t s, e;

	if (off < lz->hot_lo || off >= lz->hot_hi)
		return;
	s = lz->hot_lo + (off - lz->hot_lo) / KILN_LAZY_MAX_RUN *
	    KILN_LAZY_MAX_RUN;
	e = s + KILN_LAZY_MAX_RUN < lz->hot_hi ? s + KILN_LAZY_MAX_RUN
					       : lz->hot_hi;
	if (s >> lz->unit_bits < *first)
		*first = s >> lz->unit_bits;
	if ((e - 1) >> lz->unit_bits > *last)
		*last = (e - 1) >> lz->unit_bits;
}

static int ensure(struct kiln_lazy *lz, uint64_t off, uint64_t len,
		  bool ahead)
{
	struct kiln_source_counters *c = &lz->src->count;
	uint64_t first, last, max_units;
	int err = 0;

	if (!len)
		return 0;
	first = off >> lz->unit_bits;
	last = (off + len - 1) >> lz->unit_bits;
	if (ahead)
		ra_follow(lz, first, last);
	if (all_present(lz, first, last)) {
		atomic_fetch_add_explicit(&c->hits, 1, memory_order_relaxed);
		return 0;
	}
	atomic_fetch_add_explicit(&c->misses, 1, memory_order_relaxed);
	atomic_fetch_add(&lz->demand, 1);
	widen_hot(lz, off, &first, &last);
	max_units = KILN_LAZY_MAX_RUN >> lz->unit_bits;
	if (!max_units)
		max_units = 1;
	pthread_mutex_lock(&lz->lock);
	for (;;) {
		uint64_t u = first, v, gen;

		while (u <= last && atomic_load(&lz->state[u]) == PRESENT)
			u++;
		if (u > last)
			break;
		if (atomic_load(&lz->state[u]) == FETCHING) {
			/*
			 * Another thread fetches it: wait for its outcome and
			 * share a failure rather than start over, so a read
			 * fails within one fetch's time limit.
			 */
			gen = lz->fail_gen;
			while (atomic_load(&lz->state[u]) == FETCHING)
				pthread_cond_wait(&lz->cond, &lz->lock);
			if (atomic_load(&lz->state[u]) == ABSENT &&
			    lz->fail_gen != gen) {
				err = lz->last_err;
				break;
			}
			continue;
		}
		/* claim the run of absent units that starts at @u */
		v = u;
		while (v < last && v - u + 1 < max_units &&
		       atomic_load(&lz->state[v + 1]) == ABSENT)
			v++;
		/*
		 * Read in order (the unit before is here): the window after
		 * this run comes in the background while this one is read.
		 */
		if (ahead && v == last && u &&
		    atomic_load(&lz->state[u - 1]) == PRESENT)
			ra_start(lz, v + 1);
		err = fetch_claimed(lz, u, v);
		if (err)
			break;
	}
	pthread_mutex_unlock(&lz->lock);
	atomic_fetch_sub(&lz->demand, 1);
	if (err)
		atomic_fetch_add_explicit(&c->failures, 1,
					  memory_order_relaxed);
	return err;
}

int kiln_lazy_ensure(struct kiln_lazy *lz, uint64_t off, uint64_t len)
{
	return ensure(lz, off, len, true);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void nap_ns(uint64_t ns)
{
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000u),
			       .tv_nsec = (long)(ns % 1000000000u) };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

int kiln_lazy_prefetch_all(struct kiln_lazy *lz, uint64_t rate,
			   const atomic_bool *stop)
{
	uint64_t start = mono_ns(), sent = 0;
	int err = 0;

	for (uint64_t u = 0; u < lz->units && !atomic_load(stop); u++) {
		uint64_t off = u << lz->unit_bits, due;

		/* demand reads first: wait while any is waiting for units */
		while (atomic_load(&lz->demand) && !atomic_load(stop))
			nap_ns(5000000);
		if (atomic_load_explicit(&lz->state[u], memory_order_acquire) ==
		    PRESENT)
			continue;
		/* at its own rate: no readahead */
		err = ensure(lz, off, unit_end(lz, u) - off, false);
		if (err)
			break;
		sent += unit_end(lz, u) - off;
		/* at most @rate bytes a second on average */
		due = start + (uint64_t)((double)sent / (double)rate * 1e9);
		while (!atomic_load(stop) && mono_ns() < due)
			nap_ns(KILN_MIN(due - mono_ns(), (uint64_t)50000000));
	}
	return err;
}
