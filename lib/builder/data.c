// SPDX-License-Identifier: MIT
/*
 * The data pass: every file's blocks go to the data area in data order
 * (order.c), streamed in bounded chunks. Tails become inline data, sparse
 * files become chunk-based, compressed files go through compress/compress.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "builder/compress/compress.h"
#include "builder/internal.h"
#include "builder/output.h"
#include "format/kernel.h"
#include "format/erofs_fs.h"
#include "util/checked.h"
#include "util/fileio.h"
#include "util/grow.h"

#define KILN_IOBUF_SIZE (1u << 20)	/* bytes per read/write */
/* A chunk table larger than this gets bigger chunks (holes become data). */
#define KILN_CHUNK_TABLE_MAX (256u * 1024u)
#define KILN_CHUNK_MAX_BITS 31u	/* chunkbits - blkszbits fits 5 bits */

struct src_file {
	struct kiln_build *b;
	const char *path;
	int fd;				/* -1: a stream, read through @read */
	kiln_src_read_fn read;
	void *read_ctx;
};

static int data_error(struct kiln_build *b, const char *path, int err,
		      const char *what)
{
	char shortp[512];

	kiln_log(&b->lg, KILN_LOG_ERROR, "%s: %s",
		 kiln_path_abbrev(path, shortp, sizeof(shortp)),
		 what ? what : strerror(err));
	return -err;
}

const uint8_t *kiln_data_tail(const struct kiln_build *b,
			      const struct kiln_node *n)
{
	if (S_ISLNK(n->mode))
		return (const uint8_t *)n->target + (n->size - n->tail_len);
	return b->tails + n->tail_off;
}

/* Core and inline xattr sizes: fixed once the inode's size is known. */
static int shape_inode(struct kiln_build *b, struct kiln_node *n)
{
	char path[KILN_PATH_BUF];

	n->extended = b->rel_mtime ?
		!kiln_inode_fits_compact_rel(n, b->epoch, b->fixed_nsec) :
		!kiln_inode_fits_compact(n, b->epoch, b->fixed_nsec);
	if (!kiln_xattr_ibody_size(n->xattrs, n->nr_xattrs, &n->xattr_size))
		return 0;
	kiln_log(&b->lg, KILN_LOG_ERROR, "%s: xattrs too large for one inode",
		 kiln_node_path(b, n, path, sizeof(path)));
	return -E2BIG;
}

/*
 * Whether a @tail-byte inline tail can follow @n's metadata somewhere.
 * Inodes start on 32-byte slots, so the metadata ends at best
 * (core + xattrs) mod 32 bytes into a block, and the tail must not
 * cross into the next block.
 */
static bool tail_fits_inline(const struct kiln_build *b,
			     const struct kiln_node *n, uint32_t tail)
{
	uint32_t hdr = kiln_inode_core_size(n) + n->xattr_size;

	return hdr % EROFS_ISLOT_SIZE + tail <= b->blksz;
}

/*
 * pread exactly @len bytes at @off; a short read means the file shrank
 * since it was scanned.
 */
static int src_pread(struct src_file *src, void *buf, size_t len, uint64_t off)
{
	ssize_t n;

	if (src->fd < 0)
		return src->read(src->read_ctx, buf, len, off);
	n = kiln_pread_full(src->fd, buf, len, off);
	if (n < 0)
		return data_error(src->b, src->path, (int)-n, NULL);
	if ((size_t)n < len)
		return data_error(src->b, src->path, EIO,
				  "file changed size during the build");
	return 0;
}

static int src_read_cb(void *ctx, void *buf, size_t len, uint64_t off)
{
	return src_pread(ctx, buf, len, off);
}

