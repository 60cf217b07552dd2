// SPDX-License-Identifier: MIT
/*
 * Tests for kiln_build() as a whole: reproducible bytes, the superblock,
 * compact inodes under a fixed mtime, and what a failed build leaves.
 */
#include <dirent.h>
#include <fcntl.h>
#include <isa-l/crc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <kiln/builder.h>

#include "format/erofs_fs.h"
#include "util/checked.h"
#include "util/endian.h"
#include "build-fixture.h"

/* @rel below src/. */
static void put_src(const char *rel, const void *data, size_t len)
{
	char path[256];

	snprintf(path, sizeof(path), "src/%s", rel);
	scratch_write(path, data, len);
}

static void make_tree(void)
{
	static char big[10000];
	char path[256];

	scratch_make("build");
	snprintf(path, sizeof(path), "%s/src/dir", tmp);
	CHECK(mkdir(path, 0755) == 0);
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (char)(i * 7 + i / 100);
	put_src("a", "hello\n", 6);
	put_src("dir/big", big, sizeof(big));
	put_src("empty", "", 0);
	snprintf(path, sizeof(path), "%s/src/link", tmp);
	CHECK(symlink("dir/big", path) == 0);
}

static int build(const char *image, const struct kiln_build_opts *opts)
{
	char src[128], img[128];

	snprintf(src, sizeof(src), "%s/src", tmp);
	snprintf(img, sizeof(img), "%s/%s", tmp, image);
	return kiln_build(src, img, opts, NULL);
}

