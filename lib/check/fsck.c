// SPDX-License-Identifier: MIT
/*
 * kiln_fsck(): walk every inode reachable from the root with an explicit
 * stack, cross-check what directories say against the inodes, and read
 * every byte and xattr through the public reader API.
 */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <kiln/fsck.h>

#include "reader/dirlist.h"
#include "util/checked.h"
#include "util/grow.h"
#include "util/u64map.h"

#define FSCK_DEFAULT_MAX_DEPTH	4096
#define FSCK_READ_CHUNK		(1u << 20)
#define FSCK_SYMLINK_MAX	4095
#define FSCK_XATTR_VALUE_MAX	65536
#define FSCK_PATH_MAX		4096
#define FSCK_INCOMPAT_METABOX	0x100u	/* metadata in the metabox */

/* What the walk remembers about each inode it met. */
struct fsck_node {
	uint32_t mode;		/* 0: the inode could not be read */
	uint32_t nlink;		/* as stored */
	uint32_t refs;		/* names found for a non-directory */
	char *path;		/* first name, kept when nlink != 1 */
};

/* A directory waiting to be checked. */
struct fsck_frame {
	kiln_nid_t nid;
	kiln_nid_t parent;
	char *path;
	unsigned int depth;
};

struct fsck {
	struct kiln_image *img;
	struct kiln_fsck_opts opts;
	struct kiln_fsck_report *rep;
	struct kiln_u64map map;		/* nid -> index into nodes */
	struct fsck_node *nodes;
	size_t nr_nodes, cap_nodes;
	struct fsck_frame *stack;
	size_t nr_frames, cap_frames;
	struct kiln_dirlist dl;
	char *buf;			/* FSCK_READ_CHUNK bytes of file data */
	char *xnames;			/* listxattr() output */
	size_t xnames_cap;
	bool stop;			/* callback asked to stop, or fatal */
	int fatal;			/* a negative errno that ends the walk */
};

static inline uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static void problem(struct fsck *f, const char *path, kiln_nid_t nid, int err,
		    const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void problem(struct fsck *f, const char *path, kiln_nid_t nid, int err,
		    const char *fmt, ...)
{
	struct kiln_fsck_problem p;
	char what[512];
	va_list ap;

	f->rep->problems++;
	if (!f->opts.problem || f->stop)
		return;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	p.path = path;
	p.nid = nid;
	p.err = err;
	p.what = what;
	if (f->opts.problem(f->opts.ctx, &p))
		f->stop = true;
}

/*
 * A reader call on @path failed with @err. Running out of memory or I/O
 * errors end the walk; everything else is a problem of the image.
 */
static void call_failed(struct fsck *f, const char *path, kiln_nid_t nid,
			int err, const char *what)
{
	if (err == -ENOMEM || err == -EIO) {
		if (!f->fatal)
			f->fatal = err;
		f->stop = true;
		return;
	}
	problem(f, path, nid, err, "%s", what);
}

static const char *type_name(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG:	return "regular file";
	case S_IFDIR:	return "directory";
	case S_IFLNK:	return "symlink";
	case S_IFCHR:	return "character device";
	case S_IFBLK:	return "block device";
	case S_IFIFO:	return "fifo";
	case S_IFSOCK:	return "socket";
	default:	return "inode of unknown type";
	}
}

/*
 * "@dir/@name". Paths only name objects in messages, so past
 * FSCK_PATH_MAX bytes the front is cut to "..." to keep memory bounded
 * however deep a hostile image nests.
 */
static char *join_path(const char *dir, const char *name)
{
	size_t dlen = strlen(dir), nlen = strlen(name);
	const char *cut = "";
	bool slash;
	char *p;

	if (dlen + nlen + 2 > FSCK_PATH_MAX) {
		dir += dlen - FSCK_PATH_MAX / 2;
		dlen = FSCK_PATH_MAX / 2;
		cut = "...";
	}
	slash = dlen == 0 || dir[dlen - 1] != '/';
	p = malloc(strlen(cut) + dlen + slash + nlen + 1);
	if (!p)
		return NULL;
	sprintf(p, "%s%.*s%s%s", cut, (int)dlen, dir, slash ? "/" : "", name);
	return p;
}

/*
 * Find or add the node of @nid; a new one gets its inode read. Returns the
 * node index or a negative errno (-ENOMEM only).
 */
