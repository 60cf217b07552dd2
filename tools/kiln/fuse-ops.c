// SPDX-License-Identifier: MIT
/*
 * The FUSE front end: answers libfuse3 low-level requests from one
 * read-only image. Stateless per inode (nids are stable), so forget is free.
 */
#include "fuse-ops.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <syslog.h>
#include <unistd.h>

/* Error lines logged before going quiet: a hostile image must not flood. */
#define MAX_ERROR_LINES 100u

/* Readers of one file handle that may keep a kiln_file for the next read. */
#define IDLE_FILES 4

#define EROFS_NAME_LEN 255

/*
 * One open file. The kernel may send reads on one handle from several
 * threads at once and a kiln_file belongs to one thread at a time, so each
 * read borrows a kiln_file from the handle's idle list (opening another
 * when all are busy) and returns it afterwards.
 */
struct kiln_fuse_handle {
	kiln_nid_t nid;
	pthread_mutex_t lock;
	unsigned int idle_count;
	struct kiln_file *idle[IDLE_FILES];
};

/* The per-thread reply buffer: reads land here, then go to the kernel. */
struct kiln_fuse_buf {
	size_t cap;
	char data[];
};

static struct kiln_fuse_fs *req_fs(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static kiln_nid_t ino_to_nid(const struct kiln_fuse_fs *fs, fuse_ino_t ino)
{
	if (ino == FUSE_ROOT_ID)
		return fs->root_nid;
	return (kiln_nid_t)ino - KILN_FUSE_INO_BIAS;
}

static fuse_ino_t nid_to_ino(const struct kiln_fuse_fs *fs, kiln_nid_t nid)
{
	if (nid == fs->root_nid)
		return FUSE_ROOT_ID;
	return (fuse_ino_t)nid + KILN_FUSE_INO_BIAS;
}

/* ---- logging ---- */

static void log_line(struct kiln_fuse_fs *fs, int priority, const char *msg)
{
	if (atomic_load_explicit(&fs->to_syslog, memory_order_relaxed))
		syslog(priority, "%s: %s", fs->image_name, msg);
	else
		fprintf(stderr, "kiln: %s: %s\n", fs->image_name, msg);
}

void kiln_fuse_log(struct kiln_fuse_fs *fs, int priority, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_line(fs, priority, msg);
}

void kiln_fuse_lib_log(void *ctx, enum kiln_log_level level, const char *msg)
{
	struct kiln_fuse_fs *fs = ctx;

	/*
	 * While the image opens, the library's errors say why it cannot be
	 * mounted. Once serving, the request handler logs one line naming the
	 * request and the nid for each failure; the library's detail is kept
	 * for -d, so one bad block costs one line per failed request.
	 */
	if (atomic_load_explicit(&fs->serving, memory_order_relaxed) ?
	    !fs->debug : level != KILN_LOG_ERROR)
		return;
	log_line(fs, level == KILN_LOG_ERROR ? LOG_ERR : LOG_DEBUG, msg);
}

/* ---- errors ---- */

/* Errors that are answers, not failures: never logged. */
static bool err_is_expected(int err)
{
	switch (err) {
	case ENOENT:
	case ENOTDIR:
	case EISDIR:
	case ENAMETOOLONG:
	case ENODATA:
	case ERANGE:
	case EINVAL:
	case EROFS:
	case ENXIO:
		return true;
	default:
		return false;
	}
}

/*
 * Answer @req with library error @neg_err (a negative errno). A corrupt
 * image becomes EIO for this request only, with one log line naming the
 * request and the inode.
 */
static void reply_lib_err(fuse_req_t req, const char *what, kiln_nid_t nid,
			  int neg_err)
{
	struct kiln_fuse_fs *fs = req_fs(req);
	int err = neg_err < 0 ? -neg_err : EIO;

	if (!err_is_expected(err)) {
		unsigned int n = atomic_fetch_add(&fs->errors_logged, 1);

		if (n < MAX_ERROR_LINES)
			kiln_fuse_log(fs, LOG_ERR, "%s: nid %llu: %s", what,
				      (unsigned long long)nid,
				      kiln_strerror(-err));
		else if (n == MAX_ERROR_LINES)
			kiln_fuse_log(fs, LOG_ERR,
				      "too many errors; no more are logged");
	}
	if (err == KILN_ECORRUPT)
		err = EIO;
	fuse_reply_err(req, err);
}

/* ---- per-thread buffer ---- */

static void buf_free(void *p)
{
	free(p);
}

/* A buffer of at least @len bytes, owned by this thread; NULL: no memory. */
static char *thread_buf(struct kiln_fuse_fs *fs, size_t len)
{
	struct kiln_fuse_buf *b = pthread_getspecific(fs->buf_key);
	size_t cap;

	if (b && b->cap >= len)
		return b->data;
	cap = len < KILN_FUSE_MAX_IO ? KILN_FUSE_MAX_IO : len;
	free(b);
	b = malloc(sizeof(*b) + cap);
	if (b)
		b->cap = cap;
	pthread_setspecific(fs->buf_key, b);
	return b ? b->data : NULL;
}

int kiln_fuse_fs_init(struct kiln_fuse_fs *fs, const char *image_name,
		      bool debug)
{
	memset(fs, 0, sizeof(*fs));
	fs->image_name = image_name;
	fs->debug = debug;
	atomic_init(&fs->to_syslog, false);
	atomic_init(&fs->serving, false);
	atomic_init(&fs->errors_logged, 0);
	atomic_init(&fs->open_files, 0);
	return -pthread_key_create(&fs->buf_key, buf_free);
}

void kiln_fuse_fs_attach(struct kiln_fuse_fs *fs, struct kiln_image *img)
{
	fs->img = img;
	fs->root_nid = kiln_image_root(img);
}

void kiln_fuse_fs_release(struct kiln_fuse_fs *fs)
{
	/* Worker threads free theirs on exit; -s runs requests here. */
	free(pthread_getspecific(fs->buf_key));
	pthread_setspecific(fs->buf_key, NULL);
	pthread_key_delete(fs->buf_key);
}

/* ---- attributes ---- */

static void fill_stat(const struct kiln_fuse_fs *fs, const struct kiln_stat *ks,
		      struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = nid_to_ino(fs, ks->nid);
	st->st_mode = ks->mode;
	st->st_nlink = ks->nlink;
	st->st_uid = ks->uid;
	st->st_gid = ks->gid;
	st->st_size = (off_t)ks->size;
	st->st_blocks = (blkcnt_t)ks->blocks;
	st->st_rdev = makedev(ks->rdev_major, ks->rdev_minor);
	/* EROFS keeps one timestamp; the kernel shows it as all three. */
	st->st_mtim.tv_sec = ks->mtime;
	st->st_mtim.tv_nsec = ks->mtime_nsec;
	st->st_atim = st->st_mtim;
	st->st_ctim = st->st_mtim;
}

static int stat_entry(struct kiln_fuse_fs *fs, kiln_nid_t nid,
		      struct fuse_entry_param *e)
{
	struct kiln_stat ks;
	int err = kiln_stat_nid(fs->img, nid, &ks);

	if (err)
		return err;
	memset(e, 0, sizeof(*e));
	e->ino = nid_to_ino(fs, nid);
	e->generation = 1;
	e->attr_timeout = KILN_FUSE_TIMEOUT;
	e->entry_timeout = KILN_FUSE_TIMEOUT;
	fill_stat(fs, &ks, &e->attr);
	return 0;
}

/* ---- handlers ---- */

static void kf_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	/* Readahead may overlap with other reads: the image is immutable. */
	if (conn->capable & FUSE_CAP_ASYNC_READ)
		conn->want |= FUSE_CAP_ASYNC_READ;
	if (conn->capable & FUSE_CAP_CACHE_SYMLINKS)
		conn->want |= FUSE_CAP_CACHE_SYMLINKS;
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	/* Let the kernel enforce stored ACLs, as its own EROFS does. */
	if (conn->capable & FUSE_CAP_POSIX_ACL)
		conn->want |= FUSE_CAP_POSIX_ACL;
	/* Nothing changes under the cache: never drop it on a getattr. */
	conn->want &= ~(unsigned int)FUSE_CAP_AUTO_INVAL_DATA;
	/*
	 * No splice: replies come from a buffer we fill anyway, and
	 * vmsplice-then-splice costs more than one writev for it.
	 */
	conn->want &= ~(unsigned int)(FUSE_CAP_SPLICE_WRITE |
				      FUSE_CAP_SPLICE_MOVE |
				      FUSE_CAP_SPLICE_READ);
	/* max_write sizes max_pages, which bounds reads too: 1 MiB. */
	if (conn->max_write > KILN_FUSE_MAX_IO)
		conn->max_write = KILN_FUSE_MAX_IO;
	/* More readahead requests in flight keep all workers busy. */
	conn->max_background = 64;
	conn->congestion_threshold = 48;
	conn->time_gran = 1;
}

