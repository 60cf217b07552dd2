// SPDX-License-Identifier: MIT
/*
 * Walks the source directory breadth first into the in-memory tree:
 * lstat, readlink, xattrs, hardlinks by (dev, ino), exclusions, and the
 * guards against loops and runaway depth.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "builder/internal.h"
#include "format/erofs_fs.h"
#include "util/checked.h"

#define KILN_SCAN_MAX_DEPTH 1024	/* deeper trees are refused */

/* (dev, ino) -> node, for files with more than one link */
struct link_map {
	struct kiln_node **slots;
	size_t cap, used;
};

struct scan {
	struct kiln_build *b;
	struct link_map links;
	dev_t image_dev;		/* the destination, if it exists */
	ino_t image_ino;
	bool image_exists;
	char *xnames;			/* llistxattr buffer */
	size_t xnames_cap;
	char *xvalue;			/* lgetxattr buffer */
};

/* "<path>: <what>: <strerror(err)>" (or without @what when empty). */
static int scan_error(struct scan *s, const char *path, int err,
		      const char *what)
{
	char shortp[512];

	kiln_log(&s->b->lg, KILN_LOG_ERROR, "%s: %s%s%s",
		 kiln_path_abbrev(path, shortp, sizeof(shortp)), what,
		 *what ? ": " : "", strerror(err));
	return -err;
}

/* "<path>: <reason>" for failures that are not a system call's. */
static int scan_fail(struct scan *s, const char *path, int err,
		     const char *reason)
{
	char shortp[512];

	kiln_log(&s->b->lg, KILN_LOG_ERROR, "%s: %s",
		 kiln_path_abbrev(path, shortp, sizeof(shortp)), reason);
	return -err;
}

const char *kiln_path_abbrev(const char *path, char *buf, size_t cap)
{
	size_t len = strlen(path), keep;

	if (len < cap)
		return path;
	/* keep both ends: the root of the tree and the failing name */
	keep = (cap - 4) / 2;
	snprintf(buf, cap, "%.*s...%s", (int)keep, path, path + len - keep);
	return buf;
}

const char *kiln_node_path(const struct kiln_build *b,
			   const struct kiln_node *n, char *buf, size_t len)
{
	const struct kiln_node *chain[KILN_SCAN_MAX_DEPTH + 2];
	size_t depth = 0, pos;

	for (; n && n->first && depth < KILN_ARRAY_SIZE(chain); n = n->parent)
		chain[depth++] = n;
	pos = (size_t)snprintf(buf, len, "%s", b->source);
	while (depth-- && pos < len) {
		const struct kiln_dentry *d = chain[depth]->first;

		pos += (size_t)snprintf(buf + pos, len - pos, "%s%.*s",
					pos && buf[pos - 1] == '/' ? "" : "/",
					(int)d->name_len, d->name);
	}
	return buf;
}

static size_t link_hash(dev_t dev, ino_t ino)
{
	uint64_t h = (uint64_t)ino * 0x9E3779B97F4A7C15ull ^ (uint64_t)dev;

	return (size_t)(h ^ (h >> 29));
}

static struct kiln_node *link_find(struct link_map *m, dev_t dev, ino_t ino)
{
	if (!m->cap)
		return NULL;
	for (size_t i = link_hash(dev, ino) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		struct kiln_node *n = m->slots[i];

		if (!n)
			return NULL;
		if (n->src_dev == dev && n->src_ino == ino)
			return n;
	}
}

static int link_add(struct link_map *m, struct kiln_node *n)
{
	if ((m->used + 1) * 2 > m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 64;
		struct kiln_node **slots = calloc(cap, sizeof(*slots));

		if (!slots)
			return -ENOMEM;
		for (size_t i = 0; i < m->cap; i++) {
			struct kiln_node *o = m->slots[i];
			size_t j;

			if (!o)
				continue;
			for (j = link_hash(o->src_dev, o->src_ino) & (cap - 1);
			     slots[j]; j = (j + 1) & (cap - 1))
				;
			slots[j] = o;
		}
		free(m->slots);
		m->slots = slots;
		m->cap = cap;
	}
	size_t i = link_hash(n->src_dev, n->src_ino) & (m->cap - 1);

	while (m->slots[i])
		i = (i + 1) & (m->cap - 1);
	m->slots[i] = n;
	m->used++;
	return 0;
}

