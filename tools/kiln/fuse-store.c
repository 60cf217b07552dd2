// SPDX-License-Identifier: MIT
/*
 * Keeping what a read decoded: a small read of a compressed file decodes
 * its whole extent, answers from it, and a background thread pushes the
 * rest of the extent into the kernel's page cache (FUSE_NOTIFY_STORE), so
 * the next reads of that extent never reach the server.
 *
 * Why a thread of its own: the kernel stores a page under its page lock,
 * and a page another read request has locked stays locked until a worker
 * answers that request. Workers never wait for the store thread (they
 * take a free buffer or read the usual way), so the store thread only
 * ever waits for requests some worker will answer.
 */
#include "fuse-ops.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#define STORE_MIN(a, b) ((a) < (b) ? (a) : (b))
#define STORE_MAX_OF(a, b) ((a) > (b) ? (a) : (b))

/* How long a stop waits for the store thread, then answers requests. */
#define STORE_STOP_WAIT_S 1
#define STORE_DRAIN_S 10

/* One extent on its way to the kernel, in the buffer it was decoded into. */
struct store_slot {
	char *buf;		/* @cap bytes, made on first use */
	size_t cap;
	fuse_ino_t ino;
	uint64_t off;		/* file offset of buf[0] */
	/* file ranges to store: [lo[i], hi[i]), empty when lo >= hi */
	uint64_t lo[2], hi[2];
	int next;		/* free list / queue link, -1: end */
};

struct kiln_fuse_store {
	struct kiln_fuse_fs *fs;
	struct fuse_session *se;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;	/* work queued, or stop */
	pthread_cond_t exited;	/* the thread is done */
	bool stop, done;
	size_t page;
	size_t alloc;			/* bytes of every slot's buffer */
	int free_head;			/* slots no read holds */
	int queue_head, queue_tail;	/* slots waiting for the thread */
	struct store_slot slots[KILN_FUSE_STORE_SLOTS];
};

/*
 * Back to the free list, buffer kept (a fresh one costs a page fault a
 * page) until the budget wants it for a longer extent (slot_grow()).
 */
static void slot_free_locked(struct kiln_fuse_store *st, int i)
{
	st->slots[i].next = st->free_head;
	st->free_head = i;
}

/* Send slot @i's ranges; a failure costs only the pages not stored. */
static void store_one(struct kiln_fuse_store *st, struct store_slot *s)
{
	struct kiln_fuse_fs *fs = st->fs;

	for (int r = 0; r < 2; r++) {
		struct fuse_bufvec bv = FUSE_BUFVEC_INIT(0);
		int res;

		if (s->lo[r] >= s->hi[r])
			continue;
		bv.buf[0].mem = s->buf + (s->lo[r] - s->off);
		bv.buf[0].size = (size_t)(s->hi[r] - s->lo[r]);
		res = fuse_lowlevel_notify_store(st->se, s->ino,
						 (off_t)s->lo[r], &bv,
						 FUSE_BUF_NO_SPLICE);
		if (res) {
			atomic_fetch_add(&fs->store_failed, 1);
			if (fs->debug)
				kiln_fuse_log(fs, LOG_DEBUG,
					      "store of %zu bytes at %llu: %s",
					      bv.buf[0].size,
					      (unsigned long long)s->lo[r],
					      strerror(-res));
			continue;
		}
		atomic_fetch_add(&fs->store_bytes, bv.buf[0].size);
	}
}

static void *store_thread(void *arg)
{
	struct kiln_fuse_store *st = arg;

	pthread_setname_np(pthread_self(), "kiln-store");
	pthread_mutex_lock(&st->lock);
	while (!st->stop) {
		int i = st->queue_head;

		if (i < 0) {
			pthread_cond_wait(&st->wake, &st->lock);
			continue;
		}
		st->queue_head = st->slots[i].next;
		if (st->queue_head < 0)
			st->queue_tail = -1;
		pthread_mutex_unlock(&st->lock);
		store_one(st, &st->slots[i]);
		pthread_mutex_lock(&st->lock);
		slot_free_locked(st, i);
	}
	st->done = true;
	pthread_cond_signal(&st->exited);
	pthread_mutex_unlock(&st->lock);
	return NULL;
}

int kiln_fuse_store_start(struct kiln_fuse_fs *fs, struct fuse_session *se)
{
	struct kiln_fuse_store *st = calloc(1, sizeof(*st));
	pthread_condattr_t ca;
	long page = sysconf(_SC_PAGESIZE);
	int err;

	if (!st)
		return -ENOMEM;
	st->fs = fs;
	st->se = se;
	st->page = page > 0 ? (size_t)page : 4096;
	st->free_head = -1;
	st->queue_head = st->queue_tail = -1;
	for (int i = KILN_FUSE_STORE_SLOTS - 1; i >= 0; i--)
		slot_free_locked(st, i);
	pthread_mutex_init(&st->lock, NULL);
	pthread_cond_init(&st->wake, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&st->exited, &ca);
	pthread_condattr_destroy(&ca);
	err = pthread_create(&st->thread, NULL, store_thread, st);
	if (err) {
		pthread_cond_destroy(&st->exited);
		pthread_cond_destroy(&st->wake);
		pthread_mutex_destroy(&st->lock);
		free(st);
		return -err;
	}
	fs->store = st;
	return 0;
}