static ssize_t get_node(struct fsck *f, kiln_nid_t nid, const char *path,
			bool *is_new)
{
	struct kiln_stat st;
	struct fsck_node *n;
	uint64_t *val;
	int err;

	err = KILN_GROW(f->nodes, f->cap_nodes, f->nr_nodes + 1);
	if (err)
		return err;
	err = kiln_u64map_insert(&f->map, nid, &val);
	if (err < 0)
		return err;
	*is_new = err;
	if (!*is_new)
		return (ssize_t)*val;
	*val = f->nr_nodes;
	n = &f->nodes[f->nr_nodes++];
	memset(n, 0, sizeof(*n));
	err = kiln_stat_nid(f->img, nid, &st);
	if (err) {
		call_failed(f, path, nid, err, "reading the inode");
		return (ssize_t)*val;
	}
	if (!(st.mode & S_IFMT)) {
		problem(f, path, nid, 0, "inode has no file type");
		return (ssize_t)*val;
	}
	n->mode = st.mode;
	n->nlink = st.nlink;
	return (ssize_t)*val;
}

static int push_frame(struct fsck *f, kiln_nid_t nid, kiln_nid_t parent,
		      char *path, unsigned int depth)
{
	int err = KILN_GROW(f->stack, f->cap_frames, f->nr_frames + 1);

	if (err)
		return err;
	f->stack[f->nr_frames++] = (struct fsck_frame){
		.nid = nid, .parent = parent, .path = path, .depth = depth,
	};
	return 0;
}

/* List every xattr of @nid and read every value. */
static void check_xattrs(struct fsck *f, const char *path, kiln_nid_t nid)
{
	static const size_t value_cap = FSCK_XATTR_VALUE_MAX;
	ssize_t len, got;
	char *value;

	if (f->opts.flags & KILN_FSCK_NO_XATTRS)
		return;
	len = kiln_listxattr(f->img, nid, NULL, 0);
	if (len < 0) {
		call_failed(f, path, nid, (int)len, "listing xattrs");
		return;
	}
	if (len == 0)
		return;
	if (KILN_GROW(f->xnames, f->xnames_cap, (size_t)len)) {
		call_failed(f, path, nid, -ENOMEM, "");
		return;
	}
	got = kiln_listxattr(f->img, nid, f->xnames, (size_t)len);
	if (got < 0) {
		call_failed(f, path, nid, (int)got, "listing xattrs");
		return;
	}
	if (got != len || f->xnames[len - 1] != '\0') {
		problem(f, path, nid, 0,
			"xattr list of %zd bytes, %zd announced", got, len);
		return;
	}
	value = malloc(value_cap);
	if (!value) {
		call_failed(f, path, nid, -ENOMEM, "");
		return;
	}
	for (size_t off = 0; off < (size_t)len && !f->stop;) {
		const char *name = f->xnames + off;
		size_t nlen = strlen(name);
		ssize_t vlen, vgot;

		off += nlen + 1;
		if (!nlen) {
			problem(f, path, nid, 0, "empty xattr name");
			continue;
		}
		vlen = kiln_getxattr(f->img, nid, name, NULL, 0);
		vgot = vlen < 0 ? vlen :
		       kiln_getxattr(f->img, nid, name, value, value_cap);
		if (vgot < 0) {
			char what[320];

			snprintf(what, sizeof(what), "reading xattr %.256s",
				 name);
			call_failed(f, path, nid, (int)vgot, what);
			continue;
		}
		if (vgot != vlen)
			problem(f, path, nid, 0,
				"xattr %.256s: %zd bytes read, %zd announced",
				name, vgot, vlen);
		f->rep->xattrs++;
	}
	free(value);
}

