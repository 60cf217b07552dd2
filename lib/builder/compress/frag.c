// SPDX-License-Identifier: MIT
/*
 * The fragment buffer: file tails and small files concatenated into what
 * becomes the packed inode's content. Identical fragments are stored once
 * (XXH3 of the bytes, confirmed byte for byte), and the stored bytes that
 * end like a new fragment are found for it (XXH3 of the last
 * FRAG_TAIL_KEY bytes, then compared backwards) so that a file whose end
 * is already there need not store it again. The contents live in
 * pieces in memory; pieces the packed inode's segments have read or
 * compressed leave it (packed.c gives their bytes back for compares, by
 * decoding), and only past a limit do the oldest go to an unlinked
 * temporary file. Workers may read what is stored while the committer
 * appends (packed.c compresses the buffer in segments during the data
 * pass).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <xxhash.h>

#include "builder/compress/frag.h"
#include "util/checked.h"
#include "util/fileio.h"

#define FRAG_CMP_CHUNK		((size_t)64 << 10)
/* Storage pieces: a power of two of at most 1 MiB, a quarter of the limit. */
#define FRAG_PIECE_MAX_BITS	20u
#define FRAG_PIECE_MIN_BITS	10u
/* Entries per chunk of the index (a power of two). */
#define FRAG_CHUNK_BITS	10u
#define FRAG_CHUNK		(1u << FRAG_CHUNK_BITS)

/*
 * One stored fragment. Nearly every compressed file leaves one, so the
 * index costs about 28 bytes a distinct fragment: entries sit in chunks
 * of FRAG_CHUNK (no allocation each, no copy when the table grows) and
 * link by number. Entry n is index n - 1; 0 ends a chain.
 */
struct frag_entry {
	uint64_t hash;
	uint64_t off;
	uint32_t len;
	uint32_t next;
};

/* Entries by hash: chains of entry numbers from power-of-two buckets. */
struct frag_index {
	uint32_t *bucket;		/* entry numbers, 0: empty */
	size_t nr_buckets, count;	/* nr_buckets: a power of two */
	struct frag_entry **chunk;	/* entry i: chunk[i / FRAG_CHUNK] */
	size_t nr_chunks;
};

/* Candidates compared for one tail before giving up. */
#define FRAG_TAIL_TRIES	8u

/* Where the bytes of one piece are. */
enum frag_where {
	FRAG_MEM = 0,			/* piece[i] */
	FRAG_READ,			/* piece[i], its reader done: freed for room */
	FRAG_FILE,			/* the temporary file, at the same offset */
	FRAG_GONE,			/* released: the recover callback has them */
};

struct kiln_frag {
	/*
	 * Contents in pieces of 1 << bits bytes: piece i holds bytes
	 * [i << bits, (i + 1) << bits). @lock guards @piece, @where and @fd
	 * against the committer moving them (growing the table, spilling,
	 * releasing) while a worker reads; bytes below @size never change.
	 */
	pthread_mutex_t lock;
	uint8_t **piece;
	uint8_t *where;			/* enum frag_where, by piece */
	size_t nr_pieces, cap_pieces;
	unsigned int bits;
	size_t mem_limit, mem_used;	/* bytes of pieces in memory */
	size_t nr_read;			/* pieces FRAG_READ */
	size_t oldest;			/* no piece below it is in memory */
	int fd;				/* -1 until the first spill */
	int err;			/* a failed append: the buffer is broken */
	uint64_t size;
	uint64_t filled;		/* bytes written, @size and the add's own */
	uint64_t saved;			/* bytes dedupe did not store */
	uint64_t spill_bytes;		/* bytes written to the file */
	char *tmpdir;
	kiln_frag_recover_fn recover;	/* released bytes, committer only */
	void *recover_ctx;

	struct frag_index whole;	/* by the hash of all the bytes */
	struct frag_index tails;	/* by the hash of the last bytes */
	uint8_t *cmp;			/* compare buffer */
};

static int index_init(struct frag_index *ix)
{
	ix->nr_buckets = 256;
	ix->bucket = calloc(ix->nr_buckets, sizeof(*ix->bucket));
	return ix->bucket ? 0 : -ENOMEM;
}

static void index_free(struct frag_index *ix)
{
	for (size_t i = 0; i < ix->nr_chunks; i++)
		free(ix->chunk[i]);
	free(ix->chunk);
	free(ix->bucket);
}

