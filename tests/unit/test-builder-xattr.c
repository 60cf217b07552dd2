// SPDX-License-Identifier: MIT
/* Tests for lib/builder/xattr.c: prefixes, sharing, inline areas, filter. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "builder/internal.h"
#include "format/erofs_fs.h"
#include "util/checked.h"
#include "util/endian.h"
#include "tap.h"

static struct kiln_xattr_item *intern(struct kiln_xattr_table *xt,
				      unsigned int index, const char *name,
				      const char *value)
{
	struct kiln_xattr_item *it = NULL;

	CHECK_EQ(kiln_xattr_intern(xt, index, name, strlen(name), value,
				   strlen(value), &it), 0);
	return it;
}

TEST(prefixes_map_to_short_indexes)
{
	const char *suffix = NULL;

	CHECK_EQ(kiln_xattr_prefix("user.mime", &suffix), EROFS_XATTR_INDEX_USER);
	CHECK(!strcmp(suffix, "mime"));
	CHECK_EQ(kiln_xattr_prefix("trusted.overlay.origin", &suffix),
		 EROFS_XATTR_INDEX_TRUSTED);
	CHECK(!strcmp(suffix, "overlay.origin"));
	CHECK_EQ(kiln_xattr_prefix("security.selinux", &suffix),
		 EROFS_XATTR_INDEX_SECURITY);
	CHECK_EQ(kiln_xattr_prefix("system.posix_acl_access", &suffix),
		 EROFS_XATTR_INDEX_POSIX_ACL_ACCESS);
	CHECK(!strcmp(suffix, ""));
	CHECK_EQ(kiln_xattr_prefix("system.posix_acl_default", &suffix),
		 EROFS_XATTR_INDEX_POSIX_ACL_DEFAULT);
	/* namespaces EROFS cannot store */
	CHECK_EQ(kiln_xattr_prefix("system.posix_acl_accessx", &suffix), 0);
	CHECK_EQ(kiln_xattr_prefix("system.nfs4_acl", &suffix), 0);
	CHECK_EQ(kiln_xattr_prefix("lustre.lov", &suffix), 0);
	CHECK_EQ(kiln_xattr_prefix("user.", &suffix), 0);
	CHECK_EQ(kiln_xattr_prefix("usr.x", &suffix), 0);
}

/* Format notes 6.5: user.common, ACL access, trusted.overlay.origin, user.uniq1. */
TEST(filter_matches_worked_example)
{
	struct kiln_xattr_table xt;
	struct kiln_xattr_item *items[4];

	kiln_xattr_table_init(&xt);
	items[0] = intern(&xt, EROFS_XATTR_INDEX_USER, "common", "v");
	items[1] = intern(&xt, EROFS_XATTR_INDEX_POSIX_ACL_ACCESS, "", "\x02");
	items[2] = intern(&xt, EROFS_XATTR_INDEX_TRUSTED, "overlay.origin", "o");
	items[3] = intern(&xt, EROFS_XATTR_INDEX_USER, "uniq1", "u");
	CHECK_EQ(kiln_xattr_filter(items, 4), 0xB7FBDFFFu);
	CHECK_EQ(kiln_xattr_filter(items, 0), 0xFFFFFFFFu);
	kiln_xattr_table_release(&xt);
}

TEST(identical_xattrs_are_interned_once)
{
	struct kiln_xattr_table xt;
	struct kiln_xattr_item *a, *b, *c, *d;

	kiln_xattr_table_init(&xt);
	a = intern(&xt, EROFS_XATTR_INDEX_USER, "k", "v");
	b = intern(&xt, EROFS_XATTR_INDEX_USER, "k", "v");
	c = intern(&xt, EROFS_XATTR_INDEX_USER, "k", "w");
	d = intern(&xt, EROFS_XATTR_INDEX_TRUSTED, "k", "v");
	CHECK(a == b);
	CHECK(a != c && a != d && c != d);
	CHECK_EQ(xt.nr_items, 3);
	kiln_xattr_table_release(&xt);
}

TEST(xattrs_used_often_enough_become_shared)
{
	struct kiln_xattr_table xt;
	struct kiln_xattr_item *common, *uniq, *items[2];
	uint8_t area[64];
	uint32_t size = 0;

	kiln_xattr_table_init(&xt);
	common = intern(&xt, EROFS_XATTR_INDEX_USER, "common", "shared1");
	uniq = intern(&xt, EROFS_XATTR_INDEX_USER, "u", "x");
	common->refs = 3;
	uniq->refs = 1;
	kiln_xattr_assign_shared(&xt, 2);
	CHECK_EQ(common->shared_id, 0);
	CHECK_EQ(uniq->shared_id, -1);
	CHECK_EQ(xt.nr_shared, 1);
	/* 4 + 6 + 7 = 17 -> 20 bytes */
	CHECK_EQ(xt.shared_size, 20);

	items[0] = common;
	items[1] = uniq;
	CHECK_EQ(kiln_xattr_ibody_size(items, 2, &size), 0);
	/* header 12 + one id 4 + entry round_up(4 + 1 + 1, 4) = 8 */
	CHECK_EQ(size, 24);
	kiln_xattr_encode_ibody(items, 2, true, area, size);
	CHECK_EQ(kiln_get_le32(area), kiln_xattr_filter(items, 2));
	CHECK_EQ(area[4], 1);			/* h_shared_count */
	CHECK_EQ(kiln_get_le32(area + 12), 0);	/* shared id */
	CHECK_EQ(area[16], 1);			/* e_name_len */
	CHECK_EQ(area[17], EROFS_XATTR_INDEX_USER);
	CHECK_EQ(kiln_get_le16(area + 18), 1);	/* e_value_size */
	CHECK(area[20] == 'u' && area[21] == 'x');
	CHECK(area[22] == 0 && area[23] == 0);

	/* the shared area holds the entry itself */
	uint8_t shared[20];

	kiln_xattr_encode_shared(&xt, shared);
	CHECK_EQ(shared[0], 6);
	CHECK_EQ(kiln_get_le16(shared + 2), 7);
	CHECK(!memcmp(shared + 4, "commonshared1", 13));

	/* raising the threshold keeps everything inline */
	xt.nr_shared = 0;
	kiln_xattr_assign_shared(&xt, 4);
	CHECK_EQ(common->shared_id, -1);
	CHECK_EQ(xt.shared_size, 0);
	kiln_xattr_table_release(&xt);
}