/* Copy [@off, @off + @len) of the source to image block @blk onward. */
static int copy_range(struct src_file *src, uint64_t off, uint64_t len,
		      kiln_blk_t blk)
{
	struct kiln_build *b = src->b;
	uint64_t dst = blk << b->blkszbits;

	while (len) {
		size_t n = (size_t)KILN_MIN(len, (uint64_t)b->iobuf_size);
		int err = src_pread(src, b->iobuf, n, off);

		if (err)
			return err;
		/* zero the slack of the final block so the image is defined */
		size_t padded = (size_t)kiln_round_up(n, b->blksz);

		memset((char *)b->iobuf + n, 0, padded - n);
		err = kiln_out_pwrite(b->out, b->iobuf,
				      len == n ? padded : n, dst);
		if (err)
			return err;
		off += n;
		dst += n;
		len -= n;
	}
	return 0;
}

static int tail_store(struct kiln_build *b, struct kiln_node *n,
		      struct src_file *src, uint64_t off, uint32_t len)
{
	int err;

	if (KILN_GROW(b->tails, b->tails_cap, (size_t)(b->tails_len + len)))
		return -ENOMEM;
	err = src_pread(src, b->tails + b->tails_len, len, off);
	if (err)
		return err;
	n->tail_off = b->tails_len;
	n->tail_len = len;
	b->tails_len += len;
	return 0;
}

/* Dedupe confirms a copy of a source file's first bytes in the image. */
struct flat_cmp {
	struct src_file *src;
	uint64_t len;
};

/* 1 when image bytes from @pstart equal the source's first cmp->len. */
static int flat_same(void *ctx, uint64_t pstart)
{
	struct flat_cmp *c = ctx;
	struct kiln_build *b = c->src->b;
	size_t half = b->iobuf_size / 2;
	uint8_t *img = (uint8_t *)b->iobuf + half;

	for (uint64_t off = 0; off < c->len;) {
		size_t n = (size_t)KILN_MIN((uint64_t)half, c->len - off);
		int err = src_pread(c->src, b->iobuf, n, off);

		if (!err)
			err = kiln_out_pread(b->out, img, n, pstart + off);
		if (err)
			return err;
		if (memcmp(b->iobuf, img, n))
			return 0;
		off += n;
	}
	return 1;
}

/*
 * Whole blocks in the data area, the tail (if any) inline. With @flat
 * (dedupe), blocks equal to an earlier file's are shared.
 */
static int write_flat(struct kiln_build *b, struct kiln_node *n,
		      struct src_file *src, struct kiln_zfile *flat)
{
	uint64_t full = n->size >> b->blkszbits;
	uint32_t tail = (uint32_t)(n->size & (b->blksz - 1));
	int err;

	n->startblk = 0;
	if (tail && !tail_fits_inline(b, n, tail)) {
		full++;		/* the tail gets a block of its own */
		tail = 0;
	}
	if (full) {
		struct flat_cmp cmp = { .src = src, .len = n->size - tail };
		uint64_t blocks_len = n->size >> b->blkszbits << b->blkszbits;
		uint64_t at;

		err = kiln_zfile_flat_find(flat, cmp.len, flat_same, &cmp, &at);
		if (err > 0)
			n->startblk = at >> b->blkszbits;
		if (!err)
			err = kiln_out_reserve(b->out, full, &n->startblk);
		if (!err)
			err = copy_range(src, 0, cmp.len, n->startblk);
		at = (uint64_t)n->startblk << b->blkszbits;
		/* the whole blocks alone serve a copy with an inline tail */
		if (!err && cmp.len != blocks_len)
			err = kiln_zfile_flat_add(flat, blocks_len, at);
		if (!err)
			err = kiln_zfile_flat_add(flat, cmp.len, at);
		if (err < 0)
			return err;
	}
	n->datalayout = tail ? EROFS_INODE_FLAT_INLINE : EROFS_INODE_FLAT_PLAIN;
	return tail ? tail_store(b, n, src, n->size - tail, tail) : 0;
}

