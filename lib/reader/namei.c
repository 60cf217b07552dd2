// SPDX-License-Identifier: MIT
/*
 * Name lookup (binary search over sorted directory blocks, like the kernel)
 * and path resolution from the image root with in-image symlinks.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "reader/internal.h"
#include "util/checked.h"

#define MAX_SYMLINKS	40

/* Unsigned byte order; a proper prefix sorts first. */
static int name_cmp(const char *a, size_t a_len, const uint8_t *b,
		    size_t b_len)
{
	int r = memcmp(a, b, KILN_MIN(a_len, b_len));

	if (r)
		return r;
	return a_len < b_len ? -1 : a_len > b_len;
}

static int entry_cmp(struct kiln_file *dir, const struct kiln_dirblk *b,
		     unsigned int i, const char *name, size_t len,
		     kiln_nid_t *nid, int *cmp)
{
	struct kiln_dirent_disk de;
	const uint8_t *ename;
	unsigned int elen;
	int err;

	err = kiln_dirblk_entry(dir, b, i, &de, &ename, &elen);
	if (err)
		return err;
	*cmp = name_cmp(name, len, ename, elen);
	*nid = de.nid;
	return 0;
}

static int dir_find(struct kiln_file *dir, const char *name, size_t len,
		    kiln_nid_t *found)
{
	kiln_nid_t nid_buf, *nid = &nid_buf;
	uint32_t bs = dir->img->sb.blksz;
	uint64_t nblocks = kiln_div_round_up(dir->inode.size, bs);
	uint8_t scratch[1u << EROFS_MAX_BLKSZBITS];
	struct kiln_dirblk b;
	uint64_t lo = 0, hi = nblocks, cand = UINT64_MAX;
	unsigned int elo, ehi;
	int cmp, err;

	/* 1. the last block whose first name is <= @name */
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;

		err = kiln_dirblk_read(dir, mid, scratch, &b);
		if (!err)
			err = entry_cmp(dir, &b, 0, name, len, nid, &cmp);
		if (err)
			return err;
		if (cmp == 0)
			goto hit;
		if (cmp > 0) {
			cand = mid;
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	if (cand == UINT64_MAX)
		return -ENOENT;

	/* 2. inside that block, entries 1..count-1 */
	err = kiln_dirblk_read(dir, cand, scratch, &b);
	if (err)
		return err;
	elo = 1;
	ehi = b.count;
	while (elo < ehi) {
		unsigned int mid = elo + (ehi - elo) / 2;

		err = entry_cmp(dir, &b, mid, name, len, nid, &cmp);
		if (err)
			return err;
		if (cmp == 0)
			goto hit;
		if (cmp > 0)
			elo = mid + 1;
		else
			ehi = mid;
	}
	return -ENOENT;
hit:
	*found = *nid;
	return 0;
}

KILN_API int kiln_lookup(struct kiln_image *img, kiln_nid_t dir_nid,
			 const char *name, size_t name_len, kiln_nid_t *nid)
{
	struct kiln_file dir;
	int err;

	if (name_len > EROFS_NAME_LEN)
		return -ENAMETOOLONG;
	if (name_len == 0 || memchr(name, '/', name_len) ||
	    memchr(name, '\0', name_len))
		return -ENOENT;
	err = kiln_dir_open(img, dir_nid, &dir);
	if (err)
		return err;
	err = dir_find(&dir, name, name_len, nid);
	if (err == -ENOENT && dir.inode.dot_omitted &&
	    name_len == 1 && name[0] == '.') {
		*nid = dir_nid;
		err = 0;
	}
	kiln_file_release(&dir);
	return err;
}

/* The remaining path, possibly rebuilt (owned) after a symlink. */
struct walk {
	struct kiln_image *img;
	const char *rest;
	char *owned;
	kiln_nid_t cur;
	unsigned int links;
};

/*
 * Continue the walk at symlink @link's target, then @after; @slash keeps a
 * separator (or a trailing slash that demands a directory).
 */
static int follow_link(struct walk *w, kiln_nid_t link, const char *after,
		       bool slash)
{
	char target[EROFS_SYMLINK_MAX + 1];
	size_t tlen, alen = strlen(after);
	ssize_t n;
	char *path;

	if (++w->links > MAX_SYMLINKS)
		return -ELOOP;
	n = kiln_readlink(w->img, link, target, sizeof(target));
	if (n < 0)
		return (int)n;
	tlen = (size_t)n;
	path = malloc(tlen + 1 + alen + 1);
	if (!path)
		return -ENOMEM;
	memcpy(path, target, tlen);
	if (slash)
		path[tlen++] = '/';
	memcpy(path + tlen, after, alen + 1);
	free(w->owned);
	w->owned = path;
	w->rest = path;
	if (target[0] == '/')
		w->cur = w->img->sb.root_nid;
	return 0;
}

/* One component: @comp of @len bytes; @last: nothing but slashes follows. */
static int walk_step(struct walk *w, const char *comp, size_t len, bool last,
		     bool want_dir, unsigned int flags)
{
	struct kiln_inode in;
	kiln_nid_t child;
	int err;

	if (len == 1 && comp[0] == '.')
		return 0;
	if (len == 2 && comp[0] == '.' && comp[1] == '.' &&
	    w->cur == w->img->sb.root_nid)
		return 0;
	err = kiln_lookup(w->img, w->cur, comp, len, &child);
	if (err)
		return err;
	err = kiln_inode_load(w->img, child, &in);
	if (err)
		return err;
	if (S_ISLNK(in.mode) &&
	    (!last || want_dir || (flags & KILN_RESOLVE_FOLLOW)))
		return follow_link(w, child, w->rest, !last || want_dir);
	if ((!last || want_dir) && !S_ISDIR(in.mode))
		return -ENOTDIR;
	w->cur = child;
	return 0;
}

KILN_API int kiln_resolve(struct kiln_image *img, const char *path,
			  unsigned int flags, kiln_nid_t *nid)
{
	struct walk w = { .img = img, .rest = path, .cur = img->sb.root_nid };
	int err = 0;

	for (;;) {
		const char *comp, *end;
		bool want_dir, last;
		size_t len;

		while (*w.rest == '/')
			w.rest++;
		if (!*w.rest)
			break;
		comp = w.rest;
		end = strchrnul(comp, '/');
		len = (size_t)(end - comp);
		want_dir = *end == '/';
		w.rest = end;
		while (*w.rest == '/')
			w.rest++;
		last = !*w.rest;
		err = walk_step(&w, comp, len, last, want_dir, flags);
		if (err)
			break;
	}
	free(w.owned);
	if (!err)
		*nid = w.cur;
	return err;
}
