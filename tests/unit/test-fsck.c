// SPDX-License-Identifier: MIT
/*
 * Tests for lib/check: kiln_fsck() passes images made by mkfs.erofs and
 * finds what was broken in them on purpose.
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include <kiln/fsck.h>
#include <kiln/image.h>

#include "util/endian.h"
#include "mkfs-fixture.h"
#include "tap.h"

struct problems {
	unsigned int count;
	char first[512];
};

static int note_problem(void *ctx, const struct kiln_fsck_problem *p)
{
	struct problems *pr = ctx;

	if (!pr->count++)
		snprintf(pr->first, sizeof(pr->first), "%s: %s", p->path,
			 p->what);
	return 0;
}

/* Open @image and check it; returns kiln_fsck()'s result (-999: no open). */
static int fsck(struct fixture *fx, const char *image,
		struct kiln_fsck_report *rep, struct problems *pr)
{
	struct kiln_fsck_opts opts = {
		.struct_size = sizeof(opts),
		.problem = note_problem,
		.ctx = pr,
	};
	struct kiln_image *img;
	int err;

	memset(pr, 0, sizeof(*pr));
	err = kiln_image_open(&img, fixture_path(fx, image), NULL);
	if (err)
		return err == -KILN_ECORRUPT ? err : -999;
	err = kiln_fsck(img, &opts, rep);
	kiln_image_close(img);
	if (pr->count)
		printf("# first problem: %s\n", pr->first);
	return err;
}

/* Byte offset of the inode at @path and whether it is extended. */
static bool inode_of(struct fixture *fx, const char *image, const char *path,
		     uint64_t *off, bool *extended)
{
	struct kiln_image_info info;
	struct kiln_image *img;
	unsigned char fmt[2];
	kiln_nid_t nid;
	bool ok = false;
	FILE *f;

	if (kiln_image_open(&img, fixture_path(fx, image), NULL))
		return false;
	kiln_image_get_info(img, &info);
	if (!kiln_resolve(img, path, 0, &nid)) {
		*off = (uint64_t)info.meta_blkaddr * info.block_size + nid * 32;
		ok = true;
	}
	kiln_image_close(img);
	f = fopen(fixture_path(fx, image), "rb");
	if (!f)
		return false;
	ok = ok && fseek(f, (long)*off, SEEK_SET) == 0 &&
	     fread(fmt, 1, 2, f) == 2;
	fclose(f);
	*extended = fmt[0] & 1;
	return ok;
}

/* Store @nlink in the inode at @path. */
static bool set_nlink(struct fixture *fx, const char *image, const char *path,
		      uint32_t nlink)
{
	unsigned char raw[4];
	bool extended;
	uint64_t off;

	if (!inode_of(fx, image, path, &off, &extended))
		return false;
	if (extended) {
		kiln_put_le32(raw, nlink);
		return fixture_poke(fx, image, off + 44, raw, 4);
	}
	kiln_put_le16(raw, (uint16_t)nlink);
	return fixture_poke(fx, image, off + 6, raw, 2);
}

#define NEED_MKFS()							\
	do {								\
		if (!have_mkfs_erofs())					\
			SKIP("mkfs.erofs not found");			\
	} while (0)

static const char tree[] =
	"mkdir -p src/a/b src/c && echo one > src/a/f && ln src/a/f src/c/g "
	"&& ln -s a/f src/s && mkfifo src/p && "
	"head -c 50000 /dev/urandom > src/a/b/big && "
	"(setfattr -n user.x -v 1 src/a/f 2>/dev/null || true)";

TEST(sound_image_is_clean_and_counted)
{
	struct kiln_fsck_report rep;
	struct problems pr;
	struct fixture fx;

	NEED_MKFS();
	if (!fixture_init(&fx))
		return;
	CHECK(fixture_sh(&fx, tree));
	CHECK(fixture_mkfs(&fx, "src", "img"));
	CHECK_EQ(fsck(&fx, "img", &rep, &pr), 0);
	CHECK_EQ(rep.problems, 0);
	CHECK_EQ(rep.directories, 4);
	CHECK_EQ(rep.regular_files, 2);
	CHECK_EQ(rep.symlinks, 1);
	CHECK_EQ(rep.fifos, 1);
	CHECK_EQ(rep.extra_links, 1);
	CHECK_EQ(rep.data_bytes, 50004);
	CHECK_EQ(rep.bytes_read, 50004 + 3);
	fixture_done(&fx);
}

