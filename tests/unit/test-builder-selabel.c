// SPDX-License-Identifier: MIT
/*
 * Tests for lib/builder/selabel.c (file_contexts lookups through
 * libselinux) and the labels kiln_build() stores with them.
 */
#include <errno.h>
#include <fcntl.h>
#include <selinux/selinux.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <kiln/builder.h>
#include <kiln/image.h>

#include "builder/selabel.h"
#include "util/log.h"
#include "tap.h"

static const char contexts[] =
	"/.*                 u:object_r:default_t:s0\n"
	"/                   u:object_r:root_t:s0\n"
	"/etc(/.*)?          u:object_r:etc_t:s0\n"
	"/etc/init\\.d   -d   u:object_r:initrc_dir_t:s0\n"
	"/bin/.*        --   u:object_r:bin_t:s0\n"
	"/bin/.*        -l   u:object_r:bin_link_t:s0\n"
	"/data/none          <<none>>\n"
	"/vendor(/.*)?       u:object_r:vendor_file_t:s0:c0.c255\n";

static char tmp[64];
static char messages[2048];

static void remove_tmp(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	if (system(cmd))
		printf("# could not remove %s\n", tmp);
}

/* The scratch directory, made on first use and removed at exit. */
static void need_tmp(void)
{
	if (tmp[0])
		return;
	snprintf(tmp, sizeof(tmp), "/tmp/kiln-test-selabel.XXXXXX");
	CHECK(mkdtemp(tmp) != NULL);
	atexit(remove_tmp);
}

static void capture(void *ctx, enum kiln_log_level level, const char *msg)
{
	size_t len = strlen(messages);

	(void)ctx;
	if (level == KILN_LOG_ERROR)
		snprintf(messages + len, sizeof(messages) - len, "%s\n", msg);
}

static const struct kiln_logger logger = { .fn = capture };

static const char *put(const char *rel, const char *text)
{
	static char path[256];
	FILE *f;

	need_tmp();
	snprintf(path, sizeof(path), "%s/%s", tmp, rel);
	f = fopen(path, "w");
	CHECK(f != NULL);
	if (f) {
		fputs(text, f);
		fclose(f);
	}
	return path;
}

static struct kiln_selabel *open_with(const char *text, const char *mp)
{
	struct kiln_selabel *sl = NULL;
	char path[256];

	snprintf(path, sizeof(path), "%s", put("file_contexts", text));
	messages[0] = '\0';
	CHECK_EQ(kiln_selabel_open(&sl, path, mp, &logger), 0);
	CHECK_EQ(messages[0], '\0');
	return sl;
}

/* The label of @rel, or "<<none>>"; a lookup error fails the check. */
static const char *label(struct kiln_selabel *sl, const char *rel,
			 uint32_t mode)
{
	static char out[256];
	char *ctx = NULL;
	int err = kiln_selabel_lookup(sl, rel, mode, &ctx);

	if (err == -ENOENT) {
		CHECK(ctx == NULL);
		return "<<none>>";
	}
	CHECK_EQ(err, 0);
	snprintf(out, sizeof(out), "%s", ctx ? ctx : "?");
	free(ctx);
	return out;
}

TEST(lookup_follows_regexes_file_types_and_none)
{
	struct kiln_selabel *sl = open_with(contexts, NULL);

	if (!sl)
		return;
	CHECK(!strcmp(label(sl, "", S_IFDIR | 0755), "u:object_r:root_t:s0"));
	CHECK(!strcmp(label(sl, "etc", S_IFDIR), "u:object_r:etc_t:s0"));
	CHECK(!strcmp(label(sl, "etc/passwd", S_IFREG | 0644),
		      "u:object_r:etc_t:s0"));
	/* "-d" only for the directory */
	CHECK(!strcmp(label(sl, "etc/init.d", S_IFDIR),
		      "u:object_r:initrc_dir_t:s0"));
	CHECK(!strcmp(label(sl, "etc/init.d", S_IFREG),
		      "u:object_r:etc_t:s0"));
	CHECK(!strcmp(label(sl, "bin/sh", S_IFREG | 0755),
		      "u:object_r:bin_t:s0"));
	CHECK(!strcmp(label(sl, "bin/bash", S_IFLNK | 0777),
		      "u:object_r:bin_link_t:s0"));
	CHECK(!strcmp(label(sl, "bin/fifo", S_IFIFO),
		      "u:object_r:default_t:s0"));
	CHECK(!strcmp(label(sl, "data/none", S_IFREG), "<<none>>"));
	CHECK(!strcmp(label(sl, "data/other", S_IFREG),
		      "u:object_r:default_t:s0"));
	kiln_selabel_close(sl);
}

