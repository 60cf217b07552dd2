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

#define EROFS_NAME_LEN 255

/* Pieces of one spliced read reply (raw runs of the image). */
#define SPLICE_SEGS 16
/*
 * Smaller reads are copied from the map: libfuse would read them into a
 * fresh buffer anyway (splicing less than two pages does not pay).
 */
#define SPLICE_MIN (32u * 1024u)
/* Room libfuse wants in its pipe beyond the data: header, a page a piece. */
#define SPLICE_PIPE_SLACK ((SPLICE_SEGS + 2) * 4096u + 4096u)

#define KILN_FUSE_MIN(a, b) ((a) < (b) ? (a) : (b))

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
	char buf[512], *msg = buf;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	/* a long path must not cut off the reason that follows it */
	if (n >= (int)sizeof(buf) && (msg = malloc((size_t)n + 1))) {
		va_start(ap, fmt);
		vsnprintf(msg, (size_t)n + 1, fmt, ap);
		va_end(ap);
	}
	log_line(fs, priority, msg ? msg : buf);
	if (msg != buf)
		free(msg);
}

void kiln_fuse_log_stats(struct kiln_fuse_fs *fs)
{
	kiln_fuse_log(fs, LOG_INFO, "stats: %llu reads; page cache stores: "
		      "%llu extents decoded whole, %llu bytes stored, "
		      "%llu refused, %llu reads with no free slot",
		      (unsigned long long)atomic_load(&fs->reads),
		      (unsigned long long)atomic_load(&fs->store_extents),
		      (unsigned long long)atomic_load(&fs->store_bytes),
		      (unsigned long long)atomic_load(&fs->store_failed),
		      (unsigned long long)atomic_load(&fs->store_busy));
	if (fs->remote) {
		struct kiln_remote_stats st;

		kiln_image_remote_stats(fs->img, &st);
		kiln_fuse_log(fs, LOG_INFO,
			      "remote: %llu bytes fetched, %llu requests, %llu retries, %llu hits, %llu misses, %llu failed reads",
			      (unsigned long long)st.bytes_fetched,
			      (unsigned long long)st.requests,
			      (unsigned long long)st.retries,
			      (unsigned long long)st.hits,
			      (unsigned long long)st.misses,
			      (unsigned long long)st.failures);
	}
}

void kiln_fuse_lib_log(void *ctx, enum kiln_log_level level, const char *msg)
{
	struct kiln_fuse_fs *fs = ctx;

	/*
	 * While the image opens, the library's errors say why it cannot be
	 * mounted. Once serving, the request handler logs one line naming the
	 * request and the nid for each failure; the library's detail is kept
	 * for -d, so one bad block costs one line per failed request. A
	 * remote image's errors are kept: they name the network's causes
	 * (a timeout, a refusal, the image replaced on the server).
	 */
	if (atomic_load_explicit(&fs->serving, memory_order_relaxed) ?
	    !fs->debug && !(fs->remote && level == KILN_LOG_ERROR) :
	    level != KILN_LOG_ERROR)
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

char *kiln_fuse_thread_buf(struct kiln_fuse_fs *fs, size_t len)
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
	atomic_init(&fs->no_open, false);
	atomic_init(&fs->no_opendir, false);
	atomic_init(&fs->reads, 0);
	atomic_init(&fs->store_extents, 0);
	atomic_init(&fs->store_bytes, 0);
	atomic_init(&fs->store_busy, 0);
	atomic_init(&fs->store_failed, 0);
	fs->image_fd = -1;
	pthread_mutex_init(&fs->files_lock, NULL);
	return -pthread_key_create(&fs->buf_key, buf_free);
}

void kiln_fuse_fs_attach(struct kiln_fuse_fs *fs, struct kiln_image *img)
{
	fs->img = img;
	fs->root_nid = kiln_image_root(img);
}

void kiln_fuse_fs_detach(struct kiln_fuse_fs *fs)
{
	for (unsigned int i = 0; i < KILN_FUSE_IDLE_FILES; i++) {
		kiln_file_close(fs->idle[i].file);
		fs->idle[i].file = NULL;
	}
}

