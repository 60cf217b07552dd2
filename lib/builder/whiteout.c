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
	return o->source_kind == KILN_SOURCE_TAR ? KILN_WHITEOUTS_OVERLAY
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

int kiln_whiteout_set_opaque(struct kiln_build *b, struct kiln_node *dir)
{
	struct kiln_xattr_item *item, **v;
	int err;

	err = kiln_xattr_intern(&b->xt, EROFS_XATTR_INDEX_TRUSTED, OVL_OPAQUE,
				strlen(OVL_OPAQUE), "y", 1, &item);
	if (err)
		return err;
	for (uint16_t i = 0; i < dir->nr_xattrs; i++)
		if (dir->xattrs[i] == item)
			return 0;
	/* an opaque xattr with another value gives way to "y" */
	kiln_whiteout_strip_xattrs(dir);
	if (dir->nr_xattrs == UINT16_MAX)
		return -E2BIG;
	v = realloc(dir->xattrs, (dir->nr_xattrs + 1u) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	dir->xattrs = v;
	v[dir->nr_xattrs++] = item;
	kiln_xattr_sort(dir->xattrs, &dir->nr_xattrs);
	return 0;
}
