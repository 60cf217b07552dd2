/* SPDX-License-Identifier: MIT */
/*
 * Extracting an image (or a subtree of it) into a directory of the host:
 * content, holes, modes, owners, times, xattrs, hardlinks, symlinks and
 * special files. Nothing is ever written outside the destination, whatever
 * names or symlinks the image holds.
 */
#ifndef KILN_EXTRACT_H
#define KILN_EXTRACT_H

#include <kiln/image.h>

#ifdef __cplusplus
extern "C" {
#endif

enum kiln_extract_flags {
	KILN_EXTRACT_FORCE	   = 1u << 0, /* replace existing non-dirs */
	KILN_EXTRACT_SAME_OWNER	   = 1u << 1, /* chown even when not root */
	KILN_EXTRACT_NO_SAME_OWNER = 1u << 2, /* never chown */
	KILN_EXTRACT_NO_XATTRS	   = 1u << 3, /* do not restore xattrs */
	KILN_EXTRACT_FAIL_FAST	   = 1u << 4, /* stop at the first error */
	KILN_EXTRACT_NO_TIMES	   = 1u << 5, /* leave mtimes at "now" */
};

/*
 * Called for each error (@level KILN_LOG_ERROR) or warning
 * (KILN_LOG_WARN): @path is the path inside the image, @err a negative
 * errno or 0, @what the action that failed. Valid during the call only.
 */
typedef void (*kiln_extract_msg_fn)(void *ctx, enum kiln_log_level level,
				    const char *path, int err,
				    const char *what);

struct kiln_extract_opts {
	size_t struct_size;		/* sizeof(struct kiln_extract_opts) */
	unsigned int flags;		/* enum kiln_extract_flags */
	kiln_extract_msg_fn msg;	/* NULL: errors are only counted */
	void *ctx;
	unsigned int max_depth;		/* directory levels; 0 = 4096 */
};

struct kiln_extract_stats {
	uint64_t directories;
	uint64_t regular_files;
	uint64_t symlinks;
	uint64_t special_files;		/* devices, fifos, sockets */
	uint64_t hardlinks;		/* names made with link(2) */
	uint64_t bytes;			/* file data bytes written */
	uint64_t errors;
	uint64_t warnings;
};

/*
 * Extract @src_path of @img (resolved without following a final symlink;
 * NULL or "/" is the whole image) below @dest_dir. A directory's contents
 * go straight into @dest_dir (which becomes that directory: it gets its
 * mode, owner and times when kiln_extract() created it); anything else
 * becomes @dest_dir/<its name>. @dest_dir may exist (it must be a
 * directory); existing entries inside it are errors unless
 * KILN_EXTRACT_FORCE, existing directories are merged into.
 *
 * Ownership is restored when running as root (or with
 * KILN_EXTRACT_SAME_OWNER); trusted.* and security.* xattrs and device
 * nodes need root and give warnings/errors otherwise. Times are set with
 * nanoseconds, directories' after their contents.
 *
 * Nothing is written outside @dest_dir, whatever it holds or another
 * process does to it meanwhile: below it no symlink is followed (a
 * symlink where a directory or file goes is an error, replaced only with
 * KILN_EXTRACT_FORCE). A regular file whose data could not all be written
 * (a full disk) is removed again.
 *
 * Returns 0 when everything was extracted, otherwise the first negative
 * errno met (after going on with the other files unless
 * KILN_EXTRACT_FAIL_FAST). @opts and @stats may be NULL. Modes are set
 * explicitly (the umask does not apply). Two extractions into the same
 * @dest_dir at once are not supported.
 */
KILN_API int kiln_extract(struct kiln_image *img, const char *src_path,
			  const char *dest_dir,
			  const struct kiln_extract_opts *opts,
			  struct kiln_extract_stats *stats);

#ifdef __cplusplus
}
#endif
#endif
