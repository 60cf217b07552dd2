// SPDX-License-Identifier: MIT
/*
 * The fragment buffer: file tails and small files concatenated into what
 * becomes the packed inode's content. Identical fragments are stored once
 * (XXH3 of the bytes, confirmed byte for byte). The contents live in
 * memory up to a limit, then in an unlinked temporary file. Workers may
 * read what is stored while the committer appends (packed.c compresses
 * the buffer in segments during the data pass).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>

#include "builder/zfrag.h"
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

	uint32_t *bucket;		/* entry numbers, 0: empty */
	size_t nr_buckets, count;	/* nr_buckets: a power of two */
	struct zfrag_entry **chunk;	/* entry i: chunk[i / ZFRAG_CHUNK] */
	size_t nr_chunks;
	uint8_t *cmp;			/* compare buffer (spilled) */
};

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
	fr->nr_buckets = 256;
	fr->bucket = calloc(fr->nr_buckets, sizeof(*fr->bucket));
	if (!tmpdir)
		tmpdir = getenv("TMPDIR");
	fr->tmpdir = strdup(tmpdir && *tmpdir ? tmpdir : "/tmp");
	if (!fr->bucket || !fr->tmpdir) {
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
	for (size_t i = 0; i < fr->nr_chunks; i++)
		free(fr->chunk[i]);
	free(fr->chunk);
	if (fr->fd >= 0)
		close(fr->fd);
	free(fr->bucket);
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

/* 1 when the stored bytes at @off equal @data, 0 if not, or -errno. */
static int zfrag_same(struct kiln_zfrag *fr, uint64_t off, const uint8_t *data,
		      size_t len)
{
	if (fr->fd < 0)
		return !memcmp(fr->buf + off, data, len);
	for (size_t done = 0; done < len;) {
		size_t n = KILN_MIN(len - done, ZFRAG_CMP_CHUNK);
		int err = full_pread(fr->fd, fr->cmp, n, off + done);

		if (err)
			return err;
		if (memcmp(fr->cmp, data + done, n))
			return 0;
		done += n;
	}
	return 1;
}

/* Entry number @n (1 for the first). */
static struct zfrag_entry *zfrag_entry(const struct kiln_zfrag *fr,
				       uint32_t n)
{
	const uint32_t i = n - 1;

	return &fr->chunk[i >> ZFRAG_CHUNK_BITS][i & (ZFRAG_CHUNK - 1)];
}

/* Twice the buckets: relink every entry (chain order does not matter). */
static int zfrag_grow(struct kiln_zfrag *fr)
{
	size_t n = fr->nr_buckets * 2;
	uint32_t *b = calloc(n, sizeof(*b));

	if (!b)
		return -ENOMEM;
	for (size_t i = 1; i <= fr->count; i++) {
		struct zfrag_entry *e = zfrag_entry(fr, (uint32_t)i);
		uint32_t *head = &b[e->hash & (n - 1)];

		e->next = *head;
		*head = (uint32_t)i;
	}
	free(fr->bucket);
	fr->bucket = b;
	fr->nr_buckets = n;
	return 0;
}

/* Room for one more entry: a new chunk every ZFRAG_CHUNK entries. */
static int zfrag_reserve(struct kiln_zfrag *fr)
{
	size_t need = fr->count / ZFRAG_CHUNK + 1;
	struct zfrag_entry **v;

	if (fr->count >= UINT32_MAX - 1)
		return -EFBIG;
	if (need <= fr->nr_chunks)
		return 0;
	v = realloc(fr->chunk, need * sizeof(*v));
	if (!v)
		return -ENOMEM;
	fr->chunk = v;
	v[fr->nr_chunks] = malloc(ZFRAG_CHUNK * sizeof(**v));
	if (!v[fr->nr_chunks])
		return -ENOMEM;
	fr->nr_chunks++;
	return 0;
}

int kiln_zfrag_add(struct kiln_zfrag *fr, const void *data, size_t len,
		   uint64_t *off)
{
	uint64_t h;
	struct zfrag_entry *e;
	uint32_t n;
	int err;

	if (!len)
		return -EINVAL;
	h = XXH3_64bits(data, len);
	/* 1. an identical fragment is already stored: share it */
	for (n = fr->bucket[h & (fr->nr_buckets - 1)]; n; n = e->next) {
		e = zfrag_entry(fr, n);
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
	if (len <= UINT32_MAX) {
		err = fr->count >= fr->nr_buckets ? zfrag_grow(fr) : 0;
		if (!err)
			err = zfrag_reserve(fr);
		if (err)
			return err;
	}
	err = zfrag_append(fr, data, len);
	if (err)
		return err;
	if (len <= UINT32_MAX) {
		uint32_t *head = &fr->bucket[h & (fr->nr_buckets - 1)];

		fr->count++;
		e = zfrag_entry(fr, (uint32_t)fr->count);
		e->hash = h;
		e->off = fr->size;
		e->len = (uint32_t)len;
		e->next = *head;
		*head = (uint32_t)fr->count;
	}
	*off = fr->size;
	pthread_mutex_lock(&fr->lock);
	fr->size += len;
	pthread_mutex_unlock(&fr->lock);
	return 0;
}
