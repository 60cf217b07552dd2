// SPDX-License-Identifier: MIT
/*
 * The image being written. A regular file (or a new name): a temporary
 * file in the destination's directory that only becomes the destination
 * when the build succeeds. A block device: written in place, within its
 * size. A symlink: whatever it leads to. Anything else is refused.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <xxhash.h>

#include "builder/output.h"
#include "builder/progress.h"
#include "util/checked.h"
#include "util/fileio.h"
#include "util/grow.h"

/* Bytes [start, end) of a device written so far (gaps get zeros). */
struct out_range {
	uint64_t start, end;
};

struct kiln_out {
	const struct kiln_logger *lg;
	char *path;			/* destination, symlinks followed */
	char *dir;			/* its directory */
	char *base;			/* its last component */
	char *tmp_name;			/* named temp file (NULL with O_TMPFILE) */
	int dirfd;
	int fd;
	unsigned int blkszbits;
	kiln_blk_t next_blk;		/* data area end */
	XXH3_state_t *hash;
	uint64_t unkicked;		/* bytes written since writeback began */
	struct kiln_progress *progress;	/* out_bytes: furthest byte written */
	/* a block device: */
	bool dev;
	bool dev_touched;		/* a byte of the device was written */
	bool dev_sized;			/* gaps zeroed up to the final size */
	bool dev_said;			/* "content undefined" was logged */
	uint64_t dev_size;		/* bytes, BLKGETSIZE64 */
	uint8_t *held;			/* bytes [0, held_len) not yet written */
	uint64_t held_len;
	struct out_range *ranges;	/* what was written past held_len */
	size_t nr_ranges, cap_ranges;
};

/*
 * Start writeback every WRITEBACK_KICK bytes, so that the disk works while
 * the build goes on and the fsync before the rename has little left to
 * wait for (figures: bench/README.md, "Measurements behind the defaults").
 */
#define WRITEBACK_KICK	(8u << 20)

/*
 * A device's first DEV_HOLD bytes stay in memory until the image grows
 * past them: a build that fails before (a device too small for it among
 * them) leaves the device as it was. Past that point, a failed build
 * leaves the device's content undefined, and says so; its first blocks,
 * the old superblock included, are zeros by then.
 */
#define DEV_HOLD	(16ull << 20)

/* Symlinks followed before giving up, as the kernel does (ELOOP). */
#define MAX_SYMLINKS	40

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

/*
 * Follow @path while it is a symlink. *@res: the first path that is not
 * one (malloc'd); *@st its lstat(), or st_mode 0 when nothing is there: a
 * dangling link's target is created through it, as cp(1) writes through
 * a link, so that "image.img -> /images/current.img" fills in the target
 * and the link keeps pointing at it.
 */
static int follow_links(const struct kiln_logger *lg, const char *path,
			char **res, struct stat *st)
{
	char *cur = strdup(path);

	*res = NULL;
	for (unsigned int hops = 0; cur; hops++) {
		char target[PATH_MAX], *next;
		const char *slash;
		ssize_t n;

		if (lstat(cur, st) < 0) {
			int err = errno;

			if (err != ENOENT) {
				kiln_log(lg, KILN_LOG_ERROR, "%s: %s", cur,
					 strerror(err));
				free(cur);
				return -err;
			}
			st->st_mode = 0;
			*res = cur;
			return 0;
		}
		if (!S_ISLNK(st->st_mode)) {
			*res = cur;
			return 0;
		}
		n = hops < MAX_SYMLINKS ?
		    readlink(cur, target, sizeof(target) - 1) : -1;
		if (n < 0) {
			int err = hops < MAX_SYMLINKS ? errno : ELOOP;

			kiln_log(lg, KILN_LOG_ERROR, "%s: following the symlink: "
				 "%s", path, strerror(err));
			free(cur);
			return -err;
		}
		target[n] = '\0';
		slash = strrchr(cur, '/');
		if (target[0] == '/' || !slash) {
			next = strdup(target);
		} else {
			size_t dl = (size_t)(slash - cur) + 1;

			next = malloc(dl + (size_t)n + 1);
			if (next) {
				memcpy(next, cur, dl);
				memcpy(next + dl, target, (size_t)n + 1);
			}
		}
		free(cur);
		cur = next;
	}
	return -ENOMEM;
}

