// SPDX-License-Identifier: MIT
/*
 * The data pass in parallel: workers read and compress regular files (big
 * ones in fixed segments) while the one writer places every node's data in
 * data order (order.c), so the image is the same for any thread count.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "builder/internal.h"
#include "util/jobs.h"
#include "builder/compress/compress.h"
#include "builder/output.h"
#include "util/checked.h"
#include "util/fileio.h"
#include "util/threadpool.h"

#define SEG_SIZE		KILN_ZSEG_SIZE
/* In-flight item bytes without --memory-limit. */
#define INFLIGHT_MIN		(64ull << 20)
#define INFLIGHT_PER_WORKER	(8ull << 20)
/* Compressor output buffer each running item holds (compress/pcluster.c). */
#define ITEM_SCRATCH		(1ull << 20)
/*
 * Items in flight per worker. Small files are cheap to hold once done
 * (their compressed bytes, which the byte bound counts), and a deep queue
 * keeps every worker busy while a slow item (a big file or an 8 MiB
 * segment at a high level) holds up the commit head; shallower queues
 * left workers idle (figures: bench/README.md, "Measurements behind the defaults").
 */
#define ITEMS_PER_WORKER	128

/*
 * One item: nodes [first, last] of b->order, committed in order. When
 * @n is set it is node @last, a regular file whose bytes [off, off + len)
 * a worker compresses first; the other nodes need no worker.
 */
struct data_item {
	size_t first, last;
	struct kiln_node *n;
	uint64_t off, len;
	struct kiln_zfile *zf;		/* the worker's result */
	bool raw;			/* not worth compressing: store it */
	/* the worker's failure, logged in item order by release() */
	int err;
	const char *what;		/* NULL: strerror(err) */
};

struct pipeline {
	struct kiln_build *b;
	struct kiln_zfile *whole;	/* the segmented file being joined */
	bool whole_raw;			/* its first part said: uncompressed */
	bool failed;			/* a failure has been logged */
};

/* The source file as a worker reads it. */
struct item_src {
	int fd;
	struct data_item *it;
};

static int item_fail(struct data_item *it, int err, const char *what)
{
	if (!it->err) {
		it->err = err;
		it->what = what;
	}
	return -err;
}

static int item_read(void *ctx, void *buf, size_t len, uint64_t off)
{
	struct item_src *src = ctx;
	ssize_t n = kiln_pread_full(src->fd, buf, len, off);

	if (n < 0)
		return item_fail(src->it, (int)-n, NULL);
	if ((size_t)n < len)
		return item_fail(src->it, EIO,
				 "file changed size during the build");
	return 0;
}

int kiln_node_open(const struct kiln_build *b, const struct kiln_node *n,
		   const char **what)
{
	char path[KILN_PATH_BUF];
	const char *why = NULL;
	struct stat st;
	int fd, err;

	kiln_node_path(b, n, path, sizeof(path));
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOATIME);
	if (fd < 0 && errno == EPERM)
		fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		err = errno;
		if (err == ENOENT)
			why = "file vanished during the build";
		goto fail;
	}
	if (fstat(fd, &st) < 0) {
		err = errno;
	} else if (!S_ISREG(st.st_mode) || st.st_dev != n->src_dev ||
		   st.st_ino != n->src_ino) {
		err = EIO;
		why = "file replaced during the build";
	} else if ((uint64_t)st.st_size != n->size) {
		err = EIO;
		why = "file changed size during the build";
	} else {
		return fd;
	}
	close(fd);
fail:
	if (what)
		*what = why;
	return -err;
}

bool kiln_node_changed(int fd, const struct stat *before, const char **why)
{
	struct stat now;

	if (fstat(fd, &now) < 0) {
		*why = "file unreadable after reading it";
		return true;
	}
	if (now.st_size != before->st_size) {
		*why = "file changed size while it was read";
		return true;
	}
	if (now.st_ctim.tv_sec != before->st_ctim.tv_sec ||
	    now.st_ctim.tv_nsec != before->st_ctim.tv_nsec) {
		*why = "file changed while it was read";
		return true;
	}
	return false;
}

