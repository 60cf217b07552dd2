// SPDX-License-Identifier: MIT
/*
 * Reads a tar stream (or another archive libarchive reads: cpio, zip, 7z,
 * iso9660 ...; the list is in tar_open()) in one pass into the in-memory
 * tree, writing each regular file's data to the image in stream order:
 * members up to TAR_ITEM_MAX are read into memory and compressed by the
 * build's workers while the stream is read on, bigger ones to compress are read a segment at a time and their
 * segments compressed by the workers as a directory build's are, and
 * bigger ones to store as they are stream by. Entries follow extraction
 * semantics: later ones replace earlier ones, missing parents are implied.
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "builder/compress/compress.h"
#include "builder/internal.h"
#include "builder/output.h"
#include "builder/tar-acl.h"
#include "builder/tar-data.h"
#include "builder/tar-index.h"
#include "builder/tar-scan.h"
#include "format/erofs_fs.h"
#include "util/checked.h"
#include "util/fileio.h"
#include "util/jobs.h"

#define TAR_READ_BLOCK (64u * 1024)	/* bytes per read of the archive */
/*
 * Members up to this size are one pipeline item each: held in memory,
 * compressed by a worker, placed by the reading thread in stream order.
 * Bigger members to compress are one item per segment of this size, cut
 * where a directory build cuts the same file (pipeline.c). A constant, so
 * every -j makes the same choice (and the same bytes).
 */
#define TAR_ITEM_MAX	KILN_ZSEG_SIZE
/* Compressor output buffer each running item holds (compress/pcluster.c). */
#define TAR_ITEM_SCRATCH (1ull << 20)
/* Bytes per copy of a big member's rest into a temporary file. */
#define TAR_SPILL_CHUNK	(1u << 20)
/*
 * Hole bytes a sparse member may claim. Its size is only a number in a
 * header: nothing in the archive backs the holes, yet a build reads them
 * as zeros (the hash for --verify, the chunks that hold data) and the
 * verify reads them back. 1 TiB bounds that work; a claim of 2^62 bytes
 * would never end.
 */
#define TAR_HOLES_MAX	(1ull << 40)

/*
 * A member bigger than a segment, to compress: the reading thread reads
 * it a segment at a time into memory and hands each segment to the
 * workers; the segments' items share this. Items are committed and
 * released on the reading thread too, so no lock: workers never touch it.
 */
struct tar_big {
	struct kiln_node *n;
	struct kiln_tar_data d;		/* the member's bytes, while reading */
	bool reading;			/* d is open: the reader is on it */
	bool broken;			/* the reader failed (and said why) */
	struct kiln_data_extent *ext;	/* sparse map */
	size_t nr;
	char *label;			/* "<archive>: <entry>" */
	uint8_t **buf;			/* segment k's bytes, until released */
	size_t buf_cap;			/* entries of buf[], grown as read */
	uint64_t held;			/* bytes [0, held) went to buf[] */
	struct kiln_zfile *whole;	/* the committed segments, joined */
	bool placed;			/* the data is in the image */
	int spill;			/* bytes [held, size) when stored raw, or -1 */
	unsigned int refs;		/* the reader and the items */
};

/* One member's data (or one segment of it), read ahead of its place. */
struct tar_item {
	struct kiln_node *n;
	uint8_t *data;			/* bytes [off, off + len), holes zeros */
	uint64_t off, len;
	struct tar_big *big;		/* a segment of that member, or NULL */
	struct kiln_data_extent *ext;	/* sparse map (not for segments) */
	size_t nr;
	char *label;			/* "<archive>: <entry>" */
	struct kiln_zctx *zc;		/* NULL: store as it is */
	struct kiln_zfile *zf;		/* the worker's result */
	bool raw;			/* not worth compressing */
	int err;			/* the worker's failure */
};

int kiln_tar_fail(struct tar *t, int err, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	kiln_log(&t->b->lg, KILN_LOG_ERROR, "%s: %s", t->label, msg);
	return -err;
}

/* ---- file data ---- */

/* The data ranges of a sparse entry; *@nr = 0 and no SPARSE flag if none. */
static int sparse_map(struct tar *t, struct kiln_node *n,
		      struct archive_entry *e, struct kiln_data_extent **extp,
		      size_t *nr)
{
	int count = archive_entry_sparse_reset(e);
	struct kiln_data_extent *ext;
	la_int64_t off, len;
	uint64_t data = 0;
	size_t k = 0;

	*extp = NULL;
	*nr = 0;
	if (count <= 0)
		return 0;
	ext = calloc((size_t)count, sizeof(*ext));
	if (!ext)
		return -ENOMEM;
	while (k < (size_t)count &&
	       archive_entry_sparse_next(e, &off, &len) == ARCHIVE_OK) {
		if (off < 0 || len < 0 || (uint64_t)off > n->size ||
		    (uint64_t)len > n->size - (uint64_t)off ||
		    (k && (uint64_t)off < ext[k - 1].end)) {
			free(ext);
			return kiln_tar_fail(t, EIO, "bad sparse map");
		}
		if (!len)
			continue;
		ext[k].start = (uint64_t)off;
		ext[k].end = (uint64_t)(off + len);
		data += (uint64_t)len;
		k++;
	}
	if (n->size - data > TAR_HOLES_MAX) {
		free(ext);
		return kiln_tar_fail(t, EFBIG, "sparse file of %llu bytes "
				     "with %llu bytes of data: holes over %llu "
				     "bytes are refused",
				     (unsigned long long)n->size,
				     (unsigned long long)data,
				     (unsigned long long)TAR_HOLES_MAX);
	}
	if (data < n->size)
		n->flags |= KILN_NODE_SPARSE;
	*extp = ext;
	*nr = k;
	return 0;
}

/* Hole bytes of @n by its sparse map (0 unless KILN_NODE_SPARSE). */
static uint64_t sparse_holes(const struct kiln_node *n,
			     const struct kiln_data_extent *ext, size_t nr)
{
	uint64_t data = 0;

	if (!(n->flags & KILN_NODE_SPARSE))
		return 0;
	for (size_t k = 0; k < nr; k++)
		data += ext[k].end - ext[k].start;
	return n->size - data;
}

