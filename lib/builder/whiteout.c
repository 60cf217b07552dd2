// SPDX-License-Identifier: MIT
/*
 * OCI / aufs whiteouts: what a name means (".wh.NAME", the opaque marker,
 * aufs bookkeeping), and the overlayfs forms they become or lose.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "builder/internal.h"
#include "format/erofs_fs.h"

#define WH_PREFIX	".wh."
#define WH_PREFIX_LEN	4
#define WH_META		".wh..wh."
#define WH_OPAQUE	".wh..wh..opq"
/* the xattr overlayfs reads as "this directory hides the lower ones" */
#define OVL_OPAQUE	"overlay.opaque"
/*
 * An empty one on a directory that holds whiteouts: overlayfs then reads
 * it as a merged directory, which hides the whiteouts, even where no
 * lower layer has that directory (mkfs.erofs --aufs does the same); a
 * directory it sees as plain lists them as names that cannot be opened.
 */
#define OVL_ORIGIN	"overlay.origin"

enum kiln_whiteout_kind kiln_whiteout_kind(const char *name, size_t len,
					   const char **target,
					   size_t *target_len)
{
	*target = NULL;
	*target_len = 0;
	if (len < WH_PREFIX_LEN || memcmp(name, WH_PREFIX, WH_PREFIX_LEN))
		return KILN_WH_NONE;
	if (len == strlen(WH_OPAQUE) && !memcmp(name, WH_OPAQUE, len))
		return KILN_WH_OPAQUE;
	if (len >= strlen(WH_META) && !memcmp(name, WH_META, strlen(WH_META)))
		return KILN_WH_META;
	*target = name + WH_PREFIX_LEN;
	*target_len = len - WH_PREFIX_LEN;
	/* ".wh.", ".wh.." and ".wh..." name nothing a directory can hold */
	if (!*target_len || (*target_len == 1 && **target == '.') ||
	    (*target_len == 2 && !memcmp(*target, "..", 2)))
		return KILN_WH_BAD;
	return KILN_WH_FILE;
}

enum kiln_whiteouts kiln_whiteouts_mode(const struct kiln_build_opts *o)
{
	if (o->whiteouts != KILN_WHITEOUTS_AUTO)
		return o->whiteouts;
	return o->source_kind == KILN_SOURCE_TAR ||
	       o->source_kind == KILN_SOURCE_OCI ? KILN_WHITEOUTS_OVERLAY
						 : KILN_WHITEOUTS_KEEP;
}

bool kiln_whiteout_is_overlay(mode_t mode, uint32_t rdev)
{
	return S_ISCHR(mode) && !rdev;
}

bool kiln_whiteout_is_opaque_xattr(const struct kiln_xattr_item *it)
{
	return it->index == EROFS_XATTR_INDEX_TRUSTED &&
	       it->name_len == strlen(OVL_OPAQUE) &&
	       !memcmp(it->name, OVL_OPAQUE, it->name_len);
}

void kiln_whiteout_strip_xattrs(struct kiln_node *n)
{
	uint16_t kept = 0;

	for (uint16_t i = 0; i < n->nr_xattrs; i++)
		if (!kiln_whiteout_is_opaque_xattr(n->xattrs[i]))
			n->xattrs[kept++] = n->xattrs[i];
	n->nr_xattrs = kept;
}

/* Give @dir trusted.@name = @value, unless it has one and !@replace. */
static int dir_xattr(struct kiln_build *b, struct kiln_node *dir,
		     const char *name, const char *value, bool replace)
{
	struct kiln_xattr_item *item;
	uint16_t kept = 0;
	int err;

	err = kiln_xattr_intern(&b->xt, EROFS_XATTR_INDEX_TRUSTED, name,
				strlen(name), value, strlen(value), &item);
	if (err)
		return err;
	for (uint16_t i = 0; i < dir->nr_xattrs; i++) {
		struct kiln_xattr_item *it = dir->xattrs[i];
		bool same = it->index == EROFS_XATTR_INDEX_TRUSTED &&
			    it->name_len == strlen(name) &&
			    !memcmp(it->name, name, it->name_len);

		if (same && (!replace || it == item))
			return 0;
		if (!same)
			dir->xattrs[kept++] = it;
	}
	dir->nr_xattrs = kept;
	err = kiln_node_add_xattr(b, dir, item, NULL);
	if (err)
		return err;
	kiln_xattr_sort(dir->xattrs, &dir->nr_xattrs);
	return 0;
}

int kiln_whiteout_set_opaque(struct kiln_build *b, struct kiln_node *dir)
{
	/* an opaque xattr with another value gives way to "y" */
	return dir_xattr(b, dir, OVL_OPAQUE, "y", true);
}

int kiln_whiteout_set_origin(struct kiln_build *b, struct kiln_node *dir)
{
	return dir_xattr(b, dir, OVL_ORIGIN, "", false);
}