/* Data extents by SEEK_DATA/SEEK_HOLE; *@nr = 0 for an all-hole file. */
static int find_extents(struct src_file *src, uint64_t size,
			struct kiln_data_extent **extp, size_t *nr,
			bool *supported)
{
	struct kiln_data_extent *ext = NULL;
	size_t cap = 0, count = 0;
	uint64_t off = 0;

	*supported = true;
	while (off < size) {
		off_t d = lseek(src->fd, (off_t)off, SEEK_DATA), h;

		if (d < 0 && errno == ENXIO)
			break;
		if (d >= 0)
			h = lseek(src->fd, d, SEEK_HOLE);
		if (d < 0 || h < 0) {
			free(ext);
			if (errno == EINVAL || errno == EOPNOTSUPP) {
				*supported = false;
				return 0;
			}
			return data_error(src->b, src->path, errno, NULL);
		}
		if ((uint64_t)d >= size)
			break;
		if (KILN_GROW(ext, cap, count + 1)) {
			free(ext);
			return -ENOMEM;
		}
		ext[count].start = (uint64_t)d;
		ext[count].end = KILN_MIN((uint64_t)h, size);
		off = ext[count++].end;
	}
	*extp = ext;
	*nr = count;
	return 0;
}

static unsigned int ceil_log2(uint64_t x)
{
	return x <= 1 ? 0 : 64u - (unsigned int)__builtin_clzll(x - 1);
}

/*
 * The largest chunk size at which every chunk is all data or all hole
 * (block-aligned hole boundaries stay exact), grown further only while the
 * table would be larger than KILN_CHUNK_TABLE_MAX.
 */
static unsigned int choose_chunkbits(const struct kiln_data_extent *ext,
				     size_t nr,
				     uint64_t size, unsigned int blkszbits)
{
	uint64_t blksz = 1ull << blkszbits, bounds = 0;
	unsigned int bits, maxbits = blkszbits + KILN_CHUNK_MAX_BITS;

	for (size_t i = 0; i < nr; i++) {
		uint64_t s = ext[i].start & ~(blksz - 1);
		uint64_t e = kiln_round_up(ext[i].end, blksz);

		bounds |= s;
		if (e < size)
			bounds |= e;
	}
	bits = bounds ? (unsigned int)__builtin_ctzll(bounds) : 63;
	bits = KILN_MIN(bits, KILN_MAX(ceil_log2(size), blkszbits));
	bits = KILN_MIN(KILN_MAX(bits, blkszbits), maxbits);
	while (bits < maxbits &&
	       kiln_div_round_up(size, 1ull << bits) * 4 > KILN_CHUNK_TABLE_MAX)
		bits++;
	return bits;
}

static int write_chunked(struct kiln_build *b, struct kiln_node *n,
			 struct src_file *src, const struct kiln_data_extent *ext,
			 size_t nr)
{
	unsigned int bits = choose_chunkbits(ext, nr, n->size, b->blkszbits);
	uint64_t chunk = 1ull << bits, nchunks = kiln_div_round_up(n->size, chunk);
	size_t e = 0;

	n->chunks = malloc(nchunks * sizeof(*n->chunks));
	if (!n->chunks)
		return -ENOMEM;
	n->nr_chunks = nchunks;
	n->datalayout = EROFS_INODE_CHUNK_BASED;
	n->chunk_format = (uint16_t)(bits - b->blkszbits);
	b->feature_incompat |= EROFS_FEATURE_INCOMPAT_CHUNKED_FILE;
	for (uint64_t i = 0; i < nchunks; i++) {
		uint64_t start = i * chunk;
		uint64_t len = KILN_MIN(chunk, n->size - start);
		kiln_blk_t blk;
		int err;

		while (e < nr && ext[e].end <= start)
			e++;
		if (e == nr || ext[e].start >= start + len) {
			n->chunks[i] = EROFS_NULL_ADDR32;
			continue;
		}
		/* holes inside a data chunk read back as zeros */
		err = kiln_out_reserve(b->out, kiln_div_round_up(len, b->blksz),
				       &blk);
		if (!err)
			err = copy_range(src, start, len, blk);
		if (err)
			return err;
		n->chunks[i] = (uint32_t)blk;
	}
	return 0;
}