int kiln_nodes_push(struct kiln_build *b, struct kiln_node *n)
{
	if (b->nr_nodes == b->nodes_cap) {
		size_t cap = b->nodes_cap ? b->nodes_cap * 2 : 256;
		struct kiln_node **v = realloc(b->nodes, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		b->nodes = v;
		b->nodes_cap = cap;
	}
	b->nodes[b->nr_nodes++] = n;
	return 0;
}

uint32_t kiln_inode_encode_rdev(dev_t rdev)
{
	uint32_t maj = major(rdev), min = minor(rdev);

	return (min & 0xFF) | (maj << 8) | ((min & ~0xFFu) << 12);
}

/* Read the xattrs of @path into @n (of its target with @follow: the root). */
static int scan_xattrs(struct scan *s, struct kiln_node *n, const char *path,
		       bool follow)
{
	ssize_t len;
	int err;

	for (;;) {
		len = follow ? listxattr(path, s->xnames, s->xnames_cap)
			     : llistxattr(path, s->xnames, s->xnames_cap);
		if (len >= 0)
			break;
		if (errno == ENOTSUP || errno == ENOSYS)
			return 0;
		if (errno != ERANGE)
			return scan_error(s, path, errno, "cannot list xattrs");
		len = follow ? listxattr(path, NULL, 0)
			     : llistxattr(path, NULL, 0);
		if (len < 0)
			return scan_error(s, path, errno, "cannot list xattrs");
		free(s->xnames);
		s->xnames_cap = (size_t)len + 256;
		s->xnames = malloc(s->xnames_cap);
		if (!s->xnames)
			return -ENOMEM;
	}
	for (char *name = s->xnames; name < s->xnames + len;
	     name += strlen(name) + 1) {
		const char *suffix;
		unsigned int index = kiln_xattr_prefix(name, &suffix);
		struct kiln_xattr_item *item, **v;
		ssize_t vlen;

		if (!index) {
			kiln_log(&s->b->lg, KILN_LOG_WARN,
				 "%s: xattr %s: namespace not supported by EROFS, skipped",
				 path, name);
			continue;
		}
		if (strlen(suffix) > EROFS_NAME_LEN)
			return scan_fail(s, path, ENAMETOOLONG,
					 "xattr name longer than 255 bytes after its prefix");
		vlen = follow ? getxattr(path, name, s->xvalue, 65536)
			      : lgetxattr(path, name, s->xvalue, 65536);
		if (vlen < 0) {
			if (errno == ENODATA)	/* removed meanwhile */
				continue;
			if (errno == ERANGE || errno == E2BIG)
				return scan_fail(s, path, E2BIG,
						 "xattr value larger than 65535 bytes");
			return scan_error(s, path, errno, name);
		}
		if (vlen > 65535)
			return scan_fail(s, path, E2BIG,
					 "xattr value larger than 65535 bytes");
		err = kiln_xattr_intern(&s->b->xt, index, suffix, strlen(suffix),
					s->xvalue, (size_t)vlen, &item);
		if (err)
			return err;
		if (n->nr_xattrs == UINT16_MAX)
			return scan_fail(s, path, E2BIG, "too many xattrs");
		v = realloc(n->xattrs, (n->nr_xattrs + 1u) * sizeof(*v));
		if (!v)
			return -ENOMEM;
		n->xattrs = v;
		v[n->nr_xattrs++] = item;
	}
	kiln_xattr_sort(n->xattrs, &n->nr_xattrs);
	return 0;
}

/* Fill @n from @st (and read the link target / xattrs). */
static int scan_node(struct scan *s, struct kiln_node *n, int dirfd,
		     const char *name, const char *path, const struct stat *st)
{
	const struct kiln_build_opts *o = &s->b->opts;
	const char *rel;
	int err;

	n->mode = st->st_mode;
	n->uid = st->st_uid;
	n->gid = st->st_gid;
	if (o->flags & KILN_BUILD_ALL_ROOT)
		n->uid = n->gid = 0;
	if (o->flags & KILN_BUILD_FORCE_UID)
		n->uid = o->force_uid;
	if (o->flags & KILN_BUILD_FORCE_GID)
		n->gid = o->force_gid;
	n->mtime = st->st_mtim.tv_sec;
	n->mtime_nsec = (uint32_t)st->st_mtim.tv_nsec;
	n->nlink = 1;
	n->src_dev = st->st_dev;
	n->src_ino = st->st_ino;
	if (n->mtime > s->b->newest_mtime)
		s->b->newest_mtime = n->mtime;

	switch (st->st_mode & S_IFMT) {
	case S_IFREG:
		n->size = (uint64_t)st->st_size;
		if ((uint64_t)st->st_blocks * 512 < n->size)
			n->flags |= KILN_NODE_SPARSE;
		s->b->stats.regular_files++;
		kiln_progress_add_total(&s->b->progress, 1, n->size);
		break;
	case S_IFDIR:
		n->nlink = 2;
		s->b->stats.directories++;
		break;
	case S_IFLNK: {
		char buf[EROFS_SYMLINK_MAX + 2];
		ssize_t len = readlinkat(dirfd, name, buf, sizeof(buf));

		if (len < 0)
			return scan_error(s, path, errno, "cannot read link");
		if (len > (ssize_t)EROFS_SYMLINK_MAX)
			return scan_fail(s, path, ENAMETOOLONG,
					 "symlink target longer than 4095 bytes");
		if (len == 0)
			return scan_fail(s, path, EINVAL, "empty symlink target");
		n->target = strndup(buf, (size_t)len);
		if (!n->target)
			return -ENOMEM;
		n->size = (uint64_t)len;
		break;
	}
	case S_IFCHR:
	case S_IFBLK:
		n->rdev = kiln_inode_encode_rdev(st->st_rdev);
		break;
	case S_IFIFO:
	case S_IFSOCK:
		break;
	default:
		return scan_fail(s, path, EOPNOTSUPP, "unsupported file type");
	}
	if (!(o->flags & KILN_BUILD_NO_XATTRS)) {
		err = scan_xattrs(s, n, path, !n->parent);
		if (err)
			return err;
	}
	/* @path is "<source>/<rel>": the label goes by the path below it */
	rel = path + KILN_MIN(strlen(s->b->source), strlen(path));
	rel += strspn(rel, "/");
	err = kiln_xattr_set_label(s->b, n, rel, path);
	if (err)
		return err;
	for (uint16_t i = 0; i < n->nr_xattrs; i++)
		n->xattrs[i]->refs++;
	s->b->stats.inodes++;
	return 0;
}

/*
 * "/usr/lib/lib?.a" is anchored: the whole path from the source root, '*'
 * and '?' never crossing a '/'. Any other pattern matches the path from
 * the root or the bare name, '*' crossing '/'.
 */
static bool excluded(const struct kiln_build_opts *o, const char *rel,
		     const char *name)
{
	for (size_t i = 0; i < o->nr_excludes; i++) {
		const char *pat = o->excludes[i];

		if (pat[0] == '/') {
			if (!fnmatch(pat + 1, rel, FNM_PATHNAME))
				return true;
		} else if (!fnmatch(pat, rel, 0) || !fnmatch(pat, name, 0)) {
			return true;
		}
	}
	return false;
}

/* Read the names of directory @fd (excluding "." and ".."), sorted. */
static int read_names(struct scan *s, struct kiln_node *dir, int fd,
		      const char *path, const char *rel)
{
	DIR *d = fdopendir(dup(fd));
	size_t cap = 0;
	int err = 0;

	if (!d)
		return scan_error(s, path, errno, "cannot read directory");
	for (;;) {
		struct dirent *de;
		size_t len;

		errno = 0;
		de = readdir(d);
		if (!de) {
			if (errno)
				err = scan_error(s, path, errno,
						 "cannot read directory");
			break;
		}
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		len = strlen(de->d_name);
		if (len > EROFS_NAME_LEN) {
			err = scan_fail(s, path, ENAMETOOLONG,
					"entry name longer than 255 bytes");
			break;
		}
		if (s->b->opts.nr_excludes) {
			char relname[KILN_PATH_BUF];

			snprintf(relname, sizeof(relname), "%s%s%s", rel,
				 *rel ? "/" : "", de->d_name);
			if (excluded(&s->b->opts, relname, de->d_name))
				continue;
		}
		if (dir->nr_children == cap) {
			struct kiln_dentry *v;

			cap = cap ? cap * 2 : 16;
			v = realloc(dir->children, cap * sizeof(*v));
			if (!v) {
				err = -ENOMEM;
				break;
			}
			dir->children = v;
		}
		struct kiln_dentry *c = &dir->children[dir->nr_children];

		c->name = strndup(de->d_name, len);
		c->name_len = (uint16_t)len;
		c->node = NULL;
		if (!c->name) {
			err = -ENOMEM;
			break;
		}
		dir->nr_children++;
	}
	closedir(d);
	if (!err && dir->nr_children)
		kiln_dir_sort(dir->children, dir->nr_children);
	return err;
}

static bool is_ancestor_dir(const struct kiln_node *dir, const struct stat *st)
{
	for (const struct kiln_node *a = dir; a; a = a->parent)
		if (a->src_dev == st->st_dev && a->src_ino == st->st_ino)
			return true;
	return false;
}

/* Scan one directory: its entries become nodes appended to b->nodes. */
static int scan_dir(struct scan *s, struct kiln_node *dir)
{
	char path[KILN_PATH_BUF], child[KILN_PATH_BUF];
	size_t srclen = strlen(s->b->source), kept = 0;
	const char *rel;
	int fd, err;

	kiln_node_path(s->b, dir, path, sizeof(path));
	rel = path + KILN_MIN(srclen, strlen(path));
	while (*rel == '/')
		rel++;
	/* the source itself may be a symlink to a directory; nothing below */
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC |
			(dir->parent ? O_NOFOLLOW : 0));
	if (fd < 0)
		return scan_error(s, path, errno, "cannot open directory");
	err = read_names(s, dir, fd, path, rel);
	for (size_t i = 0; !err && i < dir->nr_children; i++) {
		struct kiln_dentry *d = &dir->children[i];
		struct kiln_node *n;
		struct stat st;
		int len;

		len = snprintf(child, sizeof(child), "%s%s%.*s", path,
			       path[strlen(path) - 1] == '/' ? "" : "/",
			       (int)d->name_len, d->name);
		if (len >= (int)sizeof(child) - 1) {
			err = scan_fail(s, path, ENAMETOOLONG, "path too long");
			break;
		}
		if (fstatat(fd, d->name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			err = scan_error(s, child, errno, "cannot stat");
			break;
		}
		if (s->image_exists && st.st_dev == s->image_dev &&
		    st.st_ino == s->image_ino) {
			free(d->name);	/* never pack the image into itself */
			d->name = NULL;
			continue;
		}
		if (!S_ISDIR(st.st_mode) && st.st_nlink > 1 &&
		    (n = link_find(&s->links, st.st_dev, st.st_ino))) {
			n->nlink++;
			d->node = n;
			dir->children[kept++] = *d;
			continue;
		}
		if (S_ISDIR(st.st_mode)) {
			if (is_ancestor_dir(dir, &st)) {
				err = scan_fail(s, child, ELOOP,
						"directory loop (bind mount?)");
				break;
			}
			if (dir->depth + 1 > KILN_SCAN_MAX_DEPTH) {
				err = scan_fail(s, child, ELOOP,
						"directory tree too deep");
				break;
			}
			dir->nlink++;
		}
		n = calloc(1, sizeof(*n));
		if (!n) {
			err = -ENOMEM;
			break;
		}
		n->parent = dir;
		n->depth = dir->depth + 1;
		d->node = n;
		err = kiln_nodes_push(s->b, n);
		if (err) {
			free(n);
			break;
		}
		dir->children[kept++] = *d;
		n->first = &dir->children[kept - 1];
		err = scan_node(s, n, fd, d->name, child, &st);
		if (!err && !S_ISDIR(st.st_mode) && st.st_nlink > 1)
			err = link_add(&s->links, n);
	}
	if (err) {
		/* names not yet kept are freed here; kept ones by tree_free */
		for (size_t i = kept; i < dir->nr_children; i++)
			if (!dir->children[i].node)
				free(dir->children[i].name);
	}
	dir->nr_children = kept;
	close(fd);
	return err;
}

int kiln_scan_tree(struct kiln_build *b)
{
	struct scan s = { .b = b };
	struct kiln_node *root;
	struct stat st;
	int err;

	s.xvalue = malloc(65536);
	s.xnames_cap = 4096;
	s.xnames = malloc(s.xnames_cap);
	if (!s.xvalue || !s.xnames) {
		err = -ENOMEM;
		goto out;
	}
	if (stat(b->image, &st) == 0) {
		s.image_exists = true;
		s.image_dev = st.st_dev;
		s.image_ino = st.st_ino;
	}
	if (stat(b->source, &st) < 0) {
		err = scan_error(&s, b->source, errno, "");
		goto out;
	}
	if (!S_ISDIR(st.st_mode)) {
		err = scan_error(&s, b->source, ENOTDIR, "");
		goto out;
	}
	root = calloc(1, sizeof(*root));
	if (!root) {
		err = -ENOMEM;
		goto out;
	}
	b->root = root;
	err = kiln_nodes_push(b, root);
	if (err) {
		free(root);
		b->root = NULL;
		goto out;
	}
	err = scan_node(&s, root, AT_FDCWD, b->source, b->source, &st);
	/* breadth first: b->nodes grows while we walk it */
	for (size_t i = 0; !err && i < b->nr_nodes; i++)
		if (S_ISDIR(b->nodes[i]->mode))
			err = scan_dir(&s, b->nodes[i]);
out:
	free(s.links.slots);
	free(s.xnames);
	free(s.xvalue);
	return err;
}

void kiln_tree_free(struct kiln_build *b)
{
	for (size_t i = 0; i < b->nr_nodes; i++) {
		struct kiln_node *n = b->nodes[i];

		for (size_t j = 0; j < n->nr_children; j++)
			free(n->children[j].name);
		free(n->children);
		free(n->xattrs);
		free(n->target);
		free(n->chunks);
		free(n);
	}
	free(b->nodes);
	b->nodes = NULL;
	b->nr_nodes = 0;
	b->root = NULL;
}
