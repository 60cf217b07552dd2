// SPDX-License-Identifier: MIT
/*
 * Tests for lib/extract: images made by mkfs.erofs are extracted and
 * compared with their source; crafted names and symlinks must not make
 * anything land outside the destination.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <kiln/extract.h>
#include <kiln/image.h>

#include "mkfs-fixture.h"
#include "tap.h"

static struct kiln_image *open_image(struct fixture *fx, const char *name)
{
	struct kiln_image *img = NULL;

	if (kiln_image_open(&img, fixture_path(fx, name), NULL))
		return NULL;
	return img;
}

static int extract(struct fixture *fx, const char *image, const char *src,
		   const char *dest, unsigned int flags,
		   struct kiln_extract_stats *stats)
{
	struct kiln_extract_opts opts = {
		.struct_size = sizeof(opts),
		.flags = flags,
	};
	struct kiln_image *img = open_image(fx, image);
	char dpath[512];
	int err;

	if (!img)
		return -999;
	snprintf(dpath, sizeof(dpath), "%s", fixture_path(fx, dest));
	err = kiln_extract(img, src, dpath, &opts, stats);
	kiln_image_close(img);
	return err;
}

static bool exists(struct fixture *fx, const char *rel)
{
	struct stat st;

	return lstat(fixture_path(fx, rel), &st) == 0;
}

#define NEED_MKFS()							\
	do {								\
		if (!have_mkfs_erofs())					\
			SKIP("mkfs.erofs not found");			\
	} while (0)

TEST(extract_matches_source_tree)
{
	struct kiln_extract_stats stats;
	struct fixture fx;
	struct stat a, b;
	char buf[64];
	ssize_t n;

	NEED_MKFS();
	if (!fixture_init(&fx))
		return;
	CHECK(fixture_sh(&fx,
		"mkdir -p src/d/e && echo hello > src/d/f && "
		"head -c 70000 /dev/urandom > src/d/e/big && "
		"ln src/d/f src/hl && ln -s d/f src/sl && mkfifo src/fifo && "
		"truncate -s 3M src/sparse && "
		"printf x | dd of=src/sparse bs=1 seek=2000000 conv=notrunc "
		"2>/dev/null && chmod 4751 src/d/f && chmod 0500 src/d/e && "
		"touch -h -d '2001-02-03 04:05:06.123456789' src/sl src/d/e && "
		"(setfattr -n user.k -v val src/d/f 2>/dev/null || true)"));
	CHECK(fixture_mkfs(&fx, "src", "img"));
	CHECK_EQ(extract(&fx, "img", "/", "out", 0, &stats), 0);
	CHECK_EQ(stats.errors, 0);
	CHECK_EQ(stats.hardlinks, 1);
	CHECK(fixture_sh(&fx, "cmp src/d/f out/d/f && cmp src/d/e/big "
			      "out/d/e/big && cmp src/sparse out/sparse"));

	CHECK(lstat(fixture_path(&fx, "src/d/f"), &a) == 0);
	CHECK(lstat(fixture_path(&fx, "out/d/f"), &b) == 0);
	CHECK_EQ(b.st_mode, a.st_mode);
	CHECK_EQ(b.st_nlink, 2);
	CHECK(lstat(fixture_path(&fx, "out/hl"), &a) == 0);
	CHECK(a.st_ino == b.st_ino);

	CHECK(lstat(fixture_path(&fx, "out/d/e"), &b) == 0);
	CHECK_EQ(b.st_mode & 07777, 0500);
	CHECK_EQ(b.st_mtim.tv_sec, 981173106);
	CHECK_EQ(b.st_mtim.tv_nsec, 123456789);
	CHECK(lstat(fixture_path(&fx, "out/sl"), &b) == 0);
	CHECK(S_ISLNK(b.st_mode));
	CHECK_EQ(b.st_mtim.tv_nsec, 123456789);
	n = readlink(fixture_path(&fx, "out/sl"), buf, sizeof(buf));
	CHECK(n == 3 && !memcmp(buf, "d/f", 3));
	CHECK(lstat(fixture_path(&fx, "out/fifo"), &b) == 0);
	CHECK(S_ISFIFO(b.st_mode));

	/* the 3 MiB file holds one byte of data: it must come out sparse */
	CHECK(lstat(fixture_path(&fx, "out/sparse"), &b) == 0);
	CHECK_EQ(b.st_size, 3 << 20);
	CHECK(b.st_blocks * 512 < 1 << 20);

	n = getxattr(fixture_path(&fx, "src/d/f"), "user.k", buf, sizeof(buf));
	if (n > 0) {
		CHECK_EQ(getxattr(fixture_path(&fx, "out/d/f"), "user.k", buf,
				  sizeof(buf)), 3);
		CHECK(!memcmp(buf, "val", 3));
	}
	fixture_done(&fx);
}

TEST(existing_files_need_force)
{
	struct kiln_extract_stats stats;
	struct fixture fx;

	NEED_MKFS();
	if (!fixture_init(&fx))
		return;
	CHECK(fixture_sh(&fx, "mkdir -p src/d && echo a > src/d/f && "
			      "mkdir out && echo old > out/x && "
			      "mkdir src2 && echo new > src2/x"));
	CHECK(fixture_mkfs(&fx, "src", "img"));
	CHECK(fixture_mkfs(&fx, "src2", "img2"));
	/* an existing destination directory is fine, as are merged dirs */
	CHECK_EQ(extract(&fx, "img", NULL, "out", 0, &stats), 0);
	CHECK_EQ(extract(&fx, "img", NULL, "out", 0, &stats), -EEXIST);
	CHECK_EQ(stats.errors, 1);
	CHECK_EQ(extract(&fx, "img2", NULL, "out", 0, &stats), -EEXIST);
	CHECK(fixture_sh(&fx, "grep -q old out/x"));
	CHECK_EQ(extract(&fx, "img2", NULL, "out", KILN_EXTRACT_FORCE,
			 &stats), 0);
	CHECK(fixture_sh(&fx, "grep -q new out/x"));
	fixture_done(&fx);
}