static void kf_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct kiln_fuse_fs *fs = req_fs(req);
	kiln_nid_t dir = ino_to_nid(fs, parent), nid;
	struct fuse_entry_param e;
	int err = kiln_lookup(fs->img, dir, name, strlen(name), &nid);

	if (err == -ENOENT) {
		/* A negative entry the kernel may cache as long as a positive. */
		memset(&e, 0, sizeof(e));
		e.entry_timeout = KILN_FUSE_TIMEOUT;
		fuse_reply_entry(req, &e);
		return;
	}
	if (!err)
		err = stat_entry(fs, nid, &e);
	if (err) {
		reply_lib_err(req, "lookup", dir, err);
		return;
	}
	fuse_reply_entry(req, &e);
}

static void kf_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	(void)ino;
	(void)nlookup;
	fuse_reply_none(req);
}

static void kf_forget_multi(fuse_req_t req, size_t count,
			    struct fuse_forget_data *forgets)
{
	(void)count;
	(void)forgets;
	fuse_reply_none(req);
}

static void kf_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct kiln_fuse_fs *fs = req_fs(req);
	kiln_nid_t nid = ino_to_nid(fs, ino);
	struct kiln_stat ks;
	struct stat st;
	int err = kiln_stat_nid(fs->img, nid, &ks);

	(void)fi;
	if (err) {
		reply_lib_err(req, "getattr", nid, err);
		return;
	}
	fill_stat(fs, &ks, &st);
	fuse_reply_attr(req, &st, KILN_FUSE_TIMEOUT);
}

