/* SPDX-License-Identifier: MIT */
/*
 * Where image bytes come from: a source has a size, an identity, a
 * pread-like fetch of a range and, when it can, a zero-copy mapping.
 * A source without a mapping is read through a lazy view (lazy.c) that
 * fetches on demand into a file-backed mapping.
 */
#ifndef KILN_SOURCE_H
#define KILN_SOURCE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <kiln/remote.h>

#include "util/log.h"

struct kiln_source;

/* One range of a batch: @len bytes at @off into @dst; @err its outcome. */
struct kiln_fetch {
	void *dst;
	size_t len;
	uint64_t off;
	int err;
};

struct kiln_source_ops {
	/*
	 * Copy exactly @len bytes at @off (inside the source) into @dst.
	 * Returns 0 or a negative errno (-EIO with the cause logged; -ESTALE
	 * when the object is no longer the one opened). Thread-safe.
	 */
	int (*fetch)(struct kiln_source *src, void *dst, size_t len,
		     uint64_t off);
	/*
	 * Optional: fetch @n ranges at once, several in flight, each with
	 * fetch()'s contract and time limit; sets every @f[i].err. Returns
	 * 0 or the first error.
	 */
	int (*fetch_many)(struct kiln_source *src, struct kiln_fetch *f,
			  unsigned int n);
	void (*close)(struct kiln_source *src);
};

/* What every source counts; updated with relaxed atomics. */
struct kiln_source_counters {
	atomic_uint_fast64_t bytes_fetched;
	atomic_uint_fast64_t requests;
	atomic_uint_fast64_t retries;
	atomic_uint_fast64_t hits;
	atomic_uint_fast64_t misses;
	atomic_uint_fast64_t failures;
};

struct kiln_source {
	const struct kiln_source_ops *ops;
	const struct kiln_logger *lg;	/* the image's, outlives the source */
	uint64_t size;			/* bytes */
	/* what the bytes are: "<size>" plus the ETag or Last-Modified */
	char identity[256];
	const uint8_t *map;	/* all @size bytes, read-only; NULL: none */
	/* bytes [0, @head_len) already fetched at open (may be NULL) */
	uint8_t *head;
	size_t head_len;
	struct kiln_source_counters count;
	atomic_bool cancelled;		/* kiln_image_cancel(): no more fetches */
	/* how long a read waits for another process fetching its units */
	uint32_t wait_ms;
};

/* A local file or block device (@fd stays the caller's), mapped whole. */
int kiln_source_open_fd(struct kiln_source **out, int fd,
			const struct kiln_logger *lg);

/*
 * An http:// or https:// URL, with @o (NULL: defaults). Probes the object
 * (size, ETag or Last-Modified) and keeps its first @head_want bytes.
 */
int kiln_source_open_http(struct kiln_source **out, const char *url,
			  const struct kiln_remote_opts *o, size_t head_want,
			  const struct kiln_logger *lg);

/*
 * @url without network: size and identity as the cache in @cache_dir
 * (NULL: the default) recorded them; fetches fail.
 */
int kiln_source_open_offline(struct kiln_source **out, const char *url,
			     const char *cache_dir, uint32_t unit,
			     const struct kiln_logger *lg);

/* The ranges @f[0..@n) through fetch_many, or one by one without it. */
int kiln_source_fetch_many(struct kiln_source *src, struct kiln_fetch *f,
			   unsigned int n);

/* Close @src (NULL: no-op). */
void kiln_source_close(struct kiln_source *src);

/*
 * The lazy view of a source without a mapping: a memfd of the source's
 * size, mapped read-only, filled where read, and a state per fetch unit
 * of @unit bytes. kiln_lazy_ensure() makes a range present, loading the
 * missing units from @cache (may be NULL; the view owns it) or fetching
 * them (adjacent ones merged, at most KILN_LAZY_MAX_RUN bytes per
 * request, the gaps between cached units in one batch; a miss just after
 * present units reads ahead to KILN_LAZY_READAHEAD in the background)
 * and keeping them in @cache; after it returns 0 the bytes at
 * lazy->map + off stay valid and unchanged until kiln_lazy_close(), since
 * a unit, once present, is never dropped or rewritten while open.
 */
#define KILN_LAZY_MAX_RUN	(8u << 20)
/* a miss right after present units fetches up to this much in one run */
#define KILN_LAZY_READAHEAD	(4u << 20)
#define KILN_REMOTE_UNIT_MIN	(512u << 10)
#define KILN_LAZY_MAX_SIZE	(1ull << 44)	/* bytes of a remote image */

struct kiln_lazy;
struct kiln_cache;

int kiln_lazy_open(struct kiln_lazy **out, struct kiln_source *src,
		   struct kiln_cache *cache, uint32_t unit);
void kiln_lazy_close(struct kiln_lazy *lz);
const uint8_t *kiln_lazy_map(const struct kiln_lazy *lz);
/* 0, or a negative errno with the cause logged. Thread-safe. */
int kiln_lazy_ensure(struct kiln_lazy *lz, uint64_t off, uint64_t len);
/*
 * Bytes [@lo, @hi) hold the image's metadata and little else: a miss
 * there fetches its whole KILN_LAZY_MAX_RUN window. Call before any read.
 */
void kiln_lazy_set_hot(struct kiln_lazy *lz, uint64_t lo, uint64_t hi);
/*
 * Make every unit present, in order, at most @rate bytes a second, and
 * only while no read waits for units, until *@stop: a few runs at once,
 * each a sixteenth of a second at @rate. 0, or the error of the fetch
 * that failed.
 */
int kiln_lazy_prefetch_all(struct kiln_lazy *lz, uint64_t rate,
			   const atomic_bool *stop);

#endif