/*
 * Pieces are mapped, not malloc'ed: memory comes and goes a piece at a
 * time all build long, and a freed piece leaves the process at once
 * instead of staying in the heap.
 */
/*
 * Pieces fill from start to end, so every page gets written: map them
 * populated, one call rather than a page fault every 4 KiB.
 */
static uint8_t *piece_alloc(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static void piece_free(uint8_t *p, size_t len)
{
	if (p)
		munmap(p, len);
}

int kiln_frag_new(size_t mem_limit, const char *tmpdir,
		   struct kiln_frag **out)
{
	struct kiln_frag *fr = calloc(1, sizeof(*fr));

	*out = NULL;
	if (!fr)
		return -ENOMEM;
	fr->fd = -1;
	pthread_mutex_init(&fr->lock, NULL);
	fr->mem_limit = mem_limit ? mem_limit : KILN_FRAG_MEM_DEFAULT;
	fr->bits = FRAG_PIECE_MAX_BITS;
	while (fr->bits > FRAG_PIECE_MIN_BITS &&
	       ((size_t)1 << fr->bits) > fr->mem_limit / 4)
		fr->bits--;
	if (!tmpdir)
		tmpdir = getenv("TMPDIR");
	fr->tmpdir = strdup(tmpdir && *tmpdir ? tmpdir : "/tmp");
	fr->cmp = malloc(FRAG_CMP_CHUNK);
	if (index_init(&fr->whole) || index_init(&fr->tails) ||
	    !fr->tmpdir || !fr->cmp) {
		kiln_frag_free(fr);
		return -ENOMEM;
	}
	*out = fr;
	return 0;
}

void kiln_frag_free(struct kiln_frag *fr)
{
	if (!fr)
		return;
	index_free(&fr->whole);
	index_free(&fr->tails);
	if (fr->fd >= 0)
		close(fr->fd);
	for (size_t i = 0; i < fr->nr_pieces; i++)
		piece_free(fr->piece[i], (size_t)1 << fr->bits);
	free(fr->piece);
	free(fr->where);
	free(fr->cmp);
	free(fr->tmpdir);
	pthread_mutex_destroy(&fr->lock);
	free(fr);
}

uint64_t kiln_frag_size(const struct kiln_frag *fr)
{
	return fr->size;
}

uint64_t kiln_frag_saved(const struct kiln_frag *fr)
{
	return fr->saved;
}

int kiln_frag_spilled(const struct kiln_frag *fr)
{
	return fr->fd >= 0;
}

uint64_t kiln_frag_spill_bytes(const struct kiln_frag *fr)
{
	return fr->spill_bytes;
}

/* Stored bytes are all there: a short read is an I/O error. */
static int full_pread(int fd, void *buf, size_t len, uint64_t off)
{
	ssize_t n = kiln_pread_full(fd, buf, len, off);

	return n < 0 ? (int)n : (size_t)n < len ? -EIO : 0;
}

/* An unlinked temporary file in fr->tmpdir. */
static int frag_open_tmp(struct kiln_frag *fr)
{
	int fd = open(fr->tmpdir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);

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
	pthread_mutex_lock(&fr->lock);
	fr->fd = fd;
	pthread_mutex_unlock(&fr->lock);
	return 0;
}

/* Whether piece @i is in memory. Lock held. */
static bool frag_in_mem(const struct kiln_frag *fr, size_t i)
{
	return fr->where[i] == FRAG_MEM || fr->where[i] == FRAG_READ;
}

/* Drop piece @i from memory, its bytes now @where. */
static void frag_unload(struct kiln_frag *fr, size_t i, uint8_t where)
{
	uint8_t *p;

	pthread_mutex_lock(&fr->lock);
	p = fr->piece[i];
	fr->piece[i] = NULL;
	if (fr->where[i] == FRAG_READ)
		fr->nr_read--;
	fr->where[i] = where;
	pthread_mutex_unlock(&fr->lock);
	piece_free(p, (size_t)1 << fr->bits);
	fr->mem_used -= (size_t)1 << fr->bits;
}

/*
 * Move the oldest piece in memory that is full to the temporary file. 0,
 * 1 when there is none, or -errno.
 */
static int frag_spill_one(struct kiln_frag *fr)
{
	const size_t psz = (size_t)1 << fr->bits;
	size_t full = (size_t)(fr->filled >> fr->bits);
	int err;

	pthread_mutex_lock(&fr->lock);
	while (fr->oldest < full && fr->where[fr->oldest] != FRAG_MEM)
		fr->oldest++;
	pthread_mutex_unlock(&fr->lock);
	if (fr->oldest >= full)
		return 1;
	if (fr->fd < 0) {
		err = frag_open_tmp(fr);
		if (err)
			return err;
	}
	err = kiln_pwrite_full(fr->fd, fr->piece[fr->oldest], psz,
			       (uint64_t)fr->oldest << fr->bits);
	if (err)
		return err;
	fr->spill_bytes += psz;
	frag_unload(fr, fr->oldest, FRAG_FILE);
	return 0;
}

/* A new piece in memory after the last, spilling older ones for room. */
static int frag_new_piece(struct kiln_frag *fr)
{
	const size_t psz = (size_t)1 << fr->bits;
	uint8_t *p;
	int err;

	if (fr->nr_pieces == fr->cap_pieces) {
		size_t cap = fr->cap_pieces ? 2 * fr->cap_pieces : 64;
		uint8_t **np;
		uint8_t *nw;

		pthread_mutex_lock(&fr->lock);
		np = realloc(fr->piece, cap * sizeof(*np));
		if (np)
			fr->piece = np;
		nw = np ? realloc(fr->where, cap) : NULL;
		if (nw) {
			fr->where = nw;
			fr->cap_pieces = cap;
		}
		pthread_mutex_unlock(&fr->lock);
		if (!nw)
			return -ENOMEM;
	}
	/* pieces whose reader is done go first: dedupe can recover them */
	for (size_t i = fr->oldest;
	     fr->nr_read && fr->mem_used + psz > fr->mem_limit &&
	     i < fr->nr_pieces; i++) {
		bool done;

		pthread_mutex_lock(&fr->lock);
		done = fr->where[i] == FRAG_READ;
		pthread_mutex_unlock(&fr->lock);
		if (done)
			frag_unload(fr, i, FRAG_GONE);
	}
	while (fr->mem_used + psz > fr->mem_limit) {
		err = frag_spill_one(fr);
		if (err < 0)
			return err;
		if (err)
			break;		/* nothing full to move: over the limit */
	}
	p = piece_alloc(psz);
	if (!p)
		return -ENOMEM;
	pthread_mutex_lock(&fr->lock);
	fr->piece[fr->nr_pieces] = p;
	fr->where[fr->nr_pieces] = FRAG_MEM;
	fr->nr_pieces++;
	pthread_mutex_unlock(&fr->lock);
	fr->mem_used += psz;
	return 0;
}

static int frag_append(struct kiln_frag *fr, const void *data, size_t len)
{
	const uint8_t *d = data;
	const size_t mask = ((size_t)1 << fr->bits) - 1;

	fr->filled = fr->size;
	while (len) {
		size_t i = (size_t)(fr->filled >> fr->bits);
		size_t at = (size_t)fr->filled & mask;
		size_t n = KILN_MIN(len, mask + 1 - at);
		int err = 0;

		if (i == fr->nr_pieces)
			err = frag_new_piece(fr);
		else if (fr->where[i] != FRAG_MEM)
			err = -EIO;	/* only the last piece can be partial */
		if (err)
			return err;
		/* past @size: no reader looks here yet */
		memcpy(fr->piece[i] + at, d, n);
		fr->filled += n;
		d += n;
		len -= n;
	}
	return 0;
}

/*
 * Copy stored bytes [@off, @off + @len) into @buf, piece by piece; with
 * @recover, released bytes too (the committer only). 0 or -errno.
 */
static int frag_copy(struct kiln_frag *fr, uint8_t *buf, size_t len,
		      uint64_t off, bool recover)
{
	const size_t mask = ((size_t)1 << fr->bits) - 1;
	int err = 0;

	pthread_mutex_lock(&fr->lock);
	while (!err && len) {
		size_t i = (size_t)(off >> fr->bits);
		size_t n = KILN_MIN(len, mask + 1 - ((size_t)off & mask));
		int fd = fr->fd;

		switch (fr->where[i]) {
		case FRAG_MEM:
		case FRAG_READ:
			memcpy(buf, fr->piece[i] + ((size_t)off & mask), n);
			break;
		case FRAG_FILE:
			/* the file's bytes stay: read them unlocked */
			pthread_mutex_unlock(&fr->lock);
			err = full_pread(fd, buf, n, off);
			pthread_mutex_lock(&fr->lock);
			break;
		default:
			/* released: only the committer, who releases, is here */
			pthread_mutex_unlock(&fr->lock);
			err = recover && fr->recover ?
				      fr->recover(fr->recover_ctx, buf, n, off) :
				      -EIO;
			pthread_mutex_lock(&fr->lock);
			break;
		}
		buf += n;
		off += n;
		len -= n;
	}
	pthread_mutex_unlock(&fr->lock);
	return err;
}

int kiln_frag_read(struct kiln_frag *fr, void *buf, size_t len,
		    uint64_t off)
{
	uint64_t size;

	pthread_mutex_lock(&fr->lock);
	size = fr->size;
	pthread_mutex_unlock(&fr->lock);
	if (off > size || len > size - off)
		return -EINVAL;
	return frag_copy(fr, buf, len, off, false);
}

void kiln_frag_set_recover(struct kiln_frag *fr, kiln_frag_recover_fn fn,
			    void *ctx)
{
	fr->recover = fn;
	fr->recover_ctx = ctx;
}

void kiln_frag_release(struct kiln_frag *fr, uint64_t end)
{
	size_t n = (size_t)(KILN_MIN(end, fr->size) >> fr->bits);

	if (!fr->recover)
		return;
	for (size_t i = fr->oldest; i < n; i++) {
		bool mem;

		pthread_mutex_lock(&fr->lock);
		mem = frag_in_mem(fr, i);
		pthread_mutex_unlock(&fr->lock);
		if (mem)
			frag_unload(fr, i, FRAG_GONE);
	}
}

void kiln_frag_consumed(struct kiln_frag *fr, uint64_t from, uint64_t to)
{
	const uint64_t psz = (uint64_t)1 << fr->bits;
	size_t i = (size_t)((from + psz - 1) >> fr->bits);

	pthread_mutex_lock(&fr->lock);
	for (; ((uint64_t)i + 1) << fr->bits <= to && i < fr->nr_pieces; i++)
		if (fr->where[i] == FRAG_MEM) {
			fr->where[i] = FRAG_READ;
			fr->nr_read++;
		}
	pthread_mutex_unlock(&fr->lock);
}

/*
 * Point *@p at @n <= FRAG_CMP_CHUNK stored bytes at @off: into a piece
 * in memory, else copied into the compare buffer. The committer only (the
 * one thread that moves pieces). 0 or -errno.
 */
static int frag_stored(struct kiln_frag *fr, uint64_t off, size_t n,
			const uint8_t **p)
{
	const size_t mask = ((size_t)1 << fr->bits) - 1;
	size_t i = (size_t)(off >> fr->bits);
	bool mem;

	/* workers mark pieces read; only this thread frees them */
	pthread_mutex_lock(&fr->lock);
	mem = frag_in_mem(fr, i);
	pthread_mutex_unlock(&fr->lock);
	if (mem && ((size_t)off & mask) + n <= mask + 1) {
		*p = fr->piece[i] + ((size_t)off & mask);
		return 0;
	}
	*p = fr->cmp;
	return frag_copy(fr, fr->cmp, n, off, true);
}

/* 1 when the stored bytes at @off equal @data, 0 if not, or -errno. */
static int frag_same(struct kiln_frag *fr, uint64_t off, const uint8_t *data,
		      size_t len)
{
	for (size_t done = 0; done < len;) {
		size_t n = KILN_MIN(len - done, FRAG_CMP_CHUNK);
		const uint8_t *stored;
		int err = frag_stored(fr, off + done, n, &stored);

		if (err)
			return err;
		if (memcmp(stored, data + done, n))
			return 0;
		done += n;
	}
	return 1;
}

/* Entry number @n (1 for the first). */
static struct frag_entry *index_entry(const struct frag_index *ix,
				       uint32_t n)
{
	const uint32_t i = n - 1;

	return &ix->chunk[i >> FRAG_CHUNK_BITS][i & (FRAG_CHUNK - 1)];
}

/* The first entry number of @hash's chain (0: none). */
static uint32_t index_first(const struct frag_index *ix, uint64_t hash)
{
	return ix->bucket[hash & (ix->nr_buckets - 1)];
}

/* Twice the buckets: relink every entry (chain order does not matter). */
static int index_grow(struct frag_index *ix)
{
	size_t n = ix->nr_buckets * 2;
	uint32_t *b = calloc(n, sizeof(*b));

	if (!b)
		return -ENOMEM;
	for (size_t i = 1; i <= ix->count; i++) {
		struct frag_entry *e = index_entry(ix, (uint32_t)i);
		uint32_t *head = &b[e->hash & (n - 1)];

		e->next = *head;
		*head = (uint32_t)i;
	}
	free(ix->bucket);
	ix->bucket = b;
	ix->nr_buckets = n;
	return 0;
}

/* Room for one more entry: a new chunk every FRAG_CHUNK entries. */
static int index_reserve(struct frag_index *ix)
{
	size_t need = ix->count / FRAG_CHUNK + 1;
	struct frag_entry **v;
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
	v[ix->nr_chunks] = malloc(FRAG_CHUNK * sizeof(**v));
	if (!v[ix->nr_chunks])
		return -ENOMEM;
	ix->nr_chunks++;
	return 0;
}

/* Link an entry reserved with index_reserve(). */
static void index_add(struct frag_index *ix, uint64_t hash, uint64_t off,
		      uint32_t len)
{
	uint32_t *head = &ix->bucket[hash & (ix->nr_buckets - 1)];
	struct frag_entry *e;

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
static int64_t common_tail(struct kiln_frag *fr, uint64_t end,
			   const uint8_t *data, size_t len)
{
	size_t same = 0, max = (size_t)KILN_MIN((uint64_t)len, end);

	while (same < max) {
		size_t n = KILN_MIN(max - same, FRAG_CMP_CHUNK), k = 0;
		const uint8_t *stored, *mine = data + len - same - n;
		int err = frag_stored(fr, end - same - n, n, &stored);

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

int kiln_frag_find_tail(struct kiln_frag *fr, const void *data, size_t len,
			 uint64_t *end, size_t *same)
{
	const uint8_t *d = data;
	unsigned int tries = 0;
	uint64_t h;
	uint32_t n;

	*same = 0;
	if (len < FRAG_TAIL_KEY)
		return 0;
	h = XXH3_64bits(d + len - FRAG_TAIL_KEY, FRAG_TAIL_KEY);
	for (n = index_first(&fr->tails, h); n && tries < FRAG_TAIL_TRIES;
	     n = index_entry(&fr->tails, n)->next) {
		const struct frag_entry *e = index_entry(&fr->tails, n);
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
	if (*same < FRAG_TAIL_KEY)
		*same = 0;
	return 0;
}

void kiln_frag_share(struct kiln_frag *fr, size_t len)
{
	fr->saved += len;
}

int kiln_frag_add(struct kiln_frag *fr, const void *data, size_t len,
		   uint64_t *off)
{
	const bool indexed = len <= UINT32_MAX;
	const bool tail_key = indexed && len >= FRAG_TAIL_KEY;
	struct frag_entry *e;
	uint64_t h;
	uint32_t n;
	int err;

	if (!len)
		return -EINVAL;
	if (fr->err)
		return fr->err;
	h = XXH3_64bits(data, len);
	/* 1. an identical fragment is already stored: share it */
	for (n = index_first(&fr->whole, h); n; n = e->next) {
		e = index_entry(&fr->whole, n);
		if (e->hash != h || e->len != len)
			continue;
		err = frag_same(fr, e->off, data, len);
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
	if (!err) {
		err = frag_append(fr, data, len);
		if (err)
			fr->err = err;	/* pieces past @size half written */
	}
	if (err)
		return err;
	if (indexed)
		index_add(&fr->whole, h, fr->size, (uint32_t)len);
	if (tail_key)
		index_add(&fr->tails,
			  XXH3_64bits((const uint8_t *)data + len - FRAG_TAIL_KEY,
				      FRAG_TAIL_KEY),
			  fr->size, (uint32_t)len);
	*off = fr->size;
	pthread_mutex_lock(&fr->lock);
	fr->size += len;
	pthread_mutex_unlock(&fr->lock);
	return 0;
}
