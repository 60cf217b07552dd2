// SPDX-License-Identifier: MIT
/*
 * The tar scan's names: the (directory, name) table that finds an entry's
 * earlier names (later entries replace earlier ones), member paths
 * normalized and matched against the excludes, implicit parents.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "builder/internal.h"
#include "builder/tar-scan.h"
#include "format/erofs_fs.h"
#include "util/checked.h"
#include "util/grow.h"

static size_t slot_hash(const struct kiln_node *dir, const char *name,
			size_t len)
{
	return (size_t)XXH3_64bits_withSeed(name, len,
					    (uint64_t)(uintptr_t)dir);
}

struct kiln_dentry *kiln_tar_child_find(struct tar *t, struct kiln_node *dir,
					const char *name, size_t len)
{
	if (!t->cap)
		return NULL;
	for (size_t i = slot_hash(dir, name, len) & (t->cap - 1);;
	     i = (i + 1) & (t->cap - 1)) {
		struct name_slot *s = &t->slots[i];
		struct kiln_dentry *d;

		if (!s->dir)
			return NULL;
		d = &s->dir->children[s->idx];
		if (s->dir == dir && d->name_len == len &&
		    !memcmp(d->name, name, len))
			return d;
	}
}

static void slot_put(struct name_slot *slots, size_t cap,
		     const struct name_slot *s)
{
	const struct kiln_dentry *d = &s->dir->children[s->idx];
	size_t i = slot_hash(s->dir, d->name, d->name_len) & (cap - 1);

	while (slots[i].dir)
		i = (i + 1) & (cap - 1);
	slots[i] = *s;
}

static int slots_grow(struct tar *t)
{
	size_t cap = t->cap ? t->cap * 2 : 1024;
	struct name_slot *slots = calloc(cap, sizeof(*slots));

	if (!slots)
		return -ENOMEM;
	for (size_t i = 0; i < t->cap; i++)
		if (t->slots[i].dir)
			slot_put(slots, cap, &t->slots[i]);
	free(t->slots);
	t->slots = slots;
	t->cap = cap;
	return 0;
}

/* Append the name @name -> @n to @dir (the name must be new there). */
int kiln_tar_child_add(struct tar *t, struct kiln_node *dir, const char *name,
		       size_t len, struct kiln_node *n)
{
	size_t nr = dir->nr_children;
	struct name_slot s = { .dir = dir, .idx = nr };
	struct kiln_dentry *d;

	if ((t->used + 1) * 2 > t->cap && slots_grow(t))
		return -ENOMEM;
	/* the array doubles whenever its length reaches a power of two */
	if (!(nr & (nr - 1))) {
		struct kiln_dentry *v = realloc(dir->children,
						KILN_MAX(nr * 2, 4) * sizeof(*v));

		if (!v)
			return -ENOMEM;
		dir->children = v;
	}
	d = &dir->children[nr];
	d->name = strndup(name, len);
	if (!d->name)
		return -ENOMEM;
	d->name_len = (uint16_t)len;
	d->layer = (uint16_t)t->layer;
	d->node = n;
	dir->nr_children++;
	slot_put(t->slots, t->cap, &s);
	t->used++;
	return 0;
}

int kiln_tar_node_new(struct tar *t, struct kiln_node **np)
{
	struct kiln_node *n = calloc(1, sizeof(*n));
	int err;

	if (!n)
		return -ENOMEM;
	err = kiln_nodes_push(t->b, n);
	if (err) {
		free(n);
		return err;
	}
	*np = n;
	return 0;
}

/*
 * Normalize the entry name @raw into t->path: "./" and empty components
 * dropped, a leading '/' removed, ".." refused. *@depth: components.
 */