/* ---- file data in parallel: one pipeline item per member ---- */

/* The item's bytes, at their offsets in the member. */
static int item_read(void *ctx, void *buf, size_t len, uint64_t off)
{
	struct tar_item *it = ctx;

	return kiln_src_read_mem(it->data, it->off, (size_t)it->len, buf, len,
				 off);
}

static int item_process(void *ctx, void *item, unsigned int worker)
{
	struct tar_item *it = item;
	int err;

	(void)ctx;
	(void)worker;
	if (!it->zc || !it->n->size)
		return 0;
	if (it->big)
		/* a segment of a big member, as pipeline.c compresses one */
		err = kiln_zfile_compress_segment(it->zc, item_read, it,
						  it->off, it->len, it->n->size,
						  KILN_ZSEG_STREAM, NULL,
						  &it->zf);
	else
		err = kiln_zfile_compress(it->zc, item_read, it, it->n->size,
					  &it->zf);
	if (err == 1) {
		/* with dedupe, it->zf: the hashes of the data to store raw */
		it->raw = true;
		err = 0;
	}
	if (err)
		it->err = err;
	return err;
}

/* ---- uncompressed data and dedupe ---- */

static bool flat_len_known(const struct tar *t, uint64_t len)
{
	return len && kiln_u64map_get(&t->flat_lens, len);
}

static int flat_len_add(struct tar *t, uint64_t len)
{
	int r = len ? kiln_u64map_insert(&t->flat_lens, len, NULL) : 0;

	return r < 0 ? r : 0;
}

/*
 * After @n was stored as it is with dedupe on: the lengths it may have
 * recorded (write_flat() in data.c records its whole blocks and the
 * bytes before an inline tail, or all of it).
 */
static int flat_note(struct tar *t, const struct kiln_node *n)
{
	uint64_t blocks = n->size >> t->b->blkszbits << t->b->blkszbits;
	int err = flat_len_add(t, blocks);

	return err ? err : flat_len_add(t, n->size);
}

/* Whether a file of @size could find an earlier copy (write_flat()). */
static bool flat_may_match(const struct tar *t, uint64_t size)
{
	uint64_t blocks = size >> t->b->blkszbits << t->b->blkszbits;

	return flat_len_known(t, size) || flat_len_known(t, blocks);
}

/* @n's stored bytes, read back: blocks from startblk, then the tail. */
struct flat_back {
	struct kiln_build *b;
	const struct kiln_node *n;
	uint64_t len;			/* bytes in blocks */
};

static int flat_back_read(void *ctx, void *buf, size_t len, uint64_t off)
{
	struct flat_back *fb = ctx;
	uint8_t *p = buf;

	if (off < fb->len) {
		size_t k = (size_t)KILN_MIN((uint64_t)len, fb->len - off);
		int err = kiln_out_pread(fb->b->out, p, k,
					 ((uint64_t)fb->n->startblk <<
					  fb->b->blkszbits) + off);

		if (err)
			return err;
		p += k;
		off += k;
		len -= k;
	}
	if (len)
		memcpy(p, kiln_data_tail(fb->b, fb->n) + (off - fb->len), len);
	return 0;
}

/*
 * @n was stored as it is, without hashes (no earlier copy could match):
 * record its copy for later files as write_flat() would have, hashing
 * it back from the image.
 */
static int flat_record(struct kiln_build *b, struct kiln_zctx *zc,
		       const struct kiln_node *n)
{
	uint64_t tail = n->datalayout == EROFS_INODE_FLAT_INLINE ?
			n->tail_len : 0;
	struct flat_back fb = { .b = b, .n = n, .len = n->size - tail };
	uint64_t blocks = n->size >> b->blkszbits << b->blkszbits;
	uint64_t at = (uint64_t)n->startblk << b->blkszbits;
	struct kiln_zfile *flat;
	int err;

	if (!fb.len || (n->datalayout != EROFS_INODE_FLAT_PLAIN &&
			n->datalayout != EROFS_INODE_FLAT_INLINE))
		return 0;	/* chunked: not shared, as from a directory */
	err = kiln_zfile_flat_new(zc, flat_back_read, &fb, n->size, &flat);
	if (err)
		return err;
	if (fb.len != blocks)
		err = kiln_zfile_flat_add(flat, blocks, at);
	if (!err)
		err = kiln_zfile_flat_add(flat, fb.len, at);
	kiln_zfile_free(flat);
	return err;
}

static void big_put(struct tar_big *g)
{
	if (--g->refs)
		return;
	if (g->spill >= 0)
		close(g->spill);
	free(g->buf);
	free(g->ext);
	free(g->label);
	free(g);
}

/*
 * The member's bytes for the writer storing it as it is: those read into
 * segments still held, then the rest from the stream (offsets only grow
 * past what was held).
 */
static int big_read(void *ctx, void *buf, size_t len, uint64_t off)
{
	struct tar_big *g = ctx;
	uint8_t *p = buf;

	while (len && off < g->held) {
		uint64_t k = off / TAR_ITEM_MAX;
		uint64_t end = KILN_MIN((k + 1) * TAR_ITEM_MAX, g->held);
		size_t n = (size_t)KILN_MIN((uint64_t)len, end - off);

		if (!g->buf[k])
			return -EIO;	/* released: not reached */
		memcpy(p, g->buf[k] + (off - k * TAR_ITEM_MAX), n);
		p += n;
		off += n;
		len -= n;
	}
	if (!len)
		return 0;
	if (g->spill >= 0) {
		ssize_t r = kiln_pread_full(g->spill, p, len, off - g->held);

		return r < 0 ? (int)r : (size_t)r < len ? -EIO : 0;
	}
	if (!g->reading)
		return -EIO;	/* all of it was held: not reached */
	return kiln_tar_data_read(&g->d, p, len, off);
}

/* "<archive>: <entry>: <reason>" for a big member, whatever is read now. */
static int big_fail(struct tar *t, struct tar_big *g, int err,
		    const char *what)
{
	kiln_log(&t->b->lg, KILN_LOG_ERROR, "%s: %s: %s", g->label, what,
		 strerror(err));
	return -err;
}