static const char *kind_name(mode_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFDIR:	return "a directory";
	case S_IFCHR:	return "a character device";
	case S_IFIFO:	return "a FIFO";
	case S_IFSOCK:	return "a socket";
	default:	return "not a regular file";
	}
}

/* Whether "maj:min" @dev is a mounted filesystem's source. */
static bool dev_mounted(dev_t dev)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[4096];
	bool hit = false;

	if (!f)
		return false;
	while (!hit && fgets(line, sizeof(line), f)) {
		unsigned int maj, min;

		/* "36 35 98:0 /mnt1 /mnt2 rw ...": the third field */
		if (sscanf(line, "%*u %*u %u:%u", &maj, &min) == 2)
			hit = maj == major(dev) && min == minor(dev);
	}
	fclose(f);
	return hit;
}

/* Whether /sys/dev/block/maj:min/holders/ names another device. */
static bool dev_held(dev_t dev)
{
	char p[96];
	DIR *d;
	struct dirent *de;
	bool held = false;

	snprintf(p, sizeof(p), "/sys/dev/block/%u:%u/holders", major(dev),
		 minor(dev));
	d = opendir(p);
	if (!d)
		return false;
	while (!held && (de = readdir(d)))
		held = de->d_name[0] != '.';
	closedir(d);
	return held;
}

/*
 * Refuse a device in use: mounted or held (device mapper, md, a loop
 * device on top), it or one of its partitions. The exclusive open that
 * follows catches the rest and any race.
 */
static int dev_check_free(struct kiln_out *out, dev_t dev)
{
	char p[96];
	DIR *d;
	struct dirent *de;
	int err = 0;

	if (dev_mounted(dev))
		return out_fail(out, EBUSY, "the device is mounted");
	if (dev_held(dev))
		return out_fail(out, EBUSY, "the device is held by another "
				"device (device mapper, md or loop)");
	/* partitions are the subdirectories that have a "partition" file */
	snprintf(p, sizeof(p), "/sys/dev/block/%u:%u", major(dev), minor(dev));
	d = opendir(p);
	while (d && !err && (de = readdir(d))) {
		char q[512], num[32];
		unsigned int maj, min;
		FILE *f;

		if (de->d_name[0] == '.')
			continue;
		snprintf(q, sizeof(q), "%s/%s/partition", p, de->d_name);
		if (access(q, F_OK) < 0)
			continue;
		snprintf(q, sizeof(q), "%s/%s/dev", p, de->d_name);
		f = fopen(q, "re");
		if (!f)
			continue;
		if (fgets(num, sizeof(num), f) &&
		    sscanf(num, "%u:%u", &maj, &min) == 2 &&
		    (dev_mounted(makedev(maj, min)) ||
		     dev_held(makedev(maj, min)))) {
			snprintf(q, sizeof(q), "partition %s is in use",
				 de->d_name);
			err = out_fail(out, EBUSY, q);
		}
		fclose(f);
	}
	if (d)
		closedir(d);
	return err;
}