static void kf_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct kiln_fuse_fs *fs = req_fs(req);
	kiln_nid_t nid = ino_to_nid(fs, ino);
	size_t cap = PATH_MAX;
	struct kiln_stat ks;
	ssize_t n;
	char *buf;

	/* Targets are short; the stored size says how long a long one is. */
	for (int tries = 0; tries < 2; tries++) {
		buf = thread_buf(fs, cap);
		if (!buf) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		n = kiln_readlink(fs->img, nid, buf, cap);
		if (n != -ERANGE)
			break;
		n = kiln_stat_nid(fs->img, nid, &ks);
		if (n < 0)
			break;
		if (ks.size >= SIZE_MAX / 2 || ks.size + 1 <= cap) {
			n = -KILN_ECORRUPT;
			break;
		}
		cap = (size_t)ks.size + 1;
	}
	if (n < 0) {
		reply_lib_err(req, "readlink", nid, (int)n);
		return;
	}
	fuse_reply_readlink(req, buf);
}

static void handle_free(struct kiln_fuse_fs *fs, struct kiln_fuse_handle *h)
{
	atomic_fetch_sub(&fs->open_files, 1);
	for (unsigned int i = 0; i < h->idle_count; i++)
		kiln_file_close(h->idle[i]);
	pthread_mutex_destroy(&h->lock);
	free(h);
}

static void kf_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct kiln_fuse_fs *fs = req_fs(req);
	kiln_nid_t nid = ino_to_nid(fs, ino);
	struct kiln_fuse_handle *h;
	struct kiln_file *file;
	int err;

	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EROFS);
		return;
	}
	h = calloc(1, sizeof(*h));
	if (!h) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	err = kiln_file_open(fs->img, nid, &file);
	if (err) {
		free(h);
		reply_lib_err(req, "open", nid, err);
		return;
	}
	atomic_fetch_add(&fs->open_files, 1);
	h->nid = nid;
	pthread_mutex_init(&h->lock, NULL);
	h->idle[h->idle_count++] = file;
	fi->fh = (uintptr_t)h;
	/* The image never changes: keep cached pages across opens. */
	fi->keep_cache = 1;
	fi->noflush = 1;
	if (fuse_reply_open(req, fi))
		handle_free(fs, h);	/* interrupted: no release will come */
}

static struct kiln_file *handle_take(struct kiln_fuse_fs *fs,
				     struct kiln_fuse_handle *h, int *err)
{
	struct kiln_file *file = NULL;

