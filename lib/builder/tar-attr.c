// SPDX-License-Identifier: MIT
/*
 * A tar member's attributes: type, permissions, owner, mtime, symlink
 * target, device number, size, xattrs and ACLs (tar-acl.c).
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "builder/internal.h"
#include "builder/tar-acl.h"
#include "builder/tar-scan.h"
#include "format/erofs_fs.h"

static int entry_xattrs(struct tar *t, struct kiln_node *n,
			struct archive_entry *e)
{
	const char *name, *suffix;
	const void *value;
	size_t size;

	free(n->xattrs);
	n->xattrs = NULL;
	n->nr_xattrs = 0;
	n->cap_xattrs = 0;
	if ((t->b->opts.flags & KILN_BUILD_NO_XATTRS) ||
	    !archive_entry_xattr_reset(e))
		return 0;
	while (archive_entry_xattr_next(e, &name, &value, &size) ==
	       ARCHIVE_OK) {
		unsigned int index = kiln_xattr_prefix(name, &suffix);
		struct kiln_xattr_item *item;
		int err;

		if (index == EROFS_XATTR_INDEX_TRUSTED && t->strip_whiteouts &&
		    !strcmp(suffix, "overlay.opaque"))
			continue;

		if (!index) {
			kiln_log(&t->b->lg, KILN_LOG_WARN,
				 "%s: xattr %s: namespace not supported by "
				 "EROFS, skipped", t->label, name);
			continue;
		}
		if (strlen(suffix) > EROFS_NAME_LEN)
			return kiln_tar_fail(t, ENAMETOOLONG,
					     "xattr name longer than 255 bytes after its prefix");
		if (size > UINT16_MAX)
			return kiln_tar_fail(t, E2BIG,
					     "xattr %s: value larger than 65535 bytes",
					     name);
		err = kiln_xattr_intern(&t->b->xt, index, suffix,
					strlen(suffix), value, size, &item);
		if (err)
			return err;
		err = kiln_node_add_xattr(t->b, n, item, t->label);
		if (err)
			return err;
	}
	kiln_xattr_sort(n->xattrs, &n->nr_xattrs);
	return 0;
}

/*
 * Type, permissions, owner, mtime, target/rdev/size, xattrs and ACLs of
 * @e; with @whiteout, @n becomes the overlayfs whiteout (a character
 * device 0:0) with @e's metadata.
 */
int kiln_tar_entry_attrs(struct tar *t, struct kiln_node *n,
			 struct archive_entry *e, bool whiteout)
{
	struct kiln_build *b = t->b;
	la_int64_t uid = archive_entry_uid(e), gid = archive_entry_gid(e);
	unsigned int type = archive_entry_filetype(e);
	long nsec;
	int err;

	if (uid < 0 || uid > UINT32_MAX || gid < 0 || gid > UINT32_MAX)
		return kiln_tar_fail(t, ERANGE, "owner %lld:%lld out of range",
				     (long long)uid, (long long)gid);
	n->mode = type | (archive_entry_perm(e) & 07777);
	n->flags &= ~(unsigned int)KILN_NODE_IMPLICIT;
	err = kiln_owner_set(b, n, (uint32_t)uid, (uint32_t)gid, t->label);
	if (err)
		return err;
	n->mtime = archive_entry_mtime_is_set(e) ? archive_entry_mtime(e) : 0;
	nsec = archive_entry_mtime_is_set(e) ? archive_entry_mtime_nsec(e) : 0;
	n->mtime_nsec = nsec >= 0 && nsec < 1000000000 ? (uint32_t)nsec : 0;
	/*
	 * Before 3.8.1, libarchive reads the pax time "-4.25" as (-4, 0.25 s)
	 * instead of (-5, 0.75 s); a time in (-1, 0) even loses its sign.
	 */
	if (archive_version_number() < 3008001 && n->mtime < 0 &&
	    n->mtime_nsec) {
		n->mtime -= 1;
		n->mtime_nsec = 1000000000u - n->mtime_nsec;
	}
	if (n->mtime > b->newest_mtime)
		b->newest_mtime = n->mtime;
	switch (type) {
	case AE_IFREG: {
		la_int64_t size = archive_entry_size(e);

		if (size < 0)
			return kiln_tar_fail(t, EINVAL, "negative size");
		n->size = (uint64_t)size;
		break;
	}
	case AE_IFDIR:
		break;
	case AE_IFLNK: {
		const char *target = archive_entry_symlink(e);
		size_t len = target ? strlen(target) : 0;

		if (!len)
			return kiln_tar_fail(t, EINVAL, "empty symlink target");
		if (len > EROFS_SYMLINK_MAX)
			return kiln_tar_fail(t, ENAMETOOLONG, "symlink target "
					     "longer than 4095 bytes");
		free(n->target);
		n->target = strdup(target);
		if (!n->target)
			return -ENOMEM;
		n->size = len;
		break;
	}
	case AE_IFCHR:
	case AE_IFBLK: {
		/* dev_t-sized: a tar's numeric fields hold up to 64 bits */
		uint64_t maj = archive_entry_rdevmajor(e);
		uint64_t min = archive_entry_rdevminor(e);

		if (!kiln_inode_encode_rdev(maj, min, &n->rdev))
			return kiln_tar_fail(t, ERANGE, "device %llu:%llu: "
					     "EROFS stores majors up to %u "
					     "and minors up to %u",
					     (unsigned long long)maj,
					     (unsigned long long)min,
					     KILN_RDEV_MAJOR_MAX,
					     KILN_RDEV_MINOR_MAX);
		break;
	}
	case AE_IFIFO:
	case AE_IFSOCK:
		break;
	default:
		return kiln_tar_fail(t, EOPNOTSUPP, "unsupported entry type 0%o",
				     type);
	}
	if (whiteout) {
		n->flags |= KILN_NODE_WHITEOUT;
		n->mode = S_IFCHR | (n->mode & 07777);
		n->rdev = 0;
		n->size = 0;
		free(n->target);
		n->target = NULL;
	}
	err = entry_xattrs(t, n, e);
	if (!err)
		err = kiln_tar_acls(b, n, e, t->label);
	/* now, before the data streams: the xattrs shape an inline tail */
	if (!err)
		err = kiln_xattr_set_label(b, n, t->path, t->label);
	return err;
}