TEST(mount_point_prefixes_paths_and_is_mended)
{
	static const char *const spellings[] = { "/vendor", "vendor",
						 "//vendor///", "/vendor/" };

	for (size_t i = 0; i < sizeof(spellings) / sizeof(*spellings); i++) {
		struct kiln_selabel *sl = open_with(contexts, spellings[i]);

		if (!sl)
			continue;
		/* the root is the mount point itself */
		CHECK(!strcmp(label(sl, "", S_IFDIR),
			      "u:object_r:vendor_file_t:s0:c0.c255"));
		CHECK(!strcmp(label(sl, "etc/init.d", S_IFDIR),
			      "u:object_r:vendor_file_t:s0:c0.c255"));
		kiln_selabel_close(sl);
	}
	/* "/" and "" are the default */
	for (int i = 0; i < 2; i++) {
		struct kiln_selabel *sl = open_with(contexts, i ? "" : "/");

		if (!sl)
			continue;
		CHECK(!strcmp(label(sl, "", S_IFDIR), "u:object_r:root_t:s0"));
		CHECK(!strcmp(label(sl, "etc/x", S_IFREG),
			      "u:object_r:etc_t:s0"));
		kiln_selabel_close(sl);
	}
}

static int foreign_log(int type, const char *fmt, ...)
{
	(void)type;
	(void)fmt;
	return 0;
}

static void refused(const char *text, const char *reason, int want)
{
	struct kiln_selabel *sl = (struct kiln_selabel *)1;
	char path[256];

	snprintf(path, sizeof(path), "%s", put("broken", text));
	messages[0] = '\0';
	CHECK_EQ(kiln_selabel_open(&sl, path, NULL, &logger), want);
	CHECK(sl == NULL);
	/* one line: "<file>: <reason>" */
	CHECK(!strncmp(messages, path, strlen(path)));
	CHECK(strstr(messages, reason) != NULL);
	CHECK(strchr(messages, '\n') == messages + strlen(messages) - 1);
	if (!strstr(messages, reason))
		printf("#   got: %s", messages);
}

TEST(broken_files_are_refused_with_the_reason)
{
	union selinux_callback mine = { .func_log = foreign_log }, after;
	struct kiln_selabel *sl = NULL;
	char path[256];

	/* a caller's own libselinux callback survives the open */
	selinux_set_callback(SELINUX_CB_LOG, mine);
	refused("/a(  u:object_r:a_t:s0\n", "invalid regex", -EINVAL);
	refused("/a  -x  u:object_r:a_t:s0\n", "invalid file type", -EINVAL);
	refused("/a\n", "missing fields", -EINVAL);
	refused("/a  a_t\n", "invalid context a_t", -EINVAL);
	refused("/a  u:object_r:\n", "invalid context", -EINVAL);
	refused("/a  u:object_r:a_t:\n", "invalid context", -EINVAL);
	after = selinux_get_callback(SELINUX_CB_LOG);
	CHECK(after.func_log == foreign_log);

	need_tmp();
	snprintf(path, sizeof(path), "%s/missing", tmp);
	messages[0] = '\0';
	CHECK_EQ(kiln_selabel_open(&sl, path, NULL, &logger), -ENOENT);
	CHECK(strstr(messages, "missing: cannot read file contexts: "
			       "No such file or directory") != NULL);
	messages[0] = '\0';
	CHECK_EQ(kiln_selabel_open(&sl, tmp, NULL, &logger), -EINVAL);
	CHECK(strstr(messages, "not a regular file") != NULL);
	CHECK(sl == NULL);
}

