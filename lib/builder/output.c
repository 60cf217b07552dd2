// SPDX-License-Identifier: MIT
/*
 * The image file being written: a temporary file in the destination's
 * directory that only becomes the destination when the build succeeds.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "builder/output.h"
#include "util/checked.h"
#include "util/fileio.h"

struct kiln_out {
	const struct kiln_logger *lg;
	char *path;			/* destination, as given */
	char *dir;			/* its directory */
	char *base;			/* its last component */
	char *tmp_name;			/* named temp file (NULL with O_TMPFILE) */
	int dirfd;
	int fd;
	unsigned int blkszbits;
	kiln_blk_t next_blk;		/* data area end */
	XXH3_state_t *hash;
	uint64_t unkicked;		/* bytes written since writeback began */
};

/*
 * Start writeback every WRITEBACK_KICK bytes, so that the disk works while
 * the build goes on and the fsync before the rename has little left to
 * wait for (on /usr/share/doc it took 23 ms of a 0.27 s build).
 */
#define WRITEBACK_KICK	(8u << 20)

static int out_fail(struct kiln_out *out, int err, const char *what)
{
	kiln_log(out->lg, KILN_LOG_ERROR, "%s: %s: %s", out->path, what,
		 strerror(err));
	return -err;
}

static int split_path(struct kiln_out *out, const char *path)
{
	const char *slash = strrchr(path, '/');

	out->path = strdup(path);
	if (slash) {
		out->dir = strndup(path, (size_t)(slash - path) + (slash == path));
		out->base = strdup(slash + 1);
	} else {
		out->dir = strdup(".");
		out->base = strdup(path);
	}
	if (!out->path || !out->dir || !out->base)
		return -ENOMEM;
	if (!*out->base || !strcmp(out->base, ".") || !strcmp(out->base, ".."))
		return out_fail(out, EISDIR, "not a file name");
	return 0;
}

/* Named fallback: ".<base>.XXXXXX" beside the destination. */
static int open_named_tmp(struct kiln_out *out)
{
	size_t len = strlen(out->base) + 16;
	int fd;

	out->tmp_name = malloc(len);
	if (!out->tmp_name)
		return -ENOMEM;
	for (unsigned int attempt = 0; attempt < 100; attempt++) {
		snprintf(out->tmp_name, len, ".%s.%06x", out->base,
			 (unsigned int)((getpid() * 7919u + attempt * 104729u) &
					0xFFFFFF));
		fd = openat(out->dirfd, out->tmp_name,
			    O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd >= 0) {
			out->fd = fd;
			return 0;
		}
		if (errno != EEXIST)
			return out_fail(out, errno, "cannot create temporary file");
	}
	return out_fail(out, EEXIST, "cannot create temporary file");
}

int kiln_out_open(struct kiln_out **outp, const char *path,
		  unsigned int blkszbits, kiln_blk_t first_blk,
		  const struct kiln_logger *lg)
{
	struct kiln_out *out = calloc(1, sizeof(*out));
	struct stat st;
	int err;

	*outp = NULL;
	if (!out)
		return -ENOMEM;
	out->lg = lg;
	out->fd = -1;
	out->dirfd = -1;
	out->blkszbits = blkszbits;
	out->next_blk = first_blk;
	err = split_path(out, path);
	if (err)
		goto fail;
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		err = out_fail(out, EISDIR, "cannot write image");
		goto fail;
	}
	out->dirfd = open(out->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (out->dirfd < 0) {
		err = out_fail(out, errno, "cannot open its directory");
		goto fail;
	}
	/* O_TMPFILE: an interrupted build leaves nothing behind */
	out->fd = openat(out->dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0666);
	if (out->fd < 0) {
		if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL) {
			err = out_fail(out, errno, "cannot create image");
			goto fail;
		}
		err = open_named_tmp(out);
		if (err)
			goto fail;
	}
	out->hash = XXH3_createState();
	if (!out->hash) {
		err = -ENOMEM;
		goto fail;
	}
	XXH3_128bits_reset(out->hash);
	*outp = out;
	return 0;
fail:
	kiln_out_abort(out);
	return err;
}

unsigned int kiln_out_blkszbits(const struct kiln_out *out)
{
	return out->blkszbits;
}

kiln_blk_t kiln_out_next_blk(const struct kiln_out *out)
{
	return out->next_blk;
}

int kiln_out_reserve(struct kiln_out *out, uint64_t nblks, kiln_blk_t *blk)
{
	kiln_blk_t end;

	/* without 48-bit addressing, every block number fits in 32 bits */
	if (kiln_add_overflow(out->next_blk, nblks, &end) || end > UINT32_MAX)
		return out_fail(out, EFBIG,
				"image would exceed 2^32 blocks");
	*blk = out->next_blk;
	out->next_blk = end;
	return 0;
}

