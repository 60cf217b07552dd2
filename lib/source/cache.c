// SPDX-License-Identifier: MIT
/*
 * The on-disk chunk cache of remote images, shared by every kiln process
 * that names the same directory:
 *
 *   DIR/v1/lock                 flock: eviction and clearing are exclusive
 *   DIR/v1/stats                counters of every process, added at close
 *   DIR/v1/<key>/identity       the URL, size and ETag the chunks belong to
 *   DIR/v1/<key>/fetching       byte-range locks: byte N held while a
 *                               process fetches unit N
 *   DIR/v1/<key>/<unit>         one fetch unit: a header, then its bytes
 *
 * <key> is a hash of the URL and the unit size. A chunk is written to a
 * temporary name and renamed when whole, so a reader sees all of it or
 * nothing, even after kill -9; its header holds an XXH3 checksum of the
 * bytes, taken when they were stored and checked every time it is
 * loaded, and the hash of the identity: a chunk of another object, a torn
 * or damaged one is dropped, never served. A process fetching units
 * holds their bytes of the fetching file (open file description locks,
 * gone with the process however it ends), so another process that wants
 * them waits and loads them, rather than fetching them a second time.
 * The total is kept under a
 * byte cap by deleting the least recently used chunks (their mtime, set
 * on every load); a full disk evicts too.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "source/cache.h"

#define CHUNK_MAGIC	"KILNCHK1"
#define DEF_CAP		(4ull << 30)
#define IDENTITY_MAX	(64u << 10)	/* bytes of an identity file */

struct chunk_header {
	char magic[8];
	uint64_t unit;		/* index */
	uint64_t len;		/* bytes after the header */
	uint64_t identity;	/* XXH3 of the identity string */
	uint64_t sum;		/* XXH3 of the bytes */
	uint64_t reserved[3];
};
_Static_assert(sizeof(struct chunk_header) == 64, "chunk header is 64 bytes");

struct kiln_cache {
	const struct kiln_logger *lg;
	char *top;		/* DIR/v1 */
	char *dir;		/* DIR/v1/<key> */
	uint64_t identity;
	uint64_t cap;
	int claims;		/* the fetching file, -1: no claims */
	struct kiln_cache_stats delta;	/* this process's, added at close */
};

static int mkdir_p(char *path)
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

char *kiln_cache_default_dir(void)
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
		d = strdup("/var/tmp/kiln");
	}
	return d;
}

static char *top_of(const char *dir)
{
	char *d = dir ? strdup(dir) : kiln_cache_default_dir(), *top = NULL;

	if (d && asprintf(&top, "%s/v1", d) < 0)
		top = NULL;
	free(d);
	return top;
}

/* Hold DIR/v1/lock (@how: LOCK_SH or LOCK_EX): its descriptor, or -errno. */
static int lock_top(const char *top, int how)
{
	char path[4200];
	int fd;

	snprintf(path, sizeof(path), "%s/lock", top);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	while (flock(fd, how) < 0) {
		if (errno != EINTR) {
			int err = -errno;

			close(fd);
			return err;
		}
	}
	return fd;
}

/* Read a whole chunk file @fd (len bytes of data expected). */
static bool read_all(int fd, void *buf, size_t len, off_t off)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = pread(fd, p, len, off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		p += n;
		len -= (size_t)n;
		off += n;
	}
	return true;
}

/*
 * The identity file at @path, NUL-terminated (to free), at most
 * IDENTITY_MAX bytes: a URL may be long (a presigned one is kilobytes).
 * NULL when missing, unreadable or larger.
 */
static char *identity_load(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	char *text = NULL;

	if (fd < 0)
		return NULL;
	if (!fstat(fd, &st) && S_ISREG(st.st_mode) &&
	    st.st_size < IDENTITY_MAX &&
	    (text = malloc((size_t)st.st_size + 1)) &&
	    !read_all(fd, text, (size_t)st.st_size, 0)) {
		free(text);
		text = NULL;
	}
	if (text)
		text[st.st_size] = '\0';
	close(fd);
	return text;
}