TEST(empty_file_labels_nothing)
{
	struct kiln_selabel *sl = open_with("# nothing\n", NULL);

	if (!sl)
		return;
	CHECK(!strcmp(label(sl, "", S_IFDIR), "<<none>>"));
	CHECK(!strcmp(label(sl, "etc/x", S_IFREG), "<<none>>"));
	kiln_selabel_close(sl);
}

static void mkdirs(const char *rel)
{
	char path[256];

	need_tmp();
	snprintf(path, sizeof(path), "%s/src/%s", tmp, rel);
	CHECK(mkdir(path, 0755) == 0);
}

/* The stored value of @name on @path in @img, "" when absent. */
static const char *stored(struct kiln_image *img, const char *path,
			  ssize_t *len)
{
	static char value[256];
	kiln_nid_t nid;

	*len = -1;
	if (kiln_resolve(img, path, 0, &nid))
		return "?";
	*len = kiln_getxattr(img, nid, "security.selinux", value,
			     sizeof(value) - 1);
	if (*len < 0)
		return "";
	value[*len] = '\0';
	return value;
}

TEST(build_stores_labels_with_nul_and_shares_them)
{
	struct kiln_build_opts o = { .struct_size = sizeof(o) };
	struct kiln_build_stats st;
	struct kiln_image *img = NULL;
	char src[128], image[128], fc[128], name[64];
	ssize_t len;

	snprintf(fc, sizeof(fc), "%s", put("file_contexts", contexts));
	mkdirs("");
	mkdirs("etc");
	mkdirs("data");
	for (int i = 0; i < 20; i++) {
		snprintf(name, sizeof(name), "etc/f%d", i);
		put(strcat(strcpy(src, "src/"), name), "x");
	}
	put("src/data/none", "none");
	snprintf(src, sizeof(src), "%s/src", tmp);
	snprintf(image, sizeof(image), "%s/img", tmp);
	o.file_contexts = fc;
	o.log = capture;
	messages[0] = '\0';
	CHECK_EQ(kiln_build(src, image, &o, &st), 0);
	CHECK_EQ(messages[0], '\0');
	/* 21 inodes carry etc_t: one shared entry */
	CHECK(st.shared_xattrs >= 1);
	CHECK_EQ(kiln_image_open(&img, image, NULL), 0);
	if (!img)
		return;
	CHECK(!strcmp(stored(img, "/", &len), "u:object_r:root_t:s0"));
	CHECK_EQ(len, sizeof("u:object_r:root_t:s0"));
	CHECK(!strcmp(stored(img, "/etc/f7", &len), "u:object_r:etc_t:s0"));
	CHECK_EQ(len, sizeof("u:object_r:etc_t:s0"));
	CHECK(!strcmp(stored(img, "/data", &len), "u:object_r:default_t:s0"));
	CHECK(!strcmp(stored(img, "/data/none", &len), ""));
	CHECK_EQ(len, -ENODATA);
	kiln_image_close(img);

	/* a broken file fails before anything is written */
	o.file_contexts = put("broken", "/a(  u:object_r:a_t:s0\n");
	CHECK(unlink(image) == 0);
	messages[0] = '\0';
	CHECK_EQ(kiln_build(src, image, &o, &st), -EINVAL);
	CHECK(strstr(messages, "invalid regex") != NULL);
	CHECK(access(image, F_OK) != 0);
}

TAP_MAIN(TAP_ENTRY(lookup_follows_regexes_file_types_and_none),
	 TAP_ENTRY(mount_point_prefixes_paths_and_is_mended),
	 TAP_ENTRY(broken_files_are_refused_with_the_reason),
	 TAP_ENTRY(empty_file_labels_nothing),
	 TAP_ENTRY(build_stores_labels_with_nul_and_shares_them))