void kiln_fuse_fs_release(struct kiln_fuse_fs *fs)
{
	pthread_mutex_destroy(&fs->files_lock);
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

/* Undo mountinfo's octal escapes (\040 for a space) in place. */
static void unescape_mountinfo(char *s)
{
	char *d = s;

	while (*s) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' &&
		    s[2] >= '0' && s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*d++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 |
				      (s[3] - '0'));
			s += 4;
		} else {
			*d++ = *s++;
		}
	}
	*d = '\0';
}

/*
 * "major:minor" of the FUSE mount at fs->mnt_path (the last one stacked
 * there) into @dev, from /proc/self/mountinfo: stat() on the mount point
 * would be a request to this very server. Returns 0 or -1.
 */
static int find_mount_dev(const struct kiln_fuse_fs *fs, char *dev,
			  size_t cap)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t line_cap = 0;
	int found = -1;

	if (!f)
		return -1;
	while (getline(&line, &line_cap, f) > 0) {
		char *save = NULL, *majmin, *mnt, *sep;

		/* ID PARENT MAJ:MIN ROOT MOUNTPOINT ... - FSTYPE SOURCE ... */
		if (!strtok_r(line, " ", &save) || !strtok_r(NULL, " ", &save))
			continue;
		majmin = strtok_r(NULL, " ", &save);
		if (!majmin || !strtok_r(NULL, " ", &save))
			continue;
		mnt = strtok_r(NULL, " ", &save);
		sep = save ? strstr(save, " - fuse") : NULL;
		if (!mnt || !sep || strlen(majmin) >= cap)
			continue;
		unescape_mountinfo(mnt);
		if (strcmp(mnt, fs->mnt_path))
			continue;
		strcpy(dev, majmin);
		found = 0;
	}
	free(line);
	fclose(f);
	return found;
}

/*
 * The kernel reads ahead 128 KiB on a FUSE mount unless told otherwise
 * through the mount's bdi in sysfs (root only), so a sequential stream
 * arrives as 128 KiB requests. A larger window makes fewer, larger
 * requests (up to max_pages each) and keeps several in flight.
 */
static void set_readahead(struct kiln_fuse_fs *fs)
{
	char path[96];
	FILE *f;

	if (!fs->readahead_kb || !fs->mnt_dev[0]) {
		if (fs->debug && fs->readahead_kb)
			kiln_fuse_log(fs, LOG_DEBUG, "readahead: mount not found");
		return;
	}
	snprintf(path, sizeof(path), "/sys/class/bdi/%s/read_ahead_kb",
		 fs->mnt_dev);
	f = fopen(path, "we");
	if (f) {
		fprintf(f, "%u\n", fs->readahead_kb);
		if (fclose(f))
			f = NULL;
	}
	if (!f && fs->debug)
		kiln_fuse_log(fs, LOG_DEBUG, "readahead: %s: %s", path,
			      strerror(errno));
}

/* Whether this process may grow a pipe to @size bytes (for splicing). */
static bool pipe_holds(size_t size)
{
	int p[2];
	bool ok;

	if (pipe2(p, O_CLOEXEC))
		return false;
	ok = fcntl(p[0], F_SETPIPE_SZ, (int)size) >= (int)size;
	close(p[0]);
	close(p[1]);
	return ok;
}