/*
 * Whether a compressed file's map with its inline tail fits after the
 * metadata at some slot (layout places it later; if no slot can work, the
 * tail must leave the inode now, while the data area is still open).
 */
static bool zmap_placeable(const struct kiln_build *b,
			   const struct kiln_node *n)
{
	uint64_t base = 256ull << b->blkszbits;	/* any block boundary */
	uint32_t hdr = kiln_inode_core_size(n) + n->xattr_size;
	size_t len;

	for (uint32_t pos = 0; pos < b->blksz; pos += EROFS_ISLOT_SIZE)
		if (!kiln_zfile_map_size(n->zf, base + pos + hdr, &len))
			return true;
	return false;
}

/* @zf: the data compressed by a worker (now ours), not yet in the image. */
static int commit_compressed(struct kiln_build *b, struct kiln_node *n,
			     struct kiln_zfile *zf)
{
	int err;

	n->zf = zf;
	b->stats.input_bytes += n->size;
	err = kiln_zfile_commit(zf, b->out);
	if (!err && kiln_zfile_has_inline(zf) && !zmap_placeable(b, n))
		err = kiln_zfile_drop_inline(zf, b->out);
	if (!err)
		n->datalayout = (uint8_t)kiln_zfile_datalayout(zf);
	return err;
}

/*
 * @raw: a worker found the data not worth compressing; @flat: its hashes
 * for dedupe, or NULL.
 */
static int write_regular(struct kiln_build *b, struct kiln_node *n, bool raw,
			 struct kiln_zfile *flat)
{
	char path[KILN_PATH_BUF];
	struct src_file src = { .b = b, .path = path };
	struct kiln_zctx *zc = kiln_node_zctx(b, n);	/* compress hints */
	const char *why;
	struct stat st;
	int err = 0;

	kiln_node_path(b, n, path, sizeof(path));
	src.fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOATIME);
	if (src.fd < 0 && errno == EPERM)
		src.fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (src.fd < 0) {
		if (errno == ENOENT)
			return data_error(b, path, ENOENT,
					  "file vanished during the build");
		return data_error(b, path, errno, NULL);
	}
	if (fstat(src.fd, &st) < 0) {
		err = data_error(b, path, errno, NULL);
		goto out;
	}
	if (!S_ISREG(st.st_mode) || st.st_dev != n->src_dev ||
	    st.st_ino != n->src_ino) {
		err = data_error(b, path, EIO, "file replaced during the build");
		goto out;
	}
	if ((uint64_t)st.st_size != n->size) {
		err = data_error(b, path, EIO,
				 "file changed size during the build");
		goto out;
	}
	b->stats.input_bytes += n->size;
	n->datalayout = EROFS_INODE_FLAT_PLAIN;
	if (!n->size)
		goto out;
	if (zc && !raw) {
		err = kiln_zfile_write(zc, b->out, src_read_cb, &src,
				       n->size, &n->zf);
		if (!err && kiln_zfile_has_inline(n->zf) &&
		    !zmap_placeable(b, n))
			err = kiln_zfile_drop_inline(n->zf, b->out);
		if (err <= 0) {
			if (!err)
				n->datalayout = (uint8_t)kiln_zfile_datalayout(n->zf);
			goto out;
		}
		err = 0;	/* not worth compressing: store it */
	}
	if ((n->flags & KILN_NODE_SPARSE) && n->size >= b->blksz &&
	    kiln_kernel_allows(b->opts.kernel, KILN_KF_CHUNKED)) {
		struct kiln_data_extent *ext = NULL;
		size_t nr = 0;
		bool supported;

		err = find_extents(&src, n->size, &ext, &nr, &supported);
		if (!err && supported &&
		    !(nr == 1 && ext[0].start < b->blksz &&
		      ext[0].end + b->blksz > n->size)) {
			err = write_chunked(b, n, &src, ext, nr);
			free(ext);
			goto out;
		}
		free(ext);
		if (err)
			goto out;
	}
	err = write_flat(b, n, &src, flat);