	pthread_mutex_lock(&h->lock);
	if (h->idle_count)
		file = h->idle[--h->idle_count];
	pthread_mutex_unlock(&h->lock);
	if (!file)
		*err = kiln_file_open(fs->img, h->nid, &file);
	return file;
}

static void handle_give(struct kiln_fuse_handle *h, struct kiln_file *file)
{
	pthread_mutex_lock(&h->lock);
	if (h->idle_count < IDLE_FILES) {
		h->idle[h->idle_count++] = file;
		file = NULL;
	}
	pthread_mutex_unlock(&h->lock);
	kiln_file_close(file);
}

static void kf_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct kiln_fuse_fs *fs = req_fs(req);
	struct kiln_fuse_handle *h = (struct kiln_fuse_handle *)(uintptr_t)fi->fh;
	struct kiln_file *file;
	char *buf;
	ssize_t n;
	int err = 0;

	(void)ino;
	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	buf = thread_buf(fs, size);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	file = handle_take(fs, h, &err);
	if (!file) {
		reply_lib_err(req, "read", h->nid, err);
		return;
	}
	n = kiln_file_pread(file, buf, size, (uint64_t)off);
	handle_give(h, file);
	if (n < 0) {
		char what[64];

		snprintf(what, sizeof(what), "read of %zu bytes at %lld", size,
			 (long long)off);
		reply_lib_err(req, what, h->nid, (int)n);
		return;
	}
	fuse_reply_buf(req, buf, (size_t)n);
}

static void kf_release(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	(void)ino;
	handle_free(req_fs(req), (struct kiln_fuse_handle *)(uintptr_t)fi->fh);
	fuse_reply_err(req, 0);
}

static void kf_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		     struct fuse_file_info *fi)
{
	struct kiln_fuse_fs *fs = req_fs(req);
	struct kiln_fuse_handle *h = (struct kiln_fuse_handle *)(uintptr_t)fi->fh;
	uint64_t data_off, data_end, size;
	struct kiln_file *file;
	int err = 0;

	(void)ino;
	if (off < 0 || (whence != SEEK_DATA && whence != SEEK_HOLE)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	file = handle_take(fs, h, &err);
	if (!file) {
		reply_lib_err(req, "lseek", h->nid, err);
		return;
	}
	size = kiln_file_size(file);
	if ((uint64_t)off >= size) {
		err = -ENXIO;
		goto out;
	}
	err = kiln_file_next_data(file, (uint64_t)off, &data_off, &data_end);
	if (whence == SEEK_DATA)
		goto out;
	/* SEEK_HOLE: in a hole already, or at the end of this run of data. */
	if (err == -ENXIO || (!err && data_off > (uint64_t)off)) {
		data_off = (uint64_t)off;
		err = 0;
		goto out;
	}
	/* Adjacent ranges form one run; each step moves forward, so it ends. */
	while (!err && data_end < size) {
		uint64_t next_off, next_end;

		err = kiln_file_next_data(file, data_end, &next_off, &next_end);
		if (err == -ENXIO || (!err && next_off > data_end)) {
			err = 0;
			break;
		}
		if (!err && next_end <= data_end)
			err = -KILN_ECORRUPT;
		if (!err)
			data_end = next_end;
	}
	data_off = data_end < size ? data_end : size;
out:
	handle_give(h, file);
	if (err == -EOPNOTSUPP) {
		/* A layout without hole tracking: the kernel falls back to
		 * "all data" for this and every later lseek. */
		fuse_reply_err(req, ENOSYS);
		return;
	}
	if (err) {
		reply_lib_err(req, "lseek", h->nid, err);
		return;
	}
	fuse_reply_lseek(req, (off_t)data_off);
}

static void kf_opendir(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	(void)ino;
	/* Listings never change: let the kernel cache them. */
	fi->cache_readdir = 1;
	fi->keep_cache = 1;
	fuse_reply_open(req, fi);
}

struct dir_fill {
	fuse_req_t req;
	struct kiln_fuse_fs *fs;
	char *buf;
	size_t cap, used;
	bool plus;
};

static int dir_fill_one(void *ctx, const struct kiln_dirent *de)
{
	struct dir_fill *df = ctx;
	size_t room = df->cap - df->used, need;
	char *dst = df->buf + df->used;

	if (df->plus) {
		struct fuse_entry_param e;

		/*
		 * An entry whose inode is corrupt is still listed (as the
		 * kernel's EROFS would); its lookup then reports the error.
		 */
		if (stat_entry(df->fs, de->nid, &e)) {
			memset(&e, 0, sizeof(e));
			e.attr.st_ino = nid_to_ino(df->fs, de->nid);
			e.attr.st_mode = DTTOIF(de->type);
		}
		need = fuse_add_direntry_plus(df->req, dst, room, de->name,
					      &e, (off_t)de->next_pos);
	} else {
		struct stat st;

		memset(&st, 0, sizeof(st));
		st.st_ino = nid_to_ino(df->fs, de->nid);
		st.st_mode = DTTOIF(de->type);
		need = fuse_add_direntry(df->req, dst, room, de->name, &st,
					 (off_t)de->next_pos);
	}
	if (need > room)
		return 1;	/* full: resume from this entry next time */
	df->used += need;
	return 0;
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       bool plus)
{
	struct kiln_fuse_fs *fs = req_fs(req);
	kiln_nid_t nid = ino_to_nid(fs, ino);
	struct dir_fill df = {
		.req = req, .fs = fs, .cap = size, .plus = plus,
	};
	int err;

	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	df.buf = thread_buf(fs, size);
	if (!df.buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	err = kiln_dir_iterate(fs->img, nid, (uint64_t)off, dir_fill_one, &df);
	/* Entries already filled go out; the error comes on the next call. */
	if (err < 0 && !df.used) {
		reply_lib_err(req, plus ? "readdirplus" : "readdir", nid, err);
		return;
	}
	fuse_reply_buf(req, df.buf, df.used);
}

static void kf_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	(void)fi;
	do_readdir(req, ino, size, off, false);
}

static void kf_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, struct fuse_file_info *fi)
{
	(void)fi;
	do_readdir(req, ino, size, off, true);
}