/* The identity file: rewritten (and the old chunks dropped) on change. */
static int check_identity(struct kiln_cache *c, const char *text)
{
	char path[4200], *old;
	int fd;

	snprintf(path, sizeof(path), "%s/identity", c->dir);
	old = identity_load(path);
	if (old && !strcmp(old, text)) {
		free(old);
		return 0;
	}
	if (old && old[0])
		kiln_log(c->lg, KILN_LOG_INFO,
			 "cache: the image changed on the server; its old chunks are dropped");
	free(old);
	/* chunks of the old object stay unreadable: their identity differs */
	snprintf(path, sizeof(path), "%s/.identity-%d", c->dir, (int)getpid());
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (write(fd, text, strlen(text)) != (ssize_t)strlen(text)) {
		close(fd);
		unlink(path);
		return -EIO;
	}
	close(fd);
	{
		char final[4200];

		snprintf(final, sizeof(final), "%s/identity", c->dir);
		if (rename(path, final) < 0)
			return -errno;
	}
	return 0;
}

int kiln_cache_open(struct kiln_cache **out, const char *dir,
		    const char *url, const char *identity, uint32_t unit,
		    uint64_t cap, const struct kiln_logger *lg)
{
	struct kiln_cache *c = calloc(1, sizeof(*c));
	char *text = NULL;
	uint64_t key;
	int err;

	*out = NULL;
	if (!c)
		return -ENOMEM;
	c->lg = lg;
	c->cap = cap ? cap : DEF_CAP;
	c->claims = -1;
	c->identity = XXH3_64bits(identity, strlen(identity));
	if (asprintf(&text, "%s\n%u\n", url, unit) < 0) {
		free(c);
		return -ENOMEM;
	}
	key = XXH3_64bits(text, strlen(text));
	free(text);
	text = NULL;
	c->top = top_of(dir);
	if (!c->top || asprintf(&c->dir, "%s/%016" PRIx64, c->top, key) < 0) {
		c->dir = NULL;
		kiln_cache_close(c);
		return -ENOMEM;
	}
	err = mkdir_p(c->dir);
	if (!err && asprintf(&text, "%s\n%s\n%u\n", url, identity, unit) < 0)
		err = -ENOMEM;
	if (!err)
		err = check_identity(c, text);
	free(text);
	if (err) {
		kiln_log(lg, KILN_LOG_WARN, "cache directory %s: %s; not caching",
			 c->top, strerror(-err));
		kiln_cache_close(c);
		return err;
	}
	/* without it, processes only share what is stored */
	if (asprintf(&text, "%s/fetching", c->dir) >= 0) {
		c->claims = open(text, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		free(text);
	}
	*out = c;
	return 0;
}

/* Lock (@type F_WRLCK) or unlock (F_UNLCK) units [@first, @last]. */
static int claim_lock(struct kiln_cache *c, uint64_t first, uint64_t last,
		      short type)
{
	struct flock fl = { .l_type = type, .l_whence = SEEK_SET,
			    .l_start = (off_t)first,
			    .l_len = (off_t)(last - first + 1) };

	if (c->claims < 0 || last >= (uint64_t)INT64_MAX)
		return 0;
	return fcntl(c->claims, F_OFD_SETLK, &fl) < 0 ? -errno : 0;
}

bool kiln_cache_claim(struct kiln_cache *c, uint64_t first, uint64_t last)
{
	int err = claim_lock(c, first, last, F_WRLCK);

	/* a lock that cannot be taken for another reason: fetch anyway */
	return err != -EAGAIN && err != -EACCES;
}

void kiln_cache_unclaim(struct kiln_cache *c, uint64_t first, uint64_t last)
{
	claim_lock(c, first, last, F_UNLCK);
}

/*
 * Check the chunk at @path: 0 good (its bytes in @dst when not NULL),
 * 1 missing, -1 damaged or not of @identity (logged with @why).
 */
static int chunk_check(const char *path, uint64_t unit, uint64_t identity,
		       uint8_t *dst, size_t len, const char **why)
{
	struct chunk_header h;
	uint8_t *buf = dst;
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc = 0;

	if (fd < 0)
		return 1;
	if (fstat(fd, &st) < 0 || !read_all(fd, &h, sizeof(h), 0) ||
	    memcmp(h.magic, CHUNK_MAGIC, 8)) {
		*why = "not a chunk, or torn";
		rc = -1;
	} else if (h.unit != unit || h.identity != identity) {
		*why = "of another image";
		rc = -1;
	} else if ((dst && h.len != len) ||
		   (uint64_t)st.st_size != sizeof(h) + h.len) {
		*why = "wrong length";
		rc = -1;
	}
	if (!rc && !buf && !(buf = malloc((size_t)h.len)))
		rc = 1;
	if (!rc && !read_all(fd, buf, (size_t)h.len, sizeof(h))) {
		*why = "short";
		rc = -1;
	}
	if (!rc && XXH3_64bits(buf, (size_t)h.len) != h.sum) {
		*why = "checksum mismatch";
		rc = -1;
	}
	if (!rc && dst)
		futimens(fd, NULL);	/* recently used */
	if (buf != dst)
		free(buf);
	close(fd);
	return rc;
}

bool kiln_cache_load(struct kiln_cache *c, uint64_t unit, void *dst,
		     size_t len)
{
	char path[4200];
	const char *why = "";
	int rc;

	snprintf(path, sizeof(path), "%s/%016" PRIx64, c->dir, unit);
	rc = chunk_check(path, unit, c->identity, dst, len, &why);
	if (rc < 0) {
		kiln_log(c->lg, KILN_LOG_WARN,
			 "cache: chunk %s is damaged (%s): dropped", path, why);
		unlink(path);
	}
	if (rc == 0)
		c->delta.disk_hits++;
	return rc == 0;
}

struct chunk_ent {
	char *path;
	uint64_t bytes;
	struct timespec used;
};

static int by_age(const void *a, const void *b)
{
	const struct chunk_ent *x = a, *y = b;

	if (x->used.tv_sec != y->used.tv_sec)
		return x->used.tv_sec < y->used.tv_sec ? -1 : 1;
	if (x->used.tv_nsec != y->used.tv_nsec)
		return x->used.tv_nsec < y->used.tv_nsec ? -1 : 1;
	return strcmp(x->path, y->path);
}

/* Call @fn on every chunk of the cache at @top. */
static int for_each_chunk(const char *top,
			  int (*fn)(void *ctx, const char *path,
				    const char *name, const struct stat *st),
			  void *ctx)
{
	DIR *d = opendir(top), *k;
	struct dirent *e, *f;
	char kdir[4096], path[sizeof(kdir) + 258];
	struct stat st;
	int err = 0;

	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while (!err && (e = readdir(d))) {
		if (e->d_name[0] == '.' || strlen(e->d_name) != 16)
			continue;
		snprintf(kdir, sizeof(kdir), "%s/%s", top, e->d_name);
		k = opendir(kdir);
		if (!k)
			continue;
		while (!err && (f = readdir(k))) {
			snprintf(path, sizeof(path), "%s/%s", kdir, f->d_name);
			if (lstat(path, &st) < 0 || !S_ISREG(st.st_mode))
				continue;
			err = fn(ctx, path, f->d_name, &st);
		}
		closedir(k);
	}
	closedir(d);
	return err;
}

struct scan {
	struct chunk_ent *ents;
	size_t n, cap;
	uint64_t total;
};

static bool is_chunk_name(const char *name)
{
	return strlen(name) == 16 && strspn(name, "0123456789abcdef") == 16;
}

static int collect(void *ctx, const char *path, const char *name,
		   const struct stat *st)
{
	struct scan *s = ctx;

	if (name[0] == '.') {
		/* a temporary of a writer killed before its rename */
		if (time(NULL) - st->st_mtime > 600)
			unlink(path);
		return 0;
	}
	if (!is_chunk_name(name))
		return 0;
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 256;
		struct chunk_ent *e = realloc(s->ents, cap * sizeof(*e));

		if (!e)
			return -ENOMEM;
		s->ents = e;
		s->cap = cap;
	}
	s->ents[s->n].path = strdup(path);
	if (!s->ents[s->n].path)
		return -ENOMEM;
	s->ents[s->n].bytes = (uint64_t)st->st_size;
	s->ents[s->n].used = st->st_mtim;
	s->total += (uint64_t)st->st_size;
	s->n++;
	return 0;
}

