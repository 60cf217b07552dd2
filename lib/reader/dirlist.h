/* SPDX-License-Identifier: MIT */
/*
 * All entries of one directory, copied out of the reader, so a walk can
 * look names up, stat and descend while it goes through them.
 */
#ifndef KILN_READER_DIRLIST_H
#define KILN_READER_DIRLIST_H

#include <stddef.h>
#include <stdint.h>

#include <kiln/image.h>

struct kiln_dirlist_ent {
	kiln_nid_t nid;
	size_t name_off;		/* into kiln_dirlist.names */
	uint16_t name_len;
	uint8_t type;			/* DT_* as given by the dirent */
};

struct kiln_dirlist {
	struct kiln_dirlist_ent *ents;
	size_t nr, cap;
	char *names;			/* each name NUL-terminated */
	size_t names_len, names_cap;
};

void kiln_dirlist_init(struct kiln_dirlist *dl);
void kiln_dirlist_release(struct kiln_dirlist *dl);

/*
 * Replace the contents of @dl by the entries of directory @dir, "." and
 * ".." included, in on-disk order. 0 or a negative errno (@dl then holds
 * the entries read before the error).
 */
int kiln_dirlist_load(struct kiln_dirlist *dl, struct kiln_image *img,
		      kiln_nid_t dir);

static inline const char *kiln_dirlist_name(const struct kiln_dirlist *dl,
					    size_t i)
{
	return dl->names + dl->ents[i].name_off;
}

#endif
