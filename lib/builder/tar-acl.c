// SPDX-License-Identifier: MIT
/*
 * A tar member's POSIX ACL records into system.posix_acl_access and
 * system.posix_acl_default xattrs, and its mode's group bits from the mask.
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "builder/internal.h"
#include "builder/tar-acl.h"
#include "format/erofs_fs.h"
#include "util/checked.h"

/* The most entries one ACL may have: what fits a 64 KiB xattr value. */
#define TAR_ACL_MAX	((UINT16_MAX - 4) / 8)

static int acl_tag(int tag)
{
	switch (tag) {
	case ARCHIVE_ENTRY_ACL_USER_OBJ:	return KILN_ACL_USER_OBJ;
	case ARCHIVE_ENTRY_ACL_USER:		return KILN_ACL_USER;
	case ARCHIVE_ENTRY_ACL_GROUP_OBJ:	return KILN_ACL_GROUP_OBJ;
	case ARCHIVE_ENTRY_ACL_GROUP:		return KILN_ACL_GROUP;
	case ARCHIVE_ENTRY_ACL_MASK:		return KILN_ACL_MASK;
	case ARCHIVE_ENTRY_ACL_OTHER:		return KILN_ACL_OTHER;
	default:				return 0;
	}
}

/*
 * The id of a named entry that carries none (GNU tar writes names only):
 * the name as this system resolves it, as tar does when it extracts.
 */
static int resolve_name(struct kiln_build *b, const char *label, int tag,
			const char *name, uint32_t *id)
{
	char buf[16384];
	int r;

	if (name && tag == KILN_ACL_USER) {
		struct passwd pw, *res = NULL;

		r = getpwnam_r(name, &pw, buf, sizeof(buf), &res);
		if (!r && res) {
			*id = (uint32_t)pw.pw_uid;
			return 0;
		}
	} else if (name) {
		struct group gr, *res = NULL;

		r = getgrnam_r(name, &gr, buf, sizeof(buf), &res);
		if (!r && res) {
			*id = (uint32_t)gr.gr_gid;
			return 0;
		}
	}
	kiln_log(&b->lg, KILN_LOG_ERROR, "%s: ACL entry names %s '%s', which "
		 "has no id in the archive and none on this system", label,
		 tag == KILN_ACL_USER ? "user" : "group", name ? name : "");
	return -EINVAL;
}

/* Read the ACL of @type from @e into @ents; *@nr: its entries (0: none). */
static int acl_read(struct kiln_build *b, struct archive_entry *e, int type,
		    const char *label, struct kiln_acl_entry *ents, size_t *nr)
{
	int count = archive_entry_acl_reset(e, type);
	int atype, perm, tag, id;
	const char *name;

	*nr = 0;
	if (count <= 0)
		return 0;
	if (count > TAR_ACL_MAX) {
		kiln_log(&b->lg, KILN_LOG_ERROR, "%s: ACL of %d entries is too "
			 "big for an xattr", label, count);
		return -E2BIG;
	}
	while (*nr < (size_t)count &&
	       archive_entry_acl_next(e, type, &atype, &perm, &tag, &id,
				      &name) == ARCHIVE_OK) {
		struct kiln_acl_entry *a = &ents[*nr];
		int err;

		a->tag = (uint16_t)acl_tag(tag);
		if (!a->tag) {
			kiln_log(&b->lg, KILN_LOG_ERROR, "%s: ACL entry of "
				 "unknown kind %d", label, tag);
			return -EINVAL;
		}
		a->perm = (uint16_t)((perm & ARCHIVE_ENTRY_ACL_READ ? 4 : 0) |
				     (perm & ARCHIVE_ENTRY_ACL_WRITE ? 2 : 0) |
				     (perm & ARCHIVE_ENTRY_ACL_EXECUTE ? 1 : 0));
		a->id = 0;
		if (a->tag == KILN_ACL_USER || a->tag == KILN_ACL_GROUP) {
			if (id >= 0) {
				a->id = (uint32_t)id;
			} else {
				err = resolve_name(b, label, a->tag, name,
						   &a->id);
				if (err)
					return err;
			}
		}
		(*nr)++;
	}
	return 0;
}