int kiln_tar_normalize(struct tar *t, const char *raw, size_t *depth)
{
	size_t len = strlen(raw), out = 0;
	const char *p = raw;

	*depth = 0;
	if (KILN_GROW(t->path, t->path_cap, len + 1))
		return -ENOMEM;
	if (*p == '/' && !t->warned_absolute) {
		kiln_log(&t->b->lg, KILN_LOG_WARN,
			 "%s: removing leading '/' from member names", t->src);
		t->warned_absolute = true;
	}
	while (*p) {
		const char *end = strchrnul(p, '/');
		size_t clen = (size_t)(end - p);

		if (clen == 2 && p[0] == '.' && p[1] == '.')
			return kiln_tar_fail(t, EPERM,
					     "member name contains '..'");
		if (clen > EROFS_NAME_LEN)
			return kiln_tar_fail(t, ENAMETOOLONG, "name component "
					     "longer than 255 bytes");
		if (clen && !(clen == 1 && *p == '.')) {
			if (out)
				t->path[out++] = '/';
			memcpy(t->path + out, p, clen);
			out += clen;
			if (++*depth > TAR_MAX_DEPTH)
				return kiln_tar_fail(t, ELOOP, "path too deep");
		}
		p = *end ? end + 1 : end;
	}
	t->path[out] = '\0';
	return 0;
}

/* Whether the path or one of its parents matches an exclude pattern. */
bool kiln_tar_excluded(const struct tar *t)
{
	const struct kiln_build_opts *o = &t->b->opts;
	char *p = t->path;
	bool hit = false;

	if (!o->nr_excludes || !*p)
		return false;
	for (char *end = p;; end++) {
		if (*end && *end != '/')
			continue;
		char saved = *end;
		const char *name = end;

		*end = '\0';
		while (name > p && name[-1] != '/')
			name--;
		hit = kiln_excluded(o, p, name);
		*end = saved;
		if (hit || !saved)
			return hit;
	}
}

/*
 * Name the new directory @n @name in @dir: a name a whiteout deleted
 * (its slot is kept) is given to it again.
 */
static int parent_add(struct tar *t, struct kiln_node *dir, const char *name,
		      size_t len, struct kiln_node *n)
{
	struct kiln_dentry *d = kiln_tar_child_find(t, dir, name, len);

	if (!d)
		return kiln_tar_child_add(t, dir, name, len, n);
	d->node = n;
	d->layer = (uint16_t)t->layer;
	return 0;
}

/*
 * Find the directory holding the last component of t->path (creating
 * implicit parents on the way); *@name and *@len: that component.
 */
int kiln_tar_walk_parents(struct tar *t, bool create, struct kiln_node **dirp,
			  const char **name, size_t *len)
{
	struct kiln_node *dir = t->b->root;
	char *p = t->path;

	for (;;) {
		char *slash = strchr(p, '/');
		struct kiln_dentry *d;
		struct kiln_node *n;
		int err;

		if (!slash) {
			*dirp = dir;
			*name = p;
			*len = strlen(p);
			return 0;
		}
		d = kiln_tar_child_find(t, dir, p, (size_t)(slash - p));
		if (d && !d->node)
			d = NULL;	/* deleted by a whiteout: made again */
		if (d && !S_ISDIR(d->node->mode))
			return kiln_tar_fail(t, ENOTDIR,
					     "parent '%.*s' is not a directory",
					     (int)(slash - t->path), t->path);
		if (!d && !create)
			return -ENOENT;
		if (!d) {
			err = kiln_tar_node_new(t, &n);
			if (!err)
				err = parent_add(t, dir, p,
						 (size_t)(slash - p), n);
			if (err)
				return err;
			/* mode 0755, root's, the build time (set at the end) */
			n->mode = S_IFDIR | 0755;
			n->flags = KILN_NODE_IMPLICIT;
		} else {
			n = d->node;
		}
		dir = n;
		p = slash + 1;
	}
}

void kiln_tar_names_relink(struct tar *t, const struct kiln_node *old,
			   struct kiln_node *n)
{
	for (size_t i = 0; i < t->cap; i++) {
		struct name_slot *s = &t->slots[i];

		if (s->dir && s->dir->children[s->idx].node == old)
			s->dir->children[s->idx].node = n;
	}
}

void kiln_tar_names_drop(struct tar *t)
{
	free(t->slots);
	t->slots = NULL;
	t->cap = t->used = 0;
}