static void scan_free(struct scan *s)
{
	for (size_t k = 0; k < s->n; k++)
		free(s->ents[k].path);
	free(s->ents);
}

/*
 * Delete the least recently used chunks until @need more bytes fit under
 * @cap (under the exclusive lock). Returns the bytes freed.
 */
static uint64_t evict(const char *top, uint64_t cap, uint64_t need,
		      uint64_t *evicted)
{
	struct scan s = { 0 };
	uint64_t freed = 0;

	if (for_each_chunk(top, collect, &s)) {
		scan_free(&s);
		return 0;
	}
	if (s.n)
		qsort(s.ents, s.n, sizeof(*s.ents), by_age);
	for (size_t k = 0; k < s.n && s.total + need > cap; k++) {
		if (unlink(s.ents[k].path) == 0) {
			s.total -= s.ents[k].bytes;
			freed += s.ents[k].bytes;
			(*evicted)++;
		}
	}
	scan_free(&s);
	return freed;
}

static int write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -ENOSPC;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int store_once(struct kiln_cache *c, uint64_t unit, const void *src,
		      size_t len)
{
	struct chunk_header h = { .unit = unit, .len = len,
				  .identity = c->identity };
	char tmp[4200], path[4200];
	int fd, err;

	memcpy(h.magic, CHUNK_MAGIC, 8);
	h.sum = XXH3_64bits(src, len);
	snprintf(tmp, sizeof(tmp), "%s/.%016" PRIx64 "-%d", c->dir, unit,
		 (int)getpid());
	snprintf(path, sizeof(path), "%s/%016" PRIx64, c->dir, unit);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	err = write_all(fd, &h, sizeof(h));
	if (!err)
		err = write_all(fd, src, len);
	close(fd);
	if (!err && rename(tmp, path) < 0)
		err = -errno;
	if (err)
		unlink(tmp);
	return err;
}