TEST(single_file_goes_to_dest_slash_name)
{
	struct kiln_extract_stats stats;
	struct fixture fx;

	NEED_MKFS();
	if (!fixture_init(&fx))
		return;
	CHECK(fixture_sh(&fx, "mkdir -p src/a/b && echo hi > src/a/b/file"));
	CHECK(fixture_mkfs(&fx, "src", "img"));
	CHECK_EQ(extract(&fx, "img", "a/b/file", "out", 0, &stats), 0);
	CHECK(fixture_sh(&fx, "grep -q hi out/file"));
	CHECK_EQ(extract(&fx, "img", "/a", "out2", 0, &stats), 0);
	CHECK(fixture_sh(&fx, "grep -q hi out2/b/file"));
	CHECK_EQ(extract(&fx, "img", "/missing", "out3", 0, &stats), -ENOENT);
	fixture_done(&fx);
}

TEST(dotdot_slash_name_does_not_escape)
{
	struct kiln_extract_stats stats;
	struct fixture fx;
	int err;

	NEED_MKFS();
	if (!fixture_init(&fx))
		return;
	CHECK(fixture_sh(&fx, "mkdir -p src deep && echo evil > src/..zx && "
			      "echo fine > src/ok"));
	CHECK(fixture_mkfs(&fx, "src", "img"));
	CHECK(fixture_patch(&fx, "img", "..zx", "../x"));
	err = extract(&fx, "img", NULL, "deep/out", 0, &stats);
	CHECK(err < 0);
	CHECK_EQ(stats.errors, 1);
	CHECK(!exists(&fx, "deep/x"));
	CHECK(!exists(&fx, "x"));
	CHECK(exists(&fx, "deep/out/ok"));
	fixture_done(&fx);
}

TEST(slash_in_name_is_refused)
{
	struct kiln_extract_stats stats;
	struct fixture fx;

	NEED_MKFS();
	if (!fixture_init(&fx))
		return;
	CHECK(fixture_sh(&fx, "mkdir -p src && echo a > src/aQb && "
			      "echo b > src/zz"));
	CHECK(fixture_mkfs(&fx, "src", "img"));
	CHECK(fixture_patch(&fx, "img", "aQb", "a/b"));
	CHECK(extract(&fx, "img", NULL, "out", 0, &stats) < 0);
	CHECK_EQ(stats.errors, 1);
	CHECK(!exists(&fx, "out/a"));
	CHECK(!exists(&fx, "out/b"));
	fixture_done(&fx);
}

/*
 * A symlink "L" to a directory outside, then a directory also named "L"
 * holding a file: the file must never be written through the symlink,
 * with or without --force.
 */
TEST(directory_behind_symlink_of_same_name_stays_inside)
{
	struct kiln_extract_stats stats;
	struct fixture fx;
	char script[512];

	NEED_MKFS();
	if (!fixture_init(&fx))
		return;
	snprintf(script, sizeof(script),
		 "mkdir -p src/QQQ2 outside && ln -s '%s/outside' src/QQQ1 && "
		 "echo evil > src/QQQ2/payload", fx.dir);
	CHECK(fixture_sh(&fx, script));
	CHECK(fixture_mkfs(&fx, "src", "img"));
	CHECK(fixture_patch(&fx, "img", "QQQ2", "QQQ1"));
	CHECK(extract(&fx, "img", NULL, "out", 0, &stats) < 0);
	CHECK(!exists(&fx, "outside/payload"));
	extract(&fx, "img", NULL, "out", KILN_EXTRACT_FORCE, &stats);
	CHECK(!exists(&fx, "outside/payload"));
	CHECK(fixture_sh(&fx, "test -z \"$(ls -A outside)\""));
	fixture_done(&fx);
}

TEST(fail_fast_stops_at_first_error)
{
	struct kiln_extract_stats stats;
	struct fixture fx;

	NEED_MKFS();
	if (!fixture_init(&fx))
		return;
	CHECK(fixture_sh(&fx, "mkdir -p src out && for i in 1 2 3; do "
			      "echo $i > src/f$i; echo x > out/f$i; done"));
	CHECK(fixture_mkfs(&fx, "src", "img"));
	CHECK_EQ(extract(&fx, "img", NULL, "out", 0, &stats), -EEXIST);
	CHECK_EQ(stats.errors, 3);
	CHECK_EQ(extract(&fx, "img", NULL, "out", KILN_EXTRACT_FAIL_FAST,
			 &stats), -EEXIST);
	CHECK_EQ(stats.errors, 1);
	fixture_done(&fx);
}

TAP_MAIN(TAP_ENTRY(extract_matches_source_tree),
	 TAP_ENTRY(existing_files_need_force),
	 TAP_ENTRY(single_file_goes_to_dest_slash_name),
	 TAP_ENTRY(dotdot_slash_name_does_not_escape),
	 TAP_ENTRY(slash_in_name_is_refused),
	 TAP_ENTRY(directory_behind_symlink_of_same_name_stays_inside),
	 TAP_ENTRY(fail_fast_stops_at_first_error))
