// SPDX-License-Identifier: MIT
/*
 * Walks the source directory breadth first into the in-memory tree:
 * lstat, readlink, xattrs, hardlinks by (dev, ino), exclusions, and the
 * guards against loops and runaway depth.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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
#include "util/grow.h"
#include "util/u64map.h"

#define KILN_SCAN_MAX_DEPTH 1024	/* deeper trees are refused */

/*
 * (dev, ino) -> node, for files with more than one link: one map of inode
 * numbers per device, as a tree spans few devices.
 */
struct link_map {
	struct kiln_u64map devs;	/* dev -> index into by_dev */
	struct kiln_u64map *by_dev;	/* ino -> struct kiln_node * */
	size_t nr_devs, cap_devs;
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
	enum kiln_whiteouts whiteouts;	/* resolved: never AUTO */
};

/*
 * The node of a name read_names() took from ".wh.NAME" (an aufs whiteout,
 * with --whiteouts=overlay) until scan_dir() gives it one of its own.
 */
static struct kiln_node whiteout_mark;

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

/* The inode map of @dev; with @add, a new one if there is none (NULL: ENOMEM). */
static struct kiln_u64map *link_dev(struct link_map *m, dev_t dev, bool add)
{
	uint64_t *idx = kiln_u64map_get(&m->devs, (uint64_t)dev);

	if (idx)
		return &m->by_dev[*idx];
	if (!add || KILN_GROW(m->by_dev, m->cap_devs, m->nr_devs + 1) ||
	    kiln_u64map_insert(&m->devs, (uint64_t)dev, &idx) < 0)
		return NULL;
	*idx = m->nr_devs;
	kiln_u64map_init(&m->by_dev[m->nr_devs]);
	return &m->by_dev[m->nr_devs++];
}

static struct kiln_node *link_find(struct link_map *m, dev_t dev, ino_t ino)
{
	struct kiln_u64map *inos = link_dev(m, dev, false);
	uint64_t *val = inos ? kiln_u64map_get(inos, (uint64_t)ino) : NULL;

	return val ? (struct kiln_node *)(uintptr_t)*val : NULL;
}

static int link_add(struct link_map *m, struct kiln_node *n)
{
	struct kiln_u64map *inos = link_dev(m, n->src_dev, true);
	uint64_t *val;
	int err;

	if (!inos)
		return -ENOMEM;
	err = kiln_u64map_insert(inos, (uint64_t)n->src_ino, &val);
	if (err < 0)
		return err;
	*val = (uintptr_t)n;
	return 0;
}

static void link_release(struct link_map *m)
{
	for (size_t i = 0; i < m->nr_devs; i++)
		kiln_u64map_release(&m->by_dev[i]);
	free(m->by_dev);
	kiln_u64map_release(&m->devs);
}

int kiln_nodes_push(struct kiln_build *b, struct kiln_node *n)
{
	if (KILN_GROW(b->nodes, b->nodes_cap, b->nr_nodes + 1))
		return -ENOMEM;
	b->nodes[b->nr_nodes++] = n;
	return 0;
}

bool kiln_inode_encode_rdev(uint64_t major, uint64_t minor, uint32_t *rdev)
{
	if (major > KILN_RDEV_MAJOR_MAX || minor > KILN_RDEV_MINOR_MAX)
		return false;
	*rdev = (uint32_t)((minor & 0xFF) | (major << 8) |
			   ((minor & ~0xFFu) << 12));
	return true;
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
		struct kiln_xattr_item *item;
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
		err = kiln_node_add_xattr(s->b, n, item, NULL);
		if (err)
			return err;
	}
	kiln_xattr_sort(n->xattrs, &n->nr_xattrs);
	return 0;
}