void kiln_cache_store(struct kiln_cache *c, uint64_t unit, const void *src,
		      size_t len)
{
	uint64_t need = sizeof(struct chunk_header) + len;
	int lock, err;

	if (need > c->cap)
		return;
	lock = lock_top(c->top, LOCK_EX);
	if (lock < 0)
		return;
	evict(c->top, c->cap, need, &c->delta.evicted);
	err = store_once(c, unit, src, len);
	if (err == -ENOSPC || err == -EDQUOT) {
		/* a full disk: make room by age, then try once more */
		evict(c->top, need * 2 > c->cap ? need : c->cap / 2, need,
		      &c->delta.evicted);
		err = store_once(c, unit, src, len);
	}
	close(lock);
	if (err)
		kiln_log(c->lg, KILN_LOG_WARN, "cache: cannot keep a chunk in %s: %s",
			 c->dir, strerror(-err));
	else
		c->delta.stored_bytes += len;
}

/* Add @d to DIR/v1/stats (under the lock held by the caller). */
static void stats_add(const char *top, const struct kiln_cache_stats *d)
{
	struct kiln_cache_stats s = { 0 };
	char path[4200];
	int fd;

	snprintf(path, sizeof(path), "%s/stats", top);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	if (pread(fd, &s, sizeof(s), 0) != (ssize_t)sizeof(s))
		memset(&s, 0, sizeof(s));
	s.bytes_fetched += d->bytes_fetched;
	s.requests += d->requests;
	s.retries += d->retries;
	s.hits += d->hits;
	s.misses += d->misses;
	s.disk_hits += d->disk_hits;
	s.stored_bytes += d->stored_bytes;
	s.evicted += d->evicted;
	if (pwrite(fd, &s, sizeof(s), 0) != (ssize_t)sizeof(s))
		kiln_log(NULL, KILN_LOG_WARN, "cache: stats not written");
	close(fd);
}

void kiln_cache_close_with(struct kiln_cache *c,
			   const struct kiln_cache_stats *counts)
{
	int lock;

	if (!c)
		return;
	if (counts && c->top) {
		struct kiln_cache_stats d = *counts;

		d.disk_hits = c->delta.disk_hits;
		d.stored_bytes = c->delta.stored_bytes;
		d.evicted = c->delta.evicted;
		lock = lock_top(c->top, LOCK_EX);
		if (lock >= 0) {
			stats_add(c->top, &d);
			close(lock);
		}
	}
	if (c->claims >= 0)
		close(c->claims);
	free(c->top);
	free(c->dir);
	free(c);
}

void kiln_cache_close(struct kiln_cache *c)
{
	kiln_cache_close_with(c, NULL);
}

/* -- kiln cache stat | clear | verify ---------------------------------------- */

struct survey {
	struct kiln_cache_info *info;
	bool verify, remove;
	kiln_cache_bad_fn fn;
	void *ctx;
};

