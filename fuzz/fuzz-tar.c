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

#include "fuzz-walk.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FILE_MAX	(16ull << 20)	/* bytes any file written may grow to */

static char image_path[64];

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
		walk_image(image_path);
	unlink(image_path);
	return 0;
}