TEST(wrong_file_nlink_is_found)
{
	struct kiln_fsck_report rep;
	struct problems pr;
	struct fixture fx;

	NEED_MKFS();
	if (!fixture_init(&fx))
		return;
	CHECK(fixture_sh(&fx, tree));
	CHECK(fixture_mkfs(&fx, "src", "img"));
	CHECK(fixture_sh(&fx, "cp img img1"));
	CHECK(set_nlink(&fx, "img", "/a/f", 3));
	CHECK_EQ(fsck(&fx, "img", &rep, &pr), -KILN_ECORRUPT);
	CHECK_EQ(pr.count, 1);
	CHECK(strstr(pr.first, "only 2 names") != NULL);
	CHECK(set_nlink(&fx, "img1", "/a/f", 1));
	CHECK_EQ(fsck(&fx, "img1", &rep, &pr), -KILN_ECORRUPT);
	CHECK_EQ(pr.count, 1);
	fixture_done(&fx);
}

TEST(wrong_directory_nlink_is_found)
{
	struct kiln_fsck_report rep;
	struct problems pr;
	struct fixture fx;

	NEED_MKFS();
	if (!fixture_init(&fx))
		return;
	CHECK(fixture_sh(&fx, tree));
	CHECK(fixture_mkfs(&fx, "src", "img"));
	CHECK(set_nlink(&fx, "img", "/a", 7));
	CHECK_EQ(fsck(&fx, "img", &rep, &pr), -KILN_ECORRUPT);
	CHECK_EQ(pr.count, 1);
	CHECK(strstr(pr.first, "/a:") == pr.first);
	fixture_done(&fx);
}

TEST(duplicate_name_is_found)
{
	struct kiln_fsck_report rep;
	struct problems pr;
	struct fixture fx;

	NEED_MKFS();
	if (!fixture_init(&fx))
		return;
	CHECK(fixture_sh(&fx, "mkdir -p src/QQQ2 && echo 1 > src/QQQ1"));
	CHECK(fixture_mkfs(&fx, "src", "img"));
	CHECK(fixture_patch(&fx, "img", "QQQ2", "QQQ1"));
	CHECK_EQ(fsck(&fx, "img", &rep, &pr), -KILN_ECORRUPT);
	CHECK(pr.count >= 1);
	fixture_done(&fx);
}

TEST(directory_cycle_ends_with_a_problem)
{
	struct kiln_fsck_report rep;
	struct kiln_image *img;
	struct problems pr;
	struct fixture fx;
	kiln_nid_t a, c;
	char old[9], new_[9];

	NEED_MKFS();
	if (!fixture_init(&fx))
		return;
	CHECK(fixture_sh(&fx, "mkdir -p src/a/b/c"));
	CHECK(fixture_mkfs(&fx, "src", "img"));
	CHECK(kiln_image_open(&img, fixture_path(&fx, "img"), NULL) == 0);
	CHECK(kiln_resolve(img, "/a", 0, &a) == 0);
	CHECK(kiln_resolve(img, "/a/b/c", 0, &c) == 0);
	kiln_image_close(img);
	/*
	 * The dirent for "c" in b: nid (8 bytes) then nameoff; the nid of c
	 * also appears as "." inside c, so match the nameoff too: b holds
	 * ".", ".." and "c", names from byte 36, so "c" is at 36 + 1 + 2.
	 */
	kiln_put_le64(old, c);
	kiln_put_le64(new_, a);
	old[8] = new_[8] = 39;
	CHECK(fixture_patch_bytes(&fx, "img", old, new_, 9) ||
	      (printf("# dirent pattern not unique\n"), false));
	CHECK_EQ(fsck(&fx, "img", &rep, &pr), -KILN_ECORRUPT);
	CHECK(pr.count >= 1);
	CHECK(strstr(pr.first, "second name") != NULL);
	fixture_done(&fx);
}

TEST(truncated_image_is_corrupt)
{
	struct kiln_fsck_report rep;
	struct problems pr;
	struct fixture fx;

	NEED_MKFS();
	if (!fixture_init(&fx))
		return;
	CHECK(fixture_sh(&fx, tree));
	CHECK(fixture_mkfs(&fx, "src", "img"));
	CHECK(fixture_sh(&fx, "truncate -s -4096 img"));
	CHECK_EQ(fsck(&fx, "img", &rep, &pr), -KILN_ECORRUPT);
	fixture_done(&fx);
}

TAP_MAIN(TAP_ENTRY(sound_image_is_clean_and_counted),
	 TAP_ENTRY(wrong_file_nlink_is_found),
	 TAP_ENTRY(wrong_directory_nlink_is_found),
	 TAP_ENTRY(duplicate_name_is_found),
	 TAP_ENTRY(directory_cycle_ends_with_a_problem),
	 TAP_ENTRY(truncated_image_is_corrupt))