static bool has_xattr(const struct kiln_node *n, unsigned int index)
{
	for (uint16_t i = 0; i < n->nr_xattrs; i++)
		if (n->xattrs[i]->index == index && !n->xattrs[i]->name_len)
			return true;
	return false;
}

static int acl_store(struct kiln_build *b, struct kiln_node *n,
		     unsigned int index, struct kiln_acl_entry *ents,
		     size_t nr, const char *label)
{
	uint8_t value[4 + 8 * TAR_ACL_MAX];
	struct kiln_xattr_item *item;
	ssize_t len = kiln_acl_encode(value, sizeof(value), ents, nr);
	int err;

	if (len < 0) {
		kiln_log(&b->lg, KILN_LOG_ERROR, "%s: %s ACL is not valid (an "
			 "owner, group or other entry missing or repeated, or "
			 "named entries without a mask)", label,
			 index == EROFS_XATTR_INDEX_POSIX_ACL_ACCESS ?
			 "access" : "default");
		return (int)len;
	}
	err = kiln_xattr_intern(&b->xt, index, "", 0, value, (size_t)len,
				&item);
	if (err)
		return err;
	err = kiln_node_add_xattr(b, n, item, label);
	if (err)
		return err;
	kiln_xattr_sort(n->xattrs, &n->nr_xattrs);
	return 0;
}

int kiln_tar_acls(struct kiln_build *b, struct kiln_node *n,
		  struct archive_entry *e, const char *label)
{
	static const struct {
		int type;
		unsigned int index;
	} kinds[] = {
		{ ARCHIVE_ENTRY_ACL_TYPE_ACCESS,
		  EROFS_XATTR_INDEX_POSIX_ACL_ACCESS },
		{ ARCHIVE_ENTRY_ACL_TYPE_DEFAULT,
		  EROFS_XATTR_INDEX_POSIX_ACL_DEFAULT },
	};
	bool keep = !(b->opts.flags & KILN_BUILD_NO_XATTRS);
	struct kiln_acl_entry *ents;
	int err = 0;

	if (archive_entry_acl_count(e, ARCHIVE_ENTRY_ACL_TYPE_POSIX1E) <= 0) {
		if (keep && archive_entry_acl_count(e,
					ARCHIVE_ENTRY_ACL_TYPE_NFS4) > 0)
			kiln_log(&b->lg, KILN_LOG_WARN, "%s: NFSv4 ACL not "
				 "kept (EROFS stores POSIX ACLs)", label);
		return 0;
	}
	ents = malloc(TAR_ACL_MAX * sizeof(*ents));
	if (!ents)
		return -ENOMEM;
	for (size_t k = 0; !err && k < KILN_ARRAY_SIZE(kinds); k++) {
		size_t nr;

		err = acl_read(b, e, kinds[k].type, label, ents, &nr);
		if (err || !nr)
			continue;
		if (kinds[k].type == ARCHIVE_ENTRY_ACL_TYPE_ACCESS) {
			/* with a mask, the group bits of the mode are its */
			for (size_t i = 0; i < nr; i++)
				if (ents[i].tag == KILN_ACL_MASK)
					n->mode = (n->mode & ~(mode_t)070) |
						  (mode_t)(ents[i].perm << 3);
			/* an ACL the mode says alone is no xattr */
			if (kiln_acl_is_minimal(ents, nr))
				continue;
		}
		if (kinds[k].type == ARCHIVE_ENTRY_ACL_TYPE_DEFAULT &&
		    !S_ISDIR(n->mode))
			continue;	/* only directories have one */
		if (!keep || has_xattr(n, kinds[k].index))
			continue;
		err = acl_store(b, n, kinds[k].index, ents, nr, label);
	}
	free(ents);
	return err;
}
