// SPDX-License-Identifier: MIT
/*
 * kiln_extract(): restore a subtree of an image below a host directory.
 *
 * Safety: every directory is entered with openat(O_NOFOLLOW | O_DIRECTORY)
 * from its parent's descriptor, every file is created with O_EXCL |
 * O_NOFOLLOW (or mknodat/symlinkat, which never follow), names that could
 * walk elsewhere ("", ".", "..", anything with '/') are refused, and depth
 * is bounded. So no name or symlink of the image, nor one the extraction
 * created, can make a write land outside the destination.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <kiln/extract.h>

#include "reader/dirlist.h"
#include "util/grow.h"
#include "util/u64map.h"

#define EXTRACT_DEFAULT_MAX_DEPTH	4096
#define EXTRACT_CHUNK			(1u << 20)
#define EXTRACT_XATTR_VALUE_MAX		65536
#define MIN_SZ(a, b)		((a) < (b) ? (a) : (b))

/* A directory being filled: its descriptor stays open until it is done. */
struct xframe {
	kiln_nid_t nid;
	int fd;
	size_t path_len;		/* its path is the first path_len bytes
					   of extract.path */
	size_t made;			/* its index in extract.made */
	struct kiln_stat st;
	struct kiln_dirlist dl;
	size_t next;			/* next entry of dl to extract */
	unsigned int depth;
	bool apply_meta;		/* set mode/owner/times when done */
};

/*
 * A directory made (or merged into) below the destination. Hardlink
 * sources are found again through this tree of names, opened one
 * component at a time without following symlinks; it costs one name per
 * directory however deep the tree.
 */
struct xdir {
	size_t parent;			/* SIZE_MAX for the destination */
	char *name;			/* NULL for the destination */
};

/* The first name given to a multiply-linked inode. */
struct xlink {
	size_t dir;			/* index in extract.made */
	char *name;
};

struct extract {
	struct kiln_image *img;
	struct kiln_extract_opts opts;
	struct kiln_extract_stats *stats;
	int destfd;
	bool root;			/* running with euid 0 */
	bool chown;			/* restore owners */
	bool stop;
	int first_err;
	struct xframe *stack;
	size_t nr_frames, cap_frames;
	struct kiln_u64map dirs;	/* directories entered (cycle guard) */
	struct xdir *made;		/* directories extracted into */
	size_t nr_made, cap_made;
	struct kiln_u64map links;	/* nid -> index into link_names */
	struct xlink *link_names;
	size_t nr_links, cap_links;
	char *path;			/* image path of the current object */
	size_t path_len, path_cap;
	char *buf;			/* EXTRACT_CHUNK bytes */
	char *xnames;
	size_t xnames_cap;
	char *xvalue;			/* EXTRACT_XATTR_VALUE_MAX bytes */
};

static void report(struct extract *x, enum kiln_log_level level,
		   const char *path, int err, const char *fmt, va_list ap)
	__attribute__((format(printf, 5, 0)));

static void report(struct extract *x, enum kiln_log_level level,
		   const char *path, int err, const char *fmt, va_list ap)
{
	char what[512];

	if (!x->opts.msg)
		return;
	vsnprintf(what, sizeof(what), fmt, ap);
	x->opts.msg(x->opts.ctx, level, path, err, what);
}