static int survey_one(void *ctx, const char *path, const char *name,
		      const struct stat *st)
{
	struct survey *s = ctx;
	char idpath[4200], *text;
	const char *why = "";
	uint64_t unit, identity;
	char *slash;
	int rc;

	if (!is_chunk_name(name))
		return 0;
	if (s->remove) {
		if (unlink(path) == 0) {
			s->info->chunks++;
			s->info->bytes += (uint64_t)st->st_size;
		}
		return 0;
	}
	s->info->chunks++;
	s->info->bytes += (uint64_t)st->st_size;
	if (!s->verify)
		return 0;
	/* the identity a chunk must carry is the one its directory names */
	snprintf(idpath, sizeof(idpath), "%s", path);
	slash = strrchr(idpath, '/');
	if (!slash)
		return 0;
	snprintf(slash, sizeof(idpath) - (size_t)(slash - idpath), "/identity");
	text = identity_load(idpath);
	/* "url\nidentity\nunit\n": the middle line */
	{
		char *a = text ? strchr(text, '\n') : NULL;
		char *b = a ? strchr(a + 1, '\n') : NULL;

		if (!a || !b) {
			identity = 0;
		} else {
			*b = '\0';
			identity = XXH3_64bits(a + 1, strlen(a + 1));
		}
	}
	free(text);
	unit = strtoull(name, NULL, 16);
	rc = chunk_check(path, unit, identity, NULL, 0, &why);
	if (rc < 0) {
		s->info->bad++;
		if (s->fn)
			s->fn(s->ctx, path, why);
		unlink(path);
	}
	return 0;
}

static int survey(const char *dir, struct kiln_cache_info *info, bool verify,
		  bool remove, kiln_cache_bad_fn fn, void *ctx)
{
	struct survey s = { info, verify, remove, fn, ctx };
	char *top = top_of(dir), path[4200];
	int lock, err;

	memset(info, 0, sizeof(*info));
	if (!top)
		return -ENOMEM;
	if (access(top, F_OK) < 0) {
		free(top);
		return 0;
	}
	lock = lock_top(top, remove ? LOCK_EX : LOCK_SH);
	if (lock < 0) {
		free(top);
		return lock;
	}
	err = for_each_chunk(top, survey_one, &s);
	snprintf(path, sizeof(path), "%s/stats", top);
	if (remove) {
		unlink(path);
	} else {
		int fd = open(path, O_RDONLY | O_CLOEXEC);

		if (fd >= 0) {
			if (pread(fd, &info->totals, sizeof(info->totals), 0) !=
			    (ssize_t)sizeof(info->totals))
				memset(&info->totals, 0, sizeof(info->totals));
			close(fd);
		}
	}
	close(lock);
	free(top);
	return err;
}

KILN_API int kiln_cache_stat(const char *dir, struct kiln_cache_info *info)
{
	return survey(dir, info, false, false, NULL, NULL);
}

KILN_API int kiln_cache_verify(const char *dir, struct kiln_cache_info *info,
			       kiln_cache_bad_fn fn, void *ctx)
{
	return survey(dir, info, true, false, fn, ctx);
}

KILN_API int kiln_cache_clear(const char *dir, struct kiln_cache_info *info)
{
	return survey(dir, info, false, true, NULL, NULL);
}

int kiln_cache_known(const char *dir, const char *url, uint32_t unit,
		     char **identity, uint64_t *size)
{
	char *top = top_of(dir), *text = NULL, path[4200], *buf;
	char *a, *b;

	*identity = NULL;
	if (!top || asprintf(&text, "%s\n%u\n", url, unit) < 0) {
		free(top);
		return -ENOMEM;
	}
	snprintf(path, sizeof(path), "%s/%016" PRIx64 "/identity", top,
		 (uint64_t)XXH3_64bits(text, strlen(text)));
	free(text);
	free(top);
	buf = identity_load(path);
	a = buf ? strchr(buf, '\n') : NULL;
	b = a ? strchr(a + 1, '\n') : NULL;
	if (!b) {
		free(buf);
		return -ENOENT;
	}
	*b = '\0';
	*size = strtoull(a + 1, NULL, 10);
	/* no size recorded: nothing to serve */
	*identity = *size ? strdup(a + 1) : NULL;
	free(buf);
	if (!*size)
		return -ENOENT;
	return *identity ? 0 : -ENOMEM;
}