out:
	if (!err && kiln_node_changed(src.fd, &st, &why))
		err = data_error(b, path, EIO, why);
	close(src.fd);
	return err;
}

/* Symlink targets longer than a block keep their full blocks here. */
static int write_symlink(struct kiln_build *b, struct kiln_node *n)
{
	uint64_t stored;

	n->tail_len = (uint32_t)(n->size & (b->blksz - 1));
	if (!tail_fits_inline(b, n, n->tail_len))
		n->tail_len = 0;
	n->datalayout = n->tail_len ? EROFS_INODE_FLAT_INLINE
				    : EROFS_INODE_FLAT_PLAIN;
	n->startblk = 0;
	stored = n->size - n->tail_len;
	return stored ? kiln_out_append(b->out, n->target, stored, &n->startblk)
		      : 0;
}

/*
 * Directories: size and shape from the names now; their full blocks are
 * reserved by kiln_data_place_dirs() and filled with the inode area.
 */
static int shape_dir(struct kiln_build *b, struct kiln_node *n)
{
	struct kiln_dirent_src *ents;
	size_t nr;
	int err = kiln_dir_entries(n, &ents, &nr);

	if (err)
		return err;
	n->size = kiln_dir_size(ents, nr, b->blksz);
	free(ents);
	err = shape_inode(b, n);
	if (err)
		return err;
	n->tail_len = (uint32_t)(n->size & (b->blksz - 1));
	if (n->tail_len && !tail_fits_inline(b, n, n->tail_len))
		n->tail_len = 0;	/* the last block is a full one */
	n->datalayout = n->tail_len ? EROFS_INODE_FLAT_INLINE
				    : EROFS_INODE_FLAT_PLAIN;
	n->startblk = 0;
	return 0;
}

/*
 * Every directory's full blocks, in node order, at the end of the image
 * so far: after the inode area (or before the metabox), see place.c.
 */
int kiln_data_place_dirs(struct kiln_build *b)
{
	for (size_t i = 0; i < b->nr_nodes; i++) {
		struct kiln_node *n = b->nodes[i];
		uint64_t full;
		int err;

		if (!S_ISDIR(n->mode))
			continue;
		/* a tail that did not fit inline takes a block of its own */
		full = kiln_div_round_up(n->size - n->tail_len, b->blksz);
		if (!full)
			continue;
		err = kiln_out_reserve(b->out, full, &n->startblk);
		if (err)
			return err;
	}
	return 0;
}

static int data_buffers(struct kiln_build *b)
{
	if (b->iobuf)
		return 0;
	b->iobuf_size = KILN_IOBUF_SIZE;
	b->iobuf = malloc(b->iobuf_size + b->blksz);
	return b->iobuf ? 0 : -ENOMEM;
}

/*
 * kiln_data_write_stream() (@compress: try the node's compression first)
 * and kiln_data_write_stream_raw() (@flat: dedupe hashes, or NULL).
 */
static int write_stream(struct kiln_build *b, struct kiln_node *n,
			struct src_file *src, const struct kiln_data_extent *ext,
			size_t nr, bool compress, struct kiln_zfile *flat)
{
	int err = data_buffers(b);

	if (err)
		return err;
	n->flags |= KILN_NODE_STREAMED;
	n->datalayout = EROFS_INODE_FLAT_PLAIN;
	b->stats.input_bytes += n->size;
	if (!n->size)
		return 0;
	if (compress && kiln_node_zctx(b, n)) {
		/* the inline tail is checked once the inode's shape is known */
		err = kiln_zfile_write(kiln_node_zctx(b, n), b->out, src->read,
				       src->read_ctx, n->size, &n->zf);
		if (err <= 0) {
			if (!err)
				n->datalayout = (uint8_t)kiln_zfile_datalayout(n->zf);
			return err;
		}
	}
	/*
	 * Which xattrs end up shared is known only after the whole stream:
	 * until shape_inode() assume the worst (core + xattrs) mod 32, so an
	 * inline tail chosen now fits wherever the inode goes.
	 */
	n->extended = true;
	n->xattr_size = n->nr_xattrs ? EROFS_ISLOT_SIZE - 4 : 0;
	if ((n->flags & KILN_NODE_SPARSE) && n->size >= b->blksz &&
	    kiln_kernel_allows(b->opts.kernel, KILN_KF_CHUNKED) &&
	    !(nr == 1 && ext[0].start < b->blksz &&
	      ext[0].end + b->blksz > n->size))
		return write_chunked(b, n, src, ext, nr);
	return write_flat(b, n, src, flat);
}

