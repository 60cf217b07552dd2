// SPDX-License-Identifier: MIT
/*
 * Tests for tar input (lib/builder/scan-tar.c): archives written here with
 * libarchive are built with kiln_build() and read back with the reader;
 * no root, loop device or kernel mount needed.
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <kiln/builder.h>
#include <kiln/image.h>

#include "util/checked.h"
#include "tap.h"

static char tmp[64];
static char tar_path[128], img_path[128];

struct ent {
	const char *name;
	unsigned int type;		/* AE_IF* */
	unsigned int perm;
	const char *data;		/* file body / link target */
	long long mtime, nsec;
	const char *xattr;		/* "user.x" = "v" when set */
};

static void setup(void)
{
	snprintf(tmp, sizeof(tmp), "/tmp/kiln-test-tar.XXXXXX");
	CHECK(mkdtemp(tmp) != NULL);
	snprintf(tar_path, sizeof(tar_path), "%s/in.tar", tmp);
	snprintf(img_path, sizeof(img_path), "%s/out.erofs", tmp);
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	CHECK(system(cmd) == 0);
}

/* Write @ents as a pax archive at tar_path (hardlinks: type 0). */
static void write_tar(const struct ent *ents, size_t n)
{
	struct archive *a = archive_write_new();
	struct archive_entry *e = archive_entry_new();

	CHECK(archive_write_set_format_pax(a) == ARCHIVE_OK);
	CHECK(archive_write_open_filename(a, tar_path) == ARCHIVE_OK);
	for (size_t i = 0; i < n; i++) {
		const struct ent *x = &ents[i];
		size_t len = x->data ? strlen(x->data) : 0;

		archive_entry_clear(e);
		archive_entry_set_pathname(e, x->name);
		archive_entry_set_mtime(e, x->mtime ? x->mtime : 1600000000,
					x->nsec);
		archive_entry_set_uid(e, 1000);
		archive_entry_set_gid(e, 2000);
		if (!x->type) {
			archive_entry_set_hardlink(e, x->data);
		} else {
			archive_entry_set_filetype(e, x->type);
			archive_entry_set_perm(e, x->perm ? x->perm : 0644);
		}
		if (x->type == AE_IFLNK)
			archive_entry_set_symlink(e, x->data);
		if (x->type == AE_IFREG)
			archive_entry_set_size(e, (la_int64_t)len);
		if (x->xattr)
			archive_entry_xattr_add_entry(e, x->xattr, "v", 1);
		CHECK(archive_write_header(a, e) == ARCHIVE_OK);
		if (x->type == AE_IFREG && len)
			CHECK(archive_write_data(a, x->data, len) ==
			      (la_ssize_t)len);
	}
	archive_entry_free(e);
	CHECK(archive_write_close(a) == ARCHIVE_OK);
	archive_write_free(a);
}

static int build(unsigned int flags)
{
	struct kiln_build_opts o = {
		.struct_size = sizeof(o),
		.source_kind = KILN_SOURCE_TAR,
		.flags = flags,
	};

	return kiln_build(tar_path, img_path, &o, NULL);
}

static int build_opts(enum kiln_whiteouts wh, uint32_t uid_offset)
{
	struct kiln_build_opts o;

	kiln_build_opts_init(&o);
	o.source_kind = KILN_SOURCE_TAR;
	o.whiteouts = wh;
	o.uid_offset = uid_offset;
	o.gid_offset = 5;
	return kiln_build(tar_path, img_path, &o, NULL);
}

static struct kiln_image *open_image(void)
{
	struct kiln_image *img = NULL;

	CHECK_EQ(kiln_image_open(&img, img_path, NULL), 0);
	if (!img) {
		printf("# cannot open %s: stopping\n", img_path);
		exit(1);
	}
	return img;
}

static void stat_path(struct kiln_image *img, const char *path,
		      struct kiln_stat *st)
{
	kiln_nid_t nid;

	CHECK_EQ(kiln_resolve(img, path, 0, &nid), 0);
	CHECK_EQ(kiln_stat_nid(img, nid, st), 0);
}

