/* SPDX-License-Identifier: MIT */
/*
 * For the fuzz targets that build an image (fuzz-tar.c, fuzz-oci.c): open
 * the image a build wrote and walk it, reading every directory (to
 * MAX_DEPTH, MAX_ENTRIES names) and the start of every regular file; a
 * built image that does not open, or a name no path walk can take, aborts.
 */
#ifndef KILN_FUZZ_WALK_H
#define KILN_FUZZ_WALK_H

#include <dirent.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <kiln/image.h>

#define MAX_ENTRIES	4096
#define MAX_DEPTH	8

struct walk {
	struct kiln_image *img;
	unsigned int entries;
	unsigned int depth;
	uint8_t buf[16384];
};

struct dir_ctx {
	struct walk *w;
	kiln_nid_t dir, parent;
};

static void walk_dir(struct walk *w, kiln_nid_t dir, kiln_nid_t parent);

/* The builder never writes a name a path walk cannot take. */
static int on_entry(void *ctx, const struct kiln_dirent *de)
{
	struct dir_ctx *d = ctx;
	struct walk *w = d->w;
	struct kiln_file *f;

	if (++w->entries > MAX_ENTRIES)
		return 1;
	if (!de->name_len || memchr(de->name, '/', de->name_len))
		abort();
	if (!strcmp(de->name, ".") || !strcmp(de->name, "..")) {
		if (de->nid != (de->name[1] ? d->parent : d->dir))
			abort();
		return 0;
	}
	if (de->type == DT_DIR)
		walk_dir(w, de->nid, d->dir);
	else if (de->type == DT_REG && !kiln_file_open(w->img, de->nid, &f)) {
		kiln_file_pread(f, w->buf, sizeof(w->buf), 0);
		kiln_file_close(f);
	}
	return 0;
}

static void walk_dir(struct walk *w, kiln_nid_t dir, kiln_nid_t parent)
{
	struct dir_ctx d = { .w = w, .dir = dir, .parent = parent };

	if (w->depth >= MAX_DEPTH)
		return;
	w->depth++;
	kiln_dir_iterate(w->img, dir, 0, on_entry, &d);
	w->depth--;
}

static void walk_image(const char *path)
{
	static struct walk w;
	kiln_nid_t root;

	memset(&w, 0, sizeof(w));
	if (kiln_image_open(&w.img, path, NULL))
		abort();	/* a build that succeeded must open */
	root = kiln_image_root(w.img);
	walk_dir(&w, root, root);
	kiln_image_close(w.img);
}

#endif