/* Read every data range of regular file @nid (holes are skipped). */
static void read_file(struct fsck *f, const char *path, kiln_nid_t nid,
		      uint64_t size)
{
	struct kiln_file *file;
	uint64_t off = 0;
	int err;

	err = kiln_file_open(f->img, nid, &file);
	if (err) {
		call_failed(f, path, nid, err, "opening the file");
		return;
	}
	if (kiln_file_size(file) != size)
		problem(f, path, nid, 0, "file size %llu, inode says %llu",
			(unsigned long long)kiln_file_size(file),
			(unsigned long long)size);
	while (off < size && !f->stop) {
		uint64_t start, end;

		err = kiln_file_next_data(file, off, &start, &end);
		if (err == -ENXIO)
			break;
		if (err) {
			call_failed(f, path, nid, err,
				    "mapping data (next data range)");
			break;
		}
		if (start < off || end <= start || end > size) {
			problem(f, path, nid, 0,
				"data range [%llu, %llu) after offset %llu is "
				"outside the file of %llu bytes",
				(unsigned long long)start,
				(unsigned long long)end,
				(unsigned long long)off,
				(unsigned long long)size);
			break;
		}
		for (off = start; off < end && !f->stop;) {
			size_t want = (size_t)min_u64(end - off,
							   FSCK_READ_CHUNK);
			ssize_t n = kiln_file_pread(file, f->buf, want, off);

			if (n < 0) {
				char what[96];

				snprintf(what, sizeof(what),
					 "reading %zu bytes at offset %llu",
					 want, (unsigned long long)off);
				call_failed(f, path, nid, (int)n, what);
				goto out;
			}
			f->rep->bytes_read += (uint64_t)n;
			if ((size_t)n != want) {
				problem(f, path, nid, 0,
					"short read: %zd of %zu bytes at "
					"offset %llu", n, want,
					(unsigned long long)off);
				goto out;
			}
			off += want;
		}
	}
out:
	kiln_file_close(file);
}

static void read_symlink(struct fsck *f, const char *path, kiln_nid_t nid,
			 uint64_t size)
{
	char target[FSCK_SYMLINK_MAX + 2];
	ssize_t n;

	n = kiln_readlink(f->img, nid, target, sizeof(target));
	if (n == -ERANGE) {
		problem(f, path, nid, 0, "symlink target longer than %u bytes",
			FSCK_SYMLINK_MAX);
		return;
	}
	if (n < 0) {
		call_failed(f, path, nid, (int)n, "reading the symlink");
		return;
	}
	f->rep->bytes_read += (uint64_t)n;
	if ((uint64_t)n != size)
		problem(f, path, nid, 0,
			"symlink target of %zd bytes, inode size %llu", n,
			(unsigned long long)size);
	else if (n == 0)
		problem(f, path, nid, 0, "empty symlink target");
	else if (n > FSCK_SYMLINK_MAX)
		problem(f, path, nid, 0, "symlink target longer than %u bytes",
			FSCK_SYMLINK_MAX);
	else if (memchr(target, '\0', (size_t)n))
		problem(f, path, nid, 0, "NUL byte in symlink target");
}

/* First visit of a non-directory: count it, read its data and xattrs. */
static void check_leaf(struct fsck *f, const char *path, kiln_nid_t nid)
{
	struct kiln_fsck_report *rep = f->rep;
	struct kiln_stat st;
	int err;

	err = kiln_stat_nid(f->img, nid, &st);
	if (err) {
		call_failed(f, path, nid, err, "reading the inode");
		return;
	}
	switch (st.mode & S_IFMT) {
	case S_IFREG:
		rep->regular_files++;
		rep->data_bytes += st.size;
		/* EROFS_INODE_COMPRESSED_FULL (1) and _COMPACT (3) */
		if (st.datalayout == 1 || st.datalayout == 3)
			rep->compressed_files++;
		if (!(f->opts.flags & KILN_FSCK_METADATA_ONLY))
			read_file(f, path, nid, st.size);
		break;
	case S_IFLNK:
		rep->symlinks++;
		if (!(f->opts.flags & KILN_FSCK_METADATA_ONLY))
			read_symlink(f, path, nid, st.size);
		break;
	case S_IFCHR:	rep->char_devices++; break;
	case S_IFBLK:	rep->block_devices++; break;
	case S_IFIFO:	rep->fifos++; break;
	case S_IFSOCK:	rep->sockets++; break;
	default:
		problem(f, path, nid, 0, "bogus file type in mode 0%o",
			st.mode);
		return;
	}
	check_xattrs(f, path, nid);
}

static bool is_dot(const char *name, size_t len)
{
	return len == 1 && name[0] == '.';
}

static bool is_dotdot(const char *name, size_t len)
{
	return len == 2 && name[0] == '.' && name[1] == '.';
}

/* Byte-wise order of on-disk names; a prefix sorts first. */
static int name_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
	int c = memcmp(a, b, min_u64(alen, blen));

	if (c)
		return c;
	return alen < blen ? -1 : alen > blen;
}