static int xerror(struct extract *x, const char *path, int err,
		  const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void xwarn(struct extract *x, const char *path, int err,
		  const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Report an error; returns @err (made negative and non-zero). */
static int xerror(struct extract *x, const char *path, int err,
		  const char *fmt, ...)
{
	va_list ap;

	if (err >= 0)
		err = -EIO;
	x->stats->errors++;
	if (!x->first_err)
		x->first_err = err;
	if (x->opts.flags & KILN_EXTRACT_FAIL_FAST)
		x->stop = true;
	va_start(ap, fmt);
	report(x, KILN_LOG_ERROR, path, err, fmt, ap);
	va_end(ap);
	return err;
}

static void xwarn(struct extract *x, const char *path, int err,
		  const char *fmt, ...)
{
	va_list ap;

	x->stats->warnings++;
	va_start(ap, fmt);
	report(x, KILN_LOG_WARN, path, err, fmt, ap);
	va_end(ap);
}

/* A name that stays in its directory: not "", ".", "..", no '/' or NUL. */
static bool safe_name(const char *name, size_t len)
{
	if (len == 0 || strlen(name) != len || memchr(name, '/', len))
		return false;
	return strcmp(name, ".") && strcmp(name, "..");
}

/*
 * Make x->path the path of @name inside the directory whose path is the
 * first @dir_len bytes of x->path. 0 or -ENOMEM.
 */
static int path_enter(struct extract *x, size_t dir_len, const char *name)
{
	size_t nlen = strlen(name);
	bool slash = !(dir_len == 1 && x->path[0] == '/');
	size_t need = dir_len + slash + nlen + 1;

	if (KILN_GROW(x->path, x->path_cap, need))
		return -ENOMEM;
	if (slash)
		x->path[dir_len] = '/';
	memcpy(x->path + dir_len + slash, name, nlen + 1);
	x->path_len = dir_len + slash + nlen;
	return 0;
}

static void path_leave(struct extract *x, size_t len)
{
	x->path[len] = '\0';
	x->path_len = len;
}

/* Record directory @name made in made[@parent]; its index or -ENOMEM. */
static ssize_t add_made(struct extract *x, size_t parent, const char *name)
{
	char *copy = NULL;

	if (KILN_GROW(x->made, x->cap_made, x->nr_made + 1))
		return -ENOMEM;
	if (name && !(copy = strdup(name)))
		return -ENOMEM;
	x->made[x->nr_made] = (struct xdir){ .parent = parent, .name = copy };
	return (ssize_t)x->nr_made++;
}

/* Remove an existing non-directory @name so it can be replaced. */
static int replace(struct extract *x, int dirfd, const char *name,
		   const char *path)
{
	if (!(x->opts.flags & KILN_EXTRACT_FORCE))
		return xerror(x, path, -EEXIST,
			      "not replaced without --force");
	if (unlinkat(dirfd, name, 0) == 0)
		return 0;
	if (errno == EISDIR)
		return xerror(x, path, -EISDIR,
			      "replacing: a directory exists there");
	return xerror(x, path, -errno, "removing the existing file");
}

/* pwrite() all of @len bytes at @off. */
static int write_full(int fd, const char *buf, size_t len, uint64_t off)
{
	while (len) {
		ssize_t n = pwrite(fd, buf, len, (off_t)off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		buf += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

static bool all_zero(const char *p, size_t len)
{
	return len == 0 || (p[0] == 0 && !memcmp(p, p + 1, len - 1));
}

/*
 * Write @len bytes at @off of a freshly created file, skipping blocks that
 * are all zeros: they read back as zeros anyway (the file is extended with
 * ftruncate() at the end), so images that store zeros still give sparse
 * files.
 */
static int write_sparse(int fd, const char *buf, size_t len, uint64_t off)
{
	const size_t blk = 4096;
	size_t pos = 0;

	while (pos < len) {
		size_t start, piece;

		/* skip zero blocks, then take the run of non-zero ones */
		while (pos < len) {
			piece = MIN_SZ(blk, len - pos);
			if (!all_zero(buf + pos, piece))
				break;
			pos += piece;
		}
		start = pos;
		while (pos < len) {
			piece = MIN_SZ(blk, len - pos);
			if (all_zero(buf + pos, piece))
				break;
			pos += piece;
		}
		if (pos > start) {
			int err = write_full(fd, buf + start, pos - start,
					     off + start);

			if (err)
				return err;
		}
	}
	return 0;
}

/* Copy the data ranges of @nid into @fd; holes stay holes. */
static int copy_data(struct extract *x, const char *path, kiln_nid_t nid,
		     int fd, uint64_t size)
{
	struct kiln_file *file;
	uint64_t off = 0;
	int err;

	err = kiln_file_open(x->img, nid, &file);
	if (err)
		return xerror(x, path, err, "opening the file in the image");
	while (off < size) {
		uint64_t start, end;

		err = kiln_file_next_data(file, off, &start, &end);
		if (err == -ENXIO) {
			err = 0;
			break;
		}
		if (err) {
			xerror(x, path, err, "mapping file data");
			goto out;
		}
		if (start < off || end <= start || end > size) {
			err = xerror(x, path, -KILN_ECORRUPT,
				     "data range outside the file");
			goto out;
		}
		for (off = start; off < end;) {
			size_t want = end - off < EXTRACT_CHUNK ?
				      (size_t)(end - off) : EXTRACT_CHUNK;
			ssize_t n = kiln_file_pread(file, x->buf, want, off);

			if (n <= 0) {
				err = xerror(x, path, n ? (int)n : -KILN_ECORRUPT,
					     "reading %zu bytes at offset %llu",
					     want, (unsigned long long)off);
				goto out;
			}
			err = write_sparse(fd, x->buf, (size_t)n, off);
			if (err) {
				xerror(x, path, err, "writing");
				goto out;
			}
			off += (uint64_t)n;
			x->stats->bytes += (uint64_t)n;
		}
	}
	if (ftruncate(fd, (off_t)size))
		err = xerror(x, path, -errno, "setting the file size");
out:
	kiln_file_close(file);
	return err;
}

static bool needs_root(const char *name)
{
	return !strncmp(name, "trusted.", 8) || !strncmp(name, "security.", 9);
}

/*
 * Restore the xattrs of @nid on the open @fd, or, when @fd < 0, on @name
 * in @dirfd without following it (through /proc/self/fd, as there is no
 * lsetxattrat()).
 */
static void restore_xattrs(struct extract *x, int dirfd, const char *name,
			   int fd, const char *path, kiln_nid_t nid)
{
	char proc[64 + NAME_MAX];
	ssize_t len;

	len = kiln_listxattr(x->img, nid, NULL, 0);
	if (len <= 0) {
		if (len < 0)
			xerror(x, path, (int)len, "listing xattrs");
		return;
	}
	if (KILN_GROW(x->xnames, x->xnames_cap, (size_t)len)) {
		xerror(x, path, -ENOMEM, "listing xattrs");
		return;
	}
	len = kiln_listxattr(x->img, nid, x->xnames, (size_t)len);
	if (len < 0) {
		xerror(x, path, (int)len, "listing xattrs");
		return;
	}
	if (fd < 0)
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d/%s", dirfd,
			 name);
	for (size_t off = 0; off < (size_t)len;) {
		const char *xname = x->xnames + off;
		size_t nlen = strnlen(xname, (size_t)len - off);
		ssize_t vlen;
		int rc;

		off += nlen + 1;
		if (!nlen || off > (size_t)len)
			continue;
		if (!x->root && needs_root(xname)) {
			xwarn(x, path, -EPERM,
			      "xattr %s not restored (needs root)", xname);
			continue;
		}
		vlen = kiln_getxattr(x->img, nid, xname, x->xvalue,
				     EXTRACT_XATTR_VALUE_MAX);
		if (vlen < 0) {
			xerror(x, path, (int)vlen, "reading xattr %s", xname);
			continue;
		}
		if (fd >= 0)
			rc = fsetxattr(fd, xname, x->xvalue, (size_t)vlen, 0);
		else
			rc = lsetxattr(proc, xname, x->xvalue, (size_t)vlen, 0);
		if (!rc)
			continue;
		if (errno == EOPNOTSUPP || (errno == EPERM && fd < 0))
			/* fs without xattrs; user.* on symlinks/devices */
			xwarn(x, path, -errno, "xattr %s not restored", xname);
		else
			xerror(x, path, -errno, "setting xattr %s", xname);
	}
}

/*
 * Owner, xattrs, mode, times, in that order: chown clears set-id bits and
 * capabilities, so the mode and security.capability come after it. Uses
 * @fd when >= 0, else @name in @dirfd without following it.
 */
static void set_meta(struct extract *x, int dirfd, const char *name, int fd,
		     const char *path, const struct kiln_stat *st)
{
	bool is_lnk = S_ISLNK(st->mode);
	int rc;

	if (x->chown) {
		rc = fd >= 0 ? fchown(fd, st->uid, st->gid) :
		     fchownat(dirfd, name, st->uid, st->gid,
			      AT_SYMLINK_NOFOLLOW);
		if (rc)
			xerror(x, path, -errno, "setting owner %u:%u",
			       st->uid, st->gid);
	}
	if (!(x->opts.flags & KILN_EXTRACT_NO_XATTRS))
		restore_xattrs(x, dirfd, name, fd, path, st->nid);
	if (!is_lnk) {
		mode_t mode = st->mode & 07777;

		/* by name: never through a symlink swapped in meanwhile */
		rc = fd >= 0 ? fchmod(fd, mode) :
		     fchmodat(dirfd, name, mode, AT_SYMLINK_NOFOLLOW);
		if (rc)
			xerror(x, path, -errno, "setting mode %04o",
			       (unsigned int)mode);
	}
	if (!(x->opts.flags & KILN_EXTRACT_NO_TIMES)) {
		struct timespec ts[2];

		ts[0].tv_sec = (time_t)st->mtime;
		ts[0].tv_nsec = st->mtime_nsec;
		ts[1] = ts[0];
		rc = fd >= 0 ? futimens(fd, ts) :
		     utimensat(dirfd, name, ts, AT_SYMLINK_NOFOLLOW);
		if (rc)
			xerror(x, path, -errno, "setting times");
	}
}

/*
 * Open made directory @idx again from the destination, one name at a time,
 * never following a symlink. Returns an O_PATH descriptor or -errno.
 */
static int open_made(struct extract *x, size_t idx)
{
	size_t depth = 0, *chain;
	int fd;

	for (size_t i = idx; x->made[i].parent != SIZE_MAX; i = x->made[i].parent)
		depth++;
	chain = malloc((depth + 1) * sizeof(*chain));
	if (!chain)
		return -ENOMEM;
	for (size_t i = idx, k = depth; k > 0; i = x->made[i].parent)
		chain[--k] = i;
	fd = openat(x->destfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		fd = -errno;
	for (size_t k = 0; k < depth && fd >= 0; k++) {
		int nfd = openat(fd, x->made[chain[k]].name,
				 O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

		if (nfd < 0)
			nfd = -errno;
		close(fd);
		fd = nfd;
	}
	free(chain);
	return fd;
}

/* Make @name in @dirfd another name of the file first extracted as @l. */
static void make_link(struct extract *x, int dirfd, const char *name,
		      const char *path, const struct xlink *l)
{
	int sfd, rc;

	sfd = open_made(x, l->dir);
	if (sfd < 0) {
		xerror(x, path, sfd, "hardlinking to the first name (%s)",
		       l->name);
		return;
	}
	rc = linkat(sfd, l->name, dirfd, name, 0);
	if (rc && errno == EEXIST) {
		if (replace(x, dirfd, name, path))
			goto out;
		rc = linkat(sfd, l->name, dirfd, name, 0);
	}
	if (rc)
		xerror(x, path, -errno, "hardlinking to the first name (%s)",
		       l->name);
	else
		x->stats->hardlinks++;
out:
	close(sfd);
}

static void remember_link(struct extract *x, kiln_nid_t nid, size_t dir,
			  const char *name, const char *path)
{
	uint64_t *val;
	char *copy;

	if (KILN_GROW(x->link_names, x->cap_links, x->nr_links + 1))
		goto nomem;
	copy = strdup(name);
	if (!copy)
		goto nomem;
	if (kiln_u64map_insert(&x->links, nid, &val) < 0) {
		free(copy);
		goto nomem;
	}
	*val = x->nr_links;
	x->link_names[x->nr_links++] = (struct xlink){ .dir = dir,
						       .name = copy };
	return;
nomem:
	xerror(x, path, -ENOMEM, "remembering a hardlink");
}

static int create_reg(struct extract *x, int dirfd, const char *name,
		      const char *path, const struct kiln_stat *st)
{
	const int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
	int fd, err;

	fd = openat(dirfd, name, flags, 0600);
	if (fd < 0 && errno == EEXIST) {
		err = replace(x, dirfd, name, path);
		if (err)
			return err;
		fd = openat(dirfd, name, flags, 0600);
	}
	if (fd < 0)
		return xerror(x, path, -errno, "creating the file");
	err = copy_data(x, path, st->nid, fd, st->size);
	if (!err)
		set_meta(x, dirfd, name, fd, path, st);
	if (close(fd) && !err)
		err = xerror(x, path, -errno, "closing the file");
	/* a file whose data did not all arrive is not left behind */
	if (err)
		unlinkat(dirfd, name, 0);
	return err;
}

static int create_symlink(struct extract *x, int dirfd, const char *name,
			  const char *path, const struct kiln_stat *st)
{
	char target[PATH_MAX];
	ssize_t n;

	n = kiln_readlink(x->img, st->nid, target, sizeof(target));
	if (n < 0)
		return xerror(x, path, (int)n, "reading the symlink");
	if (n == 0 || memchr(target, '\0', (size_t)n))
		return xerror(x, path, -KILN_ECORRUPT,
			      "empty symlink target or NUL inside");
	if (!symlinkat(target, dirfd, name))
		return 0;
	if (errno == EEXIST) {
		int err = replace(x, dirfd, name, path);

		if (err)
			return err;
		if (!symlinkat(target, dirfd, name))
			return 0;
	}
	return xerror(x, path, -errno, "creating the symlink");
}

static int create_special(struct extract *x, int dirfd, const char *name,
			  const char *path, const struct kiln_stat *st)
{
	mode_t mode = (st->mode & S_IFMT) | 0600;
	dev_t dev = 0;

	if (S_ISCHR(st->mode) || S_ISBLK(st->mode))
		dev = makedev(st->rdev_major, st->rdev_minor);
	if (!mknodat(dirfd, name, mode, dev))
		return 0;
	if (errno == EEXIST) {
		int err = replace(x, dirfd, name, path);

		if (err)
			return err;
		if (!mknodat(dirfd, name, mode, dev))
			return 0;
	}
	if (errno == EPERM && (S_ISCHR(st->mode) || S_ISBLK(st->mode)))
		return xerror(x, path, -EPERM,
			      "creating the device node (needs root)");
	return xerror(x, path, -errno, "creating the special file");
}

/*
 * Create a non-directory @name in @dirfd from inode @st (or link it to
 * the first name of the same inode). Errors are reported, not returned.
 */
static void extract_leaf(struct extract *x, int dirfd, size_t dir,
			 const char *name, const char *path,
			 const struct kiln_stat *st)
{
	int err;

	if (st->nlink > 1) {
		uint64_t *idx = kiln_u64map_get(&x->links, st->nid);

		if (idx) {
			make_link(x, dirfd, name, path, &x->link_names[*idx]);
			return;
		}
	}
	switch (st->mode & S_IFMT) {
	case S_IFREG:
		err = create_reg(x, dirfd, name, path, st);
		if (!err)
			x->stats->regular_files++;
		break;
	case S_IFLNK:
		err = create_symlink(x, dirfd, name, path, st);
		if (!err) {
			x->stats->symlinks++;
			set_meta(x, dirfd, name, -1, path, st);
		}
		break;
	case S_IFCHR:
	case S_IFBLK:
	case S_IFIFO:
	case S_IFSOCK:
		err = create_special(x, dirfd, name, path, st);
		if (!err) {
			x->stats->special_files++;
			set_meta(x, dirfd, name, -1, path, st);
		}
		break;
	default:
		err = xerror(x, path, -KILN_ECORRUPT, "bogus file type 0%o",
			     st->mode);
		break;
	}
	if (!err && st->nlink > 1)
		remember_link(x, st->nid, dir, name, path);
}

/* Make (or reuse) directory @name in @dirfd and open it without following. */
static int open_subdir(struct extract *x, int dirfd, const char *name,
		       const char *path)
{
	const int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
	int fd;

	if (mkdirat(dirfd, name, 0700) && errno != EEXIST)
		return xerror(x, path, -errno, "creating the directory");
	fd = openat(dirfd, name, flags);
	if (fd < 0 && (errno == ENOTDIR || errno == ELOOP)) {
		int err = replace(x, dirfd, name, path);

		if (err)
			return err;
		if (mkdirat(dirfd, name, 0700))
			return xerror(x, path, -errno,
				      "creating the directory");
		fd = openat(dirfd, name, flags);
	}
	if (fd < 0)
		return xerror(x, path, -errno, "opening the directory");
	return fd;
}

#define NO_PARENT UINT64_MAX

/*
 * The "." and ".." entries of the directory on top: one each, naming the
 * directory itself and @parent (NO_PARENT: not known, the walk started
 * below the root). Any other entry with these names is an entry renamed
 * in a damaged image, whose subtree the walk would otherwise lose without
 * a word.
 */
static void check_dots(struct extract *x, const struct xframe *fr,
		       kiln_nid_t parent)
{
	bool have_dot = false, have_dotdot = false;

	for (size_t i = 0; i < fr->dl.nr; i++) {
		const char *name = kiln_dirlist_name(&fr->dl, i);
		kiln_nid_t nid = fr->dl.ents[i].nid;
		bool dot = !strcmp(name, ".");

		if (!dot && strcmp(name, ".."))
			continue;
		if (dot && !have_dot && nid == fr->nid) {
			have_dot = true;
			continue;
		}
		if (!dot && !have_dotdot &&
		    (parent == NO_PARENT || nid == parent)) {
			have_dotdot = true;
			continue;
		}
		xerror(x, x->path, -KILN_ECORRUPT,
		       "an entry named \"%s\" leads to nid %llu, not to %s",
		       name, (unsigned long long)nid,
		       dot ? "the directory itself" : "its parent");
	}
}

/*
 * Push directory @st, open at @fd, whose path is x->path, below the
 * directory @parent (NO_PARENT when not known).
 */
static int push_dir(struct extract *x, int fd, size_t made,
		    const struct kiln_stat *st, kiln_nid_t parent,
		    unsigned int depth, bool apply_meta)
{
	struct xframe *fr;
	int err;

	err = KILN_GROW(x->stack, x->cap_frames, x->nr_frames + 1);
	if (err)
		return err;
	err = kiln_u64map_insert(&x->dirs, st->nid, NULL);
	if (err < 0)
		return err;
	fr = &x->stack[x->nr_frames++];
	memset(fr, 0, sizeof(*fr));
	fr->nid = st->nid;
	fr->fd = fd;
	fr->path_len = x->path_len;
	fr->made = made;
	fr->st = *st;
	fr->depth = depth;
	fr->apply_meta = apply_meta;
	kiln_dirlist_init(&fr->dl);
	err = kiln_dirlist_load(&fr->dl, x->img, st->nid);
	if (err)	/* extract what could be read */
		xerror(x, x->path, err, "reading the directory");
	check_dots(x, fr, parent);
	x->stats->directories++;
	return 0;
}

static void pop_dir(struct extract *x)
{
	struct xframe *fr = &x->stack[--x->nr_frames];

	path_leave(x, fr->path_len);
	if (fr->apply_meta && !x->stop)
		set_meta(x, -1, NULL, fr->fd, x->path, &fr->st);
	close(fr->fd);
	kiln_dirlist_release(&fr->dl);
}

/* Entry @i of the top directory: a leaf is made, a directory pushed. */
static void extract_entry(struct extract *x, size_t i)
{
	struct xframe *fr = &x->stack[x->nr_frames - 1];
	const struct kiln_dirlist_ent *e = &fr->dl.ents[i];
	const char *name = kiln_dirlist_name(&fr->dl, i);
	unsigned int depth = fr->depth + 1;
	size_t parent_made = fr->made;
	kiln_nid_t parent = fr->nid;
	int dirfd = fr->fd, err, fd;
	struct kiln_stat st;
	ssize_t made;

	err = path_enter(x, fr->path_len, name);
	if (err) {
		path_leave(x, fr->path_len);
		xerror(x, x->path, err, "listing the directory");
		return;
	}
	if (!safe_name(name, e->name_len)) {
		xerror(x, x->path, -KILN_ECORRUPT,
		       "refusing a name that is empty, \".\", \"..\" or "
		       "contains '/'");
		return;
	}
	err = kiln_stat_nid(x->img, e->nid, &st);
	if (err) {
		xerror(x, x->path, err, "reading the inode");
		return;
	}
	if (!S_ISDIR(st.mode)) {
		extract_leaf(x, dirfd, parent_made, name, x->path, &st);
		return;
	}
	if (kiln_u64map_get(&x->dirs, st.nid)) {
		xerror(x, x->path, -KILN_ECORRUPT,
		       "directory reached a second time (cycle or "
		       "hardlinked directory)");
		return;
	}
	if (depth > x->opts.max_depth) {
		xerror(x, x->path, -ELOOP, "directory deeper than %u levels",
		       x->opts.max_depth);
		return;
	}
	fd = open_subdir(x, dirfd, name, x->path);
	if (fd < 0)
		return;
	made = add_made(x, parent_made, name);
	err = made < 0 ? (int)made :
	      push_dir(x, fd, (size_t)made, &st, parent, depth, true);
	if (err) {
		close(fd);
		xerror(x, x->path, err, "extracting the directory");
	}
}

static void run(struct extract *x)
{
	while (x->nr_frames && !x->stop) {
		struct xframe *fr = &x->stack[x->nr_frames - 1];

		if (fr->next < fr->dl.nr) {
			size_t i = fr->next++;
			const char *name = kiln_dirlist_name(&fr->dl, i);

			if (strcmp(name, ".") && strcmp(name, ".."))
				extract_entry(x, i);
			continue;
		}
		pop_dir(x);
	}
	while (x->nr_frames)
		pop_dir(x);
}

/* x->path = "/a/b" for @src ("a/b/", "/a/b", NULL and "" give "/"). */
static int set_image_path(struct extract *x, const char *src)
{
	size_t len;

	if (!src)
		src = "";
	while (*src == '/')
		src++;
	len = strlen(src);
	while (len && src[len - 1] == '/')
		len--;
	x->path_cap = len + 64;
	x->path = malloc(x->path_cap);
	if (!x->path)
		return -ENOMEM;
	x->path[0] = '/';
	memcpy(x->path + 1, src, len);
	x->path[len + 1] = '\0';
	x->path_len = len + 1;
	return 0;
}

/* Open (creating it if needed) the destination; sets *@created. */
static int open_dest(struct extract *x, const char *dest, bool *created)
{
	*created = mkdir(dest, 0700) == 0;
	if (!*created && errno != EEXIST)
		return xerror(x, dest, -errno, "creating the destination");
	x->destfd = open(dest, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (x->destfd < 0)
		return xerror(x, dest, -errno, "opening the destination");
	return 0;
}

static void start(struct extract *x, const char *src_path, const char *dest)
{
	struct kiln_stat st;
	kiln_nid_t nid;
	bool created;
	ssize_t top;
	int err, fd;

	err = set_image_path(x, src_path);
	if (err) {
		xerror(x, dest, err, "extracting");
		return;
	}
	err = kiln_resolve(x->img, x->path, 0, &nid);
	if (!err)
		err = kiln_stat_nid(x->img, nid, &st);
	if (err) {
		xerror(x, x->path, err, "looking the path up in the image");
		return;
	}
	if (open_dest(x, dest, &created))
		return;
	top = add_made(x, SIZE_MAX, NULL);
	if (top < 0) {
		xerror(x, x->path, (int)top, "extracting");
		return;
	}
	if (!S_ISDIR(st.mode)) {
		const char *name = strrchr(x->path, '/') + 1;

		if (!safe_name(name, strlen(name)))
			xerror(x, x->path, -EINVAL,
			       "no file name to extract to");
		else
			extract_leaf(x, x->destfd, (size_t)top, name, x->path,
				     &st);
		return;
	}
	fd = dup(x->destfd);
	if (fd < 0) {
		xerror(x, x->path, -errno, "extracting");
		return;
	}
	err = push_dir(x, fd, (size_t)top, &st,
		       st.nid == kiln_image_root(x->img) ? st.nid : NO_PARENT,
		       0, created);
	if (err) {
		xerror(x, x->path, err, "extracting");
		close(fd);
		return;
	}
	run(x);
}

KILN_API int kiln_extract(struct kiln_image *img, const char *src_path,
			  const char *dest_dir,
			  const struct kiln_extract_opts *opts,
			  struct kiln_extract_stats *stats)
{
	struct kiln_extract_stats local_stats;
	struct extract x;

	memset(&x, 0, sizeof(x));
	x.img = img;
	x.destfd = -1;
	if (opts)
		memcpy(&x.opts, opts, opts->struct_size < sizeof(x.opts) ?
				      opts->struct_size : sizeof(x.opts));
	if (!x.opts.max_depth)
		x.opts.max_depth = EXTRACT_DEFAULT_MAX_DEPTH;
	x.stats = stats ? stats : &local_stats;
	memset(x.stats, 0, sizeof(*x.stats));
	x.root = geteuid() == 0;
	x.chown = !(x.opts.flags & KILN_EXTRACT_NO_SAME_OWNER) &&
		  (x.root || (x.opts.flags & KILN_EXTRACT_SAME_OWNER));
	kiln_u64map_init(&x.dirs);
	kiln_u64map_init(&x.links);
	x.buf = malloc(EXTRACT_CHUNK);
	x.xvalue = malloc(EXTRACT_XATTR_VALUE_MAX);
	if (!x.buf || !x.xvalue)
		xerror(&x, dest_dir, -ENOMEM, "extracting");
	else
		start(&x, src_path, dest_dir);

	free(x.stack);
	for (size_t i = 0; i < x.nr_links; i++)
		free(x.link_names[i].name);
	free(x.link_names);
	for (size_t i = 0; i < x.nr_made; i++)
		free(x.made[i].name);
	free(x.made);
	kiln_u64map_release(&x.dirs);
	kiln_u64map_release(&x.links);
	free(x.path);
	free(x.buf);
	free(x.xvalue);
	free(x.xnames);
	if (x.destfd >= 0)
		close(x.destfd);
	return x.first_err;
}