static void kf_init(void *userdata, struct fuse_conn_info *conn)
{
	struct kiln_fuse_fs *fs = userdata;

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
	 * Files and directories need no handle (reads find their kiln_file
	 * by nid): answering the first open with ENOSYS tells a kernel that
	 * knows this to stop sending open and release, two round trips per
	 * file, and to keep the page cache as FOPEN_KEEP_CACHE would.
	 */
	atomic_store(&fs->no_open, !!(conn->capable & FUSE_CAP_NO_OPEN_SUPPORT));
	atomic_store(&fs->no_opendir,
		     !!(conn->capable & FUSE_CAP_NO_OPENDIR_SUPPORT));
	/*
	 * Raw runs of the image go out by splice (image -> pipe -> kernel,
	 * one copy in the kernel); everything else is a buffer we fill
	 * anyway, which one writev sends (fuse_reply_buf never splices).
	 */
	conn->want &= ~(unsigned int)(FUSE_CAP_SPLICE_WRITE |
				      FUSE_CAP_SPLICE_MOVE |
				      FUSE_CAP_SPLICE_READ);
	if (fs->image_fd >= 0 && (conn->capable & FUSE_CAP_SPLICE_WRITE) &&
	    pipe_holds(KILN_FUSE_SPLICE_IO + SPLICE_PIPE_SLACK)) {
		conn->want |= FUSE_CAP_SPLICE_WRITE;
		fs->splice = true;
	}
	/*
	 * max_write sizes max_pages, which bounds reads too: 1 MiB, or what
	 * one pipe holds with the reply header when splicing (without
	 * CAP_SYS_RESOURCE a pipe holds at most pipe-max-size, 1 MiB).
	 */
	if (conn->max_write > KILN_FUSE_MAX_IO)
		conn->max_write = KILN_FUSE_MAX_IO;
	if (fs->splice && conn->max_write > KILN_FUSE_SPLICE_IO)
		conn->max_write = KILN_FUSE_SPLICE_IO;
	/*
	 * The kernel keeps the smaller of the bdi's window and this one, so
	 * raise both: this before the reply, the bdi now.
	 */
	if (!fs->mnt_path ||
	    find_mount_dev(fs, fs->mnt_dev, sizeof(fs->mnt_dev)))
		fs->mnt_dev[0] = '\0';
	if (fs->readahead_kb) {
		conn->max_readahead = fs->readahead_kb * 1024u;
		set_readahead(fs);
	}
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
		buf = kiln_fuse_thread_buf(fs, cap);
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

/* ---- files ---- */

/*
 * A kiln_file belongs to one thread at a time, and the kernel may read
 * one file from several threads at once, with or without having opened
 * it. So each read borrows an idle kiln_file of its nid from a small
 * shared set (opening one when none is idle) and gives it back after:
 * its decoded-extent scratch and map hint then serve the next read.
 */
static struct kiln_file *files_take(struct kiln_fuse_fs *fs, kiln_nid_t nid,
				    int *err)
{
	struct kiln_file *file = NULL;

	pthread_mutex_lock(&fs->files_lock);
	for (unsigned int i = 0; i < KILN_FUSE_IDLE_FILES; i++) {
		struct kiln_fuse_idle *slot = &fs->idle[i];

		if (slot->file && slot->nid == nid) {
			file = slot->file;
			slot->file = NULL;
			break;
		}
	}
	pthread_mutex_unlock(&fs->files_lock);
	if (!file)
		*err = kiln_file_open(fs->img, nid, &file);
	return file;
}

/* Keep @file for the next read of @nid; the least recently used goes. */
static void files_give(struct kiln_fuse_fs *fs, kiln_nid_t nid,
		       struct kiln_file *file)
{
	struct kiln_fuse_idle *slot = NULL;

	pthread_mutex_lock(&fs->files_lock);
	for (unsigned int i = 0; i < KILN_FUSE_IDLE_FILES; i++) {
		struct kiln_fuse_idle *s = &fs->idle[i];

		if (!s->file) {
			slot = s;
			break;
		}
		if (!slot || s->used < slot->used)
			slot = s;
	}
	if (slot->file) {
		struct kiln_file *victim = slot->file;

		slot->file = file;
		file = victim;
	} else {
		slot->file = file;
		file = NULL;
	}
	slot->nid = nid;
	slot->used = ++fs->files_clock;
	pthread_mutex_unlock(&fs->files_lock);
	kiln_file_close(file);
}

static void kf_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct kiln_fuse_fs *fs = req_fs(req);
	kiln_nid_t nid = ino_to_nid(fs, ino);
	struct kiln_file *file;
	int err = 0;

	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EROFS);
		return;
	}
	/* "opened, and stop asking": see kf_init() */
	if (atomic_load_explicit(&fs->no_open, memory_order_relaxed)) {
		fuse_reply_err(req, ENOSYS);
		return;
	}
	/* An older kernel: check the inode now, keep it for the reads. */
	file = files_take(fs, nid, &err);
	if (!file) {
		reply_lib_err(req, "open", nid, err);
		return;
	}
	files_give(fs, nid, file);
	fi->fh = 0;
	/* The image never changes: keep cached pages across opens. */
	fi->keep_cache = 1;
	fi->noflush = 1;
	fuse_reply_open(req, fi);
}

