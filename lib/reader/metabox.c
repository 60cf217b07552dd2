// SPDX-License-Identifier: MIT
/*
 * The metabox: metadata-compressed images keep inodes (and what follows
 * them) inside the data of one regular file, the metabox inode. Its data
 * is decoded lazily, 64 KiB window by window, into an anonymous mapping
 * that lives until the image is closed, so pointers into it stay valid.
 *
 *   metadata offset KILN_MBX_BIT | x  ->  mbx->data + x
 *   window w = bytes [w << 16, (w + 1) << 16), ready when bit w is set
 *
 * Readers test the ready bits with one acquire load; a missing window is
 * decoded under the mutex (which also owns the metabox file handle) and
 * published with a release store. A window is written only while it is
 * not ready, so no reader ever sees it change.
 */
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "reader/internal.h"
#include "util/checked.h"

#define MBX_WIN_BITS	16u
/*
 * Decoded metadata is held in memory until close: refuse a metabox larger
 * than this (a real one holds about 100 bytes per inode plus directories).
 */
#define MBX_MAX_SIZE	(16ull << 30)

struct kiln_mbx {
	pthread_mutex_t lock;	/* serialises decoding and @file */
	struct kiln_file file;	/* the metabox inode */
	uint8_t *data;		/* @map_len bytes, the first @size decoded */
	size_t map_len;
	uint64_t size;		/* i_size of the metabox inode */
	uint64_t *ready;	/* one bit per window, atomic */
	uint64_t nr_win;
};

/* The metabox this thread is decoding: its data must not refer to itself. */
static _Thread_local const struct kiln_mbx *mbx_busy;

static bool win_ready(const struct kiln_mbx *m, uint64_t w)
{
	uint64_t word = __atomic_load_n(&m->ready[w / 64], __ATOMIC_ACQUIRE);

	return (word >> (w % 64)) & 1;
}

static void win_publish(struct kiln_mbx *m, uint64_t w)
{
	__atomic_fetch_or(&m->ready[w / 64], 1ull << (w % 64),
			  __ATOMIC_RELEASE);
}

/* Decode windows [@w, @end) (none of them ready) with one read. */
static int decode_run(const struct kiln_image *img, struct kiln_mbx *m,
		      uint64_t w, uint64_t end)
{
	uint64_t start = w << MBX_WIN_BITS;
	uint64_t stop = KILN_MIN(end << MBX_WIN_BITS, m->size);
	ssize_t n;

	n = kiln_file_pread(&m->file, m->data + start, (size_t)(stop - start),
			    start);
	if (n >= 0 && (uint64_t)n != stop - start)
		n = KILN_CORRUPT(img, "metabox nid %llu: %lld of %llu bytes at %llu read",
				 (unsigned long long)m->file.inode.nid,
				 (long long)n,
				 (unsigned long long)(stop - start),
				 (unsigned long long)start);
	if (n < 0) {
		kiln_log(&img->logger, KILN_LOG_ERROR,
			 "metabox nid %llu: bytes %llu..%llu do not decode: %s",
			 (unsigned long long)m->file.inode.nid,
			 (unsigned long long)start, (unsigned long long)stop,
			 kiln_strerror((int)n));
		return (int)n;
	}
	for (; w < end; w++)
		win_publish(m, w);
	return 0;
}

/* Decode every window of [@first, @last] that is not ready yet. */
static int decode_windows(const struct kiln_image *img, struct kiln_mbx *m,
			  uint64_t first, uint64_t last)
{
	int err = 0;

	if (mbx_busy == m) {
		return KILN_CORRUPT(img, "metabox nid %llu: its own data refers to the metabox",
				    (unsigned long long)m->file.inode.nid);
	}
	pthread_mutex_lock(&m->lock);
	mbx_busy = m;
	for (uint64_t w = first; w <= last && !err;) {
		uint64_t end = w;

		while (end <= last && !win_ready(m, end))
			end++;
		if (end > w)
			err = decode_run(img, m, w, end);
		w = end + 1;
	}
	mbx_busy = NULL;
	pthread_mutex_unlock(&m->lock);
	return err;
}

const void *kiln_mbx_get(const struct kiln_image *img, uint64_t off,
			 size_t len)
{
	struct kiln_mbx *m = img->mbx;
	uint64_t first, last;

	if (!m || !kiln_range_ok(off, len, m->size))
		return NULL;
	if (!len)
		return m->data + off;
	first = off >> MBX_WIN_BITS;
	last = (off + len - 1) >> MBX_WIN_BITS;
	for (uint64_t w = first; w <= last; w++) {
		if (win_ready(m, w))
			continue;
		if (decode_windows(img, m, w, last))
			return NULL;
		break;
	}
	return m->data + off;
}

uint64_t kiln_mbx_size(const struct kiln_image *img)
{
	return img->mbx ? img->mbx->size : 0;
}

static int mbx_check_inode(struct kiln_image *img, const struct kiln_inode *in)
{
	kiln_nid_t nid = in->nid;

	if (!S_ISREG(in->mode))
		return KILN_CORRUPT(img, "metabox nid %llu: mode 0%o, not a regular file",
				    (unsigned long long)nid, in->mode);
	if (in->size > MBX_MAX_SIZE || in->size > SIZE_MAX / 2) {
		kiln_log(&img->logger, KILN_LOG_ERROR,
			 "metabox nid %llu: %llu bytes of metadata, more than kiln holds (%llu)",
			 (unsigned long long)nid,
			 (unsigned long long)in->size,
			 (unsigned long long)KILN_MIN(MBX_MAX_SIZE,
						      (uint64_t)SIZE_MAX / 2));
		return -EFBIG;
	}
	return 0;
}

int kiln_mbx_open(struct kiln_image *img)
{
	long page = sysconf(_SC_PAGESIZE);
	struct kiln_inode in;
	struct kiln_mbx *m;
	void *data;
	int err;

	if (!(img->sb.feature_incompat & EROFS_FEATURE_INCOMPAT_METABOX))
		return 0;
	/* bit 63 is clear (decode.c): the inode itself is an image inode */
	err = kiln_inode_load(img, img->sb.metabox_nid, &in);
	if (!err)
		err = mbx_check_inode(img, &in);
	if (err)
		return err;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->size = in.size;
	m->nr_win = kiln_div_round_up(in.size, 1ull << MBX_WIN_BITS);
	m->map_len = (size_t)kiln_round_up(KILN_MAX(in.size, (uint64_t)1),
					   page > 0 ? (uint64_t)page : 4096);
	err = kiln_file_init(&m->file, img, &in);
	if (err) {
		free(m);
		return err;
	}
	pthread_mutex_init(&m->lock, NULL);
	img->mbx = m;
	m->ready = calloc(kiln_div_round_up(KILN_MAX(m->nr_win, 1), 64),
			  sizeof(*m->ready));
	if (!m->ready)
		return -ENOMEM;
	data = mmap(NULL, m->map_len, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (data == MAP_FAILED) {
		err = -errno;
		kiln_log(&img->logger, KILN_LOG_ERROR,
			 "metabox nid %llu: no room for %llu bytes of metadata",
			 (unsigned long long)in.nid,
			 (unsigned long long)in.size);
		return err;
	}
	m->data = data;
	return 0;
}

void kiln_mbx_close(struct kiln_image *img)
{
	struct kiln_mbx *m = img->mbx;

	if (!m)
		return;
	if (m->data)
		munmap(m->data, m->map_len);
	free(m->ready);
	kiln_file_release(&m->file);
	pthread_mutex_destroy(&m->lock);
	free(m);
	img->mbx = NULL;
}