static int data_process(void *ctx, void *item, unsigned int worker)
{
	struct pipeline *p = ctx;
	struct kiln_build *b = p->b;
	struct data_item *it = item;
	struct item_src src = { .it = it };
	struct kiln_zcuts cuts;
	const char *what = NULL;
	struct stat before;
	bool have_cuts;
	int err;

	(void)worker;
	if (!it->n)
		return 0;
	src.fd = kiln_node_open(b, it->n, &what);
	if (src.fd < 0)
		return item_fail(it, -src.fd, what);
	if (fstat(src.fd, &before) < 0) {
		err = errno;
		close(src.fd);
		return item_fail(it, err, NULL);
	}
	have_cuts = kiln_zshift_cuts(b->zshift, it->last, &cuts);
	if (it->len == it->n->size)
		err = kiln_zfile_compress_cut(kiln_node_zctx(b, it->n),
					      item_read, &src, it->n->size,
					      have_cuts ? &cuts : NULL,
					      &it->zf);
	else
		err = kiln_zfile_compress_part(kiln_node_zctx(b, it->n),
					       item_read, &src,
					       it->off, it->len, it->n->size,
					       have_cuts ? &cuts : NULL,
					       &it->zf);
	if (err >= 0 && kiln_node_changed(src.fd, &before, &what)) {
		close(src.fd);
		return item_fail(it, EIO, what);
	}
	close(src.fd);
	if (err == 1) {
		it->raw = true;
		err = 0;
	}
	return err < 0 ? item_fail(it, -err, NULL) : 0;
}

/* One part of a segmented file: join it; after the last, place the file. */
static int commit_part(struct pipeline *p, struct data_item *it)
{
	struct kiln_build *b = p->b;
	struct kiln_zfile *zf = it->zf;
	bool last = it->off + it->len == it->n->size;
	int err;

	it->zf = NULL;
	if (!it->off) {
		p->whole = NULL;
		p->whole_raw = it->raw;
		if (it->raw)	/* the writer copies the whole file now */
			return kiln_data_commit_node(b, it->n, zf, true);
	}
	if (p->whole_raw) {
		kiln_zfile_free(zf);
		return 0;
	}
	err = kiln_zfile_commit(zf, b->out);
	if (!err)
		err = kiln_zfile_join(&p->whole, zf);
	if (err) {
		kiln_zfile_free(zf);
		return err;
	}
	/* the node owns the growing file, so a failure frees it once */
	it->n->zf = p->whole;
	if (!last)
		return 0;
	kiln_zfile_seal(p->whole);
	p->whole = NULL;
	return kiln_data_commit_node(b, it->n, it->n->zf, false);
}

static int data_commit(void *ctx, void *item)
{
	struct pipeline *p = ctx;
	struct data_item *it = item;
	size_t end = it->n ? it->last : it->last + 1;
	int err = 0;

	for (size_t i = it->first; !err && i < end; i++)
		err = kiln_data_commit_node(p->b, p->b->order[i], NULL, false);
	if (err || !it->n)
		goto out;
	if (it->len != it->n->size) {
		err = commit_part(p, it);
	} else {
		err = kiln_data_commit_node(p->b, it->n, it->zf, it->raw);
		it->zf = NULL;
	}
out:
	/* fragments placed by now may complete a segment of the packed inode */
	if (!err)
		err = kiln_packed_poll(p->b);
	/* the writer's own failures were logged where they happened */
	if (err)
		p->failed = true;
	return err;
}

static void data_release(void *ctx, void *item)
{
	struct pipeline *p = ctx;
	struct data_item *it = item;

	if (it->err && !p->failed) {
		char path[KILN_PATH_BUF], shortp[512];

		kiln_node_path(p->b, it->n, path, sizeof(path));
		kiln_log(&p->b->lg, KILN_LOG_ERROR, "%s: %s",
			 kiln_path_abbrev(path, shortp, sizeof(shortp)),
			 it->what ? it->what : strerror(it->err));
		p->failed = true;
	}
	kiln_zfile_free(it->zf);
	free(it);
}

/* Once compressed, an item holds its pclusters, not its input window. */
static uint64_t data_held(void *ctx, void *item)
{
	struct data_item *it = item;

	(void)ctx;
	return it->zf ? kiln_zfile_held_bytes(it->zf) : 0;
}