/*
 * One named entry of directory @fr: the lookup must agree, the dirent type
 * must match the inode, a directory is pushed (once), a non-directory has
 * its references counted and is read on first sight.
 */
static void check_entry(struct fsck *f, const struct fsck_frame *fr,
			size_t i, unsigned int *subdirs)
{
	const struct kiln_dirlist_ent *e = &f->dl.ents[i];
	const char *name = kiln_dirlist_name(&f->dl, i);
	struct fsck_node *n;
	kiln_nid_t found;
	bool is_new;
	ssize_t idx;
	char *path;
	int err;

	path = join_path(fr->path, name);
	if (!path) {
		call_failed(f, fr->path, fr->nid, -ENOMEM, "");
		return;
	}
	if (memchr(name, '/', e->name_len) ||
	    strlen(name) != e->name_len || e->name_len == 0) {
		problem(f, path, e->nid, 0, "invalid name in directory");
		goto out;
	}
	err = kiln_lookup(f->img, fr->nid, name, e->name_len, &found);
	if (err)
		call_failed(f, path, e->nid, err, "looking the name up fails");
	else if (found != e->nid)
		problem(f, path, e->nid, 0,
			"looking the name up finds nid %llu",
			(unsigned long long)found);

	idx = get_node(f, e->nid, path, &is_new);
	if (idx < 0) {
		call_failed(f, path, e->nid, (int)idx, "");
		goto out;
	}
	n = &f->nodes[idx];
	if (!n->mode)
		goto out;	/* unreadable inode, already reported */
	if (e->type != DT_UNKNOWN && e->type != IFTODT(n->mode))
		problem(f, path, e->nid, 0, "dirent type %u, inode is a %s",
			e->type, type_name(n->mode));

	if (S_ISDIR(n->mode)) {
		(*subdirs)++;
		if (!is_new) {
			problem(f, path, e->nid, 0,
				"directory reached by a second name "
				"(hardlinked directory or cycle)");
		} else if (fr->depth + 1 > f->opts.max_depth) {
			problem(f, path, e->nid, 0,
				"directory deeper than %u levels",
				f->opts.max_depth);
		} else {
			err = push_frame(f, e->nid, fr->nid, path,
					 fr->depth + 1);
			if (!err)
				return;	/* the frame owns path now */
			call_failed(f, path, e->nid, err, "");
		}
		goto out;
	}

	n->refs++;
	if (!is_new) {
		f->rep->extra_links++;
		if (n->refs == (uint64_t)n->nlink + 1)
			problem(f, path, e->nid, 0,
				"nlink %u, but more names link the inode",
				n->nlink);
		goto out;
	}
	if (n->nlink == 0)
		problem(f, path, e->nid, 0, "nlink 0 on a linked inode");
	if (n->nlink != 1) {
		n->path = path;		/* for the final link count check */
		path = NULL;
	}
	check_leaf(f, n->path ? n->path : path, e->nid);
out:
	free(path);
}