/* An unnamed temporary file in $TMPDIR (or /tmp). */
static int spill_open(struct tar *t, struct tar_big *g)
{
	const char *dir = getenv("TMPDIR");
	char name[KILN_PATH_BUF];
	int fd;

	if (!dir || !*dir)
		dir = "/tmp";
	fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR ||
		       errno == EINVAL)) {
		snprintf(name, sizeof(name), "%s/kiln-tar-XXXXXX", dir);
		fd = mkostemp(name, O_CLOEXEC);
		if (fd >= 0)
			unlink(name);
	}
	if (fd < 0)
		return big_fail(t, g, errno, "temporary file");
	return fd;
}

/*
 * The rest of a big member stored as it is, into a temporary file: its
 * hashes must be known before it is placed (an earlier copy may be in the
 * image), and the stream cannot be read twice.
 */
static int big_spill(struct tar *t, struct tar_big *g)
{
	uint8_t *buf = malloc(TAR_SPILL_CHUNK);
	int fd = buf ? spill_open(t, g) : -ENOMEM;
	int err = 0;

	if (fd < 0) {
		free(buf);
		return fd;
	}
	g->spill = fd;
	for (uint64_t off = g->held; !err && off < g->n->size;) {
		size_t n = (size_t)KILN_MIN((uint64_t)TAR_SPILL_CHUNK,
					    g->n->size - off);

		err = kiln_tar_data_read(&g->d, buf, n, off);
		if (!err) {
			err = kiln_pwrite_full(fd, buf, n, off - g->held);
			if (err)
				err = big_fail(t, g, -err, "temporary file");
		}
		off += n;
	}
	free(buf);
	return err;
}

/*
 * A big member whose first segment is not worth compressing, stored as
 * it is, with dedupe like a file of a directory (data.c: write_flat()).
 */
static int big_store_raw(struct tar *t, struct tar_big *g,
			 struct kiln_zctx *zc)
{
	struct kiln_build *b = t->b;
	struct kiln_node *n = g->n;
	struct kiln_zfile *flat = NULL;
	int err = 0;

	if (!kiln_zctx_dedupe(zc))
		return kiln_data_write_stream_raw(b, n, g->label, big_read, g,
						  g->ext, g->nr, NULL);
	if (flat_may_match(t, n->size)) {
		/* hashes first (kiln_zfile_flat_new(), as a worker would) */
		if (g->reading && g->held < n->size)
			err = big_spill(t, g);
		if (!err)
			err = kiln_zfile_flat_new(zc, big_read, g, n->size,
						  &flat);
		if (!err)
			err = kiln_data_write_stream_raw(b, n, g->label,
							 big_read, g, g->ext,
							 g->nr, flat);
		kiln_zfile_free(flat);
	} else {
		err = kiln_data_write_stream_raw(b, n, g->label, big_read, g,
						 g->ext, g->nr, NULL);
		if (!err)
			err = flat_record(b, zc, n);
	}
	return err ? err : flat_note(t, n);
}

/*
 * In stream order, one segment of a big member: what pipeline.c's
 * commit_part() does for a file of a directory. The first segment
 * handed back raw stores the whole member as it is, from the segments
 * held and the rest of the stream; the later segments' work is dropped.
 */
static int seg_commit(struct tar *t, struct tar_item *it)
{
	struct kiln_build *b = t->b;
	struct tar_big *g = it->big;
	struct kiln_node *n = it->n;
	struct kiln_zfile *zf = it->zf;
	int err;

	it->zf = NULL;
	if (g->broken) {
		/* the reader said why; this member is not complete */
		kiln_zfile_free(zf);
		return -EIO;
	}
	if (g->placed) {
		kiln_zfile_free(zf);
		return 0;
	}
	if (!it->off && it->raw) {
		kiln_zfile_free(zf);	/* no hashes: KILN_ZSEG_STREAM */
		g->placed = true;
		return big_store_raw(t, g, it->zc);
	}
	err = kiln_zfile_commit(zf, b->out);
	if (!err)
		err = kiln_zfile_join(&g->whole, zf);
	if (err) {
		kiln_zfile_free(zf);
		return err;
	}
	/* the node owns the growing file, so a failure frees it once */
	n->zf = g->whole;
	if (it->off + it->len < n->size)
		return 0;
	kiln_zfile_seal(g->whole);
	g->placed = true;
	n->flags |= KILN_NODE_STREAMED;
	b->stats.input_bytes += n->size;
	n->datalayout = (uint8_t)kiln_zfile_datalayout(n->zf);
	return 0;
}

/*
 * In stream order: what kiln_data_write_stream() would have written as
 * the member streamed by (kiln_zfile_compress() + kiln_zfile_commit()
 * give the bytes of kiln_zfile_write()).
 */
static int item_commit(void *ctx, void *item)
{
	struct tar *t = ctx;
	struct tar_item *it = item;
	struct kiln_build *b = t->b;
	struct kiln_node *n = it->n;
	int err;

	if (it->big) {
		err = seg_commit(t, it);
	} else if (it->zf && !it->raw) {
		n->flags |= KILN_NODE_STREAMED;
		b->stats.input_bytes += n->size;
		n->zf = it->zf;		/* the node frees it from now on */
		it->zf = NULL;
		err = kiln_zfile_commit(n->zf, b->out);
		if (!err)
			n->datalayout = (uint8_t)kiln_zfile_datalayout(n->zf);
	} else if (it->raw) {
		/* stored as it is, shared with an earlier copy if any */
		err = kiln_data_write_stream_raw(b, n, it->label, item_read, it,
						 it->ext, it->nr, it->zf);
		if (!err && it->zf)
			err = flat_note(t, n);
	} else {
		err = kiln_data_write_stream(b, n, it->label, item_read, it,
					     it->ext, it->nr);
	}
	if (!err)
		err = kiln_packed_poll(b);
	if (err)
		t->failed = true;	/* logged where it happened */
	return err;
}