static void check_data(struct kiln_image *img, const char *path,
		       const char *want)
{
	struct kiln_file *f;
	char buf[256];
	kiln_nid_t nid;
	ssize_t n;

	CHECK_EQ(kiln_resolve(img, path, 0, &nid), 0);
	CHECK_EQ(kiln_file_open(img, nid, &f), 0);
	n = kiln_file_pread(f, buf, sizeof(buf), 0);
	CHECK_EQ(n, (ssize_t)strlen(want));
	CHECK(!memcmp(buf, want, strlen(want)));
	kiln_file_close(f);
}

TEST(entries_become_the_tree_with_their_attributes)
{
	static const struct ent ents[] = {
		{ "./", AE_IFDIR, 0750, NULL, 1500000000, 5, NULL },
		{ "d/sub/file", AE_IFREG, 0640, "content", 1600000001, 7,
		  "user.x" },
		{ "d/link", AE_IFLNK, 0777, "sub/file", 0, 0, NULL },
		{ "d/hard", 0, 0, "d/sub/file", 0, 0, NULL },
		{ "fifo", AE_IFIFO, 0600, NULL, 0, 0, NULL },
	};
	struct kiln_image *img;
	struct kiln_stat st;
	char buf[64];
	kiln_nid_t nid;

	setup();
	write_tar(ents, KILN_ARRAY_SIZE(ents));
	CHECK_EQ(build(KILN_BUILD_VERIFY), 0);
	img = open_image();
	stat_path(img, "/", &st);
	CHECK_EQ(st.mode, (uint32_t)(S_IFDIR | 0750));
	CHECK_EQ(st.mtime, 1500000000);
	CHECK_EQ(st.mtime_nsec, 5u);
	CHECK_EQ(st.nlink, 3u);
	/* an implicit parent: 0755, root's, the build time (newest mtime) */
	stat_path(img, "/d", &st);
	CHECK_EQ(st.mode, (uint32_t)(S_IFDIR | 0755));
	CHECK_EQ(st.uid, 0u);
	CHECK_EQ(st.mtime, 1600000001);
	stat_path(img, "/d/sub/file", &st);
	CHECK_EQ(st.mode, (uint32_t)(S_IFREG | 0640));
	CHECK_EQ(st.uid, 1000u);
	CHECK_EQ(st.gid, 2000u);
	CHECK_EQ(st.nlink, 2u);
	CHECK_EQ(st.mtime_nsec, 7u);
	check_data(img, "/d/hard", "content");
	CHECK_EQ(kiln_resolve(img, "/d/sub/file", 0, &nid), 0);
	CHECK_EQ(kiln_getxattr(img, nid, "user.x", buf, sizeof(buf)), 1);
	CHECK_EQ(kiln_resolve(img, "/d/link", 0, &nid), 0);
	CHECK_EQ(kiln_readlink(img, nid, buf, sizeof(buf)), 8);
	CHECK(!strcmp(buf, "sub/file"));
	stat_path(img, "/fifo", &st);
	CHECK(S_ISFIFO(st.mode));
	kiln_image_close(img);
	teardown();
}

TEST(later_entries_replace_earlier_ones)
{
	static const struct ent ents[] = {
		{ "f", AE_IFREG, 0600, "old", 0, 0, NULL },
		{ "keep", 0, 0, "f", 0, 0, NULL },
		{ "f", AE_IFREG, 0644, "new!", 0, 0, NULL },
		{ "d/x", AE_IFREG, 0644, "gone", 0, 0, NULL },
		{ "d", AE_IFLNK, 0777, "f", 0, 0, NULL },
	};
	struct kiln_image *img;
	struct kiln_stat st;

	setup();
	write_tar(ents, KILN_ARRAY_SIZE(ents));
	CHECK_EQ(build(KILN_BUILD_VERIFY), 0);
	img = open_image();
	check_data(img, "/f", "new!");
	check_data(img, "/keep", "old");
	stat_path(img, "/keep", &st);
	CHECK_EQ(st.nlink, 1u);
	stat_path(img, "/d", &st);
	CHECK(S_ISLNK(st.mode));
	stat_path(img, "/", &st);
	CHECK_EQ(st.nlink, 2u);
	kiln_image_close(img);
	teardown();
}

TEST(dotdot_and_missing_hardlink_targets_fail_without_an_image)
{
	static const struct ent dotdot[] = {
		{ "a/../../b", AE_IFREG, 0644, "x", 0, 0, NULL },
	};
	static const struct ent dangling[] = {
		{ "l", 0, 0, "nowhere", 0, 0, NULL },
	};

	setup();
	write_tar(dotdot, KILN_ARRAY_SIZE(dotdot));
	CHECK(build(0) < 0);
	CHECK(access(img_path, F_OK) != 0);
	write_tar(dangling, KILN_ARRAY_SIZE(dangling));
	CHECK_EQ(build(0), -ENOENT);
	CHECK(access(img_path, F_OK) != 0);
	teardown();
}

