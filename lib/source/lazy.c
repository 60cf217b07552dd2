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
#include "util/threadpool.h"

enum { ABSENT = 0, FETCHING = 1, PRESENT = 2 };

#define RA_STREAMS	4	/* sequential readers followed at once */
/*
 * Windows a stream keeps ahead of its reader once it read into the first
 * one: a new stream gets one, as a random read next to an earlier one
 * may start it for nothing.
 */
#define RA_AHEAD	2
#define RA_QUEUE	(RA_STREAMS * RA_AHEAD)
/*
 * Threads fetching windows: two, so that a window is asked for while
 * the one before it is still coming, and the link never idles for a
 * round trip between them.
 */
#define RA_THREADS	2
#define LAZY_BATCH	4	/* runs fetched together, at most */

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
	 * Readahead in the background: a read in order queues a window
	 * after it for the view's own threads, then RA_AHEAD of them once
	 * it reads on into the first, so the network works while the
	 * reader decodes. A few streams are
	 * followed at once (a file's extents and the packed inode's, read
	 * in turns). Under @lock but the marks: a read that reaches a
	 * stream's mark (the first of its windows ahead) queues the window
	 * after the last one.
	 */
	pthread_t ra_tid[RA_THREADS];
	unsigned int ra_threads;	/* started */
	bool ra_stop;
	pthread_cond_t ra_cond;
	struct { uint64_t first, last; } ra_q[RA_QUEUE];	/* queued */
	unsigned int ra_nq;
	struct {
		_Atomic uint64_t mark;
		uint64_t far;		/* the first unit of its last window */
		uint64_t next;		/* the first unit after it */
		unsigned int ahead;	/* windows it keeps ahead */
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
	if (lz->ra_threads) {
		/* a window in flight is not waited for: nobody reads it */
		atomic_store(&lz->src->cancelled, true);
		pthread_mutex_lock(&lz->lock);
		lz->ra_stop = true;
		pthread_cond_broadcast(&lz->ra_cond);
		pthread_mutex_unlock(&lz->lock);
		for (unsigned int i = 0; i < lz->ra_threads; i++)
			pthread_join(lz->ra_tid[i], NULL);
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

/* Units [@u, @v] claimed by this thread; @err how fetching them went. */
struct run {
	uint64_t u, v;
	int err;
};

static size_t run_len(const struct kiln_lazy *lz, const struct run *r)
{
	return (size_t)(unit_end(lz, r->v) - (r->u << lz->unit_bits));
}

static size_t unit_len(const struct kiln_lazy *lz, uint64_t u)
{
	return (size_t)(unit_end(lz, u) - (u << lz->unit_bits));
}

/* What a run holds while it is fetched: its bytes, the units it has. */
struct run_buf {
	uint8_t *buf;
	bool *have;
	bool claimed;	/* its units, from the other processes on the cache */
	bool wait;	/* another process fetches some of them */
};

static uint8_t *run_at(const struct kiln_lazy *lz, const struct run *r,
		       const struct run_buf *b, uint64_t u)
{
	return b->buf + ((u - r->u) << lz->unit_bits);
}

/* Load the units of @r the cache holds; true when it has them all. */
static bool load_cached(struct kiln_lazy *lz, const struct run *r,
			struct run_buf *b)
{
	bool all = true;

	for (uint64_t k = r->u; k <= r->v; k++) {
		if (!b->have[k - r->u] && lz->cache)
			b->have[k - r->u] = kiln_cache_load(lz->cache, k,
							    run_at(lz, r, b, k),
							    unit_len(lz, k));
		all = all && b->have[k - r->u];
	}
	return all;
}

/*
 * Fetch the gaps of the runs @r[i] with @pick[i] (and no error yet) in
 * one batch, several in flight; keep what came in the cache.
 */
static void fetch_gaps(struct kiln_lazy *lz, struct run *r, unsigned int n,
		       struct run_buf *b, const bool *pick)
{
	struct kiln_fetch *f;
	unsigned int *owner, nf = 0;
	uint64_t units = 0;

	for (unsigned int i = 0; i < n; i++)
		if (pick[i] && !r[i].err)
			units += r[i].v - r[i].u + 1;
	if (!units)
		return;
	f = calloc((size_t)units, sizeof(*f));
	owner = calloc((size_t)units, sizeof(*owner));
	for (unsigned int i = 0; i < n; i++) {
		if (!pick[i] || r[i].err)
			continue;
		if (!f || !owner) {
			r[i].err = -ENOMEM;
			continue;
		}
		/* the gaps between the units the cache held */
		for (uint64_t a = r[i].u; a <= r[i].v; ) {
			uint64_t e = a;

			if (b[i].have[a - r[i].u]) {
				a++;
				continue;
			}
			while (e < r[i].v && !b[i].have[e + 1 - r[i].u])
				e++;
			f[nf] = (struct kiln_fetch){
				.dst = run_at(lz, &r[i], &b[i], a),
				.len = (size_t)(unit_end(lz, e) -
						(a << lz->unit_bits)),
				.off = a << lz->unit_bits };
			owner[nf++] = i;
			a = e + 1;
		}
	}
	if (nf)
		kiln_source_fetch_many(lz->src, f, nf);
	for (unsigned int k = 0; k < nf; k++) {
		unsigned int i = owner[k];

		if (f[k].err) {
			if (!r[i].err)
				r[i].err = f[k].err;
			continue;
		}
		/* kept even when another gap of the run failed */
		for (uint64_t u = f[k].off >> lz->unit_bits;
		     (u << lz->unit_bits) < f[k].off + f[k].len; u++) {
			b[i].have[u - r[i].u] = true;
			if (lz->cache)
				kiln_cache_store(lz->cache, u,
						 run_at(lz, &r[i], &b[i], u),
						 unit_len(lz, u));
		}
	}
	free(owner);
	free(f);
}

/*
 * Wait until no other process fetches units of @r (it stores them as
 * they come), at most the source's wait_ms: true when claimed.
 */
static bool wait_claim(struct kiln_lazy *lz, const struct run *r)
{
	uint64_t t0 = mono_ns(), limit = (uint64_t)lz->src->wait_ms * 1000000u;

	while (!kiln_cache_claim(lz->cache, r->u, r->v)) {
		if (atomic_load(&lz->src->cancelled) || mono_ns() - t0 >= limit) {
			kiln_log(lz->src->lg, KILN_LOG_INFO,
				 "bytes %llu-%llu: another process has fetched them for %u ms; fetching them here too",
				 (unsigned long long)(r->u << lz->unit_bits),
				 (unsigned long long)unit_end(lz, r->v) - 1,
				 lz->src->wait_ms);
			return false;
		}
		nap_ns(10000000);
	}
	return true;
}

/*
 * Runs @r[0..@n) (claimed by this thread) into the view: the units the
 * cache holds from it, the rest fetched, every gap of every run in one
 * batch (several requests in flight), and kept in the cache. Units
 * another process is fetching are waited for and loaded once it stored
 * them.
 */
static int fetch_runs(struct kiln_lazy *lz, struct run *r, unsigned int n)
{
	struct run_buf b[LAZY_BATCH] = { 0 };
	bool pick[LAZY_BATCH] = { false };
	int first = 0;

	for (unsigned int i = 0; i < n; i++) {
		b[i].buf = malloc(run_len(lz, &r[i]));
		b[i].have = calloc((size_t)(r[i].v - r[i].u + 1),
				   sizeof(bool));
		r[i].err = b[i].buf && b[i].have ? 0 : -ENOMEM;
		if (r[i].err || load_cached(lz, &r[i], &b[i]))
			continue;
		b[i].claimed = lz->cache &&
			       kiln_cache_claim(lz->cache, r[i].u, r[i].v);
		b[i].wait = lz->cache && !b[i].claimed;
		pick[i] = !b[i].wait;
	}
	/* what nobody else fetches goes out now, in one batch */
	fetch_gaps(lz, r, n, b, pick);
	for (unsigned int i = 0; i < n; i++) {
		if (b[i].claimed)
			kiln_cache_unclaim(lz->cache, r[i].u, r[i].v);
		b[i].claimed = false;
	}
	/* then what another process was fetching: load it, fetch the rest */
	for (unsigned int i = 0; i < n; i++) {
		bool one[LAZY_BATCH] = { false };

		if (!b[i].wait || r[i].err)
			continue;
		b[i].claimed = wait_claim(lz, &r[i]);
		if (!load_cached(lz, &r[i], &b[i])) {
			one[i] = true;
			fetch_gaps(lz, r, n, b, one);
		}
		if (b[i].claimed)
			kiln_cache_unclaim(lz->cache, r[i].u, r[i].v);
	}
	for (unsigned int i = 0; i < n; i++) {
		if (!r[i].err)
			r[i].err = store(lz, b[i].buf, run_len(lz, &r[i]),
					 r[i].u << lz->unit_bits);
		if (r[i].err && !first)
			first = r[i].err;
		free(b[i].have);
		free(b[i].buf);
	}
	return first;
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
 * Runs @r[0..@n) of absent units, claimed under @lz->lock: fetch them
 * with the lock released, then make each PRESENT, or ABSENT again with
 * its failure recorded for the threads that wait on it, and wake those
 * threads. Returns the first error.
 */
static int fetch_claimed_many(struct kiln_lazy *lz, struct run *r,
			      unsigned int n)
{
	int err;

	for (unsigned int i = 0; i < n; i++)
		for (uint64_t k = r[i].u; k <= r[i].v; k++)
			atomic_store(&lz->state[k], FETCHING);
	pthread_mutex_unlock(&lz->lock);
	err = fetch_runs(lz, r, n);
	pthread_mutex_lock(&lz->lock);
	for (unsigned int i = 0; i < n; i++) {
		for (uint64_t k = r[i].u; k <= r[i].v; k++)
			atomic_store_explicit(&lz->state[k],
					      r[i].err ? ABSENT : PRESENT,
					      memory_order_release);
		if (r[i].err) {
			lz->fail_gen++;
			lz->last_err = r[i].err;
		}
	}
	pthread_cond_broadcast(&lz->cond);
	return err;
}

static int fetch_claimed(struct kiln_lazy *lz, uint64_t u, uint64_t v)
{
	struct run r = { .u = u, .v = v };

	return fetch_claimed_many(lz, &r, 1);
}

/*
 * Claim (FETCHING, under @lz->lock) the run of absent units from the
 * first absent one in [*@first, @last], at most @max units: false when
 * none is absent. *@first moves past it. Claimed at once, so that the
 * next call, for a window that overlaps this one, cannot take it again.
 */
static bool next_absent(struct kiln_lazy *lz, uint64_t *first, uint64_t last,
			uint64_t max, struct run *r)
{
	uint64_t u = *first, v;

	while (u <= last && atomic_load(&lz->state[u]) != ABSENT)
		u++;
	if (u > last) {
		*first = u;
		return false;
	}
	v = u;
	while (v < last && v - u + 1 < max &&
	       atomic_load(&lz->state[v + 1]) == ABSENT)
		v++;
	for (uint64_t k = u; k <= v; k++)
		atomic_store(&lz->state[k], FETCHING);
	*r = (struct run){ .u = u, .v = v };
	*first = v + 1;
	return true;
}

static void *ra_thread(void *arg)
{
	struct kiln_lazy *lz = arg;
	uint64_t max = KILN_LAZY_MAX_RUN >> lz->unit_bits;

	if (!max)
		max = 1;
	pthread_mutex_lock(&lz->lock);
	for (;;) {
		struct { uint64_t first, last; } w;

		while (!lz->ra_stop && !lz->ra_nq)
			pthread_cond_wait(&lz->ra_cond, &lz->lock);
		if (lz->ra_stop)
			break;
		/*
		 * The oldest queued window: the next one goes to the other
		 * thread, so the two requests overlap.
		 */
		w.first = lz->ra_q[0].first;
		w.last = lz->ra_q[0].last;
		memmove(lz->ra_q, lz->ra_q + 1, --lz->ra_nq *
			sizeof(lz->ra_q[0]));
		while (!lz->ra_stop) {
			struct run r[LAZY_BATCH];
			unsigned int n = 0;

			while (n < LAZY_BATCH &&
			       next_absent(lz, &w.first, w.last, max, &r[n]))
				n++;
			if (!n)
				break;
			/*
			 * a failure is the waiting readers' to report; once
			 * the view closes, the cancelled source ends it soon
			 */
			fetch_claimed_many(lz, r, n);
		}
	}
	pthread_mutex_unlock(&lz->lock);
	return NULL;
}

static uint64_t ra_units(const struct kiln_lazy *lz)
{
	uint64_t n = KILN_LAZY_READAHEAD >> lz->unit_bits;

	return n ? n : 1;
}

/*
 * Queue stream @s's window from unit @first, after the ones it has
 * queued (under @lz->lock).
 */
static void ra_queue(struct kiln_lazy *lz, unsigned int s, uint64_t first)
{
	uint64_t last = first + ra_units(lz) - 1;

	lz->ra[s].far = first;
	lz->ra[s].next = last + 1;
	if (first >= lz->units || lz->ra_stop)
		return;
	/* without threads no readahead: reads still work */
	while (lz->ra_threads < RA_THREADS &&
	       !kiln_thread_start(&lz->ra_tid[lz->ra_threads], ra_thread, lz))
		lz->ra_threads++;
	if (!lz->ra_threads)
		return;
	if (last >= lz->units)
		last = lz->units - 1;
	if (lz->ra_nq == RA_QUEUE)	/* the oldest is the least useful */
		memmove(lz->ra_q, lz->ra_q + 1, --lz->ra_nq *
			sizeof(lz->ra_q[0]));
	lz->ra_q[lz->ra_nq].first = first;
	lz->ra_q[lz->ra_nq++].last = last;
	pthread_cond_signal(&lz->ra_cond);
}

/*
 * A read of units [@first, @last]: in the first window ahead of a
 * stream, queue the one after its last (two when the read entered the
 * window by its first unit, as a reader in order does: the stream keeps
 * RA_AHEAD from then on).
 */
static void ra_follow(struct kiln_lazy *lz, uint64_t first, uint64_t last)
{
	for (unsigned int s = 0; s < RA_STREAMS; s++) {
		uint64_t mark = atomic_load(&lz->ra[s].mark);

		if (last < mark || (first > mark &&
				    first - mark >= ra_units(lz)))
			continue;
		pthread_mutex_lock(&lz->lock);
		if (atomic_load(&lz->ra[s].mark) == mark) {
			uint64_t far = lz->ra[s].far, next = lz->ra[s].next;
			/* the window after the one entered: the next mark */
			uint64_t to = far == mark ? next : far;

			ra_queue(lz, s, next);
			/* a reader in order enters a window by its first unit */
			if (first <= mark && lz->ra[s].ahead < RA_AHEAD) {
				lz->ra[s].ahead++;
				ra_queue(lz, s, lz->ra[s].next);
			}
			atomic_store(&lz->ra[s].mark, to < lz->units ? to
								     : UINT64_MAX);
		}
		pthread_mutex_unlock(&lz->lock);
		return;
	}
}

/*
 * A new stream reading in order from unit @first: its first window
 * (under @lz->lock).
 */
static void ra_start(struct kiln_lazy *lz, uint64_t first)
{
	unsigned int s;

	for (unsigned int i = 0; i < lz->ra_nq; i++)
		if (lz->ra_q[i].first <= first && first <= lz->ra_q[i].last)
			return;		/* queued already */
	s = lz->ra_victim++ % RA_STREAMS;
	lz->ra[s].ahead = 1;
	ra_queue(lz, s, first);
	atomic_store(&lz->ra[s].mark, first);
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

int kiln_lazy_ensure(struct kiln_lazy *lz, uint64_t off, uint64_t len)
{
	struct kiln_source_counters *c = &lz->src->count;
	uint64_t first, last, max_units;
	int err = 0;

	if (!len)
		return 0;
	first = off >> lz->unit_bits;
	last = (off + len - 1) >> lz->unit_bits;
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
		if (v == last && u &&
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

int kiln_lazy_prefetch_all(struct kiln_lazy *lz, uint64_t rate,
			   const atomic_bool *stop)
{
	uint64_t start = mono_ns(), sent = 0, next = 0;
	uint64_t max = KILN_LAZY_MAX_RUN >> lz->unit_bits;
	/* a batch: about a quarter of a second at @rate, in LAZY_BATCH runs */
	uint64_t per = (rate / 4 / LAZY_BATCH) >> lz->unit_bits;
	int err = 0;

	per = KILN_MAX(KILN_MIN(per, max), (uint64_t)1);
	while (!atomic_load(stop)) {
		struct run r[LAZY_BATCH];
		unsigned int n = 0;
		uint64_t due;

		/* demand reads first: wait while any is waiting for units */
		while (atomic_load(&lz->demand) && !atomic_load(stop))
			nap_ns(5000000);
		pthread_mutex_lock(&lz->lock);
		while (n < LAZY_BATCH &&
		       next_absent(lz, &next, lz->units - 1, per, &r[n]))
			n++;
		if (n)
			err = fetch_claimed_many(lz, r, n);
		pthread_mutex_unlock(&lz->lock);
		if (err)
			break;
		if (!n) {
			/* the end: done once the units others fetch are here */
			if (all_present(lz, 0, lz->units - 1))
				break;
			next = 0;
			nap_ns(20000000);
			continue;
		}
		for (unsigned int i = 0; i < n; i++)
			sent += run_len(lz, &r[i]);
		/* at most @rate bytes a second on average */
		due = start + (uint64_t)((double)sent / (double)rate * 1e9);
		while (!atomic_load(stop) && mono_ns() < due)
			nap_ns(KILN_MIN(due - mono_ns(), (uint64_t)50000000));
	}
	return err;
}