static int open_device(struct kiln_out *out, dev_t rdev)
{
	int err = dev_check_free(out, rdev);

	out->dev = true;
	if (err)
		return err;
	/* O_EXCL: the kernel refuses a device mounted or claimed meanwhile */
	out->fd = open(out->path, O_RDWR | O_EXCL | O_CLOEXEC);
	if (out->fd < 0)
		return out_fail(out, errno, errno == EBUSY ?
				"the device is in use" :
				"cannot open the device");
	if (ioctl(out->fd, BLKGETSIZE64, &out->dev_size) < 0)
		return out_fail(out, errno, "cannot read the device's size");
	out->held_len = KILN_MIN(DEV_HOLD, out->dev_size);
	out->held = calloc(1, out->held_len ? (size_t)out->held_len : 1);
	return out->held ? 0 : -ENOMEM;
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

static int open_tmpfile(struct kiln_out *out)
{
	out->dirfd = open(out->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (out->dirfd < 0)
		return out_fail(out, errno, "cannot open its directory");
	/* O_TMPFILE: an interrupted build leaves nothing behind */
	out->fd = openat(out->dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0666);
	if (out->fd >= 0)
		return 0;
	if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
		return out_fail(out, errno, "cannot create image");
	return open_named_tmp(out);
}

int kiln_out_open(struct kiln_out **outp, const char *path,
		  unsigned int blkszbits, kiln_blk_t first_blk,
		  const struct kiln_logger *lg)
{
	struct kiln_out *out = calloc(1, sizeof(*out));
	struct stat st;
	char *real = NULL;
	int err;

	*outp = NULL;
	if (!out)
		return -ENOMEM;
	out->lg = lg;
	out->fd = -1;
	out->dirfd = -1;
	out->blkszbits = blkszbits;
	out->next_blk = first_blk;
	err = follow_links(lg, path, &real, &st);
	if (!err)
		err = split_path(out, real);
	free(real);
	if (err)
		goto fail;
	if (S_ISBLK(st.st_mode)) {
		err = open_device(out, st.st_rdev);
	} else if (!st.st_mode || S_ISREG(st.st_mode)) {
		err = open_tmpfile(out);
	} else {
		char what[96];

		snprintf(what, sizeof(what), "%s, not a regular file or block "
			 "device: refusing to write the image there",
			 kind_name(st.st_mode));
		if (strcmp(path, out->path))
			kiln_log(lg, KILN_LOG_ERROR, "%s: its symlink leads to "
				 "%s, %s", path, out->path, what);
		else
			kiln_log(lg, KILN_LOG_ERROR, "%s: %s", out->path, what);
		err = S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
	}
	if (err)
		goto fail;
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

void kiln_out_set_progress(struct kiln_out *out, struct kiln_progress *p)
{
	out->progress = p;
}

unsigned int kiln_out_blkszbits(const struct kiln_out *out)
{
	return out->blkszbits;
}

kiln_blk_t kiln_out_next_blk(const struct kiln_out *out)
{
	return out->next_blk;
}

/* The image would pass the device's end: refuse before writing it. */
static int dev_too_small(struct kiln_out *out, uint64_t end)
{
	out->dev_said = out->dev_touched;
	kiln_log(out->lg, KILN_LOG_ERROR, "%s: the image does not fit on the "
		 "device (%llu bytes, the image needs at least %llu)%s",
		 out->path, (unsigned long long)out->dev_size,
		 (unsigned long long)end, out->dev_touched ?
		 "; the device's content is now undefined" :
		 "; the device was not written");
	return -ENOSPC;
}

int kiln_out_reserve(struct kiln_out *out, uint64_t nblks, kiln_blk_t *blk)
{
	kiln_blk_t end;

	/* without 48-bit addressing, every block number fits in 32 bits */
	if (kiln_add_overflow(out->next_blk, nblks, &end) || end > UINT32_MAX)
		return out_fail(out, EFBIG,
				"image would exceed 2^32 blocks");
	if (out->dev && end > out->dev_size >> out->blkszbits)
		return dev_too_small(out, end << out->blkszbits);
	*blk = out->next_blk;
	out->next_blk = end;
	return 0;
}

/* Note [@off, @off + @len) of the device as written (merging in order). */
static int dev_note(struct kiln_out *out, uint64_t off, uint64_t len)
{
	struct out_range *last = out->nr_ranges ?
				 &out->ranges[out->nr_ranges - 1] : NULL;

	if (last && off <= last->end && off + len >= last->start) {
		last->start = KILN_MIN(last->start, off);
		last->end = KILN_MAX(last->end, off + len);
		return 0;
	}
	if (KILN_GROW(out->ranges, out->cap_ranges, out->nr_ranges + 1))
		return -ENOMEM;
	out->ranges[out->nr_ranges++] = (struct out_range){ off, off + len };
	return 0;
}

/*
 * The held first bytes go to the device, @len of them: all when the image
 * has outgrown them, the image's size when it ends within them.
 */
static int dev_release_held(struct kiln_out *out, uint64_t len)
{
	int err;

	if (!out->held)
		return 0;
	out->dev_touched = true;
	err = kiln_pwrite_full(out->fd, out->held, (size_t)len, 0);
	if (err)
		return out_fail(out, -err, "write failed");
	free(out->held);
	out->held = NULL;
	return 0;
}

static int dev_pwrite(struct kiln_out *out, const void *buf, size_t len,
		      uint64_t off)
{
	int err;

	if (!kiln_range_ok(off, len, out->dev_size))
		return dev_too_small(out, off + len);
	if (out->held && off + len <= out->held_len) {
		memcpy(out->held + off, buf, len);
		return 0;
	}
	err = dev_release_held(out, out->held_len);
	if (!err && off + len > out->held_len)
		err = dev_note(out, off, len);
	if (err)
		return err;
	out->dev_touched = true;
	err = kiln_pwrite_full(out->fd, buf, len, off);
	return err ? out_fail(out, -err, "write failed") : 0;
}

int kiln_out_pwrite(struct kiln_out *out, const void *buf, size_t len,
		    uint64_t off)
{
	uint64_t tag[2] = { off, len };

	int err;

	XXH3_128bits_update(out->hash, tag, sizeof(tag));
	XXH3_128bits_update(out->hash, buf, len);
	if (out->dev) {
		err = dev_pwrite(out, buf, len, off);
		if (err)
			return err;
	} else {
		err = kiln_pwrite_full(out->fd, buf, len, off);
		if (err)
			return out_fail(out, -err, "write failed");
	}
	if (out->progress)
		kiln_progress_out_reach(out->progress, off + len);
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
	uint8_t *p = buf;
	ssize_t n;

	if (out->held && off < out->held_len) {
		size_t k = (size_t)KILN_MIN((uint64_t)len, out->held_len - off);

		memcpy(p, out->held + off, k);
		p += k;
		off += k;
		len -= k;
		if (!len)
			return 0;
	}
	n = kiln_pread_full(out->fd, p, len, off);
	if (n < 0 || (size_t)n < len)
		return out_fail(out, n < 0 ? (int)-n : EIO, "read back failed");
	return 0;
}

static int cmp_range(const void *a, const void *b)
{
	const struct out_range *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/*
 * Zeros into every byte of the device's [0, @size) that the build did
 * not write: blocks a file leaves partly filled read as zeros, as in a
 * new file, not as what the device held before.
 */
static int dev_fill_gaps(struct kiln_out *out, uint64_t size)
{
	static const uint8_t zeros[1u << 16];
	uint64_t pos;
	int err;

	if (size > out->dev_size)
		return dev_too_small(out, size);
	err = dev_release_held(out, KILN_MIN(size, out->held_len));
	if (err)
		return err;
	if (out->nr_ranges)
		qsort(out->ranges, out->nr_ranges, sizeof(*out->ranges),
		      cmp_range);
	pos = out->held_len;
	for (size_t i = 0; i <= out->nr_ranges && pos < size; i++) {
		uint64_t gap_end = i < out->nr_ranges ?
				   KILN_MIN(out->ranges[i].start, size) : size;

		while (pos < gap_end) {
			size_t n = (size_t)KILN_MIN(gap_end - pos,
						    (uint64_t)sizeof(zeros));

			err = kiln_pwrite_full(out->fd, zeros, n, pos);
			if (err)
				return out_fail(out, -err, "write failed");
			pos += n;
		}
		if (i < out->nr_ranges)
			pos = KILN_MAX(pos, out->ranges[i].end);
	}
	return 0;
}

int kiln_out_set_size(struct kiln_out *out, uint64_t size)
{
	int err;

	if (!out->dev)
		return ftruncate(out->fd, (off_t)size) < 0 ?
		       out_fail(out, errno, "cannot set image size") : 0;
	if (out->dev_sized)
		return 0;
	err = dev_fill_gaps(out, size);
	if (!err)
		out->dev_sized = true;
	return err;
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
	free(out->held);
	free(out->ranges);
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
	int err = kiln_out_set_size(out, size);

	if (!err && fsync(out->fd) < 0)
		err = out_fail(out, errno, out->dev ? "cannot sync the device" :
				"cannot sync image");
	if (out->dev) {
		/* in place: nothing to rename */
		if (err) {
			kiln_out_abort(out);
			return err;
		}
		out_free(out);
		return 0;
	}
	if (!err && !out->tmp_name)
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
	if (out->dev && out->dev_touched && !out->dev_said)
		kiln_log(out->lg, KILN_LOG_ERROR, "%s: the build failed after "
			 "writing to the device: its content is now undefined",
			 out->path);
	out_free(out);
}