static void item_release(void *ctx, void *item)
{
	struct tar *t = ctx;
	struct tar_item *it = item;

	if (it->err && !t->failed) {
		kiln_log(&t->b->lg, KILN_LOG_ERROR, "%s: %s", it->label,
			 kiln_strerror(it->err));
		t->failed = true;
	}
	if (it->big) {
		it->big->buf[it->off / TAR_ITEM_MAX] = NULL;
		big_put(it->big);
	}
	kiln_zfile_free(it->zf);
	free(it->data);
	free(it->ext);
	free(it->label);
	free(it);
}

static const struct kiln_jobs_ops tar_item_ops = {
	.process = item_process,
	.commit = item_commit,
	.release = item_release,
};

/* Read the member into an item and hand it to the pipeline. */
static int entry_data_item(struct tar *t, struct kiln_node *n,
			   struct kiln_data_extent *ext, size_t nr)
{
	struct kiln_build *b = t->b;
	bool verify = b->opts.flags & KILN_BUILD_VERIFY;
	struct tar_item *it = calloc(1, sizeof(*it));
	struct kiln_tar_data d;
	int err;

	if (!it) {
		free(ext);
		return -ENOMEM;
	}
	it->n = n;
	it->len = n->size;
	it->ext = ext;
	it->nr = nr;
	it->zc = kiln_node_zctx(b, n);
	it->label = strdup(t->label);
	it->data = malloc(n->size ? (size_t)n->size : 1);
	err = kiln_tar_data_init(&d, t->a, &b->lg, t->label, n->size,
				 sparse_holes(n, ext, nr), verify);
	if (!err && (!it->label || !it->data))
		err = -ENOMEM;
	if (!err)
		err = kiln_tar_data_read(&d, it->data, (size_t)n->size, 0);
	if (!err)
		err = kiln_tar_data_finish(&d, &n->data_hash);
	kiln_tar_data_release(&d);
	if (err) {
		item_release(t, it);
		return err;
	}
	if (verify)
		n->flags |= KILN_NODE_HASHED;
	/* the pipeline owns the item now, whatever happens */
	return kiln_jobs_submit(t->jobs, it,
				(it->zc ? 2 : 1) * n->size + TAR_ITEM_SCRATCH);
}

/*
 * Room for segment @k in g->buf. Grown as segments are read, never sized
 * by the header's claim: a few bytes of tar may claim an exabyte.
 */
static int big_grow(struct tar_big *g, uint64_t k)
{
	size_t cap = g->buf_cap ? g->buf_cap * 2 : 16;
	uint8_t **nb;

	if (k < g->buf_cap)
		return 0;
	nb = realloc(g->buf, cap * sizeof(*nb));
	if (!nb)
		return -ENOMEM;
	memset(nb + g->buf_cap, 0, (cap - g->buf_cap) * sizeof(*nb));
	g->buf = nb;
	g->buf_cap = cap;
	return 0;
}

/*
 * A big member to compress: read a segment at a time into memory, each
 * segment an item (the pipeline's bounds keep the segments held in check,
 * plus the one being read). Its first segment, if not worth compressing,
 * makes its commit store the member from the segments held and the rest
 * of the stream; the reader then stops.
 */
static int entry_data_big(struct tar *t, struct kiln_node *n,
			  struct kiln_data_extent *ext, size_t nr)
{
	struct kiln_build *b = t->b;
	bool verify = b->opts.flags & KILN_BUILD_VERIFY;
	uint64_t nr_seg = kiln_div_round_up(n->size, TAR_ITEM_MAX);
	struct tar_big *g = calloc(1, sizeof(*g));
	int err;

	if (!g) {
		free(ext);
		return -ENOMEM;
	}
	g->n = n;
	g->ext = ext;
	g->nr = nr;
	g->refs = 1;
	g->spill = -1;
	g->label = strdup(t->label);
	err = kiln_tar_data_init(&g->d, t->a, &b->lg, t->label, n->size,
				 sparse_holes(n, ext, nr), verify);
	if (!err && !g->label)
		err = -ENOMEM;
	if (!err) {
		g->d.label = g->label;
		g->reading = true;
	}
	for (uint64_t k = 0; !err && k < nr_seg && !g->placed; k++) {
		struct tar_item *it = calloc(1, sizeof(*it));

		if (!it) {
			err = -ENOMEM;
			break;
		}
		it->n = n;
		it->big = g;
		it->zc = kiln_node_zctx(b, n);
		it->off = k * TAR_ITEM_MAX;
		it->len = KILN_MIN(TAR_ITEM_MAX, n->size - it->off);
		it->label = strdup(t->label);
		it->data = malloc((size_t)it->len);
		if (!it->label || !it->data || big_grow(g, k))
			err = -ENOMEM;
		else
			err = kiln_tar_data_read(&g->d, it->data,
						 (size_t)it->len, it->off);
		if (err) {
			/* logged by kiln_tar_data_read() if the stream failed */
			g->broken = true;
			free(it->data);
			free(it->label);
			free(it);
			break;
		}
		g->buf[k] = it->data;
		g->held = it->off + it->len;
		g->refs++;
		/* the pipeline owns the item now, whatever happens */
		err = kiln_jobs_submit(t->jobs, it,
				       2 * it->len + TAR_ITEM_SCRATCH);
	}
	/* the rest of the member, if its first segment's commit left any */
	if (!err)
		err = kiln_tar_data_finish(&g->d, &n->data_hash);
	if (!err && verify)
		n->flags |= KILN_NODE_HASHED;
	if (err)
		g->broken = true;
	g->reading = false;
	kiln_tar_data_release(&g->d);
	big_put(g);
	return err;
}

/* A big member stored as it is, after all items before it. */
static int entry_data_stream(struct tar *t, struct kiln_node *n,
			     struct kiln_data_extent *ext, size_t nr)
{
	struct kiln_build *b = t->b;
	bool verify = b->opts.flags & KILN_BUILD_VERIFY;
	struct kiln_tar_data d;
	int err = kiln_jobs_finish(t->jobs);

	if (err)
		return err;
	err = kiln_tar_data_init(&d, t->a, &b->lg, t->label, n->size,
				 sparse_holes(n, ext, nr), verify);
	if (!err)
		err = kiln_data_write_stream(b, n, t->label, kiln_tar_data_read,
					     &d, ext, nr);
	/* holes the writer had no need to read still count for the hash */
	if (!err)
		err = kiln_tar_data_finish(&d, &n->data_hash);
	if (!err && verify)
		n->flags |= KILN_NODE_HASHED;
	if (!err)
		err = kiln_packed_poll(b);
	kiln_tar_data_release(&d);
	free(ext);
	return err;
}

