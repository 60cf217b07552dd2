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
#include "tap.h"

static char tmp[64];
static ino_t victim_ino;	/* the source file reads of which fail */
static int fault_err;		/* errno to inject */
static uint64_t write_after;	/* image bytes written before writes fail */
static uint64_t written;
static unsigned int short_reads;

static void put_file(const char *rel, size_t len, unsigned int seed)
{
	char path[256];
	char *buf = malloc(len ? len : 1);
	int fd;

	for (size_t i = 0; i < len; i++)
		buf[i] = (char)((i * seed) >> 5 ^ i / 4096);
	snprintf(path, sizeof(path), "%s/%s", tmp, rel);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	CHECK(write(fd, buf, len) == (ssize_t)len);
	close(fd);
	free(buf);
}

static void make_tree(void)
{
	char path[256];
	struct stat st;

	snprintf(tmp, sizeof(tmp), "/tmp/kiln-test-faults.XXXXXX");
	CHECK(mkdtemp(tmp) != NULL);
	snprintf(path, sizeof(path), "%s/src", tmp);
	CHECK(mkdir(path, 0755) == 0);
	put_file("src/a", 5000, 3);
	put_file("src/victim", 300000, 7);	/* big: several reads */
	put_file("src/z", 70000, 11);
	put_file("old.img", 3, 1);
	snprintf(path, sizeof(path), "%s/src/victim", tmp);
	CHECK(stat(path, &st) == 0);
	victim_ino = st.st_ino;
}

static void remove_tree(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	CHECK(system(cmd) == 0);
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

struct log_capture {
	char last[1024];
	int errors;
};

static void capture_log(void *ctx, enum kiln_log_level level, const char *msg)
{
	struct log_capture *c = ctx;

	if (level != KILN_LOG_ERROR)
		return;
	snprintf(c->last, sizeof(c->last), "%s", msg);
	c->errors++;
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

static void *slurp(const char *rel, size_t *len)
{
	char path[256];
	FILE *f;
	char *buf;
	long n;

	snprintf(path, sizeof(path), "%s/%s", tmp, rel);
	f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	*len = fread(buf, 1, (size_t)n, f);
	fclose(f);
	return buf;
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
	char *old = slurp("old.img", &len);
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
	remove_tree();
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
		a = slurp("plain.img", &l1);
		b = slurp("short.img", &l2);
		CHECK(a && b && l1 == l2 && !memcmp(a, b, l1));
		CHECK_EQ(cap.errors, 0);
		free(a);
		free(b);
	}
	remove_tree();
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
	remove_tree();
}

TAP_MAIN(TAP_ENTRY(eio_reading_a_source_file_names_it),
	 TAP_ENTRY(short_reads_change_nothing),
	 TAP_ENTRY(write_errors_leave_the_old_image))