/*
 * Answer requests a little longer, until the store thread is through: a
 * store waiting on a page that a request nobody will answer any more has
 * locked (the loop stopped on a signal) gets its page once this answers
 * that request. Gives up after @wait_s seconds. Called with st->lock
 * held; returns with it held.
 */
static void drain_requests(struct kiln_fuse_store *st, int wait_s)
{
	struct fuse_buf fbuf = { .mem = NULL };
	struct pollfd pfd = { .fd = fuse_session_fd(st->se), .events = POLLIN };
	struct timespec now, until;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += wait_s;
	/* the loop's exit flag would make every receive return 0 */
	fuse_session_reset(st->se);
	while (!st->done) {
		bool gone = false;
		int res;

		pthread_mutex_unlock(&st->lock);
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec > until.tv_sec ||
		    (now.tv_sec == until.tv_sec && now.tv_nsec >= until.tv_nsec))
			gone = true;
		res = gone ? 0 : poll(&pfd, 1, 50);
		if (res < 0 && errno != EINTR)
			gone = true;
		if (res > 0) {
			res = fuse_session_receive_buf(st->se, &fbuf);
			if (res > 0)
				fuse_session_process_buf(st->se, &fbuf);
			/* 0: a signal asked to stop again; else the
			 * connection is gone, every request ended */
			else if (res != -EINTR && res != -EAGAIN)
				gone = true;
		}
		pthread_mutex_lock(&st->lock);
		if (gone)
			break;
	}
	free(fbuf.mem);
}

/*
 * After the request loop: wait for the store thread; one stuck on a page
 * lock gets its page by drain_requests(). A thread still stuck after
 * that is left behind (its slots too): the process is about to exit.
 */
void kiln_fuse_store_stop(struct kiln_fuse_fs *fs)
{
	struct kiln_fuse_store *st = fs->store;
	struct timespec until;

	if (!st)
		return;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += STORE_STOP_WAIT_S;
	pthread_mutex_lock(&st->lock);
	st->stop = true;
	pthread_cond_broadcast(&st->wake);
	while (!st->done &&
	       pthread_cond_timedwait(&st->exited, &st->lock, &until) == 0)
		;
	if (!st->done) {
		kiln_fuse_log(fs, LOG_INFO, "a page cache store waits on a "
			      "request: answering requests until it is through");
		drain_requests(st, STORE_DRAIN_S);
	}
	if (!st->done) {
		pthread_mutex_unlock(&st->lock);
		kiln_fuse_log(fs, LOG_WARNING,
			      "a page cache store is stuck: exiting without it");
		pthread_detach(st->thread);
		fs->store = NULL;
		return;
	}
	pthread_mutex_unlock(&st->lock);
	pthread_join(st->thread, NULL);
	for (int i = 0; i < KILN_FUSE_STORE_SLOTS; i++)
		free(st->slots[i].buf);
	pthread_cond_destroy(&st->exited);
	pthread_cond_destroy(&st->wake);
	pthread_mutex_destroy(&st->lock);
	free(st);
	fs->store = NULL;
}

static void slot_put(struct kiln_fuse_store *st, int i)
{
	pthread_mutex_lock(&st->lock);
	slot_free_locked(st, i);
	pthread_mutex_unlock(&st->lock);
}

/*
 * Give slot @s a buffer of @len bytes within the budget (its old bytes
 * are not kept). Returns 0, or -1: over budget or out of memory.
 */
static int slot_grow(struct kiln_fuse_store *st, struct store_slot *s,
		     size_t len)
{
	pthread_mutex_lock(&st->lock);
	/* over budget: the buffers of idle slots go first */
	for (int i = st->free_head;
	     i >= 0 && st->alloc - s->cap + len > KILN_FUSE_STORE_BUDGET;
	     i = st->slots[i].next) {
		free(st->slots[i].buf);
		st->alloc -= st->slots[i].cap;
		st->slots[i].buf = NULL;
		st->slots[i].cap = 0;
	}
	if (st->alloc - s->cap + len > KILN_FUSE_STORE_BUDGET) {
		pthread_mutex_unlock(&st->lock);
		return -1;
	}
	st->alloc = st->alloc - s->cap + len;
	pthread_mutex_unlock(&st->lock);
	free(s->buf);
	s->buf = malloc(len);
	s->cap = s->buf ? len : 0;
	if (!s->buf) {
		pthread_mutex_lock(&st->lock);
		st->alloc -= len;
		pthread_mutex_unlock(&st->lock);
		return -1;
	}
	return 0;
}