static int entry_data(struct tar *t, struct kiln_node *n,
		      struct archive_entry *e)
{
	struct kiln_build *b = t->b;
	struct kiln_data_extent *ext;
	uint64_t data;
	size_t nr;
	int err;

	if (t->flatten) {
		/* the data pass reads it, if a later layer leaves the file */
		n->src_layer = t->layer;
		n->src_member = t->member;
		return 0;
	}
	if (b->opts.source_kind == KILN_SOURCE_TAR_INDEX) {
		err = kiln_tar_index_member(b, t->a, e, n, t->label);
		kiln_progress_add_done(&b->progress, 1, n->size);
		return err;
	}
	err = sparse_map(t, n, e, &ext, &nr);
	if (err)
		return err;
	/* compress hints match the entry's path: the node is not linked yet */
	kiln_node_pick_zctx(b, n, t->path);
	data = n->size - sparse_holes(n, ext, nr);
	if (!kiln_node_zctx(b, n) &&
	    data > (uint64_t)UINT32_MAX << b->blkszbits) {
		/* stored as it is, the data alone would not fit in an image */
		free(ext);
		return kiln_tar_fail(t, EFBIG, "%llu bytes of data: more "
				     "than an image of 2^32 blocks holds",
				     (unsigned long long)data);
	}
	if (n->size <= TAR_ITEM_MAX)
		err = entry_data_item(t, n, ext, nr);
	else if (kiln_node_zctx(b, n))
		err = entry_data_big(t, n, ext, nr);
	else
		err = entry_data_stream(t, n, ext, nr);
	kiln_progress_add_done(&b->progress, 1, n->size);
	kiln_progress_tick(&b->progress);
	return err;
}

/* ---- entries ---- */

/*
 * A hardlink entry with data, as cpio writes them: newc gives the data of
 * a file with its last name (the names before are empty), odc with every
 * name. As extraction would write the data through the link, the names
 * seen so far move to a new node that takes this entry's attributes and
 * data; *@target becomes it. (The data an odc archive repeats is written
 * again, unless dedupe finds it.)
 */
static int hardlink_data(struct tar *t, struct archive_entry *e,
			 struct kiln_node **target)
{
	struct kiln_node *old = *target, *n;
	int err;

	if (!S_ISREG(old->mode) || archive_entry_filetype(e) != AE_IFREG)
		return kiln_tar_fail(t, EOPNOTSUPP,
				     "hardlink entry carrying data is not a regular file");
	err = kiln_tar_node_new(t, &n);
	if (!err)
		err = kiln_tar_entry_attrs(t, n, e, false);
	if (!err)
		err = entry_data(t, n, e);
	if (err)
		return err;
	kiln_tar_names_relink(t, old, n);
	*target = n;
	return 0;
}

/* A hardlink: the name gets the node of an earlier entry. */
static int entry_hardlink(struct tar *t, struct archive_entry *e,
			  struct kiln_node *dir, const char *name, size_t len)
{
	struct kiln_node *target, *tdir;
	struct kiln_dentry *d;
	const char *tname;
	char *saved;
	size_t tlen, depth;
	int err;

	/* resolve the target with the same rules (t->path is reused) */
	saved = strndup(name, len);
	if (!saved)
		return -ENOMEM;
	err = kiln_tar_normalize(t, archive_entry_hardlink(e), &depth);
	if (!err && !depth)
		err = kiln_tar_fail(t, EPERM, "hardlink to the root");
	if (!err)
		err = kiln_tar_walk_parents(t, false, &tdir, &tname, &tlen);
	d = err ? NULL : kiln_tar_child_find(t, tdir, tname, tlen);
	target = d ? d->node : NULL;
	if (!err && !target)
		err = -ENOENT;
	if (err == -ENOENT && t->link_below)
		err = t->link_below(t, t->ctx, &target);
	else if (err == -ENOENT)
		err = kiln_tar_fail(t, ENOENT, "hardlink target '%s' not earlier "
				    "in the archive (or excluded)",
				    archive_entry_hardlink(e));
	if (err) {
		free(saved);
		return err;
	}
	if (S_ISDIR(target->mode)) {
		free(saved);
		return kiln_tar_fail(t, EPERM, "hardlink to a directory");
	}
	if (archive_entry_size_is_set(e) && archive_entry_size(e) > 0) {
		/* tar readers disagree on such data: only cpio's is clear */
		if ((archive_format(t->a) & ARCHIVE_FORMAT_BASE_MASK) !=
		    ARCHIVE_FORMAT_CPIO)
			err = kiln_tar_fail(t, EOPNOTSUPP,
					    "hardlink entry carrying data not supported");
		else
			err = hardlink_data(t, e, &target);
		if (err) {
			free(saved);
			return err;
		}
	}
	d = kiln_tar_child_find(t, dir, saved, len);
	if (d) {
		d->node = target;	/* replaces what was there */
		d->layer = (uint16_t)t->layer;
	} else
		err = kiln_tar_child_add(t, dir, saved, len, target);
	free(saved);
	return err;
}

/*
 * What the whiteout options make of the entry named t->path: *@kind is
 * KILN_WH_NONE for an entry to store as it is (every entry with
 * --whiteouts=keep), KILN_WH_META for one to skip (aufs bookkeeping and
 * what is below it; with strip, every whiteout), else the whiteout.
 */
static int entry_whiteout(struct tar *t, struct archive_entry *e,
			  enum kiln_whiteout_kind *kind)
{
	const char *base = strrchr(t->path, '/'), *target;
	size_t target_len;