TEST(truncated_archive_fails_without_an_image)
{
	static char big[100000];
	struct ent ents[] = {
		{ "big", AE_IFREG, 0644, big, 0, 0, NULL },
	};
	struct stat st;

	memset(big, 'q', sizeof(big) - 1);
	setup();
	write_tar(ents, KILN_ARRAY_SIZE(ents));
	CHECK_EQ(stat(tar_path, &st), 0);
	CHECK_EQ(truncate(tar_path, st.st_size / 2), 0);
	CHECK(build(KILN_BUILD_VERIFY) < 0);
	CHECK(access(img_path, F_OK) != 0);
	teardown();
}

static const struct ent layer[] = {
	{ "d/", AE_IFDIR, 0755, NULL, 0, 0, NULL },
	{ "d/.wh.gone", AE_IFREG, 0600, NULL, 1700000000, 0, NULL },
	{ "d/.wh..wh..opq", AE_IFREG, 0644, NULL, 0, 0, NULL },
	{ "d/.wh..wh.plnk", AE_IFREG, 0644, NULL, 0, 0, NULL },
	{ "d/kept", AE_IFREG, 0644, "k", 0, 0, NULL },
	{ "e/f/.wh..wh..opq", AE_IFREG, 0644, NULL, 0, 0, NULL },
	{ ".wh.top", AE_IFREG, 0644, NULL, 0, 0, NULL },
};

static bool has_name(struct kiln_image *img, const char *path)
{
	kiln_nid_t nid;

	return kiln_resolve(img, path, 0, &nid) == 0;
}

static ssize_t opaque_of(struct kiln_image *img, const char *path, char *v)
{
	kiln_nid_t nid;

	CHECK_EQ(kiln_resolve(img, path, 0, &nid), 0);
	return kiln_getxattr(img, nid, "trusted.overlay.opaque", v, 8);
}

TEST(whiteouts_become_overlay_whiteouts_by_default_for_tar)
{
	struct kiln_image *img;
	struct kiln_stat st;
	char v[8];

	setup();
	write_tar(layer, KILN_ARRAY_SIZE(layer));
	CHECK_EQ(build_opts(KILN_WHITEOUTS_AUTO, 0), 0);
	img = open_image();
	stat_path(img, "/d/gone", &st);
	CHECK_EQ(st.mode, S_IFCHR | 0600);
	CHECK_EQ(st.rdev_major, 0);
	CHECK_EQ(st.rdev_minor, 0);
	CHECK_EQ(st.mtime, 1700000000);
	stat_path(img, "/top", &st);
	CHECK(S_ISCHR(st.mode));
	CHECK(!has_name(img, "/d/.wh.gone"));
	CHECK(!has_name(img, "/d/.wh..wh..opq"));
	CHECK(!has_name(img, "/d/.wh..wh.plnk"));
	CHECK(has_name(img, "/d/kept"));
	CHECK_EQ(opaque_of(img, "/d", v), 1);
	CHECK(v[0] == 'y');
	/* the parents of whiteouts: an empty origin for overlayfs */
	{
		kiln_nid_t nid;

		CHECK_EQ(kiln_resolve(img, "/d", 0, &nid), 0);
		CHECK_EQ(kiln_getxattr(img, nid, "trusted.overlay.origin", v,
				       8), 0);
		CHECK_EQ(kiln_getxattr(img, kiln_image_root(img),
				       "trusted.overlay.origin", v, 8), 0);
		CHECK_EQ(kiln_resolve(img, "/e/f", 0, &nid), 0);
		CHECK_EQ(kiln_getxattr(img, nid, "trusted.overlay.origin", v,
				       8), -ENODATA);
	}
	/* a marker alone makes its directories */
	stat_path(img, "/e/f", &st);
	CHECK(S_ISDIR(st.mode));
	CHECK_EQ(opaque_of(img, "/e/f", v), 1);
	CHECK(opaque_of(img, "/e", v) < 0);
	kiln_image_close(img);
	teardown();
}