/* A free slot with a buffer, or -1: every one is in flight. */
static int slot_take(struct kiln_fuse_store *st)
{
	int i;

	pthread_mutex_lock(&st->lock);
	i = st->free_head;
	if (i >= 0)
		st->free_head = st->slots[i].next;
	pthread_mutex_unlock(&st->lock);
	if (i >= 0 && !st->slots[i].cap &&
	    slot_grow(st, &st->slots[i], KILN_FUSE_STORE_BUF)) {
		slot_put(st, i);
		return -1;
	}
	return i;
}

static void slot_queue(struct kiln_fuse_store *st, int i)
{
	pthread_mutex_lock(&st->lock);
	st->slots[i].next = -1;
	if (st->queue_tail >= 0)
		st->slots[st->queue_tail].next = i;
	else
		st->queue_head = i;
	st->queue_tail = i;
	pthread_cond_signal(&st->wake);
	pthread_mutex_unlock(&st->lock);
}

/*
 * What slot @s may store of its extent [@ext_off, @ext_end): whole pages
 * only (a part of a page would stay not up to date and be read again),
 * the file's last page included, and none of the request's pages
 * [@req_lo, @req_hi), which the reply fills. Returns whether any is left.
 */
static bool plan_ranges(const struct kiln_fuse_store *st, struct store_slot *s,
			uint64_t ext_off, uint64_t ext_end, uint64_t fsize,
			uint64_t req_lo, uint64_t req_hi)
{
	uint64_t pg = st->page;
	uint64_t lo = (ext_off + pg - 1) / pg * pg;
	uint64_t hi = ext_end == fsize ? ext_end : ext_end / pg * pg;

	req_lo = req_lo / pg * pg;
	req_hi = (req_hi + pg - 1) / pg * pg;
	s->lo[0] = lo;
	s->hi[0] = STORE_MIN(hi, req_lo);
	s->lo[1] = STORE_MAX_OF(lo, req_hi);
	s->hi[1] = hi;
	return s->lo[0] < s->hi[0] || s->lo[1] < s->hi[1];
}

int kiln_fuse_store_read(fuse_req_t req, struct kiln_fuse_fs *fs,
			 struct kiln_file *file, fuse_ino_t ino, size_t size,
			 uint64_t off)
{
	struct kiln_fuse_store *st = fs->store;
	uint64_t fsize = kiln_file_size(file), ext_off = 0, ext_end, end, tail;
	struct store_slot *s;
	size_t head, ext_len = 0;
	int i, res;

	if (!st || off >= fsize)
		return 0;
	i = slot_take(st);
	if (i < 0) {
		atomic_fetch_add(&fs->store_busy, 1);
		return 0;
	}
	s = &st->slots[i];
	/* 1. the whole extent holding @off; any failure: read as usual */
	res = kiln_file_read_extent(file, s->buf, s->cap, off, &ext_off,
				    &ext_len);
	if (res == -ENOSPC && ext_len <= KILN_FUSE_STORE_MAX &&
	    !slot_grow(st, s, ext_len + st->page))
		res = kiln_file_read_extent(file, s->buf, s->cap, off,
					    &ext_off, &ext_len);
	if (res != 1) {
		slot_put(st, i);
		return 0;
	}
	atomic_fetch_add(&fs->store_extents, 1);
	ext_end = ext_off + ext_len;
	/*
	 * 2. the page the extent ends in, completed from the head of the
	 * next extent (a prefix decodes cheaply), so that no page between
	 * two extents waits for a read of its own
	 */
	tail = STORE_MIN((ext_end + st->page - 1) / st->page * st->page, fsize);
	if (tail > ext_end && tail - ext_off <= s->cap &&
	    kiln_file_pread(file, s->buf + ext_len, (size_t)(tail - ext_end),
			    ext_end) == (ssize_t)(tail - ext_end))
		ext_end = tail;
	end = STORE_MIN(off + size, fsize);
	head = (size_t)(STORE_MIN(end, ext_end) - off);
	/* 3. answer: from the extent itself, or with the rest read after it */
	if (end <= ext_end) {
		fuse_reply_buf(req, s->buf + (off - ext_off), head);
	} else {
		char *buf = kiln_fuse_thread_buf(fs, (size_t)(end - off));
		ssize_t rest;

		if (!buf) {
			slot_put(st, i);
			return 0;
		}
		memcpy(buf, s->buf + (off - ext_off), head);
		rest = kiln_file_pread(file, buf + head, (size_t)(end - ext_end),
				       ext_end);
		if (rest != (ssize_t)(end - ext_end)) {
			/* the usual path reads it again and says why */
			slot_put(st, i);
			return 0;
		}
		fuse_reply_buf(req, buf, (size_t)(end - off));
	}
	/* 4. the other pages of the extent go to the kernel, after the reply */
	s->ino = ino;
	s->off = ext_off;
	if (plan_ranges(st, s, ext_off, ext_end, fsize, off, end))
		slot_queue(st, i);
	else
		slot_put(st, i);
	return 1;
}
