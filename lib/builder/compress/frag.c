// SPDX-License-Identifier: MIT
/*
 * The fragment buffer: file tails and small files concatenated into what
 * becomes the packed inode's content. Identical fragments are stored once
 * (XXH3 of the bytes, confirmed byte for byte), and the stored bytes that
 * end like a new fragment are found for it (XXH3 of the last
 * ZFRAG_TAIL_KEY bytes, then compared backwards) so that a file whose end
 * is already there need not store it again. The contents live in memory
 * up to a limit, then in an unlinked temporary file. Workers may read
 * what is stored while the committer appends (packed.c compresses the
 * buffer in segments during the data pass).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>

#include "builder/compress/frag.h"
#include "util/checked.h"
#include "util/fileio.h"

#define ZFRAG_MEM_DEFAULT	((size_t)16 << 20)
#define ZFRAG_CMP_CHUNK		((size_t)64 << 10)
/* Entries per chunk of the index (a power of two). */
#define ZFRAG_CHUNK_BITS	10u
#define ZFRAG_CHUNK		(1u << ZFRAG_CHUNK_BITS)

/*
 * One stored fragment. Nearly every compressed file leaves one, so the
 * index costs about 28 bytes a distinct fragment: entries sit in chunks
 * of ZFRAG_CHUNK (no allocation each, no copy when the table grows) and
 * link by number. Entry n is index n - 1; 0 ends a chain.
 */
struct zfrag_entry {
	uint64_t hash;
	uint64_t off;
	uint32_t len;
	uint32_t next;
};

/* Entries by hash: chains of entry numbers from power-of-two buckets. */
struct zfrag_index {
	uint32_t *bucket;		/* entry numbers, 0: empty */
	size_t nr_buckets, count;	/* nr_buckets: a power of two */
	struct zfrag_entry **chunk;	/* entry i: chunk[i / ZFRAG_CHUNK] */
	size_t nr_chunks;
};

/* Candidates compared for one tail before giving up. */
#define ZFRAG_TAIL_TRIES	8u

struct kiln_zfrag {
	/*
	 * Contents: buf[0, size) while in memory, else fd. @lock guards @buf
	 * and @fd against the committer moving them (realloc, spill) while
	 * a worker reads; bytes below @size never change.
	 */
	pthread_mutex_t lock;
	uint8_t *buf;
	size_t cap, mem_limit;
	int fd;				/* -1 while in memory */
	uint64_t size;
	uint64_t saved;			/* bytes dedupe did not store */
	char *tmpdir;

	struct zfrag_index whole;	/* by the hash of all the bytes */
	struct zfrag_index tails;	/* by the hash of the last bytes */
	uint8_t *cmp;			/* compare buffer (spilled) */
};

static int index_init(struct zfrag_index *ix)
{
	ix->nr_buckets = 256;
	ix->bucket = calloc(ix->nr_buckets, sizeof(*ix->bucket));
	return ix->bucket ? 0 : -ENOMEM;
}

static void index_free(struct zfrag_index *ix)
{
	for (size_t i = 0; i < ix->nr_chunks; i++)
		free(ix->chunk[i]);
	free(ix->chunk);
	free(ix->bucket);
}

int kiln_zfrag_new(size_t mem_limit, const char *tmpdir,
		   struct kiln_zfrag **out)
{
	struct kiln_zfrag *fr = calloc(1, sizeof(*fr));

	*out = NULL;
	if (!fr)
		return -ENOMEM;
	fr->fd = -1;
	pthread_mutex_init(&fr->lock, NULL);
	fr->mem_limit = mem_limit ? mem_limit : ZFRAG_MEM_DEFAULT;
	if (!tmpdir)
		tmpdir = getenv("TMPDIR");
	fr->tmpdir = strdup(tmpdir && *tmpdir ? tmpdir : "/tmp");
	if (index_init(&fr->whole) || index_init(&fr->tails) || !fr->tmpdir) {
		kiln_zfrag_free(fr);
		return -ENOMEM;
	}
	*out = fr;
	return 0;
}

void kiln_zfrag_free(struct kiln_zfrag *fr)
{
	if (!fr)
		return;
	index_free(&fr->whole);
	index_free(&fr->tails);
	if (fr->fd >= 0)
		close(fr->fd);
	free(fr->buf);
	free(fr->cmp);
	free(fr->tmpdir);
	pthread_mutex_destroy(&fr->lock);
	free(fr);
}

uint64_t kiln_zfrag_size(const struct kiln_zfrag *fr)
{
	return fr->size;
}

uint64_t kiln_zfrag_saved(const struct kiln_zfrag *fr)
{
	return fr->saved;
}

int kiln_zfrag_spilled(const struct kiln_zfrag *fr)
{
	return fr->fd >= 0;
}

/* Stored bytes are all there: a short read is an I/O error. */
static int full_pread(int fd, void *buf, size_t len, uint64_t off)
{
	ssize_t n = kiln_pread_full(fd, buf, len, off);

	return n < 0 ? (int)n : (size_t)n < len ? -EIO : 0;
}