	base = base ? base + 1 : t->path;
	*kind = KILN_WH_NONE;
	if (t->whiteouts == KILN_WHITEOUTS_KEEP)
		return 0;
	/* below an aufs bookkeeping directory (".wh..wh.plnk/..."): skipped */
	for (const char *p = t->path; p < base;) {
		const char *end = strchr(p, '/');
		enum kiln_whiteout_kind k = kiln_whiteout_kind(
			p, (size_t)(end - p), &target, &target_len);

		if (k == KILN_WH_META ||
		    (k != KILN_WH_NONE && t->strip_whiteouts)) {
			*kind = KILN_WH_META;
			return 0;
		}
		p = end + 1;
	}
	*kind = kiln_whiteout_kind(base, strlen(base), &target, &target_len);
	if (t->strip_whiteouts) {
		/* an overlayfs whiteout in the archive goes too */
		if (*kind != KILN_WH_NONE ||
		    (archive_entry_filetype(e) == AE_IFCHR &&
		     !archive_entry_rdevmajor(e) && !archive_entry_rdevminor(e)))
			*kind = KILN_WH_META;
		return 0;
	}
	if (*kind == KILN_WH_BAD)
		return kiln_tar_fail(t, EINVAL, "whiteout '%s' names no file",
				     base);
	return 0;
}

/*
 * Flattening: hide the names layers below t->layer hold under @dir
 * (an opaque directory); names of t->layer stay, and so do directories
 * holding some. Whether anything of t->layer is left under @dir. The
 * depth is bounded by TAR_MAX_DEPTH.
 */
static bool hide_lower(struct tar *t, struct kiln_node *dir)
{
	bool kept = false;

	for (size_t j = 0; j < dir->nr_children; j++) {
		struct kiln_dentry *c = &dir->children[j];
		bool keep;

		if (!c->node)
			continue;
		keep = c->layer == t->layer;
		if (S_ISDIR(c->node->mode) && hide_lower(t, c->node))
			keep = true;
		if (keep)
			kept = true;
		else
			c->node = NULL;
	}
	return kept;
}

/*
 * The directory holding the last component of t->path as the tree has
 * it, making none: *@dirp and *@name (that component), or false if a
 * parent is missing or deleted, or is a file (*@file then true).
 */
static bool parent_dir(struct tar *t, struct kiln_node **dirp,
		       const char **name, bool *file)
{
	struct kiln_node *dir = t->b->root;
	const char *p = t->path, *slash;

	*file = false;
	while ((slash = strchr(p, '/'))) {
		struct kiln_dentry *d = kiln_tar_child_find(
			t, dir, p, (size_t)(slash - p));

		if (!d || !d->node)
			return false;
		if (!S_ISDIR(d->node->mode)) {
			*file = true;
			return false;
		}
		dir = d->node;
		p = slash + 1;
	}
	*dirp = dir;
	*name = p;
	return true;
}

/*
 * Flattening: a whiteout or opaque marker of layer t->layer deletes what
 * the layers below have there (per the OCI image spec, never a name of
 * its own layer); nothing of it goes into the image. Where the layers
 * below have no directory (umoci writes whiteouts below a directory its
 * layer replaced with a file) there is nothing to delete.
 */
static int entry_apply_whiteout(struct tar *t, enum kiln_whiteout_kind kind)
{
	struct kiln_node *dir;
	struct kiln_dentry *d;
	const char *name;
	bool file;

	if (!parent_dir(t, &dir, &name, &file))
		return 0;
	if (kind == KILN_WH_OPAQUE) {
		hide_lower(t, dir);
		return 0;
	}
	d = kiln_tar_child_find(t, dir, name + 4, strlen(name) - 4);
	if (d && d->node && d->layer < t->layer)
		d->node = NULL;	/* and everything below it */
	return 0;
}

/*
 * Whether a parent of t->path is a file already: a whiteout there deletes
 * nothing (umoci writes them, as above) and is skipped.
 */
static bool below_file(struct tar *t)
{
	struct kiln_node *dir;
	const char *name;
	bool file;

	return !parent_dir(t, &dir, &name, &file) && file;
}

static int tar_entry(struct tar *t, struct archive_entry *e)
{
	const char *raw = archive_entry_pathname(e), *name;
	enum kiln_whiteout_kind whiteout;
	struct kiln_node *dir, *n;
	struct kiln_dentry *d;
	size_t depth, len;
	int err;

	if (!raw)
		return kiln_tar_fail(t, EINVAL, "entry without a usable name");
	snprintf(t->label, sizeof(t->label), "%s: %s", t->src, raw);
	err = kiln_tar_normalize(t, raw, &depth);
	if (err || kiln_tar_excluded(t))
		return err;
	if (!depth) {
		/* "./": the root's own attributes */
		if (archive_entry_hardlink(e) ||
		    archive_entry_filetype(e) != AE_IFDIR)
			return kiln_tar_fail(t, EPERM,
					     "the root must be a directory");
		return kiln_tar_entry_attrs(t, t->b->root, e, false);
	}
	err = entry_whiteout(t, e, &whiteout);
	if (err || whiteout == KILN_WH_META)
		return err;
	if (t->flatten && whiteout != KILN_WH_NONE)
		return entry_apply_whiteout(t, whiteout);
	if (whiteout != KILN_WH_NONE && below_file(t))
		return 0;
	err = kiln_tar_walk_parents(t, true, &dir, &name, &len);
	if (err)
		return err;
	if (whiteout == KILN_WH_OPAQUE) {
		/* the directory itself may come before or after its marker */
		dir->flags |= KILN_NODE_OPAQUE;
		return 0;
	}
	if (whiteout == KILN_WH_FILE) {
		/* ".wh.NAME" deletes NAME: t->path names NAME from now on */
		memmove(t->path + (name - t->path), name + 4, len - 4 + 1);
		len -= 4;
	} else if (archive_entry_hardlink(e)) {
		return entry_hardlink(t, e, dir, name, len);
	}
	d = kiln_tar_child_find(t, dir, name, len);
	if (d && d->node && S_ISDIR(d->node->mode) && !whiteout &&
	    archive_entry_filetype(e) == AE_IFDIR) {
		/* keeps its children */
		d->layer = (uint16_t)t->layer;
		return kiln_tar_entry_attrs(t, d->node, e, false);
	}
	err = kiln_tar_node_new(t, &n);
	if (!err)
		err = kiln_tar_entry_attrs(t, n, e, whiteout == KILN_WH_FILE);
	if (!err && S_ISREG(n->mode))
		err = entry_data(t, n, e);
	if (err)
		return err;
	if (d) {
		d->node = n;		/* the old node may now be unreachable */
		d->layer = (uint16_t)t->layer;
		return 0;
	}
	return kiln_tar_child_add(t, dir, name, len, n);
}