/* Check directory @fr: its xattrs, ".", "..", name order, every entry. */
static void check_dir(struct fsck *f, const struct fsck_frame *fr)
{
	unsigned int subdirs = 0, dots = 0, dotdots = 0;
	size_t pushed;
	const char *prev = NULL;
	size_t prev_len = 0;
	uint32_t nlink;
	bool is_new;
	ssize_t idx;
	int err;

	f->rep->directories++;
	check_xattrs(f, fr->path, fr->nid);
	err = kiln_dirlist_load(&f->dl, f->img, fr->nid);
	if (err) {
		call_failed(f, fr->path, fr->nid, err,
			    "reading the directory");
		return;
	}
	for (size_t i = 0; i < f->dl.nr && !f->stop; i++) {
		const struct kiln_dirlist_ent *e = &f->dl.ents[i];
		const char *name = kiln_dirlist_name(&f->dl, i);

		if (is_dot(name, e->name_len)) {
			dots++;
			if (e->nid != fr->nid)
				problem(f, fr->path, fr->nid, 0,
					"\".\" points to nid %llu",
					(unsigned long long)e->nid);
			/* dot-omitted directories list "." last */
			if (i + 1 == f->dl.nr && i > 0)
				continue;
		} else if (is_dotdot(name, e->name_len)) {
			dotdots++;
			if (e->nid != fr->parent)
				problem(f, fr->path, fr->nid, 0,
					"\"..\" points to nid %llu, the "
					"parent is nid %llu",
					(unsigned long long)e->nid,
					(unsigned long long)fr->parent);
		}
		if (prev && name_cmp(prev, prev_len, name, e->name_len) >= 0)
			problem(f, fr->path, fr->nid, 0,
				"names out of order: \"%.255s\" after "
				"\"%.255s\"", name, prev);
		prev = name;
		prev_len = e->name_len;
	}
	if (dots != 1)
		problem(f, fr->path, fr->nid, 0, "%u \".\" entries", dots);
	if (dotdots != 1)
		problem(f, fr->path, fr->nid, 0, "%u \"..\" entries", dotdots);

	pushed = f->nr_frames;
	for (size_t i = 0; i < f->dl.nr && !f->stop; i++) {
		const struct kiln_dirlist_ent *e = &f->dl.ents[i];
		const char *name = kiln_dirlist_name(&f->dl, i);

		if (!is_dot(name, e->name_len) &&
		    !is_dotdot(name, e->name_len))
			check_entry(f, fr, i, &subdirs);
	}
	if (f->stop)
		return;
	/*
	 * The subdirectories come off the stack in name order: depth first
	 * in the order builders (kiln's, mkfs.erofs's) lay the data out, so
	 * the reads go forward through the image (readahead, remote too).
	 */
	for (size_t a = pushed, b = f->nr_frames; a + 1 < b; a++, b--) {
		struct fsck_frame t = f->stack[a];

		f->stack[a] = f->stack[b - 1];
		f->stack[b - 1] = t;
	}
	idx = get_node(f, fr->nid, fr->path, &is_new);
	if (idx < 0) {
		call_failed(f, fr->path, fr->nid, (int)idx, "");
		return;
	}
	nlink = f->nodes[idx].nlink;
	if ((uint64_t)nlink != 2 + (uint64_t)subdirs)
		problem(f, fr->path, fr->nid, 0,
			"directory nlink %u, expected %llu (2 + %u "
			"subdirectories)", nlink,
			2 + (unsigned long long)subdirs, subdirs);
}

/* After the walk: every multiply-linked inode has all its names. */
static void check_link_counts(struct fsck *f)
{
	struct kiln_u64map_ent *s;
	size_t pos = 0;

	while ((s = kiln_u64map_next(&f->map, &pos)) && !f->stop) {
		const struct fsck_node *n = &f->nodes[s->val];

		if (!n->mode || S_ISDIR(n->mode) || n->refs >= n->nlink)
			continue;
		problem(f, n->path ? n->path : "?", s->key, 0,
			"nlink %u, but only %u names link the inode",
			n->nlink, n->refs);
	}
}

/*
 * An internal inode outside the tree (@what: "packed" or "metabox"): a
 * regular file whose every byte reads. The metabox is read even with
 * KILN_FSCK_METADATA_ONLY: its data is metadata, and reading it decodes
 * the parts of it the walk did not need.
 */
static void check_internal(struct fsck *f, kiln_nid_t nid, const char *what,
			   bool always_read)
{
	char path[32], reading[48];
	struct kiln_stat st;
	int err;

	snprintf(path, sizeof(path), "<%s inode>", what);
	snprintf(reading, sizeof(reading), "reading the %s inode", what);
	err = kiln_stat_nid(f->img, nid, &st);
	if (err) {
		call_failed(f, path, nid, err, reading);
		return;
	}
	if (!S_ISREG(st.mode)) {
		problem(f, path, nid, 0, "%s inode is a %s", what,
			type_name(st.mode));
		return;
	}
	if (always_read || !(f->opts.flags & KILN_FSCK_METADATA_ONLY))
		read_file(f, path, nid, st.size);
}