/* Move the contents to an unlinked temporary file. */
static int zfrag_spill(struct kiln_zfrag *fr)
{
	int fd = open(fr->tmpdir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	int err;

	if (fd < 0) {
		size_t n = strlen(fr->tmpdir) + sizeof("/kiln-frag-XXXXXX");
		char *name = malloc(n);

		if (!name)
			return -ENOMEM;
		strcpy(name, fr->tmpdir);
		strcat(name, "/kiln-frag-XXXXXX");
		fd = mkostemp(name, O_CLOEXEC);
		if (fd >= 0)
			unlink(name);
		free(name);
		if (fd < 0)
			return -errno;
	}
	err = kiln_pwrite_full(fd, fr->buf, (size_t)fr->size, 0);
	if (err) {
		close(fd);
		return err;
	}
	fr->cmp = malloc(ZFRAG_CMP_CHUNK);
	if (!fr->cmp) {
		close(fd);
		return -ENOMEM;
	}
	pthread_mutex_lock(&fr->lock);
	fr->fd = fd;
	free(fr->buf);
	fr->buf = NULL;
	fr->cap = 0;
	pthread_mutex_unlock(&fr->lock);
	return 0;
}

static int zfrag_append(struct kiln_zfrag *fr, const void *data, size_t len)
{
	if (fr->fd < 0 && fr->size + len > fr->mem_limit) {
		int err = zfrag_spill(fr);

		if (err)
			return err;
	}
	if (fr->fd >= 0)
		return kiln_pwrite_full(fr->fd, data, len, fr->size);
	if (fr->size + len > fr->cap) {
		size_t cap = KILN_MAX(fr->cap * 2, (size_t)fr->size + len);
		uint8_t *nb;

		cap = KILN_MIN(cap, KILN_MAX(fr->mem_limit, (size_t)fr->size + len));
		pthread_mutex_lock(&fr->lock);
		nb = realloc(fr->buf, cap);
		if (nb) {
			fr->buf = nb;
			fr->cap = cap;
		}
		pthread_mutex_unlock(&fr->lock);
		if (!nb)
			return -ENOMEM;
	}
	/* past @size: no reader looks here yet */
	memcpy(fr->buf + fr->size, data, len);
	return 0;
}

int kiln_zfrag_read(struct kiln_zfrag *fr, void *buf, size_t len,
		    uint64_t off)
{
	pthread_mutex_lock(&fr->lock);
	if (off > fr->size || len > fr->size - off) {
		pthread_mutex_unlock(&fr->lock);
		return -EINVAL;
	}
	if (fr->fd >= 0) {
		int fd = fr->fd;

		/* the file stays: read it unlocked */
		pthread_mutex_unlock(&fr->lock);
		return full_pread(fd, buf, len, off);
	}
	memcpy(buf, fr->buf + off, len);
	pthread_mutex_unlock(&fr->lock);
	return 0;
}

/*
 * Point *@p at @n <= ZFRAG_CMP_CHUNK stored bytes at @off: into the buffer,
 * or read into the compare buffer once spilled. The committer only (the
 * one thread that moves the buffer). 0 or -errno.
 */
static int zfrag_stored(struct kiln_zfrag *fr, uint64_t off, size_t n,
			const uint8_t **p)
{
	if (fr->fd < 0) {
		*p = fr->buf + off;
		return 0;
	}
	*p = fr->cmp;
	return full_pread(fr->fd, fr->cmp, n, off);
}

/* 1 when the stored bytes at @off equal @data, 0 if not, or -errno. */
static int zfrag_same(struct kiln_zfrag *fr, uint64_t off, const uint8_t *data,
		      size_t len)
{
	for (size_t done = 0; done < len;) {
		size_t n = KILN_MIN(len - done, ZFRAG_CMP_CHUNK);
		const uint8_t *stored;
		int err = zfrag_stored(fr, off + done, n, &stored);

		if (err)
			return err;
		if (memcmp(stored, data + done, n))
			return 0;
		done += n;
	}
	return 1;
}

/* Entry number @n (1 for the first). */
static struct zfrag_entry *index_entry(const struct zfrag_index *ix,
				       uint32_t n)
{
	const uint32_t i = n - 1;

	return &ix->chunk[i >> ZFRAG_CHUNK_BITS][i & (ZFRAG_CHUNK - 1)];
}

/* The first entry number of @hash's chain (0: none). */
static uint32_t index_first(const struct zfrag_index *ix, uint64_t hash)
{
	return ix->bucket[hash & (ix->nr_buckets - 1)];
}

/* Twice the buckets: relink every entry (chain order does not matter). */
static int index_grow(struct zfrag_index *ix)
{
	size_t n = ix->nr_buckets * 2;
	uint32_t *b = calloc(n, sizeof(*b));

	if (!b)
		return -ENOMEM;
	for (size_t i = 1; i <= ix->count; i++) {
		struct zfrag_entry *e = index_entry(ix, (uint32_t)i);
		uint32_t *head = &b[e->hash & (n - 1)];

		e->next = *head;
		*head = (uint32_t)i;
	}
	free(ix->bucket);
	ix->bucket = b;
	ix->nr_buckets = n;
	return 0;
}

/* Room for one more entry: a new chunk every ZFRAG_CHUNK entries. */
static int index_reserve(struct zfrag_index *ix)
{
	size_t need = ix->count / ZFRAG_CHUNK + 1;
	struct zfrag_entry **v;
	int err;

	if (ix->count >= UINT32_MAX - 1)
		return -EFBIG;
	err = ix->count >= ix->nr_buckets ? index_grow(ix) : 0;
	if (err || need <= ix->nr_chunks)
		return err;
	v = realloc(ix->chunk, need * sizeof(*v));
	if (!v)
		return -ENOMEM;
	ix->chunk = v;
	v[ix->nr_chunks] = malloc(ZFRAG_CHUNK * sizeof(**v));
	if (!v[ix->nr_chunks])
		return -ENOMEM;
	ix->nr_chunks++;
	return 0;
}

/* Link an entry reserved with index_reserve(). */
static void index_add(struct zfrag_index *ix, uint64_t hash, uint64_t off,
		      uint32_t len)
{
	uint32_t *head = &ix->bucket[hash & (ix->nr_buckets - 1)];
	struct zfrag_entry *e;

	ix->count++;
	e = index_entry(ix, (uint32_t)ix->count);
	e->hash = hash;
	e->off = off;
	e->len = len;
	e->next = *head;
	*head = (uint32_t)ix->count;
}

/*
 * How many of the last bytes of @data (@len of them) equal the stored
 * bytes just before offset @end, compared backwards. Returns the count or
 * -errno.
 */
static int64_t common_tail(struct kiln_zfrag *fr, uint64_t end,
			   const uint8_t *data, size_t len)
{
	size_t same = 0, max = (size_t)KILN_MIN((uint64_t)len, end);

	while (same < max) {
		size_t n = KILN_MIN(max - same, ZFRAG_CMP_CHUNK), k = 0;
		const uint8_t *stored, *mine = data + len - same - n;
		int err = zfrag_stored(fr, end - same - n, n, &stored);

		if (err)
			return err;
		/* from the end of the chunk back to the first difference */
		while (k < n && stored[n - 1 - k] == mine[n - 1 - k])
			k++;
		same += k;
		if (k < n)
			break;
	}
	return (int64_t)same;
}

int kiln_zfrag_find_tail(struct kiln_zfrag *fr, const void *data, size_t len,
			 uint64_t *end, size_t *same)
{
	const uint8_t *d = data;
	unsigned int tries = 0;
	uint64_t h;
	uint32_t n;

	*same = 0;
	if (len < ZFRAG_TAIL_KEY)
		return 0;
	h = XXH3_64bits(d + len - ZFRAG_TAIL_KEY, ZFRAG_TAIL_KEY);
	for (n = index_first(&fr->tails, h); n && tries < ZFRAG_TAIL_TRIES;
	     n = index_entry(&fr->tails, n)->next) {
		const struct zfrag_entry *e = index_entry(&fr->tails, n);
		uint64_t e_end = e->off + e->len;
		int64_t k;

		if (e->hash != h)
			continue;
		tries++;
		k = common_tail(fr, e_end, d, len);
		if (k < 0)
			return (int)k;
		if ((size_t)k > *same) {
			*same = (size_t)k;
			*end = e_end;
			if (*same == len)
				break;
		}
	}
	if (*same < ZFRAG_TAIL_KEY)
		*same = 0;
	return 0;
}

void kiln_zfrag_share(struct kiln_zfrag *fr, size_t len)
{
	fr->saved += len;
}

int kiln_zfrag_add(struct kiln_zfrag *fr, const void *data, size_t len,
		   uint64_t *off)
{
	const bool indexed = len <= UINT32_MAX;
	const bool tail_key = indexed && len >= ZFRAG_TAIL_KEY;
	struct zfrag_entry *e;
	uint64_t h;
	uint32_t n;
	int err;

	if (!len)
		return -EINVAL;
	h = XXH3_64bits(data, len);
	/* 1. an identical fragment is already stored: share it */
	for (n = index_first(&fr->whole, h); n; n = e->next) {
		e = index_entry(&fr->whole, n);
		if (e->hash != h || e->len != len)
			continue;
		err = zfrag_same(fr, e->off, data, len);
		if (err < 0)
			return err;
		if (err) {
			*off = e->off;
			fr->saved += len;
			return 0;
		}
	}
	/* 2. append and remember it (a blob of 4 GiB and more: only append) */
	err = indexed ? index_reserve(&fr->whole) : 0;
	if (!err && tail_key)
		err = index_reserve(&fr->tails);
	if (!err)
		err = zfrag_append(fr, data, len);
	if (err)
		return err;
	if (indexed)
		index_add(&fr->whole, h, fr->size, (uint32_t)len);
	if (tail_key)
		index_add(&fr->tails,
			  XXH3_64bits((const uint8_t *)data + len - ZFRAG_TAIL_KEY,
				      ZFRAG_TAIL_KEY),
			  fr->size, (uint32_t)len);
	*off = fr->size;
	pthread_mutex_lock(&fr->lock);
	fr->size += len;
	pthread_mutex_unlock(&fr->lock);
	return 0;
}
