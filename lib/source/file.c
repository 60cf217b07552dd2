// SPDX-License-Identifier: MIT
/* A local image source: a regular file or block device, mapped whole. */
#include <errno.h>
#include <linux/fs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "source/source.h"

struct file_source {
	struct kiln_source base;
	int fd;			/* the caller's */
};

static int file_size(const struct kiln_logger *lg, int fd, uint64_t *size)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (S_ISBLK(st.st_mode)) {
		uint64_t bytes;

		if (ioctl(fd, BLKGETSIZE64, &bytes) < 0)
			return -errno;
		*size = bytes;
		return 0;
	}
	if (!S_ISREG(st.st_mode)) {
		kiln_log(lg, KILN_LOG_ERROR,
			 "image is neither a regular file nor a block device");
		return -EINVAL;
	}
	*size = (uint64_t)st.st_size;
	return 0;
}

/* The mapping serves every read; fetch is there for the interface's sake. */
static int file_fetch(struct kiln_source *src, void *dst, size_t len,
		      uint64_t off)
{
	memcpy(dst, src->map + off, len);
	return 0;
}

static void file_close(struct kiln_source *src)
{
	if (src->map)
		munmap((void *)(uintptr_t)src->map, (size_t)src->size);
	free(src);
}

static const struct kiln_source_ops file_ops = {
	.fetch = file_fetch,
	.close = file_close,
};

int kiln_source_open_fd(struct kiln_source **out, int fd,
			const struct kiln_logger *lg)
{
	struct file_source *fs;
	uint64_t size = 0;
	void *map;
	int err;

	*out = NULL;
	err = file_size(lg, fd, &size);
	if (err)
		return err;
	if (size == 0) {
		kiln_log(lg, KILN_LOG_ERROR,
			 "image is empty (not an EROFS image)");
		return -KILN_ENOTEROFS;
	}
	if (size > SIZE_MAX)
		return -EFBIG;
	fs = calloc(1, sizeof(*fs));
	if (!fs)
		return -ENOMEM;
	map = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		err = -errno;
		free(fs);
		return err;
	}
	fs->base.ops = &file_ops;
	fs->base.lg = lg;
	fs->base.size = size;
	fs->base.map = map;
	snprintf(fs->base.identity, sizeof(fs->base.identity), "%llu",
		 (unsigned long long)size);
	fs->fd = fd;
	*out = &fs->base;
	return 0;
}