static const struct kiln_jobs_ops data_ops = {
	.process = data_process,
	.commit = data_commit,
	.release = data_release,
	.held = data_held,
};

static unsigned int build_threads(const struct kiln_build *b)
{
	unsigned int n = b->opts.threads ? b->opts.threads : kiln_cpu_count();

	return KILN_MIN(n, (unsigned int)KILN_THREADPOOL_MAX);
}

struct kiln_threadpool *kiln_build_pool(struct kiln_build *b)
{
	unsigned int threads = build_threads(b);

	if (!b->pool && threads > 1 && kiln_threadpool_new(threads, &b->pool))
		b->pool = NULL;		/* no threads: run inline */
	return b->pool;
}

/*
 * In-flight bound: three quarters of --memory-limit (the rest is for
 * workspaces, compress/ctx.c), else 64 MiB or 8 MiB per worker. An item larger
 * than the bound still runs, alone.
 */
uint64_t kiln_build_inflight_bytes(const struct kiln_build *b)
{
	if (b->opts.memory_limit)
		return KILN_MAX(b->opts.memory_limit - b->opts.memory_limit / 4,
				1ull);
	return KILN_MAX(INFLIGHT_MIN, build_threads(b) * INFLIGHT_PER_WORKER);
}

size_t kiln_build_max_items(struct kiln_build *b)
{
	struct kiln_threadpool *pool = kiln_build_pool(b);

	return ITEMS_PER_WORKER * (size_t)(pool ? kiln_threadpool_size(pool) : 1);
}

uint64_t kiln_data_inflight_bytes(const struct kiln_build *b)
{
	uint64_t all = kiln_build_inflight_bytes(b);

	return kiln_packed_wanted(b) ? KILN_MAX(all - all / 3, 1ull) : all;
}

/* Bytes an item holds at its peak: input window, output, scratch. */
static uint64_t item_cost(const struct data_item *it)
{
	return it->n ? 2 * it->len + ITEM_SCRATCH : 0;
}

static int submit(struct kiln_jobs *jobs, size_t first, size_t last,
		  struct kiln_node *n, uint64_t off, uint64_t len)
{
	struct data_item *it = calloc(1, sizeof(*it));

	if (!it)
		return -ENOMEM;
	it->first = first;
	it->last = last;
	it->n = n;
	it->off = off;
	it->len = len;
	return kiln_jobs_submit(jobs, it, item_cost(it));
}

/* A regular file a worker compresses before the writer places it. */
static bool needs_worker(const struct kiln_build *b, const struct kiln_node *n)
{
	/* the cheap tests first: kiln_node_zctx() may match a path */
	return S_ISREG(n->mode) && n->size &&
	       !(n->flags & KILN_NODE_STREAMED) && kiln_node_zctx(b, n);
}

int kiln_data_pipeline(struct kiln_build *b)
{
	struct pipeline p = { .b = b };
	struct kiln_jobs_conf conf = {
		.ops = &data_ops,
		.ctx = &p,
		.pool = kiln_build_pool(b),
		.threads = 1,		/* without a pool: inline */
		.max_bytes = kiln_data_inflight_bytes(b),
	};
	struct kiln_jobs *jobs;
	size_t first = 0;
	int err, ferr;

	conf.max_items = kiln_build_max_items(b);
	err = kiln_jobs_new(&conf, &jobs);
	if (err)
		return err;
	for (size_t i = 0; !err && i < b->nr_nodes; i++) {
		struct kiln_node *n = b->order[i];
		uint64_t seg = n->size > SEG_SIZE ? SEG_SIZE : n->size;

		if (!needs_worker(b, n))
			continue;
		/* the nodes before it ride along with its first part */
		for (uint64_t off = 0; !err && off < n->size; off += seg) {
			err = submit(jobs, first, i, n, off,
				     KILN_MIN(seg, n->size - off));
			first = i;
		}
		first = i + 1;
	}
	if (!err && first < b->nr_nodes)
		err = submit(jobs, first, b->nr_nodes - 1, NULL, 0, 0);
	ferr = kiln_jobs_finish(jobs);
	kiln_jobs_free(jobs);
	if (p.whole && !err && !ferr)
		ferr = -EIO;	/* a segmented file did not end */
	return ferr ? ferr : err;
}