/*
 * Answer a read of [@off, @off + @size) whose bytes all lie raw in the
 * image (in at most SPLICE_SEGS runs) by splicing them from the image:
 * the kernel copies them once, from the image's page cache into the
 * file's. Returns 1 when it replied, 0 when the read must be copied, or
 * a negative errno.
 */
static int reply_spliced(fuse_req_t req, struct kiln_fuse_fs *fs,
			 struct kiln_file *file, size_t size, uint64_t off)
{
	union {
		struct fuse_bufvec v;
		char room[sizeof(struct fuse_bufvec) +
			  (SPLICE_SEGS - 1) * sizeof(struct fuse_buf)];
	} u;
	struct fuse_bufvec *bv = &u.v;
	uint64_t fsize = kiln_file_size(file), end, pos = off;
	unsigned int n = 0;
	int res;

	if (off >= fsize)
		return 0;
	end = off + KILN_FUSE_MIN(size, fsize - off);
	while (pos < end) {
		uint64_t img_off, len;
		struct fuse_buf *b = &bv->buf[n ? n - 1 : 0];

		res = kiln_file_locate(file, pos, end - pos, &img_off, &len);
		if (res <= 0)
			return res;
		if (!len)
			return 0;	/* no progress: let pread say why */
		if (n && (uint64_t)b->pos + b->size == img_off) {
			b->size += (size_t)len;
		} else {
			if (n == SPLICE_SEGS || img_off > (uint64_t)INT64_MAX)
				return 0;
			b = &bv->buf[n++];
			memset(b, 0, sizeof(*b));
			b->flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
			b->fd = fs->image_fd;
			b->pos = (off_t)img_off;
			b->size = (size_t)len;
		}
		pos += len;
	}
	bv->count = n;
	bv->idx = 0;
	bv->off = 0;
	res = fuse_reply_data(req, bv, 0);
	/* the request is answered (an error included) or gone either way */
	if (res < 0 && res != -ENOENT && fs->debug)
		kiln_fuse_log(fs, LOG_DEBUG, "read reply: %s", strerror(-res));
	return 1;
}

static void kf_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct kiln_fuse_fs *fs = req_fs(req);
	kiln_nid_t nid = ino_to_nid(fs, ino);
	struct kiln_file *file;
	char *buf;
	ssize_t n;
	int err = 0;

	(void)fi;
	atomic_fetch_add_explicit(&fs->reads, 1, memory_order_relaxed);
	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	file = files_take(fs, nid, &err);
	if (!file) {
		reply_lib_err(req, "read", nid, err);
		return;
	}
	/*
	 * A small read of a compressed file decodes its whole extent: the
	 * kernel gets the other pages too (a larger read comes from
	 * readahead, which asks for the neighbours itself).
	 */
	if (fs->store && size <= KILN_FUSE_STORE_READ &&
	    kiln_fuse_store_read(req, fs, file, ino, size, (uint64_t)off)) {
		files_give(fs, nid, file);
		return;
	}
	if (fs->splice && size >= SPLICE_MIN) {
		err = reply_spliced(req, fs, file, size, (uint64_t)off);
		if (err) {
			files_give(fs, nid, file);
			if (err < 0)
				reply_lib_err(req, "read", nid, err);
			return;
		}
	}
	buf = kiln_fuse_thread_buf(fs, size);
	if (!buf) {
		files_give(fs, nid, file);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	n = kiln_file_pread(file, buf, size, (uint64_t)off);
	/*
	 * Short only at the end of the file: a read that stops early inside
	 * it would reach the application as a short read with no error.
	 */
	if (n >= 0 && (size_t)n < size &&
	    (uint64_t)off + (uint64_t)n < kiln_file_size(file))
		n = -EIO;
	files_give(fs, nid, file);
	if (n < 0) {
		char what[64];

		snprintf(what, sizeof(what), "read of %zu bytes at %lld", size,
			 (long long)off);
		reply_lib_err(req, what, nid, (int)n);
		return;
	}
	fuse_reply_buf(req, buf, (size_t)n);
}