/* Fill @n from @st (and read the link target / xattrs). */
static int scan_node(struct scan *s, struct kiln_node *n, int dirfd,
		     const char *name, const char *path, const char *label_path,
		     const struct stat *st)
{
	const struct kiln_build_opts *o = &s->b->opts;
	const char *rel;
	int err;

	n->mode = st->st_mode;
	err = kiln_owner_set(s->b, n, st->st_uid, st->st_gid, path);
	if (err)
		return err;
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
		if (!kiln_inode_encode_rdev(major(st->st_rdev),
					    minor(st->st_rdev), &n->rdev))
			return scan_fail(s, path, ERANGE, "device number "
					 "above the 4095 majors and 1048575 "
					 "minors EROFS stores");
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
		if (s->whiteouts == KILN_WHITEOUTS_STRIP)
			kiln_whiteout_strip_xattrs(n);
	}
	/*
	 * @label_path is "<source>/<rel>": the label goes by the path below
	 * it (for a whiteout made from ".wh.NAME", NAME's path)
	 */
	rel = label_path + KILN_MIN(strlen(s->b->source), strlen(label_path));
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
 * A directory holding both NAME and ".wh.NAME" keeps the file: overlayfs
 * cannot hold a whiteout beside a file of the same name, and the file of
 * this layer hides the lower ones' anyway. @dir's names are sorted.
 */
static void drop_shadowed_whiteouts(struct kiln_node *dir)
{
	size_t kept = 0;

	for (size_t i = 0; i < dir->nr_children; i++) {
		struct kiln_dentry *c = &dir->children[i];
		struct kiln_dentry *prev = kept ? &dir->children[kept - 1] : NULL;

		if (prev && !kiln_dir_namecmp(prev->name, prev->name_len,
					      c->name, c->name_len)) {
			/* equal names: one of them is the whiteout */
			if (prev->node == &whiteout_mark) {
				free(prev->name);
				*prev = *c;
			} else {
				free(c->name);
			}
			continue;
		}
		dir->children[kept++] = *c;
	}
	dir->nr_children = kept;
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
		enum kiln_whiteout_kind kind;
		const char *target;
		size_t target_len;
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
			if (kiln_excluded(&s->b->opts, relname, de->d_name))
				continue;
		}
		kind = KILN_WH_NONE;
		if (s->whiteouts != KILN_WHITEOUTS_KEEP)
			kind = kiln_whiteout_kind(de->d_name, len, &target,
						  &target_len);
		if (kind != KILN_WH_NONE && s->whiteouts == KILN_WHITEOUTS_STRIP)
			continue;
		if (kind == KILN_WH_BAD) {
			err = scan_fail(s, path, EINVAL, "a whiteout names no "
					"file (.wh. alone, or of . or ..)");
			break;
		}
		if (kind == KILN_WH_OPAQUE)
			dir->flags |= KILN_NODE_OPAQUE;
		if (kind == KILN_WH_OPAQUE || kind == KILN_WH_META)
			continue;
		if (KILN_GROW(dir->children, cap, dir->nr_children + 1)) {
			err = -ENOMEM;
			break;
		}
		struct kiln_dentry *c = &dir->children[dir->nr_children];

		if (kind == KILN_WH_FILE) {
			c->name = strndup(target, target_len);
			c->name_len = (uint16_t)target_len;
			c->node = &whiteout_mark;
		} else {
			c->name = strndup(de->d_name, len);
			c->name_len = (uint16_t)len;
			c->node = NULL;
		}
		if (!c->name) {
			err = -ENOMEM;
			break;
		}
		dir->nr_children++;
	}
	closedir(d);
	if (!err && dir->nr_children)
		kiln_dir_sort(dir->children, dir->nr_children);
	if (!err)
		drop_shadowed_whiteouts(dir);
	for (size_t i = 0; !err && i < dir->nr_children; i++)
		if (dir->children[i].node == &whiteout_mark)
			dir->flags |= KILN_NODE_WHITEOUTS;
	return err;
}

static bool is_ancestor_dir(const struct kiln_node *dir, const struct stat *st)
{
	for (const struct kiln_node *a = dir; a; a = a->parent)
		if (a->src_dev == st->st_dev && a->src_ino == st->st_ino)
			return true;
	return false;
}

/*
 * ".wh..wh..opq" was in @dir (KILN_NODE_OPAQUE), or whiteouts were made
 * there (KILN_NODE_WHITEOUTS): the overlayfs xattrs, counted again.
 */
