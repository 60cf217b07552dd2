// SPDX-License-Identifier: MIT
/*
 * A file's owner in the image: the source's ids, then --all-root and the
 * forced ids, then the offsets (as mkfs.erofs adds --uid-offset last).
 */
#include <errno.h>
#include <inttypes.h>

#include "builder/internal.h"

int kiln_owner_set(struct kiln_build *b, struct kiln_node *n, uint32_t uid,
		   uint32_t gid, const char *what)
{
	const struct kiln_build_opts *o = &b->opts;

	if (o->flags & KILN_BUILD_ALL_ROOT)
		uid = gid = 0;
	if (o->flags & KILN_BUILD_FORCE_UID)
		uid = o->force_uid;
	if (o->flags & KILN_BUILD_FORCE_GID)
		gid = o->force_gid;
	if (uid > UINT32_MAX - o->uid_offset) {
		kiln_log(&b->lg, KILN_LOG_ERROR, "%s: uid %" PRIu32 " + offset "
			 "%" PRIu32 " is past 4294967295", what, uid,
			 o->uid_offset);
		return -ERANGE;
	}
	if (gid > UINT32_MAX - o->gid_offset) {
		kiln_log(&b->lg, KILN_LOG_ERROR, "%s: gid %" PRIu32 " + offset "
			 "%" PRIu32 " is past 4294967295", what, gid,
			 o->gid_offset);
		return -ERANGE;
	}
	n->uid = uid + o->uid_offset;
	n->gid = gid + o->gid_offset;
	return 0;
}