static void walk(struct fsck *f)
{
	struct kiln_image_info info;
	bool is_new;
	ssize_t idx;
	char *root;
	int err;

	kiln_image_get_info(f->img, &info);
	/* a superblock claiming more blocks than there are: truncated image */
	if (info.blocks > info.image_size / info.block_size)
		problem(f, "/", info.root_nid, 0,
			"superblock says %llu blocks, the image holds %llu",
			(unsigned long long)info.blocks,
			(unsigned long long)(info.image_size / info.block_size));
	root = strdup("/");
	if (!root) {
		f->fatal = -ENOMEM;
		return;
	}
	idx = get_node(f, info.root_nid, root, &is_new);
	if (idx < 0) {
		free(root);
		f->fatal = (int)idx;
		return;
	}
	if (f->nodes[idx].mode && !S_ISDIR(f->nodes[idx].mode)) {
		problem(f, root, info.root_nid, 0, "root is a %s",
			type_name(f->nodes[idx].mode));
		free(root);
	} else if (!f->nodes[idx].mode) {
		free(root);
	} else {
		err = push_frame(f, info.root_nid, info.root_nid, root, 0);
		if (err) {
			free(root);
			f->fatal = err;
			return;
		}
	}
	while (f->nr_frames && !f->stop) {
		struct fsck_frame fr = f->stack[--f->nr_frames];

		check_dir(f, &fr);
		free(fr.path);
	}
	if (!f->stop)
		check_link_counts(f);
	if (info.packed_nid && !f->stop)
		check_internal(f, info.packed_nid, "packed", false);
	if ((info.feature_incompat & FSCK_INCOMPAT_METABOX) && !f->stop)
		check_internal(f, info.metabox_nid, "metabox", true);
}

static int on_bad_block(void *ctx, const struct kiln_verity_bad *b)
{
	struct fsck *f = ctx;
	unsigned long long blk = (unsigned long long)b->blk;

	if (b->level >= 0)
		problem(f, "<verity>", 0, 0, "hash block %llu (tree level %d) "
			"does not match the level above it", blk, b->level);
	else if (b->file_data)
		problem(f, "<data>", 0, 0, "block %llu fails dm-verity: the "
			"data of the file named for it above", blk);
	else if (f->opts.flags & KILN_FSCK_METADATA_ONLY)
		problem(f, "<block>", 0, 0, "block %llu fails dm-verity "
			"(--no-data: file data was not read)", blk);
	else
		problem(f, "<metadata>", 0, 0, "block %llu fails dm-verity: "
			"metadata or unused space, no file's data", blk);
	return f->stop;
}

/*
 * With dm-verity: after the walk (whose reads named the files on bad
 * blocks), every block of the tree and of the image not yet checked.
 */
static void check_verity(struct fsck *f)
{
	struct kiln_verity_info vi;
	int err;

	if (kiln_image_verity_info(f->img, &vi))
		return;
	f->rep->verity_blocks = vi.data_blocks + vi.hash_blocks;
	err = kiln_image_verity_check(f->img, on_bad_block, f,
				      &f->rep->verity_bad_blocks);
	if (err && err != -KILN_ECORRUPT && err != -ECANCELED && !f->fatal)
		f->fatal = err;
}

static double elapsed(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) +
	       (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

KILN_API int kiln_fsck(struct kiln_image *img,
		       const struct kiln_fsck_opts *opts,
		       struct kiln_fsck_report *report)
{
	struct kiln_fsck_report local_report;
	struct timespec t0;
	struct fsck f;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	memset(&f, 0, sizeof(f));
	f.img = img;
	if (opts)
		memcpy(&f.opts, opts, min_u64(opts->struct_size,
						   sizeof(f.opts)));
	if (!f.opts.max_depth)
		f.opts.max_depth = FSCK_DEFAULT_MAX_DEPTH;
	f.rep = report ? report : &local_report;
	memset(f.rep, 0, sizeof(*f.rep));
	kiln_u64map_init(&f.map);
	kiln_dirlist_init(&f.dl);
	f.buf = malloc(FSCK_READ_CHUNK);
	if (!f.buf)
		f.fatal = -ENOMEM;
	else
		walk(&f);
	if (!f.stop)
		check_verity(&f);

	while (f.nr_frames)
		free(f.stack[--f.nr_frames].path);
	free(f.stack);
	for (size_t i = 0; i < f.nr_nodes; i++)
		free(f.nodes[i].path);
	free(f.nodes);
	kiln_u64map_release(&f.map);
	kiln_dirlist_release(&f.dl);
	free(f.buf);
	free(f.xnames);
	f.rep->seconds = elapsed(&t0);
	if (f.fatal)
		return f.fatal;
	return f.rep->problems ? -KILN_ECORRUPT : 0;
}
