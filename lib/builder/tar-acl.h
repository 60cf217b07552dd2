/* SPDX-License-Identifier: MIT */
/*
 * A tar member's POSIX ACL records (pax SCHILY.acl.*, as libarchive reads
 * them) as system.posix_acl_* xattrs, and the mode they imply (tar-acl.c).
 * Used by scan-tar.c only.
 */
#ifndef KILN_BUILDER_TAR_ACL_H
#define KILN_BUILDER_TAR_ACL_H

struct archive_entry;
struct kiln_build;
struct kiln_node;

/*
 * After @n's type, mode and xattrs are set from @e: give n->mode the
 * group bits of the access ACL's mask (what stat shows for a file with an
 * extended ACL, where libarchive puts the group entry's bits), and store
 * each ACL as the xattr the kernel would hold, unless @e's xattrs carry
 * that xattr already (tar --xattrs archives both) or the build drops
 * xattrs. @label names the entry in messages. 0 or a negative errno,
 * logged.
 */
int kiln_tar_acls(struct kiln_build *b, struct kiln_node *n,
		  struct archive_entry *e, const char *label);

#endif
