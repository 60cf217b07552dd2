// SPDX-License-Identifier: MIT
/* Copying all entries of one directory out of the reader. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "reader/dirlist.h"
#include "util/grow.h"

void kiln_dirlist_init(struct kiln_dirlist *dl)
{
	memset(dl, 0, sizeof(*dl));
}

void kiln_dirlist_release(struct kiln_dirlist *dl)
{
	free(dl->ents);
	free(dl->names);
	kiln_dirlist_init(dl);
}

static int add_entry(void *ctx, const struct kiln_dirent *de)
{
	struct kiln_dirlist *dl = ctx;
	struct kiln_dirlist_ent *e;
	int err;

	err = KILN_GROW(dl->ents, dl->cap, dl->nr + 1);
	if (err)
		return err;
	err = KILN_GROW(dl->names, dl->names_cap,
			dl->names_len + de->name_len + 1);
	if (err)
		return err;
	e = &dl->ents[dl->nr++];
	e->nid = de->nid;
	e->name_off = dl->names_len;
	e->name_len = de->name_len;
	e->type = de->type;
	memcpy(dl->names + dl->names_len, de->name, de->name_len);
	dl->names[dl->names_len + de->name_len] = '\0';
	dl->names_len += (size_t)de->name_len + 1;
	return 0;
}

int kiln_dirlist_load(struct kiln_dirlist *dl, struct kiln_image *img,
		      kiln_nid_t dir)
{
	dl->nr = 0;
	dl->names_len = 0;
	return kiln_dir_iterate(img, dir, 0, add_entry, dl);
}
