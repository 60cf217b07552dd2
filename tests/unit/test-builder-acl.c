// SPDX-License-Identifier: MIT
/* Tests for lib/builder/acl.c: ACLs encoded as the kernel's xattr value. */
#include <errno.h>
#include <string.h>

#include "builder/internal.h"
#include "util/checked.h"
#include "tap.h"

TEST(acl_encodes_as_getxattr_returns_it)
{
	/* given out of order: the encoding sorts by tag, then id */
	struct kiln_acl_entry ents[] = {
		{ KILN_ACL_OTHER, 0, 0 },
		{ KILN_ACL_GROUP, 4, 1 },
		{ KILN_ACL_USER, 7, 65534 },
		{ KILN_ACL_MASK, 4, 0 },
		{ KILN_ACL_USER_OBJ, 6, 0 },
		{ KILN_ACL_USER, 1, 1000 },
		{ KILN_ACL_GROUP_OBJ, 7, 0 },
	};
	/* what getfacl's source file gives getxattr(2) for this ACL */
	static const uint8_t want[] = {
		0x02, 0, 0, 0,
		0x01, 0, 6, 0, 0xff, 0xff, 0xff, 0xff,
		0x02, 0, 1, 0, 0xe8, 0x03, 0, 0,
		0x02, 0, 7, 0, 0xfe, 0xff, 0, 0,
		0x04, 0, 7, 0, 0xff, 0xff, 0xff, 0xff,
		0x08, 0, 4, 0, 0x01, 0, 0, 0,
		0x10, 0, 4, 0, 0xff, 0xff, 0xff, 0xff,
		0x20, 0, 0, 0, 0xff, 0xff, 0xff, 0xff,
	};
	uint8_t buf[64];

	CHECK_EQ(kiln_acl_encode(buf, sizeof(buf), ents, KILN_ARRAY_SIZE(ents)),
		 (ssize_t)sizeof(want));
	CHECK(!memcmp(buf, want, sizeof(want)));
	CHECK_EQ(kiln_acl_encode(buf, 20, ents, KILN_ARRAY_SIZE(ents)), -E2BIG);
	CHECK(!kiln_acl_is_minimal(ents, KILN_ARRAY_SIZE(ents)));
	CHECK(kiln_acl_is_minimal(ents + 3, 1));	/* group:: alone, once sorted */
}

TEST(acls_the_kernel_refuses_are_refused)
{
	uint8_t buf[64];
	/* a named user without a mask */
	struct kiln_acl_entry no_mask[] = {
		{ KILN_ACL_USER_OBJ, 6, 0 }, { KILN_ACL_USER, 4, 5 },
		{ KILN_ACL_GROUP_OBJ, 4, 0 }, { KILN_ACL_OTHER, 0, 0 },
	};
	/* two owner entries */
	struct kiln_acl_entry twice[] = {
		{ KILN_ACL_USER_OBJ, 6, 0 }, { KILN_ACL_USER_OBJ, 4, 0 },
		{ KILN_ACL_GROUP_OBJ, 4, 0 }, { KILN_ACL_OTHER, 0, 0 },
	};
	/* the same named group twice */
	struct kiln_acl_entry dup[] = {
		{ KILN_ACL_USER_OBJ, 6, 0 }, { KILN_ACL_GROUP, 4, 9 },
		{ KILN_ACL_GROUP, 2, 9 }, { KILN_ACL_GROUP_OBJ, 4, 0 },
		{ KILN_ACL_MASK, 6, 0 }, { KILN_ACL_OTHER, 0, 0 },
	};
	/* no other entry */
	struct kiln_acl_entry no_other[] = {
		{ KILN_ACL_USER_OBJ, 6, 0 }, { KILN_ACL_GROUP_OBJ, 4, 0 },
	};
	/* a permission bit past rwx */
	struct kiln_acl_entry bad_perm[] = {
		{ KILN_ACL_USER_OBJ, 8, 0 }, { KILN_ACL_GROUP_OBJ, 4, 0 },
		{ KILN_ACL_OTHER, 0, 0 },
	};

	CHECK_EQ(kiln_acl_encode(buf, sizeof(buf), no_mask, 4), -EINVAL);
	CHECK_EQ(kiln_acl_encode(buf, sizeof(buf), twice, 4), -EINVAL);
	CHECK_EQ(kiln_acl_encode(buf, sizeof(buf), dup, 6), -EINVAL);
	CHECK_EQ(kiln_acl_encode(buf, sizeof(buf), no_other, 2), -EINVAL);
	CHECK_EQ(kiln_acl_encode(buf, sizeof(buf), bad_perm, 3), -EINVAL);
}

TAP_MAIN(TAP_ENTRY(acl_encodes_as_getxattr_returns_it),
	 TAP_ENTRY(acls_the_kernel_refuses_are_refused))
