// SPDX-License-Identifier: MIT
/*
 * The lazy view of a source without a mapping: fetch units on demand into
 * a sparse, unlinked file of the image's size, mapped read-only.
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
#include <sys/stat.h>
#include <unistd.h>

#include "source/source.h"

enum { ABSENT = 0, FETCHING = 1, PRESENT = 2 };

struct kiln_lazy {
	struct kiln_source *src;
	int fd;			/* the backing file, unlinked */
	const uint8_t *map;	/* src->size bytes of it */
	char *dir;		/* for messages */
	unsigned int unit_bits;
	uint64_t units;
	_Atomic uint8_t *state;	/* per unit */
	pthread_mutex_t lock;
	pthread_cond_t cond;	/* a FETCHING unit changed state */
	uint64_t fail_gen;	/* fetches that failed so far */
	int last_err;		/* of the latest one */
};

static int make_dirs(char *path)
{
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(path, 0700) < 0 && errno != EEXIST) {
			*p = '/';
			return -errno;
		}
		*p = '/';
	}
	if (mkdir(path, 0700) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

static char *default_dir(void)
{
	const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	char *d = NULL;

	if (xdg && xdg[0] == '/') {
		if (asprintf(&d, "%s/kiln", xdg) < 0)
			d = NULL;
	} else if (home && home[0] == '/') {
		if (asprintf(&d, "%s/.cache/kiln", home) < 0)
			d = NULL;
	} else {
		d = strdup("/var/tmp");
	}
	return d;
}

static int backing_file(struct kiln_lazy *lz)
{
	const struct kiln_logger *lg = lz->src->lg;
	char *tmpl = NULL;
	int err, fd;

	err = make_dirs(lz->dir);
	if (err) {
		kiln_log(lg, KILN_LOG_ERROR, "cache directory %s: %s", lz->dir,
			 strerror(-err));
		return err;
	}
	fd = open(lz->dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR)) {
		if (asprintf(&tmpl, "%s/.kiln-XXXXXX", lz->dir) < 0)
			return -ENOMEM;
		fd = mkostemp(tmpl, O_CLOEXEC);
		if (fd >= 0)
			unlink(tmpl);
		free(tmpl);
	}
	if (fd < 0) {
		err = -errno;
		kiln_log(lg, KILN_LOG_ERROR, "cache directory %s: %s", lz->dir,
			 strerror(-err));
		return err;
	}
	lz->fd = fd;
	if (ftruncate(fd, (off_t)lz->src->size) < 0) {
		err = -errno;
		kiln_log(lg, KILN_LOG_ERROR, "cache directory %s: %s", lz->dir,
			 strerror(-err));
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
				 "cache directory %s: cannot keep fetched bytes: %s",
				 lz->dir, strerror(err));
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
		   const char *cache_dir, uint32_t unit)
{
	struct kiln_lazy *lz;
	int err;

	*out = NULL;
	if (src->size > SIZE_MAX)
		return -EFBIG;
	lz = calloc(1, sizeof(*lz));
	if (!lz)
		return -ENOMEM;
	lz->src = src;
	lz->fd = -1;
	pthread_mutex_init(&lz->lock, NULL);
	pthread_cond_init(&lz->cond, NULL);
	while ((1u << lz->unit_bits) < unit)
		lz->unit_bits++;
	lz->units = ((src->size - 1) >> lz->unit_bits) + 1;
	lz->state = calloc((size_t)lz->units, sizeof(*lz->state));
	lz->dir = cache_dir ? strdup(cache_dir) : default_dir();
	if (!lz->state || !lz->dir) {
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
	}
	*out = lz;
	return 0;
}

void kiln_lazy_close(struct kiln_lazy *lz)
{
	if (!lz)
		return;
	if (lz->map)
		munmap((void *)(uintptr_t)lz->map, (size_t)lz->src->size);
	if (lz->fd >= 0)
		close(lz->fd);
	pthread_mutex_destroy(&lz->lock);
	pthread_cond_destroy(&lz->cond);
	free((void *)lz->state);
	free(lz->dir);
	free(lz);
}

const uint8_t *kiln_lazy_map(const struct kiln_lazy *lz)
{
	return lz->map;
}

/* Fetch units [@u, @v] (claimed by this thread) and store them. */
static int fetch_run(struct kiln_lazy *lz, uint64_t u, uint64_t v)
{
	uint64_t off = u << lz->unit_bits, end = unit_end(lz, v);
	size_t len = (size_t)(end - off);
	uint8_t *buf = malloc(len);
	int err;

	if (!buf)
		return -ENOMEM;
	err = lz->src->ops->fetch(lz->src, buf, len, off);
	if (!err)
		err = store(lz, buf, len, off);
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

int kiln_lazy_ensure(struct kiln_lazy *lz, uint64_t off, uint64_t len)
{
	struct kiln_source_counters *c = &lz->src->count;
	uint64_t first, last, max_units;
	int err = 0;

	if (!len)
		return 0;
	first = off >> lz->unit_bits;
	last = (off + len - 1) >> lz->unit_bits;
	if (all_present(lz, first, last)) {
		atomic_fetch_add_explicit(&c->hits, 1, memory_order_relaxed);
		return 0;
	}
	atomic_fetch_add_explicit(&c->misses, 1, memory_order_relaxed);
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
		for (uint64_t k = u; k <= v; k++)
			atomic_store(&lz->state[k], FETCHING);
		pthread_mutex_unlock(&lz->lock);
		err = fetch_run(lz, u, v);
		pthread_mutex_lock(&lz->lock);
		for (uint64_t k = u; k <= v; k++)
			atomic_store_explicit(&lz->state[k],
					      err ? ABSENT : PRESENT,
					      memory_order_release);
		if (err) {
			lz->fail_gen++;
			lz->last_err = err;
		}
		pthread_cond_broadcast(&lz->cond);
		if (err)
			break;
	}
	pthread_mutex_unlock(&lz->lock);
	if (err)
		atomic_fetch_add_explicit(&c->failures, 1,
					  memory_order_relaxed);
	return err;
}
