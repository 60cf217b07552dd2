/* SPDX-License-Identifier: MIT */
/*
 * Remote images: kiln_image_open() also takes an http://, https:// or
 * s3:// URL, read lazily in ranges, with the options below (docs/remote.md).
 */
#ifndef KILN_REMOTE_H
#define KILN_REMOTE_H

#include <stddef.h>
#include <stdint.h>

#include <kiln/kiln.h>

#ifdef __cplusplus
extern "C" {
#endif

enum kiln_remote_flags {
	/* do not verify the server's TLS certificate or host name */
	KILN_REMOTE_INSECURE = 1u << 0,
	/* keep nothing on disk (fetched bytes live in memory while open) */
	KILN_REMOTE_NO_CACHE = 1u << 1,
	/* no network: serve what the cache holds, EIO for the rest */
	KILN_REMOTE_OFFLINE = 1u << 2,
	/*
	 * Fetch the whole image in the background while it is open: the
	 * metadata first (every inode, directory, xattr), then every unit in
	 * order, at most @prefetch_rate bytes a second, pausing whenever a
	 * read waits for bytes.
	 */
	KILN_REMOTE_PREFETCH_ALL = 1u << 3,
	/* s3:// URLs as ENDPOINT/BUCKET/KEY, not BUCKET.ENDPOINT/KEY */
	KILN_REMOTE_S3_PATH_STYLE = 1u << 4,
};

struct kiln_remote_opts {
	size_t struct_size;	/* sizeof(struct kiln_remote_opts) */
	unsigned int flags;	/* enum kiln_remote_flags */
	const char *ca_file;	/* PEM CA bundle; NULL: the system's */
	/*
	 * Time limits in milliseconds (0: the default). One read of the
	 * image that cannot be served within @read_timeout_ms, retries and
	 * mirrors included, fails with -EIO; a request that moves no byte
	 * for @stall_timeout_ms or takes longer than @request_timeout_ms
	 * counts as failed and is retried while time remains.
	 */
	unsigned int connect_timeout_ms;	/* default 10 s */
	unsigned int stall_timeout_ms;		/* default 10 s (rounded up to s) */
	unsigned int request_timeout_ms;	/* default 60 s */
	unsigned int read_timeout_ms;		/* default 120 s */
	unsigned int retries;	/* after the first try; default 4, ~0u: none */
	/*
	 * Other URLs of the same image, tried in turn when a request to the
	 * one before fails; each must report the same size.
	 */
	const char *const *mirrors;
	unsigned int nr_mirrors;
	/*
	 * The on-disk chunk cache, shared by every process naming the same
	 * directory (NULL: $XDG_CACHE_HOME/kiln, else ~/.cache/kiln), at
	 * most @cache_size bytes (0: 4 GiB), least recently used chunks
	 * evicted first. The bytes in use by an open image live in memory
	 * (a memfd of the image's size, filled only where read).
	 */
	const char *cache_dir;
	uint32_t fetch_size;	/* bytes per fetch unit, a power of two >=
				   512 KiB; 0: 512 KiB */
	uint64_t cache_size;
	uint64_t prefetch_rate;	/* bytes a second; 0: 16 MiB/s */
	/*
	 * s3://BUCKET/KEY: the S3-compatible endpoint (http:// or https://
	 * and a host; NULL: AWS's) and the region requests are signed for
	 * (NULL: $AWS_REGION, $AWS_DEFAULT_REGION, else us-east-1).
	 */
	const char *s3_endpoint;
	const char *s3_region;
};

/* Fill @o with the defaults (struct_size set, everything else 0). */
KILN_API void kiln_remote_opts_init(struct kiln_remote_opts *o);

/* Whether @path names a remote image (http://, https:// or s3://). */
KILN_API int kiln_is_url(const char *path);

/* What a remote image's reads cost so far (all zero for a local image). */
struct kiln_remote_stats {
	uint64_t bytes_fetched;	/* body bytes received and kept */
	uint64_t requests;	/* HTTP requests sent, retries included */
	uint64_t retries;	/* requests that repeated a failed one */
	uint64_t hits;		/* reads served from bytes already fetched */
	uint64_t misses;	/* reads that had to fetch */
	uint64_t failures;	/* reads that ended in an error */
};

struct kiln_image;

/* Counters of @img (see above); thread-safe. */
KILN_API void kiln_image_remote_stats(const struct kiln_image *img,
				      struct kiln_remote_stats *st);

/* Totals a cache directory keeps of every process that used it. */
struct kiln_cache_stats {
	uint64_t bytes_fetched;	/* from servers */
	uint64_t requests;
	uint64_t retries;
	uint64_t hits;		/* reads served from bytes in memory */
	uint64_t misses;	/* reads that needed the cache or a server */
	uint64_t disk_hits;	/* units loaded from the cache */
	uint64_t stored_bytes;	/* bytes written into the cache */
	uint64_t evicted;	/* chunks deleted to stay under the cap */
};

struct kiln_cache_info {
	uint64_t chunks;	/* chunk files found (or removed) */
	uint64_t bytes;		/* their size on disk */
	uint64_t bad;		/* chunks that failed verification (removed) */
	struct kiln_cache_stats totals;
};

typedef void (*kiln_cache_bad_fn)(void *ctx, const char *path,
				  const char *why);

/*
 * The cache directory @dir (NULL: the default): kiln_cache_stat() counts
 * its chunks and reads its totals; kiln_cache_verify() also checks every
 * chunk's checksum and identity, calling @fn (may be NULL) for and
 * deleting each bad one; kiln_cache_clear() deletes every chunk and the
 * totals. 0 or a negative errno. Safe while other processes use it.
 */
KILN_API int kiln_cache_stat(const char *dir, struct kiln_cache_info *info);
KILN_API int kiln_cache_verify(const char *dir, struct kiln_cache_info *info,
			       kiln_cache_bad_fn fn, void *ctx);
KILN_API int kiln_cache_clear(const char *dir, struct kiln_cache_info *info);

#ifdef __cplusplus
}
#endif

#endif
