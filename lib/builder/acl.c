// SPDX-License-Identifier: MIT
/*
 * POSIX ACLs as the kernel stores them in system.posix_acl_access and
 * system.posix_acl_default: a version word, then (tag, perm, id) entries
 * in tag order, named users and groups by id, all little endian.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "builder/internal.h"

#define ACL_XATTR_VERSION	2u
#define ACL_UNDEFINED_ID	0xFFFFFFFFu

static int cmp_entry(const void *pa, const void *pb)
{
	const struct kiln_acl_entry *a = pa, *b = pb;

	if (a->tag != b->tag)
		return a->tag < b->tag ? -1 : 1;
	if (a->id != b->id)
		return a->id < b->id ? -1 : 1;
	return 0;
}

static void put_le16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void put_le32(uint8_t *p, uint32_t v)
{
	put_le16(p, (uint16_t)v);
	put_le16(p + 2, (uint16_t)(v >> 16));
}

bool kiln_acl_is_minimal(const struct kiln_acl_entry *ents, size_t nr)
{
	for (size_t i = 0; i < nr; i++)
		if (ents[i].tag != KILN_ACL_USER_OBJ &&
		    ents[i].tag != KILN_ACL_GROUP_OBJ &&
		    ents[i].tag != KILN_ACL_OTHER)
			return false;
	return true;
}

/*
 * The rules the kernel's posix_acl_valid() holds an ACL to: one each of
 * the owner, group and other entries, named entries unique, and a mask
 * whenever there is a named entry.
 */
static int acl_check(const struct kiln_acl_entry *ents, size_t nr)
{
	unsigned int seen = 0;
	bool named = false;

	for (size_t i = 0; i < nr; i++) {
		uint16_t tag = ents[i].tag;

		if (ents[i].perm & ~7u)
			return -EINVAL;
		switch (tag) {
		case KILN_ACL_USER:
		case KILN_ACL_GROUP:
			named = true;
			if (i && ents[i - 1].tag == tag &&
			    ents[i - 1].id == ents[i].id)
				return -EINVAL;
			break;
		case KILN_ACL_USER_OBJ:
		case KILN_ACL_GROUP_OBJ:
		case KILN_ACL_MASK:
		case KILN_ACL_OTHER:
			if (seen & tag)
				return -EINVAL;
			seen |= tag;
			break;
		default:
			return -EINVAL;
		}
	}
	if (!(seen & KILN_ACL_USER_OBJ) || !(seen & KILN_ACL_GROUP_OBJ) ||
	    !(seen & KILN_ACL_OTHER) || (named && !(seen & KILN_ACL_MASK)))
		return -EINVAL;
	return 0;
}

ssize_t kiln_acl_encode(void *dst, size_t dst_cap,
			struct kiln_acl_entry *ents, size_t nr)
{
	size_t len = 4 + 8 * nr;
	uint8_t *p = dst;
	int err;

	for (size_t i = 0; i < nr; i++)
		if (ents[i].tag != KILN_ACL_USER &&
		    ents[i].tag != KILN_ACL_GROUP)
			ents[i].id = ACL_UNDEFINED_ID;
	qsort(ents, nr, sizeof(*ents), cmp_entry);
	err = acl_check(ents, nr);
	if (err)
		return err;
	if (len > dst_cap)
		return -E2BIG;
	put_le32(p, ACL_XATTR_VERSION);
	for (size_t i = 0; i < nr; i++) {
		uint8_t *q = p + 4 + 8 * i;

		put_le16(q, ents[i].tag);
		put_le16(q + 2, ents[i].perm);
		put_le32(q + 4, ents[i].id);
	}
	return (ssize_t)len;
}