int kiln_data_write_stream(struct kiln_build *b, struct kiln_node *n,
			   const char *path, kiln_src_read_fn read, void *ctx,
			   const struct kiln_data_extent *ext, size_t nr)
{
	struct src_file src = {
		.b = b, .path = path, .fd = -1, .read = read, .read_ctx = ctx,
	};

	return write_stream(b, n, &src, ext, nr, true, NULL);
}

int kiln_data_write_stream_raw(struct kiln_build *b, struct kiln_node *n,
			       const char *path, kiln_src_read_fn read,
			       void *ctx, const struct kiln_data_extent *ext,
			       size_t nr, struct kiln_zfile *flat)
{
	struct src_file src = {
		.b = b, .path = path, .fd = -1, .read = read, .read_ctx = ctx,
	};

	return write_stream(b, n, &src, ext, nr, false, flat);
}

/* A streamed file whose map cannot go anywhere keeps no inline tail. */
static int finish_streamed(struct kiln_build *b, struct kiln_node *n)
{
	int err;

	if (!n->zf || !kiln_zfile_has_inline(n->zf) || zmap_placeable(b, n))
		return 0;
	err = kiln_zfile_drop_inline(n->zf, b->out);
	if (!err)
		n->datalayout = (uint8_t)kiln_zfile_datalayout(n->zf);
	return err;
}

int kiln_data_write_all(struct kiln_build *b)
{
	int err = data_buffers(b);

	if (err)
		return err;
	/* inline xattr sizes depend on which xattrs are shared */
	kiln_xattr_assign_shared(&b->xt, b->shared_xattr_min);
	err = kiln_data_order(b);
	if (err)
		return err;
	/* a stream cannot be read twice: the plan is for directories */
	if (b->opts.source_kind == KILN_SOURCE_DIR) {
		err = kiln_zshift_plan(b);
		if (err)
			return err;
	}
	return kiln_data_pipeline(b);
}

int kiln_data_commit_node(struct kiln_build *b, struct kiln_node *n,
			  struct kiln_zfile *zf, bool raw)
{
	struct kiln_zfile *flat = NULL;
	int err = 0;

	if (zf && raw) {	/* only hashes, to share the raw blocks */
		flat = zf;
		zf = NULL;
	}
	if (zf)
		n->zf = zf;	/* freed with the tree whatever happens */
	if (!(n->flags & KILN_NODE_STREAMED))
		n->datalayout = EROFS_INODE_FLAT_PLAIN;
	if (!S_ISDIR(n->mode))
		err = shape_inode(b, n);
	if (err) {
		kiln_zfile_free(flat);
		return err;
	}
	switch (n->mode & S_IFMT) {
	case S_IFREG:
		if (n->flags & KILN_NODE_STREAMED)
			err = finish_streamed(b, n);
		else if (zf)
			err = commit_compressed(b, n, zf);
		else
			err = write_regular(b, n, raw, flat);
		break;
	case S_IFLNK:
		err = write_symlink(b, n);
		break;
	case S_IFDIR:
		err = shape_dir(b, n);
		break;
	default:
		break;
	}
	kiln_zfile_free(flat);
	if (S_ISREG(n->mode) && !(n->flags & KILN_NODE_STREAMED))
		kiln_progress_add_done(&b->progress, 1, n->size);
	kiln_progress_tick(&b->progress);
	return err;
}
