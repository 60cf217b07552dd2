// SPDX-License-Identifier: MIT
/*
 * Build verification: the finished image, not yet renamed into place, is
 * opened with the reader and every inode compared with the tree that was
 * meant to be written: attributes, names, targets, xattrs and every byte
 * (directory sources are read again; streamed files checked by hash).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <kiln/image.h>

#include "builder/internal.h"
#include "builder/output.h"
#include "format/erofs_fs.h"
#include "util/checked.h"
#include "util/fileio.h"
#include "util/grow.h"

#define VERIFY_BUF_SIZE (1u << 20)

struct verify {
	struct kiln_build *b;
	struct kiln_image *img;
	uint8_t *img_buf, *src_buf;	/* VERIFY_BUF_SIZE each */
	char *xnames;			/* listxattr of one inode */
	size_t xnames_cap;
	uint8_t *xvalue;		/* 64 KiB */
	char path[KILN_PATH_BUF];	/* the node being checked */
};

static int mismatch(struct verify *v, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* "<path>: verify: <what differs>"; the build fails with -EIO. */
static int mismatch(struct verify *v, const char *fmt, ...)
{
	char msg[512], shortp[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	kiln_log(&v->b->lg, KILN_LOG_ERROR, "%s: verify: %s",
		 kiln_path_abbrev(v->path, shortp, sizeof(shortp)), msg);
	return -EIO;
}

/* The reader failed on our own image: as bad as a difference. */
static int unreadable(struct verify *v, const char *what, int err)
{
	if (err == -ENOMEM)
		return err;
	return mismatch(v, "cannot read back %s: %s", what, kiln_strerror(err));
}

static int check_stat(struct verify *v, const struct kiln_node *n)
{
	struct kiln_stat st;
	uint32_t rdev;
	int err = kiln_stat_nid(v->img, n->nid, &st);

	if (err)
		return unreadable(v, "the inode", err);
	if (st.mode != n->mode)
		return mismatch(v, "mode %o in the image, %o expected",
				st.mode, n->mode);
	if (st.uid != n->uid || st.gid != n->gid)
		return mismatch(v, "owner %" PRIu32 ":%" PRIu32 " in the image, "
				"%" PRIu32 ":%" PRIu32 " expected",
				st.uid, st.gid, n->uid, n->gid);
	if (st.nlink != n->nlink)
		return mismatch(v, "nlink %" PRIu32 " in the image, %" PRIu32
				" expected", st.nlink, n->nlink);
	if (st.size != n->size)
		return mismatch(v, "size %" PRIu64 " in the image, %" PRIu64
				" expected", st.size, n->size);
	if (st.mtime != n->mtime || st.mtime_nsec != n->mtime_nsec)
		return mismatch(v, "mtime %" PRId64 ".%09" PRIu32 " in the "
				"image, %" PRId64 ".%09" PRIu32 " expected",
				st.mtime, st.mtime_nsec, n->mtime,
				n->mtime_nsec);
	if ((S_ISCHR(n->mode) || S_ISBLK(n->mode)) &&
	    (!kiln_inode_encode_rdev(st.rdev_major, st.rdev_minor, &rdev) ||
	     rdev != n->rdev))
		return mismatch(v, "device %" PRIu32 ":%" PRIu32 " in the image "
				"differs from the source", st.rdev_major,
				st.rdev_minor);
	return 0;
}

static const uint8_t dt_of_ftype[EROFS_FT_MAX] = {
	[EROFS_FT_UNKNOWN] = DT_UNKNOWN, [EROFS_FT_REG_FILE] = DT_REG,
	[EROFS_FT_DIR] = DT_DIR, [EROFS_FT_CHRDEV] = DT_CHR,
	[EROFS_FT_BLKDEV] = DT_BLK, [EROFS_FT_FIFO] = DT_FIFO,
	[EROFS_FT_SOCK] = DT_SOCK, [EROFS_FT_SYMLINK] = DT_LNK,
};

struct dir_walk {
	struct verify *v;
	const struct kiln_dirent_src *ents;
	size_t nr, seen;
};

/* Returns 1 (stop) after logging a difference. */
static int dir_entry(void *ctx, const struct kiln_dirent *de)
{
	struct dir_walk *w = ctx;
	const struct kiln_dirent_src *e;

	if (w->seen == w->nr) {
		mismatch(w->v, "unexpected entry '%s' in the image", de->name);
		return 1;
	}
	e = &w->ents[w->seen++];
	if (de->name_len != e->name_len ||
	    memcmp(de->name, e->name, e->name_len))
		mismatch(w->v, "entry '%s' in the image where '%.*s' belongs",
			 de->name, (int)e->name_len, e->name);
	else if (de->nid != e->nid)
		mismatch(w->v, "entry '%s' points to nid %" PRIu64 ", expected "
			 "%" PRIu64, de->name, (uint64_t)de->nid,
			 (uint64_t)e->nid);
	else if (e->file_type < EROFS_FT_MAX &&
		 de->type != dt_of_ftype[e->file_type])
		mismatch(w->v, "entry '%s' has the wrong file type", de->name);
	else
		return 0;
	return 1;
}

static int check_dir(struct verify *v, const struct kiln_node *n)
{
	struct dir_walk w = { .v = v };
	struct kiln_dirent_src *ents;
	int err = kiln_dir_entries(n, &ents, &w.nr);

	if (err)
		return err;
	w.ents = ents;
	err = kiln_dir_iterate(v->img, n->nid, 0, dir_entry, &w);
	if (err > 0)
		err = -EIO;
	else if (err < 0)
		err = unreadable(v, "the directory", err);
	else if (!err && w.seen != w.nr)
		err = mismatch(v, "entry '%.*s' missing from the image",
			       (int)ents[w.seen].name_len, ents[w.seen].name);
	free(ents);
	return err;
}

static int check_symlink(struct verify *v, const struct kiln_node *n)
{
	char target[EROFS_SYMLINK_MAX + 1];
	ssize_t len = kiln_readlink(v->img, n->nid, target, sizeof(target));

	if (len < 0)
		return unreadable(v, "the symlink", (int)len);
	if ((uint64_t)len != n->size || memcmp(target, n->target, n->size))
		return mismatch(v, "symlink target differs");
	return 0;
}

/* The node's item called @name (a full name), or NULL. */
static const struct kiln_xattr_item *find_xattr(const struct kiln_node *n,
						const char *name)
{
	const char *suffix;
	unsigned int index = kiln_xattr_prefix(name, &suffix);
	size_t len = strlen(suffix);

	for (uint16_t i = 0; index && i < n->nr_xattrs; i++) {
		const struct kiln_xattr_item *it = n->xattrs[i];

		if (it->index == index && it->name_len == len &&
		    !memcmp(it->name, suffix, len))
			return it;
	}
	return NULL;
}

static int check_xattrs(struct verify *v, const struct kiln_node *n)
{
	ssize_t len = kiln_listxattr(v->img, n->nid, NULL, 0);
	size_t count = 0;

	if (len < 0)
		return unreadable(v, "the xattrs", (int)len);
	if (KILN_GROW(v->xnames, v->xnames_cap, (size_t)len))
		return -ENOMEM;
	if (len)
		len = kiln_listxattr(v->img, n->nid, v->xnames, v->xnames_cap);
	if (len < 0)
		return unreadable(v, "the xattrs", (int)len);
	for (size_t off = 0; off < (size_t)len;
	     off += strlen(v->xnames + off) + 1) {
		const char *name = v->xnames + off;
		const struct kiln_xattr_item *it = find_xattr(n, name);
		ssize_t vlen;

		if (!it)
			return mismatch(v, "unexpected xattr %s in the image",
					name);
		vlen = kiln_getxattr(v->img, n->nid, name, v->xvalue, 65536);
		if (vlen < 0)
			return unreadable(v, name, (int)vlen);
		if ((size_t)vlen != it->value_len ||
		    memcmp(v->xvalue, it->value, it->value_len))
			return mismatch(v, "xattr %s: value differs", name);
		count++;
	}
	if (count != n->nr_xattrs)
		return mismatch(v, "%zu xattrs in the image, %u expected",
				count, (unsigned int)n->nr_xattrs);
	return 0;
}

/* Read exactly @len bytes (fewer only at EOF) of the source at @off. */
static ssize_t src_read(int fd, uint8_t *buf, size_t len, uint64_t off)
{
	return kiln_pread_full(fd, buf, len, off);
}

static int open_source(struct verify *v)
{
	int fd = open(v->path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOATIME);

	if (fd < 0 && errno == EPERM)
		fd = open(v->path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return mismatch(v, "cannot open the source again: %s",
				strerror(errno));
	return fd;
}

/*
 * Every byte of a regular file: against the source file read again, or
 * the hash taken while the data streamed by.
 */
static int check_data(struct verify *v, const struct kiln_node *n)
{
	bool hashed = n->flags & KILN_NODE_HASHED;
	XXH3_state_t *h = NULL;
	struct kiln_file *f;
	uint64_t off = 0;
	int fd = -1, err;

	if (!hashed && v->b->opts.source_kind != KILN_SOURCE_DIR)
		return 0;
	err = kiln_file_open(v->img, n->nid, &f);
	if (err)
		return unreadable(v, "the file", err);
	if (hashed) {
		h = XXH3_createState();
		if (!h || XXH3_64bits_reset(h) != XXH_OK)
			err = -ENOMEM;
	} else {
		fd = open_source(v);
		err = fd < 0 ? fd : 0;
	}
	while (!err && off < n->size) {
		size_t want = (size_t)KILN_MIN(n->size - off,
					       (uint64_t)VERIFY_BUF_SIZE);
		ssize_t got = kiln_file_pread(f, v->img_buf, want, off);
		ssize_t src;

		if (got < 0) {
			err = unreadable(v, "the data", (int)got);
			break;
		}
		if ((size_t)got != want) {
			err = mismatch(v, "data ends at %" PRIu64 " in the "
				       "image", off + (uint64_t)got);
			break;
		}
		if (h) {
			XXH3_64bits_update(h, v->img_buf, want);
			off += want;
			continue;
		}
		src = src_read(fd, v->src_buf, want, off);
		if (src < 0) {
			err = mismatch(v, "cannot read the source again: %s",
				       strerror((int)-src));
			break;
		}
		if ((size_t)src != want) {
			err = mismatch(v, "the source now ends at %" PRIu64,
				       off + (uint64_t)src);
			break;
		}
		if (memcmp(v->img_buf, v->src_buf, want)) {
			size_t i = 0;

			while (v->img_buf[i] == v->src_buf[i])
				i++;
			err = mismatch(v, "data differs from the source at "
				       "byte %" PRIu64, off + i);
			break;
		}
		off += want;
	}
	if (!err && h && XXH3_64bits_digest(h) != n->data_hash)
		err = mismatch(v, "data differs from the archive's");
	if (!err && fd >= 0 && src_read(fd, v->src_buf, 1, n->size) != 0)
		err = mismatch(v, "the source is now longer than %" PRIu64
			       " bytes", n->size);
	if (h)
		XXH3_freeState(h);
	if (fd >= 0)
		close(fd);
	kiln_file_close(f);
	return err;
}

static int check_node(struct verify *v, const struct kiln_node *n)
{
	int err;

	kiln_node_path(v->b, n, v->path, sizeof(v->path));
	err = check_stat(v, n);
	if (!err)
		err = check_xattrs(v, n);
	if (err)
		return err;
	switch (n->mode & S_IFMT) {
	case S_IFDIR:
		return check_dir(v, n);
	case S_IFLNK:
		return check_symlink(v, n);
	case S_IFREG:
		return check_data(v, n);
	default:
		return 0;
	}
}

int kiln_verify(struct kiln_build *b, uint64_t size)
{
	struct kiln_image_opts io = {
		.struct_size = sizeof(io),
		.log = b->opts.log,
		.log_ctx = b->opts.log_ctx,
		.cache = KILN_CACHE_NONE,
		/* --tar-index: the file data are the tar's */
		.devices = &b->source,
		.nr_devices = b->opts.source_kind == KILN_SOURCE_TAR_INDEX,
	};
	struct verify v = { .b = b };
	int fd = kiln_out_fd(b->out), err;

	/* the reader checks the superblock's block count against the size */
	err = kiln_out_set_size(b->out, size);
	if (err)
		return err;
	v.img_buf = malloc(VERIFY_BUF_SIZE);
	v.src_buf = malloc(VERIFY_BUF_SIZE);
	v.xvalue = malloc(65536);
	if (!v.img_buf || !v.src_buf || !v.xvalue) {
		err = -ENOMEM;
		goto out;
	}
	err = kiln_image_open_fd(&v.img, fd, &io);
	if (err) {
		kiln_log(&b->lg, KILN_LOG_ERROR, "%s: verify: the reader "
			 "refuses the image: %s", b->image, kiln_strerror(err));
		err = -EIO;
		goto out;
	}
	if (kiln_image_root(v.img) != b->root->nid) {
		kiln_log(&b->lg, KILN_LOG_ERROR, "%s: verify: wrong root nid",
			 b->image);
		err = -EIO;
	}
	/*
	 * The packed and metabox inodes have no source: the files they serve
	 * check them.
	 */
	for (size_t i = 0; !err && i < b->nr_nodes; i++)
		if (b->nodes[i] != b->packed && b->nodes[i] != b->metabox)
			err = check_node(&v, b->nodes[i]);
	kiln_image_close(v.img);
out:
	free(v.img_buf);
	free(v.src_buf);
	free(v.xvalue);
	free(v.xnames);
	return err;
}