int kiln_out_pwrite(struct kiln_out *out, const void *buf, size_t len,
		    uint64_t off)
{
	uint64_t tag[2] = { off, len };

	int err;

	XXH3_128bits_update(out->hash, tag, sizeof(tag));
	XXH3_128bits_update(out->hash, buf, len);
	err = kiln_pwrite_full(out->fd, buf, len, off);
	if (err)
		return out_fail(out, -err, "write failed");
	out->unkicked += len;
	if (out->unkicked >= WRITEBACK_KICK) {
		/* asynchronous; where unsupported, the fsync does it all */
		sync_file_range(out->fd, 0, 0, SYNC_FILE_RANGE_WRITE);
		out->unkicked = 0;
	}
	return 0;
}

int kiln_out_pread(struct kiln_out *out, void *buf, size_t len, uint64_t off)
{
	ssize_t n = kiln_pread_full(out->fd, buf, len, off);

	if (n < 0 || (size_t)n < len)
		return out_fail(out, n < 0 ? (int)-n : EIO, "read back failed");
	return 0;
}

int kiln_out_append(struct kiln_out *out, const void *buf, size_t len,
		    kiln_blk_t *blk)
{
	uint64_t blksz = 1ull << out->blkszbits;
	int err = kiln_out_reserve(out, kiln_div_round_up(len, blksz), blk);

	if (err)
		return err;
	return kiln_out_pwrite(out, buf, len, *blk << out->blkszbits);
}

int kiln_out_fd(const struct kiln_out *out)
{
	return out->fd;
}

void kiln_out_digest(const struct kiln_out *out, uint8_t digest[16])
{
	XXH128_hash_t h = XXH3_128bits_digest(out->hash);
	XXH128_canonical_t c;

	XXH128_canonicalFromHash(&c, h);
	memcpy(digest, c.digest, 16);
}

static void out_free(struct kiln_out *out)
{
	if (out->fd >= 0)
		close(out->fd);
	if (out->dirfd >= 0)
		close(out->dirfd);
	if (out->hash)
		XXH3_freeState(out->hash);
	free(out->path);
	free(out->dir);
	free(out->base);
	free(out->tmp_name);
	free(out);
}

/* Give an O_TMPFILE file a temporary name so it can be renamed. */
static int link_tmpfile(struct kiln_out *out)
{
	char proc[64];
	size_t len = strlen(out->base) + 16;

	out->tmp_name = malloc(len);
	if (!out->tmp_name)
		return -ENOMEM;
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", out->fd);
	for (unsigned int attempt = 0; attempt < 100; attempt++) {
		snprintf(out->tmp_name, len, ".%s.%06x", out->base,
			 (unsigned int)((getpid() * 7919u + attempt * 104729u) &
					0xFFFFFF));
		if (linkat(AT_FDCWD, proc, out->dirfd, out->tmp_name,
			   AT_SYMLINK_FOLLOW) == 0)
			return 0;
		if (errno == ENOENT &&
		    linkat(out->fd, "", out->dirfd, out->tmp_name,
			   AT_EMPTY_PATH) == 0)
			return 0;
		if (errno != EEXIST) {
			int err = errno;

			free(out->tmp_name);
			out->tmp_name = NULL;
			return out_fail(out, err, "cannot link image");
		}
	}
	free(out->tmp_name);
	out->tmp_name = NULL;
	return out_fail(out, EEXIST, "cannot link image");
}

int kiln_out_commit(struct kiln_out *out, uint64_t size)
{
	int err = 0;

	if (ftruncate(out->fd, (off_t)size) < 0)
		err = out_fail(out, errno, "cannot set image size");
	else if (fsync(out->fd) < 0)
		err = out_fail(out, errno, "cannot sync image");
	else if (!out->tmp_name)
		err = link_tmpfile(out);
	if (!err && renameat(out->dirfd, out->tmp_name, out->dirfd,
			     out->base) < 0)
		err = out_fail(out, errno, "cannot rename image into place");
	if (err) {
		kiln_out_abort(out);
		return err;
	}
	/* the rename itself must survive a crash too */
	fsync(out->dirfd);
	out_free(out);
	return 0;
}

void kiln_out_abort(struct kiln_out *out)
{
	if (!out)
		return;
	if (out->tmp_name && out->dirfd >= 0)
		unlinkat(out->dirfd, out->tmp_name, 0);
	out_free(out);
}