/*
 * The data pass of a flattened image: the entry that is the next member
 * of t->feed gives that file its data; the others are skipped.
 */
static int tar_feed(struct tar *t, struct archive_entry *e)
{
	struct kiln_node *n = t->feed[t->next_feed];
	const char *raw = archive_entry_pathname(e);
	size_t depth;
	int err;

	if (n->src_layer != t->layer || n->src_member != t->member)
		return 0;
	t->next_feed++;
	snprintf(t->label, sizeof(t->label), "%s: %s", t->src,
		 raw ? raw : "?");
	/* the path again, for the compress hints */
	err = raw ? kiln_tar_normalize(t, raw, &depth) : -EIO;
	if (err)
		return err;
	/* the blob's digest was checked on the first read: the same bytes */
	if (archive_entry_filetype(e) != AE_IFREG ||
	    !archive_entry_size_is_set(e) ||
	    (uint64_t)archive_entry_size(e) != n->size)
		return kiln_tar_fail(t, EIO, "member changed since the "
				     "first read of the layer");
	return entry_data(t, n, e);
}

/* ---- the tree once the stream has ended ---- */

static void node_free(struct kiln_node *n)
{
	for (size_t j = 0; j < n->nr_children; j++)
		free(n->children[j].name);
	free(n->children);
	free(n->xattrs);
	free(n->target);
	free(n->chunks);
	kiln_zfile_free(n->zf);
	free(n);
}

/* The label of a directory only known as the parent of entries. */
static int label_implicit(struct kiln_build *b, struct kiln_node *n)
{
	const char *src = strcmp(b->source, "-") ? b->source : "<stdin>";
	char path[KILN_PATH_BUF], what[KILN_PATH_BUF + 16];
	const char *rel;

	if (!b->selabel)
		return 0;
	kiln_node_path(b, n, path, sizeof(path));
	rel = path + KILN_MIN(strlen(b->source), strlen(path));
	rel += strspn(rel, "/");
	snprintf(what, sizeof(what), "%s: %s", src, *rel ? rel : ".");
	if (strlen(path) >= sizeof(path) - 1) {
		kiln_log(&b->lg, KILN_LOG_ERROR, "%s: path too long to look "
			 "up its SELinux label", what);
		return -ENAMETOOLONG;
	}
	return kiln_xattr_set_label(b, n, rel, what);
}

/* Names a flattened image's whiteouts deleted leave @dir. */
static void drop_deleted(struct kiln_node *dir)
{
	size_t k = 0;

	for (size_t j = 0; j < dir->nr_children; j++) {
		if (dir->children[j].node)
			dir->children[k++] = dir->children[j];
		else
			free(dir->children[j].name);
	}
	dir->nr_children = k;
}

/*
 * Breadth first from the root over sorted names, as a directory scan
 * orders b->nodes; nodes no name reaches any more (replaced entries) are
 * freed. Counts links, xattr uses and the build's statistics.
 */
int kiln_tar_finish_tree(struct tar *t)
{
	struct kiln_build *b = t->b;
	struct kiln_node **order = malloc(b->nr_nodes * sizeof(*order));
	size_t nr = 0;
	int64_t now;

	if (!order)
		return -ENOMEM;
	t->tree_done = true;
	kiln_tar_names_drop(t);	/* names are sorted in place below */
	if (b->newest_mtime == INT64_MIN)
		b->newest_mtime = 0;	/* an empty archive */
	now = (b->opts.flags & KILN_BUILD_BUILD_TIME) ? b->opts.build_time
						      : b->newest_mtime;
	b->root->flags |= KILN_NODE_LINKED;
	order[nr++] = b->root;
	for (size_t i = 0; i < nr; i++) {
		struct kiln_node *dir = order[i];

		if (dir->flags & KILN_NODE_IMPLICIT) {
			char what[KILN_PATH_BUF];
			int err = kiln_owner_set(b, dir, 0, 0, kiln_node_path(
					b, dir, what, sizeof(what)));

			if (err) {
				free(order);
				return err;
			}
			dir->mtime = now;
			dir->mtime_nsec = 0;
		}
		if (!S_ISDIR(dir->mode))
			continue;
		dir->nlink = 2;
		drop_deleted(dir);
		if (dir->nr_children)
			kiln_dir_sort(dir->children, dir->nr_children);
		for (size_t j = 0; j < dir->nr_children; j++) {
			struct kiln_dentry *c = &dir->children[j];
			struct kiln_node *n = c->node;

			if (S_ISDIR(n->mode))
				dir->nlink++;
			if (n->flags & KILN_NODE_WHITEOUT)
				dir->flags |= KILN_NODE_WHITEOUTS;
			if (n->flags & KILN_NODE_LINKED) {
				n->nlink++;
				continue;
			}
			n->flags |= KILN_NODE_LINKED;
			n->nlink = 1;
			n->parent = dir;
			n->first = c;
			n->depth = dir->depth + 1;
			order[nr++] = n;
		}
	}
	for (size_t i = 0; i < b->nr_nodes; i++)
		if (!(b->nodes[i]->flags & KILN_NODE_LINKED))
			node_free(b->nodes[i]);
	free(b->nodes);
	b->nodes = order;
	b->nr_nodes = b->nodes_cap = nr;
	for (size_t i = 0; i < nr; i++) {
		struct kiln_node *n = order[i];
		int err;

		/* parents without an entry get their label by their place */
		if (n->flags & KILN_NODE_IMPLICIT) {
			err = label_implicit(b, n);
			if (err)
				return err;
		}
		if ((n->flags & KILN_NODE_OPAQUE) && S_ISDIR(n->mode)) {
			err = kiln_whiteout_set_opaque(b, n);
			if (err)
				return err;
		}
		if (n->flags & KILN_NODE_WHITEOUTS) {
			err = kiln_whiteout_set_origin(b, n);
			if (err)
				return err;
		}

		for (uint16_t k = 0; k < n->nr_xattrs; k++)
			n->xattrs[k]->refs++;
		b->stats.inodes++;
		if (S_ISREG(n->mode))
			b->stats.regular_files++;
		else if (S_ISDIR(n->mode))
			b->stats.directories++;
	}
	return 0;
}

