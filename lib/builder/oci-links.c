// SPDX-License-Identifier: MIT
/*
 * One OCI layer built alone may hardlink to files of the layers below:
 * such a file becomes a copy in the layer (what overlayfs shows, and what
 * it would copy up), its metadata and data from the highest layer below
 * that holds it. Directories the layer only implies (no entry of their
 * own) take their metadata from there too: overlayfs shows the top
 * layer's, which must not be made up.
 */
#include <archive_entry.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "builder/internal.h"
#include "builder/oci.h"
#include "builder/tar-scan.h"
#include "util/grow.h"
#include "util/u64map.h"

/* hardlinks of the layers below followed from one copy's path */
#define LINK_HOPS_MAX	16

enum copy_state {
	COPY_WANTED,		/* not seen in the layers read so far */
	COPY_FILE,		/* a regular member of this layer holds it */
	COPY_LINK,		/* a hardlink of this layer: see @follow */
	COPY_GONE,		/* this layer deletes it */
	COPY_OTHER,		/* not a regular file there */
	COPY_DONE,		/* found in a layer read before */
};

struct copy {
	struct kiln_node *n;		/* named by the layer's hardlinks */
	char *want;			/* the path looked for below */
	char *follow;			/* COPY_LINK: that hardlink's target */
	unsigned int hops;
	bool dir;			/* an implied directory: metadata only */
	enum copy_state state;
	size_t next;			/* same hash of want: index + 1, or 0 */
};

struct kiln_oci_links {
	struct copy *v;
	size_t nr, cap;
	struct kiln_u64map by_want;	/* XXH3 of want -> index + 1 */
	char *path;			/* scratch: a whiteout's target path */
	size_t path_cap;
};

int kiln_oci_links_new(struct kiln_oci_links **lp)
{
	*lp = calloc(1, sizeof(**lp));
	if (!*lp)
		return -ENOMEM;
	kiln_u64map_init(&(*lp)->by_want);
	return 0;
}

void kiln_oci_links_free(struct kiln_oci_links *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->nr; i++) {
		free(l->v[i].want);
		free(l->v[i].follow);
	}
	free(l->v);
	free(l->path);
	kiln_u64map_release(&l->by_want);
	free(l);
}

static uint64_t want_hash(const char *p)
{
	return XXH3_64bits(p, strlen(p));
}

/* The first copy wanting @path, or NULL; the others follow by ->next. */
static struct copy *find(struct kiln_oci_links *l, const char *path)
{
	uint64_t *head = kiln_u64map_get(&l->by_want, want_hash(path));

	for (size_t i = head ? (size_t)*head : 0; i; i = l->v[i - 1].next)
		if (!strcmp(l->v[i - 1].want, path))
			return &l->v[i - 1];
	return NULL;
}

static int index_one(struct kiln_oci_links *l, size_t i)
{
	uint64_t *head;
	int r = kiln_u64map_insert(&l->by_want, want_hash(l->v[i].want),
				   &head);

	if (r < 0)
		return r;
	l->v[i].next = (size_t)*head;
	*head = i + 1;
	return 0;
}

int kiln_oci_links_add(struct tar *t, void *ctx, struct kiln_node **np)
{
	struct kiln_oci_links *l = ctx;
	struct copy *c = find(l, t->path);
	int err;

	if (c) {
		*np = c->n;
		return 0;
	}
	if (KILN_GROW(l->v, l->cap, l->nr + 1))
		return -ENOMEM;
	c = &l->v[l->nr];
	memset(c, 0, sizeof(*c));
	c->want = strdup(t->path);
	if (!c->want)
		return -ENOMEM;
	err = kiln_tar_node_new(t, &c->n);
	if (err) {
		free(c->want);
		return err;
	}
	/* a placeholder until a layer below gives the member */
	c->n->mode = S_IFREG | 0644;
	l->nr++;
	err = index_one(l, l->nr - 1);
	if (err)
		return err;
	*np = c->n;
	return 0;
}

/* Below @dir (whose path is l->path[0, len)): its implied directories. */
static int add_dirs(struct kiln_oci_links *l, struct kiln_node *dir,
		    size_t len)
{
	for (size_t j = 0; j < dir->nr_children; j++) {
		struct kiln_dentry *d = &dir->children[j];
		size_t sub = len + !!len + d->name_len;
		struct copy *c;
		int err;

		if (!d->node || !S_ISDIR(d->node->mode))
			continue;
		if (KILN_GROW(l->path, l->path_cap, sub + 1))
			return -ENOMEM;
		if (len)
			l->path[len] = '/';
		memcpy(l->path + len + !!len, d->name, d->name_len);
		l->path[sub] = '\0';
		if (d->node->flags & KILN_NODE_IMPLICIT) {
			if (KILN_GROW(l->v, l->cap, l->nr + 1))
				return -ENOMEM;
			c = &l->v[l->nr];
			memset(c, 0, sizeof(*c));
			c->n = d->node;
			c->dir = true;
			c->want = strdup(l->path);
			if (!c->want)
				return -ENOMEM;
			l->nr++;
		}
		/* the tree's depth is bounded by TAR_MAX_DEPTH */
		err = add_dirs(l, d->node, sub);
		if (err)
			return err;
	}
	return 0;
}