TEST(inline_area_is_zero_or_at_least_16_bytes)
{
	struct kiln_xattr_table xt;
	struct kiln_xattr_item *it;
	uint32_t size = 1;

	kiln_xattr_table_init(&xt);
	CHECK_EQ(kiln_xattr_ibody_size(NULL, 0, &size), 0);
	CHECK_EQ(size, 0);
	it = intern(&xt, EROFS_XATTR_INDEX_POSIX_ACL_DEFAULT, "", "");
	CHECK_EQ(kiln_xattr_ibody_size(&it, 1, &size), 0);
	CHECK_EQ(size, 16);
	kiln_xattr_table_release(&xt);
}

TEST(more_than_255_shared_ids_spill_inline)
{
	static struct kiln_xattr_item *items[300];
	struct kiln_xattr_table xt;
	uint32_t size = 0;

	kiln_xattr_table_init(&xt);
	for (int i = 0; i < 300; i++) {
		char name[16];

		snprintf(name, sizeof(name), "n%03d", i);	/* 4 bytes */
		items[i] = intern(&xt, EROFS_XATTR_INDEX_USER, name, "");
		items[i]->refs = 2;
	}
	kiln_xattr_assign_shared(&xt, 2);
	CHECK_EQ(kiln_xattr_ibody_size(items, 300, &size), 0);
	CHECK_EQ(size, 12 + 255 * 4 + 45 * 8);
	kiln_xattr_table_release(&xt);
}

TEST(sort_orders_by_index_then_name_and_drops_duplicates)
{
	struct kiln_xattr_table xt;
	struct kiln_xattr_item *items[4];
	uint16_t n = 4;

	kiln_xattr_table_init(&xt);
	items[0] = intern(&xt, EROFS_XATTR_INDEX_TRUSTED, "a", "1");
	items[1] = intern(&xt, EROFS_XATTR_INDEX_USER, "b", "2");
	items[2] = intern(&xt, EROFS_XATTR_INDEX_USER, "a", "3");
	items[3] = items[1];
	kiln_xattr_sort(items, &n);
	CHECK_EQ(n, 3);
	CHECK(items[0]->index == EROFS_XATTR_INDEX_USER && items[0]->name[0] == 'a');
	CHECK(items[1]->index == EROFS_XATTR_INDEX_USER && items[1]->name[0] == 'b');
	CHECK(items[2]->index == EROFS_XATTR_INDEX_TRUSTED);
	kiln_xattr_table_release(&xt);
}

TEST(node_add_xattr_grows_and_stops_at_uint16_max)
{
	struct kiln_xattr_table xt;
	struct kiln_node n = { 0 };
	struct kiln_xattr_item *items[3];

	kiln_xattr_table_init(&xt);
	items[0] = intern(&xt, EROFS_XATTR_INDEX_USER, "a", "1");
	items[1] = intern(&xt, EROFS_XATTR_INDEX_USER, "b", "2");
	items[2] = intern(&xt, EROFS_XATTR_INDEX_TRUSTED, "c", "3");
	for (unsigned int i = 0; i < 100; i++)
		CHECK_EQ(kiln_node_add_xattr(NULL, &n, items[i % 3], NULL), 0);
	CHECK_EQ(n.nr_xattrs, 100);
	CHECK(n.cap_xattrs >= 100);
	for (unsigned int i = 0; i < 100; i++)
		CHECK(n.xattrs[i] == items[i % 3]);
	/* appending does not sort: the caller does, once */
	kiln_xattr_sort(n.xattrs, &n.nr_xattrs);
	CHECK_EQ(n.nr_xattrs, 3);
	n.nr_xattrs = UINT16_MAX;
	CHECK_EQ(kiln_node_add_xattr(NULL, &n, items[0], NULL), -E2BIG);
	CHECK_EQ(n.nr_xattrs, UINT16_MAX);
	free(n.xattrs);
	kiln_xattr_table_release(&xt);
}

TAP_MAIN(TAP_ENTRY(prefixes_map_to_short_indexes),
	 TAP_ENTRY(filter_matches_worked_example),
	 TAP_ENTRY(identical_xattrs_are_interned_once),
	 TAP_ENTRY(xattrs_used_often_enough_become_shared),
	 TAP_ENTRY(inline_area_is_zero_or_at_least_16_bytes),
	 TAP_ENTRY(more_than_255_shared_ids_spill_inline),
	 TAP_ENTRY(sort_orders_by_index_then_name_and_drops_duplicates),
	 TAP_ENTRY(node_add_xattr_grows_and_stops_at_uint16_max))