/* The archive formats besides tar that --tar reads (tar_open()). */
static void tar_support_formats(struct archive *a)
{
	archive_read_support_format_cpio(a);
	archive_read_support_format_zip(a);
	archive_read_support_format_7zip(a);
	archive_read_support_format_rar(a);
	archive_read_support_format_rar5(a);
	archive_read_support_format_iso9660(a);
	archive_read_support_format_xar(a);
	archive_read_support_format_cab(a);
	archive_read_support_format_lha(a);
	archive_read_support_format_ar(a);
	archive_read_support_format_warc(a);
	archive_read_support_format_empty(a);
}

static int tar_open(struct tar *t)
{
	struct kiln_build *b = t->b;
	int r;

	t->a = archive_read_new();
	if (!t->a)
		return -ENOMEM;
	/*
	 * Every archive format libarchive reads that holds a tree, but not
	 * mtree (a text that names files on this machine, which would make
	 * a build read them) nor raw (one file without a name). An index
	 * points into the archive's records: tar only.
	 */
	archive_read_support_format_tar(t->a);
	if (b->opts.source_kind != KILN_SOURCE_TAR_INDEX)
		tar_support_formats(t->a);
	/* filters that run no external program where libarchive has them */
	archive_read_support_filter_gzip(t->a);
	archive_read_support_filter_bzip2(t->a);
	archive_read_support_filter_xz(t->a);
	archive_read_support_filter_lzma(t->a);
	archive_read_support_filter_zstd(t->a);
	archive_read_support_filter_lz4(t->a);
	archive_read_support_filter_compress(t->a);
	archive_read_support_filter_lzip(t->a);
	archive_read_support_filter_uu(t->a);
	if (b->opts.source_kind == KILN_SOURCE_TAR_INDEX)
		return kiln_tar_index_open(b, t->a);
	if (!strcmp(b->source, "-"))
		r = archive_read_open_fd(t->a, 0, TAR_READ_BLOCK);
	else
		r = archive_read_open_filename(t->a, b->source, TAR_READ_BLOCK);
	if (r != ARCHIVE_OK) {
		kiln_log(&b->lg, KILN_LOG_ERROR, "%s: %s", t->src,
			 kiln_tar_error(t->a));
		return -EIO;
	}
	return 0;
}

int kiln_tar_begin(struct tar *t, struct kiln_build *b, const char *src)
{
	struct kiln_jobs_conf conf = {
		.ops = &tar_item_ops,
		.ctx = t,
		.pool = kiln_build_pool(b),
		.threads = 1,	/* without a pool: inline */
		.max_bytes = kiln_data_inflight_bytes(b),
		.max_items = kiln_build_max_items(b),
	};
	int err;

	t->b = b;
	kiln_u64map_init(&t->flat_lens);
	t->src = src;
	t->whiteouts = kiln_whiteouts_mode(&b->opts);
	t->strip_whiteouts = t->whiteouts == KILN_WHITEOUTS_STRIP;
	snprintf(t->label, sizeof(t->label), "%s", t->src);
	err = kiln_tar_node_new(t, &b->root);
	if (err)
		return err;
	b->root->mode = S_IFDIR | 0755;
	b->root->flags = KILN_NODE_IMPLICIT;
	return kiln_jobs_new(&conf, &t->jobs);
}

/* Whether the data pass has no member of this archive left to read. */
static bool feed_done(const struct tar *t)
{
	return t->next_feed >= t->nr_feed ||
	       t->feed[t->next_feed]->src_layer != t->layer;
}

int kiln_tar_read(struct tar *t)
{
	struct kiln_build *b = t->b;
	struct archive_entry *e;
	int err = 0;

	for (uint64_t member = 0; !err; member++) {
		int r;

		if (t->feed && feed_done(t))
			break;
		r = archive_read_next_header(t->a, &e);
		if (r == ARCHIVE_EOF)
			break;
		if (r == ARCHIVE_WARN) {
			/*
			 * Names that do not convert to the (C) locale are
			 * kept as the archive's bytes, which is what we
			 * want: that warning is only worth a debug line.
			 */
			bool charset = strstr(kiln_tar_error(t->a), "converted");
			const char *raw = archive_entry_pathname(e);

			kiln_log(&b->lg, charset ? KILN_LOG_DEBUG : KILN_LOG_WARN,
				 "%s: %s: %s", t->src, raw ? raw : "?",
				 kiln_tar_error(t->a));
		} else if (r != ARCHIVE_OK) {
			/* the label still names the last good entry */
			kiln_log(&b->lg, KILN_LOG_ERROR, "%s%s: %s", t->label,
				 strcmp(t->label, t->src) ? " (after it)" : "",
				 kiln_tar_error(t->a));
			return -EIO;
		}
		t->member = member;
		if (t->visit)
			err = t->visit(t, t->ctx, e);
		else
			err = t->feed ? tar_feed(t, e) : tar_entry(t, e);
		kiln_progress_tick(&b->progress);
	}
	return err;
}

int kiln_tar_end(struct tar *t, int err)
{
	/* every member placed (or released after a failure) */
	if (t->jobs) {
		int ferr = kiln_jobs_finish(t->jobs);

		if (!err)
			err = ferr;
		kiln_jobs_free(t->jobs);
		t->jobs = NULL;
	}
	if (!err && !t->tree_done)
		err = kiln_tar_finish_tree(t);
	kiln_tar_names_drop(t);
	free(t->path);
	t->path = NULL;
	kiln_u64map_release(&t->flat_lens);
	return err;
}

int kiln_tar_scan(struct kiln_build *b)
{
	struct tar t = { 0 };
	int err;

	err = kiln_tar_begin(&t, b, strcmp(b->source, "-") ? b->source
							   : "<stdin>");
	if (!err)
		err = tar_open(&t);
	if (!err)
		err = kiln_tar_read(&t);
	err = kiln_tar_end(&t, err);
	if (t.a)
		archive_read_free(t.a);
	return err;
}