int kiln_oci_links_add_dirs(struct kiln_oci_links *l, struct tar *t)
{
	return add_dirs(l, t->b->root, 0);
}

bool kiln_oci_links_pass(struct kiln_oci_links *l, int *err)
{
	bool left = false;

	*err = 0;
	kiln_u64map_release(&l->by_want);
	kiln_u64map_init(&l->by_want);
	for (size_t i = 0; i < l->nr && !*err; i++) {
		if (l->v[i].state == COPY_DONE)
			continue;
		left = true;
		*err = index_one(l, i);
	}
	return left && !*err;
}

/* Set @state on every copy wanting @path. */
static void mark(struct kiln_oci_links *l, const char *path,
		 enum copy_state state, struct copy **first)
{
	struct copy *c = find(l, path);

	*first = c;
	for (; c; c = c->next ? &l->v[c->next - 1] : NULL)
		if (!strcmp(c->want, path) && c->state != COPY_DONE)
			c->state = state;
}

/* ".wh.NAME": the path it deletes, into l->path; false if none. */
static bool whiteout_target(struct kiln_oci_links *l, const char *path)
{
	const char *base = strrchr(path, '/'), *target;
	size_t dir_len, target_len;

	base = base ? base + 1 : path;
	if (kiln_whiteout_kind(base, strlen(base), &target, &target_len) !=
	    KILN_WH_FILE)
		return false;
	dir_len = (size_t)(base - path);
	if (KILN_GROW(l->path, l->path_cap, dir_len + target_len + 1))
		return false;
	memcpy(l->path, path, dir_len);
	memcpy(l->path + dir_len, target, target_len);
	l->path[dir_len + target_len] = '\0';
	return true;
}

int kiln_oci_links_visit(struct tar *t, void *ctx, struct archive_entry *e)
{
	struct kiln_oci_links *l = ctx;
	const char *raw = archive_entry_pathname(e);
	unsigned int type = archive_entry_filetype(e);
	char *saved = NULL, *target = NULL;
	struct copy *c;
	size_t depth;
	int err;

	if (!raw)
		return 0;
	snprintf(t->label, sizeof(t->label), "%s: %s", t->src, raw);
	err = kiln_tar_normalize(t, raw, &depth);
	if (err || !depth)
		return err;
	if (whiteout_target(l, t->path)) {
		mark(l, l->path, COPY_GONE, &c);
		return 0;
	}
	c = find(l, t->path);
	if (!c)
		return 0;
	if (archive_entry_hardlink(e)) {
		saved = strdup(t->path);
		err = saved ? kiln_tar_normalize(t, archive_entry_hardlink(e),
						 &depth) : -ENOMEM;
		target = err ? NULL : strdup(t->path);
		if (!err && !target)
			err = -ENOMEM;
		if (!err)
			c = find(l, saved);
	}
	/* the last member of the path in this layer is what it holds */
	for (; !err && c; c = c->next ? &l->v[c->next - 1] : NULL) {
		if (strcmp(c->want, saved ? saved : t->path) ||
		    c->state == COPY_DONE)
			continue;
		if (c->dir ? type == AE_IFDIR :
		    !target && type == AE_IFREG) {
			err = kiln_tar_entry_attrs(t, c->n, e, false);
			c->n->src_layer = c->dir ? 0 : t->layer;
			c->n->src_member = t->member;
			c->state = COPY_FILE;
		} else if (target && !c->dir) {
			free(c->follow);
			c->follow = strdup(target);
			c->state = c->follow ? COPY_LINK : COPY_WANTED;
			if (!c->follow)
				err = -ENOMEM;
		} else {
			c->state = COPY_OTHER;
		}
	}
	free(target);
	free(saved);
	return err;
}

int kiln_oci_links_passed(struct kiln_oci_links *l, struct tar *t,
			  bool *again)
{
	*again = false;
	for (size_t i = 0; i < l->nr; i++) {
		struct copy *c = &l->v[i];

		switch (c->state) {
		case COPY_FILE:
			c->state = COPY_DONE;
			break;
		case COPY_LINK:
			if (++c->hops > LINK_HOPS_MAX)
				return kiln_tar_fail(t, ELOOP, "hardlink '%s': "
						     "more than %d hardlinks "
						     "followed below", c->want,
						     LINK_HOPS_MAX);
			free(c->want);
			c->want = c->follow;
			c->follow = NULL;
			c->state = COPY_WANTED;
			*again = true;
			break;
		case COPY_GONE:
		case COPY_OTHER:
			if (c->dir) {
				/* no directory there: it stays implied */
				c->state = COPY_DONE;
				break;
			}
			snprintf(t->label, sizeof(t->label), "%s", t->src);
			return kiln_tar_fail(t, ENOENT, "hardlink target '%s' "
					     "%s in this layer", c->want,
					     c->state == COPY_GONE ?
					     "is deleted" :
					     "is not a regular file");
		case COPY_WANTED:
		case COPY_DONE:
			break;
		}
	}
	return 0;
}

int kiln_oci_links_done(struct kiln_oci_links *l, struct tar *t)
{
	for (size_t i = 0; i < l->nr; i++)
		if (l->v[i].state != COPY_DONE && !l->v[i].dir)
			return kiln_tar_fail(t, ENOENT, "hardlink target '%s' "
					     "is in neither this layer nor a "
					     "layer below", l->v[i].want);
	return 0;
}