static int dir_overlay_xattrs(struct scan *s, struct kiln_node *dir)
{
	int err = 0;

	for (uint16_t i = 0; i < dir->nr_xattrs; i++)
		dir->xattrs[i]->refs--;
	if (dir->flags & KILN_NODE_OPAQUE)
		err = kiln_whiteout_set_opaque(s->b, dir);
	if (!err && (dir->flags & KILN_NODE_WHITEOUTS))
		err = kiln_whiteout_set_origin(s->b, dir);
	for (uint16_t i = 0; i < dir->nr_xattrs; i++)
		dir->xattrs[i]->refs++;
	return err;
}

/* Scan one directory: its entries become nodes appended to b->nodes. */
static int scan_dir(struct scan *s, struct kiln_node *dir)
{
	char path[KILN_PATH_BUF], child[KILN_PATH_BUF], whpath[KILN_PATH_BUF];
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
	if (!err && (dir->flags & (KILN_NODE_OPAQUE | KILN_NODE_WHITEOUTS)))
		err = dir_overlay_xattrs(s, dir);
	for (size_t i = 0; !err && i < dir->nr_children; i++) {
		struct kiln_dentry *d = &dir->children[i];
		struct kiln_node *n;
		struct stat st;
		bool whiteout;
		int len;

		len = snprintf(child, sizeof(child), "%s%s%.*s", path,
			       path[strlen(path) - 1] == '/' ? "" : "/",
			       (int)d->name_len, d->name);
		if (len >= (int)sizeof(child) - 1) {
			err = scan_fail(s, path, ENAMETOOLONG, "path too long");
			break;
		}
		whiteout = d->node == &whiteout_mark;
		d->node = NULL;
		if (whiteout) {
			/* the whiteout's own metadata, on the node it names */
			len = snprintf(whpath, sizeof(whpath), "%s%s.wh.%.*s",
				       path, path[strlen(path) - 1] == '/' ?
				       "" : "/", (int)d->name_len, d->name);
			if (len >= (int)sizeof(whpath) - 1) {
				err = scan_fail(s, path, ENAMETOOLONG,
						"path too long");
				break;
			}
		}
		if (fstatat(fd, whiteout ? strrchr(whpath, '/') + 1 : d->name,
			    &st, AT_SYMLINK_NOFOLLOW) < 0) {
			err = scan_error(s, whiteout ? whpath : child, errno,
					 "cannot stat");
			break;
		}
		if (whiteout) {
			if (S_ISDIR(st.st_mode)) {
				err = scan_fail(s, whpath, EINVAL, "a whiteout "
						"is a directory");
				break;
			}
			st.st_mode = S_IFCHR | (st.st_mode & 07777);
			st.st_rdev = 0;
			st.st_size = 0;
			st.st_nlink = 1;
		}
		if (s->whiteouts == KILN_WHITEOUTS_STRIP &&
		    kiln_whiteout_is_overlay(st.st_mode, (uint32_t)st.st_rdev)) {
			free(d->name);
			d->name = NULL;
			continue;
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
		err = scan_node(s, n, fd, d->name, whiteout ? whpath : child,
				child, &st);
		if (!err && !S_ISDIR(st.st_mode) && st.st_nlink > 1)
			err = link_add(&s->links, n);
	}
	if (err) {
		/* names not yet kept are freed here; kept ones by tree_free */
		for (size_t i = kept; i < dir->nr_children; i++)
			if (!dir->children[i].node ||
			    dir->children[i].node == &whiteout_mark)
				free(dir->children[i].name);
	}
	dir->nr_children = kept;
	close(fd);
	return err;
}

int kiln_scan_tree(struct kiln_build *b)
{
	struct scan s = { .b = b, .whiteouts = kiln_whiteouts_mode(&b->opts) };
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
	err = scan_node(&s, root, AT_FDCWD, b->source, b->source, b->source,
			&st);
	/* breadth first: b->nodes grows while we walk it */
	for (size_t i = 0; !err && i < b->nr_nodes; i++)
		if (S_ISDIR(b->nodes[i]->mode))
			err = scan_dir(&s, b->nodes[i]);
out:
	link_release(&s.links);
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