static void kf_releasedir(fuse_req_t req, fuse_ino_t ino,
			  struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

static void kf_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct kiln_fuse_fs *fs = req_fs(req);
	struct kiln_image_info info;
	struct statvfs sv;

	(void)ino;
	kiln_image_get_info(fs->img, &info);
	memset(&sv, 0, sizeof(sv));
	sv.f_bsize = info.block_size;
	sv.f_frsize = info.block_size;
	sv.f_blocks = info.blocks;
	sv.f_files = info.inodes;
	sv.f_namemax = EROFS_NAME_LEN;
	sv.f_flag = ST_RDONLY;
	fuse_reply_statfs(req, &sv);
}

/* getxattr/listxattr: @size 0 asks for the length, else for the bytes. */
static void reply_xattr(fuse_req_t req, const char *what, kiln_nid_t nid,
			ssize_t n, const char *buf, size_t size)
{
	if (n < 0)
		reply_lib_err(req, what, nid, (int)n);
	else if (!size)
		fuse_reply_xattr(req, (size_t)n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
}

static void kf_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			size_t size)
{
	struct kiln_fuse_fs *fs = req_fs(req);
	kiln_nid_t nid = ino_to_nid(fs, ino);
	char *buf = size ? thread_buf(fs, size) : NULL;

	if (size && !buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	reply_xattr(req, "getxattr", nid,
		    kiln_getxattr(fs->img, nid, name, buf, size), buf, size);
}

static void kf_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct kiln_fuse_fs *fs = req_fs(req);
	kiln_nid_t nid = ino_to_nid(fs, ino);
	char *buf = size ? thread_buf(fs, size) : NULL;

	if (size && !buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	reply_xattr(req, "listxattr", nid,
		    kiln_listxattr(fs->img, nid, buf, size), buf, size);
}

/*
 * Permissions are checked by the kernel (default_permissions), so there is
 * no access handler: without one the kernel stops asking after the first
 * ENOSYS.
 */
const struct fuse_lowlevel_ops kiln_fuse_ops = {
	.init		= kf_init,
	.lookup		= kf_lookup,
	.forget		= kf_forget,
	.forget_multi	= kf_forget_multi,
	.getattr	= kf_getattr,
	.readlink	= kf_readlink,
	.open		= kf_open,
	.read		= kf_read,
	.release	= kf_release,
	.lseek		= kf_lseek,
	.opendir	= kf_opendir,
	.readdir	= kf_readdir,
	.readdirplus	= kf_readdirplus,
	.releasedir	= kf_releasedir,
	.statfs		= kf_statfs,
	.getxattr	= kf_getxattr,
	.listxattr	= kf_listxattr,
};
