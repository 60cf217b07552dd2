// SPDX-License-Identifier: MIT
/*
 * Faults injected into kiln_build()'s file I/O (util/fileio.h's test
 * hook): EIO reading a source file, short reads, EIO and ENOSPC writing
 * the image. A failed build names the file and the reason, leaves no image
 * and no temporary file, and an existing image survives it; short reads
 * change nothing.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <kiln/builder.h>

#include "util/fileio.h"
#include "build-fixture.h"

static ino_t victim_ino;	/* the source file reads of which fail */
static int fault_err;		/* errno to inject */
static uint64_t write_after;	/* image bytes written before writes fail */
static uint64_t written;
static unsigned int short_reads;

/* @len bytes of a pattern seeded by @seed at @rel. */
static void put_file(const char *rel, size_t len, unsigned int seed)
{
	char *buf = malloc(len ? len : 1);

	for (size_t i = 0; i < len; i++)
		buf[i] = (char)((i * seed) >> 5 ^ i / 4096);
	scratch_write(rel, buf, len);
	free(buf);
}

static void make_tree(void)
{
	char path[256];
	struct stat st;

	scratch_make("faults");
	put_file("src/a", 5000, 3);
	put_file("src/victim", 300000, 7);	/* big: several reads */
	put_file("src/z", 70000, 11);
	put_file("old.img", 3, 1);
	snprintf(path, sizeof(path), "%s/src/victim", tmp);
	CHECK(stat(path, &st) == 0);
	victim_ino = st.st_ino;
}

/* Whether @fd is the victim source file. */
static bool is_victim(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 && st.st_ino == victim_ino &&
	       S_ISREG(st.st_mode);
}

static int fail_victim_reads(int fd, bool write, size_t *len, uint64_t off)
{
	(void)len;
	(void)off;
	return !write && is_victim(fd) ? fault_err : 0;
}

static int shorten_reads(int fd, bool write, size_t *len, uint64_t off)
{
	(void)fd;
	(void)off;
	if (!write && *len > 1) {
		*len = *len / 3 + 1;
		short_reads++;
	}
	return 0;
}

static int fail_writes(int fd, bool write, size_t *len, uint64_t off)
{
	(void)fd;
	(void)off;
	if (!write)
		return 0;
	if (written >= write_after)
		return fault_err;
	written += *len;
	return 0;
}

static int build(const char *image, struct kiln_build_opts *o,
		 struct log_capture *cap)
{
	char src[128], img[128];

	snprintf(src, sizeof(src), "%s/src", tmp);
	snprintf(img, sizeof(img), "%s/%s", tmp, image);
	o->log = capture_log;
	o->log_ctx = cap;
	o->flags |= KILN_BUILD_FIXED_MTIME | KILN_BUILD_BUILD_TIME;
	return kiln_build(src, img, o, NULL);
}

/* Only src and the images named: no temporary file left behind. */
static bool only(const char *a, const char *b)
{
	DIR *d = opendir(tmp);
	struct dirent *de;
	bool ok = true;

	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
		    strcmp(de->d_name, "src") && strcmp(de->d_name, a) &&
		    (!b || strcmp(de->d_name, b)))
			ok = false;
	closedir(d);
	return ok;
}

static bool old_intact(void)
{
	size_t len;
	char *old = scratch_load("old.img", &len);
	bool ok = old && len == 3;

	free(old);
	return ok;
}

static void set_codec(struct kiln_build_opts *o, int compressed)
{
	kiln_build_opts_init(o);
	if (compressed)
		o->compress = (struct kiln_compress_spec){ KILN_CODEC_LZ4, 0 };
}

TEST(eio_reading_a_source_file_names_it)
{
	make_tree();
	for (int c = 0; c < 2; c++) {
		struct log_capture cap = { .errors = 0 };
		struct kiln_build_opts o;

		set_codec(&o, c);
		fault_err = EIO;
		kiln_fileio_fault = fail_victim_reads;
		CHECK_EQ(build("old.img", &o, &cap), -EIO);
		kiln_fileio_fault = NULL;
		printf("# %s: %s\n", c ? "lz4" : "none", cap.last);
		CHECK(strstr(cap.last, "src/victim") != NULL);
		CHECK(strstr(cap.last, "nput/output error") != NULL);
		CHECK(old_intact());
		CHECK(only("old.img", NULL));
	}
	scratch_remove();
}

TEST(short_reads_change_nothing)
{
	make_tree();
	for (int c = 0; c < 2; c++) {
		struct log_capture cap = { .errors = 0 };
		struct kiln_build_opts o;
		size_t l1, l2;
		char *a, *b;

		set_codec(&o, c);
		CHECK_EQ(build("plain.img", &o, &cap), 0);
		short_reads = 0;
		kiln_fileio_fault = shorten_reads;
		CHECK_EQ(build("short.img", &o, &cap), 0);
		kiln_fileio_fault = NULL;
		CHECK(short_reads > 3);
		a = scratch_load("plain.img", &l1);
		b = scratch_load("short.img", &l2);
		CHECK(a && b && l1 == l2 && !memcmp(a, b, l1));
		CHECK_EQ(cap.errors, 0);
		free(a);
		free(b);
	}
	scratch_remove();
}

TEST(write_errors_leave_the_old_image)
{
	static const int errs[] = { EIO, ENOSPC };
	static const char *const why[] = { "nput/output error",
					   "No space left on device" };

	make_tree();
	for (int c = 0; c < 2; c++) {
		for (size_t e = 0; e < 2; e++) {
			struct log_capture cap = { .errors = 0 };
			struct kiln_build_opts o;

			set_codec(&o, c);
			fault_err = errs[e];
			written = 0;
			write_after = 40000;	/* part of the data is out */
			kiln_fileio_fault = fail_writes;
			CHECK_EQ(build("old.img", &o, &cap), -errs[e]);
			kiln_fileio_fault = NULL;
			printf("# %s: %s\n", c ? "lz4" : "none", cap.last);
			CHECK(cap.errors >= 1);
			CHECK(strstr(cap.last, why[e]) != NULL);
			CHECK(strstr(cap.last, "old.img") != NULL);
			CHECK(old_intact());
			CHECK(only("old.img", NULL));
		}
	}
	scratch_remove();
}

TAP_MAIN(TAP_ENTRY(eio_reading_a_source_file_names_it),
	 TAP_ENTRY(short_reads_change_nothing),
	 TAP_ENTRY(write_errors_leave_the_old_image))