static void kf_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		     struct fuse_file_info *fi)
{
	struct kiln_fuse_fs *fs = req_fs(req);
	kiln_nid_t nid = ino_to_nid(fs, ino);
	uint64_t data_off, data_end, size;
	struct kiln_file *file;
	int err = 0;

	(void)fi;
	if (off < 0 || (whence != SEEK_DATA && whence != SEEK_HOLE)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	file = files_take(fs, nid, &err);
	if (!file) {
		reply_lib_err(req, "lseek", nid, err);
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
	files_give(fs, nid, file);
	if (err == -EOPNOTSUPP) {
		/* A layout without hole tracking: the kernel falls back to
		 * "all data" for this and every later lseek. */
		fuse_reply_err(req, ENOSYS);
		return;
	}
	if (err) {
		reply_lib_err(req, "lseek", nid, err);
		return;
	}
	fuse_reply_lseek(req, (off_t)data_off);
}

static void kf_opendir(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct kiln_fuse_fs *fs = req_fs(req);

	(void)ino;
	/* no handle needed; the kernel then caches listings by default */
	if (atomic_load_explicit(&fs->no_opendir, memory_order_relaxed)) {
		fuse_reply_err(req, ENOSYS);
		return;
	}
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
	df.buf = kiln_fuse_thread_buf(fs, size);
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
	char *buf = size ? kiln_fuse_thread_buf(fs, size) : NULL;

	if (size && !buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (kiln_fuse_xattr_is_trusted(name) &&
	    !kiln_fuse_caller_may_see_trusted(req)) {
		fuse_reply_err(req, ENODATA);
		return;
	}
	reply_xattr(req, "getxattr", nid,
		    kiln_getxattr(fs->img, nid, name, buf, size), buf, size);
}

/*
 * The whole list is read even for a size query, since the length the
 * caller sees depends on which trusted.* names it may see.
 */
static void kf_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct kiln_fuse_fs *fs = req_fs(req);
	kiln_nid_t nid = ino_to_nid(fs, ino);
	ssize_t n = kiln_listxattr(fs->img, nid, NULL, 0);
	char *buf = n > 0 ? kiln_fuse_thread_buf(fs, (size_t)n) : NULL;

	if (n > 0 && !buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (n > 0)
		n = kiln_listxattr(fs->img, nid, buf, (size_t)n);
	if (n > 0 && memmem(buf, (size_t)n, "trusted.", 8) &&
	    !kiln_fuse_caller_may_see_trusted(req))
		n = (ssize_t)kiln_fuse_xattr_hide_trusted(buf, (size_t)n);
	if (n >= 0 && size && (size_t)n > size) {
		fuse_reply_err(req, ERANGE);
		return;
	}
	reply_xattr(req, "listxattr", nid, n, buf, size);
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
	.lseek		= kf_lseek,
	.opendir	= kf_opendir,
	.readdir	= kf_readdir,
	.readdirplus	= kf_readdirplus,
	.releasedir	= kf_releasedir,
	.statfs		= kf_statfs,
	.getxattr	= kf_getxattr,
	.listxattr	= kf_listxattr,
};