/* Entries in the temp directory besides src and the named images. */
static int stray_files(void)
{
	DIR *d = opendir(tmp);
	struct dirent *de;
	int n = 0;

	while ((de = readdir(d)))
		if (de->d_name[0] == '.' && strcmp(de->d_name, ".") &&
		    strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

TEST(same_input_gives_identical_bytes)
{
	size_t la, lb;
	uint8_t *a, *b;

	make_tree();
	CHECK_EQ(build("a.img", NULL), 0);
	CHECK_EQ(build("b.img", NULL), 0);
	a = scratch_load("a.img", &la);
	b = scratch_load("b.img", &lb);
	CHECK(a && b && la == lb && !memcmp(a, b, la));
	CHECK_EQ(la % 4096, 0);
	free(a);
	free(b);
	scratch_remove();
}

TEST(superblock_checksum_and_root_are_valid)
{
	struct kiln_build_opts opts = { .struct_size = sizeof(opts),
		.volume_label = "kiln-test" };
	uint8_t *img, copy[4096 - 1024];
	size_t len;
	uint32_t crc;

	make_tree();
	CHECK_EQ(build("a.img", &opts), 0);
	img = scratch_load("a.img", &len);
	CHECK(img && len >= 4096);
	CHECK_EQ(kiln_get_le32(img + 1024), EROFS_SUPER_MAGIC);
	CHECK_EQ(img[1024 + 12], 12);		/* blkszbits */
	CHECK(kiln_get_le32(img + 1024 + 8) & EROFS_FEATURE_COMPAT_SB_CHKSUM);
	memcpy(copy, img + 1024, sizeof(copy));
	kiln_put_le32(copy + 4, 0);
	crc = crc32_iscsi(copy, sizeof(copy), EROFS_SB_CRC_SEED);
	CHECK_EQ(crc, kiln_get_le32(img + 1024 + 4));
	/* root nid: the first inode slot after meta_blkaddr's block */
	CHECK_EQ(kiln_get_le16(img + 1024 + 14), 4096 / 32);
	CHECK(!memcmp(img + 1024 + 0x40, "kiln-test", 10));
	CHECK_EQ(kiln_get_le32(img + 1024 + 0x24), len / 4096);	/* blocks */
	CHECK_EQ(kiln_get_le64(img + 1024 + 0x10), 6);	/* inos */
	/* the UUID is a version 8 / variant 10 content hash */
	CHECK_EQ(img[1024 + 0x30 + 6] >> 4, 8);
	CHECK_EQ(img[1024 + 0x30 + 8] >> 6, 2);
	free(img);
	scratch_remove();
}

TEST(uuid_follows_content)
{
	size_t la, lb;
	uint8_t *a, *b;

	make_tree();
	CHECK_EQ(build("a.img", NULL), 0);
	put_src("a", "hellO\n", 6);
	CHECK_EQ(build("b.img", NULL), 0);
	a = scratch_load("a.img", &la);
	b = scratch_load("b.img", &lb);
	CHECK(a && b);
	CHECK(memcmp(a + 1024 + 0x30, b + 1024 + 0x30, 16) != 0);
	free(a);
	free(b);
	scratch_remove();
}

TEST(fixed_mtime_gives_compact_root)
{
	struct kiln_build_opts opts = { .struct_size = sizeof(opts),
		.flags = KILN_BUILD_FIXED_MTIME, .fixed_mtime = 1234567890 };
	uint8_t *img;
	size_t len;
	uint64_t root, meta, off;

	make_tree();
	CHECK_EQ(build("a.img", &opts), 0);
	img = scratch_load("a.img", &len);
	root = kiln_get_le16(img + 1024 + 14);
	meta = kiln_get_le32(img + 1024 + 0x28);
	off = meta * 4096 + root * 32;
	CHECK(off + 32 <= len);
	CHECK_EQ(kiln_get_le16(img + off) & 1, 0);	/* compact */
	CHECK_EQ(kiln_get_le16(img + off + 4) & S_IFMT, S_IFDIR);
	CHECK_EQ(kiln_get_le64(img + 1024 + 0x18), 1234567890);	/* epoch */
	free(img);
	scratch_remove();
}

TEST(failed_build_keeps_old_image_and_leaves_nothing)
{
	struct kiln_build_opts opts = { .struct_size = sizeof(opts) };
	char src[128], img[128];
	uint8_t *old;
	size_t len;

	make_tree();
	scratch_write("old.img", "OLD", 3);
	snprintf(src, sizeof(src), "%s/missing", tmp);
	snprintf(img, sizeof(img), "%s/old.img", tmp);
	CHECK(kiln_build(src, img, &opts, NULL) < 0);
	old = scratch_load("old.img", &len);
	CHECK(old && len == 3 && !memcmp(old, "OLD", 3));
	free(old);
	opts.blkszbits = 13;		/* refused */
	CHECK_EQ(build("old.img", &opts), -EINVAL);
	CHECK_EQ(stray_files(), 0);
	scratch_remove();
}

/* Deletes dir/big once the data pass has started (after the scan). */
static void unlink_big(void *ctx, const struct kiln_build_progress *p)
{
	char path[256];

	(void)ctx;
	(void)p;
	snprintf(path, sizeof(path), "%s/src/dir/big", tmp);
	unlink(path);
}

TEST(file_vanishing_during_build_fails_naming_it)
{
	struct log_capture cap = { .errors = 0 };
	struct kiln_build_opts opts = { .struct_size = sizeof(opts),
		.log = capture_log, .log_ctx = &cap, .progress = unlink_big };

	make_tree();
	CHECK_EQ(build("a.img", &opts), -ENOENT);
	CHECK_EQ(cap.errors, 1);
	CHECK(strstr(cap.last, "/src/dir/big: file vanished") != NULL);
	CHECK(scratch_load("a.img", &(size_t){ 0 }) == NULL);
	CHECK_EQ(stray_files(), 0);
	scratch_remove();
}

TEST(block_sizes_below_page_size_build)
{
	for (unsigned int bits = 9; bits <= 12; bits++) {
		struct kiln_build_opts opts = { .struct_size = sizeof(opts),
			.blkszbits = bits };
		uint8_t *img;
		size_t len;

		make_tree();
		CHECK_EQ(build("a.img", &opts), 0);
		img = scratch_load("a.img", &len);
		CHECK(img && len % (1u << bits) == 0);
		CHECK_EQ(img[1024 + 12], bits);
		free(img);
		scratch_remove();
	}
}

/*
 * File data goes in depth first, each directory's files before its
 * subdirectories' (breadth first would put b/3 before a/sub/2).
 */
TEST(data_is_written_depth_first)
{
	static const char *const order[] = { "top", "a/0z", "a/1", "a/sub/2",
					      "b/3" };
	struct kiln_build_opts opts = { .struct_size = sizeof(opts) };
	static char body[8192];
	char path[256];
	uint64_t last = 0;
	uint8_t *img;
	size_t len;

	snprintf(tmp, sizeof(tmp), "/tmp/kiln-test-build.XXXXXX");
	CHECK(mkdtemp(tmp) != NULL);
	for (const char *d = "src\0src/a\0src/a/sub\0src/b\0"; *d;
	     d += strlen(d) + 1) {
		snprintf(path, sizeof(path), "%s/%s", tmp, d);
		CHECK(mkdir(path, 0755) == 0);
	}
	for (size_t i = KILN_ARRAY_SIZE(order); i-- > 0;) {
		memset(body, 'A' + (int)i, sizeof(body));
		put_src(order[i], body, sizeof(body));
	}
	CHECK_EQ(build("o.img", &opts), 0);
	img = scratch_load("o.img", &len);
	CHECK(img != NULL);
	for (size_t i = 0; img && i < KILN_ARRAY_SIZE(order); i++) {
		const uint8_t *at;

		memset(body, 'A' + (int)i, sizeof(body));
		at = memmem(img, len, body, sizeof(body));
		CHECK(at != NULL);
		if (!at)
			break;
		CHECK((uint64_t)(at - img) > last);
		last = (uint64_t)(at - img);
	}
	free(img);
	scratch_remove();
}

/*
 * Metadata is one run at the end: the inode area right after the file
 * data, the directories' full blocks right after it (a remote walk
 * fetches the run whole; see lib/builder/place.c).
 */
TEST(directory_blocks_follow_the_inode_area)
{
	struct kiln_build_opts opts = { .struct_size = sizeof(opts) };
	static char body[3 << 20];
	uint64_t meta_start, data_at;
	const uint8_t *at;
	char path[256];
	size_t len, hits = 0;
	uint8_t *img;

	scratch_make("build");
	snprintf(path, sizeof(path), "%s/src/big-dir", tmp);
	CHECK(mkdir(path, 0755) == 0);
	for (int i = 0; i < 400; i++) {
		snprintf(path, sizeof(path), "src/big-dir/entry-%03d-%s", i,
			 "with-a-longer-name");
		scratch_write(path, "x", 1);
	}
	for (size_t i = 0; i < sizeof(body); i++)
		body[i] = (char)(i * 2654435761u >> 13);
	put_src("zdata", body, sizeof(body));
	CHECK_EQ(build("d.img", &opts), 0);
	img = scratch_load("d.img", &len);
	CHECK(img != NULL && len > EROFS_SUPER_OFFSET + 128);
	if (!img)
		return;
	meta_start = ((uint64_t)kiln_get_le32(img + EROFS_SUPER_OFFSET + 40) +
		      1) << img[EROFS_SUPER_OFFSET + 12];
	at = memmem(img, len, body, sizeof(body));
	CHECK(at != NULL);
	data_at = at ? (uint64_t)(at - img) : 0;
	CHECK(data_at + sizeof(body) <= meta_start);
	/* every block of names lies past the inode area's start */
	for (at = img; (at = memmem(at, len - (size_t)(at - img), "entry-",
				    6)) != NULL; at += 6) {
		CHECK((uint64_t)(at - img) >= meta_start);
		hits++;
	}
	CHECK_EQ(hits, 400);
	free(img);
	scratch_remove();
}

TAP_MAIN(TAP_ENTRY(same_input_gives_identical_bytes),
	 TAP_ENTRY(superblock_checksum_and_root_are_valid),
	 TAP_ENTRY(uuid_follows_content),
	 TAP_ENTRY(fixed_mtime_gives_compact_root),
	 TAP_ENTRY(failed_build_keeps_old_image_and_leaves_nothing),
	 TAP_ENTRY(file_vanishing_during_build_fails_naming_it),
	 TAP_ENTRY(block_sizes_below_page_size_build),
	 TAP_ENTRY(data_is_written_depth_first),
	 TAP_ENTRY(directory_blocks_follow_the_inode_area))
