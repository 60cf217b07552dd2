// SPDX-License-Identifier: MIT
/*
 * Fuzz target: build an image from an arbitrary byte string read as a tar
 * stream (any format and filter libarchive detects), then open the image
 * and walk it. Input: [0] bit 0 = compress with lz4, bit 1 = --verify,
 * bit 2 = fragments and dedupe; [1..] the stream.
 *
 * Everything the build writes (the image, its temporary file, spilled
 * members) is bounded by RLIMIT_FSIZE, so a decompression bomb or a lying
 * size costs at most FILE_MAX bytes per file and ends in EFBIG.
 */
#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <kiln/builder.h>
#include <kiln/image.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FILE_MAX	(16ull << 20)	/* bytes any file written may grow to */
#define MAX_ENTRIES	4096
#define MAX_DEPTH	8

static char image_path[64];

struct walk {
	struct kiln_image *img;
	unsigned int entries;
	unsigned int depth;
	uint8_t buf[16384];
};

struct dir_ctx {
	struct walk *w;
	kiln_nid_t dir, parent;
};

static void setup(void)
{
	struct rlimit rl = { FILE_MAX, FILE_MAX };
	const char *dir = getenv("TMPDIR");

	if (image_path[0])
		return;
	signal(SIGXFSZ, SIG_IGN);	/* writes past the bound give EFBIG */
	if (setrlimit(RLIMIT_FSIZE, &rl))
		abort();
	snprintf(image_path, sizeof(image_path), "%s/kiln-fuzz-tar-%d.img",
		 dir && *dir && strlen(dir) < 32 ? dir : "/tmp", (int)getpid());
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	setup();
	return 0;
}

static void walk_dir(struct walk *w, kiln_nid_t dir, kiln_nid_t parent);

/* The builder never writes a name a path walk cannot take. */
static int on_entry(void *ctx, const struct kiln_dirent *de)
{
	struct dir_ctx *d = ctx;
	struct walk *w = d->w;
	struct kiln_file *f;

	if (++w->entries > MAX_ENTRIES)
		return 1;
	if (!de->name_len || memchr(de->name, '/', de->name_len))
		abort();
	if (!strcmp(de->name, ".") || !strcmp(de->name, "..")) {
		if (de->nid != (de->name[1] ? d->parent : d->dir))
			abort();
		return 0;
	}
	if (de->type == DT_DIR)
		walk_dir(w, de->nid, d->dir);
	else if (de->type == DT_REG && !kiln_file_open(w->img, de->nid, &f)) {
		kiln_file_pread(f, w->buf, sizeof(w->buf), 0);
		kiln_file_close(f);
	}
	return 0;
}

static void walk_dir(struct walk *w, kiln_nid_t dir, kiln_nid_t parent)
{
	struct dir_ctx d = { .w = w, .dir = dir, .parent = parent };

	if (w->depth >= MAX_DEPTH)
		return;
	w->depth++;
	kiln_dir_iterate(w->img, dir, 0, on_entry, &d);
	w->depth--;
}

static void walk_image(void)
{
	static struct walk w;
	kiln_nid_t root;

	memset(&w, 0, sizeof(w));
	if (kiln_image_open(&w.img, image_path, NULL))
		abort();	/* a build that succeeded must open */
	root = kiln_image_root(w.img);
	walk_dir(&w, root, root);
	kiln_image_close(w.img);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kiln_build_opts o;
	char src[64];
	int fd, ret;

	setup();
	if (size < 1)
		return 0;
	fd = memfd_create("fuzz-tar", MFD_CLOEXEC);
	if (fd < 0)
		return 0;
	if (size > 1 && write(fd, data + 1, size - 1) != (ssize_t)(size - 1)) {
		close(fd);
		return 0;
	}
	snprintf(src, sizeof(src), "/proc/self/fd/%d", fd);
	kiln_build_opts_init(&o);
	o.source_kind = KILN_SOURCE_TAR;
	o.threads = 1;
	o.memory_limit = 1u << 20;	/* as small as the library allows */
	o.flags = KILN_BUILD_FIXED_MTIME | KILN_BUILD_BUILD_TIME |
		  KILN_BUILD_UUID;
	if (data[0] & 1)
		o.compress = (struct kiln_compress_spec){ KILN_CODEC_LZ4, 0 };
	if (data[0] & 2)
		o.flags |= KILN_BUILD_VERIFY;
	if ((data[0] & 5) == 5)
		o.compress_flags = KILN_COMPRESS_FRAGMENTS |
				   KILN_COMPRESS_DEDUPE;
	ret = kiln_build(src, image_path, &o, NULL);
	close(fd);
	if (ret == 0)
		walk_image();
	unlink(image_path);
	return 0;
}