TEST(whiteouts_kept_or_stripped_when_asked)
{
	struct kiln_image *img;
	struct kiln_stat st;
	char v[8];

	setup();
	write_tar(layer, KILN_ARRAY_SIZE(layer));
	CHECK_EQ(build_opts(KILN_WHITEOUTS_KEEP, 0), 0);
	img = open_image();
	stat_path(img, "/d/.wh.gone", &st);
	CHECK(S_ISREG(st.mode));
	CHECK(has_name(img, "/d/.wh..wh..opq"));
	CHECK(!has_name(img, "/d/gone"));
	kiln_image_close(img);
	CHECK_EQ(build_opts(KILN_WHITEOUTS_STRIP, 0), 0);
	img = open_image();
	CHECK(!has_name(img, "/d/gone"));
	CHECK(!has_name(img, "/d/.wh.gone"));
	CHECK(!has_name(img, "/d/.wh..wh..opq"));
	CHECK(!has_name(img, "/top"));
	CHECK(has_name(img, "/d/kept"));
	CHECK(opaque_of(img, "/d", v) < 0);
	kiln_image_close(img);
	teardown();
}

TEST(whiteout_and_member_of_one_name_later_wins)
{
	static const struct ent ents[] = {
		{ "a", AE_IFREG, 0644, "real", 0, 0, NULL },
		{ ".wh.a", AE_IFREG, 0644, NULL, 0, 0, NULL },
		{ ".wh.b", AE_IFREG, 0644, NULL, 0, 0, NULL },
		{ "b", AE_IFREG, 0644, "real", 0, 0, NULL },
	};
	struct kiln_image *img;
	struct kiln_stat st;

	setup();
	write_tar(ents, KILN_ARRAY_SIZE(ents));
	CHECK_EQ(build_opts(KILN_WHITEOUTS_OVERLAY, 0), 0);
	img = open_image();
	stat_path(img, "/a", &st);
	CHECK(S_ISCHR(st.mode));
	stat_path(img, "/b", &st);
	CHECK(S_ISREG(st.mode));
	check_data(img, "/b", "real");
	kiln_image_close(img);
	teardown();
}

TEST(whiteout_naming_nothing_fails)
{
	static const struct ent ents[] = {
		{ "d/.wh..", AE_IFREG, 0644, NULL, 0, 0, NULL },
	};

	setup();
	write_tar(ents, KILN_ARRAY_SIZE(ents));
	CHECK_EQ(build_opts(KILN_WHITEOUTS_OVERLAY, 0), -EINVAL);
	CHECK(access(img_path, F_OK) != 0);
	teardown();
}

TEST(uid_offsets_add_and_overflow_fails)
{
	static const struct ent ents[] = {
		{ "f", AE_IFREG, 0644, "x", 0, 0, NULL },
	};
	struct kiln_image *img;
	struct kiln_stat st;

	setup();
	write_tar(ents, KILN_ARRAY_SIZE(ents));
	CHECK_EQ(build_opts(KILN_WHITEOUTS_AUTO, 100000), 0);
	img = open_image();
	stat_path(img, "/f", &st);
	CHECK_EQ(st.uid, 101000);
	CHECK_EQ(st.gid, 2005);
	/* the implicit root gets the offsets too */
	stat_path(img, "/", &st);
	CHECK_EQ(st.uid, 100000);
	kiln_image_close(img);
	CHECK_EQ(unlink(img_path), 0);
	CHECK_EQ(build_opts(KILN_WHITEOUTS_AUTO, UINT32_MAX - 999), -ERANGE);
	CHECK(access(img_path, F_OK) != 0);
	teardown();
}

TAP_MAIN(TAP_ENTRY(entries_become_the_tree_with_their_attributes),
	 TAP_ENTRY(later_entries_replace_earlier_ones),
	 TAP_ENTRY(dotdot_and_missing_hardlink_targets_fail_without_an_image),
	 TAP_ENTRY(truncated_archive_fails_without_an_image),
	 TAP_ENTRY(whiteouts_become_overlay_whiteouts_by_default_for_tar),
	 TAP_ENTRY(whiteouts_kept_or_stripped_when_asked),
	 TAP_ENTRY(whiteout_and_member_of_one_name_later_wins),
	 TAP_ENTRY(whiteout_naming_nothing_fails),
	 TAP_ENTRY(uid_offsets_add_and_overflow_fails))
